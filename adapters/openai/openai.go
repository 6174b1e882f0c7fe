// Package openaiadapter maps a sessionstore session to the request types
// of the OpenAI Go SDK (github.com/openai/openai-go/v3) and an OpenAI
// response to the events to append, for both of the SDK's APIs:
//
//   - Chat Completions: [ChatMessages] turns the events of
//     sessionstore.Store.Load into []openai.ChatCompletionMessageParamUnion
//     (user messages, assistant messages with their tool_calls, one tool
//     message per result with its tool_call_id), and [ChatReply] /
//     [ChatEvents] read an *openai.ChatCompletion.
//   - Responses: [ResponsesInput] turns them into a
//     responses.ResponseInputParam (message items with input_text or
//     output_text, function_call items, function_call_output items with
//     their call_id), and [ResponseReply] / [ResponseEvents] read a
//     *responses.Response.
//
// The rules of which turns a request carries (calls paired with results,
// synthetic results for abandoned calls, compactions and branch summaries
// as user messages holding the summary) are package convo's; this package
// only maps convo's messages to the SDK's types and back. Calls still
// pending (convo.Context.Pending: the last turn's calls without results)
// are sent unanswered, which both APIs refuse: run them and append their
// results before the next request.
//
// # Mapping
//
// Tool call arguments are stored as the JSON the model wrote. OpenAI
// sends them as a string that is usually, but not always, valid JSON: a
// reply whose arguments are not valid JSON is stored as a JSON string
// holding them, and sent back as that string's contents, so a request
// repeats what the model wrote (valid JSON comes back as the store keeps
// it, compacted). Empty arguments are sent as "{}".
//
// OpenAI has no error flag on a tool result: an error result
// (ToolResult.IsError) is sent with its output after "Error: ".
//
// A message with no text and no tool calls carries nothing for the model
// and is left out. A refusal is kept as the reply's text (a refusal and
// content both present are joined by a blank line), since the session's
// message record has one text.
//
// # Reasoning
//
// Chat Completions has no state to send back: [ChatReply] keeps none.
//
// Reasoning models of the Responses API want their reasoning items back,
// in their place before the item that followed them, when the input
// repeats a turn that called functions. [ResponseReply] keeps the summary
// text (or, failing that, the reasoning text) of its reasoning items as
// Reply.Reasoning, for people reading the session, and each reasoning
// item itself as provider state (sessionstore.ProviderState, stored byte
// for byte, never shown as text):
//
//	Provider "openai" (ProviderName)
//	Type     "reasoning" (StateReasoning)
//	Data     the reasoning output item's JSON as the API returned it
//	         (id, summary, encrypted_content when the request asked for
//	         it with include "reasoning.encrypted_content", ...)
//
// attached to the item that followed it: the function call's
// ToolCall.ProviderState, or, for a reasoning item followed by a message
// (or by nothing), the Message.ProviderState, in output order. With the
// reasoning items an item is given, its own output item id is kept too,
// as state of Type "item_id" (StateItemID) whose Data is the id ("fc_...",
// "msg_..."): the API pairs a reasoning item with the item after it by
// that id. A reasoning item that preceded a hosted tool's item (left out
// of the reply) is not kept.
//
// [ResponsesInput] sends the reasoning items of a call right before its
// function_call item, and those of the message right before its message
// item (not at all when the message has no text: the item they preceded
// is not sent). A reasoning item goes as stored, and the item after it
// with its stored id, so the input repeats the output as the API gave
// it; when the following item's id was not kept (a session written by
// another program), the reasoning item goes without its id if it holds
// encrypted_content (the stateless form), and is left out if it does not
// (the API could pair it with nothing). So does a reasoning item whose
// item is not sent as such: one that preceded nothing, or one of a later
// reply joined into the message (convo joins assistant messages that
// follow one another, and the message item goes with the first item's
// id); such items go before those sent with their ids. A stateless request
// (ResponseNewParams.Store false) needs the encrypted content: ask for it
// with Include "reasoning.encrypted_content". Only state whose Provider
// is "openai" is sent.

