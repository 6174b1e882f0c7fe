//go:build linux

package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

// The Fork-or-Delete child of TestForkDeleteAcrossProcesses: the test
// binary started again with forkDeleteEnv set to a forkDeleteChild in
// JSON. It opens a Store on a root of its own (another machine), waits
// until Start, forks the parent at At, or deletes it, and prints one
// line: "ok <fork id>" (for a Delete, "ok -"), or "err <kind> <message>".
const forkDeleteEnv = "SESSIONSTORE_REMOTE_FORKDELETE_CHILD"

type forkDeleteChild struct {
	procChild        // the bucket (Dir is the root)
	Op        string // "fork" or "delete"
	Parent    string
	At        string
	Start     time.Time
}

func init() {
	v := os.Getenv(forkDeleteEnv)
	if v == "" {
		return
	}
	var c forkDeleteChild
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", forkDeleteEnv, err)
		os.Exit(2)
	}
	fmt.Println(c.run())
	os.Exit(0)
}

func (c *forkDeleteChild) run() string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := remote.OpenS3(ctx, remote.S3Config{Endpoint: c.Endpoint, Region: c.Region, Bucket: c.Bucket, AccessKey: c.AccessKey, SecretKey: c.SecretKey})
	if err != nil {
		return "err open " + err.Error()
	}
	defer b.Close()
	s, err := sessionstore.Open(c.Dir, procOptions(remote.New(b), false))
	if err != nil {
		return "err open " + err.Error()
	}
	defer s.Close()
	time.Sleep(time.Until(c.Start))
	parent, at := uuid.MustParse(c.Parent), uuid.MustParse(c.At)
	if c.Op == "fork" {
		m, err := s.Fork(ctx, parent, at)
		if err != nil {
			return "err " + forkDeleteKind(err) + " " + strings.ReplaceAll(err.Error(), "\n", " ")
		}
		return "ok " + m.ID.String()
	}
	if err := s.Delete(ctx, parent); err != nil {
		return "err " + forkDeleteKind(err) + " " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	return "ok -"
}

func forkDeleteKind(err error) string {
	switch {
	case errors.Is(err, sessionstore.ErrHasForks):
		return "hasforks"
	case errors.Is(err, sessionstore.ErrLocked):
		return "locked"
	case errors.Is(err, sessionstore.ErrNotFound):
		return "notfound"
	}
	return "other"
}

// TestForkDeleteAcrossProcesses: a Fork and a Delete of its parent, in
// two processes on roots of their own sharing a bucket of versitygw (two
// machines), started together round after round at varied offsets:
// never does a fork outlive its parent. After each round the bucket
// holds the parent and perhaps the fork, or neither; a fork whose parent
// is deleted is the failure.
func TestForkDeleteAcrossProcesses(t *testing.T) {
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	obj := remote.New(srv.Open(t, srv.Config(bucket)))
	ctx := context.Background()
	base := t.TempDir()
	exe, err := os.Executable()
	require.NoError(t, err)
	outcomes := map[string]int{}
	rounds := 24
	for round := range rounds {
		owner, err := sessionstore.Open(filepath.Join(base, fmt.Sprint("owner", round)), procOptions(obj, false))
		require.NoError(t, err)
		m, err := owner.Create(ctx, sessionstore.Meta{Name: "parent"})
		require.NoError(t, err)
		ev, err := owner.Append(ctx, m.ID, sessionstore.UserText("the fork point"))
		require.NoError(t, err)
		require.NoError(t, owner.Close()) // released

		start := time.Now().Add(300 * time.Millisecond)
		run := func(op string, delay time.Duration) *exec.Cmd {
			c := forkDeleteChild{procChild: procTemplate(srv, bucket), Op: op, Parent: m.ID.String(), At: ev.ID.String(), Start: start.Add(delay)}
			c.Dir = filepath.Join(base, fmt.Sprint(op, round))
			j, err := json.Marshal(c)
			require.NoError(t, err)
			cmd := exec.Command(exe, "-test.run=^$")
			cmd.Env = append(os.Environ(), forkDeleteEnv+"="+string(j), "GORACE=atexit_sleep_ms=0")
			return cmd
		}
		// The Delete starts up to 110 ms after the Fork (a Fork makes
		// its session before it registers), so that the two meet at
		// every step of each other.
		fc, dc := run("fork", 0), run("delete", time.Duration(round%12)*10*time.Millisecond)
		var fout, dout []byte
		var ferr, derr error
		done := make(chan struct{})
		go func() { fout, ferr = fc.Output(); close(done) }()
		dout, derr = dc.Output()
		<-done
		require.NoError(t, ferr, "fork child")
		require.NoError(t, derr, "delete child")
		f, d := strings.TrimSpace(string(fout)), strings.TrimSpace(string(dout))

		check, err := sessionstore.Open(filepath.Join(base, fmt.Sprint("check", round)), procOptions(obj, false))
		require.NoError(t, err)
		_, perr := check.Meta(ctx, m.ID)
		parentGone := errors.Is(perr, sessionstore.ErrNotFound)
		if !parentGone {
			require.NoError(t, perr)
		}
		forkLive := false
		if id, ok := strings.CutPrefix(f, "ok "); ok {
			_, err := check.Meta(ctx, uuid.MustParse(id))
			forkLive = err == nil
		}
		require.NoError(t, check.Close())
		assert.False(t, parentGone && forkLive, "round %d: the fork outlives its deleted parent (fork: %s; delete: %s)", round, f, d)
		assert.False(t, strings.HasPrefix(f, "ok") && strings.HasPrefix(d, "ok"), "round %d: both succeeded (fork: %s; delete: %s)", round, f, d)
		outcomes[forkDeleteOutcome(f)+" / "+forkDeleteOutcome(d)]++
	}
	t.Logf("outcomes over %d rounds (fork / delete): %v", rounds, outcomes)
}

// forkDeleteOutcome is a child's line without ids and messages.
func forkDeleteOutcome(line string) string {
	w := strings.Fields(line)
	if len(w) >= 2 && w[0] == "err" {
		return "err " + w[1]
	}
	if len(w) >= 1 {
		return w[0]
	}
	return "(nothing)"
}
