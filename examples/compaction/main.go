// Command compaction runs a long agent session whose context is compacted
// automatically: after each turn it asks ShouldCompact whether the context
// has reached 80% of the model's window and, when it has, records a
// compaction with the deterministic sessiontest.Summarizer, keeping the most recent
// events verbatim. It prints the context size over time and shows that the
// full history stays on disk.
//
//	go run ./examples/compaction
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/sessiontest"
)

const (
	contextWindow = 4000 // tokens, small so that the example compacts often
	keepTokens    = 600  // recent context kept verbatim after a summary
	turns         = 90
)

// tokens estimates an event's tokens the way a harness without a tokenizer
// might: a quarter of its bytes.
func tokens(ev sessionstore.Event) int64 { return int64(len(ev.Record)+3) / 4 }

func main() {
	dir, err := os.MkdirTemp("", "sessionstore-compaction-")
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
	defer store.Close()
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "long session"})
	if err != nil {
		return err
	}
	id := meta.ID
	compactions := 0
	for turn := 1; turn <= turns; turn++ {
		evs := []sessionstore.Event{
			sessionstore.UserText(fmt.Sprintf("Turn %d: run the tests and fix what fails.", turn)),
			sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: fmt.Sprint("call-", turn), Name: "run_tests"}),
			sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: fmt.Sprint("call-", turn), Output: strings.Repeat("--- FAIL: TestSomething (0.01s)\n", 8)}),
			sessionstore.AssistantMessage(sessionstore.Message{Content: fmt.Sprintf("Fixed the failure of turn %d.", turn)}),
		}
		for _, ev := range evs {
			if _, err := store.Append(ctx, id, ev); err != nil {
				return err
			}
		}
		// What the next request would send.
		context, err := store.Load(ctx, id)
		if err != nil {
			return err
		}
		var used int64
		for _, ev := range context {
			used += tokens(ev)
		}
		if !sessionstore.ShouldCompact(used, contextWindow, 0) {
			continue
		}
		c, err := store.CompactWith(ctx, id, sessiontest.Summarizer{}, sessionstore.CompactOptions{KeepTokens: keepTokens, Tokens: tokens})
		if err != nil {
			return err
		}
		compactions++
		after, err := store.Load(ctx, id)
		if err != nil {
			return err
		}
		var left int64
		for _, ev := range after {
			left += tokens(ev)
		}
		rec, err := c.Compaction()
		if err != nil {
			return err
		}
		fmt.Printf("turn %2d: context at %d of %d tokens -> compacted to %d tokens (%d events: summary + %d kept)\n",
			turn, used, contextWindow, left, len(after), len(after)-1)
		fmt.Printf("         summary: %s\n", rec.Summary.Text)
	}
	context, err := store.Load(ctx, id)
	if err != nil {
		return err
	}
	full, err := store.FullPath(ctx, id, uuid.Nil)
	if err != nil {
		return err
	}
	fmt.Printf("\n%d compactions; the model sees %d events, the full history holds %d (%d turns x 4 + the compactions)\n",
		compactions, len(context), len(full), turns)
	return nil
}
