package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// slowSyncFS counts file syncs and makes each take delay, so that
// concurrent appends pile up behind a sync as they do on a real disk.
type slowSyncFS struct {
	vfs.FS
	delay time.Duration
	syncs *atomic.Int64
}

// syncNanos adds up the time spent in syncs through slowSyncFS, for
// benchmarks.
var syncNanos atomic.Int64

type slowSyncFile struct {
	vfs.File
	fs slowSyncFS
}

func (f slowSyncFile) Sync() error {
	f.fs.syncs.Add(1)
	time.Sleep(f.fs.delay)
	t0 := time.Now()
	err := f.File.Sync()
	syncNanos.Add(int64(time.Since(t0)))
	return err
}

func (s slowSyncFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := s.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return slowSyncFile{f, s}, nil
}

// requireChain checks that events form one chain in log order: each is the
// child of the one before. It stops the test, so only the test's goroutine
// may call it; workers use chainProblem.
func requireChain(t *testing.T, path []Event) {
	t.Helper()
	require.NoError(t, chainProblem(path))
}

// chainProblem says why events do not form one chain in log order, or
// returns nil if they do. Any goroutine may call it.
func chainProblem(path []Event) error {
	seen := map[uuid.UUID]bool{}
	for i, ev := range path {
		if seen[ev.ID] {
			return fmt.Errorf("event %d: duplicate id %s", i, ev.ID)
		}
		seen[ev.ID] = true
		want := uuid.Nil
		if i > 0 {
			want = path[i-1].ID
		}
		if ev.ParentID != want {
			return fmt.Errorf("event %d (%s): parent %s, want %s", i, ev.ID, ev.ParentID, want)
		}
	}
	return nil
}

// syncCountedSession opens a store on a MemFS whose syncs take delay and
// are counted, and creates a session.
func syncCountedSession(t *testing.T, delay time.Duration, o Options) (*vfs.MemFS, *Store, Meta, *atomic.Int64) {
	t.Helper()
	m := vfs.NewMemFS()
	syncs := new(atomic.Int64)
	s := openMem(t, slowSyncFS{m, delay, syncs}, o)
	meta, err := s.Create(context.Background(), Meta{})
	require.NoError(t, err)
	return m, s, meta, syncs
}

// TestGroupCommit: 16 goroutines append to one session at once. Every
// Append returns a durable event, the events chain in the order they were
// written, and the syncs are shared: far fewer than the appends.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	m, s, meta, syncs := syncCountedSession(t, time.Millisecond, Options{ChunkSize: 8 << 10})
	const writers, each = 16, 40
	syncs.Store(0)
	acked := make([][]Event, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				ev, err := s.Append(ctx, meta.ID, UserText(fmt.Sprintf("writer %d message %d", w, i)))
				if !assert.NoError(t, err) {
					return
				}
				acked[w] = append(acked[w], ev)
			}
		})
	}
	wg.Wait()
	path, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	require.Len(t, path, writers*each)
	requireChain(t, path)
	pos := map[uuid.UUID]int{}
	for i, ev := range path {
		pos[ev.ID] = i
	}
	for w := range writers {
		for i, ev := range acked[w] {
			p, ok := pos[ev.ID]
			require.True(t, ok)
			assert.Equal(t, ev.ParentID, path[p].ParentID, "writer %d event %d", w, i)
			assert.Equal(t, string(ev.Record), string(path[p].Record))
			if i > 0 {
				assert.Greater(t, p, pos[acked[w][i-1].ID], "one writer's events keep their order")
			}
		}
	}
	n := syncs.Load()
	t.Logf("%d appends by %d goroutines, %d syncs", writers*each, writers, n)
	assert.Less(t, n, int64(writers*each/2), "syncs are shared between concurrent appends")

	// Everything acknowledged survives a power loss.
	require.NoError(t, s.Close())
	checkAll(t, m.CrashClone(vfs.KeepSynced, 1), meta.ID, path).Close()
}

