package sessionstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// pausingObjects holds a call on its way to the object store: before
// the first call op of a key with suffix suffix, it signals reached and
// waits for go on.
type pausingObjects struct {
	ObjectStore
	mu      sync.Mutex
	op      string
	suffix  string
	reached chan struct{}
	goOn    chan struct{}
}

func (p *pausingObjects) arm(op, suffix string) {
	p.mu.Lock()
	p.op, p.suffix, p.reached, p.goOn = op, suffix, make(chan struct{}), make(chan struct{})
	p.mu.Unlock()
}

func (p *pausingObjects) pause(op, key string) {
	p.mu.Lock()
	hit := p.op == op && p.suffix != "" && strings.HasSuffix(key, p.suffix)
	var reached, goOn chan struct{}
	if hit {
		p.op, reached, goOn = "", p.reached, p.goOn
	}
	p.mu.Unlock()
	if hit {
		close(reached)
		<-goOn
	}
}

func (p *pausingObjects) Put(ctx context.Context, key string, data []byte) error {
	p.pause("put", key)
	return p.ObjectStore.Put(ctx, key, data)
}

func (p *pausingObjects) Create(ctx context.Context, key string, data []byte) error {
	p.pause("create", key)
	return p.ObjectStore.Create(ctx, key, data)
}

func (p *pausingObjects) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p.pause("get", key)
	return p.ObjectStore.Get(ctx, key, off, n)
}

func (p *pausingObjects) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	p.pause("stat", key)
	return p.ObjectStore.Stat(ctx, key)
}

func (p *pausingObjects) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	p.pause("list", prefix)
	return p.ObjectStore.List(ctx, prefix, limit)
}

// crossRoots makes a session with two events in the object store, and
// two Stores on roots of their own (two machines), a with its calls
// paused where a test arms it.
func crossRoots(t *testing.T) (obj *memObjects, pa *pausingObjects, a, b *Store, parent uuid.UUID, at uuid.UUID) {
	ctx := context.Background()
	obj = newMemObjects()
	pa = &pausingObjects{ObjectStore: obj}
	a, _ = apiNewStore(t, remoteOpts(pa))
	b, _ = apiNewStore(t, remoteOpts(obj))
	m, err := b.Create(ctx, Meta{Name: "parent"})
	require.NoError(t, err)
	apiAppend(t, b, m.ID, textEv("one"))
	ev := apiAppend(t, b, m.ID, textEv("two"))
	require.NoError(t, b.CloseSession(ctx, m.ID))
	return obj, pa, a, b, m.ID, ev.ID
}

// TestRemoteForkBeforeDeleteAcrossRoots: a Fork on one root registered
// in the object store before a Delete of its parent on another root
// looked for forks: the Delete refuses (ErrHasForks), and the fork
// reads its parent.
func TestRemoteForkBeforeDeleteAcrossRoots(t *testing.T) {
	ctx := context.Background()
	_, pa, a, b, parent, at := crossRoots(t)
	pa.arm("get", "/deleting") // the Fork, registered, about to read the parent's intent
	forked := make(chan error, 1)
	var fork Meta
	go func() {
		var err error
		fork, err = a.Fork(ctx, parent, at)
		forked <- err
	}()
	pa.reach(t)
	err := b.Delete(ctx, parent)
	assert.ErrorIs(t, err, ErrHasForks, "the registration is there")
	close(pa.goOn)
	require.NoError(t, <-forked)
	assert.Equal(t, []string{"one", "two"}, loadTexts(t, a, fork.ID))
	require.NoError(t, a.CloseSession(ctx, fork.ID))
	c, _ := apiNewStore(t, remoteOpts(pa.ObjectStore))
	assert.Equal(t, []string{"one", "two"}, loadTexts(t, c, fork.ID), "the fork, restored elsewhere")
}

// reach waits for p to hold its call, failing the test after a while.
func (p *pausingObjects) reach(t *testing.T) {
	t.Helper()
	select {
	case <-p.reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the call to hold was not made")
	}
}

