package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// journalTestOptions adjusts every Options the multi-session suites
// (this file and multisession_kill_test.go) open a Store with: the crash
// workloads and their checks, the SIGKILL children and the verifier. It
// is the one place to select the commit path those suites exercise and to
// size its limits for them.
func journalTestOptions(o *Options) {
	// The smallest journal: checkpoints come every 512 KiB of records,
	// and the ring wraps, within the suites' workloads.
	o.JournalSize = journal.MinSize
}

// Knobs and sizes of the multi-session crash suites.
const (
	// msCrashStatesEnv sizes TestMultiSessionCrashPoints and
	// TestMultiProcessCrashPoints, each: a number of crash states, or
	// "all" for every crash point under every crash mode.
	msCrashStatesEnv     = "SESSIONSTORE_MULTI_CRASH_STATES"
	msCrashStatesDefault = 96
	msChunkSize          = 4096 // rotation and sealing every dozen events
	msBlobThreshold      = 2048 // tool results of 1.5-3.5 KiB are blobs about half the time
	msMaxOpen            = 6    // fewer than a lone Store's 8 sessions: idle ones are closed and reopened
)

// msOptions are the options of every Store the crash suites open (the
// caller sets the filesystem).
func msOptions() Options {
	o := Options{ChunkSize: msChunkSize, BlobThreshold: msBlobThreshold, MaxOpenSessions: msMaxOpen}
	journalTestOptions(&o)
	return o
}

// msSession is one session of a multi-session crash workload and what
// was acknowledged to its goroutine. Only that goroutine writes it, while
// the workload runs; the check reads it after.
type msSession struct {
	id   uuid.UUID
	proc int // the Store ("process") that writes it
	seed uint64

	created  bool
	acked    []Event // every acknowledged event, in order
	inflight []Event // the append or batch under way when the goroutine stopped
	names    []string
	pending  string // the metadata update (or the Create) under way

	blobs, batches, flushes, metas, closes int
}

// msWorkload is a crash workload of many sessions written at once: procs
// Stores on one root (processes sharing it), each writing its sessions
// with one goroutine per session, so that commits of different sessions
// overlap. Each Store runs phases: it opens, its goroutines each make ops
// operations (small appends, tool results that cross the blob threshold,
// batches, flushes, metadata updates, closes of their session), and it
// closes once they are all done; the next phase opens it again. With
// chunks of msChunkSize, sessions rotate and seal chunks every dozen
// events, and with msMaxOpen the Store closes idle sessions to open
// others.
//
// A goroutine stops at its first error (after a power cut, every call
// fails), and a Store whose goroutine or Close failed stops.
type msWorkload struct {
	procs, phases, ops int
	sessions           []*msSession

	reopens  [2]int       // per Store: phases after the first that opened
	inCall   atomic.Int64 // appends under way now
	overlaps atomic.Int64 // appends started while another one was under way
	failures atomic.Int64 // goroutines or Stores stopped by an error
	mu       sync.Mutex
	firstErr error // the first of those errors
}

// fail records that a goroutine or a Store stopped at err.
func (w *msWorkload) fail(err error) {
	w.failures.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstErr == nil {
		w.firstErr = err
	}
}

// newMSWorkload makes a workload of procs Stores and perProc sessions
// each, all drawn from seed: the session ids and every goroutine's
// operations are the same in every run (their interleaving is not).
func newMSWorkload(procs, perProc, phases, ops int, seed uint64) *msWorkload {
	w := &msWorkload{procs: procs, phases: phases, ops: ops}
	rng := rand.New(rand.NewPCG(seed, 0x6d756c7469))
	for i := range procs * perProc {
		var id uuid.UUID
		for j := range id {
			id[j] = byte(rng.Uint32())
		}
		id[6] = id[6]&0x0f | 0x70 // version 7
		id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
		w.sessions = append(w.sessions, &msSession{id: id, proc: i % procs, seed: rng.Uint64()})
	}
	return w
}

// run runs every Store of the workload on m at once and returns when all
// have stopped, their Stores closed, so that no goroutine of theirs (a
// background sealer, say) outlives it.
func (w *msWorkload) run(m vfs.FS) {
	var wg sync.WaitGroup
	for p := range w.procs {
		wg.Go(func() { w.runProc(m, p) })
	}
	wg.Wait()
}

