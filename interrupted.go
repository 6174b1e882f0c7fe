package sessionstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// Interrupted tool calls
//
// A harness appends an assistant message that announces the tool calls
// the model asked for (Message.ToolCalls), appends a KindToolCall event
// for each call before it runs the tool (the append returns once the event
// is durable), then appends the call's KindToolResult. A crash can cut
// this short in two ways, and each has its closer:
//
//   - A call whose KindToolCall event is durable but whose result is not:
//     the store guarantees the call was recorded, and nothing about what
//     the tool did. It is answered with OutcomeUnknown: the tool may have
//     run, partly or fully, so the model must not quietly repeat it.
//   - A call the durable assistant message announced whose KindToolCall
//     event is not durable (the message, or a prefix of a batch of the
//     message and its calls, reached the disk, the rest did not): the tool
//     was never started, since the harness runs it only after its event is
//     durable. It is answered with OutcomeNotStarted: nothing ran, and the
//     call may be made again.
//
// Model APIs expect every tool call in the history to be answered.
// RepairInterruptedToolCalls balances the active path with a synthetic
// result for each open call, whose Outcome says which case it is and whose
// Output tells the model so. A KindToolCall event no message announces
// (a harness that does not fill Message.ToolCalls) is the request itself:
// an undurable one is simply absent after a crash and needs no closer.

// interruptedOutput is the Output of a synthetic result for a durable
// call whose result was lost: what the model reads in place of it.
const interruptedOutput = "Tool call interrupted: the call was recorded but its result was lost in a crash, " +
	"so it is unknown whether the tool ran and what it changed. " +
	"Retry it only if it is read-only or idempotent; otherwise verify its possible side effects, " +
	"or ask the user, before doing anything that depends on it."

// notStartedOutput is the Output of a synthetic result for an announced
// call that never started.
const notStartedOutput = "Tool call not started: the call was requested, but the session was interrupted before it was recorded as started, " +
	"so the tool did not run and changed nothing. Call it again if it is still needed."

// InterruptedToolCalls returns the tool calls on the session's active path
// (as Load returns it) that have no result: the KindToolCall events with no
// KindToolResult of the same CallID after them on the path, oldest first.
// Results on other branches do not count, and calls on other branches are
// not reported. A call is matched by CallID only, so a harness that reuses
// a CallID on one path needs a result after the last call that uses it. It
// writes nothing. A session without such calls gives an empty slice.
//
// Errors: as Load; an error naming the event when a tool call or tool
// result record does not decode as a ToolCall or ToolResult.
func (s *Store) InterruptedToolCalls(ctx context.Context, session uuid.UUID) ([]Event, error) {
	evs, _, err := s.interruptedToolCalls(ctx, session)
	return evs, err
}

// interruptedToolCalls returns the unanswered calls of the active path and
// their decoded records.
func (s *Store) interruptedToolCalls(ctx context.Context, session uuid.UUID) ([]Event, []ToolCall, error) {
	path, err := s.Load(ctx, session)
	if err != nil {
		return nil, nil, err
	}
	// Walk back from HEAD: a call is answered when a result with its
	// CallID was seen later on the path.
	answered := map[string]bool{}
	evs, calls := []Event{}, []ToolCall{}
	for i := len(path) - 1; i >= 0; i-- {
		switch ev := path[i]; ev.Kind {
		case KindToolResult:
			r, err := ev.ToolResult()
			if err != nil {
				return nil, nil, err
			}
			answered[r.CallID] = true
		case KindToolCall:
			c, err := ev.ToolCall()
			if err != nil {
				return nil, nil, err
			}
			if !answered[c.CallID] {
				evs, calls = append(evs, ev), append(calls, c)
			}
		}
	}
	slices.Reverse(evs)
	slices.Reverse(calls)
	return evs, calls, nil
}

