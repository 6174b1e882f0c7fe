//go:build unix

package sessionstore

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
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

// Knobs of TestSIGKILLMultiSession.
const (
	msKillsEnv     = "SESSIONSTORE_MULTI_KILLS"     // kills of the 64-session writer; default msKillsDefault
	msKillSeedEnv  = "SESSIONSTORE_MULTI_KILL_SEED" // replay a logged seed
	msKillsDefault = 4
	// msKillWriters and msKillOthers are the sessions of the two
	// children: the writer killed at random, and the other process
	// writing other sessions of the root meanwhile.
	msKillWriters = 64
	msKillOthers  = 8
	// msKillsPerSet bounds the kills one set of sessions takes; a longer
	// run moves on to new sessions of the same root, so that checking
	// after each kill costs about the same all along.
	msKillsPerSet = 25
	// msKillOldSample is how many older acknowledged events of each
	// session are read back after each kill besides the new ones; the
	// final check reads back every one.
	msKillOldSample = 4
	// msKillHelperEnv makes the test binary a child that appends to the
	// sessions it names (comma-separated ids) in the root apiDirEnv, one
	// goroutine per session, until it is killed; see msAppendLoop.
	msKillHelperEnv = "SESSIONSTORE_TEST_MULTI_LOOP"
	// msKillChunkSize and msKillBlobThreshold: chunks rotate every few
	// dozen events of a session, and about half the larger records
	// (1-8 KiB) are blobs.
	msKillChunkSize     = 16 << 10
	msKillBlobThreshold = 4 << 10
	msKillAckMax        = 30 * time.Second // a child that acknowledges nothing for this long is stuck
	msKillReapMax       = 30 * time.Second // a killed child's stdout closes within this
)

func init() {
	ids := os.Getenv(msKillHelperEnv)
	if ids == "" {
		return
	}
	msg := msAppendLoop(os.Getenv(apiDirEnv), ids, os.Getenv(apiSeedEnv))
	fmt.Fprintln(os.Stderr, msg)
	os.Exit(1)
}

// msKillOptions are the options of the children and of the verifier.
func msKillOptions() *Options {
	o := &Options{ChunkSize: msKillChunkSize, BlobThreshold: msKillBlobThreshold}
	journalTestOptions(o)
	return o
}

// msAppendLoop runs in a child process: it opens the store at dir and
// appends to each session of ids (comma-separated) from a goroutine of
// its own, until the process is killed. Most events are user messages of
// about 300 bytes; one in ten is a tool result of 1-8 KiB (a blob above
// msKillBlobThreshold), one in twenty a tool call; the first and every
// sixteenth is a tool result above the threshold. After each Append
// that returned nil, and never before, it writes
// "<session> <id> <parent id> <sha256>\n" to stdout with one Write (one
// write(2) of less than PIPE_BUF bytes: lines of different goroutines do
// not mix), the SHA-256, in lower-case hex, being that of the record as
// the store must give it back (compacted as prepareRecord does). It
// returns only on a failure, saying what failed.
func msAppendLoop(dir, ids, seed string) string {
	ctx := context.Background()
	n, err := strconv.ParseUint(seed, 10, 64)
	if err != nil {
		return "bad seed: " + err.Error()
	}
	var sessions []uuid.UUID
	for str := range strings.SplitSeq(ids, ",") {
		id, err := uuid.Parse(str)
		if err != nil {
			return "bad session id: " + err.Error()
		}
		sessions = append(sessions, id)
	}
	s, err := Open(dir, msKillOptions())
	if err != nil {
		return "open: " + err.Error()
	}
	failed := make(chan string, len(sessions))
	for g, id := range sessions {
		go func() {
			rng := rand.New(rand.NewPCG(n, uint64(g)))
			for i := 0; ; i++ {
				var ev Event
				switch r := rng.IntN(20); {
				case i%16 == 0:
					// A blob first, and every sixteenth: a child killed
					// after one acknowledgement has stored one, whatever
					// its draws.
					ev = ToolResultEvent(ToolResult{CallID: fmt.Sprintf("call-%d", i), Output: strings.Repeat("b", msKillBlobThreshold+1+rng.IntN(4<<10))})
				case r < 17:
					ev = UserText(fmt.Sprintf("message %d of %d/%d: %s", i, n, g, strings.Repeat("u", 250+rng.IntN(100))))
				case r < 18:
					ev = ToolCallEvent(ToolCall{CallID: fmt.Sprintf("call-%d", i), Name: "read_file", Arguments: []byte(`{"path":"/tmp/x"}`)})
				default:
					ev = ToolResultEvent(ToolResult{CallID: fmt.Sprintf("call-%d", i), Output: strings.Repeat(string(rune('a'+i%26)), 1<<10+rng.IntN(7<<10))})
				}
				var rec bytes.Buffer
				if err := json.Compact(&rec, ev.Record); err != nil {
					failed <- fmt.Sprintf("record %d of %s: %v", i, id, err)
					return
				}
				sum := sha256.Sum256(rec.Bytes())
				out, err := s.Append(ctx, id, ev)
				if err != nil {
					failed <- fmt.Sprintf("append %d to %s: %v", i, id, err)
					return
				}
				line := id.String() + " " + out.ID.String() + " " + out.ParentID.String() + " " + hex.EncodeToString(sum[:]) + "\n"
				if _, err := os.Stdout.Write([]byte(line)); err != nil {
					select {} // the parent is gone; wait for the kill
				}
			}
		}()
	}
	return <-failed
}

