package sessionstore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// readOnlyObjects is the object store as a follower sees it: every call
// passes through, and a write (Create, Put, Delete) is counted.
type readOnlyObjects struct {
	ObjectStore
	mu     sync.Mutex
	writes []string
	lists  int
	gets   int
	other  int // gets of objects not in a log (sealed chunks, blobs)
}

func (o *readOnlyObjects) wrote(op, key string) {
	o.mu.Lock()
	o.writes = append(o.writes, op+" "+key)
	o.mu.Unlock()
}

func (o *readOnlyObjects) Create(ctx context.Context, key string, data []byte) error {
	o.wrote("create", key)
	return o.ObjectStore.Create(ctx, key, data)
}

func (o *readOnlyObjects) Put(ctx context.Context, key string, data []byte) error {
	o.wrote("put", key)
	return o.ObjectStore.Put(ctx, key, data)
}

func (o *readOnlyObjects) Delete(ctx context.Context, key string) error {
	o.wrote("delete", key)
	return o.ObjectStore.Delete(ctx, key)
}

func (o *readOnlyObjects) List(ctx context.Context, prefix string, limit int) ([]ObjectInfo, error) {
	o.mu.Lock()
	o.lists++
	o.mu.Unlock()
	return o.ObjectStore.List(ctx, prefix, limit)
}

func (o *readOnlyObjects) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	o.mu.Lock()
	o.gets++
	if !strings.Contains(key, "/log/") {
		o.other++
	}
	o.mu.Unlock()
	return o.ObjectStore.Get(ctx, key, off, n)
}

func (o *readOnlyObjects) counts() (lists, gets int, writes []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lists, o.gets, append([]string(nil), o.writes...)
}

// followerOpts are the options of a follower of obj.
func followerOpts(obj ObjectStore) (*Options, *readOnlyObjects) {
	ro := &readOnlyObjects{ObjectStore: obj}
	o := remoteOpts(ro)
	o.ReadOnly = true
	return o, ro
}

// TestFollowerSeesAppends: a follower (a read-only Store with a Remote,
// in a directory of its own) reads a session another Store holds and
// appends to: each call sees every event appended before it, across
// chunk seals, a handoff to a third Store and a release; it refuses
// writes with ErrReadOnly, and it never writes to the object store.
func TestFollowerSeesAppends(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	wopts := remoteOpts(obj)
	wopts.ChunkSize = 4 << 10
	a, _ := apiNewStore(t, wopts)
	m, err := a.Create(ctx, Meta{Name: "followed"})
	require.NoError(t, err)

	fopts, ro := followerOpts(obj)
	f, fdir := apiNewStore(t, fopts)
	var want []string
	appendSome := func(s *Store, n int) {
		for range n {
			text := fmt.Sprintf("event %d %s", len(want), string(make([]byte, 0)))
			apiAppend(t, s, m.ID, textEv(text))
			want = append(want, text)
		}
	}
	check := func(what string) {
		t.Helper()
		assert.Equal(t, want, loadTexts(t, f, m.ID), what)
		head, err := f.Head(ctx, m.ID)
		require.NoError(t, err)
		evs, err := a.Load(ctx, m.ID)
		if err == nil && len(evs) > 0 {
			assert.Equal(t, evs[len(evs)-1].ID, head, what+": HEAD")
		}
	}

	check("no event yet")
	appendSome(a, 3)
	check("three events")
	appendSome(a, 200) // several chunks sealed
	check("after seals")

	_, err = f.Append(ctx, m.ID, textEv("refused"))
	assert.ErrorIs(t, err, ErrReadOnly)

	// A handoff: a closes (a release marker), b opens and appends.
	require.NoError(t, a.Close())
	check("after the release")
	b, _ := apiNewStore(t, wopts)
	appendSome(b, 5)
	a = b
	check("after a handoff")
	appendSome(b, 40)
	check("after more appends")

	_, _, writes := ro.counts()
	assert.Empty(t, writes, "a follower writes nothing to the object store")

	// Closed and opened again, the follower trusts its cache: it reads
	// only what the log gained (a chunk sealed since its last look is
	// downloaded: the cache holds it plain).
	require.NoError(t, b.Flush(ctx, m.ID)) // the full chunks sealed now
	check("after a flush")
	sealed := func() int { return len(obj.keys(seam.SessionPrefix(m.ID) + "chunks/")) }
	before := sealed()
	require.NoError(t, f.Close())
	appendSome(b, 2)
	require.NoError(t, b.Flush(ctx, m.ID))
	f2o, ro2 := followerOpts(obj)
	f2 := apiOpen(t, fdir, f2o)
	f = f2
	check("a follower opened again")
	_, _, writes = ro2.counts()
	assert.Empty(t, writes)
	assert.LessOrEqual(t, ro2.other, sealed()-before, "the reopened follower downloads no sealed chunk its cache holds")
}