// RepairInterruptedToolCalls answers every tool call InterruptedToolCalls
// or NotStartedToolCalls reports with a synthetic result appended at HEAD:
//
//	ToolResultEvent(ToolResult{CallID: <the call's id>, Output: <explanation>,
//		IsError: true, Outcome: OutcomeUnknown or OutcomeNotStarted})
//
// and returns the events it appended (an empty slice when there was
// nothing to repair). The calls are answered in path order: those an
// assistant message announced in the message's order, then the others in
// the order of their events. OutcomeUnknown answers a call whose
// KindToolCall event is durable and whose result is not: the tool may
// have run, partly or fully, or not at all. OutcomeNotStarted answers a
// call announced in Message.ToolCalls whose KindToolCall event is not on
// the path: it never started. Output says so to the model (for an unknown
// outcome: retry only read-only or idempotent work, verify possible side
// effects or ask the user; for a call not started: call it again if still
// needed), and Outcome lets a harness or a user interface recognize the
// result as synthetic without parsing text. After the repair the history a
// model sees is balanced: every call on the active path, announced or
// recorded, has a result.
//
// Durability: each synthetic result is written with Append, so it is
// durable when the call returns, exactly as for Append; the results are
// children of HEAD, each becoming the new HEAD. The repair is idempotent:
// a repaired call has a result, so a second call appends nothing. If an
// Append fails, RepairInterruptedToolCalls returns the events appended so
// far with the error; they are durable, and calling it again (after
// reopening the store if the session reports ErrSessionFailed) continues
// with the calls still unanswered.
//
// Call it right after opening a session (after a crash, or at every open),
// before Branch and before other goroutines append to the session: it is
// not atomic with respect to concurrent writers of the same session. A
// pending Branch selection would make the first synthetic result start a
// new branch off the selected event, detached from the calls it answers,
// so RepairInterruptedToolCalls refuses to run while one is pending (see
// NextParent) and writes nothing.
//
// Results are appended at HEAD, not next to their calls: if the path went
// on after an unanswered call (it normally ends at the call after a
// crash), the results follow those later events.
//
// Errors: ErrInvalidEvent, with nothing written, when a Branch selection is
// pending; as InterruptedToolCalls; as Append, with the events appended
// before the failure.
func (s *Store) RepairInterruptedToolCalls(ctx context.Context, session uuid.UUID) ([]Event, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	parent, branching, err := s.NextParent(ctx, session)
	if err != nil {
		return nil, err
	}
	if branching {
		return nil, invalidEventf("session %s has a pending Branch selection (%s): repair interrupted tool calls right after opening the session, before Branch", session, parent)
	}
	open, err := s.openToolCalls(ctx, session)
	if err != nil {
		return nil, err
	}
	out := []Event{}
	for _, c := range open {
		r := ToolResult{CallID: c.call.CallID, Output: interruptedOutput, IsError: true, Outcome: OutcomeUnknown}
		if !c.started {
			r.Output, r.Outcome = notStartedOutput, OutcomeNotStarted
		}
		ev, err := s.Append(ctx, session, ToolResultEvent(r))
		if err != nil {
			return out, fmt.Errorf("sessionstore: repair interrupted tool call %q: %w", c.call.CallID, err)
		}
		out = append(out, ev)
	}
	return out, nil
}

// NotStartedToolCalls returns the tool calls that assistant messages on
// the session's active path (as Load returns it) announced
// (Message.ToolCalls) and that have neither a KindToolCall event nor a
// KindToolResult of the same CallID after their message on the path:
// calls a crash cut off before they started. They are in path order, each
// message's in its order. It writes nothing; RepairInterruptedToolCalls
// answers them with OutcomeNotStarted. A session without such calls
// gives an empty slice.
//
// Errors: as Load; an error naming the event when a message, tool call or
// tool result record does not decode.
func (s *Store) NotStartedToolCalls(ctx context.Context, session uuid.UUID) ([]ToolCall, error) {
	open, err := s.openToolCalls(ctx, session)
	if err != nil {
		return nil, err
	}
	out := []ToolCall{}
	for _, c := range open {
		if !c.started {
			out = append(out, c.call)
		}
	}
	return out, nil
}

// openCall is a tool call of the active path that has no result: started
// when its KindToolCall event is on the path, else only announced.
type openCall struct {
	call    ToolCall
	started bool
}

// openToolCalls returns the calls of the active path without a result,
// in the order they are answered: each announcing message's calls in its
// order, at the message, then the calls no message before them announced,
// at their events.
func (s *Store) openToolCalls(ctx context.Context, session uuid.UUID) ([]openCall, error) {
	path, err := s.Load(ctx, session)
	if err != nil {
		return nil, err
	}
	// Walk back from HEAD: what is answered, and what is called, later on
	// the path than each event.
	type atEvent struct {
		announced []openCall // of an assistant message: its unanswered calls
		open      *ToolCall  // of a tool call event without a result
	}
	at := make([]atEvent, len(path))
	answered, called := map[string]bool{}, map[string]bool{}
	for i := len(path) - 1; i >= 0; i-- {
		switch ev := path[i]; {
		case ev.Kind == KindToolResult:
			r, err := ev.ToolResult()
			if err != nil {
				return nil, err
			}
			answered[r.CallID] = true
		case ev.Kind == KindToolCall:
			c, err := ev.ToolCall()
			if err != nil {
				return nil, err
			}
			if !answered[c.CallID] {
				at[i].open = &c
			}
			called[c.CallID] = true
		case ev.Kind == KindMessage && ev.Role == RoleAssistant:
			var m struct {
				ToolCalls []ToolCall `json:"tool_calls"`
			}
			if err := ev.Decode(&m); err != nil {
				return nil, err
			}
			for _, c := range m.ToolCalls {
				if !answered[c.CallID] {
					at[i].announced = append(at[i].announced, openCall{call: c, started: called[c.CallID]})
				}
			}
		}
	}
	out := []openCall{}
	covered := map[string]bool{} // announced calls, answered at their message
	for i := range at {
		for _, c := range at[i].announced {
			covered[c.call.CallID] = true
			out = append(out, c)
		}
		if c := at[i].open; c != nil && !covered[c.CallID] {
			out = append(out, openCall{call: *c, started: true})
		}
	}
	return out, nil
}
