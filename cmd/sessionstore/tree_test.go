package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

var updateTreeGolden = flag.Bool("update-tree", false, "rewrite testdata/tree.golden")

// maxLineLen returns the length of the longest line of out.
func maxLineLen(out string) int {
	n := 0
	for line := range strings.Lines(out) {
		n = max(n, len(line))
	}
	return n
}

// TestTreeLinearOutput: the tree of a 5,000-event chain prints one short
// line per event (it indented each event by its depth: about 25 MB for
// this chain, 400 MB for 20,000 events).
func TestTreeLinearOutput(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	meta, err := s.Create(ctx, sessionstore.Meta{Name: "chain"})
	require.NoError(t, err)
	const n = 5000
	evs := make([]sessionstore.Event, n)
	for i := range evs {
		evs[i] = sessionstore.UserText(fmt.Sprintf("event %d", i))
	}
	_, err = s.AppendBatch(ctx, meta.ID, evs...)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	status, stdout, stderr := runCmd("tree", root, meta.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, n, strings.Count(stdout, "\n"))
	assert.Less(t, len(stdout), 80*n, "bytes per event bounded")
	assert.LessOrEqual(t, maxLineLen(stdout), 80)
	assert.True(t, strings.HasSuffix(stdout, ` B  [HEAD]  "event 4999"`+"\n"), "the last line, unindented: %q", stdout[len(stdout)-100:])
}

// comb is a tree of n forks one below the other: each chain event has a
// leaf child, then the next chain event, so that every chain event is a
// fork and each level holds one more.
func comb(n int) (nodes []sessionstore.Node, head uuid.UUID) {
	id := func(i int) uuid.UUID {
		return uuid.MustParse(fmt.Sprintf("01a039f0-0000-7000-8000-%08x0000", i))
	}
	parent := uuid.Nil
	for i := range n {
		chain, leaf := id(2*i+1), id(2*i+2)
		branch := uuid.Nil
		if i > 0 {
			branch = parent
		}
		nodes = append(nodes, sessionstore.Node{ID: chain, ParentID: parent, BranchFrom: branch, Kind: sessionstore.KindMessage, Role: sessionstore.RoleUser, Size: 20, Preview: fmt.Sprintf("turn %d", i)})
		nodes = append(nodes, sessionstore.Node{ID: leaf, ParentID: chain, Kind: sessionstore.KindMessage, Role: sessionstore.RoleAssistant, Size: 20, Preview: fmt.Sprintf("abandoned answer %d", i)})
		parent, head = chain, chain
	}
	return nodes, head
}

// TestWriteTreeDeepForks: however many forks lie above an event, its line
// stays short: the indentation stops at maxTreeLevel and the line names
// its level instead. Bytes per event stay bounded, with full ids too.
func TestWriteTreeDeepForks(t *testing.T) {
	for _, n := range []int{100, 2500} {
		nodes, head := comb(n)
		for _, full := range []bool{false, true} {
			name := sessionstore.ShortID
			if full {
				name = uuid.UUID.String
			}
			var buf bytes.Buffer
			w := bufio.NewWriter(&buf)
			writeTree(w, nodes, head, head, name)
			require.NoError(t, w.Flush())
			out := buf.String()
			assert.Equal(t, len(nodes), strings.Count(out, "\n"))
			// A line: the indentation, at most 2*maxTreeLevel bytes and
			// "[2500] - "; the id, kind, role and size, 44 bytes with a
			// short id; " [branch from <id>]", 24; the preview, 24.
			perEvent := 2*maxTreeLevel + 9 + 44 + 24 + 24
			if full {
				perEvent += 2 * (36 - 8) // the id and the branch's
			}
			assert.Less(t, len(out), perEvent*len(nodes), "n %d, full %v", n, full)
			assert.LessOrEqual(t, maxLineLen(out), perEvent, "n %d, full %v", n, full)

			// Level i's chain event is at level i (i forks above it), its
			// leaf at i+1, but for the last chain event's: it is an only
			// child.
			lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
			for i := range n {
				leafLevel := i + 1
				if i == n-1 {
					leafLevel = i
				}
				for k, level := range []int{i, leafLevel} {
					line := lines[2*i+k]
					// Every event but the root and the last leaf starts
					// one of a fork's branches.
					starts := [2]bool{i > 0, i < n-1}[k]
					indent := 2 * min(level, maxTreeLevel)
					if starts && level <= maxTreeLevel {
						indent -= 2
					}
					want := strings.Repeat(" ", indent)
					if level > maxTreeLevel {
						want += fmt.Sprintf("[%d] ", level)
					}
					if starts {
						want += "- "
					}
					want += name(nodes[2*i+k].ID) + " "
					if !assert.True(t, strings.HasPrefix(line, want), "want prefix %q: %q", want, line) {
						return
					}
				}
			}
		}
	}
}

// treeEventID is the golden tree's n-th event id.
func treeEventID(n int) uuid.UUID {
	return uuid.MustParse(fmt.Sprintf("01a039f0-0000-7000-8000-%08x%04x", uint32(n)*2654435761, n))
}

