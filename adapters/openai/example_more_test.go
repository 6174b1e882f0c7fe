package openaiadapter_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/sessionstore/sessionstore"
	openaiadapter "github.com/sessionstore/sessionstore/adapters/openai"
	"github.com/sessionstore/sessionstore/convo"
)

// history is a short context as Load returns it: a question, a reply with
// a call, and the call's result.
func history() []sessionstore.Event {
	call := sessionstore.ToolCall{CallID: "call_1", Name: "ls", Arguments: json.RawMessage(`{"dir":"."}`)}
	return []sessionstore.Event{
		sessionstore.UserText("What is here?"),
		sessionstore.AssistantMessage(sessionstore.Message{Content: "Listing.", ToolCalls: []sessionstore.ToolCall{call}}),
		sessionstore.ToolCallEvent(call),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "call_1", Output: "go.mod"}),
	}
}

// A chat completion's reply: text, calls, model and usage (cached tokens
// apart from the rest of the input).
func ExampleChatReply() {
	var c openai.ChatCompletion
	if err := json.Unmarshal([]byte(`{"id":"c","object":"chat.completion","model":"gpt-test","choices":[{"index":0,
	  "message":{"role":"assistant","content":"Done."}}],
	  "usage":{"prompt_tokens":100,"completion_tokens":5,"total_tokens":105,"prompt_tokens_details":{"cached_tokens":60}}}`), &c); err != nil {
		log.Fatal(err)
	}
	reply, err := openaiadapter.ChatReply(&c)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s %s %+v\n", reply.Model, reply.Text, *reply.Usage)
	// Output:
	// gpt-test Done. {InputTokens:40 OutputTokens:5 CacheReadTokens:60 CacheWriteTokens:0}
}

// A context built with convo.Build, here to see the calls still pending
// before a request.
func ExampleChatMessagesOf() {
	c, err := convo.Build(history()[:3], nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending:", c.Pending[0].CallID)
	c, err = convo.Build(history(), nil)
	if err != nil {
		log.Fatal(err)
	}
	msgs := openaiadapter.ChatMessagesOf(c)
	b, err := json.Marshal(msgs)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
	// Output:
	// pending: call_1
	// [{"content":"What is here?","role":"user"},{"content":"Listing.","tool_calls":[{"id":"call_1","function":{"arguments":"{\"dir\":\".\"}","name":"ls"},"type":"function"}],"role":"assistant"},{"content":"go.mod","tool_call_id":"call_1","role":"tool"}]
}

// The Responses API input of a built context.
func ExampleResponsesInputOf() {
	c, err := convo.Build(history(), nil)
	if err != nil {
		log.Fatal(err)
	}
	b, err := json.Marshal(openaiadapter.ResponsesInputOf(c))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
	// Output:
	// [{"content":[{"text":"What is here?","type":"input_text"}],"role":"user","type":"message"},{"content":[{"annotations":[],"text":"Listing.","type":"output_text"}],"status":"completed","role":"assistant","type":"message"},{"arguments":"{\"dir\":\".\"}","call_id":"call_1","name":"ls","type":"function_call"},{"output":"go.mod","call_id":"call_1","type":"function_call_output"}]
}

// A Responses API response's reply: output text, calls, the reasoning
// summary and usage.
func ExampleResponseReply() {
	var r responses.Response
	if err := json.Unmarshal([]byte(`{"id":"resp","object":"response","model":"gpt-test","status":"completed","output":[
	  {"type":"reasoning","id":"rs","summary":[{"type":"summary_text","text":"List first."}]},
	  {"type":"function_call","id":"fc","call_id":"call_1","name":"ls","arguments":"{}"}],
	  "usage":{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":4,"output_tokens_details":{"reasoning_tokens":2},"total_tokens":14}}`), &r); err != nil {
		log.Fatal(err)
	}
	reply, err := openaiadapter.ResponseReply(&r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(reply.Reasoning, reply.ToolCalls[0].Name, reply.Usage.InputTokens)
	// Output:
	// List first. ls 10
}

// The events of a Responses API response, for one AppendBatch.
func ExampleResponseEvents() {
	var r responses.Response
	if err := json.Unmarshal([]byte(`{"id":"resp","object":"response","model":"gpt-test","status":"completed","output":[
	  {"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Hi.","annotations":[]}]}]}`), &r); err != nil {
		log.Fatal(err)
	}
	evs, err := openaiadapter.ResponseEvents(&r)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(evs), evs[0].Kind, string(evs[0].Record))
	// Output:
	// 1 message {"content":"Hi.","model":"gpt-test"}
}

// Stored arguments as the string OpenAI takes.
func ExampleArgumentsText() {
	fmt.Println(openaiadapter.ArgumentsText(json.RawMessage(`{"dir":"."}`)))
	fmt.Println(openaiadapter.ArgumentsText(nil))
	// Output:
	// {"dir":"."}
	// {}
}
