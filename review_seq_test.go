package sessionstore

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestReviewSeqDeleteInsideLoop: a session deleted while a streaming form
// reads it ends the iteration with ErrNotFound, as every call on it after
// the Delete returns, not with a *CorruptionError about its missing files.
func TestReviewSeqDeleteInsideLoop(t *testing.T) {
	smallBatches(t)
	seqBatchBytes = 1 << 20
	ctx := context.Background()
	for _, form := range []string{"LoadSeq", "FullPathSeq", "TreeSeq"} {
		t.Run(form, func(t *testing.T) {
			_, s, id := memSession(t, Options{})
			defer s.Close()
			appendN(t, s, id, 12)
			n, deleted := 0, false
			var errs []error
			check := func(err error) bool {
				if err != nil {
					errs = append(errs, err)
					return true
				}
				if n++; n == 1 {
					require.NoError(t, s.Delete(ctx, id))
					deleted = true
				}
				return true
			}
			switch form {
			case "LoadSeq":
				for _, err := range s.LoadSeq(ctx, id) {
					check(err)
				}
			case "FullPathSeq":
				for _, err := range s.FullPathSeq(ctx, id, uuid.Nil) {
					check(err)
				}
			case "TreeSeq":
				for _, err := range s.TreeSeq(ctx, id) {
					check(err)
				}
			}
			require.True(t, deleted)
			require.Len(t, errs, 1, "one error")
			assert.ErrorIs(t, errs[0], ErrNotFound)
			assert.NotErrorIs(t, errs[0], ErrCorrupt, "a deleted session is not damaged")
		})
	}
}

// TestReviewSeqEvictedBetweenBatches: with MaxOpenSessions 1, the loop
// body's call on another session closes the one being read between two
// batches; the iteration reads on and yields what the slice forms return.
func TestReviewSeqEvictedBetweenBatches(t *testing.T) {
	smallBatches(t)
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{MaxOpenSessions: 1, BlobThreshold: 200, ChunkSize: 2048}
	s := openMem(t, m, o)
	defer s.Close()
	a, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	b, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	for i := range 30 {
		text := fmt.Sprintf("a %d", i)
		if i%5 == 0 {
			text += strings.Repeat(" big", 80)
		}
		_, err := s.Append(ctx, a.ID, UserText(text))
		require.NoError(t, err)
	}
	appendN(t, s, b.ID, 3)
	want, err := s.Load(ctx, a.ID)
	require.NoError(t, err)
	wantTree, err := s.Tree(ctx, a.ID)
	require.NoError(t, err)

	touch := func() {
		_, err := s.Append(ctx, b.ID, UserText("elsewhere"))
		require.NoError(t, err)
	}
	var got []Event
	for ev, err := range s.LoadSeq(ctx, a.ID) {
		require.NoError(t, err)
		got = append(got, ev)
		touch()
	}
	assert.Equal(t, want, got)
	var nodes []Node
	for n, err := range s.TreeSeq(ctx, a.ID) {
		require.NoError(t, err)
		nodes = append(nodes, n)
		touch()
	}
	assert.Equal(t, wantTree, nodes)
}

// TestReviewSeqRemote: on a store with Options.Remote, the streaming forms
// yield what the slice forms return, on the writing store and on another
// one that restores the session, and breaking out leaves no call holding
// the session.
func TestReviewSeqRemote(t *testing.T) {
	smallBatches(t)
	ctx := context.Background()
	obj := newMemObjects()
	opts := remoteOpts(obj)
	opts.ChunkSize = 4 << 10
	opts.BlobThreshold = 300
	a, _ := apiNewStore(t, opts)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	for i := range 60 {
		text := fmt.Sprintf("event %d %s", i, strings.Repeat("x", i%5*30))
		if i%13 == 0 {
			text += strings.Repeat(" blob", 100)
		}
		apiAppend(t, a, m.ID, UserText(text))
	}
	ss := seqSession{name: "remote", id: m.ID}
	checkSeqForms(t, a, ss, sliceForms(t, a, ss))
	require.NoError(t, a.Close())

	o2 := remoteOpts(obj)
	o2.BlobThreshold = 300
	b, _ := apiNewStore(t, o2)
	defer b.Close()
	want, err := b.Load(ctx, m.ID)
	require.NoError(t, err)
	n := 0
	for ev, err := range b.LoadSeq(ctx, m.ID) {
		require.NoError(t, err)
		assert.Equal(t, want[n], ev)
		assert.Zero(t, sessionRefs(b, m.ID))
		if n++; n == 10 {
			break
		}
	}
	assert.Zero(t, sessionRefs(b, m.ID))
	checkSeqForms(t, b, ss, sliceForms(t, b, ss))
}

// TestReviewSeqForkParentUpgraded: a fork's prefix read from its parent,
// whose chunks Upgrade rewrites between two batches, is read on from the
// parent's new lines.
func TestReviewSeqForkParentUpgraded(t *testing.T) {
	smallBatches(t)
	seqBatchEvents = 1
	ctx := context.Background()
	m := memFixture(t, "format1")
	s := openMem(t, m, Options{Compression: CompressionNone})
	defer s.Close()
	full, err := s.FullPath(ctx, goldenSession, uuid.Nil)
	require.NoError(t, err)
	require.Greater(t, len(full), 3)
	fork, err := s.Fork(ctx, goldenSession, full[len(full)-1].ID)
	require.NoError(t, err)
	_, err = s.Append(ctx, fork.ID, UserText("in the fork"))
	require.NoError(t, err)
	want, err := s.FullPath(ctx, fork.ID, uuid.Nil)
	require.NoError(t, err)
	var got []Event
	for ev, err := range s.FullPathSeq(ctx, fork.ID, uuid.Nil) {
		require.NoError(t, err)
		if got = append(got, ev); len(got) == 1 {
			require.NoError(t, s.Upgrade(ctx, goldenSession))
		}
	}
	assert.Equal(t, want, got)
}

