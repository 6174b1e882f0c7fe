package sessionstore

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestReviewRwForkOfRecoveredParentPreviews: an encrypted parent whose
// index.jsonl was rebuilt from its chunk lines (a recovery: the file
// lost, cut, or removed by hand) gets its previews back in its own Tree
// (fillPreviews, in memory only), but a Fork of it reads its prefix from
// the parent's files, whose index lines carry no sealed preview: the
// fork's Tree shows its whole prefix without previews, for good (the
// rebuilt index.jsonl is never rewritten with them), while the parent's
// Tree shows them. A plain parent's fork shows them (NewEntry makes them
// from the chunk lines).
// Cause: tree.go:94-113 fillPreviews fills only the open session's
// in-memory entries ("not into index.jsonl's written lines"), and
// fork.go:284-290 (forkParent) only flushes held lines, which does not
// cover lines already written without previews; resolveFork/prefix
// (fork.go) never fills the prefix entries' previews.
func TestReviewRwForkOfRecoveredParentPreviews(t *testing.T) {
	ctx := context.Background()
	for _, enc := range []bool{false, true} {
		m := vfs.NewMemFS()
		o := Options{}
		if enc {
			o.Keys = testKeys(t, "local:1", 7)
		}
		s := openMem(t, m, o)
		p, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		require.Equal(t, enc, p.Encrypted)
		var last Event
		for i := range 3 {
			last, err = s.Append(ctx, p.ID, UserText(secret(i)))
			require.NoError(t, err)
		}
		require.NoError(t, s.Close())
		// index.jsonl lost: the next open rebuilds it from the chunk lines.
		require.NoError(t, m.Remove(filepath.Join(memRoot, "sessions", p.ID.String(), layout.IndexFile)))

		s = openMem(t, m, o)
		want := []string{secret(0), secret(1), secret(2)}
		require.Equal(t, want, treePreviews(t, s, p.ID), "precondition: the parent's own previews, encrypted %v", enc)
		require.NoError(t, s.Flush(ctx, p.ID))
		f, err := s.Fork(ctx, p.ID, last.ID)
		require.NoError(t, err)
		assert.Equal(t, want, treePreviews(t, s, f.ID), "the fork's prefix previews, encrypted %v", enc)
		require.NoError(t, s.Close())
	}
}

// TestReviewRwForkOfParentOpenElsewherePreviews: the parent is open in
// another Store on the same root (another process alike) and has just
// appended: its index lines are held (index.HoldLines), not in
// index.jsonl, so a Fork made by this Store resolves the prefix from the
// parent's chunk lines, whose entries carry no sealed preview: the fork's
// prefix has no previews in its Tree (and stays so while the fork is
// open). The fix of 7ea2a94 (write the held lines first) only runs when
// the parent is open in the forking Store. A plain parent's fork shows
// them.
// Cause: fork.go:284-290 forkParent flushes held lines only through a
// handle of this Store (s.reg.lookup); resolveFork reads the other
// writer's tail from chunk lines (NewEntry without a sealed preview) and
// nothing fills the prefix entries (tree.go fillPreviews fills own
// entries only).
func TestReviewRwForkOfParentOpenElsewherePreviews(t *testing.T) {
	ctx := context.Background()
	for _, enc := range []bool{false, true} {
		m := vfs.NewMemFS()
		o := Options{}
		if enc {
			o.Keys = testKeys(t, "local:1", 7)
		}
		w := openMem(t, m, o)
		p, err := w.Create(ctx, Meta{})
		require.NoError(t, err)
		var last Event
		for i := range 3 {
			last, err = w.Append(ctx, p.ID, UserText(secret(i)))
			require.NoError(t, err)
		}
		want := []string{secret(0), secret(1), secret(2)}
		require.Equal(t, want, treePreviews(t, w, p.ID), "precondition: the writer's, encrypted %v", enc)
		s := openMem(t, m, o)
		f, err := s.Fork(ctx, p.ID, last.ID)
		require.NoError(t, err)
		assert.Equal(t, want, treePreviews(t, s, f.ID), "the fork's prefix previews, encrypted %v", enc)
		require.NoError(t, s.Close())
		require.NoError(t, w.Close())
	}
}

