package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// Default is the operating system's filesystem, not confined (see
// Confine).
var Default FS = osFS{}

// osFS is the operating system's filesystem, confined below c's root
// when c is set.
type osFS struct{ c *confinement }

// BootID is Linux's /proc/sys/kernel/random/boot_id, read once; "" on
// other systems.
func (osFS) BootID() string {
	bootOnce.Do(func() {
		b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
		if err == nil && len(b) <= 64 {
			bootID = strings.TrimSpace(string(b))
		}
	})
	return bootID
}

var (
	bootOnce sync.Once
	bootID   string
)

type osFile struct{ *os.File }

func (f osFile) Sync() error { return datasync(f.File) }

// below returns the part of name below the confinement's root, and
// whether there is a confinement and name is below its root.
func (o osFS) below(name string) (string, bool) {
	if o.c == nil {
		return "", false
	}
	return o.c.below(name)
}

func (o osFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := o.open(name, flag, perm, false)
	if err != nil {
		return nil, err
	}
	return osFile{f}, nil
}

func (o osFS) MkdirAll(name string, perm fs.FileMode) error { return o.mkdirAll(name, perm) }
func (o osFS) Remove(name string) error                     { return o.remove(name) }
func (o osFS) Rename(oldname, newname string) error         { return o.rename(oldname, newname) }

// Stat follows links, as os.Stat does, except below a confinement's
// root, where it describes the last element as it is (os.Lstat); it does
// not check the elements before it, as the calls that use a file do.
func (o osFS) Stat(name string) (fs.FileInfo, error) {
	rel, ok := o.below(name)
	if !ok {
		return os.Stat(name)
	}
	info, err := os.Lstat(filepath.Join(o.c.resolved(false), rel))
	if pe, isPE := err.(*fs.PathError); isPE {
		pe.Op, pe.Path = "stat", name
		if errors.Is(pe.Err, syscall.ENOTDIR) {
			if r := o.refused("stat", name, false); r != nil {
				return nil, r // an element before the last is not a directory
			}
		}
	}
	return info, err
}

func (o osFS) ReadDir(name string) ([]string, error) {
	f, err := o.open(name, os.O_RDONLY, 0, true)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	return names, nil
}

func (o osFS) SyncDir(name string) error {
	d, err := o.open(name, os.O_RDONLY, 0, true)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return &fs.PathError{Op: "syncdir", Path: name, Err: err}
	}
	return d.Close()
}

func (o osFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	f, err := o.open(name, os.O_RDWR|os.O_CREATE, perm, false)
	if err != nil {
		return nil, err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		return nil, &fs.PathError{Op: "lock", Path: name, Err: err}
	}
	return lockedFile{f}, nil
}

// lockedFile releases its lock explicitly before it closes the file. A
// flock belongs to the open file description, which a child process
// forked meanwhile shares until its exec closes it (O_CLOEXEC): a close
// alone would leave the lock held, by the child, for that instant; an
// unlock releases it for every descriptor of the description at once.
type lockedFile struct{ f *os.File }

func (l lockedFile) Close() error {
	uerr := unlockFile(l.f)
	if err := l.f.Close(); err != nil {
		return err
	}
	if uerr != nil {
		return &fs.PathError{Op: "unlock", Path: l.f.Name(), Err: uerr}
	}
	return nil
}

// refused describes why name could not be used as a directory (dir) or a
// regular file, when what it or an element before it is explains it: a
// link, or a file of another type. It returns nil when nothing does (the
// path changed since, or the failure had another cause), and then the
// caller reports the error it had. Only elements below a confinement's
// root are looked at before the last one.
func (o osFS) refused(op, name string, dir bool) error {
	name = filepath.Clean(name)
	real, shown := []string{name}, []string{name}
	lstat := os.Lstat
	if rel, ok := o.below(name); ok {
		shown = o.c.elements(rel)
		real = make([]string, len(shown))
		for i := range shown {
			real[i] = filepath.Join(o.c.resolved(false), strings.TrimPrefix(shown[i], o.c.prefix))
		}
	} else if dir {
		lstat = os.Stat // a directory above the root, or unconfined: links are followed
	}
	for i := range real {
		info, err := lstat(real[i])
		if err != nil {
			return nil
		}
		m, last := info.Mode(), i == len(real)-1
		switch {
		case m&fs.ModeSymlink != 0:
		case !last && !m.IsDir():
		case last && dir && !m.IsDir():
		case last && !dir && !m.IsRegular():
		default:
			continue
		}
		return &fs.PathError{Op: op, Path: shown[i], Err: fileType(whatIs(m))}
	}
	return nil
}

// mkdirAllOS is os.MkdirAll, reporting an element that is not a
// directory as refused (ErrFileType). Links are followed, as above a
// confinement's root.
func mkdirAllOS(name string, perm fs.FileMode) error {
	err := os.MkdirAll(name, perm)
	if pe, ok := err.(*fs.PathError); ok {
		if info, serr := os.Stat(pe.Path); serr == nil && !info.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: pe.Path, Err: fileType(whatIs(info.Mode()))}
		}
	}
	return err
}