// TestGroupCommitWriteFailure: the queued records of concurrent appends
// are written by one write. When that write fails, every append in flight
// fails with the error and none of their events is stored, while earlier
// events stay and the session goes on: later appends chain onto the last
// published event.
func TestGroupCommitWriteFailure(t *testing.T) {
	ctx := context.Background()
	m, s, meta, _ := syncCountedSession(t, time.Millisecond, Options{ChunkSize: 1 << 20})
	injected := errors.New("injected write failure")
	stored := 0 // events acknowledged so far
	for _, n := range []int{2, 4, 6} {
		fault := vfs.FailNth(n, injected, vfs.OpWrite)
		m.SetFault(func(op vfs.Op, path string) error {
			if filepath.Base(filepath.Dir(path)) != chunksDir {
				return nil // chunk writes only
			}
			return fault.Hook(op, path)
		})
		const writers, each = 8, 10
		var mu sync.Mutex
		var acked []Event
		failed := 0
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					ev, err := s.Append(ctx, meta.ID, UserText(fmt.Sprintf("round %d writer %d message %d", n, w, i)))
					mu.Lock()
					if err == nil {
						acked = append(acked, ev)
					} else {
						assert.ErrorIs(t, err, injected)
						failed++
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		m.SetFault(nil)
		require.True(t, fault.Fired(), "write #%d of the round failed", n)
		require.Positive(t, failed, "round %d: the appends of the failed write fail", n)
		require.NoError(t, s.checkWritable(meta.ID), "a failed write does not stop the session")
		after, err := s.Append(ctx, meta.ID, UserText(fmt.Sprintf("after round %d", n)))
		require.NoError(t, err)

		path, err := s.Load(ctx, meta.ID)
		require.NoError(t, err)
		requireChain(t, path)
		require.Equal(t, after.ID, path[len(path)-1].ID)
		stored += len(acked) + 1
		require.Len(t, path, stored, "the events of failed appends are not stored")
		ids := map[uuid.UUID]bool{}
		for _, ev := range path {
			ids[ev.ID] = true
		}
		for _, ev := range acked {
			assert.True(t, ids[ev.ID], "acknowledged event %s is stored", ev.ID)
		}
		t.Logf("round %d: %d appends acknowledged, %d failed", n, len(acked), failed)
	}
	// After a reopen and a power loss the session is whole and verifies.
	path, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	checkAll(t, m.CrashClone(vfs.KeepSynced, 1), meta.ID, path).Close()
}

// TestAppendBatch: a batch chains its events under HEAD, costs one sync,
// never splits between chunks, and is refused whole for one bad event.
func TestAppendBatch(t *testing.T) {
	ctx := context.Background()
	m, s, meta, syncs := syncCountedSession(t, 0, Options{ChunkSize: 1500})
	first, err := s.Append(ctx, meta.ID, UserText("run the tests"))
	require.NoError(t, err)

	syncs.Store(0)
	batch, err := s.AppendBatch(ctx, meta.ID,
		AssistantText("running them"),
		ToolCallEvent(ToolCall{CallID: "c1", Name: "run_tests"}),
		ToolCallEvent(ToolCall{CallID: "c2", Name: "lint"}))
	require.NoError(t, err)
	require.Len(t, batch, 3)
	assert.Equal(t, int64(1), syncs.Load(), "one sync for the batch")
	assert.Equal(t, first.ID, batch[0].ParentID)
	assert.Equal(t, batch[0].ID, batch[1].ParentID)
	assert.Equal(t, batch[1].ID, batch[2].ParentID)
	head, err := s.Head(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, batch[2].ID, head)

	// A batch that does not fit in the active chunk starts a new one, and
	// its events share a chunk.
	for range 3 {
		big := make([]Event, 4)
		for i := range big {
			big[i] = UserText(fmt.Sprintf("%0200d", i))
		}
		got, err := s.AppendBatch(ctx, meta.ID, big...)
		require.NoError(t, err)
		h, err := s.reg.acquire(ctx, meta.ID, nil)
		require.NoError(t, err)
		chunk := h.Entries[h.ByID[got[0].ID]].Loc.Chunk
		for _, ev := range got {
			assert.Equal(t, chunk, h.Entries[h.ByID[ev.ID]].Loc.Chunk, "a batch stays in one chunk")
		}
		s.reg.release(h)
	}

	// One bad event: nothing is written.
	before, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	_, err = s.AppendBatch(ctx, meta.ID, UserText("fine"), Event{Kind: "no such kind"})
	require.ErrorIs(t, err, ErrInvalidEvent)
	after, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	none, err := s.AppendBatch(ctx, meta.ID)
	assert.NoError(t, err)
	assert.Empty(t, none)

	// A Branch selection applies to the first event of the batch.
	require.NoError(t, s.Branch(ctx, meta.ID, first.ID))
	alt, err := s.AppendBatch(ctx, meta.ID, UserText("other way"), AssistantText("ok"))
	require.NoError(t, err)
	assert.Equal(t, first.ID, alt[0].BranchFrom)
	assert.Equal(t, uuid.Nil, alt[1].BranchFrom)
	assert.Equal(t, alt[0].ID, alt[1].ParentID)
	require.NoError(t, s.Close())
	final, err := openMem(t, m, Options{}).Load(ctx, meta.ID)
	require.NoError(t, err)
	requireChain(t, final)
	assert.Len(t, final, 3)
}

// TestAppendBatchCrash: a power loss while a batch is written keeps a
// prefix of it, never a gap, in every crash mode; over the seeds, some
// crash keeps a strict prefix (some of the batch, not all), so the
// property is exercised (TestAppendBatchCrashPrefixes checks each mode).
func TestAppendBatchCrash(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test gates, fails or checks.
	ctx := context.Background()
	strict := 0
	defer func() { assert.Positive(t, strict, "no crash kept a strict prefix of the batch") }()
	for _, mode := range vfs.CrashModes {
		for seed := range uint64(20) {
			m, s, id := memSession(t, Options{JournalSize: -1})
			base := appendN(t, s, id, 3)
			// The batch's sync fails: its write happened, its durability
			// is unknown, as in a crash right before the sync returned.
			m.SetFault(func(op vfs.Op, path string) error {
				if op == vfs.OpSync && filepath.Base(filepath.Dir(path)) == chunksDir {
					return errors.New("injected: power lost")
				}
				return nil
			})
			evs := make([]Event, 6)
			for i := range evs {
				evs[i] = UserText(fmt.Sprintf("batch event %d %0300d", i, i))
			}
			_, err := s.AppendBatch(ctx, id, evs...)
			require.Error(t, err)
			crashed := m.CrashClone(mode, seed)
			s2 := openMem(t, crashed, Options{JournalSize: -1})
			path, err := s2.Load(ctx, id)
			require.NoError(t, err)
			requireChain(t, path)
			require.GreaterOrEqual(t, len(path), len(base), "acknowledged events stay")
			assert.Equal(t, ids(base), ids(path[:len(base)]), "mode %d seed %d: the acknowledged events come first", mode, seed)
			assert.LessOrEqual(t, len(path), len(base)+len(evs), "mode %d seed %d: nothing but the batch follows them", mode, seed)
			for i, ev := range path[len(base):] {
				assert.Contains(t, string(ev.Record), fmt.Sprintf("batch event %d ", i), "mode %d seed %d: a prefix of the batch", mode, seed)
			}
			if kept := len(path) - len(base); kept > 0 && kept < len(evs) {
				strict++
			}
			require.NoError(t, s2.Close())
			s.Close()
		}
	}
}

// TestFlush: after Flush the index and HEAD are current on disk, so a
// power loss leaves nothing to rebuild.
func TestFlush(t *testing.T) {
	// The per-session commit (JournalSize -1): what its chunk holds
	// after a crash is what this test cuts, repairs or checks.
	ctx := context.Background()
	m, s, id := memSession(t, Options{JournalSize: -1, ChunkSize: 2048})
	evs := appendN(t, s, id, 29)
	// The rewrite of index.jsonl after a sealing is durable (a replace):
	// the index line of an append after the last one is what Flush must
	// sync.
	awaitSealing(s, id)
	h := lockedHandle(t, s, id)
	active := h.chunks.Num()
	h.mu.Unlock()
	evs = append(evs, appendN(t, s, id, 1)...)
	h = lockedHandle(t, s, id)
	require.Equal(t, active, h.chunks.Num(), "precondition: the last append starts no chunk, so no sealing rewrites the index after it")
	h.mu.Unlock()
	require.NoError(t, s.Flush(ctx, id))
	crashed := m.CrashClone(vfs.KeepSynced, 1)
	r, err := openMem(t, crashed, Options{JournalSize: -1}).Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Empty(t, r.Repairs, "nothing to rebuild after Flush")
	assert.Equal(t, evs[len(evs)-1].ID, r.HeadOnDisk)

	// Without Flush the same crash leaves the index and HEAD behind. The
	// appends fill the chunk active at the Flush and start another; the
	// sealing's rewrite of index.jsonl is durable (a replace), but holds
	// only the lines published before it, and not those of the appends
	// after it.
	h = lockedHandle(t, s, id)
	active = h.chunks.Num()
	h.mu.Unlock()
	more := appendN(t, s, id, 5)
	awaitSealing(s, id)
	h = lockedHandle(t, s, id)
	require.Greater(t, h.chunks.Num(), active, "precondition: the appends started a new chunk")
	h.mu.Unlock()
	more = append(more, appendN(t, s, id, 2)...)
	crashed = m.CrashClone(vfs.KeepSynced, 1)
	r, err = openMem(t, crashed, Options{JournalSize: -1}).Verify(ctx, id)
	require.NoError(t, err)
	require.Len(t, r.Repairs, 2, "the index lines and HEAD of the appends after Flush are rebuilt: %q", r.Repairs)
	var added int
	_, err = fmt.Sscanf(r.Repairs[0], "add %d index entries rebuilt from the chunks", &added)
	require.NoError(t, err, r.Repairs[0])
	assert.GreaterOrEqual(t, added, 2, "the lines of the appends after the sealing")
	assert.LessOrEqual(t, added, len(more))
	assert.Equal(t, fmt.Sprintf("set HEAD to %s (was %s)", more[len(more)-1].ID, evs[len(evs)-1].ID), r.Repairs[1])
	assert.Equal(t, more[len(more)-1].ID, r.Head)
	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.Flush(ctx, id), ErrClosed)
}

