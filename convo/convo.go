// Package convo turns a session's context into the messages a model
// request carries, and a model's reply into the events to append. It is
// the provider-neutral half of an SDK adapter: an adapter maps a Context's
// Messages to its SDK's request types and its SDK's response to a Reply,
// and leaves the rules below to this package, so every adapter pairs tool
// calls with results and shows summaries the same way.
//
// # From events to messages
//
// Build reads the events of [sessionstore.Store.Load] (oldest first,
// records resolved) and returns one Message per model-visible turn:
//
//   - A user message is a RoleUser Message; an assistant message a
//     RoleAssistant Message with its text, reasoning, provider state and
//     the tool calls it announced (sessionstore.Message.ToolCalls, each
//     with its own provider state).
//   - An assistant message that directly follows another (no result or
//     other message between) joins it: one turn stored as several events.
//     Texts and reasonings are joined by a blank line, the provider states
//     follow one another in the order of the events.
//   - A KindToolCall event joins the assistant Message before it when that
//     message already announced the call (the usual case: a harness
//     records the reply with its calls, then one event per call, before or
//     after the results of other calls; the announced arguments are kept,
//     and the provider states are merged, see below) and the call has no
//     result yet, or when the message is still open (no result or other
//     message came after it); otherwise (a call whose id an answered call
//     of the turn used, say) it starts an assistant Message of its own.
//   - A KindToolResult event becomes a RoleTool Message right after the
//     calls it answers. Model APIs refuse a result without its call and a
//     call without its result, so Build keeps them paired: a result whose
//     call is not open in the context is left out (counted in
//     Context.Dropped), and a call still without a result when the
//     conversation moves on (a user message or another assistant reply
//     follows) gets a synthetic error result saying no result was
//     recorded (counted in Context.Synthesized). Calls of the last
//     assistant turn still without a result are Context.Pending: the
//     harness runs them and appends their results before its next
//     request.
//   - A compaction is a RoleUser Message holding its summary (rendered by
//     RenderSummary, or by Options.Summary), which is how the model sees
//     the history it replaces; the events Load keeps after it follow as
//     usual. A branch summary is a RoleUser Message too, introduced as the
//     summary of a path the user left.
//   - Custom events are left out unless Options.Custom maps them.
//
// # Provider state
//
// What a provider returned to be sent back verbatim (see
// [sessionstore.ProviderState]) travels with the message it came with:
// Message.ProviderState holds the message-level state of an assistant
// Message (of all its events, in order), and each of its ToolCalls holds
// its own. When a KindToolCall event joins a call the message announced,
// the call keeps the announced state and gains, after it, each entry of
// the event's state that the announced call does not already hold (equal
// Provider, Type and Data): [Reply.Events] writes the same state on both,
// which is then kept once, and a writer that put it on one of the two
// loses nothing. The state is never part of Text or Reasoning, nor of a
// summary's text. Build passes every provider's state on; an adapter
// sends only its own provider's.
//
// A compaction keeps the events after its first kept one as they were
// written, so a turn Load keeps after a compaction comes with its state.
//
// Build reads no store: it needs the records, so the events must be
// resolved (Load resolves them; an event from Store.Event whose record is
// a blob needs Store.Resolve first, else ErrUnresolved).
//
// # From a reply to events
//
// Reply.Events returns the events a model's reply becomes: an assistant
// message (text, reasoning, model, usage, provider state and the calls it
// announced, each with its state), then one KindToolCall event per call
// (with its state), in order: append them with one AppendBatch, run the
// tools, and append each result with sessionstore.ToolResultEvent.
//
// # Call ids in a request
//
// A call id may repeat across the turns of a session: providers that give
// short ids (or none, and an adapter derives one from the call) use them
// again. Build pairs each result with the turn it follows, but some APIs
// refuse a request that holds one call id twice: [UniqueCallIDs] gives
// the messages of a request ids unique in it, the same for the same
// events in every request.
package convo

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
)

// ErrUnresolved is returned by Build for an event whose record is a blob
// not read yet (Record nil, Digest set): resolve it with Store.Resolve.
var ErrUnresolved = errors.New("convo: event record not resolved")

