package sessionstore

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// pruneFixture makes six sessions on a fresh MemFS, named s0 (oldest) to
// s5, each updated one hour after the one before (the store's clock is
// set for each Create), with labels and working directories:
//
//	s0, s2, s4  labels team=a   dir /a
//	s1, s3, s5  labels team=b   dir /b
//
// Every session has two events, and s1 a blob. It returns the names'
// ids and a setter of the store's clock.
func pruneFixture(t *testing.T) (*vfs.MemFS, *Store, map[string]uuid.UUID, func(time.Time)) {
	t.Helper()
	ctx := context.Background()
	m := vfs.NewMemFS()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := base
	o := Options{}
	o.now = func() time.Time { return clock }
	s := openMem(t, m, o)
	ids := map[string]uuid.UUID{}
	for i := range 6 {
		clock = base.Add(time.Duration(i) * time.Hour)
		team, dir := "a", "/a"
		if i%2 == 1 {
			team, dir = "b", "/b"
		}
		meta, err := s.Create(ctx, Meta{Name: fmt.Sprint("s", i), WorkingDir: dir, Labels: map[string]string{"team": team}})
		require.NoError(t, err)
		ids[meta.Name] = meta.ID
		appendN(t, s, meta.ID, 2)
		if i == 1 {
			_, err := s.Append(ctx, meta.ID, bigResult("c", 1))
			require.NoError(t, err)
		}
		require.NoError(t, s.CloseSession(ctx, meta.ID)) // a close writes UpdatedAt: as of this session's hour
	}
	return m, s, ids, func(t time.Time) { clock = t }
}

func names(items []PruneItem) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.Meta.Name
	}
	slices.Sort(out)
	return out
}

// TestPrune: for each policy, the dry run names the sessions the policy
// selects with the bytes of their files and removes nothing; the real
// run on the same sessions removes exactly those, frees the same bytes,
// and leaves the others whole.
func TestPrune(t *testing.T) {
	ctx := context.Background()
	hour := func(n int) time.Time { return time.Date(2026, 1, 1, n, 0, 0, 0, time.UTC) }
	tests := []struct {
		name   string
		policy PrunePolicy
		want   []string
	}{
		{"before", PrunePolicy{KeepRecent: -1, Before: hour(2)}, []string{"s0", "s1"}},
		{"before, exact time kept", PrunePolicy{KeepRecent: -1, Before: hour(0)}, []string{}},
		{"keep newest", PrunePolicy{KeepRecent: -1, KeepNewest: 4}, []string{"s0", "s1"}},
		{"keep newest of a label", PrunePolicy{KeepRecent: -1, KeepNewest: 1, Labels: map[string]string{"team": "b"}}, []string{"s1", "s3"}},
		{"before, of a working dir", PrunePolicy{KeepRecent: -1, Before: hour(5), WorkingDir: "/a"}, []string{"s0", "s2", "s4"}},
		{"before and keep newest", PrunePolicy{KeepRecent: -1, Before: hour(4), KeepNewest: 5}, []string{"s0"}},
		{"labels that match none", PrunePolicy{KeepRecent: -1, Before: hour(9), Labels: map[string]string{"team": "c"}}, []string{}},
		{"keep more than there are", PrunePolicy{KeepRecent: -1, KeepNewest: 10}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, s, ids, _ := pruneFixture(t)
			defer s.Close()
			dry := tt.policy
			dry.DryRun = true
			planned, err := s.Prune(ctx, dry)
			require.NoError(t, err)
			assert.Equal(t, tt.want, names(planned.Removed))
			assert.Empty(t, planned.Skipped)
			var sum int64
			for _, it := range planned.Removed {
				size, err := treeSize(m, sessionPath(it.Meta.ID))
				require.NoError(t, err)
				assert.Equal(t, size, it.Bytes, "%s: the bytes of its files", it.Meta.Name)
				assert.Positive(t, it.Bytes)
				sum += size
			}
			assert.Equal(t, sum, planned.Bytes)
			list, err := s.List(ctx)
			require.NoError(t, err)
			require.Len(t, list, 6, "a dry run removes nothing")

			got, err := s.Prune(ctx, tt.policy)
			require.NoError(t, err)
			assert.Equal(t, planned, got, "the real run removes exactly what the dry run reported")
			for name, id := range ids {
				_, err := s.Meta(ctx, id)
				if slices.Contains(tt.want, name) {
					assert.ErrorIs(t, err, ErrNotFound, name)
				} else {
					require.NoError(t, err, name)
					evs, err := s.Load(ctx, id)
					require.NoError(t, err, name)
					assert.NotEmpty(t, evs, name)
				}
			}
		})
	}
}

