// Package anthropicadapter maps a sessionstore session to the request
// types of the Anthropic Go SDK (github.com/anthropics/anthropic-sdk-go/v2)
// and a Messages API response to the events to append.
//
// [Messages] turns the events of sessionstore.Store.Load into the
// []anthropic.MessageParam of a MessageNewParams: text blocks, tool_use
// blocks (id, name, and the call's JSON arguments as input) in assistant
// messages, and tool_result blocks (tool_use_id, content, is_error) in the
// user message after them. [Reply] and [Events] read an
// *anthropic.Message: its text blocks, tool_use blocks (input kept as the
// call's arguments), thinking, model and usage.
//
// The rules of which turns a request carries (calls paired with results,
// synthetic results for abandoned calls, compactions and branch summaries
// as user messages holding the summary) are package convo's; this package
// maps convo's messages to the SDK's types, and then meets the API's own
// rules: the messages alternate between user and assistant (consecutive
// messages of one role are merged into one, so the results of a turn's
// calls form one user message, tool_result blocks first), and no message
// or text block is empty or only white space, which the API refuses (such
// text is left out: a message with no other text and no tool calls is
// left out, a result with no other output has no content). Calls still pending
// (convo.Context.Pending: the last turn's calls without results) are sent
// unanswered, which the API refuses: run them and append their results
// before the next request.
//
// # Thinking
//
// The API takes back a thinking block only with the signature it was
// given with, and, when thinking is enabled, wants the last assistant
// turn that used tools to start with its thinking. [Reply] keeps a
// reply's thinking and redacted thinking blocks, in block order, as the
// message's provider state (sessionstore.Message.ProviderState):
//
//	Provider "anthropic" (ProviderName)
//	Type     "thinking" or "redacted_thinking" (the block's type)
//	Data     the content block's JSON as the API returned it:
//	         {"type":"thinking","thinking":"...","signature":"..."}
//	         {"type":"redacted_thinking","data":"..."}
//
// and [Messages] sends them back, signed, at the start of that assistant
// message (all of a turn's blocks, in order, before its text and
// tool_use blocks). State of another provider is not sent, nor is
// reasoning without such blocks (written by another adapter or an
// importer): an unsigned thinking block would be refused. Records written
// before ProviderState existed keep their blocks under the record member
// [ThinkingField]; Messages reads and sends those too.
//
// # Arguments
//
// Anthropic wants a tool_use input to be a JSON object. Arguments that are
// one are sent as stored; none (or null) as {}; anything else (arguments
// another provider's model wrote as a string that was not JSON, say) as
// {"arguments": <the stored JSON>}.
//
// # Call ids
//
// The API wants each tool_use id of a request unique and made of letters,
// digits, '_' and '-'. Claude's ids are; those another provider wrote may
// not be (empty, with other characters, or short ids used again by a
// later turn). A call id the API would refuse is sent made into one it
// takes (other characters as '_', then "_2", "_3", ... until it is unique
// in the request), and its result names the same id; the session keeps
// the id as stored. The same events give the same ids in every request.
// A turn that holds two calls of one id (which no result could tell
// apart) sends the first.
//
// Hosted tools the API runs itself (server_tool_use and its result
// blocks) are done when the response arrives and are left out of the
// reply.
//
// This package writes nothing: it builds values; what an append of its
// events leaves durable is sessionstore's contract (AppendBatch).
package anthropicadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
)

// ErrNoReply is returned for a nil response.
var ErrNoReply = errors.New("anthropicadapter: response holds no reply")

// ProviderName is the Provider of the state this package writes and
// sends back (see the package doc).
const ProviderName = "anthropic"

// ThinkingField is the member of an assistant message's record in which
// earlier versions of [Events] kept the reply's signed thinking blocks.
// Events now keeps them as the message's ProviderState; [Messages] still
// reads this member of the records that have it.
const ThinkingField = "anthropic_thinking"

// ThinkingBlock is a thinking or redacted_thinking block of a reply, as
// kept under ThinkingField, and as the Data of its provider state holds
// it.
type ThinkingBlock struct {
	// Type is "thinking" or "redacted_thinking".
	Type string `json:"type"`
	// Thinking is a thinking block's text; Signature the signature the
	// API gave with it, which it checks when the block comes back.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	// Data is a redacted_thinking block's encrypted content.
	Data string `json:"data,omitempty"`
}

var thinkingKey = []byte(`"` + ThinkingField + `"`)

