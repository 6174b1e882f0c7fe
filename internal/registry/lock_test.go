package registry

import (
	"context"
	"errors"
	"io/fs"
	"testing"

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
