package sessionstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// Interrupted tool calls
//
// A harness appends a tool call, runs the tool, then appends its result.
// A crash between the two leaves a durable KindToolCall event with no
// KindToolResult: the store guarantees the call was recorded, and nothing
// about what the tool did. Model APIs expect every tool call in the history
// to be answered, and the harness must not quietly run the tool again, since
// it may already have had its side effects. RepairInterruptedToolCalls
// balances the history by answering each such call with a synthetic result
// whose Outcome is OutcomeUnknown and whose Output tells the model so.
//
// (An assistant request whose tool call never became durable needs no
// repair here: in this store the KindToolCall event is the request, so an
// undurable one is simply absent after a crash and the path ends before
// it.)

// interruptedOutput is the Output of a synthetic result written by
// RepairInterruptedToolCalls: what the model reads in place of the lost
// result.
const interruptedOutput = "Tool call interrupted: the call was recorded but its result was lost in a crash, " +
	"so it is unknown whether the tool ran and what it changed. " +
	"Retry it only if it is read-only or idempotent; otherwise verify its possible side effects, " +
	"or ask the user, before doing anything that depends on it."

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
// reports, in order, with a synthetic result appended at HEAD:
//
//	ToolResultEvent(ToolResult{CallID: <the call's id>, Output: <explanation>,
//		IsError: true, Outcome: OutcomeUnknown})
//
// and returns the events it appended (an empty slice when there was
// nothing to repair). The marker exists because the call was durable and
// its result was not: the tool may have run, partly or fully, or not at
// all. Output says so to the model (retry only read-only or idempotent
// work; verify possible side effects or ask the user), and Outcome lets a
// harness or a user interface recognize the result as synthetic without
// parsing text. After the repair the history a model sees is balanced:
// every call on the active path has a result.
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
	_, calls, err := s.interruptedToolCalls(ctx, session)
	if err != nil {
		return nil, err
	}
	out := []Event{}
	for _, c := range calls {
		ev, err := s.Append(ctx, session, ToolResultEvent(ToolResult{
			CallID:  c.CallID,
			Output:  interruptedOutput,
			IsError: true,
			Outcome: OutcomeUnknown,
		}))
		if err != nil {
			return out, fmt.Errorf("sessionstore: repair interrupted tool call %q: %w", c.CallID, err)
		}
		out = append(out, ev)
	}
	return out, nil
}
