package seam

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestKeepRange(t *testing.T) {
	for _, tc := range []struct {
		k, w     uint64
		from, to uint64
	}{
		{k: 10, w: 4, from: 6, to: 13},
		{k: 3, w: 4, from: 1, to: 6}, // never below the first number
		{k: 4, w: 4, from: 1, to: 7},
		{k: 10, w: 0, from: 9, to: 10}, // a window of builds before windows is 1
		{k: 10, w: 1, from: 9, to: 10},
	} {
		r := KeepRange(tc.k, tc.w)
		assert.Equal(t, SeqRange{From: tc.from, To: tc.to}, r, "k %d w %d", tc.k, tc.w)
	}
}

// TestCompact: Compact deletes what lies from CompactFrom below the
// given marker and the state does not keep (keep ranges, live and dead
// data objects, number 1); its From is the oldest named data object it
// kept; a dry run deletes nothing; a failed deletion is an error.
func TestCompact(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	id := uuid.New()
	for n := uint64(1); n <= 40; n++ {
		putObject(t, obj, id, n, &Header{Kind: KindVoid}, nil)
	}
	st := &State{
		Keep:        []SeqRange{{From: 10, To: 12}},
		Live:        []Piece{{Seq: 20}},
		Dead:        []SeqRange{{From: 15, To: 16}},
		CompactFrom: 5,
	}
	l := &LogWriter{Obj: obj, ID: id}
	dry, err := l.Compact(ctx, st, 30, true)
	require.NoError(t, err)
	// 5..29 but 10-12, 15-16, 20: 25 - 6.
	assert.Equal(t, 19, dry.Objects)
	assert.Equal(t, uint64(15), dry.From, "the oldest named data object kept")
	assert.Len(t, logKeys(obj, id), 40, "a dry run deletes nothing")

	stats, err := l.Compact(ctx, st, 30, false)
	require.NoError(t, err)
	assert.Equal(t, dry, stats)
	left := map[uint64]bool{}
	for _, k := range logKeys(obj, id) {
		n, ok := ParseLogKey(LogPrefix(id), k)
		require.True(t, ok)
		left[n] = true
	}
	for n := uint64(1); n <= 40; n++ {
		want := n < 5 || n >= 30 || n >= 10 && n <= 12 || n == 15 || n == 16 || n == 20
		assert.Equal(t, want, left[n], "number %d", n)
	}

	// Number 1 stays, whatever CompactFrom says.
	st.CompactFrom = 0
	_, err = l.Compact(ctx, st, 5, false)
	require.NoError(t, err)
	assert.Contains(t, logKeys(obj, id), LogKey(id, 1), "the create marker stays")
	assert.NotContains(t, logKeys(obj, id), LogKey(id, 2))

	// Nothing to do below CompactFrom.
	st.CompactFrom = 30
	stats, err = l.Compact(ctx, st, 30, false)
	require.NoError(t, err)
	assert.Zero(t, stats.Objects)
	assert.Equal(t, uint64(30), stats.From)

	// A failed deletion is an error naming the object.
	st.CompactFrom = 30
	l.Obj = failingDeletes{obj}
	_, err = l.Compact(ctx, st, 35, false)
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrRemote)
	assert.Contains(t, err.Error(), fmt.Sprint(LogKey(id, 30)))
}

// TestCheckNewestLocked: a writer whose newest number is not the log's
// newest gets ErrLogMoved.
func TestCheckNewestLocked(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	id := uuid.New()
	for n := uint64(1); n <= 5; n++ {
		putObject(t, obj, id, n, &Header{Kind: KindVoid}, nil)
	}
	l := &LogWriter{Obj: obj, ID: id, Seq: 5}
	assert.NoError(t, l.CheckNewestLocked(ctx))
	l.Seq = 3
	assert.ErrorIs(t, l.CheckNewestLocked(ctx), ErrLogMoved)
}

// logKeys returns the keys of session id's log objects in obj.
func logKeys(obj *memObjects, id uuid.UUID) []string {
	infos, _ := obj.List(context.Background(), LogPrefix(id), 0)
	var out []string
	for _, o := range infos {
		out = append(out, o.Key)
	}
	return out
}

// failingDeletes fails every Delete.
type failingDeletes struct{ *memObjects }

func (failingDeletes) Delete(context.Context, string) error { return errors.New("injected") }
