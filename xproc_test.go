//go:build unix

package sessionstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Tests across processes: a child process (the append-loop helper of
// lock_test.go) writes a session while this process tries to write it,
// waits for it, or reads it with a read-only store.

// Knobs of TestXprocReaderBesideWriter.
const (
	xprocAppendsEnv     = "SESSIONSTORE_XPROC_APPENDS" // appends the writer makes in each run; default xprocAppendsDefault
	xprocAppendsDefault = 300
	// xprocSafety bounds waits for things that normally take milliseconds,
	// and the writer's silence: a writer that acknowledges nothing for
	// this long is stuck. A safety net only: no check depends on how fast
	// the writer is.
	xprocSafety = 30 * time.Second
	// xprocTimeoutMargin is what the reader-beside-writer run keeps of
	// the test binary's -timeout for its checks after the writer is
	// killed: it stops reading with a clear failure then, rather than
	// being cut off by the -timeout panic.
	xprocTimeoutMargin = 15 * time.Second
)

// xprocChild is a running append-loop helper and what it printed.
type xprocChild struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr strings.Builder // read only after Wait

	mu     sync.Mutex
	ids    []uuid.UUID // acknowledged ids, in order; only ever appended to
	bad    string      // the first stdout line that is not an event id
	notify chan struct{}
	done   chan struct{} // closed when stdout ends
}

// xprocStart starts the append-loop helper on session with the given
// variants (see apiAppendLoop) and reads its stdout as it comes.
func xprocStart(t *testing.T, dir string, session uuid.UUID, variants string) *xprocChild {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	seed := rand.Uint64()
	cmd := exec.Command(exe, "-test.run=^$")
	// A race-enabled helper would sleep a second at exit by default.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(),
		apiHelperEnv+"=append-loop", apiDirEnv+"="+dir, apiSessionEnv+"="+session.String(),
		apiSeedEnv+"="+strconv.FormatUint(seed, 10), apiLoopEnv+"="+variants, "GORACE="+gorace)
	c := &xprocChild{t: t, cmd: cmd, notify: make(chan struct{}, 1), done: make(chan struct{})}
	cmd.Stderr = &c.stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Logf("writer: pid %d, seed %d, variants %q", cmd.Process.Pid, seed, variants)
	t.Cleanup(func() {
		if cmd.ProcessState == nil { // the test failed before kill
			_ = cmd.Process.Kill()
			select {
			case <-c.done:
			case <-time.After(xprocSafety):
			}
			_ = cmd.Wait()
		}
	})
	go func() {
		defer close(c.done)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // a partial last line is not an acknowledgement
			}
			line = strings.TrimSuffix(line, "\n")
			id, perr := uuid.Parse(line)
			c.mu.Lock()
			if perr != nil || id.String() != line {
				if c.bad == "" {
					c.bad = line
				}
			} else {
				c.ids = append(c.ids, id)
			}
			c.mu.Unlock()
			select {
			case c.notify <- struct{}{}:
			default:
			}
		}
	}()
	return c
}

// acked returns the ids acknowledged so far, in order. The slice is shared
// and must not be changed. It may be called from any goroutine.
func (c *xprocChild) acked() []uuid.UUID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ids[:len(c.ids):len(c.ids)]
}

// running fails the test if the child printed anything but event ids or
// stopped on its own.
func (c *xprocChild) running() {
	c.t.Helper()
	c.mu.Lock()
	bad := c.bad
	c.mu.Unlock()
	require.Empty(c.t, bad, "the writer printed a line that is not an event id")
	select {
	case <-c.done:
		require.FailNow(c.t, "the writer stopped on its own")
	default:
	}
}

// waitAcks waits until the child has acknowledged n events.
func (c *xprocChild) waitAcks(n int) []uuid.UUID {
	c.t.Helper()
	deadline := time.After(xprocSafety)
	for {
		if ids := c.acked(); len(ids) >= n {
			return ids
		}
		c.running()
		select {
		case <-c.notify:
		case <-c.done:
			c.running()
		case <-deadline:
			require.Failf(c.t, "the writer is stuck", "%d acknowledgements in %v, waiting for %d", len(c.acked()), xprocSafety, n)
		}
	}
}

