package sessionstore

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// smallBatches makes the streaming forms read a few events per batch, so
// that a small session spans many.
func smallBatches(t *testing.T) {
	b, e, n := seqBatchBytes, seqBatchEvents, treeBatch
	seqBatchBytes, seqBatchEvents, treeBatch = 700, 3, 2
	t.Cleanup(func() { seqBatchBytes, seqBatchEvents, treeBatch = b, e, n })
}

// collect runs seq to its end, returning the values and errors yielded,
// and checks that an error, if any, is the last thing yielded.
func collect[T any](t *testing.T, seq iter.Seq2[T, error]) ([]T, error) {
	t.Helper()
	var out []T
	var errs []error
	for v, err := range seq {
		if err != nil {
			errs = append(errs, err)
			var zero T
			assert.Equal(t, zero, v, "a zero value with the error")
			continue
		}
		require.Empty(t, errs, "nothing after an error")
		out = append(out, v)
	}
	require.LessOrEqual(t, len(errs), 1, "an error is yielded once")
	if len(errs) == 1 {
		return out, errs[0]
	}
	return out, nil
}

// seqSession is a session to compare the streaming forms on, and leaves
// other than HEAD for FullPathSeq.
type seqSession struct {
	name   string
	id     uuid.UUID
	leaves []uuid.UUID
}

// buildSeqSessions makes sessions of every shape the streaming forms
// resolve: a long one with blob records, one with branches, one with
// compactions (one keeping events verbatim), and a fork of the first with
// events of its own.
func buildSeqSessions(t *testing.T, s *Store) []seqSession {
	ctx := context.Background()
	create := func() uuid.UUID {
		m, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		return m.ID
	}
	add := func(id uuid.UUID, ev Event) Event {
		out, err := s.Append(ctx, id, ev)
		require.NoError(t, err)
		return out
	}
	var out []seqSession

	long := create()
	var longEvs []Event
	for i := range 20 {
		text := fmt.Sprintf("event %02d", i)
		if i%4 == 1 {
			text += strings.Repeat(" big", 100) // over the blob threshold
		}
		longEvs = append(longEvs, add(long, UserText(text)))
	}
	out = append(out, seqSession{"long with blobs", long, []uuid.UUID{longEvs[7].ID}})

	br := create()
	a := add(br, UserText("root"))
	b1 := add(br, AssistantText("first try"))
	add(br, UserText("more"))
	require.NoError(t, s.Branch(ctx, br, a.ID))
	add(br, AssistantText("second try"))
	for i := range 6 {
		add(br, UserText(fmt.Sprintf("on the branch %d", i)))
	}
	out = append(out, seqSession{"branches", br, []uuid.UUID{b1.ID}})

	cp := create()
	var cpEvs []Event
	for i := range 8 {
		cpEvs = append(cpEvs, add(cp, UserText(fmt.Sprintf("before %d", i))))
	}
	_, err := s.Compact(ctx, cp, Compaction{Head: cpEvs[7].ID, Summary: Summary{Text: "first"}})
	require.NoError(t, err)
	for i := range 4 {
		cpEvs = append(cpEvs, add(cp, UserText(fmt.Sprintf("between %d", i))))
	}
	_, err = s.Compact(ctx, cp, Compaction{Head: cpEvs[11].ID, FirstKept: cpEvs[9].ID, Summary: Summary{Text: "second"}})
	require.NoError(t, err)
	for i := range 5 {
		add(cp, UserText(fmt.Sprintf("after %d", i)))
	}
	out = append(out, seqSession{"compactions", cp, []uuid.UUID{cpEvs[5].ID, cpEvs[10].ID}})

	fork, err := s.Fork(ctx, long, longEvs[12].ID)
	require.NoError(t, err)
	for i := range 7 {
		add(fork.ID, AssistantText(fmt.Sprintf("in the fork %d %s", i, strings.Repeat("x", 50*i))))
	}
	out = append(out, seqSession{"fork", fork.ID, []uuid.UUID{longEvs[3].ID}})
	return out
}

// seqWant is what the slice forms return for a session.
type seqWant struct {
	load  []Event
	full  []Event
	paths map[uuid.UUID][]Event
	tree  []Node
}

func sliceForms(t *testing.T, s *Store, ss seqSession) seqWant {
	ctx := context.Background()
	var w seqWant
	var err error
	w.load, err = s.Load(ctx, ss.id)
	require.NoError(t, err)
	w.full, err = s.FullPath(ctx, ss.id, uuid.Nil)
	require.NoError(t, err)
	w.paths = map[uuid.UUID][]Event{}
	for _, leaf := range ss.leaves {
		w.paths[leaf], err = s.FullPath(ctx, ss.id, leaf)
		require.NoError(t, err)
	}
	w.tree, err = s.Tree(ctx, ss.id)
	require.NoError(t, err)
	return w
}

