package sessionstore

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// revGateFS holds the first operation that hold selects until open is
// closed, reporting it on held first.
type revGateFS struct {
	vfs.FS
	hold func(op, name string) bool
	once sync.Once
	held chan string
	open chan struct{}
}

func newRevGate(fsys vfs.FS, hold func(op, name string) bool) *revGateFS {
	return &revGateFS{FS: fsys, hold: hold, held: make(chan string, 1), open: make(chan struct{})}
}

func (g *revGateFS) wait(op, name string) {
	if !g.hold(op, name) {
		return
	}
	first := false
	g.once.Do(func() { first = true })
	if first {
		g.held <- name
		<-g.open
	}
}

func (g *revGateFS) MkdirAll(name string, perm fs.FileMode) error {
	g.wait("mkdir", name)
	return g.FS.MkdirAll(name, perm)
}

func (g *revGateFS) Rename(from, to string) error {
	g.wait("rename", to)
	return g.FS.Rename(from, to)
}

func (g *revGateFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	g.wait("open", name)
	return g.FS.OpenFile(name, flag, perm)
}

func (g *revGateFS) Stat(name string) (fs.FileInfo, error) {
	g.wait("stat", name)
	return g.FS.Stat(name)
}

func revWait[T any](t *testing.T, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: timed out", what)
		panic("unreachable")
	}
}

// TestReviewEncCreateOfIDBeingCreatedReplacesKey: a Create of an id whose
// session another Store is creating (its key record written and its
// directory made under the catalogue's lock, session.json not yet
// written) replaces the key record (makeSessionDir only looks for
// session.json before writeKeyRecord), and then fails with ErrLocked.
// The first creator goes on sealing under its own key: every record it
// writes is unreadable for any other Store, for good.
// Bug: session.go makeSessionDir / encrypt.go writeKeyRecord overwrite an
// existing keys/<id>.json; they should refuse (skip) when a key record
// exists for a directory that exists, or write it with O_EXCL.
func TestReviewEncCreateOfIDBeingCreatedReplacesKey(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := encOptions(testKeys(t, "local:1", 7))
	id := uuid.Must(uuid.NewV7())
	gate := newRevGate(m, func(op, name string) bool {
		return op == "mkdir" && name == sessionPath(id, chunksDir)
	})
	a := openMem(t, gate, o)
	b := openMem(t, m, o)
	errA := make(chan error, 1)
	go func() {
		_, err := a.Create(ctx, Meta{ID: id})
		errA <- err
	}()
	revWait(t, "A's Create reaches its session files", gate.held)
	keyFile := filepath.Join(memRoot, keysDir, id.String()+".json")
	before, err := vfs.ReadFile(m, keyFile)
	require.NoError(t, err, "A wrote its key record")

	_, errB := b.Create(ctx, Meta{ID: id})
	require.Error(t, errB, "the id is being created by A")
	after, err := vfs.ReadFile(m, keyFile)
	require.NoError(t, err)
	assert.Equal(t, string(before), string(after), "a failed Create of an existing id replaced its key record")

	close(gate.open)
	require.NoError(t, revWait(t, "A's Create", errA))
	_, err = a.Append(ctx, id, UserText(secret(0)))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())

	c := openMem(t, m, o)
	defer c.Close()
	evs, err := c.Load(ctx, id)
	require.NoError(t, err, "A's session, read by another Store")
	require.Len(t, evs, 1)
	assert.JSONEq(t, string(UserText(secret(0)).Record), string(evs[0].Record))
}

// TestReviewEncDeferredCreateCachesUnwrittenKey: under DeferCreate,
// Create caches the new session's key in Store.keys before anything is
// on disk. When another Store then makes the same id first (defer.go
// allows it: "the first whose first write makes the files wins"), this
// Store still reads the winner's session under its own, never written,
// key: every read is a *CorruptionError although the data and the key
// record are fine.
// Bug: session.go Create stores the key in s.keys.m for a deferred
// session; it should stay in a deferred-only place (e.g. the
// deferredSession) and go to the cache only once materialize made the
// files with it; a lost deferred session must drop it.
func TestReviewEncDeferredCreateCachesUnwrittenKey(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := encOptions(testKeys(t, "local:1", 7))
	od := o
	od.DeferCreate = true
	a := openMem(t, m, od)
	defer a.Close()
	b := openMem(t, m, o)
	defer b.Close()
	id := uuid.Must(uuid.NewV7())
	_, err := a.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	_, err = b.Create(ctx, Meta{ID: id})
	require.NoError(t, err, "nothing of A's deferred session is on disk")
	ev, err := b.Append(ctx, id, UserText(secret(0)))
	require.NoError(t, err)
	require.NoError(t, b.CloseSession(ctx, id))

	_, err = a.Append(ctx, id, UserText("A's"))
	require.ErrorIs(t, err, ErrExists, "B made it first")
	got, err := a.Event(ctx, id, ev.ID)
	var ce *CorruptionError
	assert.False(t, errors.As(err, &ce), "a session whose data and key are whole read as damaged: %v", err)
	if assert.NoError(t, err) {
		assert.Equal(t, string(ev.Record), string(got.Record))
	}
}

