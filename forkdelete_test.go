package sessionstore

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// forkDeleteOutcome checks what a Fork of parent and a Delete of parent
// run at once left: never both nil, and a fork that Fork returned is one
// whose every call works, while a fork that lost is gone.
func forkDeleteOutcome(t *testing.T, stores []*Store, parent uuid.UUID, fork Meta, forkErr, delErr error) {
	t.Helper()
	ctx := context.Background()
	require.False(t, forkErr == nil && delErr == nil, "Fork and Delete of its parent both returned nil")
	switch {
	case forkErr == nil:
		require.ErrorIs(t, delErr, ErrHasForks)
		for _, s := range stores {
			ev, err := s.Append(ctx, fork.ID, AssistantText("on the fork"))
			require.NoError(t, err)
			path, err := s.Load(ctx, fork.ID)
			require.NoError(t, err, "an acknowledged append to the fork is readable")
			assert.Equal(t, ev.ID, path[len(path)-1].ID)
			_, err = s.Event(ctx, fork.ID, path[0].ID)
			assert.NoError(t, err)
			_, err = s.Tree(ctx, fork.ID)
			assert.NoError(t, err)
			require.NoError(t, s.Close(), "the next Store writes the fork")
		}
	default:
		require.ErrorIs(t, forkErr, ErrNotFound, "a Fork that loses to the Delete finds no parent")
		require.NoError(t, delErr)
		for _, s := range stores {
			metas, err := s.List(ctx)
			require.NoError(t, err)
			for _, m := range metas {
				assert.Nil(t, m.ForkedFrom, "no fork of the deleted parent is left: %s", m.ID)
			}
		}
	}
}

// TestForkRacesDeleteOfParent runs Fork and Delete of the fork's parent
// side by side, in one Store and in two Stores of one root (which lock
// as two processes do), and checks that one of them wins: the Delete
// refused with ErrHasForks and the fork whole, or the parent deleted
// and Fork answering ErrNotFound with no fork left behind.
func TestForkRacesDeleteOfParent(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	n := testSize(t, "SESSIONSTORE_FORK_RACES", 12, 100)
	for _, two := range []bool{false, true} {
		name := "one Store"
		if two {
			name = "two Stores"
		}
		t.Run(name, func(t *testing.T) {
			wins := map[string]int{}
			for i := range n {
				dir := t.TempDir()
				a, err := Open(dir, nil)
				require.NoError(t, err)
				forker, deleter := a, a
				stores := []*Store{a}
				if two {
					b, err := Open(dir, nil)
					require.NoError(t, err)
					deleter = b
					stores = append(stores, b)
				}
				ctx := context.Background()
				pm, err := a.Create(ctx, Meta{Name: "parent"})
				require.NoError(t, err)
				evs := forkTexts(t, a, pm.ID, "one", "two")
				var fork Meta
				var forkErr, delErr error
				var wg sync.WaitGroup
				start := make(chan struct{})
				wg.Add(2)
				go func() {
					defer wg.Done()
					<-start
					fork, forkErr = forker.Fork(ctx, pm.ID, evs[1].ID)
				}()
				go func() {
					defer wg.Done()
					<-start
					// The Store's own handle of the parent must not keep
					// the other Store's Delete out.
					if two {
						a.reg.closeOne(ctx, pm.ID)
					}
					delErr = deleter.Delete(ctx, pm.ID)
				}()
				close(start)
				wg.Wait()
				forkDeleteOutcome(t, stores, pm.ID, fork, forkErr, delErr)
				if forkErr == nil {
					wins["fork"]++
				} else {
					wins["delete"]++
				}
				for _, s := range stores {
					assert.NoError(t, s.Close())
				}
				_ = i
			}
			t.Logf("%d races: %v", n, wins)
		})
	}
}

