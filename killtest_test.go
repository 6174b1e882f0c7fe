//go:build unix

package sessionstore

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Knobs of TestSIGKILLDuringAppends.
const (
	killsEnv        = "SESSIONSTORE_KILLS"     // number of kills; default killsDefault
	killSeedEnv     = "SESSIONSTORE_KILL_SEED" // replay a logged seed
	killsDefault    = 20
	killsPerBudget  = 200              // kills allowed killsBudget, scaled for others
	killsBudget     = 90 * time.Second // time allowed for killsPerBudget kills
	killsBudgetMin  = 60 * time.Second // the least time allowed, however few the kills
	killFirstAckMax = 30 * time.Second // a child that acknowledges nothing this long is stuck
	killOldSample   = 16               // older acknowledged ids read back with Event per round
	// killsPerSession bounds the kills one session takes; a longer run
	// moves on to a new session of the same store, because reopening and
	// checking a session costs time in proportion to its events.
	killsPerSession = 200
)

// killSession is one session of the test and what its children printed.
type killSession struct {
	id    uuid.UUID
	acked []uuid.UUID // every acknowledged id, in acknowledgement order
	seen  []uuid.UUID // the tree after the previous kill
}

// killSchedule says when a child is killed.
type killSchedule int

const (
	killEarly   killSchedule = iota // 0-5 ms after start: process startup
	killStartup                     // anywhere up to 1.5x the usual time to the first ack: Open, reconciliation, first appends
	killRunning                     // 0-5 ms or 5-40 ms after the first ack: appends in steady state
	killSchedules
)

func (k killSchedule) String() string {
	return [...]string{"early", "startup", "running"}[k]
}

// killRun is what one killed child printed.
type killRun struct {
	acked   []uuid.UUID // the complete lines, in order
	partial string      // a last line without its newline (not an acknowledgement)
	stderr  string
	toAck   time.Duration // from start to the first acknowledgement, 0 if none
}

