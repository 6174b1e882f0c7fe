// Command quickstart walks through sessionstore's core: it creates a
// session, records a short exchange with a tool call, goes back to an
// earlier event to try another path, and prints the tree and the active
// path. It keeps the store, and ends with the inspector's command lines to
// look at it (run them from the repository root).
//
//	go run ./examples/quickstart            # a new directory sessionstore-quickstart-* under the temporary directory
//	go run ./examples/quickstart -dir ./my-sessions
//
// With -dir it uses that directory, creating it if need be (not its
// parent), and adds a session to any store already there. Either way the
// store is kept when it exits.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

func main() {
	dir := flag.String("dir", "", "store directory, kept at exit (default: a new directory sessionstore-quickstart-* under "+os.TempDir()+", kept too)")
	flag.Parse()
	if *dir == "" {
		tmp, err := os.MkdirTemp("", "sessionstore-quickstart-*")
		if err != nil {
			log.Fatal(err)
		}
		*dir = tmp
	}
	// The inspector's command lines run from cmd/: name the store by its
	// absolute path.
	abs, err := filepath.Abs(*dir)
	if err != nil {
		log.Fatal(err)
	}
	if err := run(context.Background(), abs); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dir string) error {
	store, err := sessionstore.Open(dir, nil)
	if err != nil {
		return err
	}
	defer store.Close()

	meta, err := store.Create(ctx, sessionstore.Meta{Name: "quickstart", WorkingDir: "/workspace", Model: "example-model"})
	if err != nil {
		return err
	}
	id := meta.ID
	fmt.Printf("session %s (short id %s) in %s\n\n", id, short(id), dir)

	// Each Append is durable when it returns.
	ask, err := store.Append(ctx, id, sessionstore.UserText("Build the feature."))
	if err != nil {
		return err
	}
	if _, err := store.Append(ctx, id, sessionstore.AssistantMessage(sessionstore.Message{
		Content: "I will inspect the repository first.",
		Model:   meta.Model,
		Usage:   &sessionstore.Usage{InputTokens: 812, OutputTokens: 40},
	})); err != nil {
		return err
	}
	call, err := store.Append(ctx, id, sessionstore.ToolCallEvent(sessionstore.ToolCall{
		CallID: "call_1", Name: "list_files", Arguments: json.RawMessage(`{"path":"."}`),
	}))
	if err != nil {
		return err
	}
	if _, err := store.Append(ctx, id, sessionstore.ToolResultEvent(sessionstore.ToolResult{
		CallID: "call_1", Output: "go.mod\nmain.go\n",
	})); err != nil {
		return err
	}
	if _, err := store.Append(ctx, id, sessionstore.AssistantText("Approach A: rewrite main.go.")); err != nil {
		return err
	}

	// Go back to the first question and take another path. Branch only
	// selects the parent; HEAD moves when the next event is appended.
	if err := store.Branch(ctx, id, ask.ID); err != nil {
		return err
	}
	head, err := store.Head(ctx, id)
	if err != nil {
		return err
	}
	fmt.Printf("after Branch, HEAD is still the last event: %s\n", short(head))
	alt, err := store.Append(ctx, id, sessionstore.AssistantText("Approach B: add a new package instead."))
	if err != nil {
		return err
	}
	fmt.Printf("after Append, HEAD is the new branch: %s (branch_from %s)\n\n", short(alt.ID), short(alt.BranchFrom))

	// The timeline view needs no records: it comes from the index.
	nodes, err := store.Tree(ctx, id)
	if err != nil {
		return err
	}
	fmt.Println("tree:")
	printTree(nodes, uuid.Nil, 1)

	// The active path is what a model would see.
	path, err := store.Load(ctx, id)
	if err != nil {
		return err
	}
	fmt.Println("\nactive path:")
	for _, ev := range path {
		fmt.Printf("  %-9s %-11s %s\n", ev.Role, ev.Kind, string(ev.Record))
	}

	// The abandoned branch is still there, whole.
	old, err := store.LoadPath(ctx, id, call.ID)
	if err != nil {
		return err
	}
	fmt.Printf("\nthe first branch still holds its tool call: %d events up to %s\n", len(old), short(call.ID))

	// The store stays; the inspector looks inside it.
	fmt.Printf("\nthe store is kept in %s; look inside it with the inspector, from the repository root:\n", dir)
	inspect := func(args ...string) {
		fmt.Printf("  (cd cmd && go run ./sessionstore %s)\n", strings.Join(args, " "))
	}
	d := shellQuote(dir)
	inspect("ls", d)
	inspect("tree", d, short(id))
	inspect("path", d, short(id))
	inspect("show", d, short(id), short(call.ID))
	inspect("verify", d)
	return nil
}

func printTree(nodes []sessionstore.Node, parent uuid.UUID, depth int) {
	for _, n := range nodes {
		if n.ParentID != parent {
			continue
		}
		mark := ""
		if n.BranchFrom != uuid.Nil {
			mark = "  <- branch"
		}
		fmt.Printf("%s%s %s/%s %dB%s\n", strings.Repeat("  ", depth), short(n.ID), n.Role, n.Kind, n.Size, mark)
		printTree(nodes, n.ID, depth+1)
	}
}

// short is the short id the inspector prints and takes.
func short(id uuid.UUID) string { return sessionstore.ShortID(id) }

// shellQuote quotes s for a shell command line when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