// kill SIGKILLs the child, reaps it, checks that it died of the signal
// with nothing on stderr, and returns every id it acknowledged.
func (c *xprocChild) kill() []uuid.UUID {
	c.t.Helper()
	require.NoError(c.t, c.cmd.Process.Signal(syscall.SIGKILL))
	select {
	case <-c.done:
	case <-time.After(xprocSafety):
		require.FailNow(c.t, "the killed writer's stdout did not close")
	}
	waitErr := c.cmd.Wait()
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(c.t, ok)
	require.True(c.t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the writer must die of SIGKILL, not %v (%v); stderr:\n%s", c.cmd.ProcessState, waitErr, c.stderr.String())
	require.Empty(c.t, c.stderr.String(), "the writer wrote to stderr")
	c.mu.Lock()
	bad := c.bad
	c.mu.Unlock()
	require.Empty(c.t, bad, "the writer printed a line that is not an event id")
	return c.acked()
}

// xprocSession makes a root and an empty session for the append-loop
// helper, and closes the store.
func xprocSession(t *testing.T) (string, uuid.UUID) {
	t.Helper()
	dir := t.TempDir()
	s, err := Open(dir, &Options{ChunkSize: apiLoopChunkSize})
	require.NoError(t, err)
	m, err := s.Create(t.Context(), Meta{Name: "cross-process"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	return dir, m.ID
}

// xprocLockFS counts the lock attempts of a store and those refused
// because another holder has the lock.
type xprocLockFS struct {
	vfs.FS
	attempts, refused atomic.Int64
}

func (l *xprocLockFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	l.attempts.Add(1)
	c, err := l.FS.Lock(name, perm)
	if errors.Is(err, vfs.ErrLocked) {
		l.refused.Add(1)
	}
	return c, err
}

// xprocLocked checks that err is ErrLocked in an *fs.PathError naming the
// lock file.
func xprocLocked(t *testing.T, err error, lockPath string) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrLocked)
	var pe *fs.PathError
	if assert.ErrorAs(t, err, &pe) {
		assert.Equal(t, lockPath, pe.Path)
	}
}

// xprocCheckAfter checks the session after the writer was killed and this
// process appended mine: every acknowledged id and then mine, in order,
// mine the newest events, each a child of the event before it in the log.
func xprocCheckAfter(t *testing.T, dir string, session uuid.UUID, acked []uuid.UUID, mine []Event) {
	t.Helper()
	all := append(acked[:len(acked):len(acked)], apiIDs(mine)...)
	check := append(all[max(0, len(acked)-killOldSample):len(acked):len(acked)], apiIDs(mine)...)
	ids := killVerify(t, dir, &Options{ChunkSize: apiLoopChunkSize}, session, all, nil, check, "after the writer was killed")
	require.GreaterOrEqual(t, len(ids), len(all))
	tail := ids[len(ids)-len(mine):]
	assert.Equal(t, apiIDs(mine), tail, "this process's events are the newest")
	for i, ev := range mine {
		assert.Equal(t, ids[len(ids)-len(mine)+i-1], ev.ParentID, "event %d of this process follows the newest event before it", i)
	}
}

func TestXprocLockedAtOnce(t *testing.T) {
	dir, id := xprocSession(t)
	lockPath := filepath.Join(apiSessionDir(dir, id), lockName)
	child := xprocStart(t, dir, id, "")
	first := child.waitAcks(1)[0]

	lfs := &xprocLockFS{FS: vfs.Default}
	s := apiOpen(t, dir, &Options{fs: lfs})
	// A generous deadline as a safety net only: without WaitForLock a call
	// tries for the lock's short grace (50 ms, a few attempts: a child
	// process may share a released lock for an instant) and does not
	// wait, so none ends by the deadline.
	ctx, cancel := context.WithTimeout(t.Context(), xprocSafety)
	defer cancel()
	calls := []struct {
		name string
		call func() error
	}{
		{"Append", func() error { _, err := s.Append(ctx, id, UserText("refused")); return err }},
		{"AppendBatch", func() error {
			_, err := s.AppendBatch(ctx, id, UserText("refused"), UserText("too"))
			return err
		}},
		{"Load", func() error { _, err := s.Load(ctx, id); return err }},
		{"Event", func() error { _, err := s.Event(ctx, id, first); return err }},
		{"Tree", func() error { _, err := s.Tree(ctx, id); return err }},
		{"Head", func() error { _, err := s.Head(ctx, id); return err }},
		{"Branch", func() error { return s.Branch(ctx, id, first) }},
		{"Flush", func() error { return s.Flush(ctx, id) }},
		{"UpdateMeta", func() error {
			_, err := s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "refused" })
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			attempts := lfs.attempts.Load()
			t0 := time.Now()
			err := c.call()
			took := time.Since(t0)
			xprocLocked(t, err, lockPath)
			assert.NotErrorIs(t, err, context.DeadlineExceeded)
			n := lfs.attempts.Load() - attempts
			assert.True(t, n >= 1 && n <= 12, "%d lock attempts: those of the grace, no waiting", n)
			assert.Less(t, took, time.Second, "no waiting past the grace")
		})
	}
	refused := lfs.refused.Load() // the calls above's attempts
	// Metadata takes no lock.
	m, err := s.Meta(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "cross-process", m.Name)
	list, err := s.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 1)

	// The writer went on, undisturbed by the refused calls.
	child.waitAcks(len(child.acked()) + 10)

	// Killed, it leaves no lock: the same Store (whose refusals were not
	// cached) takes the session, reconciles it and appends.
	acked := child.kill()
	ev, err := s.Append(ctx, id, UserText("after the kill"))
	require.NoError(t, err, "the kernel released the killed writer's lock")
	assert.Equal(t, refused, lfs.refused.Load(), "only the calls above were refused")
	require.NoError(t, s.Close())
	xprocCheckAfter(t, dir, id, acked, []Event{ev})
}