// TestMaxOpenSessions: appending round-robin to many sessions keeps at
// most MaxOpenSessions open. The test lowers the process's file
// descriptor limit below what keeping every session open would take, so
// a leak fails with EMFILE. SESSIONSTORE_SESSIONS sets the number of
// sessions: by default 600, more than the 512 descriptors even at one
// descriptor (the lock) per open session, and 9 times MaxOpenSessions, so
// every round evicts; .ci/run's long step uses 10,000.
func TestMaxOpenSessions(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	n := testSize(t, "SESSIONSTORE_SESSIONS", 600, 0)
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	saved := lim
	lim.Cur = 512
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	t.Cleanup(func() { assert.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &saved)) })

	ctx := context.Background()
	const maxOpen = 64
	s, err := Open(t.TempDir(), &Options{MaxOpenSessions: maxOpen, fs: noSyncFS{vfs.Default}})
	require.NoError(t, err)
	ids := make([]uuid.UUID, n)
	for i := range ids {
		meta, err := s.Create(ctx, Meta{Name: strconv.Itoa(i)})
		require.NoError(t, err, "session %d", i)
		ids[i] = meta.ID
	}
	// A Branch selection survives its session being closed for room.
	first, err := s.Append(ctx, ids[0], UserText("root"))
	require.NoError(t, err)
	_, err = s.Append(ctx, ids[0], UserText("second"))
	require.NoError(t, err)
	require.NoError(t, s.Branch(ctx, ids[0], first.ID))
	for round := range 2 {
		for i, id := range ids {
			_, err := s.Append(ctx, id, UserText(fmt.Sprintf("round %d", round)))
			require.NoError(t, err, "session %d round %d", i, round)
		}
	}
	open := s.reg.tab.Len()
	t.Logf("%d sessions appended to round-robin twice; %d open at the end, at most %d allowed", n, open, maxOpen)
	assert.LessOrEqual(t, open, maxOpen)
	tree, err := s.Tree(ctx, ids[0])
	require.NoError(t, err)
	require.Len(t, tree, 4)
	assert.Equal(t, first.ID, tree[2].ParentID, "the pending Branch applied after the session reopened")
	assert.Equal(t, first.ID, tree[2].BranchFrom)
	for _, id := range []uuid.UUID{ids[1], ids[n/2], ids[n-1]} {
		path, err := s.Load(ctx, id)
		require.NoError(t, err)
		assert.Len(t, path, 2)
	}
	require.NoError(t, s.Close())
}

