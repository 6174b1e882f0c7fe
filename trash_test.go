package sessionstore

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// trashWorkload makes a session with events and a blob (the victim) and
// another, on m, and closes the store.
func trashWorkload(t *testing.T, m vfs.FS, o Options) (victim, other uuid.UUID, vEvs []Event) {
	t.Helper()
	ctx := context.Background()
	s := openMem(t, m, o)
	v, err := s.Create(ctx, Meta{Name: "victim", Labels: map[string]string{"team": "a"}})
	require.NoError(t, err)
	w, err := s.Create(ctx, Meta{Name: "other"})
	require.NoError(t, err)
	vEvs = appendN(t, s, v.ID, 3)
	big, err := s.Append(ctx, v.ID, bigResult("c", 1))
	require.NoError(t, err)
	vEvs = append(vEvs, big)
	appendN(t, s, w.ID, 2)
	require.NoError(t, s.Close())
	return v.ID, w.ID, vEvs
}

// checkSessionWhole asserts that s holds session id with exactly the
// events want on its active path, its blob readable and Verify clean.
func checkSessionWhole(t *testing.T, state string, s *Store, id uuid.UUID, want []Event) {
	t.Helper()
	ctx := context.Background()
	got, err := s.Load(ctx, id)
	require.NoError(t, err, state)
	require.Len(t, got, len(want), "%s: every event", state)
	for i := range want {
		require.Equal(t, want[i].ID, got[i].ID, state)
	}
	last := got[len(got)-1]
	if last.Digest != "" {
		_, err = s.Resolve(ctx, id, last)
		require.NoError(t, err, "%s: the blob is there", state)
	}
	r, err := s.Verify(ctx, id)
	require.NoError(t, err, state)
	require.True(t, r.OK(), "%s: %v", state, r.Problems)
}

func listedIn(t *testing.T, s *Store, id uuid.UUID) bool {
	t.Helper()
	list, err := s.List(context.Background())
	require.NoError(t, err)
	return slices.ContainsFunc(list, func(m Meta) bool { return m.ID == id })
}

func trashIDs(t *testing.T, s *Store) []uuid.UUID {
	t.Helper()
	items, err := s.Trash(context.Background())
	require.NoError(t, err)
	var out []uuid.UUID
	for _, it := range items {
		require.NoError(t, it.Err)
		out = append(out, it.Meta.ID)
	}
	return out
}

// TestTrashUndelete: a deleted session is kept in the trash, listed by
// Trash with its metadata and times, gone from every other call, and
// Undelete brings it back whole, writable.
func TestTrashUndelete(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	clock := &settableClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	o := Options{TrashFor: 48 * time.Hour}
	o.now = clock.now
	victim, other, want := trashWorkload(t, m, o)
	s := openMem(t, m, o)
	defer s.Close()

	deletedAt := clock.t.Add(time.Minute)
	clock.set(deletedAt)
	require.NoError(t, s.Delete(ctx, victim))
	_, err := s.Meta(ctx, victim)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Load(ctx, victim)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.False(t, listedIn(t, s, victim))
	assert.True(t, listedIn(t, s, other))

	items, err := s.Trash(ctx)
	require.NoError(t, err)
	require.Len(t, items, 1)
	it := items[0]
	require.NoError(t, it.Err)
	assert.Equal(t, victim, it.Meta.ID)
	assert.Equal(t, "victim", it.Meta.Name)
	assert.Equal(t, "a", it.Meta.Labels["team"])
	assert.True(t, it.DeletedAt.Equal(deletedAt), "DeletedAt %s", it.DeletedAt)
	assert.True(t, it.PurgeAt.Equal(deletedAt.Add(48*time.Hour)), "PurgeAt %s", it.PurgeAt)
	assert.Greater(t, it.Bytes, int64(1000), "the bytes of its files, its blob among them")

	// A read-only Store lists the trash too, and cannot undelete.
	ro := openMem(t, m, Options{ReadOnly: true})
	assert.Equal(t, []uuid.UUID{victim}, trashIDs(t, ro))
	assert.ErrorIs(t, ro.Undelete(ctx, victim), ErrReadOnly)
	require.NoError(t, ro.Close())

	assert.ErrorIs(t, s.Undelete(ctx, other), ErrNotFound, "a session not in the trash")
	require.NoError(t, s.Undelete(ctx, victim))
	assert.Empty(t, trashIDs(t, s))
	assert.True(t, listedIn(t, s, victim))
	meta, err := s.Meta(ctx, victim)
	require.NoError(t, err)
	assert.Equal(t, "victim", meta.Name)
	checkSessionWhole(t, "undeleted", s, victim, want)
	ev, err := s.Append(ctx, victim, UserText("after the undelete"))
	require.NoError(t, err)
	assert.Equal(t, want[len(want)-1].ID, ev.ParentID, "the session goes on from its HEAD")
	assert.ErrorIs(t, s.Undelete(ctx, victim), ErrNotFound, "undeleted once")

	// A fresh Store sees it too (the catalogue recorded it).
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	recent, err := s.ListRecent(ctx, 10)
	require.NoError(t, err)
	assert.True(t, slices.ContainsFunc(recent, func(m Meta) bool { return m.ID == victim }))
	checkSessionWhole(t, "reopened", s, victim, append(want, ev))
}

