package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

const (
	crashChunkSize     = 4096
	crashBlobThreshold = 2048 // tool results of 1.5-3.5 KiB are blobs about half the time
	// crashStringThreshold splits the tool results of 2.7 and 3.1 KiB,
	// whose outputs repeat: split blobs, some sharing a string blob.
	crashStringThreshold = 2600
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

// run executes the workload on m until it finishes or an operation fails,
// and closes its store either way, so that no goroutine of the store (a
// background sealer, say) outlives it.
func (w *crashWorkload) run(m vfs.FS) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(w.seed, 1))
	open := func() *Store {
		o := Options{ChunkSize: crashChunkSize, BlobThreshold: crashBlobThreshold, StringThreshold: crashStringThreshold, fs: m}
		s, err := Open(memRoot, &o)
		if err != nil {
			return nil
		}
		return s
	}
	var s *Store
	defer func() {
		if s != nil {
			s.Close() // idempotent; after a power cut it fails and changes nothing
		}
	}()
	s = open()
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
			ev = ToolResultEvent(ToolResult{CallID: fmt.Sprintf("call-%d", i), Output: strings.Repeat("o", 1500+rng.IntN(2000)/400*400)})
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
// mutating operation (k = 0: never) and returns the filesystem frozen as it
// was when the power failed, the workload, and the number of mutating
// operations that reached the filesystem (k itself when the power failed
// at the k-th).
//
// The power cut freezes the MemFS: the k-th operation and every later one
// fail and change nothing, so the store the workload closes afterwards,
// and its background sealer, cannot write past the crash, and every crash
// clone of the point comes from the one frozen state. A workload that ends
// before its k-th operation (their number varies by a few between runs,
// with the sealer's timing) loses power at its end.
func crashAt(ops int, seed uint64, session uuid.UUID, k int) (*vfs.MemFS, *crashWorkload, int) {
	m := vfs.NewMemFS()
	w := newCrashWorkload(ops, seed)
	w.session = session
	n := 0
	m.SetFault(func(op vfs.Op, path string) error {
		if !vfs.Mutating(op) {
			return nil
		}
		n++
		if n == k {
			return vfs.ErrPowerLoss
		}
		return nil
	})
	w.run(m)
	m.PowerOff()
	return m, w, n
}

// frozenState describes all of m that a crash clone is made from: the
// current tree, and the clones that keep every write and only the synced
// ones (their directory entries are the synced ones).
func frozenState(m *vfs.MemFS) string {
	return m.String() + "-- keep-all:\n" + m.CrashClone(vfs.KeepAll, 0).String() + "-- keep-synced:\n" + m.CrashClone(vfs.KeepSynced, 0).String()
}

// requireFrozen checks that crash point k's filesystem, from crashAt with
// n mutating operations seen, lost power at the crash and that nothing can
// change it any more: an operation fails, even with no fault hook, and
// leaves the state as it was.
func requireFrozen(t *testing.T, m *vfs.MemFS, k, n int) {
	t.Helper()
	before := frozenState(m)
	m.SetFault(nil)
	f, err := m.OpenFile("/after-the-crash", os.O_RDWR|os.O_CREATE, 0o600)
	if err == nil {
		f.Close()
	}
	require.ErrorIs(t, err, vfs.ErrPowerLoss, "crash point %d: the filesystem takes writes after the power loss", k)
	require.Equal(t, before, frozenState(m), "crash point %d: the filesystem changed after the power loss", k)
	require.LessOrEqual(t, n, k, "crash point %d: mutating operations reached the filesystem after the power loss", k)
	cut := m.PowerCut()
	require.ErrorIs(t, cut, vfs.ErrPowerLoss, "crash point %d: the power is cut", k)
	var pe *fs.PathError
	require.ErrorAs(t, cut, &pe)
	if n == k {
		require.True(t, vfs.Mutating(vfs.Op(pe.Op)), "crash point %d: cut at %s %s", k, pe.Op, pe.Path)
	}
}

