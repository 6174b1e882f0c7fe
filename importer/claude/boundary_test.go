package claude

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A compact boundary whose logicalParentUuid names a record not in the
// file (the conversation before it is in an earlier transcript) is no
// problem: it is a note, and Load starts at the compaction, with its
// summary, as Claude Code's context does.
func TestBoundaryWithParentNotInFile(t *testing.T) {
	ctx := context.Background()
	for _, first := range []bool{true, false} {
		lines := []string{boundary("c", "gone", 2), compactSummary("d", "c", 3, "The summary."), rec("e", "d", 4)}
		want := []string{"compaction: The summary.", "user: e"}
		noteLine := 1
		if !first {
			lines = append([]string{rec("a", "", 0)}, lines...)
			noteLine = 2
		}
		path := writeLines(t, t.TempDir(), "s", lines...)
		st := openStore(t)
		rep, err := Import(ctx, st, []string{path}, nil)
		require.NoError(t, err)
		assert.Empty(t, rep.Errors)
		require.Len(t, rep.Notes, 1)
		assert.Equal(t, path, rep.Notes[0].Path)
		assert.Equal(t, noteLine, rep.Notes[0].Line)
		assert.Contains(t, rep.Notes[0].Text, "gone")
		evs, err := st.Load(ctx, onlySession(t, st).ID)
		require.NoError(t, err)
		assert.Equal(t, want, texts(t, evs))
	}
}

// The real transcripts, each continued from an earlier one: a boundary
// naming a record of that earlier file, its summary, then the real
// conversation. Every file imports without a problem, with one note, and
// Load starts at the compaction.
func TestBoundaryWithParentNotInFileRealData(t *testing.T) {
	ctx := context.Background()
	out := t.TempDir()
	var made []string
	for _, path := range transcripts(t, sharedData(t)) {
		if isAgentFile(path) {
			continue
		}
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		var lines []string
		rooted := false
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			line := sc.Text()
			var m map[string]json.RawMessage
			if !rooted && json.Unmarshal([]byte(line), &m) == nil && len(m["uuid"]) > 0 && string(m["parentUuid"]) == "null" && string(m["isSidechain"]) != "true" {
				m["parentUuid"] = json.RawMessage(`"summary-0"`)
				b, err := json.Marshal(m)
				require.NoError(t, err)
				line, rooted = string(b), true
			}
			lines = append(lines, line)
		}
		require.NoError(t, sc.Err())
		if !rooted {
			continue
		}
		lines = append([]string{boundary("boundary-0", "in-an-earlier-file", 0), compactSummary("summary-0", "boundary-0", 0, "What came before.")}, lines...)
		rel, err := filepath.Rel(sharedData(t), path)
		require.NoError(t, err)
		dst := filepath.Join(out, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		require.NoError(t, os.WriteFile(dst, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
		made = append(made, dst)
	}
	require.GreaterOrEqual(t, len(made), 8)
	st := openStore(t)
	rep, err := Import(ctx, st, made, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Len(t, rep.Notes, len(made), "one note a file")
	for _, path := range made {
		f, err := Read(path)
		require.NoError(t, err)
		s := f.Sessions[0]
		evs, err := st.Load(ctx, s.Meta.ID)
		require.NoError(t, err)
		require.NotEmpty(t, evs)
		assert.Equal(t, sessionstore.KindCompaction, evs[0].Kind, "%s: the context starts at the boundary", path)
	}
}

// A transcript continued from an earlier one, read while Claude Code has
// written its boundary and not yet the summary: the boundary is its only
// record, and waits for the file to grow as any last boundary does, so
// that importing the grown file gives the compaction its summary.
func TestBoundaryAloneWaitsForItsSummary(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	dir := t.TempDir()
	snapshot := `{"type":"file-history-snapshot","messageId":"m","snapshot":{},"isSnapshotUpdate":false}`
	path := writeLines(t, dir, "s", snapshot, boundary("c", "gone", 2))
	rep, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Zero(t, rep.Added, "the boundary waits for its summary")

	writeLines(t, dir, "s", snapshot, boundary("c", "gone", 2), compactSummary("d", "c", 3, "The summary."), rec("e", "d", 4))
	rep, err = Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Len(t, rep.Notes, 1)
	evs, err := st.Load(ctx, onlySession(t, st).ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"compaction: The summary.", "user: e"}, texts(t, evs))
}
