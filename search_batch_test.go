package sessionstore

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