// TestTrashExpiry: a deleted session stays in the trash until its purge
// time, then the next writable Open removes it; a read-only store
// removes nothing; NoTrash removes at once.
func TestTrashExpiry(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &settableClock{t: start}
	o := Options{TrashFor: time.Hour}
	o.now = clock.now
	victim, other, _ := trashWorkload(t, m, o)
	s := openMem(t, m, o)
	require.NoError(t, s.Delete(ctx, victim))
	require.NoError(t, s.Close())

	clock.set(start.Add(59 * time.Minute))
	s = openMem(t, m, o)
	assert.Equal(t, []uuid.UUID{victim}, trashIDs(t, s), "kept until its purge time")
	require.NoError(t, s.Close())

	clock.set(start.Add(61 * time.Minute))
	ro := openMem(t, m, Options{ReadOnly: true})
	assert.Equal(t, []uuid.UUID{victim}, trashIDs(t, ro), "a read-only store removes nothing")
	require.NoError(t, ro.Close())
	s = openMem(t, m, o)
	assert.Empty(t, trashIDs(t, s), "removed once expired")
	assert.Empty(t, trashNames(t, m), "its files too")
	assert.ErrorIs(t, s.Undelete(ctx, victim), ErrNotFound)

	// NoTrash: removed at once, nothing to undelete.
	require.NoError(t, s.Close())
	o.TrashFor = NoTrash
	s = openMem(t, m, o)
	defer s.Close()
	require.NoError(t, s.Delete(ctx, other))
	assert.Empty(t, trashNames(t, m))
	assert.ErrorIs(t, s.Undelete(ctx, other), ErrNotFound)
}

// parentAndFork makes a session "parent" with 3 events and a fork of it
// at the second.
func parentAndFork(t *testing.T, s *Store) (parent Meta, evs []Event, fork Meta) {
	t.Helper()
	parent, err := s.Create(context.Background(), Meta{Name: "parent"})
	require.NoError(t, err)
	evs = appendN(t, s, parent.ID, 3)
	fork, err = s.Fork(context.Background(), parent.ID, evs[1].ID)
	require.NoError(t, err)
	return parent, evs, fork
}

// TestUndeleteFork: a fork comes back only while its parent is in the
// store; once back, it keeps its parent from being deleted.
func TestUndeleteFork(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	defer s.Close()
	parent, evs, fork := parentAndFork(t, s)
	fEv, err := s.Append(ctx, fork.ID, UserText("in the fork"))
	require.NoError(t, err)

	require.NoError(t, s.Delete(ctx, fork.ID))
	require.NoError(t, s.Delete(ctx, parent.ID), "the fork is in the trash: no live fork")
	err = s.Undelete(ctx, fork.ID)
	require.ErrorIs(t, err, ErrNotFound, "its parent is gone")
	assert.Contains(t, err.Error(), parent.ID.String())
	assert.Equal(t, []uuid.UUID{parent.ID, fork.ID}, trashIDs(t, s), "the fork stays in the trash")

	require.NoError(t, s.Undelete(ctx, parent.ID))
	require.NoError(t, s.Undelete(ctx, fork.ID))
	got, err := s.Load(ctx, fork.ID)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, []uuid.UUID{evs[0].ID, evs[1].ID, fEv.ID}, []uuid.UUID{got[0].ID, got[1].ID, got[2].ID})
	assert.ErrorIs(t, s.Delete(ctx, parent.ID), ErrHasForks, "the fork is back")
	assert.ErrorIs(t, s.Purge(ctx, parent.ID), ErrHasForks)
}

