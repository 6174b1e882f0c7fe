package sessionstore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestTreePreviews: Tree and Children carry each event's preview, from
// the in-memory index, after a reopen (index.jsonl), after sealing (the
// embedded index), and after the index is rebuilt from the chunks, where
// a blob's preview is empty (internal/eventline/preview.go).
func TestTreePreviews(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{BlobThreshold: 200, ChunkSize: 1500}
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	id := meta.ID
	big := strings.Repeat("x", 300)
	evs := []Event{
		UserText("Please   read\nthe file"),
		AssistantMessage(Message{ToolCalls: []ToolCall{{CallID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"main.go"}`)}}}),
		ToolCallEvent(ToolCall{CallID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"main.go"}`)}),
		ToolResultEvent(ToolResult{CallID: "c1", Output: "open main.go: no such file", IsError: true}),
		ToolResultEvent(ToolResult{CallID: "c2", Output: big}), // a blob
		NewEvent(KindCustom, RoleNone, map[string]string{"type": "note"}),
	}
	want := []string{"Please read the file", `read_file {"path":"main.go"}`, `read_file {"path":"main.go"}`, "error: open main.go: no such file", big[:eventline.PreviewMax], `{"type":"note"}`}
	for _, ev := range evs {
		_, err := s.Append(ctx, id, ev)
		require.NoError(t, err)
	}
	head, err := s.Head(ctx, id)
	require.NoError(t, err)
	c, err := s.Compact(ctx, id, Compaction{Head: head, Summary: Summary{Text: "Read   main.go; it is missing."}})
	require.NoError(t, err)
	_, err = s.AppendBranchSummary(ctx, id, c.ParentID, BranchSummaryRecord{Summary: Summary{Goals: []string{"find main.go"}}})
	require.NoError(t, err)
	want = append(want, "Read main.go; it is missing.", "find main.go")

	previews := func(s *Store) []string {
		t.Helper()
		nodes, err := s.Tree(ctx, id)
		require.NoError(t, err)
		out := make([]string, len(nodes))
		for i, n := range nodes {
			out[i] = n.Preview
			if i > 0 {
				kids, err := s.Children(ctx, id, n.ParentID)
				require.NoError(t, err)
				for _, k := range kids {
					if k.ID == n.ID {
						assert.Equal(t, n.Preview, k.Preview, "Children")
					}
				}
			}
		}
		return out
	}
	assert.Equal(t, want, previews(s), "in memory")
	require.NoError(t, s.Close())
	n, err := listChunks(m, sessionPath(id, chunksDir))
	require.NoError(t, err)
	require.Greater(t, len(n), 1, "some chunks are sealed")

	s = openMem(t, m, o)
	assert.Equal(t, want, previews(s), "reopened: index lines")
	require.NoError(t, s.Close())

	// Rebuilt from the chunk lines: no index.jsonl, and sealed chunks'
	// embedded indexes hold the same previews as before.
	require.NoError(t, m.Remove(sessionPath(id, indexName)))
	s = openMem(t, m, o)
	got := previews(s)
	require.NoError(t, s.Close())
	for i := range want {
		if i == 4 && got[i] == "" {
			continue // the blob, if its entry was rebuilt from its line
		}
		assert.Equal(t, want[i], got[i], "rebuilt, event %d", i)
	}
}

func TestForkTreePreviews(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	a, err := s.Append(ctx, id, UserText("in the parent"))
	require.NoError(t, err)
	f, err := s.Fork(ctx, id, a.ID)
	require.NoError(t, err)
	_, err = s.Append(ctx, f.ID, AssistantText("in the fork"))
	require.NoError(t, err)
	nodes, err := s.Tree(ctx, f.ID)
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	assert.Equal(t, "in the parent", nodes[0].Preview)
	assert.Equal(t, "in the fork", nodes[1].Preview)
}

// TestOldIndexWithoutPreviews: a store whose index lines predate previews
// (testdata/format1) opens, and its nodes have empty previews until the
// index is rebuilt from the chunks.
func TestOldIndexWithoutPreviews(t *testing.T) {
	m := memFixture(t, "format1")
	s := openMem(t, m, Options{Compression: CompressionNone})
	nodes, err := s.Tree(context.Background(), goldenSession)
	require.NoError(t, err)
	require.NotEmpty(t, nodes)
	for _, n := range nodes {
		assert.Empty(t, n.Preview)
	}
	require.NoError(t, s.Close())
	require.NoError(t, m.Remove(sessionPath(goldenSession, indexName)))
	s = openMem(t, m, Options{Compression: CompressionNone})
	defer s.Close()
	nodes, err = s.Tree(context.Background(), goldenSession)
	require.NoError(t, err)
	assert.Equal(t, "Try approach A.", nodes[0].Preview, "rebuilt from the chunk lines")
}