// TestSIGKILLDuringAppends runs the append-loop helper (lock_test.go) in a
// child process again and again, SIGKILLs it at random moments, and after
// every kill reopens the store and checks that every event id the children
// ever acknowledged is there, in acknowledgement order, and that the session
// is consistent: a tree with one root whose parents precede their children,
// no duplicates, HEAD the newest event (in memory and in the HEAD file),
// Load working, and nothing once seen ever vanishing.
//
// A run of more than 200 kills starts a new session of the same store every
// 200 kills, so that its cost grows linearly, and checks every session at
// the end.
//
// SESSIONSTORE_KILLS=N sets the number of kills: by default 20, each
// checked in full, at moments drawn at random from the killSchedules
// (process startup; reconciliation and the first appends; steady
// appending); .ci/run's long step makes 200, and SESSIONSTORE_KILLS=2000
// makes more.
// The time budget scales with it (90 s per 200 kills, at least 60 s, cut to
// fit the -timeout deadline, so a long run needs a longer -timeout); fewer
// kills than that within the budget fails the test. SESSIONSTORE_KILL_SEED
// replays the random choices of a logged run (kill timing still depends on
// the machine).
func TestSIGKILLDuringAppends(t *testing.T) {
	target := testSize(t, killsEnv, killsDefault, 0)
	budget := max(killsBudgetMin, killsBudget*time.Duration(target)/killsPerBudget)
	deadline := time.Now().Add(budget)
	if d, ok := t.Deadline(); ok && d.Add(-15*time.Second).Before(deadline) {
		deadline = d.Add(-15 * time.Second) // leave time for the final check and a clear failure
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(killSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s=%q", killSeedEnv, v)
		seed = n
	}
	bound := time.Until(deadline).Round(time.Second)
	t.Logf("seed %d (replay with %s=%d); target %d kills within %v", seed, killSeedEnv, seed, target, bound)
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))

	dir := t.TempDir()
	opts := &Options{ChunkSize: apiLoopChunkSize}
	newSession := func() *killSession {
		s, err := Open(dir, opts)
		require.NoError(t, err)
		m, err := s.Create(t.Context(), Meta{Name: "sigkill"})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		return &killSession{id: m.ID}
	}

	exe, err := os.Executable()
	require.NoError(t, err)

	var (
		sessions   []*killSession
		ackedSet   = map[uuid.UUID]bool{}
		kills      int
		noAckKills int // kills that landed before the child's first acknowledgement
		bySchedule [killSchedules]int
		partials   int
		toAckSum   time.Duration
		toAckN     int
		inChildren time.Duration // from start to reap, summed over the children
		verifying  time.Duration // reopening and checking
		start      = time.Now()
	)
	for kills < target && time.Now().Before(deadline) {
		if kills%killsPerSession == 0 {
			sessions = append(sessions, newSession())
		}
		cur := sessions[len(sessions)-1]
		upTo := func(d time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(d) + 1)) }
		var (
			sched killSchedule
			delay time.Duration
		)
		switch r := rng.IntN(100); {
		case r < 15:
			sched, delay = killEarly, upTo(5*time.Millisecond)
		case r < 40:
			usual := 100 * time.Millisecond // until measured
			if toAckN > 0 {
				usual = toAckSum / time.Duration(toAckN)
			}
			sched, delay = killStartup, upTo(usual*3/2)
		case r < 70:
			sched, delay = killRunning, upTo(5*time.Millisecond)
		default:
			sched, delay = killRunning, 5*time.Millisecond+upTo(35*time.Millisecond)
		}
		childSeed := rng.Uint64()
		t0 := time.Now()
		run := killRunChild(t, exe, dir, cur.id, childSeed, sched, delay)
		inChildren += time.Since(t0)
		kills++
		bySchedule[sched]++
		if run.partial != "" {
			partials++
		}
		if run.toAck > 0 {
			toAckSum += run.toAck
			toAckN++
		}
		if len(run.acked) == 0 {
			noAckKills++
		}
		for _, id := range run.acked {
			require.False(t, ackedSet[id], "kill %d (seed %d): id %s acknowledged twice", kills, seed, id)
			ackedSet[id] = true
		}
		newFrom := len(cur.acked)
		cur.acked = append(cur.acked, run.acked...)

		var check []uuid.UUID // ids read back with Event: this child's and a sample of older ones
		check = append(check, cur.acked[newFrom:]...)
		for range min(killOldSample, newFrom) {
			check = append(check, cur.acked[rng.IntN(newFrom)])
		}
		what := fmt.Sprintf("kill %d (seed %d, session %s, child seed %d, schedule %s, delay %v, %d acked by this child, %d in the session)",
			kills, seed, cur.id, childSeed, sched, delay, len(run.acked), len(cur.acked))
		t0 = time.Now()
		cur.seen = killVerify(t, dir, opts, cur.id, cur.acked, cur.seen, check, what)
		verifying += time.Since(t0)
	}
	elapsed := time.Since(start)

	// Final check of every session: every acknowledged event is read back,
	// and the tree holds at least those (more if a record reached the disk
	// whole but its child died before printing the id).
	var acked, found, chunks, broken int
	for _, ks := range sessions {
		tree := killVerify(t, dir, opts, ks.id, ks.acked, ks.seen, ks.acked, fmt.Sprintf("final check (seed %d, session %s)", seed, ks.id))
		assert.GreaterOrEqual(t, len(tree), len(ks.acked), "session %s: the tree holds every acknowledged event", ks.id)
		c, b := killChunkFiles(t, dir, ks.id)
		acked, found, chunks, broken = acked+len(ks.acked), found+len(tree), chunks+c, broken+b
	}

	meanToAck := time.Duration(0)
	if toAckN > 0 {
		meanToAck = toAckSum / time.Duration(toAckN)
	}
	t.Logf("%d kills in %v (%v running children, %v verifying; schedules: early %d, startup %d, running %d); %d before the child's first acknowledgement; mean time to first ack %v",
		kills, elapsed.Round(time.Millisecond), inChildren.Round(time.Millisecond), verifying.Round(time.Millisecond),
		bySchedule[killEarly], bySchedule[killStartup], bySchedule[killRunning], noAckKills, meanToAck.Round(time.Microsecond))
	t.Logf("%d events acknowledged, %d found (%d unacknowledged but whole) in %d sessions; %d chunks, %d torn tails cut; %d partial stdout lines ignored",
		acked, found, found-acked, len(sessions), chunks, broken, partials)
	require.GreaterOrEqual(t, kills, target,
		"only %d of %d kills within the time bound (%v); set %s to change the target", kills, target, bound, killsEnv)
	assert.Positive(t, acked, "the children acknowledged nothing: the test exercised no append")
}

