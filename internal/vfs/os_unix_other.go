//go:build unix && !linux

package vfs

import (
	"errors"
	"io/fs"
	"syscall"
)

// clearNonblock clears O_NONBLOCK on fd.
func clearNonblock(fd, _ int) error { return syscall.SetNonblock(fd, false) }

// openBelow opens rel, a path below the root, after checking that no
// element before its last is a link (checkBelow); O_NOFOLLOW refuses a
// link as the last.
func (c *confinement) openBelow(rel string, flag int, perm uint32) (int, error) {
	real, err := c.checkBelow("open", rel)
	var errno syscall.Errno
	switch {
	case errors.Is(err, ErrFileType):
		return -1, syscall.ELOOP // openErr finds and names the element
	case errors.As(err, &errno):
		return -1, errno
	case err != nil:
		return -1, err.(*fs.PathError).Err
	}
	return openRetry(real, flag, perm)
}