func TestPruneRefusesPoliciesThatSelectEverything(t *testing.T) {
	ctx := context.Background()
	_, s, _, _ := pruneFixture(t)
	defer s.Close()
	for _, p := range []PrunePolicy{{}, {DryRun: true}, {Labels: map[string]string{"team": "a"}}, {KeepNewest: -1}} {
		_, err := s.Prune(ctx, p)
		assert.ErrorIs(t, err, ErrInvalidPolicy, "%+v", p)
	}
	list, err := s.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 6)
}

// TestPruneForks: a selected session that a kept session forks is
// skipped with ErrHasForks; one whose forks are all selected too is
// removed after them; the dry run says the same as the real run.
func TestPruneForks(t *testing.T) {
	ctx := context.Background()
	_, s, ids, setClock := pruneFixture(t)
	defer s.Close()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fork := func(parent string, at time.Time) uuid.UUID {
		setClock(at)
		evs, err := s.Load(ctx, ids[parent])
		require.NoError(t, err)
		f, err := s.Create(ctx, Meta{Name: "fork of " + parent, ForkedFrom: &ForkPoint{Session: ids[parent], Event: evs[0].ID}})
		require.NoError(t, err)
		return f.ID
	}
	oldFork := fork("s0", base.Add(30*time.Minute)) // selected with its parent
	newFork := fork("s1", base.Add(10*time.Hour))   // kept: s1 must stay
	p := PrunePolicy{KeepRecent: -1, Before: base.Add(90 * time.Minute), DryRun: true}
	planned, err := s.Prune(ctx, p)
	require.NoError(t, err)
	require.Len(t, planned.Removed, 2)
	assert.Equal(t, oldFork, planned.Removed[0].Meta.ID, "the fork goes first")
	assert.Equal(t, ids["s0"], planned.Removed[1].Meta.ID, "then the session it forks")
	require.Len(t, planned.Skipped, 1)
	assert.Equal(t, ids["s1"], planned.Skipped[0].Meta.ID)
	assert.ErrorIs(t, planned.Skipped[0].Err, ErrHasForks)
	assert.Contains(t, planned.Skipped[0].Err.Error(), newFork.String())

	p.DryRun = false
	got, err := s.Prune(ctx, p)
	require.NoError(t, err)
	assert.Equal(t, planned, got)
	for _, id := range []uuid.UUID{oldFork, ids["s0"]} {
		_, err := s.Meta(ctx, id)
		assert.ErrorIs(t, err, ErrNotFound)
	}
	for _, id := range []uuid.UUID{newFork, ids["s1"]} {
		_, err := s.Meta(ctx, id)
		assert.NoError(t, err)
	}
}

// TestPruneSkipsLockedSessions: a session another writer holds is
// skipped with ErrLocked, and the others are removed.
func TestPruneSkipsLockedSessions(t *testing.T) {
	ctx := context.Background()
	m, s, ids, _ := pruneFixture(t)
	defer s.Close()
	other := openMem(t, m, Options{})
	defer other.Close()
	_, err := other.Head(ctx, ids["s0"]) // other holds s0's lock, and wrote nothing
	require.NoError(t, err)
	got, err := s.Prune(ctx, PrunePolicy{KeepRecent: -1, KeepNewest: 4})
	require.NoError(t, err)
	assert.Equal(t, []string{"s1"}, names(got.Removed))
	require.Len(t, got.Skipped, 1)
	assert.Equal(t, ids["s0"], got.Skipped[0].Meta.ID)
	assert.ErrorIs(t, got.Skipped[0].Err, ErrLocked)
	assert.Equal(t, got.Removed[0].Bytes, got.Bytes)
}

