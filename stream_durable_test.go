package sessionstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/deltalog"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// item is one update of a stream as a test compares it: an event's id or
// a delta's data.
type item struct {
	event uuid.UUID
	delta string
}

func (i item) String() string {
	if i.event != uuid.Nil {
		return "E" + i.event.String()
	}
	return "D" + i.delta
}

func itemOf(u Update) item {
	if u.Event != nil {
		return item{event: u.Event.ID}
	}
	return item{delta: u.Delta.Data}
}

// durableStore opens a writing store with durable deltas on dir.
func durableStore(t *testing.T, dir string) *Store {
	t.Helper()
	return apiOpen(t, dir, &Options{DurableDeltas: true})
}

// TestPartialOutputAfterClose: deltas no event settled are the partial
// output after the store is reopened; the settled answer supersedes them;
// Load never shows them.
func TestPartialOutputAfterClose(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, &Options{DurableDeltas: true})
	require.NoError(t, err)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	q, err := s.Append(ctx, meta.ID, UserText("question"))
	require.NoError(t, err)
	want := []string{"The ", "answer ", "is "}
	for _, w := range want {
		require.NoError(t, s.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: w}))
	}
	require.NoError(t, s.Publish(ctx, meta.ID, Delta{Kind: DeltaReasoning, Data: "think"}))
	require.NoError(t, s.Close())

	s = durableStore(t, dir)
	p, err := s.PartialOutput(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, q.ID, p.After)
	assert.Equal(t, "The answer is ", p.Text(DeltaText))
	assert.Equal(t, "think", p.Text(DeltaReasoning))
	assert.Len(t, p.Deltas, 4)
	path, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	assert.Len(t, path, 1, "deltas are never events")

	// The settled answer supersedes them.
	_, err = s.Append(ctx, meta.ID, AssistantText("The answer is 42."))
	require.NoError(t, err)
	p, err = s.PartialOutput(ctx, meta.ID)
	require.NoError(t, err)
	assert.Empty(t, p.Deltas)
}

// TestPartialOutputSupersededByEventWithoutMarker: an event in the log
// after the last marker (its marker lost) supersedes the deltas.
func TestPartialOutputSupersededByEventWithoutMarker(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, &Options{DurableDeltas: true})
	require.NoError(t, err)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	require.NoError(t, s.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: "partial"}))
	require.NoError(t, s.Close())
	// A store without the option appends: no marker.
	s2, err := Open(dir, nil)
	require.NoError(t, err)
	_, err = s2.Append(ctx, meta.ID, AssistantText("settled"))
	require.NoError(t, err)
	require.NoError(t, s2.Close())

	s = durableStore(t, dir)
	p, err := s.PartialOutput(ctx, meta.ID)
	require.NoError(t, err)
	assert.Empty(t, p.Deltas, "an event after the deltas settles them")

	// Deltas published now follow that event: they are partial output,
	// though the stream holds no marker for it.
	require.NoError(t, s.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: "new"}))
	p, err = s.PartialOutput(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, "new", p.Text(DeltaText))
}

// TestDeltaSegmentsTrimmed: superseded segments are removed, so the
// stream does not grow with the session.
func TestDeltaSegmentsTrimmed(t *testing.T) {
	old := deltaSegmentBytes
	deltaSegmentBytes = 4 << 10
	t.Cleanup(func() { deltaSegmentBytes = old })
	ctx := context.Background()
	dir := t.TempDir()
	s := durableStore(t, dir)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	for turn := range 40 {
		for range 20 {
			require.NoError(t, s.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: "token token token "}))
		}
		_, err := s.Append(ctx, meta.ID, AssistantText(fmt.Sprint("turn ", turn)))
		require.NoError(t, err)
	}
	gens, err := deltalog.Segments(vfs.Default, filepath.Join(dir, sessionsDir, meta.ID.String(), deltaStreamDir))
	require.NoError(t, err)
	assert.LessOrEqual(t, len(gens), 2, "segments %v", gens)
	assert.Greater(t, gens[len(gens)-1], uint64(5), "the stream rolled over")
}

