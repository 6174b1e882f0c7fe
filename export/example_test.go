package export_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/export"
)

// exampleSession makes a store in a new temporary directory with a short
// session: a question, a tool call and its result, a branch, and an answer
// large enough to be stored as a blob. The caller removes dir.
func exampleSession() (st *sessionstore.Store, meta sessionstore.Meta, dir string) {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "export-example")
	if err != nil {
		log.Fatal(err)
	}
	st, err = sessionstore.Open(filepath.Join(dir, "store"), &sessionstore.Options{BlobThreshold: 256})
	if err != nil {
		log.Fatal(err)
	}
	meta, err = st.Create(ctx, sessionstore.Meta{Name: "fix the build", Model: "model-x", WorkingDir: "/src/app"})
	if err != nil {
		log.Fatal(err)
	}
	ask, _ := st.Append(ctx, meta.ID, sessionstore.UserText("Why does the build fail?"))
	st.Append(ctx, meta.ID, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "go_build"}))
	st.Append(ctx, meta.ID, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "main.go:3: undefined: os", IsError: true}))
	st.Branch(ctx, meta.ID, ask.ID)
	if _, err := st.Append(ctx, meta.ID, sessionstore.AssistantText("A missing import. "+strings.Repeat("Details. ", 40))); err != nil {
		log.Fatal(err)
	}
	return st, meta, dir
}

// JSONL writes the whole tree; blobs go to files with BlobDir.
func ExampleJSONL() {
	st, meta, dir := exampleSession()
	defer os.RemoveAll(dir)
	defer st.Close()

	var out bytes.Buffer
	stats, err := export.JSONL(context.Background(), &out, st, meta.ID, export.Options{BlobDir: filepath.Join(dir, "blobs")})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("events:", stats.Events, "blob files:", stats.BlobFiles)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	fmt.Println("lines:", len(lines))
	fmt.Println(strings.HasPrefix(lines[0], `{"format":"sessionstore-export","version":1,"scope":"tree","blobs":"files",`))
	// Output:
	// events: 4 blob files: 1
	// lines: 5
	// true
}

// Markdown writes the active path as a transcript.
func ExampleMarkdown() {
	st, meta, dir := exampleSession()
	defer os.RemoveAll(dir)
	defer st.Close()

	var out strings.Builder
	if _, err := export.Markdown(context.Background(), &out, st, meta.ID, export.Options{MaxOutput: 100}); err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "*The path") {
			fmt.Println(line[:min(len(line), 23)])
		}
	}
	// Output:
	// # fix the build
	// ## User
	// *The path branches at `
	// ## Assistant
}

// NewReader reads an export back, header first; ReadBlob reads a record
// written to the blob directory.
func ExampleNewReader() {
	st, meta, dir := exampleSession()
	defer os.RemoveAll(dir)
	defer st.Close()
	blobs := filepath.Join(dir, "blobs")
	var out bytes.Buffer
	if _, err := export.JSONL(context.Background(), &out, st, meta.ID, export.Options{Scope: export.ActivePath, BlobDir: blobs}); err != nil {
		log.Fatal(err)
	}

	r, err := export.NewReader(&out, "session.jsonl")
	if err != nil {
		log.Fatal(err)
	}
	h := r.Header()
	fmt.Println(h.Session.Name, h.Scope, h.Events)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			log.Fatal(err)
		}
		if ev.Digest != "" {
			rec, err := export.ReadBlob(blobs, ev)
			if err != nil {
				log.Fatal(err)
			}
			ev.Record = rec
		}
		m, _ := ev.Message()
		fmt.Println(ev.Kind, ev.Role, m.Content[:min(len(m.Content), 17)])
	}
	// Output:
	// fix the build path 2
	// message user Why does the buil
	// message assistant A missing import.
}