// ErrCustomRole is returned by Build when Options.Custom maps an event to
// a message that is neither a user's nor an assistant's.
var ErrCustomRole = errors.New("convo: a custom event mapped to a message of another role")

// MissingResult is the Output of the synthetic result Build pairs with a
// call that has none.
const MissingResult = "no result was recorded for this tool call"

// Message is one turn of a model request.
type Message struct {
	// Role is RoleUser, RoleAssistant or RoleTool.
	Role sessionstore.Role
	// Text is the message's text: what the user or the model said, or a
	// summary (Summary is then set).
	Text string
	// Reasoning is an assistant's reasoning text, for the providers that
	// take it back.
	Reasoning string
	// Model is the model that wrote an assistant message.
	Model string
	// ToolCalls are the calls of an assistant message, in order, each with
	// its provider state.
	ToolCalls []sessionstore.ToolCall
	// ProviderState is the message-level provider state of an assistant
	// message: that of each of its events, in order (see the package doc).
	ProviderState []sessionstore.ProviderState
	// Result is a RoleTool message's result.
	Result *sessionstore.ToolResult
	// Summary is set on a RoleUser message that stands for a compaction or
	// a branch summary: KindCompaction or KindBranchSummary.
	Summary sessionstore.Kind
	// Events are the ids of the events the message was built from (none
	// for a synthetic result).
	Events []uuid.UUID
}

// Context is the result of Build.
type Context struct {
	Messages []Message
	// Pending are the calls of the last assistant message that have no
	// result yet.
	Pending []sessionstore.ToolCall
	// Dropped counts tool results left out because their call is not
	// open in the context; Synthesized counts the calls given a synthetic
	// result (MissingResult).
	Dropped, Synthesized int
}

// Options adjust Build.
type Options struct {
	// Summary renders a compaction's or branch summary's summary as the
	// text of its message; nil means RenderSummary, with a first line
	// that says which it is.
	Summary func(kind sessionstore.Kind, s sessionstore.Summary) string
	// Custom maps a KindCustom event to a message; ok false leaves it out.
	// The message must be a RoleUser or RoleAssistant one (else
	// ErrCustomRole); an assistant message's ToolCalls are paired with the
	// results that follow, as a recorded reply's are.
	// Nil leaves every custom event out.
	Custom func(ev sessionstore.Event) (m Message, ok bool)
}

// Build returns the request messages of events, a context as Load returns
// it (see the package doc for the rules).
//
// Errors: ErrUnresolved; a decode error (wrapping the event's id) for a
// record that is not its kind's shape.
func Build(events []sessionstore.Event, opts *Options) (Context, error) {
	if opts == nil {
		opts = &Options{}
	}
	b := builder{opts: opts, turn: -1, open: map[string]bool{}}
	for _, ev := range events {
		if ev.Record == nil && ev.Digest != "" {
			return Context{}, fmt.Errorf("%w: event %s (%s)", ErrUnresolved, ev.ID, ev.Digest)
		}
		if err := b.add(ev); err != nil {
			return Context{}, err
		}
	}
	b.ctx.Pending = b.pendingCalls()
	return b.ctx, nil
}

type builder struct {
	opts *Options
	ctx  Context
	// turn is the index in ctx.Messages of the assistant message whose
	// calls are open, or -1; open holds those calls' ids, order their
	// order.
	turn  int
	open  map[string]bool
	order []sessionstore.ToolCall
	// answering is true once a result for the turn was added: a call
	// event after that starts a new assistant message.
	answering bool
}