// TestTreeGolden: the tree of a small branched session, byte for byte
// (run with -update-tree to rewrite it after a deliberate change): a fork
// of three branches at the first message, another fork below it, a tool
// call, a record with quotes and non-ASCII text, a custom record without
// a preview, and HEAD.
func TestTreeGolden(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	meta, err := s.Create(ctx, sessionstore.Meta{ID: uuid.MustParse("01a039f0-0000-7000-8000-0000000000ff"), Name: "tree"})
	require.NoError(t, err)
	add := func(n int, ev sessionstore.Event) {
		t.Helper()
		ev.ID = treeEventID(n)
		_, err := s.AppendWith(ctx, meta.ID, sessionstore.AppendOptions{}, ev)
		require.NoError(t, err)
	}
	branch := func(n int) {
		t.Helper()
		require.NoError(t, s.Branch(ctx, meta.ID, treeEventID(n)))
	}
	add(1, sessionstore.UserText("Build the feature."))
	add(2, sessionstore.AssistantText("Running the tests first."))
	add(3, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "run_tests", Arguments: json.RawMessage(`{"pkg":"./..."}`)}))
	add(4, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "FAIL\tpkg\t0.01s\n", IsError: true}))
	branch(1)
	add(5, sessionstore.AssistantText(`Approach B: a "new" package, für alle.`))
	branch(1)
	add(6, sessionstore.AssistantText("Approach C:\n\tsplit   main.go."))
	add(7, sessionstore.UserText("Which file first?"))
	add(8, sessionstore.AssistantText("main.go."))
	branch(7)
	add(9, sessionstore.NewEvent(sessionstore.KindCustom, sessionstore.RoleNone, map[string]any{"n": 1}))
	add(10, sessionstore.AssistantText("The tests, then main.go."))
	// A lane switched to and not appended to yet: the active path ends at
	// its tip ([NEXT]), HEAD stays until the next append.
	require.NoError(t, s.CreateLane(ctx, meta.ID, "main-first", treeEventID(8)))
	require.NoError(t, s.SwitchLane(ctx, meta.ID, "main-first"))
	require.NoError(t, s.Close())

	status, stdout, stderr := runCmd("tree", root, meta.ID.String())
	require.Equal(t, exitOK, status, stderr)
	golden := filepath.Join("testdata", "tree.golden")
	if *updateTreeGolden {
		require.NoError(t, os.WriteFile(golden, []byte(stdout), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test -run TestTreeGolden -update-tree to make it")
	assert.Equal(t, string(want), stdout)
}

// TestTreeBesideWriter: tree through a read-only store while a writer
// appends tags HEAD in every run: HEAD is read before the tree, so the
// tree holds it (read after it, HEAD was mostly an event the tree did
// not hold yet, and no line said [HEAD]); nothing is tagged [NEXT], as
// no lane switch is pending.
func TestTreeBesideWriter(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	meta, err := w.Create(ctx, sessionstore.Meta{Name: "live"})
	require.NoError(t, err)
	_, err = w.Append(ctx, meta.ID, sessionstore.UserText("first"))
	require.NoError(t, err)

	done := make(chan error, 1)
	go func() {
		defer close(done)
		for i := range 400 {
			if _, err := w.Append(ctx, meta.ID, sessionstore.AssistantText(fmt.Sprint("event ", i))); err != nil {
				done <- err
				return
			}
		}
	}()
	runs := 0
	for running := true; running || runs < 3; runs++ {
		select {
		case err := <-done:
			require.NoError(t, err)
			running = false
		default:
		}
		status, stdout, stderr := runCmd("tree", root, meta.ID.String())
		require.Equal(t, exitOK, status, stderr)
		assert.Equal(t, 1, strings.Count(stdout, "[HEAD]"), "run %d, the last line: %s", runs, stdout[strings.LastIndex(strings.TrimSuffix(stdout, "\n"), "\n")+1:])
		assert.NotContains(t, stdout, "[NEXT]", "run %d", runs)
	}
}

// TestTreeCustomSummary: a custom event whose record is a JSON object (a
// line an importer kept as it was) is previewed by its summary, its type
// and text, not by the start of its JSON; a snapshot's manifest and
// another custom record keep their previews.
func TestTreeCustomSummary(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	meta, err := s.Create(ctx, sessionstore.Meta{Name: "custom"})
	require.NoError(t, err)
	_, err = s.Append(ctx, meta.ID, sessionstore.UserText("hello"))
	require.NoError(t, err)
	_, err = s.Append(ctx, meta.ID, sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage(
		`{"parentUuid":"b3af772f-56ab-4b26-b550-7ad62735d794","isSidechain":false,"userType":"external","type":"system","content":"Running \u001b[1mhook\u001b[22m"}`)})
	require.NoError(t, err)
	_, err = s.Append(ctx, meta.ID, sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage(`"a plain note"`)})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	status, stdout, stderr := runCmd("tree", root, meta.ID.String())
	require.Equal(t, exitOK, status, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3, stdout)
	assert.True(t, strings.HasSuffix(lines[1], `"system · content: Running [1mhook [22m · +3 more fields"`), lines[1])
	assert.NotContains(t, stdout, "parentUuid")
	assert.True(t, strings.HasSuffix(lines[2], `"a plain note"`), lines[2])
}
