package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
)

// ListPage walks a store's sessions newest first, a page at a time, with
// filters; Sessions does the same as a loop.
func ExampleStore_ListPage() {
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

	for _, name := range []string{"a", "b", "c", "d", "e"} {
		team := "core"
		if name == "c" {
			team = "docs"
		}
		if _, err := store.Create(ctx, sessionstore.Meta{Name: name, Labels: map[string]string{"team": team}}); err != nil {
			log.Fatal(err)
		}
	}
	q := sessionstore.Query{Labels: map[string]string{"team": "core"}, Limit: 2}
	cursor := ""
	for {
		page, next, err := store.ListPage(ctx, q, cursor)
		if err != nil {
			log.Fatal(err)
		}
		for _, m := range page {
			fmt.Print(m.Name, " ")
		}
		fmt.Println("| more:", next != "")
		if next == "" {
			break
		}
		cursor = next
	}
	for m, err := range store.Sessions(ctx, sessionstore.Query{Limit: 3}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(m.Name, " ")
	}
	fmt.Println()
	// Output:
	// e d | more: true
	// b a | more: false
	// e d c
}

// A subagent's session names its parent; Create sets its depth, and
// Query.ParentSession lists a session's subagents.
func ExampleQuery_subagents() {
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

	top, err := store.Create(ctx, sessionstore.Meta{Name: "top"})
	if err != nil {
		log.Fatal(err)
	}
	spawn, err := store.Append(ctx, top.ID, sessionstore.UserText("review the change"))
	if err != nil {
		log.Fatal(err)
	}
	sub, err := store.Create(ctx, sessionstore.Meta{Name: "reviewer", ParentSession: top.ID, SpawnedBy: spawn.ID})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sub.Name, "depth", sub.Depth)
	for m, err := range store.Sessions(ctx, sessionstore.Query{ParentSession: top.ID}) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("subagent of top:", m.Name, m.SpawnedBy == spawn.ID)
	}
	// Output:
	// reviewer depth 1
	// subagent of top: reviewer true
}

// Under Options.DeferCreate a session is stored only once something is
// written to it.
func ExampleOptions_deferCreate() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sessionstore.Open(dir, &sessionstore.Options{DeferCreate: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	unused, err := store.Create(ctx, sessionstore.Meta{Name: "never used"})
	if err != nil {
		log.Fatal(err)
	}
	used, err := store.Create(ctx, sessionstore.Meta{Name: "used"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Append(ctx, used.ID, sessionstore.UserText("hello")); err != nil {
		log.Fatal(err)
	}
	list, err := store.List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range list {
		fmt.Println("stored:", m.Name)
	}
	entries, _ := os.ReadDir(dir + "/sessions")
	fmt.Println("directories:", len(entries), "unused stored:", entries[0].Name() == unused.ID.String())
	// Output:
	// stored: used
	// directories: 1 unused stored: false
}