func (b *builder) add(ev sessionstore.Event) error {
	switch ev.Kind {
	case sessionstore.KindMessage:
		m, err := ev.Message()
		if err != nil {
			return err
		}
		if ev.Role == sessionstore.RoleAssistant && b.turn == len(b.ctx.Messages)-1 && b.turn >= 0 && !b.answering {
			b.join(ev.ID, m)
			return nil
		}
		b.closeTurn()
		msg := Message{Role: ev.Role, Text: m.Content, Events: []uuid.UUID{ev.ID}}
		if ev.Role == sessionstore.RoleAssistant {
			msg.Reasoning, msg.Model = m.Reasoning, m.Model
			msg.ProviderState = m.ProviderState
			msg.ToolCalls = append([]sessionstore.ToolCall(nil), m.ToolCalls...)
			b.ctx.Messages = append(b.ctx.Messages, msg)
			b.openTurn(len(b.ctx.Messages)-1, m.ToolCalls)
			return nil
		}
		if msg.Role != sessionstore.RoleUser {
			msg.Role = sessionstore.RoleUser
		}
		b.ctx.Messages = append(b.ctx.Messages, msg)
	case sessionstore.KindToolCall:
		c, err := ev.ToolCall()
		if err != nil {
			return err
		}
		if b.turn >= 0 {
			m := &b.ctx.Messages[b.turn]
			// The record of a call the turn announced and has no result
			// for yet joins it even after other results: a harness may
			// record each call as it runs it. One already answered is a
			// new call that uses its id again (short ids repeat).
			if b.open[c.CallID] || (!b.answering && announced(m.ToolCalls, c.CallID)) {
				m.Events = append(m.Events, ev.ID)
				b.mergeState(m, c)
				return nil
			}
			if !b.answering {
				m.Events = append(m.Events, ev.ID)
				m.ToolCalls = append(m.ToolCalls, c)
				b.open[c.CallID] = true
				b.order = append(b.order, c)
				return nil
			}
		}
		b.closeTurn()
		b.ctx.Messages = append(b.ctx.Messages, Message{Role: sessionstore.RoleAssistant, ToolCalls: []sessionstore.ToolCall{c}, Events: []uuid.UUID{ev.ID}})
		b.openTurn(len(b.ctx.Messages)-1, []sessionstore.ToolCall{c})
	case sessionstore.KindToolResult:
		r, err := ev.ToolResult()
		if err != nil {
			return err
		}
		if !b.open[r.CallID] {
			b.ctx.Dropped++
			return nil
		}
		delete(b.open, r.CallID)
		b.answering = true
		b.ctx.Messages = append(b.ctx.Messages, Message{Role: sessionstore.RoleTool, Result: &r, Events: []uuid.UUID{ev.ID}})
	case sessionstore.KindCompaction, sessionstore.KindBranchSummary:
		var s sessionstore.Summary
		if ev.Kind == sessionstore.KindCompaction {
			c, err := ev.Compaction()
			if err != nil {
				return err
			}
			s = c.Summary
		} else {
			bs, err := ev.BranchSummary()
			if err != nil {
				return err
			}
			s = bs.Summary
		}
		b.closeTurn()
		render := b.opts.Summary
		if render == nil {
			render = defaultSummary
		}
		b.ctx.Messages = append(b.ctx.Messages, Message{Role: sessionstore.RoleUser, Text: render(ev.Kind, s), Summary: ev.Kind, Events: []uuid.UUID{ev.ID}})
	default:
		if b.opts.Custom == nil {
			return nil
		}
		m, ok := b.opts.Custom(ev)
		if !ok {
			return nil
		}
		if m.Role != sessionstore.RoleUser && m.Role != sessionstore.RoleAssistant {
			return fmt.Errorf("%w: Options.Custom mapped event %s to a %q message; a tool result is a KindToolResult event", ErrCustomRole, ev.ID, m.Role)
		}
		b.closeTurn()
		// Later events join the message: never into the caller's arrays.
		m.ToolCalls, m.Events = slices.Clone(m.ToolCalls), slices.Clip(m.Events)
		b.ctx.Messages = append(b.ctx.Messages, m)
		if m.Role == sessionstore.RoleAssistant && len(m.ToolCalls) > 0 {
			b.openTurn(len(b.ctx.Messages)-1, m.ToolCalls) // its calls wait for their results
		}
	}
	return nil
}

// join adds an assistant message that directly follows another (no result
// or other message between) to it: one turn written as several events,
// as a transcript that stores each content block apart does.
func (b *builder) join(id uuid.UUID, m sessionstore.Message) {
	msg := &b.ctx.Messages[b.turn]
	msg.Events = append(msg.Events, id)
	msg.Text = joinText(msg.Text, m.Content)
	msg.Reasoning = joinText(msg.Reasoning, m.Reasoning)
	if m.Model != "" {
		msg.Model = m.Model
	}
	if len(m.ProviderState) > 0 {
		msg.ProviderState = append(slices.Clip(msg.ProviderState), m.ProviderState...)
	}
	for _, c := range m.ToolCalls {
		if !announced(msg.ToolCalls, c.CallID) {
			msg.ToolCalls = append(msg.ToolCalls, c)
			b.open[c.CallID] = true
			b.order = append(b.order, c)
		} else {
			b.mergeState(msg, c)
		}
	}
}

