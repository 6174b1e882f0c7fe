package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/catalogue"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// assertGone checks that session id is gone from s by every way of
// looking: Meta, Load, Append, List, ListRecent, its directory.
func assertGone(t *testing.T, m vfs.FS, s *Store, id uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	_, err := s.Meta(ctx, id)
	assert.ErrorIs(t, err, ErrNotFound, "Meta")
	_, err = s.Load(ctx, id)
	assert.ErrorIs(t, err, ErrNotFound, "Load")
	_, err = s.Append(ctx, id, UserText("after the delete"))
	assert.ErrorIs(t, err, ErrNotFound, "Append")
	list, err := s.List(ctx)
	require.NoError(t, err)
	for _, meta := range list {
		assert.NotEqual(t, id, meta.ID, "List")
	}
	recent, err := s.ListRecent(ctx, 1000)
	require.NoError(t, err)
	for _, meta := range recent {
		assert.NotEqual(t, id, meta.ID, "ListRecent")
	}
	_, err = m.Stat(sessionPath(id))
	assert.ErrorIs(t, err, fs.ErrNotExist, "the session directory")
}

// trashNames lists the root's trash directory (nil if absent).
func trashNames(t *testing.T, m vfs.FS) []string {
	t.Helper()
	names, err := m.ReadDir(filepath.Join(memRoot, trashDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	return names
}

func TestDeleteRemovesSessionAndBlobs(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{TrashFor: NoTrash})
	gone, err := s.Create(ctx, Meta{Name: "gone"})
	require.NoError(t, err)
	kept, err := s.Create(ctx, Meta{Name: "kept"})
	require.NoError(t, err)
	appendN(t, s, gone.ID, 3)
	_, err = s.Append(ctx, gone.ID, bigResult("c", 1))
	require.NoError(t, err)
	want := appendN(t, s, kept.ID, 2)
	require.NotEmpty(t, blobFiles(t, m, gone.ID), "precondition: the session has a blob")

	require.NoError(t, s.Delete(ctx, gone.ID))
	assertGone(t, m, s, gone.ID)
	assert.Empty(t, trashNames(t, m), "the trash is emptied")
	got, err := s.Load(ctx, kept.ID)
	require.NoError(t, err)
	assert.Len(t, got, len(want), "the other session keeps its events")
	require.NoError(t, s.Close())

	s = openMem(t, m, Options{})
	defer s.Close()
	assertGone(t, m, s, gone.ID)
	list, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, kept.ID, list[0].ID)
}

func TestDeleteIsIdempotent(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	defer s.Close()
	assert.NoError(t, s.Delete(ctx, uuid.New()), "a session the store never held")
	require.NoError(t, s.Delete(ctx, id))
	assert.NoError(t, s.Delete(ctx, id), "deleted already")
	assertGone(t, m, s, id)
}

// TestDeleteClosesOpenSession: a session this Store has open (and its
// lock held) is closed and deleted; the Store can create a new session
// with the same id afterwards.
func TestDeleteClosesOpenSession(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	defer s.Close()
	appendN(t, s, id, 2)
	require.NotNil(t, s.reg.lookup(id), "precondition: the session is open")
	require.NoError(t, s.Delete(ctx, id))
	assert.Nil(t, s.reg.lookup(id), "the registry forgot it")
	assertGone(t, m, s, id)
	again, err := s.Create(ctx, Meta{ID: id, Name: "again"})
	require.NoError(t, err)
	assert.Equal(t, "again", again.Name)
	evs, err := s.Load(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, evs, "the new session has none of the old one's events")
}

// TestDeleteWaitsForCallsInFlight: a Delete while appends of this Store
// run waits for the one in flight; each append either happened before
// the delete (acknowledged) or fails with ErrNotFound; none is lost into
// a session that then reappears.
func TestDeleteWaitsForCallsInFlight(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	defer s.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for w := range 4 {
		wg.Go(func() {
			for i := range 100 {
				_, err := s.Append(ctx, id, UserText(fmt.Sprint(w, i)))
				errs <- err
			}
		})
	}
	require.NoError(t, s.Delete(ctx, id))
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			assert.ErrorIs(t, err, ErrNotFound)
		}
	}
	assertGone(t, m, s, id)
}

func TestDeleteRefusedWhileAnotherWriterHoldsIt(t *testing.T) {
	ctx := context.Background()
	m, a, id := memSession(t, Options{})
	defer a.Close()
	want := appendN(t, a, id, 2) // a holds the session's lock
	b := openMem(t, m, Options{})
	defer b.Close()
	err := b.Delete(ctx, id)
	require.ErrorIs(t, err, ErrLocked)
	var pe *fs.PathError
	assert.ErrorAs(t, err, &pe, "the error names the lock file")
	got, err := a.Load(ctx, id)
	require.NoError(t, err)
	assert.Len(t, got, len(want), "the session is whole")
	assert.Empty(t, trashNames(t, m))

	require.NoError(t, a.CloseSession(ctx, id))
	require.NoError(t, b.Delete(ctx, id))
	assertGone(t, m, b, id)
	_, err = a.Load(ctx, id)
	assert.ErrorIs(t, err, ErrNotFound, "the other Store sees it gone")
}

