package sessionstore

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestIndexLinesWrittenInBatches: an append's index line is held in
// memory and index.jsonl is written once per index.HoldLines appends, not
// once per append; the session's checkpoints (Flush, Close) write what is
// held.
func TestIndexLinesWrittenInBatches(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{Compression: CompressionNone}) // Close leaves the index as it is
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	indexPath := filepath.Join(s.sessionDir(meta.ID), indexName)
	writes := 0
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && path == indexPath {
			writes++
		}
		return nil
	})
	n := 2*index.HoldLines + 5
	for i := range n {
		_, err := s.Append(ctx, meta.ID, UserText(fmt.Sprint("event ", i)))
		require.NoError(t, err)
	}
	assert.Equal(t, 2, writes, "one write of the index per %d appends", index.HoldLines)
	assert.Equal(t, 2*index.HoldLines, indexLines(t, m, indexPath))
	require.NoError(t, s.Flush(ctx, meta.ID))
	assert.Equal(t, n, indexLines(t, m, indexPath), "Flush writes the lines held")
	_, err = s.Append(ctx, meta.ID, UserText("last"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.Equal(t, n+1, indexLines(t, m, indexPath), "Close writes the lines held")
}

// TestIndexBehindChunkReaders: while a writer holds index lines (the
// index lags its chunk by acknowledged events), every reader finds those
// events in the chunk: a read-only Store (Load, Head, Event, Tree),
// Verify of the writer's and of the reader's Store, a fork at the newest
// event, and the next writer after a power cut.
func TestIndexBehindChunkReaders(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	w := openMem(t, m, Options{})
	meta, err := w.Create(ctx, Meta{})
	require.NoError(t, err)
	indexPath := filepath.Join(w.sessionDir(meta.ID), indexName)
	var acked []Event
	for i := range index.HoldLines + 10 {
		ev, err := w.Append(ctx, meta.ID, UserText(fmt.Sprint("event ", i)))
		require.NoError(t, err)
		acked = append(acked, ev)
	}
	require.Equal(t, index.HoldLines, indexLines(t, m, indexPath), "the index lags the chunk")
	last := acked[len(acked)-1].ID

	r := openMem(t, m, Options{ReadOnly: true})
	got, err := r.Load(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, ids(acked), ids(got), "a reader loads every acknowledged event")
	head, err := r.Head(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, last, head)
	ev, err := r.Event(ctx, meta.ID, last)
	require.NoError(t, err)
	assert.Equal(t, string(acked[len(acked)-1].Record), string(ev.Record))
	nodes, err := r.Tree(ctx, meta.ID)
	require.NoError(t, err)
	assert.Len(t, nodes, len(acked))
	rep, err := r.Verify(ctx, meta.ID)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	require.NoError(t, r.Close())

	// A power cut now: the next writer finds every acknowledged event,
	// the index rebuilt from the chunk (and the journal).
	crashed := m.CrashClone(vfs.KeepSynced, 1)

	fork, err := w.Fork(ctx, meta.ID, last)
	require.NoError(t, err)
	fgot, err := w.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, ids(acked), ids(fgot), "a fork at an event past the index's end")

	rep, err = w.Verify(ctx, meta.ID)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Equal(t, len(acked), indexLines(t, m, indexPath), "Verify writes the lines the writer holds first")
	require.NoError(t, w.Close())

	s2 := openMem(t, crashed, Options{})
	got, err = s2.Load(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, ids(acked), ids(got), "every acknowledged event after a power cut")
	rep, err = s2.Verify(ctx, meta.ID)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Empty(t, rep.Repairs)
	require.NoError(t, s2.Close())
}

func indexLines(t *testing.T, m *vfs.MemFS, path string) int {
	t.Helper()
	b, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	return bytes.Count(b, []byte("\n"))
}
