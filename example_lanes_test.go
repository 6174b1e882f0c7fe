package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
)

// Lanes are named branches that survive a restart: a switch is durable,
// and the next append, also after Close and Open, goes onto the lane's
// tip.
func ExampleStore_SwitchLane() {
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
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "lanes"})
	if err != nil {
		log.Fatal(err)
	}
	q, err := store.Append(ctx, meta.ID, sessionstore.UserText("Fix the bug."))
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Append(ctx, meta.ID, sessionstore.AssistantText("Patch A.")); err != nil {
		log.Fatal(err)
	}
	// Try another answer on its own lane, starting from the question.
	if err := store.CreateLane(ctx, meta.ID, "try-b", q.ID); err != nil {
		log.Fatal(err)
	}
	if err := store.SwitchLane(ctx, meta.ID, "try-b"); err != nil {
		log.Fatal(err)
	}
	store.Close() // the switch is durable: a restart keeps it

	store, err = sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	b, err := store.Append(ctx, meta.ID, sessionstore.AssistantText("Patch B."))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Patch B follows the question:", b.ParentID == q.ID)
	lanes, err := store.Lanes(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range lanes {
		ev, err := store.Event(ctx, meta.ID, l.Tip)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s active=%v tip=%s\n", l.Name, l.Active, ev.Record)
	}
	// Output:
	// Patch B follows the question: true
	// main active=false tip={"content":"Patch A."}
	// try-b active=true tip={"content":"Patch B."}
}
