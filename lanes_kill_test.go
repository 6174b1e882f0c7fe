//go:build unix

package sessionstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Knobs of TestSIGKILLDuringLaneMoves.
const (
	laneKillsEnv     = "SESSIONSTORE_LANE_KILLS" // number of kills; default laneKillsDefault
	laneKillsDefault = 6
)

// laneModel is what the parent expects of the session's lanes.
type laneModel struct {
	active string
	tips   map[string]uuid.UUID
}

func (m laneModel) clone() laneModel {
	return laneModel{active: m.active, tips: maps.Clone(m.tips)}
}

func (m laneModel) String() string {
	names := slices.Sorted(maps.Keys(m.tips))
	var b strings.Builder
	fmt.Fprintf(&b, "active %s:", m.active)
	for _, n := range names {
		fmt.Fprintf(&b, " %s=%s", n, m.tips[n])
	}
	return b.String()
}

// apply returns m after the lane call of intent line fields f.
func (m laneModel) apply(t *testing.T, f []string) laneModel {
	t.Helper()
	out := m.clone()
	switch f[1] {
	case "C", "M":
		require.Len(t, f, 4)
		out.tips[f[2]] = uuid.MustParse(f[3])
	case "D":
		delete(out.tips, f[2])
	case "S":
		out.active = f[2]
	default:
		t.Fatalf("unknown intent %q", f)
	}
	return out
}

// TestSIGKILLDuringLaneMoves runs the lane-loop child again and again,
// SIGKILLs it at random moments, and after every kill reopens the store
// and checks the session's lanes against what the children printed:
//
//   - every acknowledged append's parent is the tip of the lane that was
//     active, as the acknowledged lane calls before it (in this child or
//     an earlier, killed one) left it: a switch or a move survives the
//     kill and the next append, in the next process, goes onto the lane;
//   - the lanes after the kill are those every acknowledged call left,
//     or those the one call in flight at the kill would leave (for an
//     append in flight: the active lane's tip is then a new event whose
//     parent is the tip before), nothing else;
//   - every lane names an event the session holds, and the next parent
//     is the active lane's tip.
//
// SESSIONSTORE_LANE_KILLS=N makes N kills (default 6).
func TestSIGKILLDuringLaneMoves(t *testing.T) {
	kills := testSize(t, laneKillsEnv, laneKillsDefault, 0)
	ctx := context.Background()
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	meta, err := s.Create(ctx, Meta{Name: "lane kills"})
	require.NoError(t, err)
	first := apiAppend(t, s, meta.ID, UserText("root"))
	require.NoError(t, s.Close())
	model := laneModel{active: DefaultLane, tips: map[string]uuid.UUID{DefaultLane: first.ID}}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	var acks, laneAcks, inFlight int
	for k := range kills {
		// A child that takes over after a kill first settles what the
		// dead one's journal holds (journal.go), so its first append
		// comes some milliseconds after the process starts: the kills come
		// both in that startup and while it appends.
		lines, partial := laneKillChild(t, exe, dir, meta.ID, seed+uint64(k), time.Duration(rng.IntN(150))*time.Millisecond)
		var intent []string
		for _, line := range lines {
			f := strings.Fields(line)
			require.NotEmpty(t, f)
			switch f[0] {
			case "E":
				t.Fatalf("kill %d: the child failed: %s", k, line)
			case "I":
				require.Nil(t, intent, "kill %d: an intent before the last one's acknowledgement", k)
				intent = f
			case "A":
				require.Equal(t, []string{"I", "A"}, intent, "kill %d", k)
				require.Len(t, f, 3)
				assert.Equal(t, model.tips[model.active].String(), f[2], "kill %d: an append continues the active lane %q (%s)", k, model.active, model)
				model.tips[model.active] = uuid.MustParse(f[1])
				intent = nil
				acks++
			case "OK":
				require.NotNil(t, intent, "kill %d", k)
				model = model.apply(t, intent)
				intent = nil
				laneAcks++
			default:
				t.Fatalf("kill %d: unknown line %q", k, line)
			}
		}
		_ = partial // an unfinished line acknowledges nothing

		s, err := Open(dir, nil)
		require.NoError(t, err, "kill %d", k)
		ls, err := s.Lanes(ctx, meta.ID)
		require.NoError(t, err, "kill %d", k)
		got := laneModel{tips: map[string]uuid.UUID{}}
		for _, l := range ls {
			got.tips[l.Name] = l.Tip
			if l.Active {
				got.active = l.Name
			}
			_, err := s.Event(ctx, meta.ID, l.Tip)
			require.NoError(t, err, "kill %d: lane %q names an event the session holds", k, l.Name)
		}
		parent, _, err := s.NextParent(ctx, meta.ID)
		require.NoError(t, err)
		assert.Equal(t, got.tips[got.active], parent, "kill %d: the next append goes onto the active lane", k)
		switch {
		case got.String() == model.String():
		case intent != nil && intent[1] == "A":
			// The append in flight reached the disk: the active lane's
			// tip is a new event on the old tip.
			inFlight++
			require.Equal(t, model.active, got.active, "kill %d", k)
			e, err := s.Event(ctx, meta.ID, got.tips[got.active])
			require.NoError(t, err)
			require.Equal(t, model.tips[model.active], e.ParentID, "kill %d: the unacknowledged append continues the lane", k)
			rest, want := got.clone(), model.clone()
			delete(rest.tips, rest.active)
			delete(want.tips, want.active)
			require.Equal(t, want.String(), rest.String(), "kill %d", k)
		case intent != nil:
			inFlight++
			require.Equal(t, model.apply(t, intent).String(), got.String(), "kill %d: the lanes are the acknowledged ones or those of the call in flight (%q)", k, intent)
		default:
			require.Equal(t, model.String(), got.String(), "kill %d: the acknowledged lanes", k)
		}
		model = got
		r, err := s.Verify(ctx, meta.ID)
		require.NoError(t, err)
		require.True(t, r.OK(), "kill %d: %v", k, r.Problems)
		require.NoError(t, s.Close())
	}
	t.Logf("%d kills: %d appends and %d lane calls acknowledged, %d calls in flight found done", kills, acks, laneAcks, inFlight)
	assert.Positive(t, acks, "no append was acknowledged")
	assert.Positive(t, laneAcks, "no lane call was acknowledged")
}