// TestReviewEncDeferredPlainCacheHandsOutEnvelopes: the same cache entry
// the other way round: a Store without Keys defers a Create (Create
// caches plainSession for the id); a Store with Keys makes the id first,
// encrypted. The first Store then hands out the sealed envelopes as the
// records (no *KeyError), which is what Meta.Encrypted is there to
// prevent.
// Bug: session.go Create caches plainSession for a deferred session whose
// files another writer may make; see the test above.
func TestReviewEncDeferredPlainCacheHandsOutEnvelopes(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	a := openMem(t, m, Options{DeferCreate: true, BlobThreshold: 16 << 10})
	defer a.Close()
	b := openMem(t, m, encOptions(testKeys(t, "local:1", 7)))
	defer b.Close()
	id := uuid.Must(uuid.NewV7())
	_, err := a.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	_, err = b.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	ev, err := b.Append(ctx, id, UserText(secret(0)))
	require.NoError(t, err)
	require.NoError(t, b.CloseSession(ctx, id))

	got, err := a.Event(ctx, id, ev.ID)
	var ke *KeyError
	assert.ErrorAs(t, err, &ke, "an encrypted session read without Keys; got record %s", got.Record)
	evs, err := a.Load(ctx, id)
	assert.ErrorAs(t, err, &ke, "Load without Keys; got %d events", len(evs))
}

// TestReviewEncRewrapMissesKeyInSessionDir: a Delete to the trash moves
// the key record into the session's directory (key.json) before it moves
// the directory; when the move fails (an I/O error here; a crash between
// the two, or one in Undelete between its move and moveKeyOutOfSession,
// leaves the same state) the session stays in the store with its key in
// its directory, where the Store reads it. Rewrap does not look there: it
// reports nothing skipped, so the operator retires the old KEK as the
// docs say, and the session is unreadable for good.
// Bug: encrypt.go Rewrap only walks keys/ and the trash; it should also
// rewrap (or move back to keys/) a key.json found in a session directory
// of the store, e.g. by walking the sessions with Meta.Encrypted, or have
// loadSessionKey / the failed Delete move it back to keys/.
func TestReviewEncRewrapMissesKeyInSessionDir(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	old, err := NewLocalKeys("kek:a", map[string][]byte{"kek:a": bytesOf(1)})
	require.NoError(t, err)
	s := openMem(t, m, encOptions(old))
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	ev, err := s.Append(ctx, meta.ID, UserText(secret(0)))
	require.NoError(t, err)
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpRename && filepath.Dir(path) == filepath.Join(memRoot, trashDir) {
			return errors.New("injected I/O error")
		}
		return nil
	})
	require.Error(t, s.Delete(ctx, meta.ID))
	m.SetFault(nil)
	_, err = s.Meta(ctx, meta.ID)
	require.NoError(t, err, "the session is still in the store")
	require.NoError(t, s.Close())

	both, err := NewLocalKeys("kek:b", map[string][]byte{"kek:a": bytesOf(1), "kek:b": bytesOf(2)})
	require.NoError(t, err)
	s = openMem(t, m, encOptions(both))
	got, err := s.Event(ctx, meta.ID, ev.ID)
	require.NoError(t, err, "readable with its key in its directory")
	require.Equal(t, string(ev.Record), string(got.Record))
	rep, err := s.Rewrap(ctx)
	require.NoError(t, err)
	require.Empty(t, rep.Skipped, "nothing skipped: the old KEK may be retired")
	require.NoError(t, s.Close())

	onlyB, err := NewLocalKeys("kek:b", map[string][]byte{"kek:b": bytesOf(2)})
	require.NoError(t, err)
	s = openMem(t, m, encOptions(onlyB))
	defer s.Close()
	_, err = s.Event(ctx, meta.ID, ev.ID)
	assert.NoError(t, err, "Rewrap left the session's key under the retired KEK (report %+v)", rep)
}

func bytesOf(b byte) []byte {
	out := make([]byte, 32)
	for i := range out {
		out[i] = b
	}
	return out
}

