//go:build unix

package sessionstore

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
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
	killsEnv     = "SESSIONSTORE_KILLS"     // number of kills; default killsDefault
	killSeedEnv  = "SESSIONSTORE_KILL_SEED" // replay a logged seed
	killsDefault = 20
	// killAckMax is the gate for a stuck child: one killed in steady
	// state must have acknowledged an event within this long of its
	// start (it takes milliseconds), or the test fails with its stderr.
	killAckMax = 30 * time.Second
	// killReapMax bounds the wait for a killed child's stdout to close.
	killReapMax = 30 * time.Second
	// killDeadlineMargin is kept before the -timeout deadline for the
	// final check and a clear failure: a run that reaches it fails,
	// saying how many kills it made.
	killDeadlineMargin = 15 * time.Second
	killOldSample      = 16 // older acknowledged ids the cross-process tests read back with Event
	// killsPerSession bounds the kills one session takes; a longer run
	// moves on to a new session of the same store, because reopening and
	// checking a session costs time in proportion to its events.
	killsPerSession = 200
	// killLoopVariants are the append-loop variants the children run:
	// each acknowledgement names the event's parent and the SHA-256 of
	// its record, and some records are blobs.
	killLoopVariants = "digest,blobs"
)

// killAck is one acknowledgement line of the append-loop helper in its
// "digest" variant: what the child appended, as the child saw it.
type killAck struct {
	id, parent uuid.UUID
	sum        [sha256.Size]byte // of the record the child appended, compacted
	// branch: the event starts a branch (its parent is not the event the
	// same child acknowledged just before), derived from the chain of
	// acknowledgements; its branch_from must then be its parent.
	branch bool
}

// killSession is one session of the test and what its children printed.
type killSession struct {
	id      uuid.UUID
	acked   []uuid.UUID // every acknowledged id, in acknowledgement order
	printed map[uuid.UUID]killAck
	seen    []uuid.UUID // the tree after the previous kill
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
	acked   []killAck // the complete lines, in order
	partial string    // a last line without its newline (not an acknowledgement)
	stderr  string
	toAck   time.Duration // from start to the first acknowledgement, 0 if none
	// outOfTime: the -timeout deadline came before the child's first
	// acknowledgement, which the kill waited for.
	outOfTime bool
}