// laneKillChild starts the lane-loop child, kills it with SIGKILL delay
// after its first line, and returns its complete lines and a partial last
// one.
func laneKillChild(t *testing.T, exe, dir string, session uuid.UUID, seed uint64, delay time.Duration) ([]string, string) {
	t.Helper()
	cmd := exec.Command(exe, "-test.run=^$")
	gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
	cmd.Env = append(os.Environ(), apiHelperEnv+"=lane-loop", apiDirEnv+"="+dir, apiSessionEnv+"="+session.String(),
		apiSeedEnv+"="+strconv.FormatUint(seed, 10), "GORACE="+gorace)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	type result struct {
		lines   []string
		partial string
		err     error
	}
	firstLine := make(chan struct{})
	done := make(chan result, 1)
	go func() {
		var res result
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				res.partial = line
				if !errors.Is(err, io.EOF) {
					res.err = err
				}
				done <- res
				return
			}
			res.lines = append(res.lines, strings.TrimSuffix(line, "\n"))
			if len(res.lines) == 1 {
				close(firstLine)
			}
		}
	}()
	select {
	case <-firstLine:
	case <-time.After(killAckMax):
		t.Fatalf("the lane-loop child printed nothing in %v; stderr:\n%s", killAckMax, stderr.String())
	}
	time.Sleep(delay)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		require.NoError(t, err, "SIGKILL")
	}
	var res result
	select {
	case res = <-done:
		require.NoError(t, res.err)
	case <-time.After(killReapMax):
		t.Fatalf("the killed child's stdout did not close; stderr:\n%s", stderr.String())
	}
	_ = cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	require.True(t, ok)
	require.True(t, ws.Signaled() && ws.Signal() == syscall.SIGKILL, "the child must die of SIGKILL, not %v; last line %q; stderr:\n%s", cmd.ProcessState, lastOf(res.lines), stderr.String())
	return res.lines, res.partial
}