// TestGCStore: GCStore collects the orphan blobs of every session, keeps
// every blob an event refers to, skips a session another writer holds,
// and empties the trash.
func TestGCStore(t *testing.T) {
	ctx := context.Background()
	m, s, ids, _ := pruneFixture(t)
	defer s.Close()
	// An orphan blob in s1 and in s2: a blob file no event names.
	var orphans []string
	for _, name := range []string{"s1", "s2"} {
		d := [32]byte{byte(len(orphans) + 1)}
		path := blobPath(sessionPath(ids[name]), d)
		require.NoError(t, m.MkdirAll(filepath.Dir(path), 0o755))
		writeMemFile(t, m, path, []byte("orphan"))
		orphans = append(orphans, path)
	}
	kept := blobFiles(t, m, ids["s1"])
	require.Len(t, kept, 2, "precondition: s1's blob and the orphan")

	locker := openMem(t, m, Options{})
	defer locker.Close()
	appendN(t, locker, ids["s5"], 1)
	// What a crash left in the trash (after locker's Open, which would
	// empty it).
	trash := filepath.Join(memRoot, trashDir, "leftover")
	require.NoError(t, m.MkdirAll(trash, 0o755))
	writeMemFile(t, m, filepath.Join(trash, "f"), []byte("12345"))

	rep, err := s.GCStore(ctx)
	require.NoError(t, err)
	assert.Equal(t, 5, rep.Sessions)
	assert.Equal(t, 2, rep.Removed)
	assert.Equal(t, int64(2*len("orphan")), rep.Bytes)
	assert.Equal(t, 1, rep.Kept, "s1's blob")
	assert.Equal(t, int64(5), rep.TrashBytes)
	require.Len(t, rep.Skipped, 1)
	assert.Equal(t, ids["s5"], rep.Skipped[0].ID)
	assert.ErrorIs(t, rep.Skipped[0].Err, ErrLocked)
	for _, p := range orphans {
		_, err := m.Stat(p)
		assert.ErrorIs(t, err, fs.ErrNotExist, p)
	}
	assert.Len(t, blobFiles(t, m, ids["s1"]), 1)
	assert.Empty(t, trashNames(t, m))
	evs, err := s.Load(ctx, ids["s1"])
	require.NoError(t, err)
	assert.Len(t, evs, 3, "s1 loads with its blob")
}

// TestGCStoreBesideAppends: GCStore runs again and again while appends
// with blob records go on in two sessions; every acknowledged event's
// blob is still there afterwards, and a Delete in between takes only its
// own session.
func TestGCStoreBesideAppends(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	defer s.Close()
	var ids []uuid.UUID
	for range 3 {
		meta, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		ids = append(ids, meta.ID)
	}
	acked := make([][]Event, 2)
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Go(func() {
			for i := range 15 {
				ev, err := s.Append(ctx, ids[w], bigResult(fmt.Sprint("c", w), i))
				if !assert.NoError(t, err) {
					return
				}
				acked[w] = append(acked[w], ev)
			}
		})
	}
	var removed int
	for i := 0; i < 10; i++ {
		rep, err := s.GCStore(ctx)
		require.NoError(t, err)
		assert.Empty(t, rep.Skipped)
		removed += rep.Removed
		if i == 3 {
			require.NoError(t, s.Delete(ctx, ids[2]))
		}
	}
	wg.Wait()
	assert.Zero(t, removed, "no blob was unreferenced")
	for w := range 2 {
		require.Len(t, acked[w], 15)
		for _, ev := range acked[w] {
			require.NotEmpty(t, ev.Digest)
			got, err := s.Event(ctx, ids[w], ev.ID)
			require.NoError(t, err)
			_, err = s.Resolve(ctx, ids[w], got)
			require.NoError(t, err, "the blob of an acknowledged event")
		}
	}
	_, err := s.Meta(ctx, ids[2])
	assert.ErrorIs(t, err, ErrNotFound)
}
