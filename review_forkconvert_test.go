package sessionstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReviewConvertCompressionForks: a root with a parent, a fork and a
// fork of the fork (each with sealed chunks of its own), a trash/ left
// by a Delete and a stray forkcache/, converted to each mode and back:
// every session reads as before and verifies.
func TestReviewConvertCompressionForks(t *testing.T) {
	ctx := context.Background()
	o := &Options{ChunkSize: 1 << 10}
	s, dir := apiNewStore(t, o)
	parent := apiNewSession(t, s)
	big := func(id uuid.UUID, n int, tag string) []Event {
		var out []Event
		for i := range n {
			out = append(out, apiAppend(t, s, id, UserText(fmt.Sprintf("%s %d %s", tag, i, strings.Repeat("x", 120)))))
		}
		return out
	}
	pev := big(parent, 20, "p")
	f1, err := s.Fork(ctx, parent, pev[12].ID)
	require.NoError(t, err)
	f1ev := big(f1.ID, 20, "f1")
	f2, err := s.Fork(ctx, f1.ID, f1ev[15].ID)
	require.NoError(t, err)
	big(f2.ID, 20, "f2")
	gone := apiNewSession(t, s)
	big(gone, 3, "gone")
	require.NoError(t, s.Delete(ctx, gone))
	require.NoError(t, s.CreateLane(ctx, f1.ID, "side", f1ev[3].ID))
	require.NoError(t, s.Close())
	require.NoError(t, os.MkdirAll(filepath.Join(dir, trashDir, "leftover"), 0o700))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, forkCacheDir, parent.String()), 0o700))

	ids := []uuid.UUID{parent, f1.ID, f2.ID}
	view := func(mode string) map[uuid.UUID][]Event {
		s := apiOpen(t, dir, &Options{ChunkSize: 1 << 10, Compression: mode})
		defer s.Close()
		out := map[uuid.UUID][]Event{}
		for _, id := range ids {
			evs, err := s.Load(ctx, id)
			require.NoError(t, err)
			out[id] = evs
			r, err := s.Verify(ctx, id)
			require.NoError(t, err)
			assert.True(t, r.OK(), "%s: %v", id, r.Problems)
		}
		lanes, err := s.Lanes(ctx, f1.ID)
		require.NoError(t, err)
		require.Len(t, lanes, 2)
		return out
	}
	before := view(CompressionZstd)
	for _, mode := range []string{CompressionNone, CompressionZstd} {
		require.NoError(t, ConvertCompression(ctx, dir, &Options{ChunkSize: 1 << 10, Compression: mode}), mode)
		assert.Equal(t, before, view(mode), mode)
	}
}

// TestReviewForkParentChangedElsewhere: the fork's first append and its
// reopen while another Store (another writer of the parent's files)
// seals and compacts the parent.
func TestReviewForkParentChangedElsewhere(t *testing.T) {
	ctx := context.Background()
	o := &Options{ChunkSize: 1 << 10}
	s, dir := apiNewStore(t, o)
	parent := apiNewSession(t, s)
	var pev []Event
	for i := range 6 {
		pev = append(pev, apiAppend(t, s, parent, UserText(fmt.Sprintf("p %d %s", i, strings.Repeat("y", 200)))))
	}
	fork, err := s.Fork(ctx, parent, pev[5].ID)
	require.NoError(t, err)
	loaded, err := s.Load(ctx, fork.ID)
	require.NoError(t, err)
	require.Equal(t, forkIDs(pev), forkIDs(loaded))
	require.NoError(t, s.CloseSession(ctx, parent))

	other := apiOpen(t, dir, o) // the parent's writer elsewhere
	defer other.Close()
	for i := range 20 {
		apiAppend(t, other, parent, UserText(fmt.Sprintf("later %d %s", i, strings.Repeat("z", 200))))
	}
	head, err := other.Head(ctx, parent)
	require.NoError(t, err)
	_, err = other.Compact(ctx, parent, Compaction{Head: head, Summary: Summary{Text: "sum"}})
	require.NoError(t, err)
	require.NoError(t, other.CloseSession(ctx, parent)) // seals

	own := apiAppend(t, s, fork.ID, UserText("own"))
	assert.Equal(t, pev[5].ID, own.ParentID)
	loaded, err = s.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, append(forkIDs(pev), own.ID), forkIDs(loaded))
	require.NoError(t, s.Close())
	s = apiOpen(t, dir, o)
	defer s.Close()
	loaded, err = s.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, append(forkIDs(pev), own.ID), forkIDs(loaded))
	r, err := s.Verify(ctx, fork.ID)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}