// checkCrashState opens a crash clone and checks every promise: it opens;
// every acknowledged event is there, whole; at most the one in-flight event
// is there besides, whole; the tree, HEAD and index agree (Verify is clean
// and has nothing left to repair); the metadata is the last acknowledged
// or the one in flight; and a second reconciliation changes nothing.
func checkCrashState(t *testing.T, fsys *vfs.MemFS, w *crashWorkload) {
	t.Helper()
	ctx := context.Background()
	s := openMem(t, fsys, Options{ChunkSize: crashChunkSize, BlobThreshold: crashBlobThreshold, StringThreshold: crashStringThreshold})
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
	// Not just any name ever written: the last acknowledged one, or the
	// one in flight (an UpdateMeta, or the Create, under way).
	var want []string
	if len(w.names) > 0 {
		want = append(want, w.names[len(w.names)-1])
	}
	if w.pending != "" {
		want = append(want, w.pending)
	}
	require.Contains(t, want, meta.Name, "session.json lost an acknowledged update (names written: %q)", w.names)
	require.NoError(t, s.Close())

	settled := fsys.String()
	s = openMem(t, fsys, Options{ChunkSize: crashChunkSize, BlobThreshold: crashBlobThreshold, StringThreshold: crashStringThreshold})
	_, err = s.Head(ctx, w.session)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Equal(t, settled, fsys.String(), "a second reconciliation changes nothing")
}

// crashStatesEnv sizes TestCrashPoints; crashStatesDefault is its default.
const (
	crashStatesEnv     = "SESSIONSTORE_CRASH_STATES"
	crashStatesDefault = 240
)

// TestCrashPoints loses power at mutating filesystem operations of a
// 250-operation workload (about 1,290 crash points), under every crash
// mode, and checks each state.
//
// SESSIONSTORE_CRASH_STATES sets the number of states. By default (240)
// the test samples 40 crash points evenly across the whole workload, the
// first and the last included (about every 32nd), and checks each under
// every crash mode: every mode, and every stretch of the workload, is
// covered, though not every operation. "all", or any number of at least
// crash points x modes (about 7,750), checks every crash point under every
// mode, as .ci/run's long step does; a larger number adds random seeds per
// crash point, e.g. 100000.
func TestCrashPoints(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	const ops = 250
	session := uuid.MustParse("01a02f3f-0000-7000-8000-00000000c0de")
	fullFS, full, total := crashAt(ops, 42, session, 0)
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
	split, all := 0, 0
	after := fullFS.CrashClone(vfs.KeepAll, 0) // the files as the workload left them, readable
	for _, f := range blobFiles(t, after, session) {
		b, err := vfs.ReadFile(after, f)
		require.NoError(t, err)
		all++
		if blob.IsSplit(b) {
			split++
		}
	}
	// The outputs split repeat: two strings serve every split blob.
	require.Greater(t, split, 5, "the workload writes split blobs")
	require.Greater(t, all-split, 2, "and whole blobs beside the split ones' strings")
	t.Logf("blob files: %d split, %d whole or strings", split, all-split)
	require.Greater(t, full.compactions, 2, "the workload compacts")
	require.Greater(t, full.batches, 2, "the workload appends batches")
	require.Greater(t, full.flushes, 0, "the workload flushes")

	modes := len(vfs.CrashModes)
	target := testSize(t, crashStatesEnv, crashStatesDefault, total*modes)
	// points are the crash points checked: all of them when the target
	// allows every point under every mode, else target/modes of them,
	// evenly spread from the first to the last. Each is checked under
	// every mode; with every point covered, random modes get more seeds
	// until the target is reached.
	points := total
	if target < total*modes {
		points = min(total, max(2, (target+modes-1)/modes))
	}
	perPoint := max(modes, (target+points-1)/points)
	states := 0
	for i := range points {
		k := 1 + i*(total-1)/max(1, points-1)
		m, w, n := crashAt(ops, 42, session, k)
		requireFrozen(t, m, k, n)
		frozen := frozenState(m)
		var clones []string // the first clone of each mode, as taken
		for j := 0; j < perPoint; j++ {
			mode := vfs.CrashModes[j%modes]
			c := m.CrashClone(mode, uint64(k*1000+j))
			if j < modes {
				clones = append(clones, c.String())
			}
			checkCrashState(t, c, w)
			states++
		}
		// All the clones came from one state: checking them changed
		// nothing, and each is made again the same.
		require.Equal(t, frozen, frozenState(m), "crash point %d: the filesystem changed while its clones were checked", k)
		for j, want := range clones {
			require.Equal(t, want, m.CrashClone(vfs.CrashModes[j], uint64(k*1000+j)).String(), "crash point %d, %s: a clone made again differs", k, vfs.CrashModes[j])
		}
		if t.Failed() {
			t.Fatalf("crash point %d of %d failed", k, total)
		}
	}
	t.Logf("crash states checked: %d (%d of %d crash points x %d modes/seeds); workload: %d operations, %d events acknowledged, %d compactions, %d batches, %d flushes",
		states, points, total, perPoint, ops, len(full.order), full.compactions, full.batches, full.flushes)
	if points < total {
		t.Logf("a sample: %s=all checks every crash point under every mode (%d states)", crashStatesEnv, total*modes)
	}
	require.GreaterOrEqual(t, states, target)
}