// TestSIGKILLDuringAppends runs the append-loop helper (lock_test.go) in a
// child process again and again, SIGKILLs it at random moments, and after
// every kill reopens the store and checks the session against what the
// children printed, not only against the store's own tree. Each child
// prints, after each Append returns, the event's id, its parent and the
// SHA-256 of the record it appended (the "digest" variant; about half its
// tool results are blobs). After every kill:
//
//   - the chain of acknowledgements holds together: a child's first event
//     is a child of HEAD as the check after the previous kill left it, and
//     each later one a child of the event the same child acknowledged just
//     before, or of an earlier one of its own (a branch);
//   - every event any child acknowledged is in the session, in
//     acknowledgement order, with exactly the parent the child printed
//     (in the tree and from Event), branch_from set exactly when it starts
//     a branch, and a record (blobs resolved) whose SHA-256 is the one the
//     child printed; so is every acknowledged event Load returns;
//   - the session is consistent: a tree with one root whose parents
//     precede their children, no duplicates, HEAD the newest event (in
//     memory and in the HEAD file), Verify clean with nothing to repair,
//     and nothing once seen vanishing.
//
// A run of more than 200 kills starts a new session of the same store every
// 200 kills, so that its cost grows linearly, and checks every session at
// the end.
//
// SESSIONSTORE_KILLS=N sets the number of kills: by default 20, each
// checked in full, at moments drawn at random from the killSchedules
// (process startup; reconciliation and the first appends; steady
// appending); .ci/run's long step makes 200, and SESSIONSTORE_KILLS=2000
// makes more. The test makes exactly that many, however long they take:
// there is no time budget. A stuck child is caught by a gate instead: a
// child to be killed in steady state that acknowledges nothing within 30 s
// of its start fails the test with its stderr, as does a killed child
// whose stdout stays open 30 s. A run that comes within 15 s of the
// -timeout deadline fails there, saying how many kills it made (a long run
// needs a longer -timeout). SESSIONSTORE_KILL_SEED replays the random
// choices of a logged run (kill timing still depends on the machine).
func TestSIGKILLDuringAppends(t *testing.T) {
	target := testSize(t, killsEnv, killsDefault, 0)
	var stop time.Time // the end of the time the kills may take; zero: no deadline
	if d, ok := t.Deadline(); ok {
		stop = d.Add(-killDeadlineMargin)
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(killSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s=%q", killSeedEnv, v)
		seed = n
	}
	t.Logf("seed %d (replay with %s=%d); %d kills", seed, killSeedEnv, seed, target)
	rng := rand.New(rand.NewPCG(seed, 0x6b696c6c))

	dir := t.TempDir()
	opts := &Options{ChunkSize: apiLoopChunkSize, BlobThreshold: apiLoopBlobThreshold}
	newSession := func() *killSession {
		s, err := Open(dir, opts)
		require.NoError(t, err)
		m, err := s.Create(t.Context(), Meta{Name: "sigkill"})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		return &killSession{id: m.ID, printed: map[uuid.UUID]killAck{}}
	}

	exe, err := os.Executable()
	require.NoError(t, err)

	var (
		sessions   []*killSession
		ackedSet   = map[uuid.UUID]bool{}
		kills      int
		noAckKills int // kills that landed before the child's first acknowledgement
		bySchedule [killSchedules]int
		branches   int
		partials   int
		toAckSum   time.Duration
		toAckN     int
		inChildren time.Duration // from start to reap, summed over the children
		verifying  time.Duration // reopening and checking
		start      = time.Now()
	)
	outOfTime := func() {
		t.Helper()
		require.FailNowf(t, "out of time", "%d of %d kills made in %v, and the -timeout deadline is %v away: run %d kills with a longer -timeout (seed %d)",
			kills, target, time.Since(start).Round(time.Second), killDeadlineMargin, target, seed)
	}
	for kills < target {
		if !stop.IsZero() && time.Now().After(stop) {
			outOfTime()
		}
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
		run := killRunChild(t, exe, dir, cur.id, childSeed, sched, delay, stop)
		inChildren += time.Since(t0)
		if run.outOfTime {
			outOfTime()
		}
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
		what := fmt.Sprintf("kill %d (seed %d, session %s, child seed %d, schedule %s, delay %v, %d acked by this child, %d before)",
			kills, seed, cur.id, childSeed, sched, delay, len(run.acked), len(cur.acked))

		// The chain the child printed: its first event a child of HEAD as
		// the previous check left it, each later one a child of its
		// previous event or, starting a branch, of an earlier one of its
		// own.
		head := uuid.Nil
		if len(cur.seen) > 0 {
			head = cur.seen[len(cur.seen)-1]
		}
		own := map[uuid.UUID]bool{}
		for k := range run.acked {
			a := &run.acked[k]
			switch {
			case k == 0 && a.parent != head:
				require.Failf(t, "chain of acknowledgements", "%s: the child's first event %s names parent %s, not HEAD %s", what, a.id, a.parent, head)
			case k > 0 && a.parent != run.acked[k-1].id:
				if !own[a.parent] {
					require.Failf(t, "chain of acknowledgements", "%s: acknowledgement %d, event %s, names parent %s, which is neither the event before it, %s, nor an earlier one of this child",
						what, k+1, a.id, a.parent, run.acked[k-1].id)
				}
				a.branch = true
				branches++
			}
			own[a.id] = true
			require.False(t, ackedSet[a.id], "%s: id %s acknowledged twice", what, a.id)
			ackedSet[a.id] = true
			cur.acked = append(cur.acked, a.id)
			cur.printed[a.id] = *a
		}

		t0 = time.Now()
		cur.seen = killVerifyPrinted(t, dir, opts, cur.id, cur.acked, cur.seen, nil, cur.printed, what)
		verifying += time.Since(t0)
	}
	elapsed := time.Since(start)

	// Final check of every session: every acknowledged event is read back,
	// and the tree holds at least those (more if a record reached the disk
	// whole but its child died before printing the id).
	var acked, found, chunks, broken, blobs int
	for _, ks := range sessions {
		tree := killVerifyPrinted(t, dir, opts, ks.id, ks.acked, ks.seen, nil, ks.printed, fmt.Sprintf("final check (seed %d, session %s)", seed, ks.id))
		assert.GreaterOrEqual(t, len(tree), len(ks.acked), "session %s: the tree holds every acknowledged event", ks.id)
		c, b, bl := killSessionFiles(t, dir, ks.id)
		acked, found, chunks, broken, blobs = acked+len(ks.acked), found+len(tree), chunks+c, broken+b, blobs+bl
	}

	meanToAck := time.Duration(0)
	if toAckN > 0 {
		meanToAck = toAckSum / time.Duration(toAckN)
	}
	t.Logf("%d kills in %v (%v running children, %v verifying; schedules: early %d, startup %d, running %d); %d before the child's first acknowledgement; mean time to first ack %v",
		kills, elapsed.Round(time.Millisecond), inChildren.Round(time.Millisecond), verifying.Round(time.Millisecond),
		bySchedule[killEarly], bySchedule[killStartup], bySchedule[killRunning], noAckKills, meanToAck.Round(time.Microsecond))
	t.Logf("%d events acknowledged (%d starting a branch), each checked against its child's parent and record digest after every kill; %d found (%d unacknowledged but whole) in %d sessions; %d chunks, %d blobs, %d torn tails cut; %d partial stdout lines ignored",
		acked, branches, found, found-acked, len(sessions), chunks, blobs, broken, partials)
	assert.Equal(t, target, kills, "the run makes exactly the kills asked for")
	assert.Positive(t, acked, "the children acknowledged nothing: the test exercised no append")
	assert.Positive(t, blobs, "no record was stored as a blob: the test exercised no blob")
}

// killRunChild starts the append-loop helper, kills it with SIGKILL delay
// after its start (killEarly, killStartup) or after its first
// acknowledgement (killRunning), and returns what it printed. A child to
// be killed running must acknowledge an event within killAckMax, or the
// test fails as stuck; if stop (the end of the time the kills may take,
// zero for none) comes first, the child is killed and the run says so.
func killRunChild(t *testing.T, exe, dir string, session uuid.UUID, seed uint64, sched killSchedule, delay time.Duration, stop time.Time) killRun {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	// A race-enabled helper would sleep a second at exit by default.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(),
		apiHelperEnv+"=append-loop", apiDirEnv+"="+dir, apiSessionEnv+"="+session.String(),
		apiSeedEnv+"="+strconv.FormatUint(seed, 10), apiLoopEnv+"="+killLoopVariants, "GORACE="+gorace)
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

	// The gate: a running child acknowledges its first event within
	// killAckMax, or it is stuck; unless the deadline comes first.
	stuck, outOfTime := false, false
	if sched == killRunning {
		gate := killAckMax
		if !stop.IsZero() && time.Until(stop) < gate {
			gate, outOfTime = max(time.Until(stop), 0), true
		}
		select {
		case <-firstAck:
			outOfTime = false
		case err := <-done:
			done <- err // the child ended on its own: reported below
			outOfTime = false
		case <-time.After(gate):
			stuck = !outOfTime
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
	case <-time.After(killReapMax):
		require.FailNow(t, "the killed child's stdout did not close", "in %v; stderr:\n%s", killReapMax, stderr.String())
	}
	waitErr := cmd.Wait()

	mu.Lock()
	defer mu.Unlock()
	run := killRun{partial: partial, stderr: stderr.String(), toAck: toAck, outOfTime: outOfTime}
	report := func() string {
		return fmt.Sprintf("child seed %d, schedule %s, delay %v; stdout %d lines, last %q, partial %q; stderr:\n%s",
			seed, sched, delay, len(lines), lastOf(lines), partial, run.stderr)
	}
	require.False(t, stuck, "STUCK: the child acknowledged nothing in %v while alive: %s", killAckMax, report())
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok, "wait status of %T", cmd.ProcessState.Sys())
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL,
		"the child must die of SIGKILL, not %v (%v): %s", cmd.ProcessState, waitErr, report())
	require.Empty(t, run.stderr, "the child wrote to stderr: %s", report())
	for i, line := range lines {
		a, err := parseKillAck(line)
		require.NoError(t, err, "line %d of the child's stdout: %s", i+1, report())
		run.acked = append(run.acked, a)
	}
	return run
}

