package sessionstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// A harness chooses the event's id before the first attempt, so that a
// retry after a timeout stores nothing twice; a stale writer that expects
// an older HEAD gets ErrConflict.
func ExampleStore_AppendWith() {
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
	question, err := store.Append(ctx, meta.ID, sessionstore.UserText("What is 6 x 7?"))
	if err != nil {
		log.Fatal(err)
	}

	answer := sessionstore.AssistantText("42")
	answer.ID = uuid.Must(uuid.NewV7()) // chosen once, reused by every retry
	opts := sessionstore.AppendOptions{ExpectParent: question.ID}
	first, err := store.AppendWith(ctx, meta.ID, opts, answer)
	if err != nil {
		log.Fatal(err)
	}
	// The reply to the first attempt was lost; the harness sends it again.
	retry, err := store.AppendWith(ctx, meta.ID, opts, answer)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same event:", retry[0].ID == first[0].ID && retry[0].Time.Equal(first[0].Time))

	// Another writer still thinks the question is HEAD.
	_, err = store.AppendWith(ctx, meta.ID, opts, sessionstore.AssistantText("41"))
	fmt.Println("stale writer conflicts:", errors.Is(err, sessionstore.ErrConflict))

	path, err := store.Load(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("events:", len(path))
	// Output:
	// same event: true
	// stale writer conflicts: true
	// events: 2
}

// An assistant message announced two tool calls; only the first was
// recorded before the process died. The repair answers the recorded one
// with outcome_unknown and the other with not_started.
func ExampleStore_NotStartedToolCalls() {
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
	read := sessionstore.ToolCall{CallID: "c1", Name: "read_file"}
	deploy := sessionstore.ToolCall{CallID: "c2", Name: "deploy"}
	for _, ev := range []sessionstore.Event{
		sessionstore.UserText("Check the config, then deploy."),
		sessionstore.AssistantMessage(sessionstore.Message{Content: "On it.", ToolCalls: []sessionstore.ToolCall{read, deploy}}),
		sessionstore.ToolCallEvent(read), // recorded before running; then the crash
	} {
		if _, err := store.Append(ctx, meta.ID, ev); err != nil {
			log.Fatal(err)
		}
	}

	notStarted, err := store.NotStartedToolCalls(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range notStarted {
		fmt.Println("not started:", c.Name)
	}
	repaired, err := store.RepairInterruptedToolCalls(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range repaired {
		r, err := ev.ToolResult()
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(r.CallID, r.Outcome)
	}
	// Output:
	// not started: deploy
	// c1 outcome_unknown
	// c2 not_started
}
