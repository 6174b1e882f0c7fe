package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// errPowerLoss is what every filesystem operation returns once the
// simulated machine has lost power.
var errPowerLoss = errors.New("simulated power loss")

const (
	crashChunkSize     = 4096
	crashBlobThreshold = 2048 // tool results of 1.5-3.5 KiB are blobs about half the time
)

// crashWorkload is a deterministic mix of the operations a harness makes:
// small and large appends (crossing chunk rotation, blobs and sealing),
// branch switches, compactions, batches, flushes, metadata updates and
// store restarts. It records what was acknowledged.
type crashWorkload struct {
	ops  int
	seed uint64

	created  bool
	session  uuid.UUID
	acked    map[uuid.UUID]Event
	order    []uuid.UUID
	inflight []Event // the append or batch that was under way when power was lost
	names    []string
	pending  string // the metadata update under way

	compactions, batches, flushes int
}

func newCrashWorkload(ops int, seed uint64) *crashWorkload {
	return &crashWorkload{ops: ops, seed: seed, acked: map[uuid.UUID]Event{}}
}

// run executes the workload on m until it finishes or an operation fails.
func (w *crashWorkload) run(m vfs.FS) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(w.seed, 1))
	open := func() *Store {
		o := Options{ChunkSize: crashChunkSize, BlobThreshold: crashBlobThreshold, fs: m}
		s, err := Open(memRoot, &o)
		if err != nil {
			return nil
		}
		return s
	}
	s := open()
	if s == nil {
		return
	}
	w.pending = "crash-0"
	meta, err := s.Create(ctx, Meta{ID: w.session, Name: w.pending})
	if err != nil {
		return
	}
	w.created, w.pending = true, ""
	w.names = append(w.names, meta.Name)
	var (
		head    uuid.UUID // the newest acknowledged event
		pending bool      // a Branch selection is pending
	)
	for i := 0; i < w.ops; i++ {
		var ev Event
		switch x := rng.IntN(100); {
		case x < 55:
			ev = UserText(fmt.Sprintf("op %d: %s", i, strings.Repeat("m", rng.IntN(200))))
		case x < 62:
			ev = ToolCallEvent(ToolCall{CallID: fmt.Sprintf("call-%d", i), Name: "run", Arguments: []byte(`{"n":` + strconv.Itoa(i) + `}`)})
		case x < 75:
			ev = ToolResultEvent(ToolResult{CallID: fmt.Sprintf("call-%d", i), Output: strings.Repeat("o", 1500+rng.IntN(2000))})
		case x < 82:
			if len(w.order) > 0 {
				to := w.order[rng.IntN(len(w.order))]
				if s.Branch(ctx, w.session, to) != nil {
					return
				}
				pending = to != head
			}
			continue
		case x < 85:
			// A compaction of the context so far, keeping HEAD verbatim.
			if pending || head == uuid.Nil {
				continue
			}
			c := Compaction{Summary: Summary{Goals: []string{fmt.Sprint("goal ", i)}, Text: "summary"}, TokensBefore: int64(i), FirstKept: head, Head: head}
			attempt := NewEvent(KindCompaction, RoleNone, CompactionRecord{Summary: c.Summary, TokensBefore: c.TokensBefore, FirstKept: c.FirstKept, Summarized: c.Head})
			w.inflight = []Event{attempt}
			out, err := s.Compact(ctx, w.session, c)
			if err != nil {
				return
			}
			w.inflight = nil
			w.acked[out.ID] = out
			w.order = append(w.order, out.ID)
			head = out.ID
			w.compactions++
			continue
		case x < 93:
			w.pending = fmt.Sprintf("crash-%d", i)
			if _, err := s.UpdateMeta(ctx, w.session, func(m *Meta) { m.Name = w.pending }); err != nil {
				return
			}
			w.names = append(w.names, w.pending)
			w.pending = ""
			continue
		case x < 95:
			// An assistant message and its tool calls, as one batch.
			batch := []Event{AssistantMessage(Message{Content: fmt.Sprint("batch ", i)})}
			for c := range 1 + rng.IntN(3) {
				batch = append(batch, ToolCallEvent(ToolCall{CallID: fmt.Sprintf("call-%d-%d", i, c), Name: "run"}))
			}
			w.inflight = batch
			out, err := s.AppendBatch(ctx, w.session, batch...)
			if err != nil {
				return
			}
			w.inflight = nil
			for _, ev := range out {
				w.acked[ev.ID] = ev
				w.order = append(w.order, ev.ID)
			}
			head, pending = out[len(out)-1].ID, false
			w.batches++
			continue
		case x < 97:
			if s.Flush(ctx, w.session) != nil {
				return
			}
			w.flushes++
			continue
		default:
			if s.Close() != nil {
				return
			}
			if s = open(); s == nil {
				return
			}
			pending = false // a selection lives in memory only
			continue
		}
		w.inflight = []Event{ev}
		out, err := s.Append(ctx, w.session, ev)
		if err != nil {
			return
		}
		w.inflight = nil
		w.acked[out.ID] = out
		w.order = append(w.order, out.ID)
		head, pending = out.ID, false
	}
	if s.Close() != nil {
		return
	}
}