// mergeState adds the provider state of c, a record of a call msg already
// holds, to that call (in msg and among the open calls): each entry the
// call does not hold yet, after its own (see the package doc).
func (b *builder) mergeState(msg *Message, c sessionstore.ToolCall) {
	if len(c.ProviderState) == 0 {
		return
	}
	for i := range msg.ToolCalls {
		if msg.ToolCalls[i].CallID == c.CallID {
			msg.ToolCalls[i].ProviderState = mergeStates(msg.ToolCalls[i].ProviderState, c.ProviderState)
			break // a second call of one id in a turn gets no result of its own
		}
	}
	for i := range b.order {
		if b.order[i].CallID == c.CallID {
			b.order[i].ProviderState = mergeStates(b.order[i].ProviderState, c.ProviderState)
		}
	}
}

// mergeStates returns have followed by each entry of add that have does
// not hold, in add's order. It never writes into have's array.
func mergeStates(have, add []sessionstore.ProviderState) []sessionstore.ProviderState {
	out := slices.Clip(have)
	for _, s := range add {
		if !slices.ContainsFunc(out, func(h sessionstore.ProviderState) bool {
			return h.Provider == s.Provider && h.Type == s.Type && bytes.Equal(h.Data, s.Data)
		}) {
			out = append(out, s)
		}
	}
	return out
}

func joinText(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}

func announced(calls []sessionstore.ToolCall, id string) bool {
	for _, c := range calls {
		if c.CallID == id {
			return true
		}
	}
	return false
}

// openTurn makes the assistant message at i the one whose calls are open.
func (b *builder) openTurn(i int, calls []sessionstore.ToolCall) {
	b.turn, b.answering = i, false
	clear(b.open)
	b.order = b.order[:0]
	for _, c := range calls {
		if !b.open[c.CallID] {
			b.open[c.CallID] = true
			b.order = append(b.order, c)
		}
	}
}

// closeTurn gives each open call a synthetic result: the conversation
// moved on without one.
func (b *builder) closeTurn() {
	for _, c := range b.pendingCalls() {
		b.ctx.Synthesized++
		b.ctx.Messages = append(b.ctx.Messages, Message{Role: sessionstore.RoleTool, Result: &sessionstore.ToolResult{CallID: c.CallID, Output: MissingResult, IsError: true}})
	}
	b.turn, b.answering = -1, false
	clear(b.open)
	b.order = b.order[:0]
}

// pendingCalls returns the open calls, in order.
func (b *builder) pendingCalls() []sessionstore.ToolCall {
	var out []sessionstore.ToolCall
	for _, c := range b.order {
		if b.open[c.CallID] {
			out = append(out, c)
		}
	}
	return out
}

func defaultSummary(kind sessionstore.Kind, s sessionstore.Summary) string {
	intro := "The conversation before this point was compacted; this is its summary."
	if kind == sessionstore.KindBranchSummary {
		intro = "The user left another path of this conversation; this is a summary of it."
	}
	return intro + "\n\n" + RenderSummary(s)
}

// RenderSummary returns a summary as plain text: its Text, then each list
// that is not empty under its heading.
func RenderSummary(s sessionstore.Summary) string {
	var sb strings.Builder
	if t := strings.TrimSpace(s.Text); t != "" {
		sb.WriteString(t)
	}
	for _, sec := range []struct {
		title string
		items []string
	}{
		{"Goals", s.Goals}, {"Constraints", s.Constraints}, {"Decisions", s.Decisions},
		{"Files changed", s.FilesChanged}, {"Unresolved", s.Unresolved}, {"Facts", s.Facts},
	} {
		if len(sec.items) == 0 {
			continue
		}
		if sb.Len() > 0 {
			sb.WriteString("\n\n")
		}
		sb.WriteString(sec.title + ":")
		for _, it := range sec.items {
			sb.WriteString("\n- " + it)
		}
	}
	return sb.String()
}

