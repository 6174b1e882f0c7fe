package sessionstore

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/google/uuid"
)

// A consumer that records the last event it handled (here in a
// variable; in a real one, beside its own output) resumes after a
// restart with SubscribeFrom: the events it missed come first, then the
// live ones, none twice.
func ExampleStore_SubscribeFrom() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	meta, err := store.Create(ctx, Meta{Name: "consumed"})
	if err != nil {
		log.Fatal(err)
	}

	var last uuid.UUID // the consumer's offset: uuid.Nil, from the first event
	consume := func(n int) {
		sub, err := store.SubscribeFrom(ctx, meta.ID, last)
		if err != nil {
			log.Fatal(err)
		}
		defer sub.Close()
		for range n {
			u := <-sub.C
			if u.Event == nil {
				continue
			}
			msg, _ := u.Event.Message()
			fmt.Println("handled:", msg.Content)
			last = u.Event.ID
		}
	}

	for _, text := range []string{"first", "second"} {
		if _, err := store.Append(ctx, meta.ID, UserText(text)); err != nil {
			log.Fatal(err)
		}
	}
	consume(2) // the consumer runs, handles both, and stops

	// While it is away, the session goes on.
	if _, err := store.Append(ctx, meta.ID, AssistantText("third")); err != nil {
		log.Fatal(err)
	}
	consume(1) // back: it gets what it missed, and nothing twice
	// Output:
	// handled: first
	// handled: second
	// handled: third
}