// TestConcurrencyStress: 64 sessions, 4 goroutines each, appending,
// branching, batching and loading at once with fewer open sessions allowed
// than sessions in use, for a bounded time (SESSIONSTORE_STRESS, default
// 2s). Every acknowledged event is there afterwards, each session's tree
// is whole, and Verify finds nothing wrong.
func TestConcurrencyStress(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	d := 2 * time.Second
	if v := os.Getenv("SESSIONSTORE_STRESS"); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(t, err)
	}
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{ChunkSize: 4 << 10, MaxOpenSessions: 16})
	const sessions, workers = 64, 4
	ids := make([]uuid.UUID, sessions)
	for i := range ids {
		meta, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		ids[i] = meta.ID
	}
	var (
		mu    sync.Mutex
		acked = map[uuid.UUID][]uuid.UUID{}
		ops   atomic.Int64
	)
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for si, id := range ids {
		for w := range workers {
			wg.Go(func() {
				for i := 0; time.Now().Before(deadline); i++ {
					var got []Event
					var err error
					switch (si + w + i) % 6 {
					case 0, 1:
						var ev Event
						ev, err = s.Append(ctx, id, UserText(fmt.Sprintf("s%d w%d i%d", si, w, i)))
						got = []Event{ev}
					case 2:
						got, err = s.AppendBatch(ctx, id, AssistantText("a"), ToolCallEvent(ToolCall{CallID: fmt.Sprint(i), Name: "t"}))
					case 3:
						var path []Event
						path, err = s.Load(ctx, id)
						if err == nil && len(path) > 1 {
							err = s.Branch(ctx, id, path[len(path)/2].ID)
						}
					case 4:
						var path []Event
						if path, err = s.Load(ctx, id); err == nil {
							err = chainProblem(path) // reported below, by assert: this is a worker
						}
					default:
						_, err = s.Tree(ctx, id)
					}
					if !assert.NoError(t, err) {
						return
					}
					ops.Add(1)
					if len(got) > 0 {
						mu.Lock()
						for _, ev := range got {
							acked[id] = append(acked[id], ev.ID)
						}
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d operations on %d sessions by %d goroutines in %v", ops.Load(), sessions, sessions*workers, d)
	require.NoError(t, s.Close())
	s2 := openMem(t, m.CrashClone(vfs.KeepSynced, 7), Options{})
	defer s2.Close()
	for _, id := range ids {
		tree, err := s2.Tree(ctx, id)
		require.NoError(t, err)
		have := map[uuid.UUID]bool{}
		for _, n := range tree {
			have[n.ID] = true
		}
		for _, a := range acked[id] {
			assert.True(t, have[a], "acknowledged event %s of session %s", a, id)
		}
		r, err := s2.Verify(ctx, id)
		require.NoError(t, err)
		assert.True(t, r.OK(), "%v", r.Problems)
	}
}

// gateSyncFS holds every sync of a chunk file until release is closed,
// after telling entered that one started.
type gateSyncFS struct {
	vfs.FS
	entered chan struct{}
	release chan struct{}
}

type gateSyncFile struct {
	vfs.File
	fs   gateSyncFS
	name string
}

func (f gateSyncFile) Sync() error {
	if filepath.Base(filepath.Dir(f.name)) == chunksDir {
		select {
		case f.fs.entered <- struct{}{}:
		default:
		}
		<-f.fs.release
	}
	return f.File.Sync()
}

func (g gateSyncFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return gateSyncFile{f, g, name}, nil
}

// TestGCKeepsBlobsOfAppendsInFlight: GC runs while an append whose record
// is a blob waits for its sync (the session's mutex is free then); it must
// keep that blob, which the event names once the sync ends.
func TestGCKeepsBlobsOfAppendsInFlight(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test gates, fails or checks.
	ctx := context.Background()
	m := vfs.NewMemFS()
	g := gateSyncFS{m, make(chan struct{}, 1), make(chan struct{})}
	s := openMem(t, g, Options{JournalSize: -1})
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	big := ToolResultEvent(ToolResult{CallID: "c1", Output: strings.Repeat("log line\n", 4000)})
	done := make(chan Event, 1)
	go func() {
		ev, err := s.Append(ctx, meta.ID, big)
		assert.NoError(t, err)
		done <- ev
	}()
	reached(t, g.entered, "the append's record is written and its sync started")
	rep, err := s.GC(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Removed, "the blob of the append in flight stays")
	assert.Equal(t, 1, rep.Kept)
	close(g.release)
	ev := <-done
	require.NotEmpty(t, ev.Digest, "precondition: the record is a blob")
	got, err := s.Event(ctx, meta.ID, ev.ID)
	require.NoError(t, err)
	resolved, err := s.Resolve(ctx, meta.ID, got)
	require.NoError(t, err)
	assert.JSONEq(t, string(ev.Record), string(resolved.Record))
	require.NoError(t, s.Close())
}

// TestForEach: every index is visited once, on at most the workers asked
// for, with worker numbers in range.
func TestForEach(t *testing.T) {
	for _, tc := range []struct{ n, workers int }{{0, 4}, {1, 4}, {5, 1}, {100, 3}, {3, 0}} {
		visits := make([]atomic.Int32, tc.n)
		var mu sync.Mutex
		seen := map[int]bool{}
		forEach(tc.n, tc.workers, func(w, i int) {
			visits[i].Add(1)
			mu.Lock()
			seen[w] = true
			mu.Unlock()
		})
		for i := range visits {
			assert.Equal(t, int32(1), visits[i].Load(), "n %d workers %d index %d", tc.n, tc.workers, i)
		}
		assert.LessOrEqual(t, len(seen), max(tc.workers, 1))
		for w := range seen {
			assert.True(t, w >= 0 && w < max(tc.workers, 1), "worker %d", w)
		}
	}
}

// TestFailedSessionStaysStoppedAfterEviction: a session whose writes
// stopped after a failed sync, closed to make room and opened again in the
// same Store, stays stopped and holds only the events acknowledged before
// the failure: reconciling would have indexed the record the failed sync
// carried, and named it in a durable HEAD that a power loss leaves naming
// a record that is gone.
func TestFailedSessionStaysStoppedAfterEviction(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test gates, fails or checks.
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{JournalSize: -1, ChunkSize: 64 << 10, MaxOpenSessions: 1}
	s := openMem(t, m, o)
	defer s.Close()
	a, err := s.Create(ctx, Meta{Name: "fails"})
	require.NoError(t, err)
	b, err := s.Create(ctx, Meta{Name: "other"})
	require.NoError(t, err)
	evs := appendN(t, s, a.ID, 5)
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, a.ID.String()) && strings.Contains(path, chunksDir) {
			return errors.New("injected EIO")
		}
		return nil
	})
	_, err = s.Append(ctx, a.ID, UserText("not acknowledged"))
	require.Error(t, err, "the sync failed")
	m.SetFault(nil)
	appendN(t, s, b.ID, 1) // closes a to make room

	got, err := s.Load(ctx, a.ID) // opens a again
	require.NoError(t, err)
	assertSameEvents(t, evs, got)
	_, err = s.Append(ctx, a.ID, UserText("refused"))
	assert.ErrorIs(t, err, ErrSessionFailed, "writes stay stopped until the Store is reopened")
	appendN(t, s, b.ID, 1) // closes a again
	_, err = s.Append(ctx, a.ID, UserText("refused again"))
	assert.ErrorIs(t, err, ErrSessionFailed)

	// A power loss now: the session opens with every acknowledged event.
	s2 := checkAll(t, m.CrashClone(vfs.KeepSynced, 1), a.ID, evs)
	defer s2.Close()
	r, err := s2.Verify(ctx, a.ID)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	_, err = s2.Append(ctx, a.ID, UserText("a new Store writes"))
	assert.NoError(t, err)
}

// TestIndexWriteFailureDropsQueuedRecords: when writing an index line
// fails, the events just synced are acknowledged and the session stops
// writing; an append queued behind them fails, and its record, never
// written, must not become the parent the session reports. The first
// append's sync is held until the second is queued behind it.
func TestIndexWriteFailureDropsQueuedRecords(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	g := &syncGate{FS: m, entered: make(chan struct{}), release: make(chan struct{})}
	s := openMem(t, g, Options{})
	defer s.Close()
	release := sync.OnceFunc(func() { close(g.release) })
	defer release() // before Close, which waits for the held append
	meta, err := s.Create(ctx, Meta{Name: "index fails"})
	require.NoError(t, err)
	appendN(t, s, meta.ID, index.HoldLines-1) // the next line makes the index's batch written
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && strings.HasSuffix(path, indexName) {
			return errors.New("injected EIO")
		}
		return nil
	})
	g.armed.Store(true)
	first := make(chan Event, 1)
	go func() {
		ev, err := s.Append(ctx, meta.ID, UserText("synced, then its index line fails"))
		assert.NoError(t, err, "durable: acknowledged")
		first <- ev
	}()
	reached(t, g.entered, "the first append's record is written and its sync held")
	queued := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, meta.ID, UserText("queued behind it"))
		queued <- err
	}()
	waitUntil(t, s, meta.ID, "the second append to be queued behind the held sync", func(h *openSession) bool {
		return h.pipe.Syncing() && len(h.pipe.Inflight()) == 2
	})
	release()
	acked := <-first
	assert.ErrorIs(t, <-queued, ErrSessionFailed)
	m.SetFault(nil)
	parent, _, err := s.NextParent(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, acked.ID, parent, "the next parent is the newest acknowledged event")
	head, err := s.Head(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, acked.ID, head)
}

