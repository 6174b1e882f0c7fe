package seam

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/corrupt"
)

// heldObjects holds the Creates of chosen keys until released.
type heldObjects struct {
	*memObjects
	mu   sync.Mutex
	held map[string]chan struct{}
}

func (h *heldObjects) hold(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		h.held = map[string]chan struct{}{}
	}
	h.held[key] = make(chan struct{})
}

func (h *heldObjects) release(key string) {
	h.mu.Lock()
	c := h.held[key]
	delete(h.held, key)
	h.mu.Unlock()
	close(c)
}

func (h *heldObjects) Create(ctx context.Context, key string, data []byte) error {
	h.mu.Lock()
	c := h.held[key]
	h.mu.Unlock()
	if c != nil {
		<-c
	}
	return h.memObjects.Create(ctx, key, data)
}

// putData issues a data object of two bytes at off, with Mu held.
func putData(w *LogWriter, off int64) func() error {
	w.Mu.Lock()
	defer w.Mu.Unlock()
	return w.PutData(time.Minute, &Header{Kind: KindData, Chunk: 0, Off: off}, []byte("x\n"))
}

// returned reports whether wait returns within a short while, and its
// error.
func returned(wait func() error) (bool, error) {
	c := make(chan error, 1)
	go func() { c <- wait() }()
	select {
	case err := <-c:
		return true, err
	case <-time.After(30 * time.Millisecond):
		return false, nil
	}
}

// TestPutDataInOrder: data objects in flight are acknowledged in log
// order: one stored after a number still in flight waits for it; one
// whose predecessor's Create failed (another writer took the number) is
// not acknowledged though it was stored, and the writer is fenced; at
// most Window are in flight; each records the writer's acknowledged
// point when it was issued (Acked).
func TestPutDataInOrder(t *testing.T) {
	ctx := context.Background()
	t.Run("in order", func(t *testing.T) {
		obj, id, w, wait2, wait3 := secondHeld(t)
		done, _ := returned(wait3)
		assert.False(t, done, "object 3 is not acknowledged while 2 is in flight")
		obj.release(LogKey(id, 2))
		require.NoError(t, wait2())
		require.NoError(t, wait3())
		w.Mu.Lock()
		assert.Equal(t, uint64(3), w.Seq)
		assert.Equal(t, []Piece{{Seq: 2, Off: 0, Len: 2}, {Seq: 3, Off: 2, Len: 2}}, w.State.Live, "applied in log order")
		w.Mu.Unlock()
		b, err := obj.Get(ctx, LogKey(id, 3), 0, -1)
		require.NoError(t, err)
		h, _, err := DecodeObject(LogKey(id, 3), b)
		require.NoError(t, err)
		assert.Equal(t, uint64(1), h.Acked, "issued while only object 1 was stored")
	})
	t.Run("after a failed number", func(t *testing.T) {
		obj, id, w, wait2, wait3 := secondHeld(t)
		// Another Store takes number 2 first.
		other := &Header{Kind: KindVoid, Lease: uuid.New()}
		b, err := EncodeObject(other, nil)
		require.NoError(t, err)
		require.NoError(t, obj.memObjects.Create(ctx, LogKey(id, 2), b))
		obj.release(LogKey(id, 2))
		assert.ErrorIs(t, wait2(), ErrFenced)
		assert.ErrorIs(t, wait3(), ErrFenced, "stored, but after a number this lease does not hold")
		w.Mu.Lock()
		w.DrainLocked()
		assert.Equal(t, uint64(1), w.Seq)
		assert.Empty(t, w.State.Live)
		assert.ErrorIs(t, w.Lost, ErrFenced)
		w.Mu.Unlock()
		assert.ErrorIs(t, putData(w, 4)(), ErrFenced, "nothing more is issued")
	})
	t.Run("window", func(t *testing.T) {
		obj, id := &heldObjects{memObjects: newMemObjects()}, uuid.New()
		w := holding(obj, id, 0)
		_, err := w.PutLocked(ctx, &Header{Kind: KindCreate, State: &State{}}, []byte("{}"))
		require.NoError(t, err)
		for n := uint64(2); n <= 1+Window; n++ {
			obj.hold(LogKey(id, n))
		}
		var waits []func() error
		for i := range Window {
			waits = append(waits, putData(w, int64(2*i)))
		}
		issued := make(chan func() error, 1)
		go func() { issued <- putData(w, 2*Window) }()
		select {
		case <-issued:
			t.Fatalf("a data object issued with %d in flight", Window)
		case <-time.After(30 * time.Millisecond):
		}
		obj.release(LogKey(id, 2))
		waits = append(waits, <-issued)
		for n := uint64(3); n <= 1+Window; n++ {
			obj.release(LogKey(id, n))
		}
		for _, wait := range waits {
			require.NoError(t, wait())
		}
		assert.Equal(t, uint64(2+Window), w.Seq)
	})
}