// TestForkDeferredKeepsParent: a fork made under Options.DeferCreate has
// no files until its first write, and its parent's Delete still refuses
// with ErrHasForks meanwhile; the fork's first Append then works.
func TestForkDeferredKeepsParent(t *testing.T) {
	ctx := context.Background()
	s, _ := apiNewStore(t, &Options{DeferCreate: true})
	pm, err := s.Create(ctx, Meta{Name: "parent"})
	require.NoError(t, err)
	evs := forkTexts(t, s, pm.ID, "one", "two")
	fork, err := s.Fork(ctx, pm.ID, evs[1].ID)
	require.NoError(t, err)

	err = s.Delete(ctx, pm.ID)
	require.ErrorIs(t, err, ErrHasForks)
	assert.Contains(t, err.Error(), fork.ID.String())

	ev, err := s.Append(ctx, fork.ID, AssistantText("first of the fork"))
	require.NoError(t, err)
	path, err := s.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{evs[0].ID, evs[1].ID, ev.ID}, forkIDs(path))
	require.ErrorIs(t, s.Delete(ctx, pm.ID), ErrHasForks, "the fork is made now")
}

// TestForkDeferredInAnotherStore: a deferred fork held by another Store
// (another process) is not seen by a Delete of its parent, so the Delete
// goes ahead; the fork's first write then finds the parent gone and
// fails with ErrNotFound, writing nothing, and so does every later write:
// no append is acknowledged whose history cannot be read.
func TestForkDeferredInAnotherStore(t *testing.T) {
	ctx := context.Background()
	a, dir := apiNewStore(t, nil)
	pm, err := a.Create(ctx, Meta{Name: "parent"})
	require.NoError(t, err)
	evs := forkTexts(t, a, pm.ID, "one", "two")
	require.NoError(t, a.Close())

	b := apiOpen(t, dir, &Options{DeferCreate: true})
	fork, err := b.Fork(ctx, pm.ID, evs[1].ID)
	require.NoError(t, err)

	c := apiOpen(t, dir, nil)
	require.NoError(t, c.Delete(ctx, pm.ID), "the deferred fork of another Store is not seen")

	for range 2 {
		_, err = b.Append(ctx, fork.ID, AssistantText("never acknowledged"))
		require.ErrorIs(t, err, ErrNotFound)
	}
	_, err = b.Load(ctx, fork.ID)
	assert.ErrorIs(t, err, ErrNotFound)
	for _, s := range []*Store{b, c} {
		metas, err := s.List(ctx)
		require.NoError(t, err)
		assert.Empty(t, metas, "neither the parent nor a fork is left")
	}

	// A deferred fork whose parent is gone before the Fork returns is
	// refused at once.
	_, err = b.Fork(ctx, pm.ID, evs[1].ID)
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestForkMarkerOfDeletedFork: a fork that is deleted leaves its marker
// in the parent's directory; a stale marker does not keep the parent.
func TestForkMarkerOfDeletedFork(t *testing.T) {
	ctx := context.Background()
	s, _ := apiNewStore(t, nil)
	pm, err := s.Create(ctx, Meta{Name: "parent"})
	require.NoError(t, err)
	evs := forkTexts(t, s, pm.ID, "one")
	fork, err := s.Fork(ctx, pm.ID, evs[0].ID)
	require.NoError(t, err)
	forks, err := s.liveForks(pm.ID)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{fork.ID}, forks, "the marker names the fork")
	require.ErrorIs(t, s.Delete(ctx, pm.ID), ErrHasForks)
	require.NoError(t, s.Delete(ctx, fork.ID))
	forks, err = s.liveForks(pm.ID)
	require.NoError(t, err)
	assert.Empty(t, forks)
	require.NoError(t, s.Delete(ctx, pm.ID))
	_, err = s.Meta(ctx, pm.ID)
	assert.True(t, errors.Is(err, ErrNotFound))
}

// TestForkAppendNeedsItsPrefix: a fork, with no events of its own yet,
// whose parent's files are gone (removed by hand, or by a build that did
// not check for forks) refuses appends instead of acknowledging events
// whose history cannot be read.
func TestForkAppendNeedsItsPrefix(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, nil)
	pm, err := s.Create(ctx, Meta{Name: "parent"})
	require.NoError(t, err)
	evs := forkTexts(t, s, pm.ID, "one")
	fork, err := s.Fork(ctx, pm.ID, evs[0].ID)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, os.RemoveAll(filepath.Join(dir, sessionsDir, pm.ID.String())))

	s2 := apiOpen(t, dir, nil)
	_, err = s2.Append(ctx, fork.ID, UserText("never acknowledged"))
	require.ErrorIs(t, err, ErrNotFound)
	_, err = s2.Load(ctx, fork.ID)
	assert.ErrorIs(t, err, ErrNotFound)
	nodes, err := s2.Tree(ctx, fork.ID)
	if err == nil {
		for _, n := range nodes {
			assert.NotEqual(t, "never acknowledged", n.Preview)
		}
	}
}

