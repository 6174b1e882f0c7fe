package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// TestReviewForkReadsIntentAfterDeleteRemovedIt: a Fork registers and
// reads the parent's metadata (live) before a Delete on another root
// commits; the Delete's step 4 then removes the intent (and the
// registration) with the session's other objects, and the Fork's read of
// the intent, last, finds none: both succeed, and the fork outlives its
// parent.
func TestReviewForkReadsIntentAfterDeleteRemovedIt(t *testing.T) {
	ctx := context.Background()
	obj, pa, a, _, parent, at := crossRoots(t)
	pc := &pausingObjects{ObjectStore: obj}
	c, _ := apiNewStore(t, remoteOpts(pc))

	// c's Delete: intent created, forks listed (none), held at its
	// readView before the marker.
	pc.arm("list", seam.LogPrefix(parent))
	deleted := make(chan error, 1)
	go func() { deleted <- c.Delete(ctx, parent) }()
	pc.reach(t)

	// a's Fork: registered, parent's metadata read (live), held before
	// its read of the intent.
	pa.arm("get", "/deleting")
	type res struct {
		m   Meta
		err error
	}
	forked := make(chan res, 1)
	go func() { m, err := a.Fork(ctx, parent, at); forked <- res{m, err} }()
	pa.reach(t)

	close(pc.goOn) // the Delete commits and removes the session's objects
	derr := <-deleted
	close(pa.goOn) // the Fork reads the intent: gone with the objects
	f := <-forked

	if derr == nil && f.err == nil {
		_, merr := d0(t, obj).Meta(ctx, parent)
		require.NoError(t, a.CloseSession(ctx, f.m.ID))
		_, lerr := d0(t, obj).Load(ctx, f.m.ID)
		t.Fatalf("both the Delete of the parent and the Fork succeeded; parent's Meta: %v; the fork restored elsewhere: %v", merr, lerr)
	}
}

func d0(t *testing.T, obj *memObjects) *Store {
	s, _ := apiNewStore(t, remoteOpts(obj))
	return s
}

// TestReviewFreshIntentTrustsAnotherDeletesIntent: a Delete X (root a)
// that waited past the lease before its marker finds, in freshIntent, a
// young intent, but another root's: that of a second Delete Y (root c),
// which took X's intent for a crashed one's and has not listed the forks
// yet. X does not look for forks again, and misses the fork Z that root
// b made while X's intent looked expired (after Y's List, before Y's
// intent).
func TestReviewFreshIntentTrustsAnotherDeletesIntent(t *testing.T) {
	ctx := context.Background()
	obj, pa, a, b, parent, at := crossRoots(t)
	pc := &pausingObjects{ObjectStore: obj}
	c, _ := apiNewStore(t, remoteOpts(pc))

	// X (a): intent, forks listed (none), held before its marker.
	pa.arm("list", seam.LogPrefix(parent))
	x := make(chan error, 1)
	go func() { x <- a.Delete(ctx, parent) }()
	pa.reach(t)
	obj.advance(2 * time.Minute) // X's intent now looks like a crashed Delete's

	// Y (c): its List shows no fork; held as it replaces X's old intent.
	pc.arm("put", "/deleting")
	y := make(chan error, 1)
	go func() { y <- c.Delete(ctx, parent) }()
	pc.reach(t)

	// Z (b): a Fork, which takes X's intent for a crashed one's.
	fork, err := b.Fork(ctx, parent, at)
	require.NoError(t, err, "X's intent is older than the lease")

	// Y writes its intent, and is held before it lists the forks.
	first := pc.goOn
	pc.arm("list", "/forks/")
	close(first)
	pc.reach(t)

	close(pa.goOn) // X: freshIntent finds a young intent (Y's) and goes on
	xerr := <-x
	close(pc.goOn)
	yerr := <-y
	t.Logf("X: %v; Y: %v", xerr, yerr)
	require.ErrorIs(t, xerr, ErrHasForks, "fork %s of the parent exists", fork.ID)
}

// afterListObjects runs hook once, right after the first List of prefix
// returned.
type afterListObjects struct {
	ObjectStore
	prefix string
	once   sync.Once
	hook   func()
}

func (o *afterListObjects) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	infos, err := o.ObjectStore.List(ctx, prefix, limit)
	if prefix == o.prefix {
		o.once.Do(o.hook)
	}
	return infos, err
}

// TestReviewListPageRemoteSkipsUpdatedSession: a session that exists and
// matches the query throughout must appear on a page (ListPage's cursor
// guarantee); one whose metadata copy another Store replaced (an
// UpdateMeta) between ListPage's listing of the copies' keys and its read
// of the old copy is silently skipped: the old copy is not found, and
// listPageRemote takes that for "replaced" without reading the new one.
func TestReviewListPageRemoteSkipsUpdatedSession(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	w, _ := apiNewStore(t, remoteOpts(obj))
	var ids []uuid.UUID
	for i := range 3 {
		m, err := w.Create(ctx, Meta{Name: fmt.Sprint("s", i)})
		require.NoError(t, err)
		ids = append(ids, m.ID)
	}
	target := ids[1]
	ao := &afterListObjects{ObjectStore: obj, prefix: metaPrefix}
	ao.hook = func() {
		_, err := w.UpdateMeta(ctx, target, func(m *Meta) { m.Name = "renamed" })
		require.NoError(t, err)
	}
	r, _ := apiNewStore(t, remoteOpts(ao))
	page, next, err := r.ListPage(ctx, Query{}, "")
	require.NoError(t, err)
	assert.Empty(t, next)
	var got []uuid.UUID
	for _, m := range page {
		got = append(got, m.ID)
	}
	assert.Contains(t, got, target, "a session that exists and matches throughout is on the page")
	assert.Len(t, got, 3)
}

// TestReviewFailedDeleteLeavesIntent: remote_forks.go says "one that
// failed removes its intent"; a Delete whose intent Create was applied
// but answered with an error returns that error and leaves its intent,
// so Forks of the parent on other roots fail with ErrLocked for
// LeaseTime although no Delete is under way.
func TestReviewFailedDeleteLeavesIntent(t *testing.T) {
	ctx := context.Background()
	obj, _, a, b, parent, at := crossRoots(t)
	obj.mu.Lock()
	obj.fail = func(op, key string) (error, bool) {
		if op == "create" && key == deleteIntentKey(parent) {
			return errors.New("injected: answer lost"), true
		}
		return nil, false
	}
	obj.mu.Unlock()
	err := a.Delete(ctx, parent)
	require.Error(t, err)
	obj.mu.Lock()
	obj.fail = nil
	obj.mu.Unlock()
	assert.Empty(t, obj.keys(deleteIntentKey(parent)), "the failed Delete's intent stays")
	_, err = b.Fork(ctx, parent, at)
	require.NoError(t, err, "no Delete is under way")
}
