package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// lockPoll is how often Lock tries again a lock held by another holder
// when asked to wait.
const lockPoll = 5 * time.Millisecond

// Lock takes the lock file at path in fsys (created with perm when
// missing). A lock another holder has is reported as an *fs.PathError
// wrapping locked; when wait is set, Lock tries again until the lock is
// free or ctx ends, and then reports the locked error wrapping ctx's
// error too. Any other error of fsys.Lock is returned as it is.
func Lock(ctx context.Context, fsys vfs.FS, path string, perm fs.FileMode, wait bool, locked error) (io.Closer, error) {
	for {
		lk, err := fsys.Lock(path, perm)
		if !errors.Is(err, vfs.ErrLocked) {
			return lk, err
		}
		held := &fs.PathError{Op: "lock", Path: path, Err: locked}
		if !wait {
			return nil, held
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waited until: %w)", held, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
