package sessionstore

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// activePaths returns the ids of the active path as Load, LoadSeq and
// FullPath (leaf uuid.Nil) give it, and requires that they agree.
func activePaths(t *testing.T, s *Store, id uuid.UUID) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	load, err := s.Load(ctx, id)
	require.NoError(t, err)
	seq, err := collect(t, s.LoadSeq(ctx, id))
	require.NoError(t, err)
	full, err := s.FullPath(ctx, id, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, forkIDs(load), forkIDs(seq), "LoadSeq is Load")
	if len(load) > 0 && load[0].Kind != KindCompaction {
		assert.Equal(t, forkIDs(load), forkIDs(full), "FullPath from the active path's end is Load, with no compaction")
	} else if len(load) > 0 {
		assert.Equal(t, load[len(load)-1].ID, full[len(full)-1].ID, "FullPath ends where Load does")
	}
	return forkIDs(load)
}

// TestActivePathIsWhatTheNextAppendExtends: Load returns the path the
// next Append extends, whatever chose it (a Branch selection, a lane
// switch, durable across a reopen), so that a harness that loads, asks
// its model and appends the answer attaches it where its model saw the
// context end; HEAD moves only with that append. An append that goes on
// from a leaf starts no branch.
func TestActivePathIsWhatTheNextAppendExtends(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	evs := forkTexts(t, s, id, "a", "b", "c")
	a, b, c := evs[0], evs[1], evs[2]

	require.NoError(t, s.Branch(ctx, id, a.ID))
	assert.Equal(t, []uuid.UUID{a.ID}, activePaths(t, s, id), "a Branch selection ends the active path")
	assert.Equal(t, c.ID, apiHead(t, s, id), "HEAD moves only with the next append")
	d := apiAppend(t, s, id, AssistantText("d"))
	assert.Equal(t, a.ID, d.ParentID)
	assert.Equal(t, a.ID, d.BranchFrom, "a already had a child: d starts a branch beside b")
	assert.Equal(t, []uuid.UUID{a.ID, d.ID}, activePaths(t, s, id))

	require.NoError(t, s.Branch(ctx, id, c.ID))
	assert.Equal(t, []uuid.UUID{a.ID, b.ID, c.ID}, activePaths(t, s, id))
	e := apiAppend(t, s, id, AssistantText("e"))
	assert.Equal(t, c.ID, e.ParentID)
	assert.Equal(t, uuid.Nil, e.BranchFrom, "c was a leaf: e goes on from it, nothing forks")

	// A lane switch: the active path is the lane's, at once and after a
	// reopen (the switch is durable), until the next append moves HEAD.
	require.NoError(t, s.CreateLane(ctx, id, "alt", d.ID))
	require.NoError(t, s.SwitchLane(ctx, id, "alt"))
	assert.Equal(t, []uuid.UUID{a.ID, d.ID}, activePaths(t, s, id))
	assert.Equal(t, e.ID, apiHead(t, s, id))
	require.NoError(t, s.Close())
	s = apiOpen(t, dir, nil)
	assert.Equal(t, []uuid.UUID{a.ID, d.ID}, activePaths(t, s, id), "after a reopen")
	ro := apiOpen(t, dir, &Options{ReadOnly: true})
	assert.Equal(t, []uuid.UUID{a.ID, d.ID}, activePaths(t, ro, id), "a read-only Store reads the switch from the lanes file")
	next, branching, err := ro.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, d.ID, next)
	assert.False(t, branching, "d is a leaf")
	f := apiAppend(t, s, id, AssistantText("f"))
	assert.Equal(t, d.ID, f.ParentID, "the append extends the path Load returned")
	assert.Equal(t, uuid.Nil, f.BranchFrom, "d was alt's leaf")
	assert.Equal(t, []uuid.UUID{a.ID, d.ID, f.ID}, activePaths(t, s, id))
	assert.Equal(t, []uuid.UUID{a.ID, d.ID, f.ID}, activePaths(t, ro, id), "the read-only Store follows the append")

	// Compact summarizes what Load returned, a Branch selection's path too.
	require.NoError(t, s.Branch(ctx, id, b.ID))
	path, err := s.Load(ctx, id)
	require.NoError(t, err)
	comp, err := s.Compact(ctx, id, Compaction{Head: path[len(path)-1].ID, Summary: Summary{Text: "a and b"}})
	require.NoError(t, err)
	assert.Equal(t, b.ID, comp.ParentID)
	assert.Equal(t, b.ID, comp.BranchFrom, "b had a child, c")
	assert.Equal(t, []uuid.UUID{comp.ID}, activePaths(t, s, id)[:1])
	_, err = s.Compact(ctx, id, Compaction{Head: b.ID, Summary: Summary{Text: "stale"}})
	assert.ErrorIs(t, err, ErrHeadMoved)
}