// TestReviewSeqConcurrentAppends: while another goroutine appends (chunks
// filling and sealing behind the reads), each iteration yields a path
// that is a prefix of the final one, and TreeSeq a prefix of the final
// tree, with no error.
func TestReviewSeqConcurrentAppends(t *testing.T) {
	smallBatches(t)
	ctx := context.Background()
	_, s, id := memSession(t, Options{ChunkSize: 2048, BlobThreshold: 300})
	defer s.Close()
	appendN(t, s, id, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 150 {
			text := fmt.Sprintf("concurrent %d %s", i, strings.Repeat("y", i%9*20))
			if i%17 == 0 {
				text += strings.Repeat(" blob", 80)
			}
			if _, err := s.Append(ctx, id, UserText(text)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var loads [][]Event
	var trees [][]Node
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		evs, err := collect(t, s.LoadSeq(ctx, id))
		require.NoError(t, err)
		loads = append(loads, evs)
		nodes, err := collect(t, s.TreeSeq(ctx, id))
		require.NoError(t, err)
		trees = append(trees, nodes)
	}
	final, err := s.Load(ctx, id)
	require.NoError(t, err)
	finalTree, err := s.Tree(ctx, id)
	require.NoError(t, err)
	require.Len(t, final, 160)
	for _, evs := range loads {
		require.GreaterOrEqual(t, len(evs), 10)
		assert.Equal(t, final[:len(evs)], evs)
	}
	for _, nodes := range trees {
		assert.Equal(t, finalTree[:len(nodes)], nodes)
	}
}

// TestReviewSeqCompactAndBranchInsideLoop: a Compact and a Branch made
// from the loop body do not change the path being read.
func TestReviewSeqCompactAndBranchInsideLoop(t *testing.T) {
	smallBatches(t)
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	defer s.Close()
	evs := appendN(t, s, id, 12)
	want, err := s.Load(ctx, id)
	require.NoError(t, err)
	var got []Event
	var comp Event
	for ev, err := range s.LoadSeq(ctx, id) {
		require.NoError(t, err)
		if got = append(got, ev); len(got) == 1 {
			comp, err = s.Compact(ctx, id, Compaction{Head: evs[11].ID, FirstKept: evs[9].ID, Summary: Summary{Text: "s"}})
			require.NoError(t, err)
			require.NoError(t, s.Branch(ctx, id, evs[3].ID))
		}
	}
	assert.Equal(t, want, got)
	after, err := collect(t, s.LoadSeq(ctx, id))
	require.NoError(t, err)
	assert.Equal(t, forkIDs(evs[:4]), forkIDs(after), "the path to the Branch selection, read anew")
	require.NoError(t, s.Branch(ctx, id, comp.ID)) // HEAD: the selection is dropped
	after, err = collect(t, s.LoadSeq(ctx, id))
	require.NoError(t, err)
	require.Len(t, after, 4, "the compaction and the events it keeps, read anew")
	assert.Equal(t, KindCompaction, after[0].Kind)
}

// TestReviewSeqReadOnlyBesideWriter: a read-only Store streams a session
// while the writer appends from the loop body, its chunks filling and
// sealing: the iteration yields the path as it was at the start, and
// TreeSeq the nodes up to the event newest then.
func TestReviewSeqReadOnlyBesideWriter(t *testing.T) {
	smallBatches(t)
	ctx := context.Background()
	dir := t.TempDir()
	o := Options{ChunkSize: 2048, BlobThreshold: 300}
	w := apiOpen(t, dir, &o)
	defer w.Close()
	id := apiNewSession(t, w)
	for i := range 30 {
		text := fmt.Sprintf("before %d %s", i, strings.Repeat("b", i%6*30))
		if i%11 == 0 {
			text += strings.Repeat(" blob", 80)
		}
		apiAppend(t, w, id, UserText(text))
	}
	r, _ := roOpen(t, dir, o)
	want, err := r.Load(ctx, id)
	require.NoError(t, err)
	wantTree, err := r.Tree(ctx, id)
	require.NoError(t, err)
	more := func() {
		for range 5 {
			apiAppend(t, w, id, UserText("from the loop "+strings.Repeat("m", 200)))
		}
	}
	var got []Event
	for ev, err := range r.LoadSeq(ctx, id) {
		require.NoError(t, err)
		got = append(got, ev)
		more()
	}
	assert.Equal(t, want, got)
	var nodes []Node
	for n, err := range r.TreeSeq(ctx, id) {
		require.NoError(t, err)
		nodes = append(nodes, n)
		more()
	}
	wantTree2, err := w.Tree(ctx, id)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(nodes), len(wantTree))
	assert.Equal(t, wantTree2[:len(nodes)], nodes)
}
