package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"unsafe"
)

// datasync flushes the file's data and the metadata needed to read it back
// (its size), but not its timestamps: fdatasync(2).
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
		}
		return nil
	}
}

// clearNonblock sets the status flags of fd to flag without O_NONBLOCK:
// one fcntl(2), where syscall.SetNonblock makes two.
func clearNonblock(fd, flag int) error {
	_, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFL, uintptr(flag&^syscall.O_NONBLOCK))
	if errno != 0 {
		return errno
	}
	return nil
}

// readFile reads the regular file name whole into buf (from its start),
// growing buf only if the file does not fit, with no system call but
// open(2), fstat(2) (the type check, whose size also sizes a new buffer
// and refuses a file past limit unread), read(2) and close(2) when buf
// has room: read(2) of a regular file returns fewer bytes than asked only
// at the end of the file, so a short read ends it without a read that
// returns 0. The *os.File that OpenFile returns would add two fcntls and
// a final read, which in a virtual machine dominates reading a small file
// such as session.json.
func (o osFS) readFile(name string, buf []byte, limit int64) ([]byte, error) {
	const maxRead = 1 << 30
	fd, st, err := o.openFD(name, syscall.O_RDONLY, 0, false)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	if st.Size > limit {
		return nil, tooLarge(name, st.Size, limit)
	}
	if cap(buf) == 0 {
		buf = make([]byte, 0, st.Size+1) // +1: the read that ends it is short
	}
	buf = buf[:0]
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		// One read returns at most about 2 GiB however much is asked, so
		// ask for less at a time and a short read still means the end; and
		// never for more than one byte past the limit.
		want := int(min(int64(cap(buf)-len(buf)), maxRead, limit+1-int64(len(buf))))
		n, err := syscall.Read(fd, buf[len(buf):len(buf)+want])
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: name, Err: err}
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, tooLarge(name, int64(len(buf)), limit)
		}
		if n < want {
			return buf, nil
		}
	}
}

// openat2(2), its struct open_how and RESOLVE_NO_SYMLINKS (Linux 5.6).
type openHow struct {
	flags, mode, resolve uint64
}

const resolveNoSymlinks = 0x04