// Messages returns the messages of events, a context as
// sessionstore.Store.Load returns it (records resolved), for a
// MessageNewParams.Messages, with the caller's system prompt in
// MessageNewParams.System. Signed thinking blocks that [Events] stored
// (as provider state, or under ThinkingField) are sent back.
//
// Errors: those of convo.Build (convo.ErrUnresolved for a blob record not
// read yet, a decode error for a record that is not its kind's shape), a
// decode error naming the event for a ThinkingField that is not a list
// of blocks, and one naming the message's first event for thinking state
// whose Data is not a block.
func Messages(events []sessionstore.Event) ([]anthropic.MessageParam, error) {
	c, err := convo.Build(events, nil)
	if err != nil {
		return nil, err
	}
	byID := make(map[uuid.UUID]int, len(events))
	for i, ev := range events {
		if ev.ID != uuid.Nil { // events not from a store have no id to find them by
			byID[ev.ID] = i
		}
	}
	legacy := func(m convo.Message) ([]ThinkingBlock, error) {
		var out []ThinkingBlock
		for _, id := range m.Events {
			i, ok := byID[id]
			// Most records hold no thinking blocks: skip decoding them.
			if !ok || events[i].Kind != sessionstore.KindMessage || !bytes.Contains(events[i].Record, thinkingKey) {
				continue
			}
			var rec struct {
				Thinking []ThinkingBlock `json:"anthropic_thinking"`
			}
			if err := json.Unmarshal(events[i].Record, &rec); err != nil {
				return nil, fmt.Errorf("anthropicadapter: %s of event %s: %w", ThinkingField, id, err)
			}
			out = append(out, rec.Thinking...)
		}
		return out, nil
	}
	return build(c, legacy)
}

// MessagesOf returns the messages of a context built with convo.Build (for
// callers that set convo.Options or read Context.Pending), the thinking
// blocks of the messages' provider state included. It has no records to
// read ThinkingField from, and leaves out thinking state whose Data is
// not a block: use Messages for sessions written before ProviderState.
func MessagesOf(c convo.Context) []anthropic.MessageParam {
	out, _ := build(c, nil) // no legacy func; state that does not decode is skipped
	return out
}

// thinkingOf returns the thinking blocks of m's provider state, in order.
// A block whose Data does not decode is an error when strict, else left
// out.
func thinkingOf(m convo.Message, strict bool) ([]ThinkingBlock, error) {
	var out []ThinkingBlock
	for _, st := range m.ProviderState {
		if st.Provider != ProviderName || (st.Type != "thinking" && st.Type != "redacted_thinking") {
			continue
		}
		var b ThinkingBlock
		if err := json.Unmarshal(st.Data, &b); err != nil || b.Type != st.Type {
			if !strict {
				continue
			}
			if err == nil {
				err = fmt.Errorf("block of type %q", b.Type)
			}
			var first uuid.UUID
			if len(m.Events) > 0 {
				first = m.Events[0]
			}
			return nil, fmt.Errorf("anthropicadapter: %s state of the message of event %s: %w", st.Type, first, err)
		}
		out = append(out, b)
	}
	return out, nil
}

func build(c convo.Context, legacy func(convo.Message) ([]ThinkingBlock, error)) ([]anthropic.MessageParam, error) {
	var out []anthropic.MessageParam
	add := func(assistant bool, blocks []anthropic.ContentBlockParamUnion) {
		if len(blocks) == 0 {
			return
		}
		if n := len(out); n > 0 && (out[n-1].OfAssistant != nil) == assistant {
			if assistant {
				out[n-1].OfAssistant.Content = append(out[n-1].OfAssistant.Content, blocks...)
			} else {
				out[n-1].OfUser.Content = append(out[n-1].OfUser.Content, blocks...)
			}
			return
		}
		if assistant {
			out = append(out, anthropic.NewAssistantMessage(blocks...))
		} else {
			out = append(out, anthropic.NewUserMessage(blocks...))
		}
	}
	ids := callIDs{used: map[string]bool{}}
	for _, m := range c.Messages {
		var blocks []anthropic.ContentBlockParamUnion
		switch m.Role {
		case sessionstore.RoleAssistant:
			if len(m.ToolCalls) > 0 {
				ids.turn = make(map[string]string, len(m.ToolCalls))
			}
			if hasText(m.Text) || len(m.ToolCalls) > 0 {
				var tb []ThinkingBlock
				if legacy != nil {
					old, err := legacy(m)
					if err != nil {
						return nil, err
					}
					tb = old
				}
				st, err := thinkingOf(m, legacy != nil)
				if err != nil {
					return nil, err
				}
				for _, b := range append(tb, st...) {
					switch b.Type {
					case "thinking":
						blocks = append(blocks, anthropic.NewThinkingBlock(b.Signature, b.Thinking))
					case "redacted_thinking":
						blocks = append(blocks, anthropic.NewRedactedThinkingBlock(b.Data))
					}
				}
			}
			if hasText(m.Text) {
				blocks = append(blocks, anthropic.NewTextBlock(m.Text))
			}
			for _, tc := range m.ToolCalls {
				if _, ok := ids.turn[tc.CallID]; ok {
					// A second call of one id in a turn (a model may
					// write one): no result could name it apart.
					continue
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(ids.call(tc.CallID), Input(tc.Arguments), tc.Name))
			}
			add(true, blocks)
		case sessionstore.RoleTool:
			r := anthropic.ToolResultBlockParam{ToolUseID: ids.result(m.Result.CallID)}
			if hasText(m.Result.Output) {
				r.Content = []anthropic.ToolResultBlockParamContentUnion{{OfText: &anthropic.TextBlockParam{Text: m.Result.Output}}}
			}
			if m.Result.IsError {
				r.IsError = anthropic.Bool(true)
			}
			add(false, []anthropic.ContentBlockParamUnion{{OfToolResult: &r}})
		default:
			if hasText(m.Text) {
				add(false, []anthropic.ContentBlockParamUnion{anthropic.NewTextBlock(m.Text)})
			}
		}
	}
	return out, nil
}