// killRunChild starts the append-loop helper, kills it with SIGKILL delay
// after its start (killEarly, killStartup) or after its first
// acknowledgement (killRunning), and returns what it printed.
func killRunChild(t *testing.T, exe, dir string, session uuid.UUID, seed uint64, sched killSchedule, delay time.Duration) killRun {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	// A race-enabled helper would sleep a second at exit by default.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(),
		apiHelperEnv+"=append-loop", apiDirEnv+"="+dir, apiSessionEnv+"="+session.String(),
		apiSeedEnv+"="+strconv.FormatUint(seed, 10), "GORACE="+gorace)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	started := time.Now()
	defer func() {
		if cmd.ProcessState == nil { // a failed check: do not leave the child running
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	// Read the child's stdout line by line. A line counts only once its
	// newline has arrived.
	var (
		mu       sync.Mutex
		lines    []string
		partial  string
		toAck    time.Duration
		firstAck = make(chan struct{})
		done     = make(chan error, 1)
	)
	go func() {
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				mu.Lock()
				partial = line
				mu.Unlock()
				if errors.Is(err, io.EOF) {
					err = nil
				}
				done <- err
				return
			}
			mu.Lock()
			lines = append(lines, strings.TrimSuffix(line, "\n"))
			if len(lines) == 1 {
				toAck = time.Since(started)
				close(firstAck)
			}
			mu.Unlock()
		}
	}()

	stuck := false
	if sched == killRunning {
		select {
		case <-firstAck:
		case err := <-done:
			done <- err // the child ended on its own: reported below
		case <-time.After(killFirstAckMax):
			stuck = true
		}
	}
	time.Sleep(delay)
	// ErrProcessDone when the child already exited: the wait status below
	// tells.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		require.NoError(t, err, "SIGKILL")
	}
	select {
	case err := <-done:
		require.NoError(t, err, "reading the child's stdout")
	case <-time.After(30 * time.Second):
		require.FailNow(t, "the killed child's stdout did not close")
	}
	waitErr := cmd.Wait()

	mu.Lock()
	defer mu.Unlock()
	run := killRun{partial: partial, stderr: stderr.String(), toAck: toAck}
	report := func() string {
		return fmt.Sprintf("child seed %d, schedule %s, delay %v; stdout %d lines, last %q, partial %q; stderr:\n%s",
			seed, sched, delay, len(lines), lastOf(lines), partial, run.stderr)
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok, "wait status of %T", cmd.ProcessState.Sys())
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"the child must die of SIGKILL, not %v (%v): %s", cmd.ProcessState, waitErr, report())
	require.Empty(t, run.stderr, "the child wrote to stderr: %s", report())
	require.False(t, stuck, "the child acknowledged nothing in %v: %s", killFirstAckMax, report())
	for i, line := range lines {
		id, err := uuid.Parse(line)
		require.NoError(t, err, "line %d of the child's stdout is not an event id: %s", i+1, report())
		require.Equal(t, line, id.String(), "line %d is not a canonical id: %s", i+1, report())
		run.acked = append(run.acked, id)
	}
	return run
}

func lastOf(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[len(lines)-1]
}

