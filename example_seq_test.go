package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// seqExampleStore opens a store in a temporary directory with one session
// of four events, for the examples of the streaming forms.
func seqExampleStore() (*sessionstore.Store, uuid.UUID, func()) {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	store, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "example"})
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range []sessionstore.Event{
		sessionstore.UserText("List the files, please."),
		sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "ls", Arguments: []byte(`{"dir":"."}`)}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "ls: permission denied", IsError: true}),
		sessionstore.AssistantText("I cannot read that directory."),
	} {
		if _, err := store.Append(ctx, meta.ID, ev); err != nil {
			log.Fatal(err)
		}
	}
	return store, meta.ID, func() { store.Close(); os.RemoveAll(dir) }
}

// LoadSeq reads the active context a batch of records at a time, as the
// loop asks for them; breaking out of the loop stops the reading.
func ExampleStore_LoadSeq() {
	store, session, done := seqExampleStore()
	defer done()
	for ev, err := range store.LoadSeq(context.Background(), session) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Kind, string(ev.Record))
		if ev.Kind == sessionstore.KindToolResult {
			break
		}
	}
	// Output:
	// message {"content":"List the files, please."}
	// tool_call {"call_id":"c1","name":"ls","arguments":{"dir":"."}}
	// tool_result {"call_id":"c1","output":"ls: permission denied","is_error":true}
}

// FullPathSeq streams the whole history to an event, past compactions: an
// export of a long session without holding it in memory.
func ExampleStore_FullPathSeq() {
	store, session, done := seqExampleStore()
	defer done()
	ctx := context.Background()
	head, err := store.Head(ctx, session)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Compact(ctx, session, sessionstore.Compaction{Head: head, Summary: sessionstore.Summary{Text: "ls failed"}}); err != nil {
		log.Fatal(err)
	}
	n := 0
	for ev, err := range store.FullPathSeq(ctx, session, uuid.Nil) {
		if err != nil {
			log.Fatal(err)
		}
		n++
		fmt.Println(n, ev.Kind)
	}
	// Output:
	// 1 message
	// 2 tool_call
	// 3 tool_result
	// 4 message
	// 5 compaction
}

// TreeSeq walks the timeline without reading records: each node's
// Preview is a short text of its record, kept in the index.
func ExampleStore_TreeSeq() {
	store, session, done := seqExampleStore()
	defer done()
	for n, err := range store.TreeSeq(context.Background(), session) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%-11s %s\n", n.Kind, n.Preview)
	}
	// Output:
	// message     List the files, please.
	// tool_call   ls {"dir":"."}
	// tool_result error: ls: permission denied
	// message     I cannot read that directory.
}
