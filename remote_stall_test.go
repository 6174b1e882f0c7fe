package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// stallObjects is an ObjectStore that holds the first Create of a log
// object after it is armed: the Store using it has listed the log and is
// about to take its number (an open's marker, a Delete's marker). reached
// is signalled when the Create is held, and the Create goes on when
// resume is closed.
type stallObjects struct {
	*memObjects
	prefix  string
	armed   atomic.Bool
	reached chan string
	resume  chan struct{}
}

func newStallObjects(obj *memObjects, id uuid.UUID) *stallObjects {
	return &stallObjects{memObjects: obj, prefix: seam.LogPrefix(id), reached: make(chan string, 1), resume: make(chan struct{})}
}

func (s *stallObjects) Create(ctx context.Context, key string, data []byte) error {
	if strings.HasPrefix(key, s.prefix) && s.armed.CompareAndSwap(true, false) {
		s.reached <- key
		<-s.resume
	}
	return s.memObjects.Create(ctx, key, data)
}

// TestRemoteStalledTaker: a Store that takes a session (an open, or a
// Delete) stalls between its listing of the log and the Create of its
// marker, while the holder it is taking over from wakes, appends and
// closes, a third Store takes the session, seals the chunk holding those
// appends and replaces their data objects (dead, LeaseTime after the
// sealing). The stalled Create's number is taken (numbers are never
// freed): the taker reads the log again, and then takes the session
// properly (the third Store closed) or finds it held (ErrLocked): no
// acknowledged event is lost, no two Stores hold the session, and a
// Delete removes nothing of a live session. Builds that deleted dead
// data objects let the stalled Create land in a freed number.
func TestRemoteStalledTaker(t *testing.T) {
	for _, op := range []string{"open", "delete"} {
		for _, thirdCloses := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/third-closes=%v", op, thirdCloses), func(t *testing.T) {
				remoteStalledTaker(t, op, thirdCloses)
			})
		}
	}
}

// stalledTake is a session whose holder a appended a0 and went idle
// past its lease, and a taker b (an open, appending b0, or a Delete)
// that listed the log and is held at the Create of its marker, the
// number held.
type stalledTake struct {
	obj    *memObjects
	m      Meta
	a, b   *Store
	acked  []string // every acknowledged event, in order (add)
	stall  *stallObjects
	bAcked atomic.Bool
	done   chan error // b's call
	held   string
	resume func() // lets b's Create go on (once)
}

// startStalledTake sets up a stalledTake with chunks of 2 KiB.
func startStalledTake(t *testing.T, op string) *stalledTake {
	ctx := context.Background()
	st := &stalledTake{obj: newMemObjects(), done: make(chan error, 1)}
	var err error
	st.a = memRemoteStore(t, st.obj, smallChunks)
	st.m, err = st.a.Create(ctx, Meta{Name: "contested"})
	require.NoError(t, err)
	require.NoError(t, st.add(st.a, "a0"))
	stall(t, st.a, st.m.ID)
	st.obj.advance(time.Second) // a is idle past its lease on the store's clock

	// The taker lists the log (newest: a0's object) and holds its Create.
	st.stall = newStallObjects(st.obj, st.m.ID)
	st.stall.armed.Store(true)
	var once sync.Once
	st.resume = func() { once.Do(func() { close(st.stall.resume) }) }
	st.b = memRemoteStore(t, st.obj, smallChunks, func(o *Options) { o.Remote = st.stall })
	t.Cleanup(st.resume) // before b's Close (cleanups run last first): a failed precondition must not leave the taker held
	go func() {
		if op == "delete" {
			st.done <- st.b.Delete(ctx, st.m.ID)
			return
		}
		_, err := st.b.Append(ctx, st.m.ID, textEv("b0"))
		st.bAcked.Store(err == nil)
		st.done <- err
	}()
	select {
	case st.held = <-st.stall.reached:
	case err := <-st.done:
		require.FailNow(t, "the taker did not reach its Create", "%v", err)
	}
	return st
}

// add appends text on s, recording it once acknowledged.
func (st *stalledTake) add(s *Store, text string) error {
	_, err := s.Append(context.Background(), st.m.ID, textEv(text))
	if err == nil {
		st.acked = append(st.acked, text)
	}
	return err
}

func smallChunks(o *Options) { o.ChunkSize = 2 << 10 }

