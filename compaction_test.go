package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// ids returns the ids of evs.
func ids(evs []Event) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

func TestCompactLoadBoundaries(t *testing.T) {
	ctx := context.Background()
	type tc struct {
		name string
		// run builds a session and returns the expected results of Load
		// and of FullPath from the root.
		run func(t *testing.T, s *Store, id uuid.UUID) (load, full []uuid.UUID)
	}
	cat := func(parts ...[]uuid.UUID) []uuid.UUID {
		var out []uuid.UUID
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	one := func(ev Event) []uuid.UUID { return []uuid.UUID{ev.ID} }
	cases := []tc{
		{"without FirstKept", func(t *testing.T, s *Store, id uuid.UUID) ([]uuid.UUID, []uuid.UUID) {
			evs := appendN(t, s, id, 5)
			c, err := s.Compact(ctx, id, Compaction{Summary: Summary{Text: "s"}, Head: evs[4].ID})
			require.NoError(t, err)
			after := appendN(t, s, id, 2)
			return cat(one(c), ids(after)), cat(ids(evs), one(c), ids(after))
		}},
		{"with FirstKept", func(t *testing.T, s *Store, id uuid.UUID) ([]uuid.UUID, []uuid.UUID) {
			evs := appendN(t, s, id, 5)
			c, err := s.Compact(ctx, id, Compaction{Summary: Summary{Text: "s"}, Head: evs[4].ID, FirstKept: evs[3].ID})
			require.NoError(t, err)
			after := appendN(t, s, id, 2)
			return cat(one(c), ids(evs[3:]), ids(after)), cat(ids(evs), one(c), ids(after))
		}},
		{"FirstKept not on the path", func(t *testing.T, s *Store, id uuid.UUID) ([]uuid.UUID, []uuid.UUID) {
			evs := appendN(t, s, id, 3)
			require.NoError(t, s.Branch(ctx, id, evs[0].ID))
			other := appendN(t, s, id, 2)
			// A compaction appended by hand, naming an event of the other branch.
			require.NoError(t, s.Branch(ctx, id, evs[2].ID))
			c, err := s.Append(ctx, id, NewEvent(KindCompaction, RoleNone, CompactionRecord{Summary: Summary{Text: "s"}, FirstKept: other[0].ID}))
			require.NoError(t, err)
			after := appendN(t, s, id, 1)
			return cat(one(c), ids(after)), cat(ids(evs), one(c), ids(after))
		}},
		{"nested compactions: the newest wins", func(t *testing.T, s *Store, id uuid.UUID) ([]uuid.UUID, []uuid.UUID) {
			evs := appendN(t, s, id, 3)
			c1, err := s.Compact(ctx, id, Compaction{Head: evs[2].ID, FirstKept: evs[1].ID})
			require.NoError(t, err)
			mid := appendN(t, s, id, 3)
			c2, err := s.Compact(ctx, id, Compaction{Head: mid[2].ID, FirstKept: mid[2].ID})
			require.NoError(t, err)
			after := appendN(t, s, id, 1)
			return cat(one(c2), ids(mid[2:]), ids(after)), cat(ids(evs), one(c1), ids(mid), one(c2), ids(after))
		}},
		{"a compaction on one branch does not affect another", func(t *testing.T, s *Store, id uuid.UUID) ([]uuid.UUID, []uuid.UUID) {
			evs := appendN(t, s, id, 4)
			_, err := s.Compact(ctx, id, Compaction{Head: evs[3].ID})
			require.NoError(t, err)
			require.NoError(t, s.Branch(ctx, id, evs[1].ID))
			other := appendN(t, s, id, 2)
			return cat(ids(evs[:2]), ids(other)), cat(ids(evs[:2]), ids(other))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, s, id := memSession(t, Options{})
			want, wantFull := c.run(t, s, id)
			got, err := s.Load(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, want, ids(got))
			// The whole history stays on disk and FullPath walks it, from
			// the root, through every compaction.
			full, err := s.FullPath(ctx, id, uuid.Nil)
			require.NoError(t, err)
			assert.Equal(t, wantFull, ids(full))
			// The same after reopening.
			require.NoError(t, s.Close())
			s2 := openMem(t, m, Options{})
			defer s2.Close()
			again, err := s2.Load(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, want, ids(again))
			full, err = s2.FullPath(ctx, id, uuid.Nil)
			require.NoError(t, err)
			assert.Equal(t, wantFull, ids(full))
		})
	}
}

// TestCompactRefusals: a refused Compact writes nothing, also when its
// summary is over the blob threshold (checked before the blob is written).
func TestCompactRefusals(t *testing.T) {
	ctx := context.Background()
	for name, sum := range map[string]Summary{
		"small summary": {},
		"blob summary":  {Text: strings.Repeat("summary text ", 3000)},
	} {
		t.Run(name, func(t *testing.T) {
			m, s, id := memSession(t, Options{})
			defer s.Close()
			evs := appendN(t, s, id, 3)
			before := m.String()

			_, err := s.Compact(ctx, id, Compaction{Summary: sum, Head: evs[1].ID})
			assert.ErrorIs(t, err, ErrHeadMoved)
			_, err = s.Compact(ctx, id, Compaction{Summary: sum})
			assert.ErrorIs(t, err, ErrInvalidEvent)
			assert.NotErrorIs(t, err, ErrHeadMoved, "a missing Head is not a moved one")
			assert.Contains(t, err.Error(), "Compaction.Head is not set")
			_, err = s.Compact(ctx, id, Compaction{Summary: sum, Head: evs[2].ID, FirstKept: uuid.New()})
			assert.ErrorIs(t, err, ErrInvalidEvent)
			require.NoError(t, s.Branch(ctx, id, evs[0].ID))
			_, err = s.Compact(ctx, id, Compaction{Summary: sum, Head: evs[2].ID})
			assert.ErrorIs(t, err, ErrHeadMoved, "a Branch selection ends the active path elsewhere")
			assert.Equal(t, before, m.String(), "nothing was written")

			require.NoError(t, s.Branch(ctx, id, evs[2].ID)) // back to HEAD: no switch
			c, err := s.Compact(ctx, id, Compaction{Summary: sum, Head: evs[2].ID})
			require.NoError(t, err)
			assert.Equal(t, sum.Text != "", c.Digest != "", "the long summary is a blob")
			c, err = s.Resolve(ctx, id, c)
			require.NoError(t, err)
			assert.NotContains(t, string(c.Record), "first_kept", "no FirstKept, no member")
			rec, err := c.Compaction()
			require.NoError(t, err)
			assert.Equal(t, evs[2].ID, rec.Summarized)
			assert.Equal(t, uuid.Nil, rec.FirstKept)
		})
	}
}

type failingSummarizer struct{ err error }

func (f failingSummarizer) Summarize(context.Context, []Event) (Summary, error) {
	return Summary{}, f.err
}

// movingSummarizer appends an event while it "summarizes", as another
// writer would while a slow model runs.
type movingSummarizer struct {
	s  *Store
	id uuid.UUID
}

func (m movingSummarizer) Summarize(ctx context.Context, _ []Event) (Summary, error) {
	_, err := m.s.Append(ctx, m.id, UserText("meanwhile"))
	return Summary{Text: "late"}, err
}

func TestCompactWith(t *testing.T) {
	ctx := context.Background()
	t.Run("summarizer failure leaves no trace", func(t *testing.T) {
		m, s, id := memSession(t, Options{})
		defer s.Close()
		appendN(t, s, id, 4)
		before := m.String()
		boom := errors.New("model unavailable")
		_, err := s.CompactWith(ctx, id, failingSummarizer{boom}, CompactOptions{})
		assert.ErrorIs(t, err, boom)
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		_, err = s.CompactWith(cancelled, id, testSummarizer{}, CompactOptions{})
		assert.ErrorIs(t, err, context.Canceled)
		assert.Equal(t, before, m.String())
		// A retry works.
		c, err := s.CompactWith(ctx, id, testSummarizer{}, CompactOptions{})
		require.NoError(t, err)
		assert.Equal(t, KindCompaction, c.Kind)
	})
	t.Run("HEAD moved while summarizing", func(t *testing.T) {
		_, s, id := memSession(t, Options{})
		defer s.Close()
		appendN(t, s, id, 3)
		_, err := s.CompactWith(ctx, id, movingSummarizer{s, id}, CompactOptions{})
		assert.ErrorIs(t, err, ErrHeadMoved)
		tree, err := s.Tree(ctx, id)
		require.NoError(t, err)
		assert.Len(t, tree, 4, "only the concurrent append landed")
	})
	t.Run("kept tail never starts at an orphaned tool result", func(t *testing.T) {
		_, s, id := memSession(t, Options{})
		defer s.Close()
		appendN(t, s, id, 3)
		call, err := s.Append(ctx, id, ToolCallEvent(ToolCall{CallID: "c1", Name: "run"}))
		require.NoError(t, err)
		res, err := s.Append(ctx, id, ToolResultEvent(ToolResult{CallID: "c1", Output: "ok"}))
		require.NoError(t, err)
		last, err := s.Append(ctx, id, AssistantText("done"))
		require.NoError(t, err)
		tokens := func(Event) int64 { return 10 }
		for _, tc := range []struct {
			budget int64
			want   []uuid.UUID
		}{
			{0, nil},
			{10, []uuid.UUID{last.ID}},
			{20, []uuid.UUID{last.ID}}, // the result alone would lose its call
			{30, []uuid.UUID{call.ID, res.ID, last.ID}},
		} {
			path, err := s.Load(ctx, id)
			require.NoError(t, err)
			cut := keptStart(path, tc.budget, tokens)
			assert.Equal(t, tc.want, nonNil(ids(path[cut:])), "budget %d", tc.budget)
		}
		c, err := s.CompactWith(ctx, id, testSummarizer{}, CompactOptions{KeepTokens: 30, Tokens: tokens})
		require.NoError(t, err)
		rec, err := c.Compaction()
		require.NoError(t, err)
		assert.Equal(t, call.ID, rec.FirstKept)
		assert.Equal(t, int64(60), rec.TokensBefore)
		// testSummarizer saw the three messages before the kept tail, and
		// took the first user message as the goal.
		assert.Equal(t, Summary{Goals: []string{"message 0 "}, Text: `3 events summarized: {"message":3}`}, rec.Summary)
		got, err := s.Load(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, []uuid.UUID{c.ID, call.ID, res.ID, last.ID}, ids(got))
	})
}

func nonNil(ids []uuid.UUID) []uuid.UUID {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

func TestShouldCompact(t *testing.T) {
	for _, tc := range []struct {
		used, window int64
		threshold    float64
		want         bool
	}{
		{79, 100, 0, false},
		{80, 100, 0, true},
		{50, 100, 0.5, true},
		{49, 100, 0.5, false},
		{100, 0, 0, false},
		{160_000, 200_000, 0, true},
	} {
		assert.Equal(t, tc.want, ShouldCompact(tc.used, tc.window, tc.threshold), "%+v", tc)
	}
}

func TestBranchSummary(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	defer s.Close()
	evs := appendN(t, s, id, 3)
	require.NoError(t, s.Branch(ctx, id, evs[0].ID))
	oldBranch := appendN(t, s, id, 3)

	left, err := s.Abandoned(ctx, id, evs[1].ID)
	require.NoError(t, err)
	assert.Equal(t, ids(oldBranch), ids(left), "from old HEAD back to the common ancestor, oldest first")
	none, err := s.Abandoned(ctx, id, oldBranch[2].ID)
	require.NoError(t, err)
	assert.Empty(t, none)

	sum, err := testSummarizer{}.Summarize(ctx, left)
	require.NoError(t, err)
	bs, err := s.AppendBranchSummary(ctx, id, evs[1].ID, BranchSummaryRecord{Summary: sum})
	require.NoError(t, err)
	assert.Equal(t, KindBranchSummary, bs.Kind)
	assert.Equal(t, evs[1].ID, bs.ParentID)
	assert.Equal(t, evs[1].ID, bs.BranchFrom)
	rec, err := bs.BranchSummary()
	require.NoError(t, err)
	assert.Equal(t, oldBranch[2].ID, rec.AbandonedHead)
	head, err := s.Head(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, bs.ID, head)
	next, err := s.Append(ctx, id, UserText("continue"))
	require.NoError(t, err)
	path, err := s.Load(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{evs[0].ID, evs[1].ID, bs.ID, next.ID}, ids(path))
}

// TestCompactedLoadReadsTheTail: a 20,000-event session (about 3 MB of
// chunks) compacted near its end loads by reading O(tail) records,
// counted through the seam: about 70 records' bytes, under 40 KB,
// whatever the session's length. (BenchmarkOpenLoad loads paths of a
// 100,000-event session; 20,000 here keep the race run short.)
func TestCompactedLoadReadsTheTail(t *testing.T) {
	t.Parallel() // CPU-bound on a MemFS of its own, like the other parallel tests
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 1 << 20, Compression: CompressionNone, fs: noSyncFS{m}}
	s, err := Open(memRoot, &o)
	require.NoError(t, err)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	// The events go in batches of a thousand, which builds the same events
	// in less time than one Append each.
	const total, batchSize = 20_000, 1000
	var kept, head uuid.UUID
	batch := make([]Event, 0, batchSize)
	for i := 0; i < total; i += batchSize {
		batch = batch[:0]
		for j := i; j < min(i+batchSize, total); j++ {
			batch = append(batch, UserText(fmt.Sprintf("event %d %s", j, strings.Repeat("x", 100))))
		}
		out, err := s.AppendBatch(ctx, meta.ID, batch...)
		require.NoError(t, err)
		require.Len(t, out, len(batch))
		for j, ev := range out {
			if i+j == total-50 {
				kept = ev.ID
			}
			head = ev.ID
		}
	}
	_, err = s.Compact(ctx, meta.ID, Compaction{Summary: Summary{Text: "all of it"}, Head: head, FirstKept: kept})
	require.NoError(t, err)
	appendN(t, s, meta.ID, 20)
	require.NoError(t, s.Close())

	counting := vfs.NewCounting(m)
	s = openMem(t, counting, Options{Compression: CompressionNone})
	defer s.Close()
	_, err = s.Tree(ctx, meta.ID) // open and load the index
	require.NoError(t, err)
	counting.Reset()
	path, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	require.Len(t, path, 1+50+20)
	var read int64
	for p, st := range counting.Stats() {
		require.Contains(t, p, string(filepath.Separator)+chunksDir+string(filepath.Separator))
		read += st.Bytes
	}
	t.Logf("Load of the compacted %d-event session read %d bytes for %d events", total, read, len(path))
	assert.Less(t, read, int64(100*400), "about the tail's records, not the session's")
}

// recordingSummarizer remembers the events it was asked to summarize.
type recordingSummarizer struct{ got []Event }

func (r *recordingSummarizer) Summarize(_ context.Context, evs []Event) (Summary, error) {
	r.got = append([]Event(nil), evs...)
	return Summary{Text: "second"}, nil
}

// TestCompactWithOverKeptEvents: CompactWith on a context that starts at a
// compaction which kept events verbatim. Those events come before that
// compaction in the tree, so a kept tail starting among them would run
// through it: the new kept tail starts after it, and Load's context holds
// the old compaction only in the summarized part.
func TestCompactWithOverKeptEvents(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	defer s.Close()
	evs := appendN(t, s, id, 6)
	c1, err := s.Compact(ctx, id, Compaction{Summary: Summary{Text: "first"}, Head: evs[5].ID, FirstKept: evs[3].ID})
	require.NoError(t, err)
	after := appendN(t, s, id, 2)
	before, err := s.Load(ctx, id)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{c1.ID, evs[3].ID, evs[4].ID, evs[5].ID, after[0].ID, after[1].ID}, ids(before))

	sum := &recordingSummarizer{}
	c2, err := s.CompactWith(ctx, id, sum, CompactOptions{KeepTokens: 1 << 30})
	require.NoError(t, err)
	assert.Equal(t, ids(before[:4]), ids(sum.got), "the old compaction and the events it kept are summarized")
	got, err := s.Load(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{c2.ID, after[0].ID, after[1].ID}, ids(got))
}

