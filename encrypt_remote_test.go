package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seal"
	"github.com/sessionstore/sessionstore/internal/seam"
)

// remoteEncOpts are remoteOpts with keys and encOptions' blob threshold.
func remoteEncOpts(obj ObjectStore, keys KeyProvider) *Options {
	o := remoteOpts(obj)
	o.Keys = keys
	o.BlobThreshold = encOptions(keys).BlobThreshold
	return o
}

// versionedObjects is a memObjects on a versioned bucket: a Put or a
// Delete keeps the object's former bytes as an older version, which
// DeleteAllVersions alone removes.
type versionedObjects struct {
	*memObjects
	vmu      sync.Mutex
	versions map[string][][]byte
}

func newVersionedObjects() *versionedObjects {
	return &versionedObjects{memObjects: newMemObjects(), versions: map[string][][]byte{}}
}

func (v *versionedObjects) keep(key string) {
	v.memObjects.mu.Lock()
	o, ok := v.memObjects.objs[key]
	v.memObjects.mu.Unlock()
	if ok {
		v.vmu.Lock()
		v.versions[key] = append(v.versions[key], slices.Clone(o.data))
		v.vmu.Unlock()
	}
}

func (v *versionedObjects) Put(ctx context.Context, key string, data []byte) error {
	v.keep(key)
	return v.memObjects.Put(ctx, key, data)
}

func (v *versionedObjects) ReplaceIf(ctx context.Context, key string, data []byte, tag string) error {
	v.keep(key)
	return v.memObjects.ReplaceIf(ctx, key, data, tag)
}

func (v *versionedObjects) Delete(ctx context.Context, key string) error {
	v.keep(key)
	return v.memObjects.Delete(ctx, key)
}

func (v *versionedObjects) DeleteAllVersions(ctx context.Context, key string) error {
	if err := v.memObjects.Delete(ctx, key); err != nil {
		return err
	}
	v.vmu.Lock()
	delete(v.versions, key)
	v.vmu.Unlock()
	return nil
}

// all returns every object and every older version, by key.
func (v *versionedObjects) all() map[string][][]byte {
	out := map[string][][]byte{}
	v.vmu.Lock()
	for k, vs := range v.versions {
		out[k] = append(out[k], vs...)
	}
	v.vmu.Unlock()
	v.memObjects.mu.Lock()
	for k, o := range v.memObjects.objs {
		out[k] = append(out[k], o.data)
	}
	v.memObjects.mu.Unlock()
	return out
}

// TestRemoteEncrypted: with Options.Remote, an encrypted session's
// records leave the process sealed (no object, and no older version of
// one, holds a record's text, which the same scan finds in a plain
// session's objects); its key record is an object of its own; another
// root with the key reads every record; one without it gets a *KeyError;
// a fork read on another root opens its prefix under its parent's key.
func TestRemoteEncrypted(t *testing.T) {
	ctx := context.Background()
	obj := newVersionedObjects()
	keys := testKeys(t, "local:1", 7)
	a, adir := apiNewStore(t, remoteEncOpts(obj, keys))
	id, all := encryptedWorkload(t, a)
	fork, err := a.Fork(ctx, id, all[len(all)-1].ID)
	require.NoError(t, err)
	require.True(t, fork.Encrypted)
	fev, err := a.Append(ctx, fork.ID, UserText(secret(8)))
	require.NoError(t, err)
	require.NoError(t, a.Close())
	assert.ElementsMatch(t, []string{seam.KeyObject(fork.ID), seam.KeyObject(id)}, obj.keys(seam.KeyPrefix))
	_, err = os.Stat(filepath.Join(adir, keysDir, id.String()+".json"))
	assert.True(t, errors.Is(err, os.ErrNotExist), "no copy of the key record on the creating root's disk (a Delete elsewhere would leave it): %v", err)

	scan := func(objs map[string][][]byte) []string {
		var found []string
		for k, vs := range objs {
			for _, b := range vs {
				for i := range 10 {
					if strings.Contains(string(b), secret(i)) {
						found = append(found, fmt.Sprintf("%s holds %s", k, secret(i)))
					}
				}
			}
		}
		return found
	}
	assert.Empty(t, scan(obj.all()), "no record in clear in any object")

	b, _ := apiNewStore(t, remoteEncOpts(obj, keys))
	checkEncryptedReads(t, b, id, all)
	got, err := b.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, string(fev.Record), string(got[len(got)-1].Record), "the fork's own event")
	assert.Equal(t, recordsOf(t, b, id, all[:len(all)-1])[got[0].ID], string(got[0].Record), "its prefix, under its parent's key")
	require.NoError(t, b.Close())

	c, _ := apiNewStore(t, remoteOpts(obj))
	_, err = c.Load(ctx, id)
	var ke *KeyError
	require.ErrorAs(t, err, &ke, "a root without the key")
	assert.ErrorIs(t, err, ErrKeyUnavailable)
	require.NoError(t, c.Close())

	// The same scan finds a plain session's records.
	plainObj := newVersionedObjects()
	p, _ := apiNewStore(t, remoteOpts(plainObj))
	encryptedWorkloadPlain(t, p)
	require.NoError(t, p.Close())
	assert.NotEmpty(t, scan(plainObj.all()), "the scan finds what is in clear")
}

