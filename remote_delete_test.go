package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// memRemoteStore opens a Store on obj whose local root is on a MemFS of
// its own (a machine of its own, fast), closed when the test ends.
func memRemoteStore(t *testing.T, obj *memObjects, edit ...func(*Options)) *Store {
	t.Helper()
	o := *remoteOpts(obj)
	o.LeaseTime = 200 * time.Millisecond // on obj's clock, which the tests move
	for _, e := range edit {
		e(&o)
	}
	s := openMem(t, vfs.NewMemFS(), o)
	t.Cleanup(func() { s.Close() })
	return s
}

// remoteDeleteSession creates a session on a Store of its own on obj,
// with events in a sealed chunk, an unsealed one and blobs, closes that
// Store and returns the session's id and events.
func remoteDeleteSession(t *testing.T, obj *memObjects) (uuid.UUID, []string) {
	t.Helper()
	ctx := context.Background()
	a := memRemoteStore(t, obj, func(o *Options) { o.ChunkSize = 4 << 10 })
	m, err := a.Create(ctx, Meta{Name: "doomed"})
	require.NoError(t, err)
	var want []string
	for i := range 12 {
		s := fmt.Sprintf("event %d %s", i, strings.Repeat("x", 400))
		if i%6 == 0 {
			s += strings.Repeat("blob", 5000) // over the tests' blob threshold
		}
		want = append(want, s)
		apiAppend(t, a, m.ID, textEv(s))
	}
	require.NoError(t, a.Close())
	require.NotEmpty(t, obj.keys(seam.SessionPrefix(m.ID)+"blobs/"), "the session has blobs")
	require.NotEmpty(t, obj.keys(seam.SessionPrefix(m.ID)+"chunks/"), "the session has a sealed chunk")
	return m.ID, want
}

// assertRemoteGone checks that s (and a fresh Store on obj) sees no
// session id, and that the object store keeps only delete markers of it.
func assertRemoteGone(t *testing.T, obj *memObjects, s *Store, id uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	fresh := memRemoteStore(t, obj)
	for name, st := range map[string]*Store{"deleting": s, "fresh": fresh} {
		_, err := st.Load(ctx, id)
		assert.ErrorIs(t, err, ErrNotFound, "%s: Load", name)
		_, err = st.Append(ctx, id, textEv("back?"))
		assert.ErrorIs(t, err, ErrNotFound, "%s: Append", name)
		_, err = st.Meta(ctx, id)
		assert.ErrorIs(t, err, ErrNotFound, "%s: Meta", name)
		list, err := st.List(ctx)
		require.NoError(t, err)
		for _, m := range list {
			assert.NotEqual(t, id, m.ID, "%s: List", name)
		}
		recent, err := st.ListRecent(ctx, 10)
		require.NoError(t, err)
		for _, m := range recent {
			assert.NotEqual(t, id, m.ID, "%s: ListRecent", name)
		}
	}
	assert.Empty(t, obj.keys(metaPrefix+id.String()+"/"), "metadata copies")
	marker, tomb := deleteMarker(), seam.Tombstone()
	for _, k := range obj.keys(seam.SessionPrefix(id)) {
		_, isLog := seam.ParseLogKey(seam.LogPrefix(id), k)
		assert.True(t, isLog, "only log objects stay: %s", k)
		b, err := obj.Get(ctx, k, 0, -1)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(marker, b) || bytes.Equal(tomb, b), "log object %s is a delete marker or a tombstone (no content)", k)
	}
	assert.NotEmpty(t, obj.keys(seam.LogPrefix(id)), "the log's numbers stay taken")
}

func TestRemoteDeleteSeenByEveryStore(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	id, want := remoteDeleteSession(t, obj)
	keep, err := func() (uuid.UUID, error) {
		s := memRemoteStore(t, obj)
		defer s.Close()
		m, err := s.Create(ctx, Meta{Name: "kept"})
		return m.ID, err
	}()
	require.NoError(t, err)

	b := memRemoteStore(t, obj)
	assert.Equal(t, want, loadTexts(t, b, id), "b holds a copy")
	list, err := b.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)

	a := memRemoteStore(t, obj)
	_, err = a.Meta(ctx, id)
	require.NoError(t, err)
	require.NoError(t, b.Close(), "b releases the session")
	b = memRemoteStore(t, obj)
	require.NoError(t, a.Delete(ctx, id))
	assertRemoteGone(t, obj, b, id)
	assertRemoteGone(t, obj, a, id)
	assert.Equal(t, []string(nil), loadTexts(t, a, keep), "the other session stays")

	require.NoError(t, a.Delete(ctx, id), "Delete is idempotent")
	require.NoError(t, b.Delete(ctx, id), "on any Store")
	require.NoError(t, a.Delete(ctx, uuid.Must(uuid.NewV7())), "an id never stored")
	_, err = a.Create(ctx, Meta{ID: id})
	assert.ErrorIs(t, err, ErrExists, "a deleted id's log numbers stay taken")
	assertRemoteGone(t, obj, a, id)
}

