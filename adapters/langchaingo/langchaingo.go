// Package langchaingo connects a sessionstore session to LangChainGo
// (github.com/tmc/langchaingo): Messages turns the events of
// [sessionstore.Store.Load] into the []llms.MessageContent of a
// GenerateContent request, and Reply reads an *llms.ContentResponse as a
// [convo.Reply], whose Events are appended with one AppendBatch.
//
// The rules of the conversion (tool calls paired with results, synthetic
// results for abandoned calls, compactions shown as user messages) are
// package convo's; this package maps its messages to LangChainGo's types:
//
//   - a user message, a compaction and a branch summary become a
//     ChatMessageTypeHuman message with one TextContent part;
//   - an assistant message becomes a ChatMessageTypeAI message with a
//     TextContent part (when it has text) and one llms.ToolCall part per
//     call (Type "function", FunctionCall{Name, Arguments}; arguments that
//     were stored empty are sent as "{}");
//   - a tool result becomes a ChatMessageTypeTool message with exactly
//     one llms.ToolCallResponse part (ToolCallID, the call's Name,
//     Content), as LangChainGo's providers require. LangChainGo has no
//     error flag on a result, so the Content of an error result is its
//     output after the prefix "error: ".
//
// The ai messages carry every part of a turn, which the openai provider
// sends. LangChainGo's anthropic provider (v0.1.14) sends only the first
// part of an ai message, so a turn with text before its call, or with
// parallel calls, reaches the API without its tool_use blocks, and the
// API refuses the tool results that follow; its googleai provider sends
// each tool message as a content of its own.
//
// A message with nothing to send (no text, no calls) is left out. The
// reasoning of an assistant message is not sent: MessageContent has no
// part for it. System prompts are agent configuration, not events: put
// a ChatMessageTypeSystem message before the ones Messages returns.
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
// LangChainGo (v0.1.14) has no field in its request types for what a
// provider wants back verbatim (a signed thinking block, a reasoning item,
// a thought signature): Messages sends none. Its anthropic provider
// reports a thinking block's signature in the choice's GenerationInfo
// ("ThinkingContent", "ThinkingSignature"); Reply keeps such a block as
// the message's provider state, in the shape package anthropicadapter
// writes and sends back (Provider "anthropic", Type "thinking", Data
// {"type":"thinking","thinking":"...","signature":"..."}), so a session
// continued with that adapter sends it back. No other provider of
// LangChainGo v0.1.14 reports any.
//
// The package writes nothing: what is durable is what the caller appends.
package langchaingo

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/tmc/langchaingo/llms"
)

// ErrNoChoice is returned by Reply and ReplyAll for a nil response or one
// without a choice.
var ErrNoChoice = errors.New("langchaingo: response has no choice")

// ErrArguments is returned by Reply and ReplyAll for a tool call whose
// arguments are not JSON; the error names the call.
var ErrArguments = errors.New("langchaingo: tool call arguments are not JSON")

// ErrorPrefix starts the Content of a tool message that carries an error
// result.
const ErrorPrefix = "error: "

// CallIDPrefix starts the id Reply gives a tool call that came without
// one (see Reply).
const CallIDPrefix = "lcgo-"

// Messages returns the request messages of events, a context as
// Store.Load returns it (see the package doc).
//
// Errors: those of convo.Build (convo.ErrUnresolved, a record that is not
// its kind's shape).
func Messages(events []sessionstore.Event) ([]llms.MessageContent, error) {
	c, err := convo.Build(events, nil)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	out := make([]llms.MessageContent, 0, len(c.Messages))
	for _, m := range convo.UniqueCallIDs(c.Messages) {
		switch m.Role {
		case sessionstore.RoleAssistant:
			var parts []llms.ContentPart
			if m.Text != "" {
				parts = append(parts, llms.TextContent{Text: m.Text})
			}
			for _, tc := range m.ToolCalls {
				names[tc.CallID] = tc.Name
				args := string(tc.Arguments)
				if len(tc.Arguments) == 0 {
					args = "{}"
				}
				parts = append(parts, llms.ToolCall{ID: tc.CallID, Type: "function", FunctionCall: &llms.FunctionCall{Name: tc.Name, Arguments: args}})
			}
			if len(parts) > 0 {
				out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeAI, Parts: parts})
			}
		case sessionstore.RoleTool:
			r := m.Result
			content := r.Output
			if r.IsError {
				content = ErrorPrefix + content
			}
			out = append(out, llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{
				llms.ToolCallResponse{ToolCallID: r.CallID, Name: names[r.CallID], Content: content},
			}})
		default:
			if m.Text != "" {
				out = append(out, llms.TextParts(llms.ChatMessageTypeHuman, m.Text))
			}
		}
	}
	return out, nil
}

