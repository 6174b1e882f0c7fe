package sessionstore

import (
	"context"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// hookFS runs before once, just before the first open of a file whose
// name ends with suffix.
type hookFS struct {
	vfs.FS
	suffix string
	once   sync.Once
	before func()
}

func (h *hookFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if strings.HasSuffix(name, h.suffix) {
		h.once.Do(h.before)
	}
	return h.FS.OpenFile(name, flag, perm)
}

// A read-only store's Lanes refreshes the session, then reads the lanes
// file: a writer appending and creating a lane at its new event in
// between is no damage.
func TestReviewLanesReadOnlyRace(t *testing.T) {
	ctx := context.Background()
	m, w, id := memSession(t, deterministic(Options{}))
	defer w.Close()
	evs := appendN(t, w, id, 2)
	require.NoError(t, w.CreateLane(ctx, id, "side", evs[0].ID))
	hf := &hookFS{FS: m, suffix: filepath.Join(id.String(), lanesFile)}
	var newest Event
	hf.before = func() {
		newest = appendN(t, w, id, 1)[0]
		require.NoError(t, w.CreateLane(ctx, id, "new", newest.ID))
	}
	r := openMem(t, hf, Options{ReadOnly: true})
	defer r.Close()
	ls, err := r.Lanes(ctx, id)
	require.NoError(t, err, "the lanes file names an event the reader has not loaded yet")
	got := map[string]Lane{}
	for _, l := range ls {
		got[l.Name] = l
	}
	assert.Equal(t, newest.ID, got["new"].Tip)
	assert.Equal(t, newest.ID, got[DefaultLane].Tip, "the active lane's tip is the writer's HEAD")
}

// A fork without events of its own has HEAD in its prefix: the first lane
// call records the implicit lane with that tip, and the fork must still
// open (and verify) afterwards.
func TestReviewLanesForkWithoutOwnEvents(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, deterministic(Options{}))
	evs := appendN(t, s, id, 3)
	f, err := s.Fork(ctx, id, evs[1].ID)
	require.NoError(t, err)
	require.NoError(t, s.CreateLane(ctx, f.ID, "side", evs[0].ID), "a lane at a prefix event, as Branch allows")
	require.NoError(t, s.Close())

	s2 := openMem(t, m, Options{})
	defer s2.Close()
	tips, active := laneTips(t, s2, f.ID)
	assert.Equal(t, DefaultLane, active)
	assert.Equal(t, evs[1].ID, tips[DefaultLane])
	assert.Equal(t, evs[0].ID, tips["side"])
	ev, err := s2.Append(ctx, f.ID, UserText("own"))
	require.NoError(t, err)
	assert.Equal(t, evs[1].ID, ev.ParentID)
	require.NoError(t, s2.SwitchLane(ctx, f.ID, "side"))
	next, branching, err := s2.NextParent(ctx, f.ID)
	require.NoError(t, err)
	assert.Equal(t, evs[0].ID, next, "the switch to a lane at a prefix event")
	assert.True(t, branching)
	rep, err := s2.Verify(ctx, f.ID)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}