func TestDeleteRefusesSessionWithForks(t *testing.T) {
	ctx := context.Background()
	m, s, parent := memSession(t, Options{})
	defer s.Close()
	evs := appendN(t, s, parent, 2)
	var forks []uuid.UUID
	for range 2 {
		f, err := s.Create(ctx, Meta{Name: "fork", ForkedFrom: &ForkPoint{Session: parent, Event: evs[1].ID}})
		require.NoError(t, err)
		forks = append(forks, f.ID)
	}
	err := s.Delete(ctx, parent)
	require.ErrorIs(t, err, ErrHasForks)
	for _, f := range forks {
		assert.Contains(t, err.Error(), f.String(), "the error names each fork")
	}
	got, err := s.Load(ctx, parent)
	require.NoError(t, err)
	assert.Len(t, got, 2, "the parent is whole")

	require.NoError(t, s.Delete(ctx, forks[0]))
	require.ErrorIs(t, s.Delete(ctx, parent), ErrHasForks, "one fork is left")
	require.NoError(t, s.Delete(ctx, forks[1]))
	require.NoError(t, s.Delete(ctx, parent))
	assertGone(t, m, s, parent)
}

func TestDeleteConcurrentSameID(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	stores := []*Store{openMem(t, m, Options{}), openMem(t, m, Options{})}
	for _, s := range stores {
		defer s.Close()
	}
	meta, err := stores[0].Create(ctx, Meta{})
	require.NoError(t, err)
	appendN(t, stores[0], meta.ID, 2)
	require.NoError(t, stores[0].CloseSession(ctx, meta.ID))
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = stores[i%2].Delete(ctx, meta.ID) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			assert.ErrorIs(t, err, ErrLocked, "delete %d: nil, or the other Store held the lock", i)
		}
	}
	assertGone(t, m, stores[0], meta.ID)
	assertGone(t, m, stores[1], meta.ID)
}

// TestDeleteTrashFinishedByOpen: what a crash leaves in the trash (a
// session moved aside, not removed) is removed when a writable store
// opens, and never read; a read-only store leaves it.
func TestDeleteTrashFinishedByOpen(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	appendN(t, s, id, 3)
	require.NoError(t, s.Close())
	trash := filepath.Join(memRoot, trashDir)
	require.NoError(t, m.MkdirAll(trash, 0o755))
	require.NoError(t, m.Rename(sessionPath(id), filepath.Join(trash, id.String()+".x")))

	ro := openMem(t, m, Options{ReadOnly: true})
	assert.Len(t, trashNames(t, m), 1, "a read-only store writes nothing")
	_, err := ro.Meta(ctx, id)
	assert.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, ro.Close())

	s = openMem(t, m, Options{})
	defer s.Close()
	assert.Empty(t, trashNames(t, m), "Open empties the trash")
	assertGone(t, m, s, id)
}

func TestDeleteRefusedByReadOnlyStores(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	require.NoError(t, s.Close())
	ro := openMem(t, m, Options{ReadOnly: true})
	defer ro.Close()
	assert.ErrorIs(t, ro.Delete(ctx, id), ErrReadOnly)
	_, err := ro.Prune(ctx, PrunePolicy{KeepRecent: -1, KeepNewest: 1})
	assert.ErrorIs(t, err, ErrReadOnly)
	res, err := ro.Prune(ctx, PrunePolicy{KeepRecent: -1, Before: time.Now(), DryRun: true})
	require.NoError(t, err, "a dry run reads only")
	require.Len(t, res.Removed, 1)
	assert.Equal(t, id, res.Removed[0].Meta.ID)
	_, err = ro.GCStore(ctx)
	assert.ErrorIs(t, err, ErrReadOnly)

}

// TestDeleteCatalogue: after a Delete, ListRecent answers from the
// catalogue (its directory stamp is current) without the session, and
// the catalogue's next compaction drops the session's entry and its
// pending record.
func TestDeleteCatalogue(t *testing.T) {
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
	_, err := s.List(ctx) // the catalogue's snapshot holds all three
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, ids[2]))
	metas, bad, ok := s.cat.recent(10)
	require.True(t, ok, "ListRecent keeps the catalogue's fast path")
	assert.Empty(t, bad)
	require.Len(t, metas, 2)
	assert.Equal(t, ids[1], metas[0].ID)
	assert.Equal(t, ids[0], metas[1].ID)

	// The compaction a long log brings (catalogue.MaxLog): a rewrite without a
	// scan of the sessions directory.
	require.NoError(t, s.cat.Compact())
	st, err := catalogue.Load(m, memRoot)
	require.NoError(t, err)
	assert.False(t, st.InSnapshot(ids[2]), "the compaction dropped the deleted session's entry")
	assert.False(t, st.Pending(ids[2]), "and its pending record")
	assert.True(t, st.InSnapshot(ids[1]), "the others stay")
}

