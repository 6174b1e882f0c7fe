//go:build unix

package sessionstore

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Knobs of TestSIGKILLDuringDeletes.
const (
	deleteKillsEnv     = "SESSIONSTORE_DELETE_KILLS" // number of kills; default deleteKillsDefault
	deleteKillsDefault = 2
	deleteKillSessions = 8 // sessions each child deletes
	// deleteHelperEnv makes the test binary a child that deletes the
	// sessions named (comma-separated) in it from the store at
	// apiDirEnv, one after another, printing each id once Delete
	// returned nil, and then waits to be killed.
	deleteHelperEnv = "SESSIONSTORE_TEST_DELETE"
	deleteKillMax   = 30 * time.Second // a safety net for a stuck child
)

func init() {
	ids := os.Getenv(deleteHelperEnv)
	if ids == "" {
		return
	}
	ctx := context.Background()
	s, err := Open(os.Getenv(apiDirEnv), nil)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	for _, str := range strings.Split(ids, ",") {
		if err := s.Delete(ctx, uuid.MustParse(str)); err != nil {
			fmt.Println("delete:", err)
			os.Exit(1)
		}
		fmt.Println(str)
	}
	time.Sleep(time.Hour) // killed
	os.Exit(0)
}

// TestSIGKILLDuringDeletes kills a child process that deletes sessions
// one after another, at a random point, and checks the store after each
// kill: a session whose Delete the child acknowledged is gone; every
// other one is whole (it loads every event, Verify is clean) or gone,
// as List, ListRecent and Meta agree; the Open after the kill empties
// the trash.
func TestSIGKILLDuringDeletes(t *testing.T) {
	kills := testSize(t, deleteKillsEnv, deleteKillsDefault, 0)
	ctx := context.Background()
	exe, err := os.Executable()
	require.NoError(t, err)
	for kill := range kills {
		dir := t.TempDir()
		s, err := Open(dir, nil)
		require.NoError(t, err)
		var ids []string
		events := map[uuid.UUID]int{}
		for i := range deleteKillSessions {
			m, err := s.Create(ctx, Meta{Name: fmt.Sprint("victim ", i)})
			require.NoError(t, err)
			n := 2 + i%3
			appendN(t, s, m.ID, n)
			if i%2 == 0 {
				_, err := s.Append(ctx, m.ID, bigResult("k", i))
				require.NoError(t, err)
				n++
			}
			events[m.ID] = n
			ids = append(ids, m.ID.String())
		}
		keeper, err := s.Create(ctx, Meta{Name: "keeper"})
		require.NoError(t, err)
		appendN(t, s, keeper.ID, 3)
		require.NoError(t, s.Close())

		cmd := exec.Command(exe, "-test.run=^$")
		gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
		cmd.Env = append(os.Environ(), deleteHelperEnv+"="+strings.Join(ids, ","), apiDirEnv+"="+dir, "GORACE="+gorace)
		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		acks := make(chan string, deleteKillSessions)
		done := make(chan struct{})
		go func() {
			defer close(done)
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				acks <- sc.Text()
			}
		}()
		// Kill after a random number of acknowledged deletes, a random
		// moment into the next one.
		wait := rand.IntN(deleteKillSessions)
		var acked []string
		timeout := time.After(deleteKillMax)
		for len(acked) < wait {
			select {
			case a := <-acks:
				acked = append(acked, a)
			case <-timeout:
				_ = cmd.Process.Kill()
				t.Fatalf("kill %d: the child acknowledged %d deletes in %v; stderr: %s", kill, len(acked), deleteKillMax, stderr.String())
			}
		}
		time.Sleep(time.Duration(rand.IntN(3000)) * time.Microsecond)
		require.NoError(t, cmd.Process.Kill())
		<-done
		_ = cmd.Wait()
		close(acks)
		for a := range acks {
			acked = append(acked, a)
		}
		for _, a := range acked {
			_, err := uuid.Parse(a)
			require.NoError(t, err, "kill %d: the child printed %q; stderr: %s", kill, a, stderr.String())
		}
		t.Logf("kill %d: after %d acknowledged deletes", kill, len(acked))

		s, err = Open(dir, nil)
		require.NoError(t, err)
		assert.Empty(t, trashNames(t, s.opts.fs), "kill %d: Open emptied the trash", kill)
		list, err := s.List(ctx)
		require.NoError(t, err)
		recent, err := s.ListRecent(ctx, 100)
		require.NoError(t, err)
		listed := func(id uuid.UUID) bool {
			inList := slices.ContainsFunc(list, func(m Meta) bool { return m.ID == id })
			inRecent := slices.ContainsFunc(recent, func(m Meta) bool { return m.ID == id })
			assert.Equal(t, inList, inRecent, "kill %d, session %s: List and ListRecent agree", kill, id)
			return inList
		}
		require.True(t, listed(keeper.ID))
		for _, str := range append(ids, keeper.ID.String()) {
			id := uuid.MustParse(str)
			want, victim := events[id]
			if !victim {
				want = 3
			}
			_, err := s.Meta(ctx, id)
			if err != nil {
				require.ErrorIs(t, err, ErrNotFound, "kill %d, session %s", kill, id)
				assert.False(t, listed(id), "kill %d: a gone session is not listed", kill)
				continue
			}
			assert.NotContains(t, acked, str, "kill %d: an acknowledged delete is durable", kill)
			assert.True(t, listed(id), "kill %d: a whole session is listed", kill)
			evs, err := s.Load(ctx, id)
			require.NoError(t, err, "kill %d, session %s", kill, id)
			assert.Len(t, evs, want, "kill %d, session %s: every event", kill, id)
			r, err := s.Verify(ctx, id)
			require.NoError(t, err)
			assert.True(t, r.OK(), "kill %d, session %s: %v", kill, id, r.Problems)
		}
		require.NoError(t, s.Close())
	}
}