// faultRunsEnv sizes TestFaultInjection; faultRunsDefault is its default.
const (
	faultRunsEnv     = "SESSIONSTORE_FAULT_RUNS"
	faultRunsDefault = 100
)

// TestFaultInjection fails the n-th write, sync, rename or create with EIO
// or ENOSPC and keeps the workload going after the failure. A failed
// append is not acknowledged; after a failed sync the session refuses
// writes (sticky) while acknowledged events stay readable; after
// reopening, and after a power loss, every acknowledged event is there.
//
// For each operation and error, a first run without a fault counts the
// operations of that kind the workload makes (c); then n runs from 1 to c,
// and on while the fault still fires (c can differ by one between runs).
// SESSIONSTORE_FAULT_RUNS sets the number of runs: by default about 100,
// n going up in steps of s (the smallest that keeps within the number,
// about 11) and taking c itself, so the first and the last operation of
// every kind fail, and a sample between. "all", or a number of at least
// one run per n (about 720 runs), tries every n, as .ci/run's long step
// does.
func TestFaultInjection(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	ctx := context.Background()
	// run makes one run in which the n-th op fails with injected (none
	// if n is 0). It returns the fault, which counted the operations of
	// that kind, and whether the run got past Open and Create.
	run := func(op vfs.Op, injected error, n int) (*vfs.NthFault, bool) {
		m := vfs.NewMemFS()
		fault := vfs.FailNth(n, injected, op)
		m.SetFault(fault.Hook)
		o := Options{ChunkSize: 2048, fs: m}
		s, err := Open(memRoot, &o)
		if err != nil {
			require.ErrorIs(t, err, injected)
			return fault, false
		}
		meta, err := s.Create(ctx, Meta{Name: "faults"})
		if err != nil {
			require.ErrorIs(t, err, injected)
			s.Close()
			return fault, false
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
		return fault, true
	}

	type pair struct {
		op       vfs.Op
		injected error
		count    int // operations of the kind in a run without a fault
	}
	var (
		pairs      []pair
		runs       int // every run
		pastCreate int // the runs that got past Open and Create
		fired      int // the runs whose fault fired
	)
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpCreate, vfs.OpSyncDir} {
		for _, injected := range []error{syscall.EIO, syscall.ENOSPC} {
			fault, created := run(op, injected, 0)
			require.True(t, created, "%s: the workload runs without a fault", op)
			runs, pastCreate = runs+1, pastCreate+1
			pairs = append(pairs, pair{op, injected, fault.Count()})
		}
	}
	// runsWith is about the number of runs a stride makes: per pair the
	// run without a fault, then n = 1, 1+stride, ... below count, count,
	// and count+1 (which fires rarely, and then ends the pair).
	runsWith := func(stride int) int {
		sum := 0
		for _, p := range pairs {
			sum++
			if p.count > 0 {
				sum += (p.count-1+stride-1)/stride + 2
			}
		}
		return sum
	}
	target := testSize(t, faultRunsEnv, faultRunsDefault, runsWith(1))
	stride, longest := 1, 0
	for _, p := range pairs {
		longest = max(longest, p.count)
	}
	for stride < longest && runsWith(stride) > target {
		stride++
	}
	for _, p := range pairs {
		// n = 1, 1+stride, ... below count, then count and on while the
		// fault fires: the count can differ by one between runs, and the
		// last operation must fail too.
		for n := 1; p.count > 0; {
			fault, created := run(p.op, p.injected, n)
			runs++
			if created {
				pastCreate++
			}
			if !fault.Fired() {
				if n <= p.count {
					t.Logf("%s #%d of %d, %v: the fault did not fire", p.op, n, p.count, p.injected)
				}
				break
			}
			fired++
			if n < p.count {
				n = min(n+stride, p.count)
			} else {
				n++
			}
		}
	}
	t.Logf("fault injection runs: %d (%d past Open and Create, %d with the fault fired), n in steps of %d over the operations of each of %d pairs of operation and error, the first and the last included",
		runs, pastCreate, fired, stride, len(pairs))
	if stride > 1 {
		t.Logf("a sample: %s=all tries every n (about %d runs)", faultRunsEnv, runsWith(1))
	}
	require.Positive(t, fired)
}