// TestBranchSelectionSurvivesFailedWrite: a failed chunk write fails the
// append but not the session, and the Branch selection that append used
// is pending again: no event was appended, so the retry goes where the
// failed append would have gone.
func TestBranchSelectionSurvivesFailedWrite(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	defer s.Close()
	evs := appendN(t, s, id, 5)
	require.NoError(t, s.Branch(ctx, id, evs[1].ID))
	injected := errors.New("injected write failure")
	fault := vfs.FailNth(1, injected, vfs.OpWrite)
	m.SetFault(func(op vfs.Op, path string) error {
		if filepath.Base(filepath.Dir(path)) != chunksDir {
			return nil
		}
		return fault.Hook(op, path)
	})
	_, err := s.Append(ctx, id, UserText("on the new branch"))
	m.SetFault(nil)
	require.ErrorIs(t, err, injected)
	require.NoError(t, s.checkWritable(id), "a failed write does not stop the session")

	p, branching, err := s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.True(t, branching, "the selection is pending again")
	assert.Equal(t, evs[1].ID, p)
	ev, err := s.Append(ctx, id, UserText("retry on the new branch"))
	require.NoError(t, err)
	assert.Equal(t, evs[1].ID, ev.ParentID)
	assert.Equal(t, evs[1].ID, ev.BranchFrom)
}

