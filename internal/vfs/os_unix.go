//go:build unix

package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// open opens name as a regular file, or as a directory (dir), and returns
// it in blocking mode (see openFD). os.OpenFile also tries to register the
// file with the runtime's poller, which a regular file or directory
// refuses, at the cost of four more system calls (fcntl twice, epoll_ctl,
// fcntl) per open; where a system call costs microseconds (a virtual
// machine), that dominates opening a blob or a session.json.
func (o osFS) open(name string, flag int, perm fs.FileMode, dir bool) (*os.File, error) {
	fd, _, err := o.openFD(name, flag, perm, dir)
	if err != nil {
		return nil, err
	}
	// O_NONBLOCK did its work at the open; a regular file or directory
	// never waits, and a descriptor without it is not registered with the
	// runtime's poller by os.NewFile.
	if err := clearNonblock(fd, flag); err != nil {
		syscall.Close(fd)
		return nil, &fs.PathError{Op: "fcntl", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openFD opens name with open(2) (openat2(2) below a confinement's root),
// with O_CLOEXEC, O_NONBLOCK, O_NOCTTY and O_NOFOLLOW (for a directory,
// only below the root: the root and the path to it may be links), and
// checks with fstat(2) that it opened a regular file, or a directory
// (dir). It returns the descriptor, still non-blocking, and what fstat
// said; anything else is closed and refused (ErrFileType).
func (o osFS) openFD(name string, flag int, perm fs.FileMode, dir bool) (int, *syscall.Stat_t, error) {
	rel, below := o.below(name)
	flag |= syscall.O_CLOEXEC | syscall.O_NONBLOCK | syscall.O_NOCTTY
	if !dir || below {
		flag |= syscall.O_NOFOLLOW
	}
	if dir {
		flag |= syscall.O_DIRECTORY
	}
	var fd int
	var err error
	if below {
		fd, err = o.c.openBelow(rel, flag, uint32(perm.Perm()))
	} else {
		fd, err = openRetry(name, flag, uint32(perm.Perm()))
	}
	if err != nil {
		return -1, nil, o.openErr("open", name, err, dir)
	}
	st := new(syscall.Stat_t)
	for {
		err = syscall.Fstat(fd, st)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		syscall.Close(fd)
		return -1, nil, &fs.PathError{Op: "fstat", Path: name, Err: err}
	}
	want := uint32(syscall.S_IFREG)
	if dir {
		want = syscall.S_IFDIR
	}
	if typ := uint32(st.Mode) & syscall.S_IFMT; typ != want {
		syscall.Close(fd)
		return -1, nil, &fs.PathError{Op: "open", Path: name, Err: fileType(whatIs(modeOf(typ)))}
	}
	return fd, st, nil
}

// modeOf is the fs.FileMode type bits of a stat(2) file type.
func modeOf(typ uint32) fs.FileMode {
	switch typ {
	case syscall.S_IFDIR:
		return fs.ModeDir
	case syscall.S_IFLNK:
		return fs.ModeSymlink
	case syscall.S_IFIFO:
		return fs.ModeNamedPipe
	case syscall.S_IFSOCK:
		return fs.ModeSocket
	case syscall.S_IFCHR:
		return fs.ModeDevice | fs.ModeCharDevice
	case syscall.S_IFBLK:
		return fs.ModeDevice
	case syscall.S_IFREG:
		return 0
	}
	return fs.ModeIrregular
}

// openErr is the error of a failed open of name: a refusal (ErrFileType)
// when the path names a link or a file of another type, which is what
// ELOOP (a link, with O_NOFOLLOW or below the root), ENOTDIR, EISDIR,
// ENXIO and ENODEV (a FIFO without a reader, a socket, a device) say;
// else the *fs.PathError of err.
func (o osFS) openErr(op, name string, err error, dir bool) error {
	switch {
	case errors.Is(err, syscall.ELOOP), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.ENXIO), errors.Is(err, syscall.ENODEV):
		if r := o.refused(op, name, dir); r != nil {
			return r
		}
	}
	return &fs.PathError{Op: op, Path: name, Err: err}
}

// openRetry is open(2), retried on EINTR.
func openRetry(name string, flag int, perm uint32) (int, error) {
	for {
		fd, err := syscall.Open(name, flag, perm)
		if !errors.Is(err, syscall.EINTR) {
			return fd, err
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

// unlockFile releases the flock lockFile took, on the open file
// description, so a forked child's copy of the descriptor no longer holds it.
func unlockFile(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}