func checkSeqForms(t *testing.T, s *Store, ss seqSession, w seqWant) {
	ctx := context.Background()
	load, err := collect(t, s.LoadSeq(ctx, ss.id))
	require.NoError(t, err)
	assert.Equal(t, w.load, load, "LoadSeq")
	full, err := collect(t, s.FullPathSeq(ctx, ss.id, uuid.Nil))
	require.NoError(t, err)
	assert.Equal(t, w.full, full, "FullPathSeq to HEAD")
	for _, leaf := range ss.leaves {
		path, err := collect(t, s.FullPathSeq(ctx, ss.id, leaf))
		require.NoError(t, err)
		assert.Equal(t, w.paths[leaf], path, "FullPathSeq to %s", leaf)
	}
	tree, err := collect(t, s.TreeSeq(ctx, ss.id))
	require.NoError(t, err)
	assert.Equal(t, w.tree, tree, "TreeSeq")
}

// TestSeqMatchesSlices: the streaming forms yield what Load, FullPath and
// Tree return, for every shape of session, in a store that has the
// sessions open with their index and, after a reopen, in one that opens
// them without it (lazy.go), also while appending without it.
func TestSeqMatchesSlices(t *testing.T) {
	smallBatches(t)
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{BlobThreshold: 200, ChunkSize: 4096}
	s := openMem(t, m, o)
	sessions := buildSeqSessions(t, s)
	wants := map[uuid.UUID]seqWant{}
	for _, ss := range sessions {
		wants[ss.id] = sliceForms(t, s, ss)
		require.Greater(t, len(wants[ss.id].full), 2*seqBatchEvents, "%s spans batches", ss.name)
		t.Run(ss.name, func(t *testing.T) { checkSeqForms(t, s, ss, wants[ss.id]) })
	}
	require.NoError(t, s.Close())

	s = openMem(t, m, o)
	for _, ss := range sessions {
		t.Run(ss.name+", opened without its index", func(t *testing.T) {
			checkSeqForms(t, s, ss, wants[ss.id]) // the first call opens it
		})
	}
	require.NoError(t, s.Close())

	s = openMem(t, m, o)
	defer s.Close()
	for _, ss := range sessions {
		t.Run(ss.name+", appending without its index", func(t *testing.T) {
			_, err := s.Head(ctx, ss.id) // opens it lazily
			require.NoError(t, err)
			_, err = s.Append(ctx, ss.id, UserText("appended"))
			require.NoError(t, err)
			checkSeqForms(t, s, ss, sliceForms(t, s, ss))
		})
	}
}

// sessionRefs returns how many calls hold session id open.
func sessionRefs(s *Store, id uuid.UUID) int {
	return s.reg.tab.Refs(id)
}

// TestSeqBreak: breaking out of the loop ends the iteration with nothing
// held: no call holds the session, and Close returns.
func TestSeqBreak(t *testing.T) {
	smallBatches(t)
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	appendN(t, s, id, 20)
	n := 0
	for ev, err := range s.LoadSeq(ctx, id) {
		require.NoError(t, err)
		require.NotZero(t, ev.ID)
		n++
		assert.Zero(t, sessionRefs(s, id), "nothing is held across the loop body")
		if n == 4 {
			break
		}
	}
	assert.Equal(t, 4, n)
	k := 0
	for _, err := range s.TreeSeq(ctx, id) {
		require.NoError(t, err)
		assert.Zero(t, sessionRefs(s, id))
		if k++; k == 3 {
			break
		}
	}
	assert.Equal(t, 3, k)
	assert.Zero(t, sessionRefs(s, id))
	require.NoError(t, s.Close())
}

// TestSeqAppendInsideLoop: the loop body may append to the session it
// iterates (no lock is held across it); the iteration yields the path as
// it was when it started.
func TestSeqAppendInsideLoop(t *testing.T) {
	smallBatches(t)
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	defer s.Close()
	appendN(t, s, id, 10)
	want, err := s.Load(ctx, id)
	require.NoError(t, err)
	wantTree, err := s.Tree(ctx, id)
	require.NoError(t, err)

	var got []Event
	for ev, err := range s.LoadSeq(ctx, id) {
		require.NoError(t, err)
		got = append(got, ev)
		_, err := s.Append(ctx, id, UserText("appended while loading"))
		require.NoError(t, err)
	}
	assert.Equal(t, want, got, "the path at the start")

	var nodes []Node
	for n, err := range s.TreeSeq(ctx, id) {
		require.NoError(t, err)
		nodes = append(nodes, n)
		_, err := s.Append(ctx, id, UserText("appended while walking the tree"))
		require.NoError(t, err)
	}
	require.Len(t, nodes, len(wantTree)+len(want))
	assert.Equal(t, wantTree, nodes[:len(wantTree)])

	after, err := s.Load(ctx, id)
	require.NoError(t, err)
	assert.Len(t, after, len(want)+len(want)+len(nodes))
}

