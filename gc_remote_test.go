package sessionstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// gcFixture is a remote session with split blobs (sharing one string)
// and inline events, and objects no event or seal record needs: an
// orphan blob and a sealed chunk no seal record names, both older than
// the lease, and a young orphan blob.
type gcFixture struct {
	obj     *memObjects
	opts    *Options
	s       *Store
	id      uuid.UUID
	want    []string // the records, in order
	orphans []string // the keys GC removes
	young   string   // an orphan younger than LeaseTime: kept
}

func newGCFixture(t *testing.T) *gcFixture {
	ctx := context.Background()
	f := &gcFixture{obj: newMemObjects()}
	f.opts = remoteOpts(f.obj)
	f.opts.StringThreshold = 1000
	f.opts.ChunkSize = 4 << 10
	s, _ := apiNewStore(t, f.opts)
	f.s = s
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	f.id = m.ID
	shot := strings.Repeat("iVBORw0KGgoAAAANSUhEUgAA", 100)
	for i := range 40 {
		rec := fmt.Sprintf(`{"text":"turn %d of a conversation long enough to fill a chunk"}`, i)
		if i%8 == 0 {
			rec = fmt.Sprintf(`{"text":"turn %d","image":%q}`, i, shot)
		}
		apiAppend(t, s, f.id, Event{Kind: KindCustom, Record: json.RawMessage(rec)})
		f.want = append(f.want, rec)
	}
	require.NoError(t, s.Flush(ctx, f.id))
	require.NotEmpty(t, f.obj.keys(seam.SessionPrefix(f.id)+"chunks/"), "a chunk was sealed")
	orphan := sha256.Sum256([]byte("an orphan"))
	f.orphans = []string{seam.BlobKey(f.id, orphan), seam.SealedKey(f.id, 0, uuid.New())}
	for _, k := range f.orphans {
		require.NoError(t, f.obj.Put(ctx, k, []byte("left by a failure")))
	}
	f.obj.advance(2 * f.opts.LeaseTime)
	// The holder writes again: its lease is fresh (GC collects only under
	// a lease written or renewed within half of it).
	last := `{"text":"after a while"}`
	apiAppend(t, s, f.id, Event{Kind: KindCustom, Record: json.RawMessage(last)})
	f.want = append(f.want, last)
	young := sha256.Sum256([]byte("young"))
	f.young = seam.BlobKey(f.id, young)
	require.NoError(t, f.obj.Put(ctx, f.young, []byte("in flight, maybe")))
	return f
}

// check requires that a Store restoring the session from the object
// store alone reads every record.
func (f *gcFixture) check(t *testing.T, what string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, f.s.CloseSession(ctx, f.id))
	r, _ := apiNewStore(t, f.opts)
	evs, err := r.Load(ctx, f.id)
	require.NoError(t, err, what)
	var got []string
	for _, ev := range evs {
		ev, err = r.Resolve(ctx, f.id, ev)
		require.NoError(t, err, what)
		got = append(got, string(ev.Record))
	}
	assert.Equal(t, f.want, got, what)
	require.NoError(t, r.Close())
}