// encryptedWorkloadPlain is encryptedWorkload's events in a plain session.
func encryptedWorkloadPlain(t *testing.T, s *Store) {
	t.Helper()
	ctx := context.Background()
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	for i := range 3 {
		_, err := s.Append(ctx, m.ID, UserText(secret(i)))
		require.NoError(t, err)
	}
}

// TestRemoteEncryptedDelete: a Delete destroys the key object, every
// version of it, before the delete marker: a Delete cut short right after
// leaves a session whose reads fail with a *KeyError, and a Delete again
// finishes it; the session's objects as they were before the Delete (all
// their versions) put back into a bucket do not open with the key
// provider.
func TestRemoteEncryptedDelete(t *testing.T) {
	ctx := context.Background()
	obj := newVersionedObjects()
	keys := testKeys(t, "local:1", 7)
	a, _ := apiNewStore(t, remoteEncOpts(obj, keys))
	id, _ := encryptedWorkload(t, a)
	require.NoError(t, a.Close())
	before := maps.Clone(obj.all())
	require.Contains(t, before, seam.KeyObject(id))

	a, _ = apiNewStore(t, remoteEncOpts(obj, keys))
	_, err := a.Load(ctx, id)
	require.NoError(t, err)
	boom := errors.New("cut short")
	obj.mu.Lock()
	obj.fail = func(op, key string) (error, bool) {
		if op == "create" && strings.HasPrefix(key, seam.LogPrefix(id)) {
			return boom, false // the delete marker
		}
		return nil, false
	}
	obj.mu.Unlock()
	require.ErrorIs(t, a.Delete(ctx, id), boom)
	obj.mu.Lock()
	obj.fail = nil
	obj.mu.Unlock()
	assert.NotContains(t, obj.all(), seam.KeyObject(id), "the key object and its versions went first")
	require.NoError(t, a.Close())
	obj.advance(2 * time.Minute) // the lease of the Delete cut short

	b, _ := apiNewStore(t, remoteEncOpts(obj, keys))
	_, err = b.Load(ctx, id)
	var ke *KeyError
	require.ErrorAs(t, err, &ke, "a session whose key is destroyed")
	assert.ErrorIs(t, err, ErrKeyUnavailable)
	require.NoError(t, b.Delete(ctx, id), "a Delete finishes it")
	_, err = b.Load(ctx, id)
	assert.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, b.Close())

	// Every object and version from before, but the key's, in a bucket.
	restored := newMemObjects()
	for k, vs := range before {
		if k == seam.KeyObject(id) {
			continue
		}
		restored.objs[k] = memObject{data: vs[len(vs)-1], mod: restored.clock}
	}
	c, _ := apiNewStore(t, remoteEncOpts(restored, keys))
	_, err = c.Load(ctx, id)
	require.ErrorAs(t, err, &ke, "a copy from before the Delete")
	assert.Equal(t, id, ke.Session)
	require.NoError(t, c.Close())
}