// runProc is Store p's life: its phases, each with a goroutine per
// session.
func (w *msWorkload) runProc(m vfs.FS, p int) {
	ctx := context.Background()
	var mine []*msSession
	for _, ss := range w.sessions {
		if ss.proc == p {
			mine = append(mine, ss)
		}
	}
	for phase := range w.phases {
		o := msOptions()
		o.fs = m
		s, err := Open(memRoot, &o)
		if err != nil {
			w.fail(fmt.Errorf("store %d, phase %d: open: %w", p, phase, err))
			return
		}
		if phase > 0 {
			w.reopens[p]++
		}
		var (
			wg     sync.WaitGroup
			failed atomic.Bool
		)
		for _, ss := range mine {
			wg.Go(func() {
				if err := w.runSession(ctx, s, ss, phase); err != nil {
					w.fail(fmt.Errorf("store %d, phase %d, session %s: %w", p, phase, ss.id, err))
					failed.Store(true)
				}
			})
		}
		wg.Wait()
		// Close is idempotent; after a power cut it fails and changes
		// nothing.
		if err := s.Close(); err != nil {
			w.fail(fmt.Errorf("store %d, phase %d: close: %w", p, phase, err))
			return
		}
		if failed.Load() {
			return
		}
	}
}

// runSession makes one phase's operations on ss through s, recording
// what was acknowledged. It returns the first operation's error.
func (w *msWorkload) runSession(ctx context.Context, s *Store, ss *msSession, phase int) error {
	rng := rand.New(rand.NewPCG(ss.seed, uint64(phase)))
	if phase == 0 {
		ss.pending = "ms-" + ss.id.String()[:8]
		meta, err := s.Create(ctx, Meta{ID: ss.id, Name: ss.pending})
		if err != nil {
			return fmt.Errorf("create: %w", err)
		}
		ss.created, ss.pending = true, ""
		ss.names = append(ss.names, meta.Name)
	}
	for i := range w.ops {
		op := fmt.Sprintf("phase %d op %d", phase, i)
		var batch []Event
		switch x := rng.IntN(100); {
		case x < 55: // a message of about 300 bytes
			batch = []Event{UserText(op + ": " + strings.Repeat("m", 200+rng.IntN(200)))}
		case x < 63:
			batch = []Event{ToolCallEvent(ToolCall{CallID: op, Name: "run", Arguments: []byte(fmt.Sprintf(`{"n":%d}`, i))})}
		case x < 76: // a blob about half the time
			batch = []Event{ToolResultEvent(ToolResult{CallID: op, Output: strings.Repeat("o", 1500+rng.IntN(2000))})}
		case x < 82: // an assistant message and its tool calls, as one batch
			batch = []Event{AssistantMessage(Message{Content: op})}
			for c := range 1 + rng.IntN(3) {
				batch = append(batch, ToolCallEvent(ToolCall{CallID: fmt.Sprintf("%s call %d", op, c), Name: "run"}))
			}
		case x < 87:
			if err := s.Flush(ctx, ss.id); err != nil {
				return fmt.Errorf("%s: flush: %w", op, err)
			}
			ss.flushes++
			continue
		case x < 93:
			ss.pending = fmt.Sprintf("ms-%s-%d-%d", ss.id.String()[:8], phase, i)
			if _, err := s.UpdateMeta(ctx, ss.id, func(m *Meta) { m.Name = ss.pending }); err != nil {
				return fmt.Errorf("%s: update metadata: %w", op, err)
			}
			ss.names = append(ss.names, ss.pending)
			ss.pending = ""
			ss.metas++
			continue
		default: // the next call opens it again
			if err := s.CloseSession(ctx, ss.id); err != nil {
				return fmt.Errorf("%s: close the session: %w", op, err)
			}
			ss.closes++
			continue
		}
		ss.inflight = batch
		if w.inCall.Add(1) > 1 {
			w.overlaps.Add(1)
		}
		var out []Event
		var err error
		if len(batch) == 1 {
			var ev Event
			ev, err = s.Append(ctx, ss.id, batch[0])
			out = []Event{ev}
		} else {
			out, err = s.AppendBatch(ctx, ss.id, batch...)
			ss.batches++
		}
		w.inCall.Add(-1)
		if err != nil {
			return fmt.Errorf("%s: append %d events: %w", op, len(batch), err)
		}
		ss.inflight = nil
		for _, ev := range out {
			if ev.Digest != "" {
				ss.blobs++
			}
		}
		ss.acked = append(ss.acked, out...)
	}
	return nil
}

