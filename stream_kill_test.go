//go:build unix

package sessionstore

import (
	"bufio"
	"context"
	"fmt"
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

	"github.com/sessionstore/sessionstore/internal/deltalog"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The children of the stream's cross-process tests: the test binary run
// again with streamHelperEnv set, dispatched by init before TestMain.
const (
	streamHelperEnv  = "SESSIONSTORE_STREAM_HELPER" // "writer" or "tail"
	streamDirEnv     = "SESSIONSTORE_STREAM_DIR"
	streamSessionEnv = "SESSIONSTORE_STREAM_SESSION"
	streamCursorEnv  = "SESSIONSTORE_STREAM_CURSOR"
	streamSafety     = 30 * time.Second // a safety net for waits that take milliseconds
)

func init() {
	mode := os.Getenv(streamHelperEnv)
	if mode == "" {
		return
	}
	id, err := uuid.Parse(os.Getenv(streamSessionEnv))
	if err == nil {
		switch mode {
		case "writer":
			err = streamWriterChild(os.Getenv(streamDirEnv), id)
		case "tail":
			err = streamTailChild(os.Getenv(streamDirEnv), id, os.Getenv(streamCursorEnv))
		case "latency":
			err = streamLatencyChild(os.Getenv(streamDirEnv), id, os.Getenv(streamCursorEnv))
			if err == nil {
				os.Exit(0)
			}
		default:
			err = fmt.Errorf("unknown mode %q", mode)
		}
	}
	fmt.Fprintln(os.Stderr, "helper:", err)
	os.Exit(1)
}

// streamDelta is the data of the k-th delta of turn n of the writer child.
func streamDelta(turn, k int) string { return fmt.Sprintf("t%d-%d ", turn, k) }

// streamWriterChild publishes deltas and appends an event every 7 of
// them, forever, printing "D <data>" once Publish returned and "E <id>"
// once Append returned. Its turns start after the events the session
// holds.
func streamWriterChild(dir string, id uuid.UUID) error {
	ctx := context.Background()
	s, err := Open(dir, &Options{DurableDeltas: true})
	if err != nil {
		return err
	}
	path, err := s.Load(ctx, id)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	for turn := len(path); ; turn++ {
		for k := range 7 {
			d := streamDelta(turn, k)
			if err := s.Publish(ctx, id, Delta{Kind: DeltaText, Data: d}); err != nil {
				return err
			}
			fmt.Fprintf(w, "D %s\n", d)
			w.Flush()
		}
		ev, err := s.Append(ctx, id, AssistantText(fmt.Sprint("turn ", turn)))
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "E %s\n", ev.ID)
		w.Flush()
	}
}

// streamTailChild tails the session from cursor on a read-only store and
// prints "READY", then a line "<cursor> <item>" per update.
func streamTailChild(dir string, id uuid.UUID, cursor string) error {
	ctx := context.Background()
	s, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		return err
	}
	tl, err := s.Tail(ctx, id, cursor)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, "READY")
	w.Flush()
	for u := range tl.C {
		fmt.Fprintf(w, "%s %s\n", u.Cursor, itemOf(u))
		w.Flush()
	}
	return tl.Err()
}

// streamChild is a running helper and the lines it printed.
type streamChild struct {
	cmd    *exec.Cmd
	stderr strings.Builder
	mu     sync.Mutex
	lines  []string
	notify chan struct{}
	done   chan struct{}
}

func startStreamChild(t testing.TB, mode, dir string, id uuid.UUID, cursor string) *streamChild {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), streamHelperEnv+"="+mode, streamDirEnv+"="+dir,
		streamSessionEnv+"="+id.String(), streamCursorEnv+"="+cursor, "GORACE="+gorace)
	c := &streamChild{cmd: cmd, notify: make(chan struct{}, 1), done: make(chan struct{})}
	cmd.Stderr = &c.stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-c.done
			_ = cmd.Wait()
		}
	})
	go func() {
		defer close(c.done)
		r := bufio.NewReader(out)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return // a partial last line is not an acknowledgement
			}
			c.mu.Lock()
			c.lines = append(c.lines, strings.TrimSuffix(line, "\n"))
			c.mu.Unlock()
			select {
			case c.notify <- struct{}{}:
			default:
			}
		}
	}()
	return c
}

// waitLines waits until the child printed at least n lines.
func (c *streamChild) waitLines(t *testing.T, n int) {
	t.Helper()
	deadline := time.After(streamSafety)
	for {
		c.mu.Lock()
		got := len(c.lines)
		c.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-c.notify:
		case <-c.done:
			c.mu.Lock()
			got := len(c.lines)
			c.mu.Unlock()
			if got >= n {
				return
			}
			_ = c.cmd.Wait()
			t.Fatalf("child ended after %d lines: %s", got, c.stderr.String())
		case <-deadline:
			t.Fatalf("child printed %d of %d lines", got, n)
		}
	}
}

// kill SIGKILLs the child and returns every whole line it printed.
func (c *streamChild) kill(t *testing.T) []string {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	select {
	case <-c.done:
	case <-time.After(streamSafety):
		t.Fatal("killed child's stdout did not close")
	}
	_ = c.cmd.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lines
}

