package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// ErrLocked reports that a lock is held by another holder.
var ErrLocked = errors.New("vfs: file is locked")

// ErrFileType reports a path the seam refuses to use, and never opens,
// reads, writes or blocks on: a symbolic link (as the last element of a
// path, and as any element below a Confine root), a FIFO, a socket, a
// device, a directory where a regular file belongs, or a regular file
// where a directory belongs. The error is an *fs.PathError naming the
// element that is not what it should be; its message says what it is.
var ErrFileType = errors.New("vfs: unexpected file type")

// ErrTooLarge reports a file larger than the limit its reader gave
// (ReadFile): larger than its format allows. The error is an
// *fs.PathError naming the file, wrapping a *LimitError.
var ErrTooLarge = errors.New("vfs: file larger than its format allows")

// LimitError is the cause of an ErrTooLarge error: the file holds Size
// bytes at least, and its format allows Limit. It matches ErrTooLarge.
type LimitError struct {
	Size  int64 // what the file holds, or the bytes read when it grew past Limit
	Limit int64
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%v: %d bytes, at most %d", ErrTooLarge, e.Size, e.Limit)
}

// Is reports whether target is ErrTooLarge.
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// fileType returns the cause of an ErrFileType error: what the path is.
func fileType(what string) error { return fmt.Errorf("%w: %s", ErrFileType, what) }

// TypeError returns the cause of an ErrFileType error for a file of mode
// m found where a directory (dir) or a regular file belongs.
func TypeError(m fs.FileMode, dir bool) error {
	if m.IsRegular() && !dir {
		return fileType("a regular file") // as expected: not refused
	}
	return fileType(whatIs(m))
}

const readOnly = os.O_RDONLY

// ErrPowerLoss is the error of every operation on a MemFS whose power was
// cut; a fault hook returns it to cut the power (see FaultFunc).
var ErrPowerLoss = errors.New("vfs: power lost")
