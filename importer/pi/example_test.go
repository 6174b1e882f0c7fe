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
	// 1 session, 16 events, 0 problems
	// summary: Service has health, metrics and readiness endpoints.
	// user: And a readiness probe.
	// assistant: Readiness probe added.
	// user: Write the README.
	// assistant: README written.
	// added again: 0
}

func ExampleRead() {
	s, problems, err := pi.Read("testdata/malformed.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(s.Meta.Labels["source_id"], len(s.Events), "events")
	for _, p := range problems {
		fmt.Println(p)
	}
	// Output:
	// 5b1e9c2a-0000-4000-8000-00000000aa04 5 events
	// testdata/malformed.jsonl:4: importer: malformed input: not a JSON entry: unexpected end of JSON input
	// testdata/malformed.jsonl:5: importer: malformed input: entry "m0000004" names parent "m0000003", which is not in the file: attached to the entry before it
}
