//go:build linux

package pgstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/pgstore"
	"github.com/sessionstore/sessionstore/pgstore/pgtest"
)

// The machine-loss test: a writer child (this test binary again, with
// killChildEnv set) appends to a session kept in PostgreSQL from four
// goroutines at once, so that several commit groups are in flight, and
// prints each acknowledged event; the parent SIGKILLs it at a random
// moment and deletes its directory (the machine is gone), and the next
// child, on a new directory, takes the session over once the lease lapses
// and goes on. At the end a Store on an empty directory must load every
// acknowledged event, each once, each writer's in its order.
//
//	SESSIONSTORE_PG_KILLS  kills (default 5; CI 50)

const (
	killChildEnv = "SESSIONSTORE_PG_KILL_CHILD"
	killLease    = time.Second
)

// killChild is the child's configuration, in JSON in killChildEnv.
type killChild struct {
	DSN, Table, Dir string
	Session         uuid.UUID
	Round           int
}

func init() {
	v := os.Getenv(killChildEnv)
	if v == "" {
		return
	}
	var c killChild
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		fmt.Printf("E config %v\n", err)
		os.Exit(2)
	}
	os.Exit(runKillChild(c))
}

func killOpts(obj sessionstore.ObjectStore) *sessionstore.Options {
	return &sessionstore.Options{Remote: obj, LeaseTime: killLease, RemoteTimeout: 20 * time.Second, ChunkSize: 16 << 10}
}

// runKillChild appends until killed, printing "A <text>" after each
// acknowledged event with one write.
func runKillChild(c killChild) int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, c.DSN)
	if err != nil {
		fmt.Printf("E pool %v\n", err)
		return 2
	}
	obj, err := pgstore.New(ctx, pool, &pgstore.Options{Table: c.Table})
	if err != nil {
		fmt.Printf("E new %v\n", err)
		return 2
	}
	s, err := sessionstore.Open(c.Dir, killOpts(obj))
	if err != nil {
		fmt.Printf("E open %v\n", err)
		return 2
	}
	// The killed writer's lease lapses in about killLease.
	for deadline := time.Now().Add(60 * time.Second); ; {
		_, err = s.Head(ctx, c.Session)
		if !errors.Is(err, sessionstore.ErrLocked) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		fmt.Printf("E head %v\n", err)
		return 2
	}
	fmt.Println("O")
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				text := fmt.Sprintf("r%d-w%d-%d", c.Round, w, i)
				if _, err := s.Append(ctx, c.Session, textEv(text)); err != nil {
					mu.Lock()
					fmt.Printf("E append %v\n", err)
					mu.Unlock()
					return
				}
				mu.Lock()
				fmt.Printf("A %s\n", text)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return 1
}

func TestKillMachineLoss(t *testing.T) {
	kills := envSize(t, "SESSIONSTORE_PG_KILLS", 5)
	srv := pgtest.Shared(t)
	ctx := context.Background()
	table := srv.Table()
	obj, err := pgstore.New(ctx, srv.Pool(t), &pgstore.Options{Table: table})
	require.NoError(t, err)
	s, err := sessionstore.Open(t.TempDir(), killOpts(obj))
	require.NoError(t, err)
	m, err := s.Create(ctx, sessionstore.Meta{Name: "killed"})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	acked := map[string]bool{}
	for round := range kills {
		dir, err := os.MkdirTemp("", "pgkill")
		require.NoError(t, err)
		cfg, err := json.Marshal(killChild{DSN: srv.DSN(), Table: table, Dir: dir, Session: m.ID, Round: round})
		require.NoError(t, err)
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+string(cfg))
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		// Kill after a random number of acknowledgements, or at once
		// after the open.
		after := rng.IntN(200)
		n := 0
		timeout := time.After(90 * time.Second)
	read:
		for {
			select {
			case l, ok := <-lines:
				if !ok {
					break read
				}
				switch {
				case strings.HasPrefix(l, "A "):
					acked[strings.TrimPrefix(l, "A ")] = true
					n++
				case strings.HasPrefix(l, "E "):
					t.Fatalf("round %d: the child failed: %s", round, l)
				}
				if n >= after && (n > 0 || l == "O") {
					_ = cmd.Process.Kill()
					after = int(^uint(0) >> 1)
				}
			case <-timeout:
				_ = cmd.Process.Kill()
				t.Fatalf("round %d: the child is stuck", round)
			}
		}
		_ = cmd.Wait()
		require.NoError(t, os.RemoveAll(dir), "the machine is gone")
	}

	// A Store on an empty directory, once the last lease lapsed.
	r, err := sessionstore.Open(t.TempDir(), killOpts(obj))
	require.NoError(t, err)
	defer r.Close()
	var texts []string
	for deadline := time.Now().Add(60 * time.Second); ; {
		var evs []sessionstore.Event
		evs, err = r.Load(ctx, m.ID)
		if err == nil {
			for _, e := range evs {
				var rec struct{ Text string }
				require.NoError(t, json.Unmarshal(e.Record, &rec))
				texts = append(texts, rec.Text)
			}
		}
		if !errors.Is(err, sessionstore.ErrLocked) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, err)
	seen := map[string]bool{}
	last := map[string]int{}
	for _, text := range texts {
		assert.False(t, seen[text], "%s twice", text)
		seen[text] = true
		var round, w, i int
		_, err := fmt.Sscanf(text, "r%d-w%d-%d", &round, &w, &i)
		require.NoError(t, err, text)
		key := fmt.Sprintf("r%d-w%d", round, w)
		if prev, ok := last[key]; ok {
			assert.Equal(t, prev+1, i, "%s follows %s-%d", text, key, prev)
		} else {
			assert.Equal(t, 0, i, "%s is the writer's first", text)
		}
		last[key] = i
	}
	var lost []string
	for text := range acked {
		if !seen[text] {
			lost = append(lost, text)
		}
	}
	assert.Empty(t, lost, "acknowledged events lost")
	t.Logf("%d kills, %d events acknowledged, %d stored (unacknowledged ones kept or cut), 0 lost", kills, len(acked), len(texts))
}