// secondHeld makes a log whose writer issued data objects 2 and 3, the
// Create of 2 held and 3 stored.
func secondHeld(t *testing.T) (obj *heldObjects, id uuid.UUID, w *LogWriter, wait2, wait3 func() error) {
	ctx := context.Background()
	obj, id = &heldObjects{memObjects: newMemObjects()}, uuid.New()
	w = holding(obj, id, 0)
	_, err := w.PutLocked(ctx, &Header{Kind: KindCreate, State: &State{}}, []byte("{}"))
	require.NoError(t, err)
	obj.hold(LogKey(id, 2))
	wait2, wait3 = putData(w, 0), putData(w, 2)
	require.Eventually(t, func() bool { _, err := obj.Get(ctx, LogKey(id, 3), 0, -1); return err == nil }, 5*time.Second, time.Millisecond)
	return obj, id, w, wait2, wait3
}

// putObject stores a log object as given.
func putObject(t *testing.T, obj Objects, id uuid.UUID, seq uint64, h *Header, payload []byte) {
	t.Helper()
	b, err := EncodeObject(h, payload)
	require.NoError(t, err)
	require.NoError(t, obj.Put(context.Background(), LogKey(id, seq), b))
}

// TestReadViewWindow: after a create or open marker, the view applies
// the marker's lease's data objects up to the first free number (a
// Create in flight) or another lease's void, skipping its own voids and
// other leases' late data; it names the free numbers as Gaps; a free
// number that a later object of the lease proves stored (its Acked, or
// a window past it) is damage naming its key; after a release marker
// nothing is applied; a marker of a build before windows allows none.
func TestReadViewWindow(t *testing.T) {
	ctx := context.Background()
	lease, other := uuid.New(), uuid.New()
	data := func(acked uint64, off int64) *Header {
		return &Header{Kind: KindData, Lease: lease, Off: off, Acked: acked}
	}
	type obj struct {
		seq uint64
		h   *Header
	}
	for _, tc := range []struct {
		name    string
		marker  *Header
		objs    []obj
		applied []uint64 // the data objects in the view
		gaps    []uint64
		damaged uint64 // the free number reported, 0 for none
	}{
		{"no gap", &Header{Kind: KindOpen, Lease: lease, Window: 4}, []obj{{2, data(1, 0)}, {3, data(1, 2)}}, []uint64{2, 3}, nil, 0},
		{"a Create in flight", &Header{Kind: KindOpen, Lease: lease, Window: 4}, []obj{{2, data(1, 0)}, {4, data(2, 4)}}, []uint64{2}, []uint64{3}, 0},
		{"two in flight", &Header{Kind: KindOpen, Lease: lease, Window: 4}, []obj{{3, data(1, 2)}, {5, data(1, 6)}}, nil, []uint64{2, 4}, 0},
		{"stored, said a later object", &Header{Kind: KindOpen, Lease: lease, Window: 4}, []obj{{2, data(1, 0)}, {4, data(3, 4)}}, nil, nil, 3},
		{"a window past it", &Header{Kind: KindOpen, Lease: lease, Window: 2}, []obj{{2, data(1, 0)}, {5, data(2, 6)}}, nil, nil, 3},
		{"own voids, others' late data", &Header{Kind: KindOpen, Lease: lease, Window: 4, Fills: 2},
			[]obj{{2, &Header{Kind: KindVoid, Lease: lease}}, {3, &Header{Kind: KindData, Lease: other, Off: 9}}, {4, data(3, 0)}}, []uint64{4}, nil, 0},
		{"another lease's data past the fills", &Header{Kind: KindOpen, Lease: lease, Window: 4, Fills: 1},
			[]obj{{2, &Header{Kind: KindVoid, Lease: lease}}, {3, &Header{Kind: KindData, Lease: other, Off: 9}}, {4, data(2, 0)}}, nil, nil, 0},
		{"a meta object proves the free number stored", &Header{Kind: KindOpen, Lease: lease, Window: 4},
			[]obj{{2, data(1, 0)}, {4, &Header{Kind: KindMeta, Lease: lease, Acked: 3}}}, nil, nil, 3},
		{"another lease's void", &Header{Kind: KindOpen, Lease: lease, Window: 4},
			[]obj{{2, data(1, 0)}, {3, &Header{Kind: KindVoid, Lease: other}}, {4, data(2, 4)}}, []uint64{2}, nil, 0},
		{"after a release", &Header{Kind: KindRelease, Lease: lease}, []obj{{3, data(1, 0)}}, nil, nil, 0},
		{"a marker before windows", &Header{Kind: KindOpen, Lease: lease}, []obj{{2, data(0, 0)}, {4, data(0, 4)}}, nil, nil, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, id := newMemObjects(), uuid.New()
			m := *tc.marker
			m.State = &State{}
			putObject(t, mem, id, 1, &m, []byte("{}"))
			for _, o := range tc.objs {
				putObject(t, mem, id, o.seq, o.h, []byte("x\n"))
			}
			v, err := holding(mem, id, 0).ReadView(ctx)
			if tc.damaged != 0 {
				var ce *corrupt.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, LogKey(id, tc.damaged), ce.Path)
				return
			}
			require.NoError(t, err)
			var got []uint64
			for _, p := range v.State.Live {
				got = append(got, p.Seq)
			}
			assert.Equal(t, tc.applied, got)
			assert.Equal(t, tc.gaps, v.Gaps)
		})
	}
}

