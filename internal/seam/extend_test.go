package seam

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// extendLog writes a log as its writers do, in random steps: a holder's
// data objects with up to its window of them in flight (stored later,
// in any order), meta objects, seals whose data objects are then replaced
// by tombstones, releases, and takeovers (voids at the free numbers, then
// an open marker holding the state a reader got, its Creates in flight
// abandoned).
type extendLog struct {
	t      *testing.T
	obj    *memObjects
	id     uuid.UUID
	rng    *rand.Rand
	lease  uuid.UUID
	marked uint64          // the lease's marker
	next   uint64          // the next number to issue
	flight map[uint64]bool // issued, not stored
	data   map[uint64]*Header
	chunk  uint32
	off    int64    // where the chunk's data ends
	pieces []uint64 // the chunk's data objects
	held   bool
}

const extendWindow = 3

func newExtendLog(t *testing.T, seed uint64) *extendLog {
	l := &extendLog{t: t, obj: newMemObjects(), id: uuid.New(), rng: rand.New(rand.NewPCG(seed, 1)), next: 1, flight: map[uint64]bool{}, data: map[uint64]*Header{}}
	l.lease = uuid.New()
	l.put(l.next, &Header{Kind: KindCreate, Lease: l.lease, State: &State{}, Window: extendWindow}, []byte(`{"m":1}`))
	l.marked, l.next, l.held = 1, 2, true
	return l
}

func (l *extendLog) put(seq uint64, h *Header, payload []byte) {
	putObject(l.t, l.obj, l.id, seq, h, payload)
}

// acked is the newest number of the lease stored with every one before
// it.
func (l *extendLog) acked() uint64 {
	n := l.marked
	for n+1 < l.next && !l.flight[n+1] {
		n++
	}
	return n
}

// take takes the session as an open does, after reading the log.
func (l *extendLog) take() {
	v, err := (&LogWriter{Obj: l.obj, ID: l.id}).ReadView(context.Background())
	require.NoError(l.t, err)
	lease := uuid.New()
	for _, n := range v.Gaps {
		l.put(n, &Header{Kind: KindVoid, Lease: lease}, nil)
	}
	clear(l.flight)
	l.lease, l.next, l.marked = lease, v.NewestSeq+1, v.NewestSeq+1
	l.put(l.next, &Header{Kind: KindOpen, Lease: lease, State: v.State, Window: extendWindow}, v.Meta)
	l.next++
	l.off, l.pieces = 0, nil
	for _, p := range v.State.Live {
		if p.Chunk == l.chunk {
			l.off = max(l.off, p.Off+int64(p.Len))
			l.pieces = append(l.pieces, p.Seq)
		}
	}
	l.held = true
}

// alone issues an object that is created alone, after every Create in
// flight ended.
func (l *extendLog) alone(h *Header, payload []byte) uint64 {
	for seq := range l.flight {
		l.land(seq)
	}
	h.Lease, h.Acked = l.lease, l.next-1
	seq := l.next
	l.put(seq, h, payload)
	l.next++
	return seq
}

func (l *extendLog) land(seq uint64) {
	delete(l.flight, seq)
	l.put(seq, l.data[seq], []byte("x\n"))
}

func (l *extendLog) step() {
	r := l.rng.IntN(24)
	switch {
	case !l.held || r == 0:
		l.take()
	case r == 1:
		l.alone(&Header{Kind: KindRelease, State: &State{}}, []byte(`{}`))
		l.held = false
		// A release's state is the lease's: a reader after it applies
		// nothing, so its state is only compared between the two views.
	case r == 2:
		l.alone(&Header{Kind: KindMeta}, fmt.Appendf(nil, `{"meta":%d}`, l.next))
	case r == 3 && l.off > 0:
		l.alone(&Header{Kind: KindSeal, Chunk: l.chunk, Key: fmt.Sprintf("sealed/%d", l.chunk), Size: l.off}, nil)
		for _, seq := range l.pieces { // LeaseTime later: tombstones
			require.NoError(l.t, l.obj.Put(context.Background(), LogKey(l.id, seq), Tombstone()))
		}
		l.chunk, l.off, l.pieces = l.chunk+1, 0, nil
	case r < 10 && len(l.flight) > 0:
		seqs := slices.Sorted(func(yield func(uint64) bool) {
			for s := range l.flight {
				if !yield(s) {
					return
				}
			}
		})
		l.land(seqs[l.rng.IntN(len(seqs))])
	default:
		for s := range l.flight { // its Create waits for those a window before it
			if s+extendWindow <= l.next {
				l.land(s)
			}
		}
		seq := l.next
		l.data[seq] = &Header{Kind: KindData, Lease: l.lease, Chunk: l.chunk, Off: l.off, Len: 2, Acked: l.acked()}
		l.next++
		l.off += 2
		l.pieces = append(l.pieces, seq)
		l.flight[seq] = true
		if l.rng.IntN(3) != 0 {
			l.land(seq)
		}
	}
}

// TestExtendView: over random logs, a view extended from the previous
// one (polled after one step or many, so past the first listed page too)
// is the view ReadView reads: the same newest object, marker, applied
// objects, free numbers, metadata and state (but for State.Dead, which
// names data objects replaced by tombstones since the earlier read), and
// it carries the payload of every data object applied since the
// previous view.
func TestExtendView(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(20) {
		l := newExtendLog(t, seed)
		r := &LogWriter{Obj: l.obj, ID: l.id}
		var prev *View
		for round := range 50 {
			steps := 1 + l.rng.IntN(3)*l.rng.IntN(30)
			if round%10 == 9 {
				steps = 3 * ViewPage // past the first listed page
			}
			for range steps {
				l.step()
			}
			want, err := r.ReadView(ctx)
			require.NoError(t, err, "seed %d round %d", seed, round)
			got, err := r.ExtendView(ctx, prev)
			require.NoError(t, err, "seed %d round %d", seed, round)
			where := fmt.Sprintf("seed %d round %d", seed, round)
			assert.Equal(t, want.NewestSeq, got.NewestSeq, where)
			assert.Equal(t, want.Newest.Key, got.Newest.Key, where)
			assert.Equal(t, want.NewestHead.Kind, got.NewestHead.Kind, where)
			assert.Equal(t, want.Marker.Lease, got.Marker.Lease, where)
			assert.Equal(t, want.Marker.Kind, got.Marker.Kind, where)
			assert.Equal(t, want.Applied, got.Applied, where)
			assert.Equal(t, want.Gaps, got.Gaps, where)
			assert.Equal(t, string(want.Meta), string(got.Meta), where)
			assert.Equal(t, append([]Piece{}, want.State.Live...), append([]Piece{}, got.State.Live...), where)
			assert.Equal(t, append([]Sealed{}, want.State.Sealed...), append([]Sealed{}, got.State.Sealed...), where)
			assert.Equal(t, want.State.Lanes, got.State.Lanes, where)
			if prev != nil && prev.Marker.Lease == got.Marker.Lease && got != prev {
				for _, p := range got.State.Live {
					if !slices.ContainsFunc(prev.State.Live, func(q Piece) bool { return q.Seq == p.Seq }) {
						assert.Contains(t, got.Payloads, p.Seq, "%s: a data object applied since the previous view", where)
					}
				}
			}
			prev = got
			if t.Failed() {
				return
			}
		}
	}
}
