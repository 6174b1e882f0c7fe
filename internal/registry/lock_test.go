package registry

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

var errHeld = errors.New("held by another writer")

func TestLock(t *testing.T) {
	cases := []struct {
		name      string
		held      bool
		wait      bool
		cancelled bool
		wantErr   []error // nil: the lock is taken
	}{
		{name: "free", held: false},
		{name: "free, waiting", held: false, wait: true},
		{name: "held", held: true, wantErr: []error{errHeld}},
		{name: "held, waiting until ctx ends", held: true, wait: true, cancelled: true, wantErr: []error{errHeld, context.Canceled}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fsys := vfs.NewMemFS()
			const path = "/s/lock"
			require.NoError(t, fsys.MkdirAll("/s", 0o755))
			if c.held {
				other, err := fsys.Lock(path, 0o644)
				require.NoError(t, err)
				defer other.Close()
			}
			ctx, cancel := context.WithCancel(context.Background())
			if c.cancelled {
				cancel()
			}
			defer cancel()
			lk, err := Lock(ctx, fsys, path, 0o644, c.wait, errHeld)
			if c.wantErr == nil {
				require.NoError(t, err)
				assert.NoError(t, lk.Close())
				return
			}
			assert.Nil(t, lk)
			for _, want := range c.wantErr {
				assert.ErrorIs(t, err, want)
			}
			var pe *fs.PathError
			if assert.ErrorAs(t, err, &pe) {
				assert.Equal(t, "lock", pe.Op)
				assert.Equal(t, path, pe.Path)
			}
		})
	}
}

// TestLockWaitsForRelease: a waiting Lock takes the lock once its holder
// closes it.
func TestLockWaitsForRelease(t *testing.T) {
	fsys := vfs.NewMemFS()
	const path = "/s/lock"
	require.NoError(t, fsys.MkdirAll("/s", 0o755))
	other, err := fsys.Lock(path, 0o644)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		lk, err := Lock(context.Background(), fsys, path, 0o644, true, errHeld)
		if err == nil {
			err = lk.Close()
		}
		got <- err
	}()
	require.NoError(t, other.Close())
	assert.NoError(t, <-got)
}

// flakyLockFS reports its lock held for the first n tries.
type flakyLockFS struct {
	vfs.FS
	n, tries int
}

func (f *flakyLockFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	f.tries++
	if f.tries <= f.n {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: vfs.ErrLocked}
	}
	return f.FS.Lock(name, perm)
}

// TestLockGrace: a lock held for a moment (a child process sharing the
// lock file between its fork and its exec) is taken without waiting; one
// held longer than lockGrace is reported held, after about lockGrace.
func TestLockGrace(t *testing.T) {
	m := vfs.NewMemFS()
	require.NoError(t, m.MkdirAll("/s", 0o755))
	brief := &flakyLockFS{FS: m, n: 3}
	lk, err := Lock(context.Background(), brief, "/s/lock", 0o644, false, errHeld)
	require.NoError(t, err, "held for three tries only")
	assert.Equal(t, 4, brief.tries)
	require.NoError(t, lk.Close())

	held := &flakyLockFS{FS: m, n: 1 << 30}
	t0 := time.Now()
	lk, err = Lock(context.Background(), held, "/s/lock", 0o644, false, errHeld)
	took := time.Since(t0)
	assert.Nil(t, lk)
	assert.ErrorIs(t, err, errHeld)
	assert.GreaterOrEqual(t, took, lockGrace, "tried for the grace")
	assert.Greater(t, held.tries, 3)
}

// TestLockBesideSpawnedProcesses: a lock released while this process
// starts child processes is free again for the next Lock at once, though
// a child shares the lock file from its fork to its exec.
func TestLockBesideSpawnedProcesses(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	path := filepath.Join(dir, "LOCK")
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				_ = exec.Command(exe, "-test.run=^$").Run()
			}
		})
	}
	defer func() { close(stop); wg.Wait() }()
	fsys := vfs.Default
	for i := range 200 {
		lk, err := Lock(context.Background(), fsys, path, 0o644, false, errHeld)
		require.NoError(t, err, "take %d", i)
		require.NoError(t, lk.Close())
	}
}