// msKillAck is one acknowledgement line of msAppendLoop.
type msKillAck struct {
	session, id, parent uuid.UUID
	sum                 [sha256.Size]byte
}

// parseMSKillAck parses "<session> <id> <parent id> <sha256>", ids
// canonical, the digest in lower-case hex.
func parseMSKillAck(line string) (msKillAck, error) {
	var a msKillAck
	f := strings.Split(line, " ")
	if len(f) != 4 {
		return a, fmt.Errorf("%q is not \"<session> <id> <parent id> <sha256>\"", line)
	}
	for i, dst := range []*uuid.UUID{&a.session, &a.id, &a.parent} {
		id, err := uuid.Parse(f[i])
		if err != nil || id.String() != f[i] {
			return a, fmt.Errorf("%q: %q is not a canonical id", line, f[i])
		}
		*dst = id
	}
	if a.id == uuid.Nil || a.session == uuid.Nil {
		return a, fmt.Errorf("%q: the nil id", line)
	}
	if n, err := hex.Decode(a.sum[:], []byte(f[3])); err != nil || n != sha256.Size || hex.EncodeToString(a.sum[:]) != f[3] {
		return a, fmt.Errorf("%q: %q is not a SHA-256 in lower-case hex", line, f[3])
	}
	return a, nil
}

// msChild is a running msAppendLoop child and what it printed so far.
type msChild struct {
	cmd      *exec.Cmd
	seed     uint64
	started  time.Time
	stderr   strings.Builder
	firstAck chan struct{} // closed at the first complete line
	done     chan error    // the end of stdout

	mu      sync.Mutex
	lines   []string
	partial string // a last line without its newline
	toAck   time.Duration
}

// msStartChild starts msAppendLoop on sessions of the root dir.
func msStartChild(t *testing.T, exe, dir string, sessions []*msKillSession, seed uint64) *msChild {
	t.Helper()
	ids := make([]string, len(sessions))
	for i, ks := range sessions {
		ids[i] = ks.id.String()
	}
	c := &msChild{cmd: exec.Command(exe, "-test.run=^$"), seed: seed, firstAck: make(chan struct{}), done: make(chan error, 1)}
	// A race-enabled helper would sleep a second at exit by default.
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	c.cmd.Env = append(os.Environ(), msKillHelperEnv+"="+strings.Join(ids, ","), apiDirEnv+"="+dir,
		apiSeedEnv+"="+strconv.FormatUint(seed, 10), "GORACE="+gorace)
	c.cmd.Stderr = &c.stderr
	stdout, err := c.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, c.cmd.Start())
	c.started = time.Now()
	t.Cleanup(func() {
		if c.cmd.ProcessState == nil { // a failed check: do not leave the child running
			_ = c.cmd.Process.Kill()
			_ = c.cmd.Wait()
		}
	})
	go func() {
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				c.mu.Lock()
				c.partial = line
				c.mu.Unlock()
				if errors.Is(err, io.EOF) {
					err = nil
				}
				c.done <- err
				return
			}
			c.mu.Lock()
			c.lines = append(c.lines, strings.TrimSuffix(line, "\n"))
			if len(c.lines) == 1 {
				c.toAck = time.Since(c.started)
				close(c.firstAck)
			}
			c.mu.Unlock()
		}
	}()
	return c
}