// Reply is a model's reply, as an adapter reads it from its SDK's
// response.
type Reply struct {
	Text      string
	Reasoning string
	Model     string
	Usage     *sessionstore.Usage
	// ToolCalls are the reply's calls, each with the provider state that
	// belongs to it.
	ToolCalls []sessionstore.ToolCall
	// ProviderState is the reply's message-level provider state, in the
	// order the reply gave it (see [sessionstore.ProviderState]).
	ProviderState []sessionstore.ProviderState
}

// Events returns the events of the reply, to append with one AppendBatch:
// the assistant message (its provider state, and the calls it announces,
// each with its state), then one KindToolCall event per call (with its
// state), in order.
func (r Reply) Events() []sessionstore.Event {
	out := make([]sessionstore.Event, 0, 1+len(r.ToolCalls))
	out = append(out, sessionstore.AssistantMessage(sessionstore.Message{
		Content: r.Text, Reasoning: r.Reasoning, Model: r.Model, Usage: r.Usage, ToolCalls: r.ToolCalls,
		ProviderState: r.ProviderState,
	}))
	for _, c := range r.ToolCalls {
		out = append(out, sessionstore.ToolCallEvent(c))
	}
	return out
}

// UniqueCallIDs returns messages (those of a Context) with every call id
// unique among them, for an API that refuses a request holding one call
// id twice. A call keeps its id unless a call of an earlier message was
// stored or sent with it; such a call is sent with the id followed by
// "_2" (or "_3", ..., the first that no call of an earlier message was
// stored or sent with, nor a call of its own message), and the results
// that follow its message name it the same way. The ids a message gets
// depend only on the messages up to it, so the same events give the same
// ids in every request, and appending events never changes the ids of
// earlier turns (a later call stored with an id an earlier one was sent
// with is the one renamed).
// Two calls of one id in one message (which no result could tell apart)
// keep it. The session keeps the ids as stored: the results a harness
// appends name the stored ids (Context.Pending).
//
// Messages whose ids are all unique come back as they are; otherwise the
// result is a new slice, and messages is not modified.
func UniqueCallIDs(messages []Message) []Message {
	seen := map[string]bool{} // ids of earlier messages
	clash := false
	for _, m := range messages {
		for _, c := range m.ToolCalls {
			if seen[c.CallID] {
				clash = true
			}
		}
		for _, c := range m.ToolCalls {
			seen[c.CallID] = true
		}
	}
	if !clash {
		return messages
	}
	out := slices.Clone(messages)
	taken := seen // ids earlier messages were stored or sent with
	clear(taken)
	var turn map[string]string // stored id -> sent id, of the last message with calls
	// next is, per stored id, the first n whose id "_n" was not found
	// taken: taken only grows, so a later rename starts there.
	next := map[string]int{}
	for i, m := range out {
		switch {
		case len(m.ToolCalls) > 0:
			turn = make(map[string]string, len(m.ToolCalls))
			own := make(map[string]bool, len(m.ToolCalls)) // ids of this message, stored or sent
			for _, c := range m.ToolCalls {
				own[c.CallID] = true
			}
			calls := slices.Clone(m.ToolCalls)
			for j, c := range calls {
				if w, ok := turn[c.CallID]; ok {
					calls[j].CallID = w
					continue
				}
				w := c.CallID
				if taken[w] {
					for n := max(next[c.CallID], 2); ; n++ {
						w = c.CallID + "_" + strconv.Itoa(n)
						if !taken[w] && !own[w] {
							next[c.CallID] = n + 1
							break
						}
					}
					own[w] = true
				}
				turn[c.CallID] = w
				calls[j].CallID = w
			}
			for id := range own {
				taken[id] = true
			}
			out[i].ToolCalls = calls
		case m.Result != nil:
			if w, ok := turn[m.Result.CallID]; ok && w != m.Result.CallID {
				r := *m.Result
				r.CallID = w
				out[i].Result = &r
			}
		}
	}
	return out
}