// TestStreamKilledWriterPartialOutput: a writer killed at random points
// leaves its durable deltas, which PartialOutput finds after the reopen:
// every delta whose Publish returned after the last event, and at most the
// one in flight; never deltas an event superseded, and never as events.
func TestStreamKilledWriterPartialOutput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	setup, err := Open(dir, nil)
	require.NoError(t, err)
	meta, err := setup.Create(ctx, Meta{})
	require.NoError(t, err)
	require.NoError(t, setup.Close())

	// What the children acknowledged after the last acknowledged event:
	// deltas no event settled stay partial output across kills.
	var acked []string
	lastEv := uuid.Nil
	for kill := range 4 {
		child := startStreamChild(t, "writer", dir, meta.ID, "")
		child.waitLines(t, 1+rand.IntN(60))
		lines := child.kill(t)
		mine := 0 // deltas this child acknowledged after its last event
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, "E "):
				lastEv = uuid.MustParse(l[2:])
				acked, mine = nil, 0
			case strings.HasPrefix(l, "D "):
				acked = append(acked, l[2:])
				mine++
			}
		}
		s, err := Open(dir, &Options{DurableDeltas: true})
		require.NoError(t, err)
		path, err := s.Load(ctx, meta.ID)
		require.NoError(t, err)
		p, err := s.PartialOutput(ctx, meta.ID)
		require.NoError(t, err)
		newest := uuid.Nil
		if len(path) > 0 {
			newest = path[len(path)-1].ID
		}
		var got []string
		for _, d := range p.Deltas {
			got = append(got, d.Data)
		}
		if lastEv != uuid.Nil {
			ids := map[uuid.UUID]bool{}
			for _, ev := range path {
				ids[ev.ID] = true
			}
			require.True(t, ids[lastEv], "kill %d: acknowledged event lost", kill)
		}
		if newest != lastEv {
			// An event the child appended but did not acknowledge: it
			// settles every delta before it.
			assert.Empty(t, got, "kill %d: deltas before an unacknowledged event", kill)
			acked, lastEv = nil, newest
		} else {
			if len(got) > 0 {
				assert.Equal(t, lastEv, p.After, "kill %d", kill)
			}
			if len(got) < len(acked) {
				sd := filepath.Join(dir, sessionsDir, meta.ID.String(), deltaStreamDir)
				gens, _ := deltalog.Segments(vfs.Default, sd)
				for _, g := range gens {
					_, err := deltalog.Scan(vfs.Default, filepath.Join(sd, deltalog.SegmentName(g)), 0, func(r deltalog.Record) error {
						t.Logf("segment %d off %d %c %x %q", g, r.Off, r.Type, r.Event[:], r.Data)
						return nil
					})
					t.Logf("segment %d err %v", g, err)
				}
				for _, ev := range path {
					t.Logf("event %s", ev.ID)
				}
				t.Logf("child lines %q", lines)
			}
			require.GreaterOrEqual(t, len(got), len(acked), "kill %d: acknowledged deltas lost", kill)
			assert.Equal(t, acked, got[:len(acked)], "kill %d", kill)
			assert.LessOrEqual(t, len(got)-len(acked), 1, "kill %d: more than the delta in flight", kill)
			if len(got) > len(acked) {
				turn := len(path)
				assert.Equal(t, streamDelta(turn, mine), got[len(acked)], "kill %d: the delta in flight", kill)
			}
			acked = got // the delta in flight is durable: part of what follows
		}
		for _, ev := range path {
			m, err := ev.Message()
			require.NoError(t, err)
			assert.True(t, strings.HasPrefix(m.Content, "turn "), "kill %d: an event that is not the writer's: %q", kill, m.Content)
		}
		require.NoError(t, s.Close())
	}
}

// TestStreamTailKilledAndResumed: a subscriber in another process, killed
// at random points and restarted from the cursor of the last update it
// printed, receives the whole stream exactly once, in order.
func TestStreamTailKilledAndResumed(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w := durableStore(t, dir)
	meta, err := w.Create(ctx, Meta{})
	require.NoError(t, err)

	var got []string
	cursor := ""
	child := startStreamChild(t, "tail", dir, meta.ID, cursor)
	child.waitLines(t, 1) // READY: the tail started before anything was written

	wantCh := make(chan []item, 1)
	go func() {
		var want []item
		for turn := range 6 {
			for k := range 12 {
				d := fmt.Sprintf("w%d-%d", turn, k)
				if err := w.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: d}); err != nil {
					break
				}
				want = append(want, item{delta: d})
				time.Sleep(time.Millisecond)
			}
			ev, err := w.Append(ctx, meta.ID, AssistantText(fmt.Sprint(turn)))
			if err != nil {
				break
			}
			want = append(want, item{event: ev.ID})
		}
		wantCh <- want
	}()

	take := func(lines []string) {
		for _, l := range lines {
			if l == "READY" {
				continue
			}
			c, it, ok := strings.Cut(l, " ")
			require.True(t, ok, "line %q", l)
			cursor = c
			got = append(got, it)
		}
	}
	for range 4 {
		child.waitLines(t, 2+rand.IntN(20))
		take(child.kill(t))
		child = startStreamChild(t, "tail", dir, meta.ID, cursor)
	}
	want := <-wantCh
	var wantS []string
	for _, it := range want {
		wantS = append(wantS, it.String())
	}
	child.waitLines(t, 1+len(want)-len(got))
	take(child.kill(t))
	assert.Equal(t, wantS, got)
}

// streamLatencyChild publishes n deltas (n in the cursor variable), each
// holding the time it was published in Unix nanoseconds, a millisecond
// apart, then closes the store.
func streamLatencyChild(dir string, id uuid.UUID, count string) error {
	n, err := strconv.Atoi(count)
	if err != nil {
		return err
	}
	ctx := context.Background()
	s, err := Open(dir, &Options{DurableDeltas: true})
	if err != nil {
		return err
	}
	for range n {
		d := strconv.FormatInt(time.Now().UnixNano(), 10)
		if err := s.Publish(ctx, id, Delta{Kind: DeltaText, Data: d}); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return s.Close()
}
