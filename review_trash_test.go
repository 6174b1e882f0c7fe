package sessionstore

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestReviewTrashUndeleteExistsLeavesForkMarker: an Undelete of a fork
// refused with ErrExists (the id was created again since, as a plain
// session) must leave nothing behind; it writes the parent's fork marker
// before it checks, and the marker, whose id has a session.json, makes
// every later Delete and Purge of the parent fail with ErrHasForks
// though no session forks it.
func TestReviewTrashUndeleteExistsLeavesForkMarker(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	defer s.Close()
	parent, _, fork := parentAndFork(t, s)
	require.NoError(t, s.Delete(ctx, fork.ID))
	// The parent's delete removes its markers directory; it comes back.
	require.NoError(t, s.Delete(ctx, parent.ID))
	require.NoError(t, s.Undelete(ctx, parent.ID))

	again, err := s.Create(ctx, Meta{ID: fork.ID, Name: "not a fork"})
	require.NoError(t, err)
	require.Nil(t, again.ForkedFrom)
	require.ErrorIs(t, s.Undelete(ctx, fork.ID), ErrExists)

	// No session forks the parent: it must be deletable.
	assert.NoError(t, s.Delete(ctx, parent.ID), "a refused Undelete left a fork marker behind")
}

// TestReviewTrashForkIDCreatedAgain: the same stale marker without an
// Undelete: a deleted fork's marker stays in its parent's markers
// directory (Delete removes only the deleted session's own), and once
// the id is created again (the flow Undelete's ErrExists documents),
// liveForks takes the new, unrelated session for a fork: the parent can
// no longer be deleted, pruned or purged.
func TestReviewTrashForkIDCreatedAgain(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	defer s.Close()
	parent, _, fork := parentAndFork(t, s)
	require.NoError(t, s.Delete(ctx, fork.ID))
	again, err := s.Create(ctx, Meta{ID: fork.ID, Name: "not a fork"})
	require.NoError(t, err)
	require.Nil(t, again.ForkedFrom)
	assert.NoError(t, s.Purge(ctx, parent.ID), "no session forks the parent")
}

// TestReviewTrashJournalRecordsSurviveTrash: a session whose dead
// writer's acknowledged events are in the shared journal only (its
// chunks lost them to a power cut) is deleted without being taken over;
// while it sits in the trash, the first commit of a writer recovers and
// removes the dead journal, skipping the session (not under sessions/).
// Undelete then brings back a session without those events.
func TestReviewTrashJournalRecordsSurviveTrash(t *testing.T) {
	ctx := context.Background()
	crashed, ids, acked := journalCrash(t, 2, 10, vfs.KeepSynced)
	victim, other := ids[0], ids[1]
	owner, err := journal.ReadMarker(crashed, filepath.Join(memRoot, sessionsDir, victim.String()))
	require.NoError(t, err)
	require.NotEmpty(t, owner, "the victim's records are in the dead journal")

	w := openMem(t, crashed, Options{})
	defer w.Close()
	require.NoError(t, w.Delete(ctx, victim))
	// A commit through this Store's own journal recovers the dead one.
	_, err = w.Append(ctx, other, UserText("next"))
	require.NoError(t, err)
	require.NoError(t, w.Undelete(ctx, victim))
	got, err := w.Load(ctx, victim)
	require.NoError(t, err)
	assert.Len(t, got, len(acked[victim]), "acknowledged events lost across the trash")
}

// TestReviewTrashUndeleteOverUnfinishedCreate: a directory without
// session.json (what a crash in Create leaves: no session, List and Meta
// ignore it, Create reuses it) makes Undelete answer ErrExists, "created
// again since", though no session with the id exists; Undelete must bring
// the deleted session back (or at least not report a session that is not
// there).
func TestReviewTrashUndeleteOverUnfinishedCreate(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	victim, _, want := trashWorkload(t, m, Options{})
	s := openMem(t, m, Options{})
	defer s.Close()
	require.NoError(t, s.Delete(ctx, victim))
	require.NoError(t, m.MkdirAll(sessionPath(victim), 0o700)) // a Create cut by a crash
	_, err := s.Meta(ctx, victim)
	require.ErrorIs(t, err, ErrNotFound, "no session")

	err = s.Undelete(ctx, victim)
	require.NoError(t, err, "no session with the id exists")
	checkSessionWhole(t, "undeleted", s, victim, want)
}

// TestReviewTrashUndeleteBringsBackNothing: deleting such a leftover
// directory (Delete accepts it) puts an entry without session.json into
// the trash, newer than the real deletion: Trash does not list it, but
// Undelete picks it, returns nil, and the session is still not there;
// the real deletion stays in the trash, out of reach of every Undelete.
func TestReviewTrashUndeleteBringsBackNothing(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	victim, _, want := trashWorkload(t, m, Options{})
	s := openMem(t, m, Options{})
	defer s.Close()
	require.NoError(t, s.Delete(ctx, victim))
	require.NoError(t, m.MkdirAll(sessionPath(victim), 0o700)) // a Create cut by a crash
	require.NoError(t, s.Delete(ctx, victim))
	assert.Equal(t, []uuid.UUID{victim}, trashIDs(t, s), "Trash lists the real deletion once")

	if err := s.Undelete(ctx, victim); err == nil {
		_, merr := s.Meta(ctx, victim)
		require.NoError(t, merr, "Undelete returned nil: the session must be back")
		checkSessionWhole(t, "undeleted", s, victim, want)
	}
}