func TestXprocWaitForLock(t *testing.T) {
	dir, id := xprocSession(t)
	lockPath := filepath.Join(apiSessionDir(dir, id), lockName)
	child := xprocStart(t, dir, id, "")
	child.waitAcks(1)

	lfs := &xprocLockFS{FS: vfs.Default}
	s := apiOpen(t, dir, &Options{WaitForLock: true, fs: lfs})

	// A short deadline: the call waits for it, polling, and then reports
	// both why it waited and why it stopped.
	for _, name := range []string{"Append", "Load"} {
		t.Run("deadline/"+name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			refused := lfs.refused.Load()
			var err error
			if name == "Append" {
				_, err = s.Append(ctx, id, UserText("refused"))
			} else {
				_, err = s.Load(ctx, id)
			}
			xprocLocked(t, err, lockPath)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			assert.Greater(t, lfs.refused.Load()-refused, int64(1), "the call polled the lock")
		})
	}

	// A call with a generous deadline starts waiting while the writer
	// runs...
	type result struct {
		ev  Event
		err error
	}
	waited := make(chan result, 1)
	refused := lfs.refused.Load()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), xprocSafety)
		defer cancel()
		ev, err := s.Append(ctx, id, UserText("waited for the lock"))
		waited <- result{ev, err}
	}()
	safety := time.After(xprocSafety)
	for lfs.refused.Load() < refused+3 {
		select {
		case r := <-waited:
			require.Failf(t, "the waiting call ended while the writer held the lock", "event %s, err %v", r.ev.ID, r.err)
		case <-safety:
			require.FailNow(t, "the waiting call made no lock attempts")
		case <-time.After(time.Millisecond):
		}
	}
	// ...and meanwhile another call on the same Store, with a short
	// deadline of its own, still ends by that deadline, before the writer
	// is killed.
	short := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := s.Tree(ctx, id)
		short <- err
	}()
	shortDone := false
	select {
	case err := <-short:
		shortDone = true
		require.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(5 * time.Second):
		assert.Fail(t, "a call with a 100 ms deadline waited (5 s so far) behind another call's wait for the lock")
	}
	select {
	case r := <-waited:
		require.Failf(t, "the waiting call ended while the writer held the lock", "event %s, err %v", r.ev.ID, r.err)
	default:
	}

	// The writer dies; the kernel releases its lock and the waiting call
	// takes it.
	acked := child.kill()
	var r result
	select {
	case r = <-waited:
	case <-time.After(xprocSafety):
		require.FailNow(t, "the waiting call did not get the lock of the killed writer")
	}
	require.NoError(t, r.err, "the waiting call")
	if !shortDone {
		select {
		case <-short:
		case <-time.After(xprocSafety):
			require.FailNow(t, "the short call never returned")
		}
	}
	mine := []Event{r.ev}
	ev, err := s.Append(t.Context(), id, UserText("the same store, holding the lock now"))
	require.NoError(t, err)
	mine = append(mine, ev)
	require.NoError(t, s.Close())

	// A new waiting store gets the lock at once, and so does a store that
	// does not wait.
	for _, o := range []*Options{{WaitForLock: true}, nil} {
		ctx, cancel := context.WithTimeout(t.Context(), xprocSafety)
		s := apiOpen(t, dir, o)
		ev, err := s.Append(ctx, id, UserText(fmt.Sprintf("after the kill, options %+v", o)))
		cancel()
		require.NoError(t, err)
		mine = append(mine, ev)
		require.NoError(t, s.Close())
	}
	xprocCheckAfter(t, dir, id, acked, mine)
}

