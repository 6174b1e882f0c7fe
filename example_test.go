package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
)

// The basic cycle: create a session, append events, load the active path.
func Example() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	meta, err := store.Create(ctx, sessionstore.Meta{Name: "example"})
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range []sessionstore.Event{
		sessionstore.UserText("What is in this directory?"),
		sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "ls"}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "go.mod main.go"}),
		sessionstore.AssistantText("A Go module with one file."),
	} {
		if _, err := store.Append(ctx, meta.ID, ev); err != nil {
			log.Fatal(err)
		}
	}
	path, err := store.Load(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range path {
		fmt.Printf("%s %s %s\n", ev.Role, ev.Kind, ev.Record)
	}
	// Output:
	// user message {"content":"What is in this directory?"}
	// assistant tool_call {"call_id":"c1","name":"ls"}
	// tool tool_result {"call_id":"c1","output":"go.mod main.go"}
	// assistant message {"content":"A Go module with one file."}
}

// Branch is two-phase: it selects the parent of the next event, and HEAD
// moves only when that event is appended.
func ExampleStore_Branch() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	meta, err := store.Create(ctx, sessionstore.Meta{})
	if err != nil {
		log.Fatal(err)
	}
	ask, _ := store.Append(ctx, meta.ID, sessionstore.UserText("Try approach A."))
	a, _ := store.Append(ctx, meta.ID, sessionstore.AssistantText("Approach A has a problem."))

	if err := store.Branch(ctx, meta.ID, ask.ID); err != nil {
		log.Fatal(err)
	}
	head, _ := store.Head(ctx, meta.ID)
	fmt.Println("HEAD unchanged after Branch:", head == a.ID)

	b, _ := store.Append(ctx, meta.ID, sessionstore.AssistantText("Approach B."))
	head, _ = store.Head(ctx, meta.ID)
	fmt.Println("HEAD moved to the new event:", head == b.ID)
	fmt.Println("new event branches from the question:", b.BranchFrom == ask.ID && b.ParentID == ask.ID)

	path, _ := store.Load(ctx, meta.ID)
	for _, ev := range path {
		m, _ := ev.Message()
		fmt.Println(" ", m.Content)
	}
	children, _ := store.Children(ctx, meta.ID, ask.ID)
	fmt.Println("answers to the question:", len(children))
	// Output:
	// HEAD unchanged after Branch: true
	// HEAD moved to the new event: true
	// new event branches from the question: true
	//   Try approach A.
	//   Approach B.
	// answers to the question: 2
}

// ListRecent returns the newest sessions first, reading only the newest
// part of the store's catalogue, however many sessions the store holds.
func ExampleStore_ListRecent() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	store, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	for _, name := range []string{"first", "second", "third", "fourth"} {
		if _, err := store.Create(ctx, sessionstore.Meta{Name: name}); err != nil {
			log.Fatal(err)
		}
	}
	recent, err := store.ListRecent(ctx, 2)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range recent {
		fmt.Println(m.Name)
	}
	// Output:
	// fourth
	// third
}