// TestFollowerPaysForWhatIsNew: a follower's look at a session another
// Store holds costs one listing and a read of each object created since
// its last look, however many objects the holder created before.
func TestFollowerPaysForWhatIsNew(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	for i := range 300 {
		apiAppend(t, a, m.ID, textEv(fmt.Sprint(i)))
	}
	fopts, ro := followerOpts(obj)
	f, _ := apiNewStore(t, fopts)
	_, err = f.Head(ctx, m.ID)
	require.NoError(t, err)
	for round := range 5 {
		lists0, gets0, _ := ro.counts()
		for i := range 3 {
			apiAppend(t, a, m.ID, textEv(fmt.Sprint(round, i)))
		}
		evs, err := f.Load(ctx, m.ID)
		require.NoError(t, err)
		assert.Len(t, evs, 300+3*(round+1))
		lists, gets, _ := ro.counts()
		assert.LessOrEqual(t, lists-lists0, 2, "round %d: listings", round)
		assert.LessOrEqual(t, gets-gets0, 3, "round %d: a read of each new object", round)
	}
}

// TestFollowerDeletedSession: a session deleted on the object store is
// ErrNotFound for a follower that had it open, and for one that had not.
func TestFollowerDeletedSession(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("one"))
	fopts, _ := followerOpts(obj)
	f, _ := apiNewStore(t, fopts)
	assert.Equal(t, []string{"one"}, loadTexts(t, f, m.ID))
	require.NoError(t, a.Delete(ctx, m.ID))
	_, err = f.Load(ctx, m.ID)
	assert.ErrorIs(t, err, ErrNotFound, "open in the follower")
	g, _ := apiNewStore(t, fopts)
	_, err = g.Load(ctx, m.ID)
	assert.ErrorIs(t, err, ErrNotFound, "not open")
	_, err = g.Load(ctx, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound, "never there")
}

// TestFollowerCacheIsItsOwn: a follower's directory is made when
// missing, and the sessions it reads are cached there under their locks:
// a second follower on the same directory is ErrLocked for them.
func TestFollowerCacheIsItsOwn(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("one"))
	fopts, _ := followerOpts(obj)
	dir := filepath.Join(t.TempDir(), "cache")
	f := apiOpen(t, dir, fopts)
	assert.Equal(t, []string{"one"}, loadTexts(t, f, m.ID))
	_, err = os.Stat(filepath.Join(dir, sessionsDir, m.ID.String(), chunksDir))
	assert.NoError(t, err, "the session is cached in the follower's directory")
	g := apiOpen(t, dir, fopts)
	_, err = g.Load(ctx, m.ID)
	assert.ErrorIs(t, err, ErrLocked)
}

