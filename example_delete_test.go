package sessionstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/sessionstore/sessionstore"
)

// Delete moves a session to the trash (gone from every other call);
// deleting it again is a no-op. A session that forks read from is refused
// until the forks are gone.
func ExampleStore_Delete() {
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

	parent, err := store.Create(ctx, sessionstore.Meta{Name: "parent"})
	if err != nil {
		log.Fatal(err)
	}
	ev, err := store.Append(ctx, parent.ID, sessionstore.UserText("hello"))
	if err != nil {
		log.Fatal(err)
	}
	fork, err := store.Create(ctx, sessionstore.Meta{Name: "fork", ForkedFrom: &sessionstore.ForkPoint{Session: parent.ID, Event: ev.ID}})
	if err != nil {
		log.Fatal(err)
	}

	err = store.Delete(ctx, parent.ID)
	fmt.Println("parent with a fork:", errors.Is(err, sessionstore.ErrHasForks))
	fmt.Println("fork:", store.Delete(ctx, fork.ID))
	fmt.Println("parent:", store.Delete(ctx, parent.ID))
	fmt.Println("again:", store.Delete(ctx, parent.ID))
	_, err = store.Meta(ctx, parent.ID)
	fmt.Println("gone:", errors.Is(err, sessionstore.ErrNotFound))
	// Output:
	// parent with a fork: true
	// fork: <nil>
	// parent: <nil>
	// again: <nil>
	// gone: true
}

// Prune with DryRun reports what a policy would remove; the same policy
// without DryRun removes exactly that.
func ExampleStore_Prune() {
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
	for _, name := range []string{"first", "second", "third"} {
		m, err := store.Create(ctx, sessionstore.Meta{Name: name, Labels: map[string]string{"kind": "scratch"}})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := store.Append(ctx, m.ID, sessionstore.UserText(name)); err != nil {
			log.Fatal(err)
		}
		if err := store.CloseSession(ctx, m.ID); err != nil {
			log.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // distinct UpdatedAt times
	}

	policy := sessionstore.PrunePolicy{KeepRecent: -1, KeepNewest: 1, Labels: map[string]string{"kind": "scratch"}, DryRun: true}
	plan, err := store.Prune(ctx, policy)
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range plan.Removed {
		fmt.Println("would remove", it.Meta.Name)
	}
	policy.DryRun = false
	done, err := store.Prune(ctx, policy)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("removed", len(done.Removed), "sessions, same bytes:", done.Bytes == plan.Bytes)
	left, err := store.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range left {
		fmt.Println("kept", m.Name)
	}
	// Output:
	// would remove first
	// would remove second
	// removed 2 sessions, same bytes: true
	// kept third
}

// GCStore collects the unreferenced blobs of every session.
func ExampleStore_GCStore() {
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
	for range 2 {
		m, err := store.Create(ctx, sessionstore.Meta{})
		if err != nil {
			log.Fatal(err)
		}
		if _, err := store.Append(ctx, m.ID, sessionstore.UserText("hi")); err != nil {
			log.Fatal(err)
		}
	}
	rep, err := store.GCStore(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("sessions:", rep.Sessions, "removed:", rep.Removed, "skipped:", len(rep.Skipped))
	// Output:
	// sessions: 2 removed: 0 skipped: 0
}

// A deleted session stays in the trash for Options.TrashFor (a week by
// default): Trash lists it, Undelete brings it back whole, Purge removes
// it for good.
func ExampleStore_Undelete() {
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

	meta, err := store.Create(ctx, sessionstore.Meta{Name: "keep me"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Append(ctx, meta.ID, sessionstore.UserText("hello")); err != nil {
		log.Fatal(err)
	}
	if err := store.Delete(ctx, meta.ID); err != nil {
		log.Fatal(err)
	}
	trash, err := store.Trash(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, it := range trash {
		fmt.Printf("in the trash: %q, kept %s\n", it.Meta.Name, it.PurgeAt.Sub(it.DeletedAt))
	}
	fmt.Println("undelete:", store.Undelete(ctx, meta.ID))
	events, err := store.Load(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("events back:", len(events))

	fmt.Println("purge:", store.Purge(ctx, meta.ID))
	err = store.Undelete(ctx, meta.ID)
	fmt.Println("gone for good:", errors.Is(err, sessionstore.ErrNotFound))
	// Output:
	// in the trash: "keep me", kept 168h0m0s
	// undelete: <nil>
	// events back: 1
	// purge: <nil>
	// gone for good: true
}