// parseKillAck parses an acknowledgement line of the "digest" variant:
// "<id> <parent id> <sha256>", ids canonical, the digest in lower-case hex.
func parseKillAck(line string) (killAck, error) {
	var a killAck
	f := strings.Split(line, " ")
	if len(f) != 3 {
		return a, fmt.Errorf("%q is not \"<id> <parent id> <sha256>\"", line)
	}
	for i, dst := range []*uuid.UUID{&a.id, &a.parent} {
		id, err := uuid.Parse(f[i])
		if err != nil || id.String() != f[i] {
			return a, fmt.Errorf("%q: %q is not a canonical id", line, f[i])
		}
		*dst = id
	}
	if a.id == uuid.Nil {
		return a, fmt.Errorf("%q: the nil id", line)
	}
	if n, err := hex.Decode(a.sum[:], []byte(f[2])); err != nil || n != sha256.Size || hex.EncodeToString(a.sum[:]) != f[2] {
		return a, fmt.Errorf("%q: %q is not a SHA-256 in lower-case hex", line, f[2])
	}
	return a, nil
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
	return killVerifyPrinted(t, dir, opts, session, acked, prev, check, nil, what)
}

// killVerifyPrinted is killVerify checking, besides, every acknowledged
// event against what its child printed, when printed holds it: the parent
// (in the tree, from Event and from Load), branch_from, and the SHA-256
// of the record (blobs resolved). With printed, every acknowledged event
// is read back with Event, and check may be nil.
func killVerifyPrinted(t *testing.T, dir string, opts *Options, session uuid.UUID, acked, prev, check []uuid.UUID, printed map[uuid.UUID]killAck, what string) []uuid.UUID {
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
	// sibling: the event's parent had a child before it, so that an event
	// appended as a branch starts one beside it (branch_from set); a
	// branch onto a leaf goes on from it.
	sibling := make([]bool, len(nodes))
	hasChild := make(map[uuid.UUID]bool, len(nodes))
	roots := 0
	for i, n := range nodes {
		sibling[i] = hasChild[n.ParentID]
		hasChild[n.ParentID] = true
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

	// Events read back whole, matching the tree, and what their children
	// printed.
	if printed != nil {
		check = acked
	}
	for _, id := range check {
		ev, err := s.Event(ctx, session, id)
		require.NoError(t, err, "%s: Event %s", what, id)
		if ev.Digest != "" {
			ev, err = s.Resolve(ctx, session, ev)
			require.NoError(t, err, "%s: Resolve %s", what, id)
		}
		n := nodes[pos[id]]
		if ev.ID != id || ev.ParentID != n.ParentID || ev.BranchFrom != n.BranchFrom || ev.Kind != n.Kind || ev.Role != n.Role ||
			int64(len(ev.Record)) != n.Size || ev.Size != n.Size || !json.Valid(ev.Record) {
			fail("Event", "Event %s returns %s (parent %s, branch_from %s, %s, %s, %d bytes, size %d, valid JSON %v); the tree says parent %s, branch_from %s, %s, %s, %d bytes",
				id, ev.ID, ev.ParentID, ev.BranchFrom, ev.Kind, ev.Role, len(ev.Record), ev.Size, json.Valid(ev.Record),
				n.ParentID, n.BranchFrom, n.Kind, n.Role, n.Size)
		}
		if a, ok := printed[id]; ok {
			wantFrom := uuid.Nil
			if a.branch && sibling[pos[id]] {
				wantFrom = a.parent
			}
			switch {
			case n.ParentID != a.parent:
				fail("WRONG PARENT", "acknowledged event %s has parent %s in the store; its child printed %s", id, n.ParentID, a.parent)
			case n.BranchFrom != wantFrom:
				fail("wrong branch_from", "acknowledged event %s has branch_from %s; the chain its child printed says %s", id, n.BranchFrom, wantFrom)
			case sha256.Sum256(ev.Record) != a.sum:
				fail("WRONG RECORD", "acknowledged event %s reads back a record of %d bytes with SHA-256 %x; its child appended one with SHA-256 %x",
					id, len(ev.Record), sha256.Sum256(ev.Record), a.sum)
			}
		}
	}
	// And so do the acknowledged events of the active path as Load
	// returned them.
	for k, ev := range path {
		if a, ok := printed[ev.ID]; ok && (ev.ParentID != a.parent || sha256.Sum256(ev.Record) != a.sum) {
			fail("Load", "position %d of the active path, acknowledged event %s, has parent %s and a record with SHA-256 %x; its child printed parent %s and SHA-256 %x",
				k, ev.ID, ev.ParentID, sha256.Sum256(ev.Record), a.parent, a.sum)
		}
	}
	return ids
}

// killSessionFiles counts the chunk files of a session (plain or sealed),
// the torn tails reconciliation cut off (kept as
// "<chunk>.broken-<offset>") and the blobs.
func killSessionFiles(t *testing.T, dir string, session uuid.UUID) (chunks, broken, blobs int) {
	t.Helper()
	sdir := filepath.Join(dir, "sessions", session.String())
	des, err := os.ReadDir(filepath.Join(sdir, chunksDir))
	require.NoError(t, err)
	for _, de := range des {
		if strings.Contains(de.Name(), ".broken-") {
			broken++
		} else if _, ok := parseChunkName(de.Name()); ok {
			chunks++
		}
	}
	err = filepath.WalkDir(filepath.Join(sdir, blobsDir), func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), blobExt) {
			blobs++
		}
		return err
	})
	require.NoError(t, err)
	return chunks, broken, blobs
}