// killVerify opens the store after a kill and checks the session: every
// acknowledged id present, in acknowledgement order; every event of prev
// (the tree after the previous kill) still there, in the same order; the
// tree consistent; HEAD the newest event; Load working; the events of check
// read back whole with Event. It returns the tree's ids.
func killVerify(t *testing.T, dir string, opts *Options, session uuid.UUID, acked, prev, check []uuid.UUID, what string) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	s, err := Open(dir, opts)
	require.NoError(t, err, what)
	defer func() { assert.NoError(t, s.Close(), "%s: close", what) }()

	// Tree opens and reconciles the session. The checks of every node and
	// every acknowledged id run after each kill, so they compare plainly and
	// call testify only to fail: its reflection, under -race, would cost
	// more than the rest of the test.
	nodes, err := s.Tree(ctx, session)
	require.NoError(t, err, "%s: Tree (reconciliation)", what)
	// After reconciliation the session verifies clean, with nothing left
	// to repair.
	report, err := s.Verify(ctx, session)
	require.NoError(t, err, "%s: Verify", what)
	if !report.OK() || len(report.Repairs) > 0 {
		require.Failf(t, "session does not verify clean", "%s: problems %v, repairs %v", what, report.Problems, report.Repairs)
	}
	fail := func(title, format string, args ...any) {
		t.Helper()
		require.Failf(t, title, "%s: "+format, append([]any{what}, args...)...)
	}
	pos := make(map[uuid.UUID]int, len(nodes))
	ids := make([]uuid.UUID, len(nodes))
	reachesRoot := make([]bool, len(nodes))
	roots := 0
	for i, n := range nodes {
		ids[i] = n.ID
		if n.ID == uuid.Nil {
			fail("nil id", "tree position %d has the nil id", i)
		}
		if j, dup := pos[n.ID]; dup {
			fail("duplicate event", "%s at tree positions %d and %d", n.ID, j, i)
		}
		pos[n.ID] = i
		if n.ParentID == uuid.Nil {
			roots++
			reachesRoot[i] = true
		} else {
			j, ok := pos[n.ParentID]
			if !ok {
				fail("missing parent", "event %s (tree position %d) names parent %s, which is absent or comes later", n.ID, i, n.ParentID)
			}
			reachesRoot[i] = reachesRoot[j]
		}
		if !reachesRoot[i] {
			fail("broken chain", "the parent chain of %s does not reach a root", n.ID)
		}
		if n.BranchFrom != uuid.Nil && n.BranchFrom != n.ParentID {
			fail("bad branch_from", "event %s has branch_from %s but parent %s", n.ID, n.BranchFrom, n.ParentID)
		}
		if n.Kind != KindMessage && n.Kind != KindToolCall && n.Kind != KindToolResult {
			fail("unexpected kind", "event %s has kind %q, which the workload never appends", n.ID, n.Kind)
		}
		if n.Time.IsZero() || n.Size <= 0 {
			fail("bad node", "event %s has time %v and record size %d", n.ID, n.Time, n.Size)
		}
	}
	if len(nodes) > 0 && roots != 1 {
		fail("several roots", "%d roots; the workload appends one", roots)
	}

	// Nothing once recovered vanishes or moves.
	require.GreaterOrEqual(t, len(ids), len(prev), "%s: the tree shrank", what)
	for i := range prev {
		if ids[i] != prev[i] {
			fail("the tree changed", "position %d held %s after the previous kill and holds %s now", i, prev[i], ids[i])
		}
	}

	// Every acknowledged event is there, in acknowledgement order.
	last := -1
	for k, id := range acked {
		i, ok := pos[id]
		if !ok {
			fail("LOST ACKNOWLEDGED EVENT", "event %s, acknowledged %d of %d, is missing from the tree of %d events", id, k+1, len(acked), len(nodes))
		}
		if i <= last {
			fail("acknowledgement order", "acknowledged event %s (number %d) is at tree position %d, before an event acknowledged earlier (position %d)", id, k+1, i, last)
		}
		last = i
	}

	// HEAD is the newest event, and reconciliation wrote it to the HEAD file.
	head, err := s.Head(ctx, session)
	require.NoError(t, err, what)
	sdir := filepath.Join(dir, "sessions", session.String())
	if len(nodes) == 0 {
		require.Equal(t, uuid.Nil, head, what)
	} else {
		require.Equal(t, ids[len(ids)-1], head, "%s: HEAD is the newest event in tree order", what)
		b, err := os.ReadFile(filepath.Join(sdir, "HEAD"))
		require.NoError(t, err, "%s: the HEAD file", what)
		require.Equal(t, head.String()+"\n", string(b), "%s: the HEAD file after reconciliation", what)
	}
	_, err = os.Stat(filepath.Join(sdir, "HEAD.tmp"))
	require.ErrorIs(t, err, os.ErrNotExist, "%s: reconciliation leaves no HEAD.tmp", what)

	// Load returns the path from the root to HEAD, with records (Load checks
	// each record against its index entry; the records' JSON is checked
	// below, for the events of check).
	path, err := s.Load(ctx, session)
	require.NoError(t, err, "%s: Load", what)
	var want []uuid.UUID
	for i := len(nodes) - 1; i >= 0; {
		want = append(want, nodes[i].ID)
		if nodes[i].ParentID == uuid.Nil {
			break
		}
		i = pos[nodes[i].ParentID]
	}
	require.Len(t, path, len(want), "%s: Load", what)
	for k, ev := range path {
		if w := want[len(want)-1-k]; ev.ID != w || ev.ParentID != nodes[pos[w]].ParentID || int64(len(ev.Record)) != nodes[pos[w]].Size {
			fail("Load", "position %d of the active path is %s (parent %s, %d bytes), want %s (parent %s, %d bytes)",
				k, ev.ID, ev.ParentID, len(ev.Record), w, nodes[pos[w]].ParentID, nodes[pos[w]].Size)
		}
	}

	// Events read back whole, matching the tree.
	for _, id := range check {
		ev, err := s.Event(ctx, session, id)
		require.NoError(t, err, "%s: Event %s", what, id)
		n := nodes[pos[id]]
		require.Equal(t, id, ev.ID, what)
		require.Equal(t, n.ParentID, ev.ParentID, "%s: parent of %s", what, id)
		require.Equal(t, n.BranchFrom, ev.BranchFrom, "%s: branch_from of %s", what, id)
		require.Equal(t, n.Kind, ev.Kind, "%s: kind of %s", what, id)
		require.Equal(t, n.Role, ev.Role, "%s: role of %s", what, id)
		require.Equal(t, n.Size, int64(len(ev.Record)), "%s: record size of %s", what, id)
		require.True(t, json.Valid(ev.Record), "%s: record of %s", what, id)
	}
	return ids
}

// killChunkFiles counts the chunk files of a session and the torn tails
// reconciliation cut off (kept as "<chunk>.broken-<offset>").
func killChunkFiles(t *testing.T, dir string, session uuid.UUID) (chunks, broken int) {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(dir, "sessions", session.String(), "chunks"))
	require.NoError(t, err)
	for _, de := range des {
		switch {
		case strings.Contains(de.Name(), ".broken-"):
			broken++
		case strings.HasSuffix(de.Name(), ".jsonl"):
			chunks++
		}
	}
	return chunks, broken
}