// waitAck waits for the child's first acknowledgement; a child that
// acknowledges nothing within msKillAckMax, or exits, fails the test.
func (c *msChild) waitAck(t *testing.T, what string) {
	t.Helper()
	select {
	case <-c.firstAck:
	case err := <-c.done:
		c.done <- err
		_ = c.cmd.Wait()
		require.FailNow(t, "the child exited", "%s: child seed %d, %v; stderr:\n%s", what, c.seed, c.cmd.ProcessState, c.stderr.String())
	case <-time.After(msKillAckMax):
		require.FailNow(t, "STUCK", "%s: child seed %d acknowledged nothing in %v; stderr:\n%s", what, c.seed, msKillAckMax, c.stderr.String())
	}
}

// kill SIGKILLs the child, waits for its end and returns the
// acknowledgements it printed, and whether a last line was cut. The
// child must die of the signal, having written nothing to stderr.
func (c *msChild) kill(t *testing.T, what string) (acks []msKillAck, partial bool) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		require.NoError(t, err, "SIGKILL")
	}
	select {
	case err := <-c.done:
		require.NoError(t, err, "%s: reading the child's stdout", what)
	case <-time.After(msKillReapMax):
		require.FailNow(t, "the killed child's stdout did not close", "%s: in %v; stderr:\n%s", what, msKillReapMax, c.stderr.String())
	}
	waitErr := c.cmd.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	report := fmt.Sprintf("%s: child seed %d; stdout %d lines, partial %q; stderr:\n%s", what, c.seed, len(c.lines), c.partial, c.stderr.String())
	ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok, "wait status of %T", c.cmd.ProcessState.Sys())
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child must die of SIGKILL, not %v (%v): %s", c.cmd.ProcessState, waitErr, report)
	require.Empty(t, c.stderr.String(), "the child wrote to stderr: %s", report)
	for i, line := range c.lines {
		a, err := parseMSKillAck(line)
		require.NoError(t, err, "line %d of the child's stdout: %s", i+1, report)
		acks = append(acks, a)
	}
	return acks, c.partial != ""
}

// msKillSession is one session of TestSIGKILLMultiSession and what its
// children printed.
type msKillSession struct {
	id      uuid.UUID
	acked   []uuid.UUID // every acknowledged id, in acknowledgement order
	printed map[uuid.UUID]msKillAck
	checked int         // acked[:checked] were read back after an earlier kill
	seen    []uuid.UUID // the tree after the previous check
}

// msKillRecord adds a killed child's acknowledgements to their sessions,
// checking the chain they print: each session's first event of this
// child names as parent HEAD as the previous check left it, and each
// later one the event this child acknowledged just before in that
// session (the children never branch). It returns the number of
// acknowledgements.
func msKillRecord(t *testing.T, sessions []*msKillSession, acks []msKillAck, what string) int {
	t.Helper()
	byID := map[uuid.UUID]*msKillSession{}
	last := map[uuid.UUID]uuid.UUID{}
	for _, ks := range sessions {
		byID[ks.id] = ks
		if len(ks.seen) > 0 {
			last[ks.id] = ks.seen[len(ks.seen)-1]
		}
	}
	for k, a := range acks {
		ks := byID[a.session]
		if ks == nil {
			require.Failf(t, "acknowledgement of another session", "%s: line %d names session %s, which the child was not given", what, k+1, a.session)
		}
		if a.parent != last[a.session] {
			require.Failf(t, "chain of acknowledgements", "%s: line %d: event %s of session %s names parent %s, not %s (HEAD after the previous check, or this child's previous event)",
				what, k+1, a.id, a.session, a.parent, last[a.session])
		}
		if _, dup := ks.printed[a.id]; dup {
			require.Failf(t, "acknowledged twice", "%s: event %s of session %s", what, a.id, a.session)
		}
		last[a.session] = a.id
		ks.acked = append(ks.acked, a.id)
		ks.printed[a.id] = a
	}
	return len(acks)
}

// msKillVerifiers is how many sessions msKillVerify checks at once: the
// checks wait on the disk (reconciliation and Close replace HEAD files),
// and these waits overlap.
const msKillVerifiers = 8

