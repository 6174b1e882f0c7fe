// Command lifecycle walks a session through the calls a harness uses over
// months: a fork that copies nothing, a subagent session listed under its
// parent, a named branch (lane) that survives a restart, an append retried
// with the id the caller chose, an append that states the parent it
// expects, a retention policy's dry run, and a delete. It prints what each
// step leaves.
//
//	go run ./examples/lifecycle
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

func main() {
	dir, err := os.MkdirTemp("", "sessionstore-lifecycle-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := run(context.Background(), dir); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dir string) error {
	store, err := sessionstore.Open(dir, nil)
	if err != nil {
		return err
	}
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "fix the build", WorkingDir: "/src/app"})
	if err != nil {
		return err
	}
	ask, err := store.Append(ctx, meta.ID, sessionstore.UserText("Build the feature."))
	if err != nil {
		return err
	}
	if _, err := store.Append(ctx, meta.ID, sessionstore.AssistantText("Approach A: patch the old package.")); err != nil {
		return err
	}

	// A fork: the new session's history up to ask is read from the parent.
	fork, err := store.Fork(ctx, meta.ID, ask.ID)
	if err != nil {
		return err
	}
	if _, err := store.Append(ctx, fork.ID, sessionstore.AssistantText("Approach B, in the fork.")); err != nil {
		return err
	}
	path, err := store.Load(ctx, fork.ID)
	if err != nil {
		return err
	}
	fmt.Printf("fork %s: %d events, the first %d read from %s\n", sessionstore.ShortID(fork.ID), len(path), len(path)-1, sessionstore.ShortID(meta.ID))

	// A subagent, spawned by the turn that asked.
	sub, err := store.Create(ctx, sessionstore.Meta{Name: "run the tests", ParentSession: meta.ID, SpawnedBy: ask.ID})
	if err != nil {
		return err
	}
	page, _, err := store.ListPage(ctx, sessionstore.Query{ParentSession: meta.ID}, "")
	if err != nil {
		return err
	}
	fmt.Printf("subagents of %s: %d (depth %d)\n", sessionstore.ShortID(meta.ID), len(page), sub.Depth)

	// A lane, switched to, then a restart: the switch holds.
	if err := store.CreateLane(ctx, meta.ID, "plan-b", ask.ID); err != nil {
		return err
	}
	if err := store.SwitchLane(ctx, meta.ID, "plan-b"); err != nil {
		return err
	}
	if err := store.Close(); err != nil {
		return err
	}
	if store, err = sessionstore.Open(dir, nil); err != nil {
		return err
	}
	defer store.Close()
	active, err := store.ActiveLane(ctx, meta.ID)
	if err != nil {
		return err
	}
	fmt.Printf("after a restart the active lane is %s\n", active.Name)

	// An append with the caller's id and the parent it expects, retried.
	ev := sessionstore.AssistantText("Approach B, on plan-b.")
	ev.ID = uuid.Must(uuid.NewV7())
	opts := sessionstore.AppendOptions{ExpectParent: ask.ID}
	first, err := store.AppendWith(ctx, meta.ID, opts, ev)
	if err != nil {
		return err
	}
	again, err := store.AppendWith(ctx, meta.ID, opts, ev) // a retry after a timeout
	if err != nil {
		return err
	}
	fmt.Printf("retry returned the stored event: %t\n", first[0].ID == again[0].ID)
	other := sessionstore.AssistantText("Something else.")
	other.ID = ev.ID
	if _, err := store.Append(ctx, meta.ID, other); errors.Is(err, sessionstore.ErrConflict) {
		fmt.Println("the same id with another record: ErrConflict")
	}

	// Retention: a dry run, then a delete.
	res, err := store.Prune(ctx, sessionstore.PrunePolicy{Before: time.Now().Add(time.Hour), KeepNewest: 2, DryRun: true})
	if err != nil {
		return err
	}
	fmt.Printf("prune would remove %d sessions (%d bytes) and skip %d: a session a fork reads is kept\n", len(res.Removed), res.Bytes, len(res.Skipped))
	if err := store.Delete(ctx, meta.ID); errors.Is(err, sessionstore.ErrHasForks) {
		fmt.Println("delete of the parent: refused while its fork exists")
	}
	if err := store.Delete(ctx, sub.ID); err != nil {
		return err
	}
	sessions, err := store.List(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("after deleting the subagent: %d sessions\n", len(sessions))
	return nil
}
