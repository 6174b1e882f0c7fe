package anthropicadapter_test

import (
	"encoding/json"
	"fmt"
	"log"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/sessionstore/sessionstore"
	anthropicadapter "github.com/sessionstore/sessionstore/adapters/anthropic"
	"github.com/sessionstore/sessionstore/convo"
)

// A message's reply: text, tool_use blocks as calls, thinking as
// Reasoning, usage with the cache's reads and writes.
func ExampleReply() {
	var msg anthropic.Message
	if err := json.Unmarshal([]byte(`{"id":"m","type":"message","role":"assistant","model":"claude-test",
	  "content":[{"type":"thinking","thinking":"Look first.","signature":"sig"},{"type":"text","text":"Listing."},
	    {"type":"tool_use","id":"toolu_1","name":"ls","input":{"dir":"."}}],
	  "usage":{"input_tokens":5,"output_tokens":9,"cache_read_input_tokens":100,"cache_creation_input_tokens":20}}`), &msg); err != nil {
		log.Fatal(err)
	}
	reply, err := anthropicadapter.Reply(&msg)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(reply.Text, reply.Reasoning, reply.ToolCalls[0].Name, string(reply.ToolCalls[0].Arguments))
	fmt.Printf("%+v\n", *reply.Usage)
	// Output:
	// Listing. Look first. ls {"dir":"."}
	// {InputTokens:5 OutputTokens:9 CacheReadTokens:100 CacheWriteTokens:20}
}

// The messages of a built context: the two results of a turn's parallel
// calls go in one user message, and the user's next words join it.
func ExampleMessagesOf() {
	a := sessionstore.ToolCall{CallID: "toolu_1", Name: "ls"}
	b := sessionstore.ToolCall{CallID: "toolu_2", Name: "pwd"}
	c, err := convo.Build([]sessionstore.Event{
		sessionstore.UserText("Where am I?"),
		sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: []sessionstore.ToolCall{a, b}}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "toolu_1", Output: "go.mod"}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "toolu_2", Output: "permission denied", IsError: true}),
		sessionstore.UserText("Thanks."),
	}, nil)
	if err != nil {
		log.Fatal(err)
	}
	out, err := json.Marshal(anthropicadapter.MessagesOf(c))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(out))
	// Output:
	// [{"content":[{"text":"Where am I?","type":"text"}],"role":"user"},{"content":[{"id":"toolu_1","input":{},"name":"ls","type":"tool_use"},{"id":"toolu_2","input":{},"name":"pwd","type":"tool_use"}],"role":"assistant"},{"content":[{"tool_use_id":"toolu_1","content":[{"text":"go.mod","type":"text"}],"type":"tool_result"},{"tool_use_id":"toolu_2","is_error":true,"content":[{"text":"permission denied","type":"text"}],"type":"tool_result"},{"text":"Thanks.","type":"text"}],"role":"user"}]
}
