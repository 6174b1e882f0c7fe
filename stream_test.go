package sessionstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSubscribeFromBesideAppends: a SubscribeFrom made while appends go
// on delivers every event after its offset exactly once, in log order:
// the replay (read in many batches) and the live stream meet without a
// gap or a repeat.
func TestSubscribeFromBesideAppends(t *testing.T) {
	old := seqBatchEvents
	seqBatchEvents = 7
	defer func() { seqBatchEvents = old }()
	ctx := context.Background()
	s, _ := apiNewStore(t, &Options{ChunkSize: 4 << 10})
	id := apiNewSession(t, s)
	const n = 600
	ids := make(chan uuid.UUID, n)
	var all []uuid.UUID
	for i := range 100 {
		ev := apiAppend(t, s, id, textEv(fmt.Sprint(i)))
		all = append(all, ev.ID)
	}
	done := make(chan error, 1)
	go func() {
		for i := 100; i < n; i++ {
			ev, err := s.Append(ctx, id, textEv(fmt.Sprint(i)))
			if err != nil {
				done <- err
				return
			}
			ids <- ev.ID
		}
		done <- nil
	}()
	var subs []*Subscription
	var offsets []int
	for k := range 4 {
		time.Sleep(time.Duration(k) * time.Millisecond)
		off := 10 * k
		sub, err := s.SubscribeFrom(ctx, id, all[off])
		require.NoError(t, err)
		defer sub.Close()
		subs, offsets = append(subs, sub), append(offsets, off)
	}
	require.NoError(t, <-done)
	close(ids)
	for id := range ids {
		all = append(all, id)
	}
	for k, sub := range subs {
		want := all[offsets[k]+1:]
		var got []uuid.UUID
		timeout := time.After(30 * time.Second)
		for len(got) < len(want) {
			select {
			case u := <-sub.C:
				require.Zero(t, u.Missed, "subscription %d", k)
				require.NotNil(t, u.Event)
				got = append(got, u.Event.ID)
			case <-timeout:
				t.Fatalf("subscription %d: %d of %d events", k, len(got), len(want))
			}
		}
		assert.Equal(t, want, got, "subscription %d, after event %d", k, offsets[k])
	}
}

// TestSubscribeFromErrors: an offset that is not an event of the session,
// and a session the store does not hold, are ErrNotFound; from the last
// event, only the live stream comes.
func TestSubscribeFromErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	last := apiAppend(t, s, id, textEv("one"))
	_, err := s.SubscribeFrom(ctx, id, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.SubscribeFrom(ctx, uuid.New(), uuid.Nil)
	assert.ErrorIs(t, err, ErrNotFound)
	sub, err := s.SubscribeFrom(ctx, id, last.ID)
	require.NoError(t, err)
	defer sub.Close()
	next := apiAppend(t, s, id, textEv("two"))
	select {
	case u := <-sub.C:
		require.NotNil(t, u.Event)
		assert.Equal(t, next.ID, u.Event.ID)
	case <-time.After(30 * time.Second):
		t.Fatal("no update")
	}
}
