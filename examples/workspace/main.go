// Command workspace shows files going back with the conversation: a small
// agent loop edits files in a work directory, snapshotting it after each
// turn; then the user goes back to the first turn, and the harness
// restores the code and the conversation together (Restore with Branch),
// tries another path there, and compares both branches' files.
//
//	go run ./examples/workspace
//
// The store and the work directory are made under the temporary directory
// and removed at exit.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

func main() {
	if err := run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// turn is one exchange of the scripted agent: the user's request, the
// assistant's answer and the files its edit tool writes.
type turn struct {
	user, assistant string
	edits           map[string]string
}

func run(ctx context.Context) error {
	tmp, err := os.MkdirTemp("", "sessionstore-workspace-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	work := filepath.Join(tmp, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	store, err := sessionstore.Open(filepath.Join(tmp, "store"), nil)
	if err != nil {
		return err
	}
	defer store.Close()
	meta, err := store.Create(ctx, sessionstore.Meta{Name: "greeter", WorkingDir: work})
	if err != nil {
		return err
	}
	id := meta.ID
	// The files the agent must never record: build output.
	snapOpts := sessionstore.SnapshotOptions{Ignore: []string{"bin/"}}

	// Turn 0 is the project as the user hands it over.
	if err := writeFiles(work, map[string]string{"main.go": "package main\n\nfunc main() {}\n", "bin/greeter": "binary"}); err != nil {
		return err
	}
	first, err := store.SnapshotDir(ctx, id, work, snapOpts)
	if err != nil {
		return err
	}
	fmt.Printf("snapshot %s: %d files added\n", short(first.Event.ID), len(first.Added))

	script := []turn{
		{"print a greeting", "Added a greeting.", map[string]string{"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"}},
		{"make it configurable", "The name now comes from greet.go.", map[string]string{"greet.go": "package main\n\nconst name = \"world\"\n", "main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello,\", name) }\n"}},
	}
	var turns []uuid.UUID // the snapshot ending each turn
	for _, t := range script {
		if err := agentTurn(ctx, store, id, work, t, snapOpts, &turns); err != nil {
			return err
		}
	}
	// The harness also keeps a small state beside the conversation.
	stateEv, err := store.AppendState(ctx, id, sessionstore.StateDelta{Set: map[string]json.RawMessage{"mode": json.RawMessage(`"edit"`)}})
	if err != nil {
		return err
	}

	// The user goes back to the end of the first turn: files and
	// conversation together.
	back := turns[0]
	rep, err := store.Restore(ctx, id, back, work, sessionstore.RestoreOptions{Branch: true, Ignore: snapOpts.Ignore})
	if err != nil {
		return err
	}
	fmt.Printf("restored %s: wrote %v, removed %v, kept bin/ (ignored)\n", short(back), rep.Written, rep.Removed)

	// Another path from there.
	alt := turn{"say goodbye instead", "Now it says goodbye.", map[string]string{"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"goodbye\") }\n"}}
	if err := agentTurn(ctx, store, id, work, alt, snapOpts, &turns); err != nil {
		return err
	}

	// Each branch has its own files.
	for _, at := range []uuid.UUID{turns[1], turns[2]} {
		ws, err := store.Files(ctx, id, at)
		if err != nil {
			return err
		}
		f, _ := ws.File("main.go")
		b, err := store.ReadFile(ctx, id, f)
		if err != nil {
			return err
		}
		var paths []string
		for _, f := range ws.Files {
			paths = append(paths, f.Path)
		}
		fmt.Printf("files at %s: %v, main.go prints %s\n", short(at), paths, printed(string(b)))
	}
	changes, err := store.Diff(ctx, id, turns[1], turns[2])
	if err != nil {
		return err
	}
	for _, c := range changes {
		fmt.Printf("diff: %s %s\n", c.Op, c.Path)
	}
	for _, at := range []uuid.UUID{stateEv.ID, uuid.Nil} {
		st, err := store.State(ctx, id, at)
		if err != nil {
			return err
		}
		name := "the end of the first branch"
		if at == uuid.Nil {
			name = "the end of the active path"
		}
		fmt.Printf("state at %s: %s\n", name, st)
	}
	path, err := store.Load(ctx, id)
	if err != nil {
		return err
	}
	fmt.Printf("the active path has %d events, ending with the goodbye turn\n", len(path))
	return nil
}

// agentTurn records a user message, the assistant's edit (the files
// written into work) and answer, then snapshots work.
func agentTurn(ctx context.Context, store *sessionstore.Store, id uuid.UUID, work string, t turn, o sessionstore.SnapshotOptions, turns *[]uuid.UUID) error {
	if _, err := store.Append(ctx, id, sessionstore.NewEvent(sessionstore.KindMessage, sessionstore.RoleUser, sessionstore.Message{Content: t.user})); err != nil {
		return err
	}
	if err := writeFiles(work, t.edits); err != nil {
		return err
	}
	if _, err := store.Append(ctx, id, sessionstore.NewEvent(sessionstore.KindMessage, sessionstore.RoleAssistant, sessionstore.Message{Content: t.assistant})); err != nil {
		return err
	}
	res, err := store.SnapshotDir(ctx, id, work, o)
	if err != nil {
		return err
	}
	fmt.Printf("turn %q: snapshot %s added %v modified %v\n", t.user, short(res.Event.ID), res.Added, res.Modified)
	*turns = append(*turns, res.Event.ID)
	return nil
}

func writeFiles(dir string, files map[string]string) error {
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// short is the end of an id: UUIDv7s made in the same millisecond share
// their start.
func short(id uuid.UUID) string { s := id.String(); return s[len(s)-8:] }

// printed is what a main.go of the example prints.
func printed(src string) string {
	i := strings.Index(src, "Println(")
	if i < 0 {
		return "nothing"
	}
	return strings.TrimSuffix(strings.TrimSpace(src[i+len("Println("):]), ") }")
}
