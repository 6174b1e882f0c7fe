package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
)

// Durable deltas: partial output survives the writer, and a reader in
// another process (here, a read-only Store on the same directory) follows
// the session's events and deltas from a cursor.
func ExampleStore_Tail() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sessionstore-tail-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	w, err := sessionstore.Open(dir, &sessionstore.Options{DurableDeltas: true})
	if err != nil {
		log.Fatal(err)
	}
	meta, err := w.Create(ctx, sessionstore.Meta{})
	if err != nil {
		log.Fatal(err)
	}
	r, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true})
	if err != nil {
		log.Fatal(err)
	}
	defer r.Close()
	tail, err := r.Tail(ctx, meta.ID, "") // "" from the start; else a Cursor it gave
	if err != nil {
		log.Fatal(err)
	}
	defer tail.Close()

	if _, err := w.Append(ctx, meta.ID, sessionstore.UserText("Hi")); err != nil {
		log.Fatal(err)
	}
	for _, tok := range []string{"Hello", ", wor"} {
		if err := w.Publish(ctx, meta.ID, sessionstore.Delta{Kind: sessionstore.DeltaText, Data: tok}); err != nil {
			log.Fatal(err)
		}
	}
	for range 3 {
		u := <-tail.C
		if u.Event != nil {
			fmt.Println("event", u.Event.Kind)
		} else {
			fmt.Printf("delta %q\n", u.Delta.Data)
		}
		_ = u.Cursor // what an SSE server sends as the event's id
	}

	// The writer stops mid-answer (a crash would do the same): after a
	// reopen, the answer so far is partial output, not an event.
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	w, err = sessionstore.Open(dir, &sessionstore.Options{DurableDeltas: true})
	if err != nil {
		log.Fatal(err)
	}
	defer w.Close()
	p, err := w.PartialOutput(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("partial %q\n", p.Text(sessionstore.DeltaText))
	// Output:
	// event message
	// delta "Hello"
	// delta ", wor"
	// partial "Hello, wor"
}
