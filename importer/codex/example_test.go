package codex_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer/codex"
)

func ExampleImport() {
	dir, err := os.MkdirTemp("", "codex-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sessionstore.Open(filepath.Join(dir, "store"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	ctx := context.Background()
	rollout := "testdata/compacted.jsonl"
	rep, err := codex.Import(ctx, st, []string{rollout}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d session, %d events, %d problems\n", rep.Sessions, rep.Added, len(rep.Errors))

	// The context starts at the newest compaction, followed by the
	// history Codex resumes with. The user message that holds the
	// summary in Codex's history is kept as a custom event, which no
	// model is shown: a model sees the summary once, the compaction's.
	s, _, err := codex.Read(rollout)
	if err != nil {
		log.Fatal(err)
	}
	events, err := st.Load(ctx, s.Meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	for _, ev := range events {
		switch ev.Kind {
		case sessionstore.KindCompaction:
			c, _ := ev.Compaction()
			fmt.Println("compaction:", c.Summary.Text)
		case sessionstore.KindMessage:
			m, _ := ev.Message()
			fmt.Printf("%s: %s\n", ev.Role, m.Content)
		case sessionstore.KindCustom:
			fmt.Println("custom: the summary's user message, as Codex's history has it")
		}
	}
	// Output:
	// 1 session, 20 events, 0 problems
	// compaction: Summary so far: cache.go with a configurable TTL and hit/miss metrics.
	// user: Add a cache layer.
	// user: Add metrics for cache hits.
	// custom: the summary's user message, as Codex's history has it
	// user: Now document it.
	// assistant: README updated.
}

func ExampleRead() {
	s, problems, err := codex.Read("testdata/rollback.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Meta.WorkingDir, s.Meta.Labels["cli_version"], len(s.Events), "events,", len(problems), "problems")
	// Output:
	// /home/dev/web 0.60.0 10 events, 0 problems
}