// syncGate blocks the first sync of a chunk file after arm until
// released.
type syncGate struct {
	vfs.FS
	armed   atomic.Bool
	entered chan struct{}
	release chan struct{}
}

type syncGateFile struct {
	vfs.File
	g *syncGate
}

func (g *syncGate) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return syncGateFile{f, g}, nil
}

func (f syncGateFile) Sync() error {
	// A commit's sync: its chunk's, or the shared journal's.
	dir := filepath.Base(filepath.Dir(f.Name()))
	commitSync := dir == chunksDir || dir == journal.Dir && strings.HasSuffix(f.Name(), ".wal")
	if commitSync && f.g.armed.CompareAndSwap(true, false) {
		close(f.g.entered)
		<-f.g.release
	}
	return f.File.Sync()
}

// waitUntil polls cond on the session's locked handle until it holds.
func waitUntil(t *testing.T, s *Store, id uuid.UUID, what string, cond func(h *openSession) bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		h := lockedHandle(t, s, id)
		ok := cond(h)
		h.mu.Unlock()
		if ok {
			return
		}
		require.False(t, time.Now().After(deadline), "timed out waiting for %s", what)
	}
}

// TestBranchSummaryWhileAppending: a branch summary that waits for a sync
// (its record does not fit the active chunk) must not hand its switch to
// an append made meanwhile: that append goes after the newest event, and
// only the summary branches.
//
// It runs in a synctest bubble, whose Wait returns once every other
// goroutine of the test is blocked: the summary has then gone as far as it
// can while the sync is held, before the append starts.
func TestBranchSummaryWhileAppending(t *testing.T) {
	warmZstd(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := &syncGate{FS: vfs.NewMemFS(), entered: make(chan struct{}), release: make(chan struct{})}
		s := openMem(t, g, Options{ChunkSize: 8 << 10, BlobThreshold: -1})
		defer s.Close()
		var wg sync.WaitGroup
		defer wg.Wait()
		release := sync.OnceFunc(func() { close(g.release) })
		defer release() // on failure too: the goroutines, then Close, wait for the held sync
		meta, err := s.Create(ctx, Meta{})
		require.NoError(t, err)
		id := meta.ID
		evs := appendN(t, s, id, 4)
		_, err = s.Append(ctx, id, UserText(strings.Repeat("p", 3<<10)))
		require.NoError(t, err)

		g.armed.Store(true)
		var x, sum, y Event
		wg.Go(func() { // its sync is held
			var err error
			x, err = s.Append(ctx, id, UserText("x"))
			assert.NoError(t, err)
		})
		reached(t, g.entered, "the sync started")
		wg.Go(func() { // waits for that sync to start a new chunk
			var err error
			sum, err = s.AppendBranchSummary(ctx, id, evs[1].ID, BranchSummaryRecord{Summary: Summary{Text: strings.Repeat("s", 6<<10)}})
			assert.NoError(t, err)
		})
		synctest.Wait() // the summary waits
		inflight := func() int {
			h := lockedHandle(t, s, id)
			defer h.mu.Unlock()
			require.True(t, h.pipe.Syncing(), "precondition: the sync of x is held")
			return len(h.pipe.Inflight())
		}
		require.Equal(t, 1, inflight(), "precondition: only x is in flight; the summary waits for a new chunk")
		wg.Go(func() {
			var err error
			y, err = s.Append(ctx, id, UserText("y"))
			assert.NoError(t, err)
		})
		synctest.Wait() // the append is queued
		require.Equal(t, 2, inflight(), "precondition: the append is queued behind the held sync")
		release()
		wg.Wait()

		assert.Equal(t, x.ID, y.ParentID, "the append goes after the newest event")
		assert.Equal(t, uuid.Nil, y.BranchFrom, "the append does not branch")
		assert.Equal(t, evs[1].ID, sum.ParentID)
		assert.Equal(t, evs[1].ID, sum.BranchFrom)
		path, err := s.Load(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, sum.ID, path[len(path)-1].ID, "the summary, appended last, is HEAD")
	})
}