// TestDeleteFaults: an I/O error before the move leaves the session
// whole and is returned; one in the removals after it is not (the
// session is gone), and what it left in the trash goes at the next Open.
func TestDeleteFaults(t *testing.T) {
	ctx := context.Background()
	injected := errors.New("injected")
	tests := []struct {
		name   string
		op     vfs.Op
		path   string // the base name the fault hits
		whole  bool   // the session is still there, and Delete fails
		failed bool   // Delete fails, and the session is gone here (a crash may bring it back)
	}{
		{"rename", vfs.OpRename, "", true, false},
		{"sessions directory sync", vfs.OpSyncDir, sessionsDir, false, true},
		{"catalogue record", vfs.OpWrite, catalogueLogName, false, false},
		{"removal", vfs.OpRemove, metaFile, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, s, id := memSession(t, Options{TrashFor: NoTrash})
			want := appendN(t, s, id, 2)
			require.NoError(t, s.CloseSession(ctx, id))
			m.SetFault(func(op vfs.Op, path string) error {
				if op == tt.op && (tt.path == "" || filepath.Base(path) == tt.path) {
					return injected
				}
				return nil
			})
			err := s.Delete(ctx, id)
			m.SetFault(nil)
			if tt.whole {
				require.ErrorIs(t, err, injected)
				got, err := s.Load(ctx, id)
				require.NoError(t, err)
				assert.Len(t, got, len(want))
				require.NoError(t, s.Close())
				return
			}
			if tt.failed {
				require.ErrorIs(t, err, injected)
				assert.Contains(t, err.Error(), "a crash may bring it back")
			} else {
				require.NoError(t, err, "the session is durably gone; the error is logged")
			}
			assertGone(t, m, s, id)
			if tt.op == vfs.OpRemove {
				assert.Len(t, trashNames(t, m), 1, "the files stay in the trash")
			}
			require.NoError(t, s.Close())
			s = openMem(t, m, Options{})
			defer s.Close()
			assert.Empty(t, trashNames(t, m), "Open removes them")
		})
	}
}

// TestDeleteEndsSubscriptions: a subscription to a deleted session ends,
// its Err matching ErrNotFound; another session's goes on.
func TestDeleteEndsSubscriptions(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	defer s.Close()
	other, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	sub, err := s.Subscribe(ctx, id)
	require.NoError(t, err)
	defer sub.Close()
	subOther, err := s.Subscribe(ctx, other.ID)
	require.NoError(t, err)
	defer subOther.Close()
	require.NoError(t, s.Delete(ctx, id))
	select {
	case _, ok := <-sub.C:
		assert.False(t, ok, "C is closed")
	case <-time.After(10 * time.Second):
		t.Fatal("the subscription did not end")
	}
	assert.ErrorIs(t, sub.Err(), ErrNotFound)
	assert.NoError(t, subOther.Err())
	_, err = s.Append(ctx, other.ID, UserText("still here"))
	require.NoError(t, err)
	select {
	case u := <-subOther.C:
		require.NotNil(t, u.Event)
	case <-time.After(10 * time.Second):
		t.Fatal("the other subscription got nothing")
	}
}

// TestDeleteClosesKeptChunks: the sealed chunks a Store keeps open for
// reads (zchunk.Cache.Open) are closed by a Delete, so that the space of
// the deleted files is freed with them, and by Close.
func TestDeleteClosesKeptChunks(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("chunk files are kept open only on Linux")
	}
	ctx := context.Background()
	dir := searchSealedStore(t, 4, 100)
	time.Sleep(2100 * time.Millisecond) // past the window in which a file is not kept
	s, err := Open(dir, nil)
	require.NoError(t, err)
	var hit uuid.UUID
	for h, err := range s.Search(ctx, SearchQuery{Text: "quokka"}) {
		require.NoError(t, err)
		hit = h.Session
	}
	require.NotEqual(t, uuid.Nil, hit)
	require.Positive(t, s.opts.frames.FilesKept(), "the hits' chunks are kept open")
	require.NoError(t, s.Delete(ctx, hit))
	assert.Zero(t, s.opts.frames.FilesKept(), "closed by the Delete")

	for range s.Search(ctx, SearchQuery{Text: "quokka"}) {
	}
	require.Positive(t, s.opts.frames.FilesKept())
	require.NoError(t, s.Close())
	assert.Zero(t, s.opts.frames.FilesKept(), "closed by Close")
}