// TestUndeleteCreatedAgain: Undelete never replaces a session created
// with the same id since the delete; of two deletions of one id, the
// newest comes back.
func TestUndeleteCreatedAgain(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	defer s.Close()
	first, err := s.Create(ctx, Meta{Name: "first"})
	require.NoError(t, err)
	appendN(t, s, first.ID, 2)
	require.NoError(t, s.Delete(ctx, first.ID))
	again, err := s.Create(ctx, Meta{ID: first.ID, Name: "again"})
	require.NoError(t, err)
	want := appendN(t, s, again.ID, 3)

	assert.ErrorIs(t, s.Undelete(ctx, first.ID), ErrExists)
	meta, err := s.Meta(ctx, first.ID)
	require.NoError(t, err)
	assert.Equal(t, "again", meta.Name, "the session created again stays")
	checkSessionWhole(t, "created again", s, first.ID, want)

	require.NoError(t, s.Delete(ctx, first.ID))
	assert.Len(t, trashIDs(t, s), 2)
	require.NoError(t, s.Undelete(ctx, first.ID))
	meta, err = s.Meta(ctx, first.ID)
	require.NoError(t, err)
	assert.Equal(t, "again", meta.Name, "the newest deletion comes back")
	checkSessionWhole(t, "newest", s, first.ID, want)
}

// TestPurge: Purge removes a session for good, from the store and from
// the trash; an unknown id is no error.
func TestPurge(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	victim, other, _ := trashWorkload(t, m, Options{})
	s := openMem(t, m, Options{})
	defer s.Close()

	require.NoError(t, s.Purge(ctx, victim), "a live session")
	assertGone(t, m, s, victim)
	assert.Empty(t, trashNames(t, m), "nothing kept")
	assert.ErrorIs(t, s.Undelete(ctx, victim), ErrNotFound)

	require.NoError(t, s.Delete(ctx, other))
	require.Len(t, trashNames(t, m), 1)
	require.NoError(t, s.Purge(ctx, other), "a session in the trash")
	assert.Empty(t, trashNames(t, m))
	assert.ErrorIs(t, s.Undelete(ctx, other), ErrNotFound)
	require.NoError(t, s.Purge(ctx, uuid.New()), "an unknown id")
}

// TestUndeleteSyncsBothDirectories: Undelete's rename back into the
// sessions directory is synced in both directories, one right after the
// other (renameSidesFS), so that once it returns nil the session is back
// and out of the trash, after any crash.
func TestUndeleteSyncsBothDirectories(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	fsys := &renameSidesFS{FS: m}
	victim, _, want := trashWorkload(t, fsys, Options{})
	s := openMem(t, fsys, Options{})
	defer s.Close()
	require.NoError(t, s.Delete(ctx, victim))
	m.SetFault(fsys.observe)
	require.NoError(t, s.Undelete(ctx, victim))
	m.SetFault(nil)
	assert.Empty(t, fsys.between, "operations while the rename was durable in one directory only")
	assert.Empty(t, fsys.unsynced(), "the rename is not durable in both directories")
	c := openMem(t, m.CrashClone(vfs.KeepSynced, 0), Options{})
	defer c.Close()
	checkSessionWhole(t, "after a crash", c, victim, want)
	assert.Empty(t, trashIDs(t, c))
}

// trashCrashRun deletes the victim of a fresh workload into the trash,
// reopens the store and runs op with the power cut at its k-th mutating
// operation (never if k is 0), then cuts the power.
func trashCrashRun(t *testing.T, k int, op func(s *Store, victim uuid.UUID) error) (m *vfs.MemFS, victim, other uuid.UUID, want []Event, cut bool) {
	return trashCrashRunWith(t, Options{}, k, op)
}