// TestAcknowledgedIsSynced: the moment an Append returns, its record is in
// what a power cut would keep (a crash clone of synced state only), for
// appends from many goroutines at once through frequent chunk rotations,
// where a rotation settles the records other appends queued (written and
// synced, then acknowledged) before the new chunk starts.
func TestAcknowledgedIsSynced(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test gates, fails or checks.
	ctx := t.Context()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{JournalSize: -1, ChunkSize: 2048, Compression: CompressionNone, BlobThreshold: -1})
	defer s.Close()
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	dir := sessionPath(meta.ID, chunksDir)
	const writers, each = 8, 40
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		problems []string
	)
	// A rotation that finds records in flight syncs them itself (settle):
	// the rounds go on until that happened a few times, however the
	// goroutines were scheduled.
	settled := func() int {
		h, _ := s.reg.tab.Get(meta.ID)
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.pipe.Settled()
	}
	rounds := 0
	for ; rounds < 40 && (rounds == 0 || settled() < 3); rounds++ {
		appendRound(t, s, m, meta.ID, dir, writers, each, rounds, &mu, &problems, &wg)
	}
	assert.GreaterOrEqual(t, settled(), 3, "rotations found records in flight (%d rounds)", rounds)
	assert.Empty(t, problems)
	chunks, err := listChunks(m, dir)
	require.NoError(t, err)
	assert.Greater(t, len(chunks), 20, "the appends rotated chunks often")
	tree, err := s.Tree(ctx, meta.ID)
	require.NoError(t, err)
	assert.Len(t, tree, writers*each*rounds)
}

