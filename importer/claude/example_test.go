package claude_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/sessionstore/sessionstore/importer/claude"
)

// Import a project's transcripts (here a small one in testdata; on a
// machine with Claude Code, ~/.claude/projects), then load a session's
// context as Claude Code would resume it.
func ExampleImport() {
	dir, err := os.MkdirTemp("", "claude-import")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sessionstore.Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	ctx := context.Background()
	rep, err := claude.Import(ctx, st, []string{"testdata/projects/-tmp-demo"}, nil)
	if err != nil {
		log.Fatal(err) // a store error: the import stopped
	}
	fmt.Printf("%d files, %d sessions, %d events added\n", rep.Files, rep.Sessions, rep.Added)
	for _, e := range rep.Errors {
		var le *importer.LineError
		if errors.As(e, &le) {
			fmt.Printf("malformed: line %d\n", le.Line)
		}
	}

	q := sessionstore.Query{Labels: map[string]string{"claude_session_id": "11111111-1111-4111-8111-111111111111"}}
	for m, err := range st.Sessions(ctx, q) {
		if err != nil {
			log.Fatal(err)
		}
		if m.Depth > 0 {
			continue // a subagent
		}
		evs, err := st.Load(ctx, m.ID)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%q resumes with %d events, from a %s\n", m.Name, len(evs), evs[0].Kind)
	}

	again, err := claude.Import(ctx, st, []string{"testdata/projects/-tmp-demo"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("again: %d added, %d existing\n", again.Added, again.Existing)
	// Output:
	// 2 files, 3 sessions, 24 events added
	// malformed: line 8
	// malformed: line 9
	// "Demo session" resumes with 7 events, from a compaction
	// again: 0 added, 24 existing
}

// Read parses one transcript without writing anything.
func ExampleRead() {
	f, err := claude.Read("testdata/projects/-tmp-demo/11111111-1111-4111-8111-111111111111.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%d lines, %d skipped, %d errors\n", f.Lines, f.Skipped, len(f.Errors))
	for _, s := range f.Sessions {
		fmt.Printf("session %q: %d events\n", s.Meta.Name, len(s.Events))
	}
	// Output:
	// 22 lines, 4 skipped, 2 errors
	// session "Demo session": 17 events
	// session "": 2 events
}