func TestRemoteDeleteRefusedWhileAnotherStoreHoldsIt(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a := memRemoteStore(t, obj)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("held"))

	b := memRemoteStore(t, obj)
	assert.ErrorIs(t, b.Delete(ctx, m.ID), ErrLocked, "a's lease is fresh")
	obj.advance(100 * time.Millisecond)
	assert.ErrorIs(t, b.Delete(ctx, m.ID), ErrLocked, "within the lease")
	apiAppend(t, a, m.ID, textEv("still a's"))
	assert.Equal(t, []string{"held", "still a's"}, loadTexts(t, a, m.ID))

	require.NoError(t, a.Close())
	require.NoError(t, b.Delete(ctx, m.ID), "released")
	assertRemoteGone(t, obj, b, m.ID)
}

func TestRemoteDeleteWaitsForTheLease(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a := memRemoteStore(t, obj)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("held"))
	b := memRemoteStore(t, obj, func(o *Options) { o.WaitForLock = true })
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	assert.ErrorIs(t, b.Delete(short, m.ID), context.DeadlineExceeded, "it waits while a holds the session")
	done := make(chan error, 1)
	go func() { done <- b.Delete(ctx, m.ID) }()
	require.NoError(t, a.Close())
	require.NoError(t, <-done)
	assertRemoteGone(t, obj, b, m.ID)
}

// TestRemoteDeleteFencesZombie: a Store whose lease expired and whose
// session another Store deleted acknowledges nothing more, and nothing it
// does brings the session back.
func TestRemoteDeleteFencesZombie(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a := memRemoteStore(t, obj)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("a0"))

	b := memRemoteStore(t, obj)
	stall(t, a, m.ID)
	obj.advance(time.Second) // past a's lease
	require.NoError(t, b.Delete(ctx, m.ID))

	_, err = a.Append(ctx, m.ID, textEv("zombie"))
	assert.ErrorIs(t, err, ErrFenced)
	_, err = a.Append(ctx, m.ID, textEv("zombie again"))
	assert.ErrorIs(t, err, ErrNotFound, "the next call opens again and finds it deleted")
	_, err = a.UpdateMeta(ctx, m.ID, func(m *Meta) { m.Name = "zombie" })
	assert.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, a.Close())
	assertRemoteGone(t, obj, b, m.ID)
}

// TestRemoteDeleteFaults makes each object store call of a Delete fail in
// turn: alone (before or after it is applied), or with every later call
// (a crash there). After each, a fresh Store finds the session whole or
// gone, never damaged, and a retried Delete completes. By default the
// modes after the first try the first calls (up to the delete marker and
// just past it) and every third one after;
// SESSIONSTORE_REMOTE_DELETE_FAULTS=all tries every call in every mode.
func TestRemoteDeleteFaults(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	ctx := context.Background()
	every := testSize(t, "SESSIONSTORE_REMOTE_DELETE_FAULTS", 3, 1)
	for i, mode := range []string{"fails", "lost answer", "crash"} {
		t.Run(mode, func(t *testing.T) {
			outcomes := map[string]int{}
			for k := 0; ; k++ {
				if i > 0 && k > 8 && k%every != 0 {
					continue
				}
				obj := newMemObjects()
				id, want := remoteDeleteSession(t, obj)
				d := memRemoteStore(t, obj)
				calls := 0
				injected := errors.New("injected fault")
				obj.mu.Lock()
				obj.fail = func(op, key string) (error, bool) {
					calls++
					switch {
					case calls-1 == k:
						return injected, mode == "lost answer"
					case calls-1 > k && mode == "crash":
						return injected, false
					}
					return nil, false
				}
				obj.mu.Unlock()
				err := d.Delete(ctx, id)
				obj.mu.Lock()
				obj.fail = nil
				n := calls
				obj.mu.Unlock()
				if n <= k {
					require.NoError(t, err, "no fault injected")
					assertRemoteGone(t, obj, d, id)
					break
				}

				fresh := memRemoteStore(t, obj)
				evs, lerr := fresh.Load(ctx, id)
				_, merr := fresh.Meta(ctx, id)
				switch {
				case lerr == nil:
					assert.Len(t, evs, len(want), "call %d: whole", k)
					assert.Equal(t, want, loadTexts(t, fresh, id), "call %d: whole", k)
					assert.NoError(t, merr, "call %d: Meta agrees with Load", k)
					outcomes["whole"]++
				case errors.Is(lerr, ErrNotFound):
					assert.ErrorIs(t, merr, ErrNotFound, "call %d: Meta agrees with Load", k)
					outcomes["gone"]++
				default:
					t.Fatalf("call %d (err %v): neither whole nor gone: %v", k, err, lerr)
				}
				require.NoError(t, fresh.Close())
				require.NoError(t, d.Delete(ctx, id), "call %d: the retry completes", k)
				assertRemoteGone(t, obj, d, id)
				require.NoError(t, d.Close())
			}
			t.Logf("%s: %v", mode, outcomes)
			assert.Positive(t, outcomes["whole"], "some faults come before the delete marker")
			assert.Positive(t, outcomes["gone"], "some come after it")
		})
	}
}