// Usage follows the session's convention (that of Anthropic's API):
// InputTokens counts the input tokens neither read from nor written to the
// cache, so that InputTokens + CacheReadTokens + CacheWriteTokens is the
// prompt's size. OpenAI's prompt_tokens (input_tokens) includes the cached
// tokens, which are subtracted.
//
// Only function tools are mapped. A reply with a custom tool call fails
// with [ErrUnsupported]; the items of hosted tools the API ran itself (web
// search, file search, code interpreter and the like) are done when the
// response arrives, need no result from the harness, and are left out of
// the reply.
//
// This package writes nothing: it builds values; what an append of its
// events leaves durable is sessionstore's contract (AppendBatch).
package openaiadapter

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/responses"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
)

// ErrNoReply is returned for a response that holds no reply: a nil
// response, a chat completion without choices, or a failed response.
var ErrNoReply = errors.New("openaiadapter: response holds no reply")

// ErrUnsupported is returned for a reply that holds a tool call this
// package does not map (a custom tool call).
var ErrUnsupported = errors.New("openaiadapter: unsupported tool call")

// ErrorPrefix introduces the output of an error result in a request.
const ErrorPrefix = "Error: "

// ProviderName is the Provider of the state this package writes and sends
// back (see the package doc).
const ProviderName = "openai"

// The Types of this package's provider state.
const (
	// StateReasoning is a Responses API reasoning item, as its Data.
	StateReasoning = "reasoning"
	// StateItemID is the output item id of the item a reasoning item
	// preceded.
	StateItemID = "item_id"
)

// ChatMessages returns the Chat Completions messages of events, a context
// as sessionstore.Store.Load returns it (records resolved): the history
// for a ChatCompletionNewParams.Messages, after the caller's system or
// developer message.
//
// Errors: those of convo.Build (convo.ErrUnresolved for a blob record not
// read yet, a decode error for a record that is not its kind's shape).
func ChatMessages(events []sessionstore.Event) ([]openai.ChatCompletionMessageParamUnion, error) {
	c, err := convo.Build(events, nil)
	if err != nil {
		return nil, err
	}
	return ChatMessagesOf(c), nil
}

// ChatMessagesOf returns the Chat Completions messages of a context built
// with convo.Build (for callers that set convo.Options or read
// Context.Pending).
func ChatMessagesOf(c convo.Context) []openai.ChatCompletionMessageParamUnion {
	out := make([]openai.ChatCompletionMessageParamUnion, 0, len(c.Messages))
	for _, m := range c.Messages {
		switch m.Role {
		case sessionstore.RoleAssistant:
			if m.Text == "" && len(m.ToolCalls) == 0 {
				continue
			}
			var a openai.ChatCompletionAssistantMessageParam
			if m.Text != "" {
				a.Content.OfString = openai.String(m.Text)
			}
			for _, tc := range m.ToolCalls {
				a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
						ID: tc.CallID,
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{
							Name: tc.Name, Arguments: ArgumentsText(tc.Arguments),
						},
					},
				})
			}
			out = append(out, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
		case sessionstore.RoleTool:
			out = append(out, openai.ToolMessage(resultText(m.Result), m.Result.CallID))
		default:
			if m.Text == "" {
				continue
			}
			out = append(out, openai.UserMessage(m.Text))
		}
	}
	return out
}

// ChatReply returns the reply of a chat completion: its first choice's
// content (and refusal), function tool calls, the model and the usage.
//
// Errors: ErrNoReply (nil or no choices), ErrUnsupported (a custom tool
// call).
func ChatReply(c *openai.ChatCompletion) (convo.Reply, error) {
	if c == nil || len(c.Choices) == 0 {
		return convo.Reply{}, fmt.Errorf("%w: no choices", ErrNoReply)
	}
	msg := c.Choices[0].Message
	r := convo.Reply{Text: joinText(msg.Content, msg.Refusal), Model: c.Model}
	for i, tc := range msg.ToolCalls {
		if tc.Type != "function" {
			return convo.Reply{}, fmt.Errorf("%w: tool call %d (%s) is of type %q", ErrUnsupported, i, tc.ID, tc.Type)
		}
		r.ToolCalls = append(r.ToolCalls, sessionstore.ToolCall{
			CallID: tc.ID, Name: tc.Function.Name, Arguments: ArgumentsJSON(tc.Function.Arguments),
		})
	}
	if c.JSON.Usage.Valid() {
		u := c.Usage
		r.Usage = usage(u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens, u.PromptTokensDetails.CacheWriteTokens)
	}
	return r, nil
}