// callIDs gives each tool_use of a request an id the API takes: unique in
// the request and of the letters, digits, '_' and '-' only. A stored id
// that is one is sent as it is; another (empty, holding other characters,
// or used by an earlier turn) is sent made into one: other characters as
// '_', and "_2", "_3", ... after it until it is unique. turn maps the ids
// of the last assistant message with calls, whose results follow it.
type callIDs struct {
	used map[string]bool
	turn map[string]string
	// next is, per base id, the first n whose id "_n" was not found used:
	// used only grows, so the next search starts there.
	next map[string]int
}

func (c *callIDs) call(id string) string {
	base := strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, id)
	if base == "" {
		base = "toolu"
	}
	w := base
	if c.used[w] {
		if c.next == nil {
			c.next = map[string]int{}
		}
		for n := max(c.next[base], 2); c.used[w]; n++ {
			w = base + "_" + strconv.Itoa(n)
			c.next[base] = n + 1
		}
	}
	c.used[w] = true
	c.turn[id] = w
	return w
}

func (c *callIDs) result(id string) string {
	if w, ok := c.turn[id]; ok {
		return w
	}
	return id
}

// hasText reports whether s is text the API takes in a text block: it
// refuses one that is empty or only white space.
func hasText(s string) bool { return strings.TrimSpace(s) != "" }

// Input returns stored tool call arguments as a tool_use input, a JSON
// object: the arguments themselves when they are one, {} for none, and
// {"arguments": args} for any other JSON.
func Input(args json.RawMessage) json.RawMessage {
	trimmed := strings.TrimSpace(string(args))
	switch {
	case trimmed == "" || trimmed == "null":
		return json.RawMessage(`{}`)
	case trimmed[0] == '{' && json.Valid(args):
		return args
	case json.Valid(args):
		return json.RawMessage(`{"arguments":` + trimmed + `}`)
	}
	b, _ := json.Marshal(map[string]string{"arguments": string(args)}) // not JSON: kept as text
	return b
}

// Reply returns the reply of a message: its text blocks (joined by a blank
// line), its tool_use blocks as calls (input as arguments), its thinking
// text as Reasoning, its thinking and redacted thinking blocks as
// ProviderState (see the package doc), the model and the usage.
//
// Errors: ErrNoReply for a nil message.
func Reply(msg *anthropic.Message) (convo.Reply, error) {
	if msg == nil {
		return convo.Reply{}, fmt.Errorf("%w: nil message", ErrNoReply)
	}
	out := convo.Reply{Model: string(msg.Model)}
	var text, reasoning []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				text = append(text, b.Text)
			}
		case "thinking":
			if b.Thinking != "" {
				reasoning = append(reasoning, b.Thinking)
			}
			out.ProviderState = append(out.ProviderState, blockState(b, ThinkingBlock{Type: b.Type, Thinking: b.Thinking, Signature: b.Signature}))
		case "redacted_thinking":
			out.ProviderState = append(out.ProviderState, blockState(b, ThinkingBlock{Type: b.Type, Data: b.Data}))
		case "tool_use":
			var args json.RawMessage
			if len(b.Input) > 0 && json.Valid(b.Input) {
				args = append(json.RawMessage(nil), b.Input...)
			}
			out.ToolCalls = append(out.ToolCalls, sessionstore.ToolCall{CallID: b.ID, Name: b.Name, Arguments: args})
		}
	}
	out.Text = strings.Join(text, "\n\n")
	out.Reasoning = strings.Join(reasoning, "\n\n")
	if msg.JSON.Usage.Valid() {
		u := msg.Usage
		out.Usage = &sessionstore.Usage{
			InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
			CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens,
		}
	}
	return out, nil
}

// blockState returns the provider state of a thinking or redacted
// thinking block: its JSON as the API returned it, or, for a block not
// read from JSON, b's.
func blockState(u anthropic.ContentBlockUnion, b ThinkingBlock) sessionstore.ProviderState {
	data := []byte(u.RawJSON())
	if len(data) == 0 {
		data, _ = json.Marshal(b) // strings only: always marshals
	}
	return sessionstore.ProviderState{Provider: ProviderName, Type: b.Type, Data: data}
}

// Events returns the events of a message's reply, to append with one
// AppendBatch: the assistant message (its signed thinking blocks as its
// provider state), then one tool_call event per call. It is
// Reply(msg).Events().
//
// Errors: as Reply.
func Events(msg *anthropic.Message) ([]sessionstore.Event, error) {
	r, err := Reply(msg)
	if err != nil {
		return nil, err
	}
	return r.Events(), nil
}
