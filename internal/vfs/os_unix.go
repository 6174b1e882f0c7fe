//go:build unix

package vfs

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes a non-blocking exclusive flock. flock locks belong to the
// open file description, so a second open of the same file, in this process
// or another, conflicts; the kernel drops the lock when the process dies.
func lockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrLocked
		default:
			return err
		}
	}
}