// TestFollowerBesideAWriter: while another Store appends (sealing chunks
// as it goes), every Load of a follower returns a prefix of the writer's
// events holding at least every event whose Append returned before the
// Load started.
func TestFollowerBesideAWriter(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	wopts := remoteOpts(obj)
	wopts.ChunkSize = 4 << 10
	a, _ := apiNewStore(t, wopts)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	fopts, ro := followerOpts(obj)
	f, _ := apiNewStore(t, fopts)

	const n = 400
	var acked atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range n {
			if _, err := a.Append(ctx, m.ID, textEv(fmt.Sprint(i))); err != nil {
				t.Errorf("append %d: %v", i, err)
				return
			}
			acked.Store(int64(i + 1))
		}
	}()
	loads := 0
	for finished := false; !finished; loads++ {
		select {
		case <-done:
			finished = true
		default:
		}
		before := int(acked.Load())
		got := loadTexts(t, f, m.ID)
		require.GreaterOrEqual(t, len(got), before, "load %d: an event acknowledged before it is missing", loads)
		for i, s := range got {
			require.Equal(t, fmt.Sprint(i), s, "load %d: not the writer's prefix", loads)
		}
	}
	assert.Len(t, loadTexts(t, f, m.ID), n)
	_, _, writes := ro.counts()
	assert.Empty(t, writes)
	t.Logf("%d loads beside %d appends", loads, n)
}

// TestFollowerSubscribe: a follower's subscription delivers the events
// another Store appends, in log order, once each; SubscribeFrom first
// replays those after an offset, with no gap or repeat before the live
// ones, on the follower and on the writing Store alike.
func TestFollowerSubscribe(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	wopts := remoteOpts(obj)
	wopts.ChunkSize = 4 << 10
	a, _ := apiNewStore(t, wopts)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	var ids []uuid.UUID
	appendN := func(n int) {
		for range n {
			ids = append(ids, apiAppend(t, a, m.ID, textEv(fmt.Sprint(len(ids)))).ID)
		}
	}
	appendN(30)

	fopts, _ := followerOpts(obj)
	fopts.FollowInterval = 5 * time.Millisecond
	f, _ := apiNewStore(t, fopts)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	live, err := f.Subscribe(sctx, m.ID)
	require.NoError(t, err)
	from, err := f.SubscribeFrom(sctx, m.ID, ids[9])
	require.NoError(t, err)
	all, err := f.SubscribeFrom(sctx, m.ID, uuid.Nil)
	require.NoError(t, err)
	onWriter, err := a.SubscribeFrom(sctx, m.ID, ids[19])
	require.NoError(t, err)
	_, err = f.SubscribeFrom(sctx, m.ID, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound, "an offset that is not an event of the session")

	appendN(60) // across seals
	take := func(sub *Subscription, n int) []uuid.UUID {
		t.Helper()
		var got []uuid.UUID
		timeout := time.After(30 * time.Second)
		for len(got) < n {
			select {
			case u, ok := <-sub.C:
				require.True(t, ok, "the subscription ended: %v", sub.Err())
				require.Zero(t, u.Missed)
				if u.Event != nil {
					got = append(got, u.Event.ID)
					var r struct{ Text string }
					require.NoError(t, json.Unmarshal(u.Event.Record, &r), "the record is delivered")
				}
			case <-timeout:
				t.Fatalf("%d of %d events after 30 s", len(got), n)
			}
		}
		return got
	}
	assert.Equal(t, ids[30:], take(live, 60), "live: what was appended after Subscribe")
	assert.Equal(t, ids[10:], take(from, 80), "from the 10th: the replay, then live")
	assert.Equal(t, ids, take(all, 90), "from the first")
	assert.Equal(t, ids[20:], take(onWriter, 70), "on the writing Store")

	// A session deleted on the object store ends a follower's
	// subscriptions with ErrNotFound.
	require.NoError(t, a.Delete(ctx, m.ID))
	select {
	case _, ok := <-live.C:
		assert.False(t, ok, "no update after the deletion")
	case <-time.After(30 * time.Second):
		t.Fatal("the subscription did not end")
	}
	assert.ErrorIs(t, live.Err(), ErrNotFound)
}