// crashAt runs the workload on a fresh MemFS whose power fails at the k-th
// mutating operation (k = 0: never) and returns the filesystem as it was
// when power failed.
func crashAt(ops int, seed uint64, session uuid.UUID, k int) (*vfs.MemFS, *crashWorkload, int) {
	m := vfs.NewMemFS()
	w := newCrashWorkload(ops, seed)
	w.session = session
	n := 0
	m.SetFault(func(op vfs.Op, path string) error {
		if !vfs.Mutating(op) {
			if k > 0 && n >= k {
				return errPowerLoss
			}
			return nil
		}
		n++
		if k > 0 && n >= k {
			return errPowerLoss
		}
		return nil
	})
	w.run(m)
	m.SetFault(nil)
	return m, w, n
}

// checkCrashState opens a crash clone and checks every promise: it opens;
// every acknowledged event is there, whole; at most the one in-flight event
// is there besides, whole; the tree, HEAD and index agree (Verify is clean
// and has nothing left to repair); the metadata is one that was written;
// and a second reconciliation changes nothing.
func checkCrashState(t *testing.T, fsys *vfs.MemFS, w *crashWorkload) {
	t.Helper()
	ctx := context.Background()
	s := openMem(t, fsys, Options{ChunkSize: crashChunkSize, BlobThreshold: crashBlobThreshold})
	metas, err := s.List(ctx)
	require.NoError(t, err)
	if !w.created {
		// Create was not acknowledged: the session is absent or whole.
		require.LessOrEqual(t, len(metas), 1)
		if len(metas) == 0 {
			require.NoError(t, s.Close())
			return
		}
	}
	require.Len(t, metas, 1)
	tree, err := s.Tree(ctx, w.session)
	require.NoError(t, err, "the session opens undamaged")
	present := map[uuid.UUID]Node{}
	for _, n := range tree {
		present[n.ID] = n
	}
	for _, id := range w.order {
		want := w.acked[id]
		got, err := s.Event(ctx, w.session, id)
		require.NoError(t, err, "acknowledged event %s", id)
		got, err = s.Resolve(ctx, w.session, got)
		require.NoError(t, err, "blob of acknowledged event %s", id)
		require.Equal(t, want.ParentID, got.ParentID)
		require.Equal(t, want.BranchFrom, got.BranchFrom)
		require.Equal(t, string(want.Record), string(got.Record))
		require.True(t, want.Time.Equal(got.Time))
	}
	extra := len(tree) - len(w.order)
	require.GreaterOrEqual(t, extra, 0)
	require.LessOrEqual(t, extra, len(w.inflight), "only the in-flight append or batch may survive unacknowledged")
	if extra > 0 {
		// The unacknowledged events come last in log order: a prefix of
		// the batch in flight, each whole.
		var unacked []Node
		for _, n := range tree {
			if _, ok := w.acked[n.ID]; !ok {
				unacked = append(unacked, n)
			}
		}
		require.Len(t, unacked, extra)
		for i, n := range unacked {
			got, err := s.Event(ctx, w.session, n.ID)
			require.NoError(t, err)
			got, err = s.Resolve(ctx, w.session, got)
			require.NoError(t, err)
			want, err := prepareRecord(w.inflight[i], DefaultMaxRecordSize)
			require.NoError(t, err)
			require.Equal(t, string(want), string(got.Record), "in-flight event %d is whole", i)
			if i > 0 {
				require.Equal(t, unacked[i-1].ID, n.ParentID, "the batch's events chain")
			}
		}
	}
	head, err := s.Head(ctx, w.session)
	require.NoError(t, err)
	if len(tree) > 0 {
		require.Equal(t, tree[len(tree)-1].ID, head)
	}
	r, err := s.Verify(ctx, w.session)
	require.NoError(t, err)
	require.True(t, r.OK(), "%v", r.Problems)
	require.Empty(t, r.Repairs)
	require.Equal(t, len(tree), r.Indexed)
	meta, err := s.Meta(ctx, w.session)
	require.NoError(t, err)
	names := append([]string{w.pending}, w.names...)
	require.Contains(t, names, meta.Name)
	require.NoError(t, s.Close())

	settled := fsys.String()
	s = openMem(t, fsys, Options{ChunkSize: crashChunkSize, BlobThreshold: crashBlobThreshold})
	_, err = s.Head(ctx, w.session)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Equal(t, settled, fsys.String(), "a second reconciliation changes nothing")
}