// ChatEvents returns the events of a chat completion's reply, to append
// with one AppendBatch: the assistant message, then one tool_call event
// per call (convo.Reply.Events).
func ChatEvents(c *openai.ChatCompletion) ([]sessionstore.Event, error) {
	r, err := ChatReply(c)
	if err != nil {
		return nil, err
	}
	return r.Events(), nil
}

// ResponsesInput returns the Responses API input items of events, a
// context as sessionstore.Store.Load returns it (records resolved), for a
// ResponseNewParams.Input (OfInputItemList), with the caller's
// instructions in ResponseNewParams.Instructions. Reasoning items come
// back in their place (see the package doc).
//
// Errors: those of convo.Build, and a decode error naming the message's
// first event for reasoning state whose Data is not a JSON object.
func ResponsesInput(events []sessionstore.Event) (responses.ResponseInputParam, error) {
	c, err := convo.Build(events, nil)
	if err != nil {
		return nil, err
	}
	return responsesInput(c, true)
}

// ResponsesInputOf returns the Responses API input items of a context
// built with convo.Build. Reasoning state whose Data is not a JSON object
// is left out.
func ResponsesInputOf(c convo.Context) responses.ResponseInputParam {
	out, _ := responsesInput(c, false) // not strict: no error
	return out
}

func responsesInput(c convo.Context, strict bool) (responses.ResponseInputParam, error) {
	out := make(responses.ResponseInputParam, 0, len(c.Messages))
	for _, m := range c.Messages {
		switch m.Role {
		case sessionstore.RoleAssistant:
			// bad names the message of a state that does not decode.
			bad := func(err error) error {
				var first string
				if len(m.Events) > 0 {
					first = m.Events[0].String()
				}
				return fmt.Errorf("openaiadapter: reasoning state of the message of event %s: %w", first, err)
			}
			if m.Text != "" {
				items, linked, err := reasoningItems(m.ProviderState)
				if err != nil && strict {
					return nil, bad(err)
				}
				out = append(out, items...)
				msg := &responses.ResponseOutputMessageParam{
					Content: []responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{
						Text: m.Text, Annotations: []responses.ResponseOutputTextAnnotationUnionParam{},
					}}},
					Status: responses.ResponseOutputMessageStatusCompleted,
				}
				if linked != "" {
					msg.ID = linked
				}
				out = append(out, responses.ResponseInputItemUnionParam{OfOutputMessage: msg})
			}
			for _, tc := range m.ToolCalls {
				items, linked, err := reasoningItems(tc.ProviderState)
				if err != nil && strict {
					return nil, bad(err)
				}
				out = append(out, items...)
				fc := &responses.ResponseFunctionToolCallParam{CallID: tc.CallID, Name: tc.Name, Arguments: ArgumentsText(tc.Arguments)}
				if linked != "" {
					fc.ID = openai.String(linked)
				}
				out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: fc})
			}
		case sessionstore.RoleTool:
			out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCallOutput: &responses.ResponseInputItemFunctionCallOutputParam{
				CallID: openai.String(m.Result.CallID),
				Output: responses.ResponseInputItemFunctionCallOutputOutputUnionParam{OfString: openai.String(resultText(m.Result))},
			}})
		default:
			if m.Text == "" {
				continue
			}
			out = append(out, responses.ResponseInputItemUnionParam{OfMessage: &responses.EasyInputMessageParam{
				Role: responses.EasyInputMessageRoleUser,
				Type: responses.EasyInputMessageTypeMessage,
				Content: responses.EasyInputMessageContentUnionParam{OfInputItemContentList: responses.ResponseInputMessageContentListParam{
					{OfInputText: &responses.ResponseInputTextParam{Text: m.Text}},
				}},
			}})
		}
	}
	return out, nil
}