// tailN reads n updates from a tail, failing after a safety timeout.
func tailN(t *testing.T, tl *Tail, n int) ([]item, []string) {
	t.Helper()
	var items []item
	var cursors []string
	for len(items) < n {
		select {
		case u, ok := <-tl.C:
			require.True(t, ok, "tail ended: %v", tl.Err())
			assert.NotEmpty(t, u.Cursor)
			items = append(items, itemOf(u))
			cursors = append(cursors, u.Cursor)
		case <-time.After(30 * time.Second):
			t.Fatalf("tail delivered %d of %d updates", len(items), n)
		}
	}
	return items, cursors
}

// writeTurns writes turns of deltas and events to the session and
// returns what a tail must deliver, in order.
func writeTurns(t *testing.T, s *Store, id uuid.UUID, turns, deltas int, tag string) []item {
	t.Helper()
	ctx := context.Background()
	var want []item
	for turn := range turns {
		for k := range deltas {
			d := fmt.Sprintf("%s-%d-%d ", tag, turn, k)
			require.NoError(t, s.Publish(ctx, id, Delta{Kind: DeltaText, Data: d}))
			want = append(want, item{delta: d})
		}
		ev, err := s.Append(ctx, id, AssistantText(fmt.Sprint(tag, turn)))
		require.NoError(t, err)
		want = append(want, item{event: ev.ID})
	}
	return want
}

// TestTailOrderAndResume: a tail on a read-only store delivers events and
// deltas in the order they happened; resuming from any update's cursor
// delivers exactly the rest.
func TestTailOrderAndResume(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w := durableStore(t, dir)
	meta, err := w.Create(ctx, Meta{})
	require.NoError(t, err)
	// The tail starts before anything is written, so it sees every
	// delta (a tail from "" later skips the superseded ones).
	r := apiOpen(t, dir, &Options{ReadOnly: true})
	tl, err := r.Tail(ctx, meta.ID, "")
	require.NoError(t, err)
	first, err := w.Append(ctx, meta.ID, UserText("hello"))
	require.NoError(t, err)
	want := append([]item{{event: first.ID}}, writeTurns(t, w, meta.ID, 3, 4, "a")...)
	require.NoError(t, w.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: "pending"}))
	want = append(want, item{delta: "pending"})

	got, cursors := tailN(t, tl, len(want))
	assert.Equal(t, want, got)

	// Live: what comes after.
	more := writeTurns(t, w, meta.ID, 2, 3, "b")
	got2, cursors2 := tailN(t, tl, len(more))
	tl.Close()
	assert.Equal(t, more, got2)
	all := append(append([]item{}, want...), more...)
	cursors = append(cursors, cursors2...)

	for i, c := range cursors[:len(cursors)-1] {
		tl, err := r.Tail(ctx, meta.ID, c)
		require.NoError(t, err)
		rest, _ := tailN(t, tl, len(all)-i-1)
		tl.Close()
		require.Equal(t, all[i+1:], rest, "resume after update %d (%s)", i, c)
	}
}

// TestTailFreshStartSkipsSuperseded: a tail from "" delivers each event
// once and only the deltas no event settled.
func TestTailFreshStartSkipsSuperseded(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w := durableStore(t, dir)
	meta, err := w.Create(ctx, Meta{})
	require.NoError(t, err)
	all := writeTurns(t, w, meta.ID, 3, 2, "x")
	require.NoError(t, w.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: "now"}))
	var want []item
	for _, it := range all {
		if it.event != uuid.Nil {
			want = append(want, it)
		}
	}
	want = append(want, item{delta: "now"})
	tl, err := w.Tail(ctx, meta.ID, "")
	require.NoError(t, err)
	defer tl.Close()
	got, _ := tailN(t, tl, len(want))
	assert.Equal(t, want, got)
}