// TestCrashPoints loses power at every mutating filesystem operation of a
// 250-operation workload, under every crash mode, and checks each state.
// SESSIONSTORE_CRASH_STATES raises the number of states (more random seeds
// per crash point), e.g. 100000 for a long run.
func TestCrashPoints(t *testing.T) {
	const ops = 250
	session := uuid.MustParse("01a02f3f-0000-7000-8000-00000000c0de")
	_, full, total := crashAt(ops, 42, session, 0)
	require.True(t, full.created)
	require.Nil(t, full.inflight, "the workload runs to the end without a crash")
	require.GreaterOrEqual(t, len(full.order), 150)
	blobs := 0
	for _, ev := range full.acked {
		if ev.Digest != "" {
			blobs++
		}
	}
	require.Greater(t, blobs, 10, "the workload writes blobs")
	require.Greater(t, full.compactions, 2, "the workload compacts")
	require.Greater(t, full.batches, 2, "the workload appends batches")
	require.Greater(t, full.flushes, 0, "the workload flushes")

	target := 5000
	if v := os.Getenv("SESSIONSTORE_CRASH_STATES"); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err)
		target = n
	}
	// Every crash point is checked under every mode at least once; random
	// modes get more seeds until the target is reached.
	perPoint := max(len(vfs.CrashModes), (target+total-1)/total)
	states := 0
	for k := 1; k <= total; k++ {
		m, w, _ := crashAt(ops, 42, session, k)
		for j := 0; j < perPoint; j++ {
			mode := vfs.CrashModes[j%len(vfs.CrashModes)]
			checkCrashState(t, m.CrashClone(mode, uint64(k*1000+j)), w)
			states++
		}
		if t.Failed() {
			t.Fatalf("crash point %d of %d failed", k, total)
		}
	}
	t.Logf("crash states checked: %d (%d crash points x %d modes/seeds); workload: %d operations, %d events acknowledged, %d compactions, %d batches, %d flushes", states, total, states/total, ops, len(full.order), full.compactions, full.batches, full.flushes)
	require.GreaterOrEqual(t, states, target)
}

// TestFaultInjection fails the n-th write, sync, rename or create with EIO
// or ENOSPC, for every n the workload reaches, and keeps the workload going
// after the failure. A failed append is not acknowledged; after a failed
// sync the session refuses writes (sticky) while acknowledged events stay
// readable; after reopening, and after a power loss, every acknowledged
// event is there.
func TestFaultInjection(t *testing.T) {
	ctx := context.Background()
	cases := 0
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpCreate, vfs.OpSyncDir} {
		for _, injected := range []error{syscall.EIO, syscall.ENOSPC} {
			for n := 1; ; n++ {
				m := vfs.NewMemFS()
				fault := vfs.FailNth(n, injected, op)
				m.SetFault(fault.Hook)
				o := Options{ChunkSize: 2048, fs: m}
				s, err := Open(memRoot, &o)
				if err != nil {
					require.ErrorIs(t, err, injected)
					continue
				}
				meta, err := s.Create(ctx, Meta{Name: "faults"})
				if err != nil {
					require.ErrorIs(t, err, injected)
					s.Close()
					continue
				}
				var (
					acked  []Event
					sticky bool
				)
				for i := 0; i < 40; i++ {
					var err error
					if i%10 == 9 {
						_, err = s.UpdateMeta(ctx, meta.ID, func(m *Meta) { m.Name = fmt.Sprint("faults-", i) })
					} else {
						var ev Event
						ev, err = s.Append(ctx, meta.ID, UserText(fmt.Sprintf("event %d %s", i, strings.Repeat("x", i*37))))
						if err == nil {
							acked = append(acked, ev)
						}
					}
					if sticky {
						require.ErrorIs(t, err, ErrSessionFailed, "writes stay refused after a failed sync")
					}
					if err != nil && !errors.Is(err, ErrSessionFailed) {
						require.ErrorIs(t, err, injected)
						if op == vfs.OpSync || op == vfs.OpSyncDir {
							// Never retry a failed sync: the session stops writing.
							require.ErrorIs(t, s.checkWritable(meta.ID), ErrSessionFailed, "%s #%d", op, n)
							sticky = true
						}
						if op == vfs.OpRename {
							sticky = sticky || errors.Is(s.checkWritable(meta.ID), ErrSessionFailed)
						}
					}
				}
				// Acknowledged events stay readable before reopening.
				for _, ev := range acked {
					got, err := s.Event(ctx, meta.ID, ev.ID)
					require.NoError(t, err)
					require.Equal(t, string(ev.Record), string(got.Record))
				}
				powerLoss := m.CrashClone(vfs.KeepSynced, uint64(n))
				s.Close()
				m.SetFault(nil)
				for _, fsys := range []*vfs.MemFS{m, powerLoss} {
					s2 := openMem(t, fsys, Options{ChunkSize: 2048})
					for _, ev := range acked {
						got, err := s2.Event(ctx, meta.ID, ev.ID)
						require.NoError(t, err, "%s #%d %v: acknowledged event lost", op, n, injected)
						require.Equal(t, string(ev.Record), string(got.Record))
					}
					r, err := s2.Verify(ctx, meta.ID)
					require.NoError(t, err)
					require.True(t, r.OK(), "%v", r.Problems)
					require.NoError(t, s2.Close())
				}
				cases++
				if !fault.Fired() {
					break // n is past the workload's last such operation
				}
			}
		}
	}
	t.Logf("fault injection runs: %d", cases)
}

// checkWritable reports whether the session's handle refuses writes.
func (s *Store) checkWritable(id uuid.UUID) error {
	s.mu.Lock()
	h := s.sessions[id]
	s.mu.Unlock()
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writable()
}