// reasoningItems returns the input items of the reasoning state in st
// (an item's, see the package doc), and the id to send the item after
// them with: its stored id when a reasoning item goes with its own id,
// else "". A reasoning item belongs to the item whose id follows it in st
// (ResponseReply writes each item's id after its reasoning); the item is
// sent with the first id in st, so only the reasoning that preceded that
// item goes with its id, right before it, and any other (reasoning that
// preceded nothing, or an item of a later event of the turn that joined
// this one) is an item whose following item's id was not kept: sent
// without its id, first, when it holds encrypted content, else left out.
// A reasoning whose Data is not a JSON object is left out and reported in
// err, after the rest is done.
func reasoningItems(st []sessionstore.ProviderState) (items []responses.ResponseInputItemUnionParam, linked string, err error) {
	// following[i] is the id of the first item id state after st[i]:
	// that of the item the reasoning at i preceded.
	following := make([]string, len(st))
	var itemID string
	for i := len(st) - 1; i >= 0; i-- {
		if i+1 < len(st) {
			following[i] = following[i+1]
			if s := st[i+1]; s.Provider == ProviderName && s.Type == StateItemID {
				following[i] = string(s.Data)
			}
		}
		if s := st[i]; s.Provider == ProviderName && s.Type == StateItemID {
			itemID = string(s.Data) // the first one, when the loop ends
		}
	}
	var paired []responses.ResponseInputItemUnionParam
	for i, s := range st {
		if s.Provider != ProviderName || s.Type != StateReasoning {
			continue
		}
		var fields map[string]json.RawMessage
		if e := json.Unmarshal(s.Data, &fields); e != nil || fields == nil {
			if e == nil {
				e = errors.New("not a JSON object")
			}
			err = cmp.Or(err, e)
			continue
		}
		data := json.RawMessage(s.Data)
		switch {
		case !hasString(fields, "id"):
			// No id to pair by: the stateless form, as it was stored.
		case itemID != "" && following[i] == itemID:
			linked = itemID
			r := param.Override[responses.ResponseReasoningItemParam](data)
			paired = append(paired, responses.ResponseInputItemUnionParam{OfReasoning: &r})
			continue
		case hasString(fields, "encrypted_content"):
			delete(fields, "id")
			data, _ = json.Marshal(fields) // raw members: always marshals
		default:
			continue // the API could pair it with nothing
		}
		r := param.Override[responses.ResponseReasoningItemParam](data)
		items = append(items, responses.ResponseInputItemUnionParam{OfReasoning: &r})
	}
	return append(items, paired...), linked, err
}

// hasString reports whether fields holds name as a JSON string that is
// not empty.
func hasString(fields map[string]json.RawMessage, name string) bool {
	var v string
	return json.Unmarshal(fields[name], &v) == nil && v != ""
}

