package sessionstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A fork Prune chose but could not remove (another writer holds it)
// keeps the session it forks: removing that would leave the fork
// reading its prefix from files that are gone.
func TestReviewPruneKeepsParentOfLockedFork(t *testing.T) {
	ctx := context.Background()
	m, s, parent := memSession(t, Options{})
	defer s.Close()
	evs := appendN(t, s, parent, 2)
	f, err := s.Fork(ctx, parent, evs[1].ID)
	require.NoError(t, err)
	appendN(t, s, f.ID, 1)
	require.NoError(t, s.Close())

	s = openMem(t, m, Options{})
	defer s.Close()
	other := openMem(t, m, Options{})
	defer other.Close()
	appendN(t, other, f.ID, 1) // other holds the fork's lock

	got, err := s.Prune(ctx, PrunePolicy{KeepRecent: -1, KeepNewest: 0, Before: evs[1].Time.AddDate(1, 0, 0)})
	require.NoError(t, err)
	assert.Empty(t, got.Removed)
	require.Len(t, got.Skipped, 2)
	assert.Equal(t, f.ID, got.Skipped[0].Meta.ID)
	assert.ErrorIs(t, got.Skipped[0].Err, ErrLocked)
	assert.Equal(t, parent, got.Skipped[1].Meta.ID)
	assert.ErrorIs(t, got.Skipped[1].Err, ErrHasForks)
	assert.Zero(t, got.Bytes)
	_, err = s.Load(ctx, parent)
	assert.NoError(t, err, "the parent stays")
	loaded, err := other.Load(ctx, f.ID)
	require.NoError(t, err, "the fork still reads its prefix")
	assert.Len(t, loaded, 4)
}