// TestReviewEncConcurrentCreateSameIDCachesPlain: Store.newKeys is keyed
// by session id and shared by concurrent Creates of one id. A second
// Create of an id whose first Create is still running (here a fork's,
// recording its fork marker) overwrites the first's entry, fails with
// ErrExists, and its deferred newKeys.Delete removes the entry; the first
// Create then finds no key in newKeys and caches plainSession for its
// encrypted session. Every later Append through that Store writes the
// record in clear into a session whose session.json says it is sealed
// (and which no Store reads back).
// Bug: session.go Create: the key must be handed to createNow/deferCreate
// directly (or newKeys keyed by the Create call, or LoadOrStore refusing a
// second creator), and the cache filled from the key Create made, never
// from a shared map with plainSession as fallback.
func TestReviewEncConcurrentCreateSameIDCachesPlain(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := encOptions(testKeys(t, "local:1", 7))
	parent := uuid.Must(uuid.NewV7())
	id := uuid.Must(uuid.NewV7())
	gate := newRevGate(m, func(op, name string) bool {
		return op == "open" && name == filepath.Join(memRoot, forksDir, parent.String(), id.String())
	})
	s := openMem(t, gate, o)
	_, err := s.Create(ctx, Meta{ID: parent})
	require.NoError(t, err)
	at, err := s.Append(ctx, parent, UserText(secret(0)))
	require.NoError(t, err)

	errA := make(chan error, 1)
	go func() {
		_, err := s.Create(ctx, Meta{ID: id, ForkedFrom: &ForkPoint{Session: parent, Event: at.ID}})
		errA <- err
	}()
	revWait(t, "the fork's Create records its marker", gate.held)
	_, err = s.Create(ctx, Meta{ID: id})
	require.ErrorIs(t, err, ErrExists)
	close(gate.open)
	require.NoError(t, revWait(t, "the fork's Create", errA))

	m0, err := s.Meta(ctx, id)
	require.NoError(t, err)
	require.True(t, m0.Encrypted)
	_, err = s.Append(ctx, id, UserText(secret(7)))
	require.NoError(t, err)
	require.NoError(t, s.Close())

	// No file holds the record in clear.
	var walk func(dir string)
	walk = func(dir string) {
		names, err := m.ReadDir(dir)
		require.NoError(t, err)
		for _, n := range names {
			p := filepath.Join(dir, n)
			info, err := m.Stat(p)
			require.NoError(t, err)
			if info.IsDir() {
				walk(p)
				continue
			}
			b, err := vfs.ReadFile(m, p)
			require.NoError(t, err)
			assert.NotContains(t, string(b), secret(7), "%s holds a record of an encrypted session in clear", p)
		}
	}
	walk(memRoot)
	c := openMem(t, m, o)
	defer c.Close()
	_, err = c.Load(ctx, id)
	assert.NoError(t, err, "the fork's own event, read by another Store")
}

// TestReviewEncForkPrefixPreviewsFromRebuiltIndex: an encrypted session
// whose index was rebuilt from its chunk lines (recovery: here the index
// file lost) has index entries without previews (eventline.Sealed: the
// stored envelopes have no text to preview); its Tree makes them again
// from the records (fillPreviews), so does TreeSeq of an encrypted fork
// for its prefix (fillPrefix), and Tree of a plain fork (made by a Store
// without Keys) of the encrypted parent shows none, never base64 garbage
// as the events' text.
func TestReviewEncForkPrefixPreviewsFromRebuiltIndex(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := encOptions(testKeys(t, "local:1", 7))
	s := openMem(t, m, o)
	parent, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	var last Event
	for i := range 3 {
		last, err = s.Append(ctx, parent.ID, UserText(secret(i)))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	require.NoError(t, m.Remove(sessionPath(parent.ID, indexName)))

	s = openMem(t, m, o)
	defer s.Close()
	nodes, err := s.Tree(ctx, parent.ID)
	require.NoError(t, err)
	require.Len(t, nodes, 3)
	for i, n := range nodes {
		require.Equal(t, secret(i), n.Preview, "Tree makes them again from the records (fillPreviews)")
	}
	f, err := s.Fork(ctx, parent.ID, last.ID)
	require.NoError(t, err)
	n := 0
	for node, err := range s.TreeSeq(ctx, f.ID) {
		require.NoError(t, err)
		assert.Equal(t, secret(n), node.Preview, "TreeSeq of an encrypted fork: node %s", node.ID)
		n++
	}
	require.Equal(t, 3, n)

	plain := openMem(t, m, Options{})
	defer plain.Close()
	pf, err := plain.Fork(ctx, parent.ID, last.ID)
	require.NoError(t, err)
	nodes, err = plain.Tree(ctx, pf.ID)
	require.NoError(t, err)
	for _, node := range nodes {
		assert.Empty(t, node.Preview, "Tree of a plain fork of an encrypted session: node %s", node.ID)
	}
}