// ResponseReply returns the reply of a Responses API response: the text of
// its message items (output_text, and refusals), its function_call items,
// the summary (or, failing that, the text) of its reasoning items, each
// reasoning item as the provider state of the item after it (see the
// package doc), the model and the usage. Items of hosted tools are left
// out.
//
// Errors: ErrNoReply (nil, or a response with an error), ErrUnsupported
// (a custom tool call).
func ResponseReply(r *responses.Response) (convo.Reply, error) {
	if r == nil {
		return convo.Reply{}, fmt.Errorf("%w: nil response", ErrNoReply)
	}
	if r.Error.Code != "" || r.Error.Message != "" {
		return convo.Reply{}, fmt.Errorf("%w: response %s failed: %s: %s", ErrNoReply, r.ID, r.Error.Code, r.Error.Message)
	}
	out := convo.Reply{Model: string(r.Model)}
	var text, reasoning []string
	// pending holds the reasoning items not yet given to the item after
	// them; withID returns them and that item's id.
	var pending []sessionstore.ProviderState
	withID := func(id string) []sessionstore.ProviderState {
		if len(pending) == 0 {
			return nil
		}
		st := pending
		if id != "" {
			st = append(st, sessionstore.ProviderState{Provider: ProviderName, Type: StateItemID, Data: []byte(id)})
		}
		pending = nil
		return st
	}
	for i, item := range r.Output {
		switch item.Type {
		case "message":
			out.ProviderState = append(out.ProviderState, withID(item.ID)...)
			for _, part := range item.AsMessage().Content {
				switch part.Type {
				case "output_text":
					text = appendNonEmpty(text, part.Text)
				case "refusal":
					text = appendNonEmpty(text, part.Refusal)
				}
			}
		case "function_call":
			fc := item.AsFunctionCall()
			out.ToolCalls = append(out.ToolCalls, sessionstore.ToolCall{
				CallID: fc.CallID, Name: fc.Name, Arguments: ArgumentsJSON(fc.Arguments),
				ProviderState: withID(fc.ID),
			})
		case "reasoning":
			ri := item.AsReasoning()
			data := []byte(item.RawJSON())
			if len(data) == 0 { // not read from JSON
				data, _ = json.Marshal(ri)
			}
			pending = append(pending, sessionstore.ProviderState{Provider: ProviderName, Type: StateReasoning, Data: data})
			var parts []string
			for _, s := range ri.Summary {
				parts = appendNonEmpty(parts, s.Text)
			}
			if len(parts) == 0 {
				for _, c := range ri.Content {
					parts = appendNonEmpty(parts, c.Text)
				}
			}
			reasoning = append(reasoning, parts...)
		case "custom_tool_call":
			return convo.Reply{}, fmt.Errorf("%w: output item %d (%s) is a custom tool call", ErrUnsupported, i, item.CallID)
		default:
			pending = nil // a hosted tool's item, left out: its reasoning too
		}
	}
	out.ProviderState = append(out.ProviderState, pending...) // reasoning that nothing followed
	out.Text = strings.Join(text, "\n\n")
	out.Reasoning = strings.Join(reasoning, "\n\n")
	if r.JSON.Usage.Valid() {
		u := r.Usage
		out.Usage = usage(u.InputTokens, u.OutputTokens, u.InputTokensDetails.CachedTokens, u.InputTokensDetails.CacheWriteTokens)
	}
	return out, nil
}

// ResponseEvents returns the events of a Responses API response's reply,
// to append with one AppendBatch (convo.Reply.Events).
func ResponseEvents(r *responses.Response) ([]sessionstore.Event, error) {
	reply, err := ResponseReply(r)
	if err != nil {
		return nil, err
	}
	return reply.Events(), nil
}

// ArgumentsText returns stored tool call arguments as the string OpenAI
// takes: the JSON itself, the contents of a JSON string (arguments a
// model wrote that were not valid JSON, as ArgumentsJSON stores them), or
// "{}" for none.
func ArgumentsText(args json.RawMessage) string {
	if len(args) == 0 || string(args) == "null" {
		return "{}"
	}
	if args[0] == '"' {
		var s string
		if json.Unmarshal(args, &s) == nil {
			return s
		}
	}
	return string(args)
}

// ArgumentsJSON returns the arguments string of an OpenAI tool call as the
// JSON to store: the string itself when it is valid JSON (compacted by the
// store), else a JSON string holding it, so that ArgumentsText gives the
// same string back. An empty string is stored as no arguments.
func ArgumentsJSON(s string) json.RawMessage {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	if json.Valid([]byte(s)) && strings.TrimSpace(s)[0] != '"' {
		return json.RawMessage(s)
	}
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

func resultText(r *sessionstore.ToolResult) string {
	if r.IsError {
		return ErrorPrefix + r.Output
	}
	return r.Output
}

// usage returns the session's usage of an OpenAI count whose input
// includes the cached tokens.
func usage(input, output, cacheRead, cacheWrite int64) *sessionstore.Usage {
	return &sessionstore.Usage{
		InputTokens:      max(input-cacheRead-cacheWrite, 0),
		OutputTokens:     output,
		CacheReadTokens:  cacheRead,
		CacheWriteTokens: cacheWrite,
	}
}

func joinText(a, b string) string {
	return strings.Join(appendNonEmpty(appendNonEmpty(nil, a), b), "\n\n")
}

func appendNonEmpty(list []string, s string) []string {
	if s == "" {
		return list
	}
	return append(list, s)
}
