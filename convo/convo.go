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
//     RoleAssistant Message with its text, reasoning and the tool calls it
//     announced (sessionstore.Message.ToolCalls).
//   - An assistant message that directly follows another (no result or
//     other message between) joins it: one turn stored as several events.
//   - A KindToolCall event joins the assistant Message before it when that
//     message already announced the call (the usual case: a harness
//     records the reply with its calls, then one event per call, before or
//     after the results of other calls; the announced arguments are kept)
//     and the call has no result yet, or when the message is still open
//     (no result or other message came after it); otherwise (a call whose
//     id an answered call of the turn used, say) it starts an assistant
//     Message of its own.
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
// Build reads no store: it needs the records, so the events must be
// resolved (Load resolves them; an event from Store.Event whose record is
// a blob needs Store.Resolve first, else ErrUnresolved).
//
// # From a reply to events
//
// Reply.Events returns the events a model's reply becomes: an assistant
// message (text, reasoning, model, usage and the calls it announced), then
// one KindToolCall event per call, in order: append them with one
// AppendBatch, run the tools, and append each result with
// sessionstore.ToolResultEvent.
package convo

import (
	"errors"
	"fmt"
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
	// ToolCalls are the calls of an assistant message, in order.
	ToolCalls []sessionstore.ToolCall
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
	for _, c := range m.ToolCalls {
		if !announced(msg.ToolCalls, c.CallID) {
			msg.ToolCalls = append(msg.ToolCalls, c)
			b.open[c.CallID] = true
			b.order = append(b.order, c)
		}
	}
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
	ToolCalls []sessionstore.ToolCall
}

// Events returns the events of the reply, to append with one AppendBatch:
// the assistant message (announcing the calls), then one KindToolCall
// event per call, in order.
func (r Reply) Events() []sessionstore.Event {
	out := make([]sessionstore.Event, 0, 1+len(r.ToolCalls))
	out = append(out, sessionstore.AssistantMessage(sessionstore.Message{
		Content: r.Text, Reasoning: r.Reasoning, Model: r.Model, Usage: r.Usage, ToolCalls: r.ToolCalls,
	}))
	for _, c := range r.ToolCalls {
		out = append(out, sessionstore.ToolCallEvent(c))
	}
	return out
}