// TestRemoteEncryptedCreateAdoptsKey: a Create whose log object was
// never made leaves its key object; a Create of the same id adopts that
// key (it does not replace it, which would break a Create of the id
// running at the same moment on another root), and the session reads on
// another root.
func TestRemoteEncryptedCreateAdoptsKey(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	keys := testKeys(t, "local:1", 7)
	id := uuid.Must(uuid.NewV7())
	boom := errors.New("no log")
	obj.fail = func(op, key string) (error, bool) {
		if op == "create" && strings.HasPrefix(key, seam.LogPrefix(id)) {
			return boom, false
		}
		return nil, false
	}
	a, _ := apiNewStore(t, remoteEncOpts(obj, keys))
	_, err := a.Create(ctx, Meta{ID: id})
	require.ErrorIs(t, err, boom)
	require.NoError(t, a.Close())
	obj.mu.Lock()
	obj.fail = nil
	left := slices.Clone(obj.objs[seam.KeyObject(id)].data)
	obj.mu.Unlock()
	require.NotEmpty(t, left, "the first Create's key object")

	b, _ := apiNewStore(t, remoteEncOpts(obj, keys))
	m, err := b.Create(ctx, Meta{ID: id})
	require.NoError(t, err)
	ev, err := b.Append(ctx, m.ID, UserText(secret(1)))
	require.NoError(t, err)
	require.NoError(t, b.Close())
	obj.mu.Lock()
	now := obj.objs[seam.KeyObject(id)].data
	obj.mu.Unlock()
	assert.Equal(t, left, now, "adopted, not replaced")

	c, _ := apiNewStore(t, remoteEncOpts(obj, keys))
	got, err := c.Event(ctx, id, ev.ID)
	require.NoError(t, err)
	assert.Equal(t, string(ev.Record), string(got.Record))
	require.NoError(t, c.Close())
}

// TestRemoteEncryptedUnsupported: Reencrypt is refused with
// Options.Remote, and Rewrap with an ObjectStore that cannot replace an
// object conditionally (not an ObjectReplacer).
func TestRemoteEncryptedUnsupported(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteEncOpts(obj, testKeys(t, "local:1", 7)))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	assert.ErrorIs(t, a.Reencrypt(ctx, m.ID), ErrRemoteUnsupported)
	require.NoError(t, a.Close())
	b, _ := apiNewStore(t, remoteEncOpts(struct{ ObjectStore }{obj}, testKeys(t, "local:1", 7)))
	_, err = b.Rewrap(ctx)
	assert.ErrorIs(t, err, ErrRemoteUnsupported)
	require.NoError(t, b.Close())
}

// keyObjectKEKs returns the key-encryption key ids of session id's key
// object in obj (none when it is gone).
func keyObjectKEKs(t *testing.T, obj *memObjects, id uuid.UUID) []string {
	t.Helper()
	obj.mu.Lock()
	o, ok := obj.objs[seam.KeyObject(id)]
	obj.mu.Unlock()
	if !ok {
		return nil
	}
	rec, err := seal.DecodeRecord(seam.KeyObject(id), id, o.data)
	require.NoError(t, err)
	var out []string
	for _, k := range rec.Keys {
		out = append(out, k.KeyID)
	}
	return out
}

