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
// Reasoning is not sent back to either API. Chat Completions has no field
// for it; the Responses API takes back a reasoning item only with its id
// and encrypted content, which the session does not store, so
// [ResponseReply] keeps the reasoning summary text as Reply.Reasoning
// (for people reading the session) and [ResponsesInput] leaves it out.
//
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
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/openai/openai-go/v3"
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
// instructions in ResponseNewParams.Instructions.
//
// Errors: those of convo.Build.
func ResponsesInput(events []sessionstore.Event) (responses.ResponseInputParam, error) {
	c, err := convo.Build(events, nil)
	if err != nil {
		return nil, err
	}
	return ResponsesInputOf(c), nil
}

// ResponsesInputOf returns the Responses API input items of a context
// built with convo.Build.
func ResponsesInputOf(c convo.Context) responses.ResponseInputParam {
	out := make(responses.ResponseInputParam, 0, len(c.Messages))
	for _, m := range c.Messages {
		switch m.Role {
		case sessionstore.RoleAssistant:
			if m.Text != "" {
				out = append(out, responses.ResponseInputItemUnionParam{OfOutputMessage: &responses.ResponseOutputMessageParam{
					Content: []responses.ResponseOutputMessageContentUnionParam{{OfOutputText: &responses.ResponseOutputTextParam{
						Text: m.Text, Annotations: []responses.ResponseOutputTextAnnotationUnionParam{},
					}}},
					Status: responses.ResponseOutputMessageStatusCompleted,
				}})
			}
			for _, tc := range m.ToolCalls {
				out = append(out, responses.ResponseInputItemUnionParam{OfFunctionCall: &responses.ResponseFunctionToolCallParam{
					CallID: tc.CallID, Name: tc.Name, Arguments: ArgumentsText(tc.Arguments),
				}})
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
	return out
}

// ResponseReply returns the reply of a Responses API response: the text of
// its message items (output_text, and refusals), its function_call items,
// the summary (or, failing that, the text) of its reasoning items, the
// model and the usage. Items of hosted tools are left out.
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
	for i, item := range r.Output {
		switch item.Type {
		case "message":
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
			})
		case "reasoning":
			ri := item.AsReasoning()
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
		}
	}
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
