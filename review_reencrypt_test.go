package sessionstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// leaveKeyObject makes a Create of id on a new root whose log object is
// never made, so that its key object is left in obj.
func leaveKeyObject(t *testing.T, obj *memObjects, keys KeyProvider, id uuid.UUID) {
	t.Helper()
	boom := errors.New("no log")
	obj.mu.Lock()
	obj.fail = func(op, key string) (error, bool) {
		if op == "create" && strings.HasPrefix(key, seam.LogPrefix(id)) {
			return boom, false
		}
		return nil, false
	}
	obj.mu.Unlock()
	a, err := Open(t.TempDir(), remoteEncOpts(obj, keys))
	require.NoError(t, err)
	_, err = a.Create(context.Background(), Meta{ID: id})
	require.ErrorIs(t, err, boom)
	require.NoError(t, a.Close())
	obj.mu.Lock()
	obj.fail = nil
	_, left := obj.objs[seam.KeyObject(id)]
	obj.mu.Unlock()
	require.True(t, left, "the first Create's key object is left")
}

// TestReviewReencDeferredRemoteAdoptKey: a deferred session
// (Options.DeferCreate) with Remote and Keys whose first write adopts a
// key object another Create left.
//
// Bug 1 (defer.go: materialize): materialize holds e.mu for its whole
// run (e.mu.Lock; defer e.mu.Unlock) and, when createNow returns an
// adopted key (k != e.key), locks e.mu again to store it: sync.Mutex is
// not reentrant, so the first Append deadlocks for good (and the Store's
// Close then waits for that call forever).
//
// Bug 2 (store.go: appendEvents, behind bug 1): the batch is sealed under
// the key ownKey returned before materialize ran, i.e. the deferred
// session's own new key, which claimKeyObject just discarded in favour of
// the adopted one: the first batch would be stored under a key no key
// record holds, unreadable everywhere.
func TestReviewReencDeferredRemoteAdoptKey(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	keys := testKeys(t, "local:1", 7)
	id := uuid.Must(uuid.NewV7())
	leaveKeyObject(t, obj, keys, id)

	o := remoteEncOpts(obj, keys)
	o.DeferCreate = true
	b, err := Open(t.TempDir(), o)
	require.NoError(t, err)
	_, err = b.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	type res struct {
		ev  Event
		err error
	}
	done := make(chan res, 1)
	go func() {
		ev, err := b.Append(ctx, id, UserText(secret(1)))
		done <- res{ev, err}
	}()
	var r res
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the deferred session's first Append never returns (materialize locks e.mu twice)")
	}
	require.NoError(t, r.err)
	require.NoError(t, b.Close())

	c, _ := apiNewStore(t, remoteEncOpts(obj, keys))
	got, err := c.Event(ctx, id, r.ev.ID)
	require.NoError(t, err, "the first batch is sealed under the key the key object holds")
	assert.Equal(t, string(r.ev.Record), string(got.Record))
}

// TestReviewReencRemoteCreateExistingWrongError: Create of an id that is
// an encrypted session on another root, on a root whose KeyProvider does
// not hold that session's KEK, returns a *KeyError instead of ErrExists.
//
// Bug (session.go: createNow / encrypt_remote.go: claimKeyObject): the key
// object is claimed before anything checks that the session exists; the
// existing session's key object is taken for a leftover to adopt, and its
// unwrap fails first. (With a plain existing session the same order leaves
// a stray key object in the bucket that no Delete ever removes, since
// destroyKeyObject skips sessions whose session.json says plain.)
// Suggested fix: Stat the session's log (as deferCreate does with
// metaRemote) before claimKeyObject, or map an unwrap failure of an
// adopted record to ErrExists when the log exists.
func TestReviewReencRemoteCreateExistingWrongError(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteEncOpts(obj, testKeys(t, "local:1", 7)))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	_, err = a.Append(ctx, m.ID, UserText(secret(0)))
	require.NoError(t, err)

	b, _ := apiNewStore(t, remoteEncOpts(obj, testKeys(t, "local:2", 9)))
	_, err = b.Create(ctx, Meta{ID: m.ID})
	require.ErrorIs(t, err, ErrExists, "an existing id is ErrExists, as without Keys")
}

// TestReviewReencReadOnlyReaderAfter: a read-only Store that read an
// encrypted session before another Store re-encrypted it reads it again
// afterwards (the docs promise at most one failed call).
//
// Bug (reencrypt.go: resealer.chunk, with readonly.go's refresh): every
// line keeps its length but a blob event's line names a new digest. A
// read-only Store reloads a session only when its Revision (the newest
// chunk's number, form and size) changed, and Reencrypt changes none of
// them, so the reader keeps its index entries with the old digests:
// readEntry compares the line's digest with the entry's and every call
// that reads the blob event (LoadPath, FullPath, Event, ...) fails with a
// *CorruptionError ("does not match its index entry") for as long as that
// Store lives, not once. Suggested fix: make Reencrypt change what
// Revision sees (e.g. rotate to a new, empty newest chunk after the
// rewrite), or have readers reload the index on an entry/line digest
// mismatch (as a fork does with refreshPrefix) before reporting damage.
func TestReviewReencReadOnlyReaderAfter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := reencOptions(testKeys(t, "local:1", 7))
	s, err := Open(dir, &o)
	require.NoError(t, err)
	id, all := encryptedWorkload(t, s)
	require.NoError(t, s.Close())

	ro := o
	ro.ReadOnly = true
	r, err := Open(dir, &ro)
	require.NoError(t, err)
	defer r.Close()
	checkEncryptedReads(t, r, id, all)

	s, err = Open(dir, &o)
	require.NoError(t, err)
	require.NoError(t, s.Reencrypt(ctx, id))
	require.NoError(t, s.Close())

	leaf := all[len(all)-2].ID // on the compacted branch, past the blob event
	for i := range 3 {
		_, err = r.LoadPath(ctx, id, leaf)
		t.Logf("LoadPath %d after: %v", i, err)
	}
	require.NoError(t, err, "the reader's third call still fails")
	checkEncryptedReads(t, r, id, all)
}