func remoteStalledTaker(t *testing.T, op string, thirdCloses bool) {
	ctx := context.Background()
	st := startStalledTake(t, op)
	obj, m, a, b, held, add := st.obj, st.m, st.a, st.b, st.held, st.add
	small := smallChunks

	// The holder wakes: its appends take the numbers after a0's.
	for i := 1; i <= 2; i++ {
		require.NoError(t, add(a, fmt.Sprintf("a%d", i)))
	}
	require.NoError(t, a.Close())
	require.Contains(t, obj.keys(seam.LogPrefix(m.ID)), held, "precondition: the held number was taken meanwhile")

	// A third Store takes the session and fills chunk 0, whose sealing
	// makes the data objects of a0..a2 dead; LeaseTime later its next
	// sealing replaces them.
	c := memRemoteStore(t, obj, small)
	fill := func(from int) int {
		n := from
		for ; n < from+12; n++ {
			require.NoError(t, add(c, fmt.Sprintf("c%d %s", n, strings.Repeat("x", 200))))
		}
		require.NoError(t, c.Flush(ctx, m.ID)) // seals the full chunks now
		return n
	}
	n := fill(0)
	time.Sleep(250 * time.Millisecond) // LeaseTime (200 ms) on the local clock
	fill(n)
	tomb := seam.Tombstone()
	b0, err := obj.Get(ctx, held, 0, -1)
	require.True(t, errors.Is(err, ErrObjectNotFound) || err == nil && bytes.Equal(tomb, b0),
		"precondition: the held number's data object is dead (%v)", err)
	assert.NoError(t, err, "a dead data object is replaced by a tombstone, never deleted: its number stays taken")
	if thirdCloses {
		require.NoError(t, c.Close())
	}

	st.resume()
	err = <-st.done
	switch {
	case thirdCloses && op == "open":
		require.NoError(t, err, "the taker reads the log again and takes the session")
		st.acked = append(st.acked, "b0")
		require.NoError(t, add(b, "b1"))
	case thirdCloses && op == "delete":
		require.NoError(t, err, "the Delete reads the log again and deletes the session")
		fresh := memRemoteStore(t, obj)
		_, err := fresh.Load(ctx, m.ID)
		assert.ErrorIs(t, err, ErrNotFound)
		return
	default:
		assert.ErrorIs(t, err, ErrLocked, "the third Store holds the session")
		assert.False(t, st.bAcked.Load())
		// The third Store still holds it: its appends go on.
		require.NoError(t, add(c, "c after the taker"))
		require.NoError(t, c.Close())
	}
	require.NoError(t, b.Close())
	fresh := memRemoteStore(t, obj)
	assert.Equal(t, st.acked, loadTexts(t, fresh, m.ID), "every acknowledged event, in order")
	var ce *CorruptionError
	_, err = fresh.Verify(ctx, m.ID)
	assert.False(t, errors.As(err, &ce), "%v", err)
}

// logObjects returns the keys of session id's log objects of kind kind
// (of chunk chunk, for data objects, when chunk >= 0), oldest first.
func logObjects(t *testing.T, obj *memObjects, id uuid.UUID, kind string, chunk int) []string {
	t.Helper()
	var out []string
	keys := obj.keys(seam.LogPrefix(id)) // newest first
	for i := len(keys) - 1; i >= 0; i-- {
		b, err := obj.Get(context.Background(), keys[i], 0, -1)
		require.NoError(t, err)
		h, _, err := seam.DecodeObject(keys[i], b)
		require.NoError(t, err)
		if h.Kind == kind && (chunk < 0 || h.Chunk == uint32(chunk)) {
			out = append(out, keys[i])
		}
	}
	return out
}

// TestRemoteMissingObjectIsDamage: a log object the log says is there and
// the object store lost (a lifecycle rule, an operator) is a
// *CorruptionError naming its key, for a data object the newest marker's
// state names and for one after the newest marker; never a session
// silently cut short. A log of an earlier build, which deleted the data
// objects of a sealed chunk after its seal record, still opens whole.
func TestRemoteMissingObjectIsDamage(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		released bool // the holder closed: its release marker's state names the data
	}{{"in the marker's state", true}, {"after the newest marker", false}} {
		t.Run(tc.name, func(t *testing.T) {
			obj := newMemObjects()
			a := memRemoteStore(t, obj)
			m, err := a.Create(ctx, Meta{})
			require.NoError(t, err)
			for i := range 3 {
				apiAppend(t, a, m.ID, textEv(fmt.Sprintf("e%d", i)))
			}
			if tc.released {
				require.NoError(t, a.Close())
			} else {
				stall(t, a, m.ID)
				obj.advance(time.Second) // a holds it, idle past its lease
			}
			data := logObjects(t, obj, m.ID, seam.KindData, -1)
			require.Len(t, data, 3)
			obj.mu.Lock()
			delete(obj.objs, data[1])
			obj.mu.Unlock()
			b := memRemoteStore(t, obj)
			_, err = b.Load(ctx, m.ID)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, data[1], ce.Path, "the error names the missing object's key: %v", err)
		})
	}
	t.Run("deleted by an earlier build", func(t *testing.T) {
		obj := newMemObjects()
		a := memRemoteStore(t, obj, func(o *Options) { o.ChunkSize = 2 << 10 })
		m, err := a.Create(ctx, Meta{})
		require.NoError(t, err)
		var want []string
		for i := range 12 {
			want = append(want, fmt.Sprintf("e%d %s", i, strings.Repeat("x", 200)))
			apiAppend(t, a, m.ID, textEv(want[i]))
		}
		require.NoError(t, a.Flush(ctx, m.ID)) // seals chunk 0
		want = append(want, "after the seal")
		apiAppend(t, a, m.ID, textEv(want[len(want)-1]))
		require.NotEmpty(t, logObjects(t, obj, m.ID, seam.KindSeal, -1), "precondition: a seal record")
		dead := logObjects(t, obj, m.ID, seam.KindData, 0)
		require.NotEmpty(t, dead)
		obj.mu.Lock()
		for _, k := range dead {
			delete(obj.objs, k) // as builds before tombstones did
		}
		obj.mu.Unlock()
		stall(t, a, m.ID)
		obj.advance(time.Second) // a holds it, idle past its lease
		b := memRemoteStore(t, obj)
		assert.Equal(t, want, loadTexts(t, b, m.ID))
	})
}