// trashCrashRunWith is trashCrashRun with the Stores opened with o.
func trashCrashRunWith(t *testing.T, o Options, k int, op func(s *Store, victim uuid.UUID) error) (m *vfs.MemFS, victim, other uuid.UUID, want []Event, cut bool) {
	t.Helper()
	ctx := context.Background()
	m = vfs.NewMemFS()
	victim, other, want = trashWorkload(t, m, o)
	s := openMem(t, m, o)
	require.NoError(t, s.Delete(ctx, victim))
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	_, err := s.List(ctx) // the catalogue is current
	require.NoError(t, err)
	n := 0
	m.SetFault(func(o vfs.Op, path string) error {
		if vfs.Mutating(o) {
			if n++; n == k {
				return vfs.ErrPowerLoss
			}
		}
		return nil
	})
	err = op(s, victim)
	m.SetFault(nil)
	s.Close()
	cut = m.PowerCut() != nil
	if !cut {
		require.NoError(t, err, "without a power cut the call succeeds")
	}
	m.PowerOff()
	return m, victim, other, want, cut
}

// trashCrashPoints runs check on every crash state of op (every crash
// point, KeepSynced and one other mode in turn; every mode with
// SESSIONSTORE_CRASH_STATES=all) and returns the number of points.
func trashCrashPoints(t *testing.T, op func(s *Store, victim uuid.UUID) error, check func(state string, s *Store, victim, other uuid.UUID, want []Event)) int {
	return trashCrashPointsWith(t, Options{}, op, check)
}

// trashCrashPointsWith is trashCrashPoints with the Stores opened with o.
func trashCrashPointsWith(t *testing.T, o Options, op func(s *Store, victim uuid.UUID) error, check func(state string, s *Store, victim, other uuid.UUID, want []Event)) int {
	full := testSize(t, crashStatesEnv, 0, 1) > 0
	points := 0
	for k := 1; ; k++ {
		m, victim, other, want, cut := trashCrashRunWith(t, o, k, op)
		if !cut {
			break
		}
		points++
		for mi, mode := range vfs.CrashModes {
			if !full && mode != vfs.KeepSynced && mi != k%len(vfs.CrashModes) {
				continue
			}
			state := fmt.Sprintf("crash point %d (%v), %s", k, m.PowerCut(), mode)
			c := m.CrashClone(mode, uint64(k))
			s := openMem(t, c, o)
			check(state, s, victim, other, want)
			require.NoError(t, s.Close())
		}
	}
	return points
}

// TestUndeleteCrashPoints: a crash anywhere in an Undelete leaves the
// session whole in the trash or whole back, never both, never neither;
// once Undelete returned, back.
func TestUndeleteCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	undelete := func(s *Store, victim uuid.UUID) error { return s.Undelete(ctx, victim) }
	m, victim, _, want, _ := trashCrashRun(t, 0, undelete)
	s := openMem(t, m.CrashClone(vfs.KeepSynced, 0), Options{})
	checkSessionWhole(t, "after Undelete returned", s, victim, want)
	assert.Empty(t, trashIDs(t, s), "after Undelete returned, out of the trash")
	require.NoError(t, s.Close())

	back, inTrash := 0, 0
	points := trashCrashPoints(t, undelete, func(state string, s *Store, victim, other uuid.UUID, want []Event) {
		ids := trashIDs(t, s)
		_, err := s.Meta(ctx, victim)
		if err == nil {
			back++
			assert.NotContains(t, ids, victim, "%s: back and in the trash", state)
			require.True(t, listedIn(t, s, victim), state)
		} else {
			inTrash++
			require.ErrorIs(t, err, ErrNotFound, state)
			require.Contains(t, ids, victim, "%s: neither back nor in the trash", state)
			require.NoError(t, s.Undelete(ctx, victim), state)
		}
		checkSessionWhole(t, state, s, victim, want)
		require.True(t, listedIn(t, s, other), state)
	})
	t.Logf("%d crash points: %d states back, %d in the trash", points, back, inTrash)
	require.GreaterOrEqual(t, points, 3, "the catalogue record, the rename and its syncs are crash points")
	assert.NotZero(t, back)
	assert.NotZero(t, inTrash)
}

