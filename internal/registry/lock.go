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

// lockGrace is how long Lock keeps trying a lock found held before it
// reports it so, when not asked to wait. A lock file's lock (flock(2))
// belongs to the open file, which a child process shares from its fork
// to its exec. A release unlocks it explicitly (vfs), which frees it for
// the child's copy too; but a holder that ends without releasing (a
// process that exits while it starts a program) leaves the lock held by
// the child for that instant, and a Store opened at once after it would
// find the session locked by no writer at all. A lock held by a writer is
// reported this much later.
const lockGrace = 50 * time.Millisecond

// Lock takes the lock file at path in fsys (created with perm when
// missing). A lock another holder has is reported as an *fs.PathError
// wrapping locked, once it stayed held for lockGrace; when wait is set,
// Lock tries again until the lock is free or ctx ends, and then reports
// the locked error wrapping ctx's error too. Any other error of fsys.Lock
// is returned as it is.
func Lock(ctx context.Context, fsys vfs.FS, path string, perm fs.FileMode, wait bool, locked error) (io.Closer, error) {
	graceEnd := time.Now().Add(lockGrace)
	poll := time.Millisecond
	for {
		lk, err := fsys.Lock(path, perm)
		if !errors.Is(err, vfs.ErrLocked) {
			return lk, err
		}
		held := &fs.PathError{Op: "lock", Path: path, Err: locked}
		if !wait {
			if time.Now().After(graceEnd) || ctx.Err() != nil {
				return nil, held
			}
			time.Sleep(poll)
			poll = min(2*poll, 10*time.Millisecond)
			continue
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waited until: %w)", held, ctx.Err())
		case <-time.After(lockPoll):
		}
	}
}