// xprocTarget is the number of appends of one reader-beside-writer run.
func xprocTarget(t *testing.T) int {
	t.Helper()
	return testSize(t, xprocAppendsEnv, xprocAppendsDefault, 0)
}

// TestXprocReaderBesideWriter runs a writer in a child process and, beside
// it, a read-only store in this one calling Load, Tree, Event, Head, List,
// Revision and Verify over and over, and checks every observation:
//
//   - Load returns a path (root first, each event the child of the one
//     before, ids unique); with a linear writer, the prefix of the tree,
//     never shorter than the previous one;
//   - Tree extends the previous Tree (nothing seen ever vanishes or moves),
//     parents before children, one root;
//   - every event the writer acknowledged before a call started is in the
//     tree that follows, and Load's last event is at least as new;
//   - Event returns whole events matching the tree;
//   - Revision never goes back, differs whenever an acknowledged event
//     appeared since the previous look, and stays equal only when the tree
//     did not grow in between;
//   - Verify reports no problem (repairs of a write in progress are fine);
//   - the store never creates, writes, truncates, renames or removes
//     anything, syncs nothing and takes no lock (through a guarding
//     filesystem that refuses all of it).
//
// After the writer is killed, the reader's view holds every acknowledged
// event and equals what a writer's reconciliation keeps. Two runs: a
// linear writer that also calls Flush (rewriting index and HEAD), and one
// that starts branches.
//
// SESSIONSTORE_XPROC_APPENDS sets the appends of each run: by default 300,
// which still rotate the writer's 16 KiB chunks every few dozen events,
// with a Flush every 25 appends (linear run) or a Branch about every 10
// (branching run); .ci/run's long step makes 1500. A run lasts as long as
// its appends take: it fails if the writer acknowledges nothing for 30 s
// (stuck), and stops with a failure 15 s before the -timeout deadline.
func TestXprocReaderBesideWriter(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	for _, run := range []struct {
		name     string
		variants string
		linear   bool
	}{
		{"linear", "linear,flush", true},
		{"branching", "", false},
	} {
		t.Run(run.name, func(t *testing.T) {
			xprocReaderBesideWriter(t, run.variants, run.linear)
		})
	}
}