// TestPurgeCrashPoints: a crash anywhere in a Purge of a session in the
// trash leaves it whole in the trash (Undelete brings it back whole) or
// out of it, never half removed under a name Undelete brings back.
func TestPurgeCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	purge := func(s *Store, victim uuid.UUID) error { return s.Purge(ctx, victim) }
	kept, gone := 0, 0
	points := trashCrashPoints(t, purge, func(state string, s *Store, victim, other uuid.UUID, want []Event) {
		if !slices.Contains(trashIDs(t, s), victim) {
			gone++
			assert.ErrorIs(t, s.Undelete(ctx, victim), ErrNotFound, state)
			return
		}
		kept++
		require.NoError(t, s.Undelete(ctx, victim), state)
		checkSessionWhole(t, state, s, victim, want)
	})
	t.Logf("%d crash points: %d states kept, %d gone", points, kept, gone)
	require.GreaterOrEqual(t, points, 4, "the rename, its sync and the removals are crash points")
	assert.NotZero(t, kept)
	assert.NotZero(t, gone)
}

// TestPrunePinned: Prune never removes a pinned session, in a dry run
// or not; unpinned, it goes.
func TestPrunePinned(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	clock := &settableClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	o := Options{}
	o.now = clock.now
	s := openMem(t, m, o)
	defer s.Close()
	var ids []uuid.UUID
	for i := range 3 {
		meta, err := s.Create(ctx, Meta{Name: fmt.Sprintf("s%d", i)})
		require.NoError(t, err)
		appendN(t, s, meta.ID, 1)
		ids = append(ids, meta.ID)
	}
	pinned, err := s.Pin(ctx, ids[1], true)
	require.NoError(t, err)
	assert.True(t, pinned.Pinned())
	clock.set(clock.t.Add(24 * time.Hour))
	policy := PrunePolicy{Before: clock.t, KeepRecent: -1}

	policy.DryRun = true
	dry, err := s.Prune(ctx, policy)
	require.NoError(t, err)
	policy.DryRun = false
	res, err := s.Prune(ctx, policy)
	require.NoError(t, err)
	for _, r := range []PruneResult{dry, res} {
		assert.ElementsMatch(t, []uuid.UUID{ids[0], ids[2]}, pruneIDs(r.Removed))
		require.Len(t, r.Skipped, 1)
		assert.Equal(t, ids[1], r.Skipped[0].Meta.ID)
		assert.ErrorIs(t, r.Skipped[0].Err, ErrPinned)
	}
	_, err = s.Meta(ctx, ids[1])
	require.NoError(t, err, "the pinned session stays")
	assert.ElementsMatch(t, []uuid.UUID{ids[0], ids[2]}, trashIDs(t, s), "the pruned ones are in the trash")

	unpinned, err := s.Pin(ctx, ids[1], false)
	require.NoError(t, err)
	assert.False(t, unpinned.Pinned())
	clock.set(clock.t.Add(24 * time.Hour))
	res, err = s.Prune(ctx, PrunePolicy{Before: clock.t, KeepRecent: -1})
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{ids[1]}, pruneIDs(res.Removed))
}

func pruneIDs(items []PruneItem) []uuid.UUID {
	var out []uuid.UUID
	for _, it := range items {
		out = append(out, it.Meta.ID)
	}
	return out
}