// TestFillLocked: a taker's fills after its marker skip a number another
// lease's late data took, and stop fenced at one a marker or another
// lease's void took (a Store taking the session from it).
func TestFillLocked(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		taken  *Header // what holds number 3
		fenced bool
	}{
		{"free", nil, false},
		{"a late Create of the earlier holder", &Header{Kind: KindData, Lease: uuid.New(), Off: 4}, false},
		{"another Store's marker", &Header{Kind: KindOpen, Lease: uuid.New(), State: &State{}}, true},
		{"another Store's void", &Header{Kind: KindVoid, Lease: uuid.New()}, true},
		{"a delete marker", &Header{Kind: KindDelete}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem, id := newMemObjects(), uuid.New()
			w := holding(mem, id, 0)
			_, err := w.PutLocked(ctx, &Header{Kind: KindOpen, State: &State{}}, []byte("{}"))
			require.NoError(t, err)
			if tc.taken != nil {
				var payload []byte
				if tc.taken.Kind == KindData {
					payload = []byte("x\n")
				}
				putObject(t, mem, id, 3, tc.taken, payload)
			}
			err = w.FillLocked(ctx, 3)
			if tc.fenced {
				assert.ErrorIs(t, err, ErrFenced)
				assert.Equal(t, uint64(2), w.Seq, "filled up to the taken number")
				return
			}
			require.NoError(t, err)
			assert.Equal(t, uint64(4), w.Seq)
			assert.Equal(t, w.Seq, w.Issued)
		})
	}
}

// TestMarkerCarriesWindow: a marker records the largest window of its
// lease and of the leases it took the session from, and an open marker
// how many numbers after it its Store fills, so that a later taker fills
// enough after a lease of a smaller window.
func TestMarkerCarriesWindow(t *testing.T) {
	ctx := context.Background()
	mem, id := newMemObjects(), uuid.New()
	w := holding(mem, id, 0)
	w.Window = 2
	w.Mu.Lock()
	defer w.Mu.Unlock()
	w.Take(uuid.New(), 0, &State{}, nil, 16, 15)
	for _, kind := range []string{KindOpen, KindRelease} {
		seq, err := w.PutLocked(ctx, &Header{Kind: kind, State: &State{}}, []byte("{}"))
		require.NoError(t, err)
		b, err := mem.Get(ctx, LogKey(id, seq), 0, -1)
		require.NoError(t, err)
		h, _, err := DecodeObject(LogKey(id, seq), b)
		require.NoError(t, err)
		assert.Equal(t, uint64(16), h.MaxInFlight(), "%s carries the larger window", kind)
		if kind == KindOpen {
			assert.Equal(t, 15, h.Fills)
		}
	}
	assert.Equal(t, uint64(MaxWindow), (&Header{Window: 1 << 30}).MaxInFlight(), "a marker's window is bounded")
}