// Reply returns the reply of a response: its first choice's Content,
// ReasoningContent (or, when that is empty, a string
// GenerationInfo["ThinkingContent"]), tool calls (ToolCalls, or the
// legacy FuncCall when there are none), and the usage its GenerationInfo
// reports (PromptTokens, InputTokens or input_tokens as input; CompletionTokens, OutputTokens or output_tokens as output; PromptCachedTokens or CacheReadInputTokens as cache reads; CacheCreationInputTokens as cache writes). LangChainGo's responses do not name the model, so
// Model is set only from a string GenerationInfo["model"]; set it
// yourself otherwise.
//
// A tool call without an ID gets one derived from its position, name and
// arguments: CallIDPrefix and 16 hex digits of their SHA-256, the same
// for the same response, so a retried Reply yields the same events (and
// the same for a later turn's same call: Messages sends ids unique in the
// request). Empty arguments are stored as none. A signed thinking block
// (GenerationInfo "ThinkingSignature", which the anthropic provider sets)
// is kept as provider state (see the package doc).
//
// Errors: ErrNoChoice; ErrArguments for arguments that are not JSON.
func Reply(resp *llms.ContentResponse) (convo.Reply, error) {
	if resp == nil || len(resp.Choices) == 0 || resp.Choices[0] == nil {
		return convo.Reply{}, ErrNoChoice
	}
	var r convo.Reply
	if err := addChoice(&r, resp.Choices[0]); err != nil {
		return convo.Reply{}, err
	}
	return r, nil
}

// ReplyAll is Reply for providers that return one choice per content
// block of a single reply (LangChainGo's anthropic provider does: text,
// thinking and each tool_use are choices of their own): it joins the
// text and reasoning of every choice, in order, and collects every
// choice's tool calls; usage is the first choice's that reports any. For
// providers whose choices are alternative replies (candidate count above
// one), use Reply.
//
// Errors: those of Reply.
func ReplyAll(resp *llms.ContentResponse) (convo.Reply, error) {
	if resp == nil || len(resp.Choices) == 0 {
		return convo.Reply{}, ErrNoChoice
	}
	var r convo.Reply
	for _, ch := range resp.Choices {
		if ch == nil {
			continue
		}
		if err := addChoice(&r, ch); err != nil {
			return convo.Reply{}, err
		}
	}
	return r, nil
}

func addChoice(r *convo.Reply, ch *llms.ContentChoice) error {
	r.Text = join(r.Text, ch.Content)
	reasoning := ch.ReasoningContent
	if reasoning == "" {
		reasoning, _ = ch.GenerationInfo["ThinkingContent"].(string)
	}
	r.Reasoning = join(r.Reasoning, reasoning)
	if sig, _ := ch.GenerationInfo["ThinkingSignature"].(string); sig != "" {
		thinking, _ := ch.GenerationInfo["ThinkingContent"].(string)
		data, _ := json.Marshal(thinkingBlock{Type: "thinking", Thinking: thinking, Signature: sig}) // strings: always marshals
		r.ProviderState = append(r.ProviderState, sessionstore.ProviderState{Provider: "anthropic", Type: "thinking", Data: data})
	}
	if m, ok := ch.GenerationInfo["model"].(string); ok && r.Model == "" {
		r.Model = m
	}
	if r.Usage == nil {
		r.Usage = usage(ch.GenerationInfo)
	}
	calls := ch.ToolCalls
	if len(calls) == 0 && ch.FuncCall != nil {
		calls = []llms.ToolCall{{Type: "function", FunctionCall: ch.FuncCall}}
	}
	for _, tc := range calls {
		if tc.FunctionCall == nil {
			continue
		}
		c, err := toolCall(len(r.ToolCalls), tc)
		if err != nil {
			return err
		}
		r.ToolCalls = append(r.ToolCalls, c)
	}
	return nil
}

// thinkingBlock is an Anthropic thinking block as the Messages API writes
// it.
type thinkingBlock struct {
	Type      string `json:"type"`
	Thinking  string `json:"thinking"`
	Signature string `json:"signature"`
}

func join(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "\n\n" + b
}

func toolCall(i int, tc llms.ToolCall) (sessionstore.ToolCall, error) {
	fc := tc.FunctionCall
	c := sessionstore.ToolCall{CallID: tc.ID, Name: fc.Name}
	if fc.Arguments != "" {
		if !json.Valid([]byte(fc.Arguments)) {
			return sessionstore.ToolCall{}, fmt.Errorf("%w: call %q (%s)", ErrArguments, tc.ID, fc.Name)
		}
		c.Arguments = json.RawMessage(fc.Arguments)
	}
	if c.CallID == "" {
		h := sha256.Sum256([]byte(strconv.Itoa(i) + "\x00" + fc.Name + "\x00" + fc.Arguments))
		c.CallID = CallIDPrefix + hex.EncodeToString(h[:8])
	}
	return c, nil
}

// usage reads the token counts a LangChainGo provider puts in a choice's
// GenerationInfo: PromptTokens / InputTokens / input_tokens as input,
// CompletionTokens / OutputTokens / output_tokens as output,
// PromptCachedTokens / CacheReadInputTokens as cache reads and
// CacheCreationInputTokens as cache writes (integers of any Go type, or
// float64). It returns nil when none is above zero.
func usage(info map[string]any) *sessionstore.Usage {
	u := sessionstore.Usage{
		InputTokens:      count(info, "PromptTokens", "InputTokens", "input_tokens"),
		OutputTokens:     count(info, "CompletionTokens", "OutputTokens", "output_tokens"),
		CacheReadTokens:  count(info, "PromptCachedTokens", "CacheReadInputTokens"),
		CacheWriteTokens: count(info, "CacheCreationInputTokens"),
	}
	if u == (sessionstore.Usage{}) {
		return nil
	}
	return &u
}

func count(info map[string]any, keys ...string) int64 {
	for _, k := range keys {
		var n int64
		switch v := info[k].(type) {
		case int:
			n = int64(v)
		case int32:
			n = int64(v)
		case int64:
			n = v
		case float64:
			n = int64(v)
		case json.Number:
			n, _ = v.Int64()
		}
		if n > 0 {
			return n
		}
	}
	return 0
}