// TestPruneDryRunSeesDeferredFork: a fork this Store holds deferred
// (Options.DeferCreate) keeps its parent from Prune, and a dry run
// reports that as the run does: the parent skipped with ErrHasForks, not
// removed.
func TestPruneDryRunSeesDeferredFork(t *testing.T) {
	ctx := context.Background()
	s, _ := apiNewStore(t, &Options{DeferCreate: true})
	pm, err := s.Create(ctx, Meta{Name: "parent"})
	require.NoError(t, err)
	evs := forkTexts(t, s, pm.ID, "one", "two")
	other, err := s.Create(ctx, Meta{Name: "other"})
	require.NoError(t, err)
	forkTexts(t, s, other.ID, "three")
	fork, err := s.Fork(ctx, pm.ID, evs[1].ID)
	require.NoError(t, err)

	policy := PrunePolicy{KeepRecent: -1, Before: time.Now().Add(time.Hour)}
	for _, dry := range []bool{true, false} {
		policy.DryRun = dry
		res, err := s.Prune(ctx, policy)
		require.NoError(t, err)
		assert.Equal(t, []string{"other"}, names(res.Removed), "dry run %v", dry)
		require.Len(t, res.Skipped, 1, "dry run %v", dry)
		assert.Equal(t, pm.ID, res.Skipped[0].Meta.ID)
		assert.ErrorIs(t, res.Skipped[0].Err, ErrHasForks, "dry run %v", dry)
		assert.Contains(t, res.Skipped[0].Err.Error(), fork.ID.String())
	}
	_, err = s.Append(ctx, fork.ID, AssistantText("first of the fork"))
	require.NoError(t, err)
}

// TestForkOfDeletedRemoteParent: with Options.Remote, a Fork of a session
// deleted after this root read it for a fork (its copy under forkcache is
// there) finds no parent (ErrNotFound), as one of a session it never read
// does; the delete marker's empty metadata is no session.json to copy.
func TestForkOfDeletedRemoteParent(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	s := memRemoteStore(t, obj)
	pm, err := s.Create(ctx, Meta{Name: "parent"})
	require.NoError(t, err)
	evs := forkTexts(t, s, pm.ID, "one", "two")
	require.NoError(t, s.CloseSession(ctx, pm.ID))
	fork, err := s.Fork(ctx, pm.ID, evs[1].ID) // reads the parent into forkcache
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, fork.ID))
	require.NoError(t, s.Delete(ctx, pm.ID))

	_, err = s.Fork(ctx, pm.ID, evs[1].ID)
	assert.ErrorIs(t, err, ErrNotFound)
	var ce *CorruptionError
	assert.False(t, errors.As(err, &ce), "no damage: %v", err)
	metas, err := s.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, metas, "no fork is left")
}

// vanishFS moves a session directory away (as a Delete does) the first
// time a sealed chunk of it is opened, before the open.
type vanishFS struct {
	vfs.FS
	dir, to string
	once    sync.Once
}

func (v *vanishFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if strings.HasPrefix(name, v.dir+"/chunks/") && strings.HasSuffix(name, sealedExt) {
		v.once.Do(func() { _ = v.FS.Rename(v.dir, v.to) })
	}
	return v.FS.OpenFile(name, flag, perm)
}

// TestForkParentDeletedWhileRead: a Fork that reads its parent's files
// (the parent not open in its Store) while a Delete moves the parent's
// directory away answers ErrNotFound, as for a parent deleted before,
// not the missing file's error.
func TestForkParentDeletedWhileRead(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 1024})
	evs := appendN(t, s, id, 40)
	require.NoError(t, s.Close())
	dir := sessionPath(id)
	v := &vanishFS{FS: m, dir: dir, to: filepath.Join(memRoot, "gone")}
	s = openMem(t, v, Options{})
	defer s.Close()
	_, err := s.Fork(ctx, id, evs[2].ID)
	assert.ErrorIs(t, err, ErrNotFound)
	_, serr := m.Stat(v.to)
	require.NoError(t, serr, "the directory was moved during the Fork's read")
}
