package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
)

// After a crash between a tool call and its result, the repair answers the
// call with a synthetic result marked outcome_unknown, so the history a
// model sees is balanced and says the tool's effect is unknown.
func ExampleStore_RepairInterruptedToolCalls() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// A harness records a call, then dies before the tool returns.
	store, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "example"})
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range []sessionstore.Event{
		sessionstore.UserText("Deploy the service."),
		sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "run_tests"}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "ok"}),
		sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c2", Name: "deploy"}),
	} {
		if _, err := store.Append(ctx, meta.ID, ev); err != nil {
			log.Fatal(err)
		}
	}
	store.Close() // stands in for the crash: every Append above was durable

	// The next run opens the session and repairs it before anything else.
	store, err = sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	calls, err := store.InterruptedToolCalls(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range calls {
		c, _ := ev.ToolCall()
		fmt.Println("interrupted:", c.CallID, c.Name)
	}
	repaired, err := store.RepairInterruptedToolCalls(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("synthetic results:", len(repaired))

	path, err := store.Load(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range path {
		line := fmt.Sprintf("%s %s", ev.Role, ev.Kind)
		if ev.Kind == sessionstore.KindToolResult {
			r, _ := ev.ToolResult()
			line += fmt.Sprintf(" %s is_error=%t outcome=%q", r.CallID, r.IsError, r.Outcome)
		}
		fmt.Println(line)
	}

	again, err := store.RepairInterruptedToolCalls(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("second repair:", len(again))
	// Output:
	// interrupted: c2 deploy
	// synthetic results: 1
	// user message
	// assistant tool_call
	// tool tool_result c1 is_error=false outcome=""
	// assistant tool_call
	// tool tool_result c2 is_error=true outcome="outcome_unknown"
	// second repair: 0
}
