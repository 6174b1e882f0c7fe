package sessionstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestLazyEndAppendingIndexWriteFails: a session appending without its
// index holds its index lines; a call that loads the index (Tree) ends
// the appending, and closing the index writes the held lines. When that
// write fails, the lines are lost for good, so the session stops writing
// (as after any failed index write): an Append that reopened index.jsonl
// at its end would write lines after the missing ones, a gap the next
// lazy open would take for a clean index.
func TestLazyEndAppendingIndexWriteFails(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{Compression: CompressionNone})
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	acked := appendN(t, s, meta.ID, 3)
	require.NoError(t, s.Close())

	s = openMem(t, m, Options{Compression: CompressionNone})
	indexPath := filepath.Join(s.sessionDir(meta.ID), indexName)
	acked = append(acked, appendN(t, s, meta.ID, 5)...) // a lazy open: 5 lines held
	fail := true
	m.SetFault(func(op vfs.Op, path string) error {
		if fail && op == vfs.OpWrite && path == indexPath {
			return errors.New("injected index write failure")
		}
		return nil
	})
	_, err = s.Tree(ctx, meta.ID) // ends the appending: the held lines' write fails
	require.Error(t, err)
	fail = false
	_, err = s.Append(ctx, meta.ID, UserText("after the failed index write"))
	assert.Error(t, err, "the held lines are lost: the session stops writing until reopened")
	require.NoError(t, s.Close())

	s = openMem(t, m, Options{Compression: CompressionNone})
	defer s.Close()
	got, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(got), len(acked))
	assert.Equal(t, ids(acked), ids(got)[:len(acked)])
	r, err := s.Verify(ctx, meta.ID)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}
