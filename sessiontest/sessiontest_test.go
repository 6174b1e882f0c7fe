package sessiontest_test

import (
	"context"
	"fmt"
	"os"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/sessiontest"
)

// A session compacted with the deterministic Summarizer: the summary
// keeps the first user message as the goal and counts the events.
func ExampleSummarizer() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sessiontest")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	store, err := sessionstore.Open(dir, nil)
	if err != nil {
		panic(err)
	}
	defer store.Close()
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "example"})
	if err != nil {
		panic(err)
	}
	for _, ev := range []sessionstore.Event{
		sessionstore.UserText("Fix the build."),
		sessionstore.AssistantText("Looking at the failing test."),
	} {
		if _, err := store.Append(ctx, meta.ID, ev); err != nil {
			panic(err)
		}
	}
	c, err := store.CompactWith(ctx, meta.ID, sessiontest.Summarizer{}, sessionstore.CompactOptions{})
	if err != nil {
		panic(err)
	}
	rec, err := c.Compaction()
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Summary.Goals)
	fmt.Println(rec.Summary.Text)
	// Output:
	// [Fix the build.]
	// 2 events summarized: {"message":2}
}