// TestReviewTrashUndeleteFileEntry: a regular file in the trash under a
// kept name (not a session directory) is renamed into the sessions
// directory by Undelete, which returns nil: the id then names a file
// there, which no call can delete or create again.
func TestReviewTrashUndeleteFileEntry(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{})
	defer s.Close()
	meta, err := s.Create(ctx, Meta{Name: "x"})
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, meta.ID))
	names := trashNames(t, m)
	require.Len(t, names, 1)
	e, ok := parseTrashName(names[0])
	require.True(t, ok)
	// A newer entry of the id that is a file.
	odd := keptTrashName(e.id, e.deleted.Add(1), e.purgeAt.Add(1), uuid.New())
	f, err := m.OpenFile(filepath.Join(memRoot, trashDir, odd), os.O_WRONLY|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.Write([]byte("not a session"))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	// Undelete skips the file and brings back the session under the
	// older name.
	require.NoError(t, s.Undelete(ctx, meta.ID))
	got, err := s.Meta(ctx, meta.ID)
	require.NoError(t, err, "Undelete returned nil: the session must be back")
	assert.Equal(t, "x", got.Name)
	info, err := m.Stat(sessionPath(meta.ID))
	require.NoError(t, err)
	assert.True(t, info.IsDir(), "Undelete moved a file into the sessions directory")
	assert.ErrorIs(t, s.Undelete(ctx, meta.ID), ErrNotFound, "the file is no session to bring back")
}

// trashHookFS runs hook (once) before the first ReadDir of a path ending in
// suffix.
type trashHookFS struct {
	vfs.FS
	suffix string
	once   sync.Once
	hook   func()
}

func (f *trashHookFS) ReadDir(name string) ([]string, error) {
	if filepath.Base(name) == f.suffix && f.hook != nil {
		f.once.Do(f.hook)
	}
	return f.FS.ReadDir(name)
}

// TestReviewTrashPurgeRacesUndelete: a Purge of a session in the trash
// racing an Undelete in another Store (another process) can return nil
// while the session is back in the store: Purge checks the sessions
// directory first (nothing there), then the trash (nothing there any
// more), so neither order of the two calls explains the outcome.
func TestReviewTrashPurgeRacesUndelete(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	victim, _, _ := trashWorkload(t, m, Options{})
	b := openMem(t, m, Options{})
	defer b.Close()
	require.NoError(t, b.Delete(ctx, victim))

	var uerr error
	hf := &trashHookFS{FS: m, suffix: trashDir}
	a := openMem(t, hf, Options{})
	defer a.Close()
	hf.hook = func() { uerr = b.Undelete(ctx, victim) }
	perr := a.Purge(ctx, victim)
	require.NoError(t, uerr, "the Undelete ran within the Purge")
	if perr == nil {
		_, err := a.Meta(ctx, victim)
		assert.ErrorIs(t, err, ErrNotFound, "Purge returned nil, yet the session is in the store")
	}
}

// TestReviewTrashForeverIsKept: a TrashFor so long that the purge time
// passes the year 2262 (time.Duration's maximum, the natural "keep
// forever") overflows UnixNano in keptTrashName: the name does not parse
// as kept, so the entry is a removal name, and the next Delete, Prune,
// Purge, GCStore or writable Open removes the session for good at once.
func TestReviewTrashForeverIsKept(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{TrashFor: time.Duration(math.MaxInt64)}
	victim, _, want := trashWorkload(t, m, o)
	s := openMem(t, m, o)
	require.NoError(t, s.Delete(ctx, victim))
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	defer s.Close()
	assert.Equal(t, []uuid.UUID{victim}, trashIDs(t, s), "kept")
	require.NoError(t, s.Undelete(ctx, victim))
	checkSessionWhole(t, "undeleted", s, victim, want)
}

// TestReviewTrashCatalogueAcrossStores (passes; kept as a guard): after
// a Delete in one Store and an Undelete in another, every Store on the
// root (a third, read-only, too) sees the session again in ListRecent,
// ListPage, List and Meta: the Undelete's pending and commit records
// reach the other Stores' catalogue readers.
func TestReviewTrashCatalogueAcrossStores(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	victim, other, _ := trashWorkload(t, m, Options{})
	a := openMem(t, m, Options{})
	defer a.Close()
	b := openMem(t, m, Options{})
	defer b.Close()
	ro := openMem(t, m, Options{ReadOnly: true})
	defer ro.Close()
	has := func(ms []Meta) bool { return slices.ContainsFunc(ms, func(x Meta) bool { return x.ID == victim }) }
	for _, s := range []*Store{a, b, ro} {
		l, err := s.ListRecent(ctx, 10)
		require.NoError(t, err)
		require.True(t, has(l))
	}
	require.NoError(t, a.Delete(ctx, victim))
	for _, s := range []*Store{a, b, ro} {
		l, err := s.ListRecent(ctx, 10)
		require.NoError(t, err)
		require.False(t, has(l))
		p, _, err := s.ListPage(ctx, Query{}, "")
		require.NoError(t, err)
		require.False(t, has(p))
	}
	require.NoError(t, b.Undelete(ctx, victim))
	for i, s := range []*Store{a, b, ro} {
		l, err := s.ListRecent(ctx, 10)
		require.NoError(t, err)
		assert.True(t, has(l), "ListRecent %d", i)
		p, _, err := s.ListPage(ctx, Query{}, "")
		require.NoError(t, err)
		assert.True(t, has(p), "ListPage %d", i)
		l, err = s.List(ctx)
		require.NoError(t, err)
		assert.True(t, has(l), "List %d", i)
		mm, err := s.Meta(ctx, victim)
		require.NoError(t, err)
		assert.Equal(t, "victim", mm.Name)
	}
	_ = other
}