func TestRemotePrune(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a := memRemoteStore(t, obj)
	var ids []uuid.UUID
	for i := range 3 {
		m, err := a.Create(ctx, Meta{Name: fmt.Sprintf("s%d", i)})
		require.NoError(t, err)
		apiAppend(t, a, m.ID, textEv("e"))
		ids = append(ids, m.ID)
	}
	require.NoError(t, a.Close())
	b := memRemoteStore(t, obj)
	policy := PrunePolicy{KeepRecent: -1, KeepNewest: 1, DryRun: true}
	dry, err := b.Prune(ctx, policy)
	require.NoError(t, err)
	require.Len(t, dry.Removed, 2)
	list, err := b.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 3, "a dry run removes nothing")

	policy.DryRun = false
	res, err := b.Prune(ctx, policy)
	require.NoError(t, err)
	require.Len(t, res.Removed, 2)
	for i := range res.Removed {
		assert.Equal(t, dry.Removed[i].Meta.ID, res.Removed[i].Meta.ID, "the dry run said what the run removes")
		assertRemoteGone(t, obj, b, res.Removed[i].Meta.ID)
	}
	list, err = b.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, ids[2], list[0].ID, "the newest stays")
	assert.Equal(t, []string{"e"}, loadTexts(t, b, ids[2]))
}

// deleteNow does in m what a Delete of session id does (remote_delete.go:
// the delete marker as the log's next object, every older log object
// replaced by it, the metadata copies gone), with m.mu held: from a fault
// hook, to put a Delete between two calls of another Store.
func (m *memObjects) deleteNow(id uuid.UUID) {
	lp := seam.LogPrefix(id)
	var newest uint64
	for k := range m.objs {
		if seq, ok := seam.ParseLogKey(lp, k); ok && seq > newest {
			newest = seq
		}
	}
	marker := deleteMarker()
	m.objs[seam.LogKey(id, newest+1)] = memObject{data: marker, mod: m.clock}
	for k := range m.objs {
		switch {
		case strings.HasPrefix(k, lp):
			m.objs[k] = memObject{data: marker, mod: m.clock}
		case strings.HasPrefix(k, metaPrefix+id.String()+"/"):
			delete(m.objs, k)
		}
	}
}

// TestOpenRacingRemoteDelete: a Store that read a session's log just
// before another Store deleted it, and fetches the log's data objects
// after the Delete replaced them by its marker, reports the session gone
// (ErrNotFound), whether it opens the session or reads it as a fork's
// prefix: not a *CorruptionError for objects that are delete markers.
func TestOpenRacingRemoteDelete(t *testing.T) {
	ctx := context.Background()
	for _, op := range []string{"Load", "Fork"} {
		t.Run(op, func(t *testing.T) {
			obj := newMemObjects()
			a := memRemoteStore(t, obj)
			m, err := a.Create(ctx, Meta{Name: "deleted while read"})
			require.NoError(t, err)
			evs := []Event{apiAppend(t, a, m.ID, textEv("one")), apiAppend(t, a, m.ID, textEv("two"))}
			require.NoError(t, a.Close())
			lp := seam.LogPrefix(m.ID)
			newest := obj.keys(lp)[0] // the newest object sorts first
			deleted := false
			obj.fail = func(op, key string) (error, bool) {
				// The open reads the newest object (the release marker,
				// with the log's state), then the data objects it names.
				if op == "get" && strings.HasPrefix(key, lp) && key != newest && !deleted {
					obj.deleteNow(m.ID)
					deleted = true
				}
				return nil, false
			}
			b := memRemoteStore(t, obj)
			if op == "Load" {
				_, err = b.Load(ctx, m.ID)
			} else {
				_, err = b.Fork(ctx, m.ID, evs[1].ID)
			}
			require.True(t, deleted, "precondition: the Delete came between the reads")
			assert.ErrorIs(t, err, ErrNotFound)
			var ce *CorruptionError
			assert.False(t, errors.As(err, &ce), "no damage: %v", err)
		})
	}
}