// msKillVerify opens the store (this process is then the third on the
// root: the killed writer's, and perhaps the other child's, still
// running) and checks each of sessions, which no live process holds (see
// msKillCheck), msKillVerifiers at a time. With all, every acknowledged
// event is read back; else those acknowledged since the previous check
// and msKillOldSample older ones. It returns the number of events the
// sessions hold.
func msKillVerify(t *testing.T, dir string, sessions []*msKillSession, all bool, rng *rand.Rand, what string) int {
	t.Helper()
	ctx := context.Background()
	s, err := Open(dir, msKillOptions())
	require.NoError(t, err, what)
	reads := make([][]uuid.UUID, len(sessions)) // drawn here: the same for a replayed seed
	for i, ks := range sessions {
		reads[i] = ks.acked[ks.checked:]
		if all {
			reads[i] = ks.acked
		} else if ks.checked > 0 {
			for range msKillOldSample {
				reads[i] = append(reads[i][:len(reads[i]):len(reads[i])], ks.acked[rng.IntN(ks.checked)])
			}
		}
	}
	var (
		next  = make(chan int)
		errs  = make([]error, len(sessions))
		sizes = make([]int, len(sessions))
		wg    sync.WaitGroup
	)
	for range msKillVerifiers {
		wg.Go(func() {
			for i := range next {
				sizes[i], errs[i] = msKillCheck(ctx, s, dir, sessions[i], reads[i])
			}
		})
	}
	for i := range sessions {
		next <- i
	}
	close(next)
	wg.Wait()
	require.NoError(t, s.Close(), "%s: close", what)
	total := 0
	for i, err := range errs {
		require.NoError(t, err, "%s, session %s (%d acknowledged)", what, sessions[i].id, len(sessions[i].acked))
		total += sizes[i]
	}
	return total
}

// msKillCheck checks one session through s: its events form one chain
// from the root; every event of the tree after the previous check is
// still there, in place; every acknowledged event is there, in
// acknowledgement order, with the parent its child printed; HEAD is the
// newest event, in memory and in the HEAD file; Verify is clean with
// nothing to repair; and the events of read come back with the record
// whose SHA-256 their child printed. It returns the number of events and
// the first problem found, and on success records the tree and what was
// read in ks.
func msKillCheck(ctx context.Context, s *Store, dir string, ks *msKillSession, read []uuid.UUID) (int, error) {
	// Tree opens and reconciles the session.
	nodes, err := s.Tree(ctx, ks.id)
	if err != nil {
		return 0, fmt.Errorf("tree (reconciliation): %w", err)
	}
	pos := make(map[uuid.UUID]int, len(nodes))
	for i, n := range nodes {
		parent := uuid.Nil
		if i > 0 {
			parent = nodes[i-1].ID
		}
		if n.ParentID != parent || n.BranchFrom != uuid.Nil {
			return 0, fmt.Errorf("broken chain: event %d, %s, has parent %s and branch_from %s; want parent %s", i, n.ID, n.ParentID, n.BranchFrom, parent)
		}
		pos[n.ID] = i
	}
	if len(nodes) < len(ks.seen) {
		return 0, fmt.Errorf("the tree shrank: %d events, %d after the previous check", len(nodes), len(ks.seen))
	}
	for i, id := range ks.seen {
		if nodes[i].ID != id {
			return 0, fmt.Errorf("the tree changed: position %d held %s after the previous check and holds %s now", i, id, nodes[i].ID)
		}
	}
	prev := -1
	for k, id := range ks.acked {
		i, ok := pos[id]
		if !ok {
			return 0, fmt.Errorf("LOST ACKNOWLEDGED EVENT %s, acknowledged %d of %d, missing from the tree of %d events", id, k+1, len(ks.acked), len(nodes))
		}
		if i <= prev {
			return 0, fmt.Errorf("acknowledgement order: event %s (number %d) is at position %d, before one acknowledged earlier (position %d)", id, k+1, i, prev)
		}
		prev = i
		if p := ks.printed[id].parent; nodes[i].ParentID != p {
			return 0, fmt.Errorf("WRONG PARENT: acknowledged event %s has parent %s in the store; its child printed %s", id, nodes[i].ParentID, p)
		}
	}
	head, err := s.Head(ctx, ks.id)
	if err != nil {
		return 0, fmt.Errorf("head: %w", err)
	}
	want := uuid.Nil
	if len(nodes) > 0 {
		want = nodes[len(nodes)-1].ID
		b, err := os.ReadFile(filepath.Join(dir, sessionsDir, ks.id.String(), "HEAD"))
		if err != nil || string(b) != want.String()+"\n" {
			return 0, fmt.Errorf("the HEAD file after reconciliation holds %q (%v); want %s", b, err, want)
		}
	}
	if head != want {
		return 0, fmt.Errorf("HEAD is %s, not the newest event %s", head, want)
	}
	r, err := s.Verify(ctx, ks.id)
	if err != nil {
		return 0, fmt.Errorf("verify: %w", err)
	}
	if !r.OK() || len(r.Repairs) > 0 {
		return 0, fmt.Errorf("the session does not verify clean: problems %v, repairs %v", r.Problems, r.Repairs)
	}
	for _, id := range read {
		ev, err := s.Event(ctx, ks.id, id)
		if err != nil {
			return 0, fmt.Errorf("event %s: %w", id, err)
		}
		if ev.Digest != "" {
			if ev, err = s.Resolve(ctx, ks.id, ev); err != nil {
				return 0, fmt.Errorf("resolve %s: %w", id, err)
			}
		}
		if a := ks.printed[id]; ev.ID != id || ev.ParentID != a.parent || sha256.Sum256(ev.Record) != a.sum {
			return 0, fmt.Errorf("WRONG EVENT: Event %s returns %s, parent %s, a record of %d bytes with SHA-256 %x; its child printed parent %s and SHA-256 %x",
				id, ev.ID, ev.ParentID, len(ev.Record), sha256.Sum256(ev.Record), a.parent, a.sum)
		}
	}
	ks.checked = len(ks.acked)
	ks.seen = make([]uuid.UUID, len(nodes))
	for i, n := range nodes {
		ks.seen[i] = n.ID
	}
	return len(nodes), nil
}

