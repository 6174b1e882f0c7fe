package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore"
)

// A harness records the files an edit tool changes, and Restore brings a
// directory back to the files as of an earlier event, and the
// conversation with them (Branch).
func ExampleStore_Restore() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sessionstore.Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "edits"})
	if err != nil {
		log.Fatal(err)
	}
	before, err := store.RecordFiles(ctx, meta.ID, "before the edit", sessionstore.FileWrite{Path: "main.go", Data: []byte("package main // v1\n")})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Append(ctx, meta.ID, sessionstore.AssistantText("Edited main.go and added util.go.")); err != nil {
		log.Fatal(err)
	}
	if _, err := store.RecordFiles(ctx, meta.ID, "after the edit",
		sessionstore.FileWrite{Path: "main.go", Data: []byte("package main // v2\n")},
		sessionstore.FileWrite{Path: "util.go", Data: []byte("package main\n")}); err != nil {
		log.Fatal(err)
	}
	work := filepath.Join(dir, "work")
	rep, err := store.Restore(ctx, meta.ID, before.ID, work, sessionstore.RestoreOptions{Branch: true})
	if err != nil {
		log.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(work, "main.go"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("wrote %v: %s", rep.Written, b)
	next, _, err := store.NextParent(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the next append follows the snapshot:", next == before.ID)
	// Output:
	// wrote [main.go]: package main // v1
	// the next append follows the snapshot: true
}