// TestReviewRwFillPreviewsRacesSealer (run with -race): the background
// sealer takes the entries of a full chunk (Config.Embed, a sub-slice of
// h.Entries) under the session's mutex and then reads them without it
// (index.AppendLines in sealChunk), relying on "the entries of a full
// chunk are published and never change" (internal/chunkwriter/writer.go
// sealChunks). fillPreviews writes e.Preview of those very entries in
// place, under the mutex only: a Tree while the chunk is being sealed is
// a data race on h.Entries[i].Preview (and the sealed chunk's embedded
// index may get a torn preview).
// Cause: tree.go:99-112 (fillPreviews: e.Preview = ... on es, a range of
// h.Entries) against internal/chunkwriter/writer.go:370-381 and
// durable.go sealChunk reading es outside the mutex.
func TestReviewRwFillPreviewsRacesSealer(t *testing.T) {
	if !raceOn {
		t.Skip("shows its bug under -race")
	}
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{Keys: testKeys(t, "local:1", 7), ChunkSize: 4 << 10}
	s := openMem(t, m, o)
	p, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	for i := range 3 {
		_, err = s.Append(ctx, p.ID, UserText(secret(i)))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	require.NoError(t, m.Remove(filepath.Join(memRoot, "sessions", p.ID.String(), layout.IndexFile)))

	s = openMem(t, m, o)
	defer s.Close()
	// The sealer, once it has read the entries (AppendLines), blocks in
	// its first write of the sealed file; no synchronization with this
	// goroutine (a channel or an atomic would order the accesses).
	release := make(chan struct{})
	var entered atomic.Bool
	var once sync.Once
	m.SetFault(func(op vfs.Op, path string) error {
		if vfs.Mutating(op) && strings.Contains(path, layout.SealedExt) {
			once.Do(func() {
				entered.Store(true)
				<-release
			})
		}
		return nil
	})
	// Appends fill chunk 0 (whose first entries were rebuilt without
	// previews) and rotate: the sealer starts after DefaultSealIdle.
	for i := 0; i < 200 && !sealedStarted(m, p.ID.String()); i++ {
		_, err = s.Append(ctx, p.ID, UserText(strings.Repeat("x", 200)))
		require.NoError(t, err)
	}
	time.AfterFunc(time.Second, func() { close(release) })
	time.Sleep(300 * time.Millisecond) // the sealer reads es and blocks
	_, err = s.Tree(ctx, p.ID)         // fillPreviews writes chunk 0's entries
	require.NoError(t, err)
	m.SetFault(nil)
	require.True(t, entered.Load(), "precondition: the sealer ran")
}

// sealedStarted reports whether session id's chunk 0 is no longer the
// only chunk (a rotation happened).
func sealedStarted(m *vfs.MemFS, id string) bool {
	names, err := m.ReadDir(filepath.Join(memRoot, "sessions", id, "chunks"))
	return err == nil && len(names) > 1
}

// TestReviewRwRemoteForkPreviews: with Options.Remote, a Fork of an
// encrypted session open in this very Store reads its prefix from a copy
// restored from the object store (prefixSource, forkCacheDir), whose
// index is rebuilt from the log's chunk lines without sealed previews:
// the fork's Tree shows its prefix without previews, while the parent's
// shows them; a plain parent's fork shows them. The writeIndex of
// 7ea2a94 (fork.go:284-290) writes the parent's local index.jsonl, which
// the remote fork never reads.
// Cause: fork.go forkParent/prefixSource.restore with Remote (the copy's
// index rebuilt from chunk lines: remote_restore.go rebuildDerived,
// eventline.NewEntry) and tree.go fillPreviews filling own entries only.
func TestReviewRwRemoteForkPreviews(t *testing.T) {
	ctx := context.Background()
	for _, enc := range []bool{false, true} {
		obj := newMemObjects()
		keys := testKeys(t, "local:1", 7)
		s := memRemoteStore(t, obj, func(o *Options) {
			if enc {
				o.Keys = keys
			}
		})
		p, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		require.Equal(t, enc, p.Encrypted)
		var last Event
		for i := range 3 {
			last, err = s.Append(ctx, p.ID, UserText(secret(i)))
			require.NoError(t, err)
		}
		want := []string{secret(0), secret(1), secret(2)}
		require.Equal(t, want, treePreviews(t, s, p.ID), "precondition: the parent's, encrypted %v", enc)
		f, err := s.Fork(ctx, p.ID, last.ID)
		require.NoError(t, err)
		assert.Equal(t, want, treePreviews(t, s, f.ID), "the fork's prefix previews, encrypted %v", enc)
	}
}