// TestPruneKeepRecent: by default Prune keeps the sessions written
// within DefaultKeepRecent, and those the pruning Store opened within
// it, even when Before selects them; its dry run says exactly that;
// KeepRecent negative asks for them too.
func TestPruneKeepRecent(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &settableClock{t: start}
	o := Options{}
	o.now = clock.now
	s := openMem(t, m, o)
	var old, written, opened uuid.UUID
	for i, id := range []*uuid.UUID{&old, &opened, &written} {
		if i == 2 {
			clock.set(start.Add(90 * time.Minute)) // written 30 minutes before the prune
		}
		meta, err := s.Create(ctx, Meta{Name: fmt.Sprintf("s%d", i)})
		require.NoError(t, err)
		appendN(t, s, meta.ID, 1)
		*id = meta.ID
	}
	require.NoError(t, s.Close())

	clock.set(start.Add(2 * time.Hour))
	s = openMem(t, m, o) // this Store has opened none of them yet
	defer s.Close()
	_, err := s.Load(ctx, opened)
	require.NoError(t, err)
	require.NoError(t, s.CloseSession(ctx, opened))
	policy := PrunePolicy{Before: clock.t.Add(time.Minute)}
	policy.DryRun = true
	dry, err := s.Prune(ctx, policy)
	require.NoError(t, err)
	policy.DryRun = false
	res, err := s.Prune(ctx, policy)
	require.NoError(t, err)
	for _, r := range []PruneResult{dry, res} {
		assert.Equal(t, []uuid.UUID{old}, pruneIDs(r.Removed))
		assert.ElementsMatch(t, []uuid.UUID{written, opened}, pruneIDs(r.Skipped))
		for _, it := range r.Skipped {
			assert.ErrorIs(t, it.Err, ErrRecentlyUsed, "%s", it.Meta.Name)
		}
	}
	res, err = s.Prune(ctx, PrunePolicy{Before: clock.t.Add(time.Minute), KeepRecent: -1})
	require.NoError(t, err)
	assert.ElementsMatch(t, []uuid.UUID{written, opened}, pruneIDs(res.Removed), "asked for")
	assert.Empty(t, res.Skipped)
	require.NoError(t, s.Undelete(ctx, old), "pruned sessions are in the trash")
	_, err = s.Meta(ctx, old)
	assert.NoError(t, err)
}

// TestUndeleteErrors: the trash's calls on a closed store, and a
// session in the trash as other calls see it.
func TestUndeleteErrors(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	victim, _, _ := trashWorkload(t, m, Options{})
	s := openMem(t, m, Options{})
	require.NoError(t, s.Delete(ctx, victim))
	_, err := s.Append(ctx, victim, UserText("x"))
	assert.ErrorIs(t, err, ErrNotFound, "a session in the trash is not in the store")
	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.Undelete(ctx, victim), ErrClosed)
	_, err = s.Trash(ctx)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, s.Purge(ctx, victim), ErrClosed)
	_, err = m.Stat(filepath.Join(memRoot, trashDir))
	require.NoError(t, err)
	_, err = m.Stat(sessionPath(victim))
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestRemoteDeleteIsFinal: with Options.Remote a Delete is final (the
// object store's delete marker), whatever TrashFor says: nothing is kept
// in the local trash, and Undelete finds nothing.
func TestRemoteDeleteIsFinal(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	s := memRemoteStore(t, obj, func(o *Options) { o.TrashFor = 24 * time.Hour })
	meta, err := s.Create(ctx, Meta{Name: "remote"})
	require.NoError(t, err)
	appendN(t, s, meta.ID, 2)
	require.NoError(t, s.Delete(ctx, meta.ID))
	assert.Empty(t, trashIDs(t, s))
	assert.ErrorIs(t, s.Undelete(ctx, meta.ID), ErrNotFound)
	_, err = s.Meta(ctx, meta.ID)
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestUndeleteSkipsWhatIsNoSession: a newer entry of the id under a kept
// name that is no session (a directory without session.json, put there
// by hand or by an older build) is not brought back: Undelete takes the
// newest entry that is a session.
func TestUndeleteSkipsWhatIsNoSession(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	victim, _, want := trashWorkload(t, m, Options{})
	s := openMem(t, m, Options{})
	defer s.Close()
	require.NoError(t, s.Delete(ctx, victim))
	names := trashNames(t, m)
	require.Len(t, names, 1)
	e, ok := parseTrashName(names[0])
	require.True(t, ok)
	bare := filepath.Join(memRoot, trashDir, keptTrashName(victim, e.deleted.Add(time.Second), e.purgeAt.Add(time.Second), uuid.New()))
	require.NoError(t, m.MkdirAll(filepath.Join(bare, chunksDir), 0o700))

	assert.Equal(t, []uuid.UUID{victim}, trashIDs(t, s), "Trash lists sessions only")
	require.NoError(t, s.Undelete(ctx, victim))
	checkSessionWhole(t, "undeleted", s, victim, want)
	_, err := m.Stat(bare)
	assert.NoError(t, err, "the entry that is no session stays where it was")
}