// TestRemoteRewrap: with Options.Remote, Rewrap replaces every key object
// by one wrapped under the current key-encryption key; afterwards a Store
// holding the new key alone reads every session, and a second Rewrap
// finds nothing to do.
func TestRemoteRewrap(t *testing.T) {
	ctx := context.Background()
	obj := newVersionedObjects()
	old, both, onlyB := rotationKeys(t)

	s, _ := apiNewStore(t, remoteEncOpts(obj, old))
	id, all := encryptedWorkload(t, s)
	other, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	ev, err := s.Append(ctx, other.ID, UserText(secret(8)))
	require.NoError(t, err)
	rep, err := s.Rewrap(ctx)
	require.NoError(t, err)
	assert.Equal(t, RewrapReport{Current: 2}, rep)
	require.NoError(t, s.Close())

	s, _ = apiNewStore(t, remoteEncOpts(obj, both))
	rep, err = s.Rewrap(ctx)
	require.NoError(t, err)
	assert.Equal(t, RewrapReport{Rewrapped: 2}, rep)
	for _, session := range []uuid.UUID{id, other.ID} {
		assert.Equal(t, []string{"kek:b"}, keyObjectKEKs(t, obj.memObjects, session))
	}
	rep, err = s.Rewrap(ctx)
	require.NoError(t, err)
	assert.Equal(t, RewrapReport{Current: 2}, rep, "nothing left to do")
	require.NoError(t, s.Close())

	s, _ = apiNewStore(t, remoteEncOpts(obj, onlyB))
	checkEncryptedReads(t, s, id, all)
	got, err := s.Event(ctx, other.ID, ev.ID)
	require.NoError(t, err)
	assert.Equal(t, string(ev.Record), string(got.Record))
	require.NoError(t, s.Close())
}

// rewrapRaceObjects runs hook once, after the first GetTagged of a key
// object has read it: what another Store does between a Rewrap's read
// and its write.
type rewrapRaceObjects struct {
	*memObjects
	once sync.Once
	hook func()
}

func (r *rewrapRaceObjects) GetTagged(ctx context.Context, key string) ([]byte, string, error) {
	b, tag, err := r.memObjects.GetTagged(ctx, key)
	if strings.HasPrefix(key, seam.KeyPrefix) {
		r.once.Do(r.hook)
	}
	return b, tag, err
}

// TestRemoteRewrapBesideDelete: a Delete on another root destroys a key
// object between a Rewrap's read of it and its write: the Rewrap writes
// nothing (its conditional write fails, the object is gone when read
// again), so the deleted session's key is not brought back.
func TestRemoteRewrapBesideDelete(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	old, both, _ := rotationKeys(t)
	s, _ := apiNewStore(t, remoteEncOpts(obj, old))
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	_, err = s.Append(ctx, m.ID, UserText(secret(1)))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Equal(t, []string{"kek:a"}, keyObjectKEKs(t, obj, m.ID), "precondition")

	deleter, _ := apiNewStore(t, remoteEncOpts(obj, old))
	race := &rewrapRaceObjects{memObjects: obj, hook: func() {
		assert.NoError(t, deleter.Delete(ctx, m.ID))
	}}
	r, _ := apiNewStore(t, remoteEncOpts(race, both))
	rep, err := r.Rewrap(ctx)
	require.NoError(t, err)
	assert.Zero(t, rep.Rewrapped, "nothing rewrapped: the key object went")
	assert.Empty(t, rep.Skipped)
	assert.Nil(t, keyObjectKEKs(t, obj, m.ID), "the deleted session's key object stays destroyed")
	_, err = r.Load(ctx, m.ID)
	assert.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, r.Close())
	require.NoError(t, deleter.Close())
}

// untaggedObjects answers GetTagged without a tag.
type untaggedObjects struct{ *memObjects }

func (u untaggedObjects) GetTagged(ctx context.Context, key string) ([]byte, string, error) {
	b, _, err := u.memObjects.GetTagged(ctx, key)
	return b, "", err
}

// TestRemoteRewrapNoTag: an object store that gives no tag for a key
// object gets no write (an empty If-Match guards nothing): the session
// is reported skipped, and its key object is as it was.
func TestRemoteRewrapNoTag(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	old, both, _ := rotationKeys(t)
	s, _ := apiNewStore(t, remoteEncOpts(obj, old))
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	r, _ := apiNewStore(t, remoteEncOpts(untaggedObjects{obj}, both))
	rep, err := r.Rewrap(ctx)
	require.NoError(t, err)
	require.Len(t, rep.Skipped, 1)
	assert.Equal(t, m.ID, rep.Skipped[0].Session)
	assert.ErrorIs(t, rep.Skipped[0].Err, ErrRemote)
	assert.Equal(t, []string{"kek:a"}, keyObjectKEKs(t, obj, m.ID))
	require.NoError(t, r.Close())
}