// checkWritable reports whether the session's handle refuses writes.
func (s *Store) checkWritable(id uuid.UUID) error {
	h, _ := s.reg.tab.Get(id)
	if h == nil {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.writable()
}

// TestAppendBatchCrashPrefixes: power lost at the sync of a batch written
// into the active chunk's preallocated space keeps a prefix of the batch,
// never a gap, in every crash mode, each kept event whole and Verify
// clean. The prefix must be seen to vary: keep-synced keeps none of the
// batch and keep-all all of it, and every mode that tears writes keeps,
// over the seeds, none, some but not all (a strict prefix, torn inside the
// batch), and all.
//
// The store is deterministic (clock and ids), so the files, and the
// outcome of each seed, are the same in every run.
func TestAppendBatchCrashPrefixes(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	ctx := context.Background()
	const (
		seeds    = 64
		batchLen = 6
	)
	m := vfs.NewMemFS()
	s := openMem(t, m, deterministic(Options{JournalSize: -1}))
	meta, err := s.Create(ctx, Meta{Name: "batch"})
	require.NoError(t, err)
	base := appendN(t, s, meta.ID, 3)
	// The batch's write happened; the power fails at its sync, before
	// the sync returned.
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && filepath.Base(filepath.Dir(path)) == chunksDir {
			return vfs.ErrPowerLoss
		}
		return nil
	})
	evs := make([]Event, batchLen)
	for i := range evs {
		evs[i] = UserText(fmt.Sprintf("batch event %d %0300d", i, i))
	}
	_, err = s.AppendBatch(ctx, meta.ID, evs...)
	require.ErrorIs(t, err, vfs.ErrPowerLoss)
	s.Close() // without power: changes nothing
	var pe *fs.PathError
	require.ErrorAs(t, m.PowerCut(), &pe)
	require.Equal(t, string(vfs.OpSync), pe.Op, "the power failed at the batch's sync")

	for _, mode := range vfs.CrashModes {
		t.Run(mode.String(), func(t *testing.T) {
			n := seeds
			if mode == vfs.KeepSynced || mode == vfs.KeepAll {
				n = 4 // they draw nothing at random
			}
			if mode == vfs.KeepRandomSectors {
				// Keeping the whole batch takes every one of its sectors
				// (each kept with odds 1/2) and its size: about 1 seed in
				// 200.
				n = 8 * seeds
			}
			kept := map[int]int{} // events of the batch kept: seeds
			for seed := range uint64(n) {
				s2 := openMem(t, m.CrashClone(mode, seed), Options{JournalSize: -1})
				path, err := s2.Load(ctx, meta.ID)
				require.NoError(t, err, "seed %d", seed)
				requireChain(t, path)
				require.GreaterOrEqual(t, len(path), len(base), "seed %d: acknowledged events stay", seed)
				require.LessOrEqual(t, len(path), len(base)+batchLen)
				for i := range base {
					require.Equal(t, base[i].ID, path[i].ID, "seed %d: acknowledged event %d", seed, i)
				}
				for i, ev := range path[len(base):] {
					want, err := prepareRecord(evs[i], DefaultMaxRecordSize)
					require.NoError(t, err)
					require.Equal(t, string(want), string(ev.Record), "seed %d: a prefix of the batch, each event whole", seed)
				}
				r, err := s2.Verify(ctx, meta.ID)
				require.NoError(t, err)
				require.True(t, r.OK(), "seed %d: %v", seed, r.Problems)
				require.Empty(t, r.Repairs, "seed %d", seed)
				require.NoError(t, s2.Close())
				kept[len(path)-len(base)]++
			}
			t.Logf("%s: events of the batch kept: seeds %v", mode, kept)
			switch mode {
			case vfs.KeepSynced:
				assert.Equal(t, map[int]int{0: n}, kept, "nothing of an unsynced batch survives")
			case vfs.KeepAll:
				assert.Equal(t, map[int]int{batchLen: n}, kept, "every written byte survives")
			default:
				strict := 0
				for n, c := range kept {
					if 0 < n && n < batchLen {
						strict += c
					}
				}
				assert.Positive(t, strict, "a strict prefix of the batch is kept for some seed: the write is torn inside the batch")
				assert.Contains(t, kept, 0, "none of the batch is kept for some seed")
				assert.Contains(t, kept, batchLen, "all of the batch is kept for some seed")
			}
		})
	}
}
