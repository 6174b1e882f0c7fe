// Package eino connects a sessionstore session to Eino
// (github.com/cloudwego/eino): Messages turns the events of
// [sessionstore.Store.Load] into the []*schema.Message a ChatModel's
// Generate takes, and Reply reads the *schema.Message it returns as a
// [convo.Reply], whose Events are appended with one AppendBatch.
//
// The rules of the conversion (tool calls paired with results, synthetic
// results for abandoned calls, compactions shown as user messages) are
// package convo's; this package maps its messages to Eino's types:
//
//   - a user message, a compaction and a branch summary become a
//     schema.User message with Content;
//   - an assistant message becomes a schema.Assistant message with
//     Content, ReasoningContent and one schema.ToolCall per call (ID,
//     Type "function", Function{Name, Arguments}; arguments that were
//     stored empty are sent as "{}");
//   - a tool result becomes a schema.Tool message with Content,
//     ToolCallID and ToolName. Eino has no error flag on a result, so the
//     Content of an error result is its output after ErrorPrefix.
//
// A message with nothing to send (no text, no calls) is left out, its
// reasoning too: a Chat Completions API refuses an assistant message
// without content or tool calls, and eino-ext's OpenAI model sends no
// reasoning, so a reasoning-only turn would go as an empty message.
// System prompts are agent configuration, not events: put a
// schema.System message before the ones Messages returns.
//
// # Call ids
//
// A call that came without an id gets one derived from its position,
// name and arguments (see Reply), which a later turn's call of the same
// name and arguments gets again. Messages sends ids unique in the request
// (convo.UniqueCallIDs: a call whose id an earlier turn used is sent with
// "_2", "_3", ... after it, and its result names the same), the same for
// the same events in every request; the session keeps the ids as stored.
//
// # Provider state
//
// Eino (v0.7.36) has no typed field for what a provider wants back
// verbatim. Its model implementations keep such state in the free-form
// Extra maps of schema.Message and schema.ToolCall, under keys of their
// own (eino-ext's claude model keeps a thinking block's text and
// signature in the message's Extra, its gemini model a thought signature
// in the tool call's). Reply keeps each non-empty Extra as provider state:
//
//	Provider "eino" (ProviderName)
//	Type     "extra" (StateExtra)
//	Data     the map as encoding/json writes it (a JSON object; an entry
//	         whose value does not encode is left out)
//
// the message's in Message.ProviderState, a call's in its
// ToolCall.ProviderState; Messages puts it back in the Extra of the
// assistant message and of each call (the entries of a turn stored as
// several events merged, later ones winning). The values come back as a
// JSON round trip of the message gives them (strings as they were, numbers
// as float64, []byte as a base64 string, a named type as its JSON): a
// model that reads its Extra after such a round trip gets its state back.
// Only state whose Provider is "eino" is put back.
//
// The package writes nothing: what is durable is what the caller appends.
package eino

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/cloudwego/eino/schema"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
)

// ErrNotAssistant is returned by Reply for a nil message or one whose
// role is not schema.Assistant (an empty role is taken as assistant).
var ErrNotAssistant = errors.New("eino: reply is not an assistant message")

// ErrArguments is returned by Reply for a tool call whose arguments are
// not JSON; the error names the call.
var ErrArguments = errors.New("eino: tool call arguments are not JSON")

// ErrorPrefix starts the Content of a tool message that carries an error
// result.
const ErrorPrefix = "error: "

// CallIDPrefix starts the id Reply gives a tool call that came without
// one (see Reply).
const CallIDPrefix = "eino-"

// ProviderName is the Provider of the state this package writes and puts
// back; StateExtra its Type (see the package doc).
const (
	ProviderName = "eino"
	StateExtra   = "extra"
)

// Messages returns the request messages of events, a context as
// Store.Load returns it (see the package doc).
//
// Errors: those of convo.Build (convo.ErrUnresolved, a record that is not
// its kind's shape), and a decode error naming the message's first event
// for Extra state whose Data is not a JSON object.
func Messages(events []sessionstore.Event) ([]*schema.Message, error) {
	c, err := convo.Build(events, nil)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	out := make([]*schema.Message, 0, len(c.Messages))
	for _, m := range convo.UniqueCallIDs(c.Messages) {
		switch m.Role {
		case sessionstore.RoleAssistant:
			if m.Text == "" && len(m.ToolCalls) == 0 {
				continue
			}
			bad := func(err error) error {
				var first string
				if len(m.Events) > 0 {
					first = m.Events[0].String()
				}
				return fmt.Errorf("eino: extra state of the message of event %s: %w", first, err)
			}
			extra, err := extraOf(m.ProviderState)
			if err != nil {
				return nil, bad(err)
			}
			msg := &schema.Message{Role: schema.Assistant, Content: m.Text, ReasoningContent: m.Reasoning, Extra: extra}
			for _, tc := range m.ToolCalls {
				names[tc.CallID] = tc.Name
				args := string(tc.Arguments)
				if len(tc.Arguments) == 0 {
					args = "{}"
				}
				extra, err := extraOf(tc.ProviderState)
				if err != nil {
					return nil, bad(err)
				}
				msg.ToolCalls = append(msg.ToolCalls, schema.ToolCall{ID: tc.CallID, Type: "function", Function: schema.FunctionCall{Name: tc.Name, Arguments: args}, Extra: extra})
			}
			out = append(out, msg)
		case sessionstore.RoleTool:
			r := m.Result
			content := r.Output
			if r.IsError {
				content = ErrorPrefix + content
			}
			out = append(out, &schema.Message{Role: schema.Tool, Content: content, ToolCallID: r.CallID, ToolName: names[r.CallID]})
		default:
			if m.Text != "" {
				out = append(out, &schema.Message{Role: schema.User, Content: m.Text})
			}
		}
	}
	return out, nil
}