// TestSIGKILLMultiSession runs a child process that appends to 64
// sessions at once (msAppendLoop: one goroutine per session, messages of
// about 300 bytes and some tool results of 1-8 KiB, half of them blobs),
// kills it with SIGKILL at a random moment (during its startup, or
// 0-50 ms after its first acknowledgement), and checks all 64 sessions
// against what it printed (msKillVerify). Meanwhile a second child
// appends to 8 other sessions of the same root; half the time it is
// killed with the first, and half the time it goes on writing while this
// process opens the first child's sessions, and is killed after; its
// sessions are checked after its kill as well.
//
// SESSIONSTORE_MULTI_KILLS=N sets the number of kills of the 64-session
// child (the other child is killed as often): by default 4; .ci/run's
// long step makes 200. Every 25 kills the children move to new sessions
// of the same root, so that a check costs about the same all along; at
// the end every session is checked again, every acknowledged event read
// back. SESSIONSTORE_MULTI_KILL_SEED replays a logged run's random
// choices (kill timing still depends on the machine).
func TestSIGKILLMultiSession(t *testing.T) {
	target := testSize(t, msKillsEnv, msKillsDefault, 0)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(msKillSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, "%s=%q", msKillSeedEnv, v)
		seed = n
	}
	t.Logf("seed %d (replay with %s=%d); %d kills", seed, msKillSeedEnv, seed, target)
	rng := rand.New(rand.NewPCG(seed, 0x6d736b696c6c))
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	ctx := t.Context()

	type set struct{ writers, others []*msKillSession }
	newSet := func() set {
		s, err := Open(dir, msKillOptions())
		require.NoError(t, err)
		defer func() { require.NoError(t, s.Close()) }()
		var out set
		for i := range msKillWriters + msKillOthers {
			m, err := s.Create(ctx, Meta{Name: fmt.Sprint("sigkill ", i)})
			require.NoError(t, err)
			ks := &msKillSession{id: m.ID, printed: map[uuid.UUID]msKillAck{}}
			if i < msKillWriters {
				out.writers = append(out.writers, ks)
			} else {
				out.others = append(out.others, ks)
			}
		}
		return out
	}

	var (
		sets                               []set
		kills, early, othersAlive          int
		acked, othersAcked, partials, held int
		toAckSum                           time.Duration
		toAckN                             int
		verifying, verifyingOthers         time.Duration // checking the writer's sessions, the other's
		start                              = time.Now()
	)
	upTo := func(d time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(d) + 1)) }
	for kills < target {
		if kills%msKillsPerSet == 0 {
			sets = append(sets, newSet())
		}
		cur := sets[len(sets)-1]
		what := fmt.Sprintf("kill %d (seed %d)", kills+1, seed)
		other := msStartChild(t, exe, dir, cur.others, rng.Uint64())
		writer := msStartChild(t, exe, dir, cur.writers, rng.Uint64())
		// When: during startup (Open, the sessions' first opens and
		// appends), or in steady appending.
		if rng.IntN(4) == 0 {
			usual := 200 * time.Millisecond // until measured
			if toAckN > 0 {
				usual = toAckSum / time.Duration(toAckN)
			}
			time.Sleep(upTo(usual * 3 / 2))
			early++
		} else {
			writer.waitAck(t, what)
			time.Sleep(upTo(200 * time.Millisecond))
		}
		// The other child is killed with the writer, just before or just
		// after it, or goes on writing while the writer's sessions are
		// checked. The first of each set acknowledges something before
		// its kill, so that every set has the other child's events.
		otherLives := rng.IntN(2) == 0
		otherFirst := !otherLives && rng.IntN(2) == 0
		killOther := func(what string) []msKillAck {
			if kills%msKillsPerSet == 0 {
				other.waitAck(t, what)
			}
			acks, _ := other.kill(t, what)
			return acks
		}
		var oacks []msKillAck
		if otherFirst {
			oacks = killOther(what + ", other child")
		}
		wacks, partial := writer.kill(t, what)
		if partial {
			partials++
		}
		writer.mu.Lock()
		if writer.toAck > 0 {
			toAckSum += writer.toAck
			toAckN++
		}
		writer.mu.Unlock()
		if !otherLives && !otherFirst {
			oacks = killOther(what + ", other child")
		}
		what = fmt.Sprintf("%s, %d acknowledged by the writer", what, len(wacks))
		acked += msKillRecord(t, cur.writers, wacks, what)
		t0 := time.Now()
		held = msKillVerify(t, dir, cur.writers, false, rng, what)
		verifying += time.Since(t0)
		if otherLives {
			// It wrote all the while; now it dies too.
			othersAlive++
			oacks = killOther(what + ", other child")
		}
		kills++
		what = fmt.Sprintf("kill %d of the other child (seed %d), %d acknowledged", kills, seed, len(oacks))
		othersAcked += msKillRecord(t, cur.others, oacks, what)
		t0 = time.Now()
		msKillVerify(t, dir, cur.others, false, rng, what)
		verifyingOthers += time.Since(t0)
	}
	elapsed := time.Since(start)

	// Every session of every set, every acknowledged event read back.
	var found, chunks, broken, blobs int
	for i, st := range sets {
		all := append(append([]*msKillSession(nil), st.writers...), st.others...)
		found += msKillVerify(t, dir, all, true, rng, fmt.Sprintf("final check of set %d (seed %d)", i+1, seed))
		for _, ks := range all {
			c, b, bl := killSessionFiles(t, dir, ks.id)
			chunks, broken, blobs = chunks+c, broken+b, blobs+bl
		}
	}
	meanToAck := time.Duration(0)
	if toAckN > 0 {
		meanToAck = toAckSum / time.Duration(toAckN)
	}
	t.Logf("%d kills in %v (%v checking the writer's sessions, %v the other's; %d kills during startup; the other child went on writing through %d checks); mean time to the first ack %v",
		kills, elapsed.Round(time.Millisecond), verifying.Round(time.Millisecond), verifyingOthers.Round(time.Millisecond), early, othersAlive, meanToAck.Round(time.Microsecond))
	t.Logf("%d events acknowledged by the 64-session writer and %d by the other, in %d sessions; %d found; %d in the last writer's sessions at its last check; %d chunks, %d blobs, %d torn tails cut; %d partial stdout lines ignored",
		acked, othersAcked, len(sets)*(msKillWriters+msKillOthers), found, held, chunks, blobs, broken, partials)
	assert.Equal(t, target, kills)
	assert.Positive(t, acked, "the writer acknowledged nothing: the test exercised no append")
	assert.Positive(t, othersAcked, "the other child acknowledged nothing: the test exercised no second writer")
	assert.Positive(t, blobs, "no record was stored as a blob")
}
