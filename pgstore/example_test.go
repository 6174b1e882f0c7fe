package pgstore_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/pgstore"
)

// A Store whose sessions live in PostgreSQL: the local directory is a
// cache, and another machine with the same database opens the session
// whole. (Not run by go test: it needs a server; TestSessionMovesMachines
// runs the same steps against pgtest's.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	obj, err := pgstore.New(ctx, pool, nil) // the table sessionstore_objects
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "cache")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	store, err := sessionstore.Open(dir, &sessionstore.Options{Remote: obj, WaitForLock: true})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	m, err := store.Create(ctx, sessionstore.Meta{Name: "support chat"})
	if err != nil {
		log.Fatal(err)
	}
	// Acknowledged once its row is committed in PostgreSQL.
	if _, err := store.Append(ctx, m.ID, textEv("hello")); err != nil {
		log.Fatal(err)
	}
	fmt.Println("stored")
}