// Reply returns the reply a ChatModel's Generate returned: its Content
// (or, when that is empty, the text parts of AssistantGenMultiContent,
// joined), ReasoningContent, ToolCalls, the Extra of the message and of
// each call as provider state (see the package doc) and the usage of
// ResponseMeta
// (PromptTokens as input, CompletionTokens as output,
// PromptTokenDetails.CachedTokens as cache reads). Eino's messages do not
// name the model, so Model is set only from a string Extra["model"]; set
// it yourself otherwise.
//
// A tool call without an ID gets one derived from its position, name and
// arguments: CallIDPrefix and 16 hex digits of their SHA-256, the same
// for the same message, so a retried Reply yields the same events (and the
// same for a later turn's same call: Messages sends ids unique in the
// request). Empty arguments are stored as none.
//
// Errors: ErrNotAssistant; ErrArguments for arguments that are not JSON.
func Reply(msg *schema.Message) (convo.Reply, error) {
	if msg == nil || (msg.Role != schema.Assistant && msg.Role != "") {
		return convo.Reply{}, ErrNotAssistant
	}
	r := convo.Reply{Text: msg.Content, Reasoning: msg.ReasoningContent, ProviderState: extraState(msg.Extra)}
	if r.Text == "" {
		var parts []string
		for _, p := range msg.AssistantGenMultiContent {
			if p.Type == schema.ChatMessagePartTypeText && p.Text != "" {
				parts = append(parts, p.Text)
			}
		}
		r.Text = strings.Join(parts, "\n\n")
	}
	if m, ok := msg.Extra["model"].(string); ok {
		r.Model = m
	}
	if meta := msg.ResponseMeta; meta != nil && meta.Usage != nil {
		u := sessionstore.Usage{
			InputTokens:     int64(meta.Usage.PromptTokens),
			OutputTokens:    int64(meta.Usage.CompletionTokens),
			CacheReadTokens: int64(meta.Usage.PromptTokenDetails.CachedTokens),
		}
		if u != (sessionstore.Usage{}) {
			r.Usage = &u
		}
	}
	for i, tc := range msg.ToolCalls {
		c := sessionstore.ToolCall{CallID: tc.ID, Name: tc.Function.Name, ProviderState: extraState(tc.Extra)}
		if a := tc.Function.Arguments; a != "" {
			if !json.Valid([]byte(a)) {
				return convo.Reply{}, fmt.Errorf("%w: call %q (%s)", ErrArguments, tc.ID, tc.Function.Name)
			}
			c.Arguments = json.RawMessage(a)
		}
		if c.CallID == "" {
			h := sha256.Sum256([]byte(strconv.Itoa(i) + "\x00" + tc.Function.Name + "\x00" + tc.Function.Arguments))
			c.CallID = CallIDPrefix + hex.EncodeToString(h[:8])
		}
		r.ToolCalls = append(r.ToolCalls, c)
	}
	return r, nil
}

// extraState returns the provider state of an Extra map: its entries
// whose values encode as JSON, as one JSON object; nil when none does.
func extraState(extra map[string]any) []sessionstore.ProviderState {
	kept := make(map[string]json.RawMessage, len(extra))
	for k, v := range extra {
		if b, err := json.Marshal(v); err == nil {
			kept[k] = b
		}
	}
	if len(kept) == 0 {
		return nil
	}
	data, _ := json.Marshal(kept) // encoded values: always marshals
	return []sessionstore.ProviderState{{Provider: ProviderName, Type: StateExtra, Data: data}}
}

// extraOf returns the Extra map of the Extra state in st, entries of later
// states winning; nil when st holds none.
func extraOf(st []sessionstore.ProviderState) (map[string]any, error) {
	var out map[string]any
	for _, s := range st {
		if s.Provider != ProviderName || s.Type != StateExtra {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(s.Data, &m); err != nil {
			return nil, err
		}
		if m == nil {
			return nil, errors.New("not a JSON object")
		}
		if out == nil {
			out = make(map[string]any, len(m))
		}
		maps.Copy(out, m)
	}
	return out, nil
}