func openat2(dirfd int, path string, flag int, perm uint32) (int, error) {
	p, err := syscall.BytePtrFromString(path)
	if err != nil {
		return -1, err
	}
	how := openHow{flags: uint64(flag), resolve: resolveNoSymlinks}
	if flag&syscall.O_CREAT != 0 {
		how.mode = uint64(perm) // openat2 refuses a mode without O_CREAT
	}
	for {
		fd, _, errno := syscall.Syscall6(sysOpenat2, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		switch errno {
		case 0:
			return int(fd), nil
		case syscall.EINTR:
			continue
		}
		return -1, errno
	}
}

// haveOpenat2 reports whether the kernel has openat2 (a kernel before 5.6,
// or a sandbox's filter, may not), trying it once.
var haveOpenat2 = sync.OnceValue(func() bool {
	fd, err := openat2(-100 /* AT_FDCWD */, "/", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	syscall.Close(fd)
	return true
})

// openBelow opens rel, a path below the root, no element of which may be
// a symbolic link. When an element is one (ELOOP), the root's path is
// resolved again, in case the root itself (or the path to it) changed.
func (c *confinement) openBelow(rel string, flag int, perm uint32) (int, error) {
	real := c.resolved(false)
	fd, err := openBeneath(real, rel, flag, perm)
	if errors.Is(err, syscall.ELOOP) {
		if again := c.resolved(true); again != real {
			fd, err = openBeneath(again, rel, flag, perm)
		}
	}
	return fd, err
}

// openBeneath opens real/rel following no link: by openat2 with
// RESOLVE_NO_SYMLINKS (real holds none), or, without it, one element
// at a time by openat with O_NOFOLLOW.
func openBeneath(real, rel string, flag int, perm uint32) (int, error) {
	if haveOpenat2() {
		return openat2(-100, filepath.Join(real, rel), flag, perm)
	}
	dfd, err := openRetry(real, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
	if err != nil {
		return -1, err
	}
	parts := strings.Split(rel, string(filepath.Separator))
	for _, p := range parts[:len(parts)-1] {
		next, err := openatRetry(dfd, p, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC|syscall.O_NONBLOCK, 0)
		syscall.Close(dfd)
		if err != nil {
			return -1, err
		}
		dfd = next
	}
	fd, err := openatRetry(dfd, parts[len(parts)-1], flag, perm)
	syscall.Close(dfd)
	return fd, err
}

// openatRetry is openat(2), retried on EINTR.
func openatRetry(dirfd int, name string, flag int, perm uint32) (int, error) {
	for {
		fd, err := syscall.Openat(dirfd, name, flag, perm)
		if !errors.Is(err, syscall.EINTR) {
			return fd, err
		}
	}
}

// parent opens the directory that holds name, following no link below
// the root, and returns it with name's last element.
func (o osFS) parent(op, name string) (int, string, error) {
	name = filepath.Clean(name)
	dir, base := filepath.Dir(name), filepath.Base(name)
	const flag = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_CLOEXEC | syscall.O_NONBLOCK
	var fd int
	var err error
	if rel, ok := o.below(dir); ok {
		fd, err = o.c.openBelow(rel, flag|syscall.O_NOFOLLOW, 0)
	} else if _, ok := o.below(name); ok {
		fd, err = openRetry(o.c.resolved(false), flag, 0) // the root
	} else {
		fd, err = openRetry(dir, flag, 0)
	}
	if err != nil {
		return -1, "", o.openErr(op, dir, err, true)
	}
	return fd, base, nil
}

// remove is os.Remove, the directory that holds name opened first when it
// is below the root.
func (o osFS) remove(name string) error {
	if _, ok := o.below(name); !ok {
		return os.Remove(name)
	}
	dfd, base, err := o.parent("remove", name)
	if err != nil {
		return err
	}
	defer syscall.Close(dfd)
	// As os.Remove: unlink, else rmdir; rmdir of a file says ENOTDIR, so
	// that error says which one is real.
	e := unlinkat(dfd, base, 0)
	if e == nil {
		return nil
	}
	e1 := unlinkat(dfd, base, 0x200 /* AT_REMOVEDIR */)
	if e1 == nil {
		return nil
	}
	if !errors.Is(e1, syscall.ENOTDIR) {
		e = e1
	}
	return &fs.PathError{Op: "remove", Path: name, Err: e}
}

func unlinkat(dirfd int, name string, flags int) error {
	p, err := syscall.BytePtrFromString(name)
	if err != nil {
		return err
	}
	for {
		_, _, errno := syscall.Syscall(syscall.SYS_UNLINKAT, uintptr(dirfd), uintptr(unsafe.Pointer(p)), uintptr(flags))
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return errno
	}
}

// rename is os.Rename, the directories that hold the two names opened
// first when either is below the root.
func (o osFS) rename(oldname, newname string) error {
	_, oldBelow := o.below(oldname)
	_, newBelow := o.below(newname)
	if !oldBelow && !newBelow {
		return os.Rename(oldname, newname)
	}
	ofd, obase, err := o.parent("rename", oldname)
	if err != nil {
		return err
	}
	defer syscall.Close(ofd)
	nfd, nbase, err := o.parent("rename", newname)
	if err != nil {
		return err
	}
	defer syscall.Close(nfd)
	for {
		err := syscall.Renameat(ofd, obase, nfd, nbase)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: err}
	}
}

// mkdirAll is os.MkdirAll; below the root, each element is made (or
// found) and entered by mkdirat and openat with O_NOFOLLOW, so that none
// is a link.
func (o osFS) mkdirAll(name string, perm fs.FileMode) error {
	rel, ok := o.below(name)
	if !ok {
		return mkdirAllOS(name, perm)
	}
	const flag = syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_CLOEXEC | syscall.O_NONBLOCK
	// Most calls find it made.
	if fd, err := o.c.openBelow(rel, flag|syscall.O_NOFOLLOW, 0); err == nil {
		syscall.Close(fd)
		return nil
	}
	real := o.c.resolved(false)
	if err := mkdirAllOS(real, perm); err != nil {
		return err
	}
	dfd, err := openRetry(real, flag, 0)
	if err != nil {
		return &fs.PathError{Op: "mkdir", Path: o.c.root, Err: err}
	}
	shown := o.c.elements(rel)
	for i, p := range strings.Split(rel, string(filepath.Separator)) {
		if err := syscall.Mkdirat(dfd, p, uint32(perm.Perm())); err != nil && !errors.Is(err, syscall.EEXIST) {
			syscall.Close(dfd)
			return &fs.PathError{Op: "mkdir", Path: shown[i], Err: err}
		}
		next, err := openatRetry(dfd, p, flag|syscall.O_NOFOLLOW, 0)
		syscall.Close(dfd)
		if err != nil {
			return o.openErr("mkdir", shown[i], err, true)
		}
		dfd = next
	}
	syscall.Close(dfd)
	return nil
}