// appendRound is a round of TestAcknowledgedIsSynced: writers append each
// events at once, each checking after its Append that its event is in the
// chunks a crash would keep.
func appendRound(t *testing.T, s *Store, m *vfs.MemFS, id uuid.UUID, dir string, writers, each, round int, mu *sync.Mutex, problems *[]string, wg *sync.WaitGroup) {
	ctx := t.Context()
	meta := Meta{ID: id}
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				ev, err := s.Append(ctx, meta.ID, UserText(fmt.Sprintf("round %d writer %d append %d %s", round, w, i, strings.Repeat("x", 100+i*7%300))))
				if err != nil {
					mu.Lock()
					*problems = append(*problems, fmt.Sprintf("writer %d append %d: %v", w, i, err))
					mu.Unlock()
					return
				}
				cut := m.CrashClone(vfs.KeepSynced, uint64(round*writers*each+w*each+i))
				chunks, err := listChunks(cut, dir)
				var synced []byte
				for _, n := range chunks {
					b, rerr := vfs.ReadFile(cut, filepath.Join(dir, chunkName(n)))
					err = errors.Join(err, rerr)
					synced = append(synced, b...)
				}
				if err != nil || !strings.Contains(string(synced), ev.ID.String()) {
					mu.Lock()
					*problems = append(*problems, fmt.Sprintf("writer %d append %d: event %s acknowledged but not in the synced chunks (%v)", w, i, ev.ID, err))
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
}
