package sessionstore

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/search"
)

// TestOwnEventsBatchBytes: the reading that indexes a session (and the
// scan) takes its events in batches of about seqBatchBytes of records,
// not a fixed number of events whatever their size; every event is read
// once, in order.
func TestOwnEventsBatchBytes(t *testing.T) {
	defer func(b int64) { seqBatchBytes = b }(seqBatchBytes)
	seqBatchBytes = 4 << 10
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	var want []Event
	for i := range 40 {
		want = append(want, UserText(strings.Repeat("word ", 200+i))) // about 1 KiB each
	}
	_, err := s.AppendBatch(ctx, id, want...)
	require.NoError(t, err)
	var got []Event
	batches := 0
	_, err = s.ownEvents(ctx, id, 0, func(pos int, evs []Event) error {
		assert.Equal(t, len(got), pos)
		n := 0
		for _, ev := range evs {
			n += len(ev.Record)
		}
		assert.LessOrEqual(t, n, int(seqBatchBytes), "a batch of %d events", len(evs))
		got = append(got, evs...)
		batches++
		return nil
	})
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.JSONEq(t, string(want[i].Record), string(got[i].Record))
	}
	assert.GreaterOrEqual(t, batches, 10)
}

// TestCandHeapOrder: candidates popped from the heap come in hitOrder,
// ties of rank and time included (then session, then event id), as a
// sort of the same hits gives them.
func TestCandHeapOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	x := search.New()
	sessions := []uuid.UUID{uuid.New(), uuid.New(), uuid.New()}
	selected := map[uint32]uuid.UUID{}
	for _, id := range sessions {
		selected[x.NewSlot(id, false)] = id
	}
	h := &candHeap{x: x, selected: selected}
	var want []Hit
	for i := range 500 {
		sl := uint32(rng.IntN(len(sessions)))
		ev := uuid.New()
		at := int64(rng.IntN(4))
		d := search.Analyse("w")
		x.Add(sl, search.DocInfo{Event: ev, Time: at}, d)
		rank := float64(rng.IntN(3))
		h.c = append(h.c, cand{rank: rank, time: at, doc: uint32(i)})
		want = append(want, Hit{Session: selected[sl], Event: ev, Time: time.Unix(0, at).UTC(), Rank: rank})
	}
	slices.SortFunc(want, hitOrder)
	h.init()
	var got []Hit
	for h.len() > 0 {
		c := h.pop()
		d := &x.Docs[c.doc]
		got = append(got, Hit{Session: selected[d.Session], Event: d.Event, Time: time.Unix(0, c.time).UTC(), Rank: c.rank})
	}
	assert.Equal(t, want, got)
}