// TestReviewReencRemoteKeyCopyOutlivesDelete: a root that read an
// encrypted remote session keeps a copy of its key record in its keys/
// (fetchKeyObject); a Delete on another root destroys the key object and
// its own copy, but the reading root's copy (beside its cached chunks)
// survives, even once that root has seen the session gone.
//
// Bug (encrypt_remote.go: fetchKeyObject / delete.go: deleteSession, and
// nothing on the reading side): only the deleting root's local key record
// is destroyed. Every other root that ever opened the session (or read it
// as a fork's prefix) keeps keys/<id>.json next to its cached chunks and
// blobs; learning that the session is deleted (ErrNotFound) or GCStore
// removes neither, so that root's disk alone opens the deleted session
// with the KEK: the key survives the delete and crypto-shredding does not
// hold. Suggested fix: when a root finds a session deleted in the object
// store (restore sees the marker, GCStore/List), shred its local key copy
// first (destroyKey) and drop its cache directory; or do not persist the
// fetched key record at all (keep it in memory, stamped by the key
// object's ETag/mod time).
func TestReviewReencRemoteKeyCopyOutlivesDelete(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	keys := testKeys(t, "local:1", 7)
	a, _ := apiNewStore(t, remoteEncOpts(obj, keys))
	id, all := encryptedWorkload(t, a)
	require.NoError(t, a.CloseSession(ctx, id))

	b, bdir := apiNewStore(t, remoteEncOpts(obj, keys))
	checkEncryptedReads(t, b, id, all)
	require.NoError(t, b.CloseSession(ctx, id))
	copyPath := filepath.Join(bdir, keysDir, id.String()+".json")
	_, err := os.Stat(copyPath)
	require.True(t, errors.Is(err, os.ErrNotExist), "b keeps no copy of the key record on disk: %v", err)

	require.NoError(t, a.Delete(ctx, id))
	assert.NotContains(t, obj.keys(seam.KeyPrefix), seam.KeyObject(id))
	_, err = b.Load(ctx, id)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = b.GCStore(ctx)
	require.NoError(t, err)
	_, err = os.Stat(copyPath)
	assert.True(t, errors.Is(err, os.ErrNotExist), "the deleted session's key record survives on the root that read it: %v", err)
	var left []string
	_ = filepath.WalkDir(filepath.Join(bdir, sessionsDir, id.String()), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			left = append(left, p)
		}
		return nil
	})
	t.Logf("b's cache of the deleted session: %d files", len(left))
	require.NoError(t, b.Close())
	// What b's disk holds opens as a session, every record in clear.
	l, err := Open(bdir, &Options{Keys: keys})
	require.NoError(t, err)
	defer l.Close()
	got, err := l.Load(ctx, id)
	if assert.Error(t, err, "b's disk still holds the deleted session and its key") {
		return
	}
	t.Logf("read %d events of the deleted session from b's disk", len(got))
}

// TestReviewReencResolveHeldEvent: an Event read before Reencrypt whose
// record is a blob (Record nil, Digest set: Resolve reads it) no longer
// resolves after it.
//
// Bug (reencrypt.go: resealer.chunk and Reencrypt's GC): Reencrypt says
// "the events do not change", but a blob event's Digest does, and the old
// blob is collected at once. An Event, a Subscribe update or any event a
// caller holds from before (Event returns blob records unresolved, for
// Resolve) then fails in Resolve with a *CorruptionError ("blob is
// missing") on a healthy session: a wrong error. Suggested fix: on a
// missing blob of an encrypted session, have Resolve look the event up by
// ev.ID and read the blob its line names now; or keep Event.Digest stable
// (e.g. name blobs of encrypted sessions by a digest that is not the
// envelope's) and at least document the change.
func TestReviewReencResolveHeldEvent(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := reencOptions(testKeys(t, "local:1", 7))
	s, err := Open(dir, &o)
	require.NoError(t, err)
	defer s.Close()
	id, all := encryptedWorkload(t, s)
	big := all[2]
	held, err := s.Event(ctx, id, big.ID)
	require.NoError(t, err)
	require.Nil(t, held.Record)
	require.NotEmpty(t, held.Digest)

	require.NoError(t, s.Reencrypt(ctx, id))

	got, err := s.Resolve(ctx, id, held)
	require.NoError(t, err, "an event of a healthy session, read before, resolves")
	assert.True(t, string(big.Record) == string(got.Record))
}