// TestTailEventsWithoutDurableDeltas: a session written without the
// option is followed by its events.
func TestTailEventsWithoutDurableDeltas(t *testing.T) {
	ctx := context.Background()
	s, _ := apiNewStore(t, nil)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	tl, err := s.Tail(ctx, meta.ID, "")
	require.NoError(t, err)
	defer tl.Close()
	var want []item
	for i := range 5 {
		require.NoError(t, s.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: "live only"}))
		ev, err := s.Append(ctx, meta.ID, UserText(fmt.Sprint(i)))
		require.NoError(t, err)
		want = append(want, item{event: ev.ID})
	}
	got, _ := tailN(t, tl, len(want))
	assert.Equal(t, want, got)
}

// TestTailCursorErrors: bad cursors are refused with ErrInvalidCursor,
// and a cursor naming an event the session lacks with ErrNotFound.
func TestTailCursorErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := apiNewStore(t, &Options{DurableDeltas: true})
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	for _, c := range []string{"x", "1.2", "1.-3.-", "01.8.-", "1.8.nope", "1.8." + uuid.Nil.String(), "1.8.-.4"} {
		_, err := s.Tail(ctx, meta.ID, c)
		assert.ErrorIs(t, err, ErrInvalidCursor, c)
	}
	_, err = s.Tail(ctx, meta.ID, "1.8."+uuid.New().String())
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Tail(ctx, uuid.New(), "")
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestTailEndsOnClose: Store.Close ends a tail with ErrClosed, even one
// whose consumer is not reading.
func TestTailEndsOnClose(t *testing.T) {
	ctx := context.Background()
	s, err := Open(t.TempDir(), &Options{DurableDeltas: true})
	require.NoError(t, err)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	require.NoError(t, s.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: "x"}))
	tl, err := s.Tail(ctx, meta.ID, "")
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for range tl.C {
	}
	assert.ErrorIs(t, tl.Err(), ErrClosed)
	_ = os.Getpid
}

// TestTailCursorIntoRemovedSegment: a cursor into a segment removed since
// (superseded) resumes at the next segment: every event arrives once, in
// order; only superseded deltas are skipped.
func TestTailCursorIntoRemovedSegment(t *testing.T) {
	old := deltaSegmentBytes
	deltaSegmentBytes = 512
	t.Cleanup(func() { deltaSegmentBytes = old })
	ctx := context.Background()
	dir := t.TempDir()
	w := durableStore(t, dir)
	meta, err := w.Create(ctx, Meta{})
	require.NoError(t, err)
	tl, err := w.Tail(ctx, meta.ID, "")
	require.NoError(t, err)
	first := writeTurns(t, w, meta.ID, 1, 3, "p")
	_, cursors := tailN(t, tl, len(first))
	tl.Close()
	cursor := cursors[0] // after the first delta, in segment 1

	rest := writeTurns(t, w, meta.ID, 30, 6, "q")
	sd := filepath.Join(dir, sessionsDir, meta.ID.String(), deltaStreamDir)
	gens, err := deltalog.Segments(vfs.Default, sd)
	require.NoError(t, err)
	require.Greater(t, gens[0], uint64(1), "segment 1 was removed")

	tl, err = w.Tail(ctx, meta.ID, cursor)
	require.NoError(t, err)
	defer tl.Close()
	var wantEvents []item
	for _, it := range append(first[1:], rest...) {
		if it.event != uuid.Nil {
			wantEvents = append(wantEvents, it)
		}
	}
	var gotEvents []item
	for len(gotEvents) < len(wantEvents) {
		got, _ := tailN(t, tl, 1)
		if got[0].event != uuid.Nil {
			gotEvents = append(gotEvents, got[0])
		}
	}
	assert.Equal(t, wantEvents, gotEvents)
}
