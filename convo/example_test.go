package convo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
)

// One turn of an agent loop: build the request from Load, append the
// model's reply and the tool's result, and build the next request.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "convo-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	m, err := st.Create(ctx, sessionstore.Meta{Name: "example"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := st.Append(ctx, m.ID, sessionstore.UserText("What is in go.mod?")); err != nil {
		log.Fatal(err)
	}

	// The model answers with a tool call (an adapter reads this from its
	// SDK's response).
	reply := convo.Reply{Model: "model-1", ToolCalls: []sessionstore.ToolCall{
		{CallID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"go.mod"}`)},
	}}
	if _, err := st.AppendBatch(ctx, m.ID, reply.Events()...); err != nil {
		log.Fatal(err)
	}
	evs, err := st.Load(ctx, m.ID)
	if err != nil {
		log.Fatal(err)
	}
	c, err := convo.Build(evs, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, call := range c.Pending { // run the tools, record their results
		if _, err := st.Append(ctx, m.ID, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: call.CallID, Output: "module example"})); err != nil {
			log.Fatal(err)
		}
	}
	if evs, err = st.Load(ctx, m.ID); err != nil {
		log.Fatal(err)
	}
	if c, err = convo.Build(evs, nil); err != nil {
		log.Fatal(err)
	}
	for _, msg := range c.Messages {
		switch {
		case msg.Result != nil:
			fmt.Printf("%s: %s -> %q\n", msg.Role, msg.Result.CallID, msg.Result.Output)
		case len(msg.ToolCalls) > 0:
			fmt.Printf("%s: calls %s\n", msg.Role, msg.ToolCalls[0].Name)
		default:
			fmt.Printf("%s: %s\n", msg.Role, msg.Text)
		}
	}
	fmt.Println("pending:", len(c.Pending))
	// Output:
	// user: What is in go.mod?
	// assistant: calls read_file
	// tool: call_1 -> "module example"
	// pending: 0
}