// msCrashAt runs a fresh workload from newW on a fresh MemFS whose power
// fails at the k-th mutating operation (k = 0: never), as crashAt does for
// one session, and returns the frozen filesystem, the workload with what
// it acknowledged in this run, and the number of mutating operations that
// reached the filesystem. The operations of a run, and which of them is
// the k-th, depend on how its goroutines interleave: what the check
// expects comes from the run itself.
func msCrashAt(newW func() *msWorkload, k int) (*vfs.MemFS, *msWorkload, int) {
	m := vfs.NewMemFS()
	w := newW()
	n := 0 // the hook runs with the MemFS's mutex held
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

// checkMSCrashState opens a crash clone in a new Store (a new process,
// which finds every writer dead) and checks every session of w against
// what its run acknowledged: see checkMSSession. No session exists that
// the workload did not create, and a second reconciliation changes
// nothing.
func checkMSCrashState(t *testing.T, fsys *vfs.MemFS, w *msWorkload, what string) {
	t.Helper()
	ctx := context.Background()
	s := openMem(t, fsys, msOptions())
	metas, err := s.List(ctx)
	require.NoError(t, err, what)
	ours := map[uuid.UUID]bool{}
	for _, ss := range w.sessions {
		ours[ss.id] = true
	}
	for _, m := range metas {
		if !ours[m.ID] {
			require.Failf(t, "a session nobody created", "%s: List holds %s", what, m.ID)
		}
	}
	for _, ss := range w.sessions {
		checkMSSession(t, s, ss, what)
	}
	require.NoError(t, s.Close(), what)

	settled := fsys.String()
	s = openMem(t, fsys, msOptions())
	for _, ss := range w.sessions {
		if _, err := s.Head(ctx, ss.id); err != nil && !(errors.Is(err, ErrNotFound) && !ss.created) {
			require.NoError(t, err, "%s: session %s on the second open", what, ss.id)
		}
	}
	require.NoError(t, s.Close(), what)
	require.Equal(t, settled, fsys.String(), "%s: a second reconciliation changes nothing", what)
}

// checkMSSession checks one session of a crash clone: a session whose
// Create was not acknowledged is absent, or there with no event; any
// other opens, holds every acknowledged event first, in order, whole and
// with the parent its append returned, then at most a prefix of the
// append or batch in flight, each event whole; the events form one chain
// from the root; HEAD is the newest; Verify is clean with nothing to
// repair; and the name is the last acknowledged one or the one in flight.
//
// The loops over events compare plainly and call testify only to fail:
// its reflection would cost more than the rest of the check.
func checkMSSession(t *testing.T, s *Store, ss *msSession, what string) {
	t.Helper()
	ctx := context.Background()
	what = fmt.Sprintf("%s, session %s (%d acknowledged, %d in flight)", what, ss.id, len(ss.acked), len(ss.inflight))
	fail := func(title, format string, args ...any) {
		t.Helper()
		require.Failf(t, title, "%s: "+format, append([]any{what}, args...)...)
	}
	meta, err := s.Meta(ctx, ss.id)
	if !ss.created && errors.Is(err, ErrNotFound) {
		return
	}
	require.NoError(t, err, "%s: the session opens", what)
	tree, err := s.Tree(ctx, ss.id)
	require.NoError(t, err, "%s: the session opens undamaged", what)
	if len(tree) < len(ss.acked) {
		fail("LOST ACKNOWLEDGED EVENTS", "the tree holds %d events", len(tree))
	}
	if extra := len(tree) - len(ss.acked); extra > len(ss.inflight) {
		fail("unacknowledged events", "%d events besides the acknowledged ones; only the append or batch in flight (%d) may be there", extra, len(ss.inflight))
	}
	for i, n := range tree {
		parent := uuid.Nil
		if i > 0 {
			parent = tree[i-1].ID
		}
		if n.ParentID != parent || n.BranchFrom != uuid.Nil {
			fail("broken chain", "event %d, %s, has parent %s and branch_from %s; want parent %s", i, n.ID, n.ParentID, n.BranchFrom, parent)
		}
	}
	for i, want := range ss.acked {
		if tree[i].ID != want.ID {
			fail("acknowledged event out of place", "event %d of the tree is %s, acknowledged %s", i, tree[i].ID, want.ID)
		}
		got, err := s.Event(ctx, ss.id, want.ID)
		require.NoError(t, err, "%s: acknowledged event %s", what, want.ID)
		got, err = s.Resolve(ctx, ss.id, got)
		require.NoError(t, err, "%s: blob of acknowledged event %s", what, want.ID)
		if got.ParentID != want.ParentID || string(got.Record) != string(want.Record) || !got.Time.Equal(want.Time) {
			fail("WRONG EVENT", "acknowledged event %d, %s, reads back parent %s, time %v, record %.80q; it was acknowledged with parent %s, time %v, record %.80q",
				i, want.ID, got.ParentID, got.Time, got.Record, want.ParentID, want.Time, want.Record)
		}
	}
	for i, n := range tree[len(ss.acked):] {
		got, err := s.Event(ctx, ss.id, n.ID)
		require.NoError(t, err, what)
		got, err = s.Resolve(ctx, ss.id, got)
		require.NoError(t, err, what)
		want, err := prepareRecord(ss.inflight[i], DefaultMaxRecordSize)
		require.NoError(t, err)
		if string(got.Record) != string(want) {
			fail("unacknowledged event not whole", "event %d of the append in flight reads back %.80q, want %.80q", i, got.Record, want)
		}
	}
	head, err := s.Head(ctx, ss.id)
	require.NoError(t, err, what)
	wantHead := uuid.Nil
	if len(tree) > 0 {
		wantHead = tree[len(tree)-1].ID
	}
	require.Equal(t, wantHead, head, "%s: HEAD is the newest event", what)
	r, err := s.Verify(ctx, ss.id)
	require.NoError(t, err, what)
	require.True(t, r.OK(), "%s: %v", what, r.Problems)
	require.Empty(t, r.Repairs, what)
	require.Equal(t, len(tree), r.Indexed, what)
	// The last acknowledged name, or the one in flight (an UpdateMeta, or
	// the Create, under way).
	var names []string
	if len(ss.names) > 0 {
		names = append(names, ss.names[len(ss.names)-1])
	}
	if ss.pending != "" {
		names = append(names, ss.pending)
	}
	require.Contains(t, names, meta.Name, "%s: session.json lost an acknowledged update (names written: %q)", what, ss.names)
}

// msCrashReport describes a crash state that failed its check, for the
// failure message: its files, then what a new Store's reconciliation of
// each session logs and what Verify reports after it.
func msCrashReport(fsys *vfs.MemFS, w *msWorkload) string {
	var b strings.Builder
	b.WriteString("the crash state:\n" + fsys.String())
	o := msOptions()
	o.fs = fsys
	o.Logger = slog.New(slog.NewTextHandler(&b, nil))
	s, err := Open(memRoot, &o)
	if err != nil {
		return b.String() + "open: " + err.Error()
	}
	defer s.Close()
	for _, ss := range w.sessions {
		fmt.Fprintf(&b, "session %s: %d acknowledged, %d in flight, created %v\n", ss.id, len(ss.acked), len(ss.inflight), ss.created)
		tree, err := s.Tree(context.Background(), ss.id)
		fmt.Fprintf(&b, "  tree: %d events, %v\n", len(tree), err)
		if r, err := s.Verify(context.Background(), ss.id); err != nil {
			fmt.Fprintf(&b, "  verify: %v\n", err)
		} else {
			fmt.Fprintf(&b, "  verify: problems %v, repairs %v\n", r.Problems, r.Repairs)
		}
	}
	return b.String()
}

// msSealedChunks counts the sealed chunks of every session on m.
func msSealedChunks(t *testing.T, m *vfs.MemFS) int {
	t.Helper()
	root := path.Join(memRoot, sessionsDir)
	ids, err := m.ReadDir(root)
	require.NoError(t, err)
	sealed := 0
	for _, id := range ids {
		names, err := m.ReadDir(path.Join(root, id, chunksDir))
		if err != nil {
			continue // not a session directory
		}
		for _, name := range names {
			if _, ok := parseChunkName(name); ok && strings.HasSuffix(name, sealedExt) {
				sealed++
			}
		}
	}
	return sealed
}

// msCrashPoints is the body of the multi-session crash suites: a first run
// without a crash counts the workload's mutating operations (total) and
// checks that it does what it should (every session created and appended
// to, blobs, batches, flushes, metadata updates, session closes, Store
// reopens, sealed chunks, appends of different sessions under way at
// once); then power is lost at crash points spread evenly over
// 1..total, the first and the last included, each in a run of its own,
// and each frozen state is checked under every crash mode.
//
// msCrashStatesEnv sets the number of states: by default
// msCrashStatesDefault (16 crash points under the 6 modes); "all", or any
// number of at least total x modes, checks every crash point under every
// mode; a larger number adds seeds per point.
func msCrashPoints(t *testing.T, newW func() *msWorkload) {
	m, full, total := msCrashAt(newW, 0)
	require.NoError(t, full.firstErr, "the workload runs to the end without a crash (%d failures)", full.failures.Load())
	require.Zero(t, full.failures.Load())
	var acked, blobs, batches, flushes, metas, closes int
	for _, ss := range full.sessions {
		require.True(t, ss.created, "session %s", ss.id)
		require.Nil(t, ss.inflight, "session %s", ss.id)
		require.GreaterOrEqual(t, len(ss.acked), full.phases*full.ops/2, "session %s", ss.id)
		acked += len(ss.acked)
		blobs, batches, flushes = blobs+ss.blobs, batches+ss.batches, flushes+ss.flushes
		metas, closes = metas+ss.metas, closes+ss.closes
	}
	reopens := full.reopens[0] + full.reopens[1]
	require.Equal(t, full.procs*(full.phases-1), reopens, "every Store closes and opens again")
	after := m.CrashClone(vfs.KeepSynced, 0) // m itself is frozen
	sealed := msSealedChunks(t, after)
	require.Greater(t, blobs, 10, "the workload writes blobs")
	require.Greater(t, batches, 2, "the workload appends batches")
	require.Positive(t, flushes, "the workload flushes")
	require.Positive(t, metas, "the workload updates metadata")
	require.Positive(t, closes, "the workload closes sessions")
	require.Greater(t, sealed, len(full.sessions), "the workload seals chunks")
	if runtime.GOMAXPROCS(0) > 1 {
		require.Positive(t, full.overlaps.Load(), "appends of different sessions overlap")
	}
	// The run without a crash passes the check too.
	checkMSCrashState(t, after, full, "the run without a crash")

	modes := len(vfs.CrashModes)
	target := testSize(t, msCrashStatesEnv, msCrashStatesDefault, total*modes)
	points := total
	if target < total*modes {
		points = min(total, max(2, (target+modes-1)/modes))
	}
	perPoint := max(modes, (target+points-1)/points)
	states, cutEarly := 0, 0
	for i := range points {
		k := 1 + i*(total-1)/max(1, points-1)
		m, w, n := msCrashAt(newW, k)
		requireFrozen(t, m, k, n)
		if n < k {
			cutEarly++ // this run made fewer operations: the power went at its end
		}
		cut := m.PowerCut()
		for j := range perPoint {
			mode := vfs.CrashModes[j%modes]
			seed := uint64(k*1000 + j)
			func() {
				// The run cannot be replayed (its interleaving is the
				// scheduler's): a failure reports the crash state.
				defer func() {
					if t.Failed() {
						t.Log(msCrashReport(m.CrashClone(mode, seed), w))
					}
				}()
				checkMSCrashState(t, m.CrashClone(mode, seed), w, fmt.Sprintf("crash point %d of %d (%v), %s, seed %d", k, total, cut, mode, seed))
			}()
			states++
		}
		if t.Failed() {
			t.Fatalf("crash point %d of %d failed", k, total)
		}
	}
	t.Logf("crash states checked: %d (%d of %d crash points x %d modes/seeds, %d runs ending before their crash point); workload: %d Stores, %d sessions, %d events acknowledged (%d blobs, %d batches), %d flushes, %d metadata updates, %d session closes, %d Store reopens, %d sealed chunks, %d appends started beside another",
		states, points, total, perPoint, cutEarly, full.procs, len(full.sessions), acked, blobs, batches, flushes, metas, closes, reopens, sealed, full.overlaps.Load())
	if points < total {
		t.Logf("a sample: %s=all checks every crash point under every mode (about %d states)", msCrashStatesEnv, total*modes)
	}
	require.GreaterOrEqual(t, states, target)
}

// TestMultiSessionCrashPoints loses power at mutating filesystem
// operations of a workload of 8 sessions written at once in one Store
// (one goroutine each; see msWorkload) and checks every acknowledged event
// of every session after each crash, under every crash mode (see
// msCrashPoints and checkMSSession).
func TestMultiSessionCrashPoints(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	msCrashPoints(t, func() *msWorkload { return newMSWorkload(1, 8, 2, 12, 7) })
}

// TestMultiProcessCrashPoints is TestMultiSessionCrashPoints with two
// Stores on one root, as two processes share it, each writing 4 sessions
// of its own at once and closing and opening again on its own schedule:
// the power cut takes both, and a third opens what is left.
func TestMultiProcessCrashPoints(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	msCrashPoints(t, func() *msWorkload { return newMSWorkload(2, 4, 2, 12, 11) })
}