// TestSeqDamagedChunk: a record damaged in the middle of the path (the
// open does not read it) ends LoadSeq and FullPathSeq with one
// *CorruptionError, after the events of the batches before it.
func TestSeqDamagedChunk(t *testing.T) {
	smallBatches(t)
	seqBatchBytes = 1 << 20 // batches of seqBatchEvents (3) events
	ctx := context.Background()
	m, s, id := memSession(t, Options{Compression: CompressionNone})
	for i := range 10 {
		_, err := s.Append(ctx, id, UserText(fmt.Sprintf("event-%02d", i)))
		require.NoError(t, err)
	}
	want, err := s.Load(ctx, id)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	chunk := filepath.Join(sessionPath(id, chunksDir), chunkName(0))
	b, err := vfs.ReadFile(m, chunk)
	require.NoError(t, err)
	at := bytes.Index(b, []byte("event-04"))
	require.Positive(t, at)
	flipByte(t, m, chunk, int64(at))

	s = openMem(t, m, Options{Compression: CompressionNone})
	defer s.Close()
	_, err = s.Load(ctx, id)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce, "Load finds the damage")
	for name, seq := range map[string]iter.Seq2[Event, error]{
		"LoadSeq":     s.LoadSeq(ctx, id),
		"FullPathSeq": s.FullPathSeq(ctx, id, uuid.Nil),
	} {
		got, err := collect(t, seq)
		require.ErrorAs(t, err, &ce, name)
		assert.Equal(t, chunk, ce.Path, name)
		assert.Equal(t, want[:3], got, "%s: the batch before the damage", name)
	}
}

// TestSeqDamagedSession: in a damaged session (a bad line followed by
// good ones, found by the open) the streaming forms yield what Load and
// Tree return, the valid prefix, then the *CorruptionError.
func TestSeqDamagedSession(t *testing.T) {
	smallBatches(t)
	ctx := context.Background()
	o := Options{Compression: CompressionNone}
	m, s, id := memSession(t, o)
	for i := range 10 {
		_, err := s.Append(ctx, id, UserText(fmt.Sprintf("event-%02d", i)))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	chunk := filepath.Join(sessionPath(id, chunksDir), chunkName(0))
	b, err := vfs.ReadFile(m, chunk)
	require.NoError(t, err)
	flipByte(t, m, chunk, int64(bytes.Index(b, []byte("event-07"))))
	require.NoError(t, m.Remove(sessionPath(id, indexName)))

	s = openMem(t, m, o)
	defer s.Close()
	load, loadErr := s.Load(ctx, id)
	require.ErrorIs(t, loadErr, ErrCorrupt)
	tree, treeErr := s.Tree(ctx, id)
	require.ErrorIs(t, treeErr, ErrCorrupt)
	require.Len(t, tree, 7, "the valid prefix")

	got, err := collect(t, s.LoadSeq(ctx, id))
	assert.Equal(t, loadErr, err)
	assert.Equal(t, load, got)
	nodes, err := collect(t, s.TreeSeq(ctx, id))
	assert.Equal(t, treeErr, err)
	assert.Equal(t, tree, nodes)
}

// TestSeqErrors: what cannot start yields its error once.
func TestSeqErrors(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	appendN(t, s, id, 3)
	missing := uuid.Must(uuid.NewV7())
	_, err := collect(t, s.LoadSeq(ctx, missing))
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = collect(t, s.FullPathSeq(ctx, id, missing))
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = collect(t, s.TreeSeq(ctx, missing))
	assert.ErrorIs(t, err, ErrNotFound)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = collect(t, s.LoadSeq(cancelled, id))
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Close())
	_, err = collect(t, s.TreeSeq(ctx, id))
	assert.ErrorIs(t, err, ErrClosed)

	// Closing the store inside the loop ends the iteration with ErrClosed.
	smallBatches(t)
	seqBatchBytes = 1 << 20
	_, s, id = memSession(t, Options{})
	appendN(t, s, id, 10)
	n := 0
	var last error
	for _, err := range s.LoadSeq(ctx, id) {
		if err != nil {
			last = err
			continue
		}
		if n++; n == 1 {
			require.NoError(t, s.Close())
		}
	}
	assert.Equal(t, seqBatchEvents, n, "the first batch, read before the close")
	assert.ErrorIs(t, last, ErrClosed)
}

// TestSeqUpgradeInsideLoop: when the session's lines move between two
// batches (Upgrade rewrites every chunk line), the iteration finds the
// rest of its path in the new index and reads it there.
func TestSeqUpgradeInsideLoop(t *testing.T) {
	smallBatches(t)
	seqBatchEvents = 1
	ctx := context.Background()
	m := memFixture(t, "format1")
	s := openMem(t, m, Options{Compression: CompressionNone})
	defer s.Close()
	want, err := s.FullPath(ctx, goldenSession, uuid.Nil)
	require.NoError(t, err)
	require.Greater(t, len(want), 2)
	var got []Event
	for ev, err := range s.FullPathSeq(ctx, goldenSession, uuid.Nil) {
		require.NoError(t, err)
		if got = append(got, ev); len(got) == 1 {
			require.NoError(t, s.Upgrade(ctx, goldenSession))
			require.Equal(t, formatVersion, sessionFormat(t, m, goldenSession))
		}
	}
	assert.Equal(t, want, got)
}
