package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
)

// A fork starts from an event of another session and shares its history
// up to there, without copying it: here a second attempt at an answer.
func ExampleStore_Fork() {
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
	if _, err := store.Append(ctx, meta.ID, sessionstore.AssistantText("41")); err != nil {
		log.Fatal(err)
	}

	// Try again from the question, in a session of its own.
	fork, err := store.Fork(ctx, meta.ID, question.ID)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Append(ctx, fork.ID, sessionstore.AssistantText("42")); err != nil {
		log.Fatal(err)
	}
	fmt.Println("forked from the question:", fork.ForkedFrom.Event == question.ID)
	for _, id := range []string{"parent", "fork"} {
		session := meta.ID
		if id == "fork" {
			session = fork.ID
		}
		path, err := store.Load(ctx, session)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(id, ":")
		for _, ev := range path {
			m, _ := ev.Message()
			fmt.Printf(" %q", m.Content)
		}
		fmt.Println()
	}
	// Output:
	// forked from the question: true
	// parent: "What is 6 x 7?" "41"
	// fork: "What is 6 x 7?" "42"
}
