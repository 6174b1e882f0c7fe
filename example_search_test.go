package sessionstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
)

func ExampleStore_Search() {
	dir, err := os.MkdirTemp("", "search-example")
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

	meta, err := store.Create(ctx, sessionstore.Meta{Name: "migrations"})
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range []sessionstore.Event{
		sessionstore.UserText("The users migration fails on Postgres 16"),
		sessionstore.AssistantText("I fixed the migration: the index is now created concurrently."),
		sessionstore.UserText("Thanks, now write the release notes"),
	} {
		if _, err := store.Append(ctx, meta.ID, ev); err != nil {
			log.Fatal(err)
		}
	}

	q := sessionstore.SearchQuery{Text: `"fixed the migration"`, Roles: []sessionstore.Role{sessionstore.RoleAssistant}}
	for hit, err := range store.Search(ctx, q) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(hit.Session == meta.ID, hit.Role, hit.Snippet)
	}
	// Output:
	// true assistant I fixed the migration: the index is now created concurrently.
}