// TestCompactWithParallelToolCalls: two tool calls, then their two results.
// A kept tail never holds a result without its call: a budget that would
// keep the second call and both results leaves out the first call, so the
// first result goes, and then the second call, so the second result goes
// too; a budget that covers both calls keeps the turn from them on.
func TestCompactWithParallelToolCalls(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		keep  int // events the budget covers, from the end
		first int // index in turn of the first event kept, len(turn) for none
	}{
		{"second call and both results", 3, 5},
		{"both results", 2, 5},
		{"both calls and results", 4, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, s, id := memSession(t, Options{})
			defer s.Close()
			turn := []Event{
				AssistantText("I will read both files."),
				ToolCallEvent(ToolCall{CallID: "c1", Name: "read", Arguments: json.RawMessage(`{"path":"a"}`)}),
				ToolCallEvent(ToolCall{CallID: "c2", Name: "read", Arguments: json.RawMessage(`{"path":"b"}`)}),
				ToolResultEvent(ToolResult{CallID: "c1", Output: "a"}),
				ToolResultEvent(ToolResult{CallID: "c2", Output: "b"}),
			}
			appended, err := s.AppendBatch(ctx, id, append([]Event{UserText("read a and b")}, turn...)...)
			require.NoError(t, err)
			appended = appended[1:]
			// One token per event: the budget covers exactly tc.keep.
			one := func(Event) int64 { return 1 }
			c, err := s.CompactWith(ctx, id, testSummarizer{}, CompactOptions{KeepTokens: int64(tc.keep), Tokens: one})
			require.NoError(t, err)
			got, err := s.Load(ctx, id)
			require.NoError(t, err)
			want := append([]uuid.UUID{c.ID}, ids(appended[tc.first:])...)
			assert.Equal(t, want, ids(got))
		})
	}
}