// TestRemoteGC: GC of a session kept in an object store removes the blob
// and sealed chunk objects nothing needs once they are older than the
// lease, keeps every blob, string and sealed chunk the session's events
// and seal records name, and a younger orphan; a dry run reports the
// same and removes nothing; a restore elsewhere then reads every event.
func TestRemoteGC(t *testing.T) {
	ctx := context.Background()
	f := newGCFixture(t)
	before := f.obj.keys(seam.SessionPrefix(f.id))
	dry, err := f.s.GCWith(ctx, f.id, GCOptions{DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, 2, dry.Objects)
	assert.Positive(t, dry.ObjectBytes)
	after := f.obj.keys(seam.SessionPrefix(f.id))
	assert.Subset(t, after, before, "a dry run removes nothing")

	rep, err := f.s.GC(ctx, f.id)
	require.NoError(t, err)
	assert.Equal(t, dry.Objects, rep.Objects, "the dry run said what GC removes")
	assert.Equal(t, dry.ObjectBytes, rep.ObjectBytes)
	left := f.obj.keys(seam.SessionPrefix(f.id))
	for _, k := range f.orphans {
		assert.NotContains(t, left, k)
	}
	assert.Contains(t, left, f.young, "an orphan younger than the lease stays")
	f.check(t, "after GC")

	again, err := f.s.GC(ctx, f.id)
	require.NoError(t, err)
	assert.Zero(t, again.Objects, "nothing more to remove")
}

// TestRemoteGCFaults: a failure at any object store call of a GC (the
// call not made, or made and its answer lost) removes no object an event
// needs, and a GC after it removes the rest.
func TestRemoteGCFaults(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("injected")
	for k := 1; ; k++ {
		for _, after := range []bool{false, true} {
			f := newGCFixture(t)
			n := 0
			f.obj.mu.Lock()
			f.obj.fail = func(op, key string) (error, bool) {
				if n++; n == k {
					return boom, after
				}
				return nil, false
			}
			f.obj.mu.Unlock()
			_, err := f.s.GC(ctx, f.id)
			f.obj.mu.Lock()
			fired := n >= k
			f.obj.fail = nil
			f.obj.mu.Unlock()
			if !fired {
				require.NoError(t, err)
				require.Greater(t, k, 3, "the faults reached the calls of GC")
				return
			}
			f.check(t, fmt.Sprintf("fault at call %d (applied %v): %v", k, after, err))
			s2, _ := apiNewStore(t, f.opts)
			_, err = s2.GC(ctx, f.id)
			require.NoError(t, err)
			left := f.obj.keys(seam.SessionPrefix(f.id))
			for _, key := range f.orphans {
				assert.NotContains(t, left, key, "call %d: a later GC finishes", k)
			}
			require.NoError(t, s2.Close())
		}
	}
}

// TestRemoteGCFenced: a Store whose session another Store took over
// removes nothing from the object store: its GC is ErrFenced; and one
// whose lease was not written or renewed for half of it (its renewals
// failed, say) removes nothing either: ErrLocked.
func TestRemoteGCFenced(t *testing.T) {
	ctx := context.Background()
	f := newGCFixture(t)
	f.obj.advance(f.opts.LeaseTime / 2)
	_, err := f.s.GC(ctx, f.id)
	require.ErrorIs(t, err, ErrLocked, "a lease idle for half of it")
	for _, k := range f.orphans {
		assert.Contains(t, f.obj.keys(seam.SessionPrefix(f.id)), k)
	}
	f.obj.advance(2 * f.opts.LeaseTime)
	b, _ := apiNewStore(t, f.opts)
	_, err = b.Load(ctx, f.id) // takes the session over
	require.NoError(t, err)
	_, err = f.s.GC(ctx, f.id)
	require.ErrorIs(t, err, ErrFenced)
	left := f.obj.keys(seam.SessionPrefix(f.id))
	for _, k := range f.orphans {
		assert.Contains(t, left, k, "the zombie removed nothing")
	}
	assert.ErrorIs(t, f.s.Close(), ErrFenced, "the zombie's Close finds it lost the session")
	_, err = b.GC(ctx, f.id)
	require.NoError(t, err, "the holder collects")
	left = f.obj.keys(seam.SessionPrefix(f.id))
	for _, k := range f.orphans {
		assert.NotContains(t, left, k)
	}
}

// TestRemoteGCStore: GCStore collects each session's objects as GC does;
// its dry run removes nothing and reports the same.
func TestRemoteGCStore(t *testing.T) {
	ctx := context.Background()
	f := newGCFixture(t)
	dry, err := f.s.GCStoreWith(ctx, GCOptions{DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, 2, dry.Objects)
	for _, k := range f.orphans {
		assert.Contains(t, f.obj.keys(seam.SessionPrefix(f.id)), k, "a dry run removes nothing")
	}
	rep, err := f.s.GCStore(ctx)
	require.NoError(t, err)
	assert.Equal(t, dry.Objects, rep.Objects)
	for _, k := range f.orphans {
		assert.NotContains(t, f.obj.keys(seam.SessionPrefix(f.id)), k)
	}
	f.check(t, "after GCStore")
}

// TestRemoteGCKeepsTheObjectsStrings: a kept blob whose object is split
// while the local file is not (a Store with another StringThreshold
// stored the object first, and this one's upload reused it): GC keeps
// the strings the object names, read from its table, not the local file.
func TestRemoteGCKeepsTheObjectsStrings(t *testing.T) {
	ctx := context.Background()
	f := newGCFixture(t)
	evs, err := f.s.Load(ctx, f.id)
	require.NoError(t, err)
	dir := apiSessionDir(f.s.dir, f.id)
	n := 0
	for _, ev := range evs { // every split blob's local file plain: they share one string
		if ev.Digest == "" {
			continue
		}
		d, err := parseDigest(ev.Digest)
		require.NoError(t, err)
		require.NoError(t, os.Remove(blobPath(dir, d)))
		require.NoError(t, blob.Put(vfs.Default, dir, d, ev.Record, 0o600, 0o700, &blob.Dirs{}), "the local file, plain")
		refs, err := blob.FileRefs(vfs.Default, dir, d)
		require.NoError(t, err)
		require.Empty(t, refs, "the local file is not split")
		n++
	}
	require.Positive(t, n)
	_, err = f.s.GC(ctx, f.id)
	require.NoError(t, err)
	f.check(t, "after GC")
}
