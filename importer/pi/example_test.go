package pi_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer/pi"
)

func ExampleImport() {
	dir, err := os.MkdirTemp("", "pi-example")
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
	rep, err := pi.Import(ctx, st, []string{"testdata/compaction.jsonl"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d session, %d events, %d problems\n", rep.Sessions, rep.Added, len(rep.Errors))

	// The context starts at the newest compaction, as Pi rebuilds it.
	s, _, err := pi.Read("testdata/compaction.jsonl")
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
			fmt.Println("summary:", c.Summary.Text)
		case sessionstore.KindMessage:
			m, _ := ev.Message()
			fmt.Printf("%s: %s\n", ev.Role, m.Content)
		}
	}

	// Importing again adds nothing.
	rep, err = pi.Import(ctx, st, []string{"testdata/compaction.jsonl"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("added again:", rep.Added)
	// Output:
	// 1 session, 15 events, 0 problems
	// summary: Service has health, metrics and readiness endpoints.
	// user: And a readiness probe.
	// assistant: Readiness probe added.
	// user: Write the README.
	// assistant: README written.
	// added again: 0
}