// TestRemoteForkBetweenDeleteChecksAcrossRoots: a Fork on another root
// made after a Delete's List (which names no fork yet) and before its
// intent: the registration is what the Delete finds.
func TestRemoteForkBetweenDeleteChecksAcrossRoots(t *testing.T) {
	ctx := context.Background()
	_, pa, a, b, parent, at := crossRoots(t)
	pa.arm("create", "/deleting") // a's Delete, after its List, about to write its intent
	deleted := make(chan error, 1)
	go func() { deleted <- a.Delete(ctx, parent) }()
	pa.reach(t)
	fork, err := b.Fork(ctx, parent, at)
	require.NoError(t, err, "no intent yet")
	close(pa.goOn)
	assert.ErrorIs(t, <-deleted, ErrHasForks)
	assert.Equal(t, []string{"one", "two"}, loadTexts(t, b, fork.ID))
}

// TestRemoteDeleteBeforeForkAcrossRoots: a Delete on one root whose
// intent is in the object store before a Fork on another root reads
// it: the Fork fails (ErrLocked) and leaves no fork; the Delete goes
// on; a Fork after it finds the parent gone.
func TestRemoteDeleteBeforeForkAcrossRoots(t *testing.T) {
	ctx := context.Background()
	obj, pa, a, b, parent, at := crossRoots(t)
	pa.arm("list", "/forks/") // a's Delete, its intent created, about to list the forks
	deleted := make(chan error, 1)
	go func() { deleted <- a.Delete(ctx, parent) }()
	pa.reach(t)
	_, err := b.Fork(ctx, parent, at)
	assert.ErrorIs(t, err, ErrLocked, "a Delete of the parent is under way")
	list, err := b.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 1, "no fork is left: only the parent")
	close(pa.goOn)
	require.NoError(t, <-deleted)
	_, err = b.Fork(ctx, parent, at)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Empty(t, obj.keys(seam.SessionPrefix(parent)+"forks/"), "no registration stays")
	assert.Empty(t, obj.keys(deleteIntentKey(parent)), "no intent stays")
}

// TestRemoteDeleteIntentExpires: a Delete that crashed after its intent
// keeps forks off (ErrLocked) for LeaseTime; then a Fork succeeds, and
// a Delete on another root refuses it. A Delete that waited past half
// the lease before its marker writes its intent again and looks for
// forks again, so a Fork that took its intent for a crashed one's is
// seen.
func TestRemoteDeleteIntentExpires(t *testing.T) {
	ctx := context.Background()
	obj, _, a, b, parent, at := crossRoots(t)
	require.NoError(t, obj.Put(ctx, deleteIntentKey(parent), []byte(uuid.NewString()))) // another root's Delete, crashed
	_, err := a.Fork(ctx, parent, at)
	assert.ErrorIs(t, err, ErrLocked)
	obj.advance(2 * time.Minute)
	fork, err := a.Fork(ctx, parent, at)
	require.NoError(t, err, "the crashed Delete's intent expired")
	assert.ErrorIs(t, b.Delete(ctx, parent), ErrHasForks)
	require.NoError(t, a.Delete(ctx, fork.ID))

	// A Delete held before its marker (its intent and its look at the
	// forks done), long enough for a Fork to take its intent for a
	// crashed one's.
	c := &pausingObjects{ObjectStore: obj}
	cs, _ := apiNewStore(t, remoteOpts(c))
	c.arm("list", seam.LogPrefix(parent)) // its readView before the marker
	deleted := make(chan error, 1)
	go func() { deleted <- cs.Delete(ctx, parent) }()
	c.reach(t)
	obj.advance(2 * time.Minute)
	late, err := a.Fork(ctx, parent, at)
	require.NoError(t, err, "the held Delete's intent looks expired")
	close(c.goOn)
	assert.ErrorIs(t, <-deleted, ErrHasForks, "the Delete wrote its intent again and found the fork")
	assert.Equal(t, []string{"one", "two"}, loadTexts(t, a, late.ID))
}
