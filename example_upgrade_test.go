package sessionstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// Upgrade rewrites a session written in format 1 (here a copy of the
// fixture in testdata/format1) in the current format, 3; it reads the
// same afterwards.
func ExampleStore_Upgrade() {
	dir, err := os.MkdirTemp("", "sessionstore-upgrade-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "format1"))); err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	store, err := sessionstore.Open(dir, &sessionstore.Options{Compression: sessionstore.CompressionNone})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	session := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
	format := func() int {
		b, err := os.ReadFile(filepath.Join(dir, "sessions", session.String(), "session.json"))
		if err != nil {
			log.Fatal(err)
		}
		var rec struct{ Format int }
		if err := json.Unmarshal(b, &rec); err != nil {
			log.Fatal(err)
		}
		return rec.Format
	}

	before, err := store.Load(ctx, session)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("format", format(), "events", len(before))
	if err := store.Upgrade(ctx, session); err != nil {
		log.Fatal(err)
	}
	after, err := store.Load(ctx, session)
	if err != nil {
		log.Fatal(err)
	}
	same := len(after) == len(before)
	for i := range after {
		same = same && after[i].ID == before[i].ID && string(after[i].Record) == string(before[i].Record)
	}
	fmt.Println("format", format(), "events", len(after), "same events:", same)
	// Output:
	// format 1 events 5
	// format 3 events 5 same events: true
}

// ConvertCompression converts a root created without compression to zstd:
// afterwards it opens in the new mode, and its sessions read as before.
func ExampleConvertCompression() {
	dir, err := os.MkdirTemp("", "sessionstore-convert-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := sessionstore.Open(dir, &sessionstore.Options{Compression: sessionstore.CompressionNone})
	if err != nil {
		log.Fatal(err)
	}
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "plain"})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := store.Append(ctx, meta.ID, sessionstore.UserText("stored plain, then compressed")); err != nil {
		log.Fatal(err)
	}
	if err := store.Close(); err != nil {
		log.Fatal(err)
	}

	if err := sessionstore.ConvertCompression(ctx, dir, &sessionstore.Options{Compression: sessionstore.CompressionZstd}); err != nil {
		log.Fatal(err)
	}
	store, err = sessionstore.Open(dir, &sessionstore.Options{Compression: sessionstore.CompressionZstd})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	events, err := store.Load(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(events), string(events[0].Record))
	// Output:
	// 1 {"content":"stored plain, then compressed"}
}