func xprocReaderBesideWriter(t *testing.T, variants string, linear bool) {
	target := xprocTarget(t)
	stopBy, hasDeadline := t.Deadline()
	stopBy = stopBy.Add(-xprocTimeoutMargin)
	ctx := t.Context()
	dir, id := xprocSession(t)
	r, g := roOpen(t, dir, Options{})
	child := xprocStart(t, dir, id, variants)
	child.waitAcks(1)
	start := time.Now()

	// A second goroutine reads beside the main loop: the reader's handle
	// is shared and refreshed by both.
	stop := make(chan struct{})
	var pollErr atomic.Value
	var polls atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			acked := child.acked()
			if len(acked) == 0 {
				continue
			}
			want := acked[rng.IntN(len(acked))]
			ev, err := r.Event(ctx, id, want)
			if err == nil && ev.ID != want {
				err = fmt.Errorf("Event(%s) returned %s", want, ev.ID)
			}
			if err == nil {
				var head uuid.UUID
				head, err = r.Head(ctx, id)
				if err == nil && head == uuid.Nil {
					err = errors.New("Head is nil after acknowledgements")
				}
			}
			if err == nil {
				_, err = r.Revision(ctx, id)
			}
			if err != nil {
				pollErr.CompareAndSwap(nil, err)
				return
			}
			polls.Add(1)
		}
	})
	stopPoller := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer stopPoller()

	var (
		rng        = rand.New(rand.NewPCG(3, 4))
		ids        []uuid.UUID // the reader's tree, as far as seen
		nodesSeen  []Node
		pos        = map[uuid.UUID]int{}
		ackedSeen  int // acknowledged ids already found in the tree
		prevLoad   int
		prevRev    Revision
		haveRev    bool
		prevR1     Revision // the revision at the start of the previous iteration
		prevTree   int      // the tree length that followed it
		revs       = map[Revision]bool{}
		revChanges int // looks after an acknowledgement, where the revision had to differ
		chunks     = map[uint32]bool{}
		sealedRev  int
		iters      int
		verifies   int
		tornSeen   int
		maxPath    int
		freshLoads int // Loads by a new read-only store, and how many of
		lazyLoads  int // them opened the session without its index
	)
	revision := func() Revision {
		t.Helper()
		rev, err := r.Revision(ctx, id)
		require.NoError(t, err, "Revision")
		if haveRev {
			ok := rev.Chunk > prevRev.Chunk ||
				(rev.Chunk == prevRev.Chunk && !prevRev.Sealed && (rev.Sealed || rev.Size >= prevRev.Size)) ||
				rev == prevRev
			require.True(t, ok, "the revision went back from %v to %v", prevRev, rev)
		}
		prevRev, haveRev = rev, true
		revs[rev] = true
		chunks[rev.Chunk] = true
		if rev.Sealed {
			sealedRev++
		}
		return rev
	}
	// tree reads the tree and checks that it extends what was seen.
	tree := func() []Node {
		t.Helper()
		nodes, err := r.Tree(ctx, id)
		require.NoError(t, err, "Tree")
		require.GreaterOrEqual(t, len(nodes), len(ids), "the tree shrank")
		for i := range ids {
			if nodes[i].ID != ids[i] {
				require.Failf(t, "the tree changed", "position %d held %s and holds %s now", i, ids[i], nodes[i].ID)
			}
		}
		for i := len(ids); i < len(nodes); i++ {
			n := nodes[i]
			if _, dup := pos[n.ID]; dup {
				require.Failf(t, "duplicate event", "%s at tree position %d", n.ID, i)
			}
			if i == 0 {
				require.Equal(t, uuid.Nil, n.ParentID, "the first event is the root")
			} else if _, ok := pos[n.ParentID]; !ok {
				require.Failf(t, "missing parent", "event %s (position %d) names parent %s, absent or later", n.ID, i, n.ParentID)
			}
			if linear {
				require.Equal(t, uuid.Nil, n.BranchFrom)
				if i > 0 {
					require.Equal(t, ids[i-1], n.ParentID, "the linear writer appends to the newest event")
				}
			} else if n.BranchFrom != uuid.Nil && n.BranchFrom != n.ParentID {
				require.Failf(t, "bad branch_from", "event %s: branch_from %s, parent %s", n.ID, n.BranchFrom, n.ParentID)
			}
			pos[n.ID] = i
			ids = append(ids, n.ID)
		}
		nodesSeen = nodes
		return nodes
	}
	// covers checks that the tree holds every acknowledged id.
	covers := func(acked []uuid.UUID, what string) {
		t.Helper()
		last := -1
		if ackedSeen > 0 {
			last = pos[acked[ackedSeen-1]]
		}
		for ; ackedSeen < len(acked); ackedSeen++ {
			p, ok := pos[acked[ackedSeen]]
			if !ok {
				require.Failf(t, "ACKNOWLEDGED EVENT NOT SEEN", "%s: event %s, acknowledged %d of %d before the call, is not in the reader's tree of %d events",
					what, acked[ackedSeen], ackedSeen+1, len(acked), len(ids))
			}
			require.Greater(t, p, last, "%s: acknowledged events in acknowledgement order", what)
			last = p
		}
	}

	// The run ends when the writer has acknowledged target appends, however
	// long they take; it fails if the writer makes no progress for
	// xprocSafety (stuck), or when the -timeout deadline comes near.
	progressed, lastProgress := 0, time.Now()
	for {
		acked := child.acked() // every id here was acknowledged before the calls below
		if len(acked) >= target {
			break
		}
		child.running()
		if now := time.Now(); len(acked) > progressed {
			progressed, lastProgress = len(acked), now
		} else if now.Sub(lastProgress) > xprocSafety {
			require.Failf(t, "the writer is stuck", "no acknowledgement in %v; %d of %d appends acknowledged", now.Sub(lastProgress).Round(time.Second), len(acked), target)
		}
		if hasDeadline && time.Now().After(stopBy) {
			require.Failf(t, "out of time", "the -timeout deadline is %v away, with %d of %d appends acknowledged in %v: raise -timeout or lower %s",
				xprocTimeoutMargin, len(acked), target, time.Since(start).Round(time.Second), xprocAppendsEnv)
		}
		iters++

		r1 := revision()
		if iters > 1 && len(acked) > 0 {
			if p, ok := pos[acked[len(acked)-1]]; !ok || p >= prevTree {
				require.NotEqual(t, prevR1, r1, "an event was acknowledged since the previous look, whose revision was %v", prevR1)
				revChanges++
			}
		}
		path, err := r.Load(ctx, id)
		require.NoError(t, err, "Load")
		roChain(t, path)
		maxPath = max(maxPath, len(path))
		nodes := tree()
		for i, ev := range path {
			p, ok := pos[ev.ID]
			require.True(t, ok, "Load returned %s, which the later Tree lacks", ev.ID)
			n := nodes[p]
			if ev.ParentID != n.ParentID || ev.Kind != n.Kind || int64(len(ev.Record)) != n.Size || !json.Valid(ev.Record) {
				require.Failf(t, "Load and Tree disagree", "path position %d: %s", i, ev.ID)
			}
		}
		if linear {
			require.GreaterOrEqual(t, len(path), prevLoad, "the loaded path got shorter")
			require.True(t, slices.Equal(ids[:len(path)], apiIDs(path)), "the linear writer's path is the tree")
		}
		prevLoad = len(path)
		covers(acked, "Tree after Load")

		// A new reader opens the session without its index when the log
		// is clean at that moment (lazy.go): its Load holds the events
		// acknowledged before it and agrees with the tree seen so far.
		if iters%2 == 1 {
			fg := &roGuardFS{FS: vfs.Default}
			fresh, err := Open(dir, &Options{ReadOnly: true, fs: fg})
			require.NoError(t, err)
			fpath, err := fresh.Load(ctx, id)
			require.NoError(t, err, "Load by a new reader")
			if isLazy(t, fresh, id) {
				lazyLoads++
			}
			freshLoads++
			require.NoError(t, fresh.Close())
			require.Empty(t, fg.mutations(), "a new reader changed the filesystem")
			roChain(t, fpath)
			if linear {
				n := min(len(fpath), len(ids))
				require.True(t, slices.Equal(ids[:n], apiIDs(fpath[:n])), "a new reader's path is the tree")
			}
			if len(acked) > 0 {
				require.NotEmpty(t, fpath)
				if p, ok := pos[fpath[len(fpath)-1].ID]; ok { // else newer than the tree
					assert.GreaterOrEqual(t, p, pos[acked[len(acked)-1]],
						"a new reader's last event is older than the newest acknowledged before it")
				}
			}
		}
		if len(acked) > 0 {
			require.NotEmpty(t, path)
			assert.GreaterOrEqual(t, pos[path[len(path)-1].ID], pos[acked[len(acked)-1]],
				"Load's last event is older than the newest acknowledged before it")
		}

		// Events read back whole.
		var check []uuid.UUID
		if len(acked) > 0 {
			check = append(check, acked[len(acked)-1], acked[rng.IntN(len(acked))])
		}
		if len(nodes) > 0 {
			check = append(check, nodes[len(nodes)-1].ID)
		}
		for _, want := range check {
			ev, err := r.Event(ctx, id, want)
			require.NoError(t, err, "Event %s", want)
			n := nodesSeen[pos[want]]
			if ev.ID != want || ev.ParentID != n.ParentID || ev.BranchFrom != n.BranchFrom || ev.Kind != n.Kind || ev.Role != n.Role ||
				int64(len(ev.Record)) != n.Size || !json.Valid(ev.Record) {
				require.Failf(t, "Event and Tree disagree", "event %s", want)
			}
		}
		if iters%10 == 1 {
			list, err := r.List(ctx)
			require.NoError(t, err, "List")
			require.Len(t, list, 1)
			assert.Equal(t, id, list[0].ID)
		}
		if iters%8 == 1 {
			rep, err := r.Verify(ctx, id)
			require.NoError(t, err, "Verify")
			if !rep.OK() {
				require.Failf(t, "Verify found problems beside the writer", "%v (repairs %v)", rep.Problems, rep.Repairs)
			}
			assert.GreaterOrEqual(t, rep.Records, len(nodes), "Verify saw fewer records than the Tree before it")
			for _, rp := range rep.Repairs {
				if strings.Contains(rp, "torn tail") {
					tornSeen++
				}
			}
			verifies++
		}
		again := tree()
		r2 := revision()
		if r1 == r2 {
			require.Len(t, again, len(nodes), "the tree grew while the revision stayed %v", r1)
		}
		prevR1, prevTree = r1, len(nodes)
	}
	stopPoller()
	if err, _ := pollErr.Load().(error); err != nil {
		require.NoError(t, err, "the second reading goroutine")
	}
	elapsed := time.Since(start)

	// The writer dies. Refreshed, the reader holds every acknowledged
	// event: what a writer's reconciliation keeps, no more, no less.
	acked := child.kill()
	tree()
	covers(acked, "after the kill")
	path, err := r.Load(ctx, id)
	require.NoError(t, err)
	roChain(t, path)
	require.Equal(t, ids[len(ids)-1], path[len(path)-1].ID, "Load ends at the newest event")
	rep, err := r.Verify(ctx, id)
	require.NoError(t, err)
	require.True(t, rep.OK(), "problems: %v", rep.Problems)
	w, err := Open(dir, &Options{ChunkSize: apiLoopChunkSize})
	require.NoError(t, err)
	reconciled, err := w.Tree(ctx, id)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.Equal(t, ids, apiNodeIDs(reconciled), "the reader's view is what reconciliation keeps")
	sample := acked[max(0, len(acked)-killOldSample):]
	for range killOldSample {
		sample = append(sample, acked[rng.IntN(len(acked))])
	}
	killVerify(t, dir, &Options{ChunkSize: apiLoopChunkSize}, id, acked, ids, sample, "after the reader-beside-writer run")

	assert.Empty(t, g.mutations(), "the reader tried to change the filesystem")
	assert.Positive(t, g.opens.Load())
	names := roChunkFiles(t, dir, id)
	sealed := roCount(names, chunkExt+sealedExt)
	assert.Positive(t, sealed, "no chunk was sealed during the run")
	assert.Greater(t, len(chunks), 2, "the reader saw no chunk rotation")
	assert.Positive(t, revChanges, "no look checked that the revision changed")
	assert.Positive(t, verifies)
	t.Logf("%d appends in %v (%.0f/s) beside %d reader iterations (%d verifies, %d polls of the second goroutine); %d distinct revisions (%d checked to differ) over %d chunks (%d sealed files, %d looks at a sealed newest chunk); %d verifies saw a torn tail in progress; longest path %d, tree %d; %d loads by new readers, %d without the index",
		len(acked), elapsed.Round(time.Millisecond), float64(len(acked))/elapsed.Seconds(), iters, verifies, polls.Load(),
		len(revs), revChanges, len(chunks), sealed, sealedRev, tornSeen, maxPath, len(ids), freshLoads, lazyLoads)
}
