//go:build unix

package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// openFile opens name with open(2) and wraps the descriptor with
// os.NewFile. os.OpenFile also tries to register the file with the
// runtime's poller, which a regular file or directory refuses, at the cost
// of four more system calls (fcntl twice, epoll_ctl, fcntl) per open;
// where a system call costs microseconds (a virtual machine), that
// dominates opening a blob or a session.json.
func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	fd, err := openFD(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openFD is open(2) with O_CLOEXEC, retried on EINTR.
func openFD(name string, flag int, perm fs.FileMode) (int, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, syscall.EINTR):
			continue
		default:
			return -1, &fs.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

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
