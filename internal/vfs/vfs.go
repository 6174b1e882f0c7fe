// Package vfs is the filesystem seam of sessionstore. Every byte the store
// reads or writes goes through an FS, so tests can count reads, inject faults
// and simulate power loss.
//
// Two implementations live here: Default, backed by the operating system,
// and MemFS, an in-memory filesystem that tracks which data and directory
// entries have been synced and can produce a crash clone holding only what a
// power loss would have kept.
//
// # What the seam refuses
//
// The store keeps regular files in directories, and nothing else. Every FS
// refuses, with an *fs.PathError wrapping ErrFileType, whatever else a path
// names, and never follows, opens for reading or writing, or blocks on it:
// OpenFile and Lock open regular files only (not a directory, a FIFO, a
// socket, a device, nor a symbolic link as the path's last element, which
// is never followed); ReadDir, SyncDir and MkdirAll use directories only.
// Below the root of a Confine, no element of a path is followed if it is a
// symbolic link: every open, create, rename and remove there refuses one,
// so a link put in the store's tree can neither lead a write outside it
// nor be read through; Stat describes a link as a link.
//
// How the operating system's implementation keeps these promises (Default,
// os.go): a file is opened with O_NOFOLLOW, O_NONBLOCK and O_NOCTTY, and
// fstat then checks that the descriptor opened is a regular file (or a
// directory, for ReadDir and SyncDir); anything else is closed at once,
// unread, and refused. O_NONBLOCK makes the open of a FIFO return at once
// (opening it for writing with no reader fails, and is refused too) where
// a blocking open would wait for the other end forever; it is cleared
// again on the regular file or directory handed out. Checking the
// descriptor opened, rather than the path before opening it, leaves no
// moment in which the path could be swapped. On Linux, paths below a
// Confine root are resolved by openat2(2) with RESOLVE_NO_SYMLINKS, in
// one system call, or, where the kernel lacks it, one element at a time
// by openat(2) with O_NOFOLLOW; elsewhere each element is checked with
// lstat(2) first, which a concurrent swap of an element can defeat.
//
// ReadFileLimit and ReadFileInto take the largest size the file's format
// allows, and refuse a larger file (ErrTooLarge) without reading it: a
// sparse file of many gigabytes costs one fstat, not its size in memory.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"math"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// File is an open file. Sync makes the file's data durable (fdatasync where
// the platform has it); it does not make the file's directory entry durable:
// that is SyncDir's job.
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	Sync() error
	Truncate(size int64) error
	Stat() (fs.FileInfo, error)
	Name() string
}

// FS is the set of filesystem operations the store uses. Paths are in the
// host's syntax (filepath), absolute or relative to the process's working
// directory. What every implementation refuses, with an error wrapping
// ErrFileType, is in the package doc.
type FS interface {
	// OpenFile opens a regular file like os.OpenFile, without following a
	// symbolic link in its last element and without blocking.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// MkdirAll creates a directory and its parents like os.MkdirAll.
	MkdirAll(name string, perm fs.FileMode) error
	// Remove removes a file or an empty directory (a symbolic link itself,
	// never what it names).
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// ReadDir lists a directory's entry names in sorted order.
	ReadDir(name string) ([]string, error)
	// Stat describes a file. Below a Confine root it does not follow a
	// symbolic link in the last element (it describes the link); above
	// one, and without Confine, it follows links as os.Stat does.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the directory's entries (creates, renames, removes)
	// durable.
	SyncDir(name string) error
	// Lock takes an exclusive advisory lock on the named regular file,
	// creating it if needed. It fails at once with an error wrapping
	// ErrLocked when another holder has it. Closing the returned Closer
	// releases the lock; the operating system releases it when the
	// process dies.
	Lock(name string, perm fs.FileMode) (io.Closer, error)
	// BootID names the current boot of the machine holding the files
	// (for the operating system, Linux's random boot id), "" when
	// unknown: a file written in the same boot that no process synced is
	// still in the page cache, for every process.
	BootID() string
}

// Confine returns fsys confined to the tree below root: no element of a
// path below root is followed if it is a symbolic link (see the package
// doc), so that nothing below root leads outside it. root itself and the
// path to it are the caller's, resolved as usual (a root that is a link
// works); the operating system's implementation resolves them once, when
// first needed, and again if an open then meets a link. Paths that are
// not below root are used as fsys uses them. Any other FS than Default
// (MemFS, which has no links, or a wrapper of Default a test made) is
// returned as it is.
func Confine(fsys FS, root string) FS {
	if o, ok := fsys.(osFS); ok && o.c == nil {
		return osFS{c: newConfinement(root)}
	}
	return fsys
}

// MapRefusals returns fsys with every error that wraps ErrFileType or
// ErrTooLarge, from any of its operations and from the ReadFile functions
// through it, replaced by what f returns for it: the store
// turns them into errors naming the path as damaged. Other errors, and
// the files it opens, are fsys's own.
func MapRefusals(fsys FS, f func(err error) error) FS {
	return &refusalFS{FS: fsys, f: f}
}

type refusalFS struct {
	FS
	f func(error) error
}

func (r *refusalFS) mapErr(err error) error {
	if err != nil && (errors.Is(err, ErrFileType) || errors.Is(err, ErrTooLarge)) {
		return r.f(err)
	}
	return err
}

func (r *refusalFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := r.FS.OpenFile(name, flag, perm)
	return f, r.mapErr(err)
}
func (r *refusalFS) MkdirAll(name string, perm fs.FileMode) error {
	return r.mapErr(r.FS.MkdirAll(name, perm))
}
func (r *refusalFS) Remove(name string) error { return r.mapErr(r.FS.Remove(name)) }
func (r *refusalFS) Rename(oldname, newname string) error {
	return r.mapErr(r.FS.Rename(oldname, newname))
}
func (r *refusalFS) ReadDir(name string) ([]string, error) {
	names, err := r.FS.ReadDir(name)
	return names, r.mapErr(err)
}
func (r *refusalFS) Stat(name string) (fs.FileInfo, error) {
	info, err := r.FS.Stat(name)
	return info, r.mapErr(err)
}
func (r *refusalFS) SyncDir(name string) error { return r.mapErr(r.FS.SyncDir(name)) }
func (r *refusalFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	c, err := r.FS.Lock(name, perm)
	return c, r.mapErr(err)
}

// ReadFile reads a whole file through fsys, whatever its size: for tests
// and tools that read a file they know. The store reads every file with
// the limit of its format (ReadFileLimit, ReadFileInto).
func ReadFile(fsys FS, name string) ([]byte, error) {
	return ReadFileInto(fsys, name, nil, math.MaxInt64-1)
}

// ReadFileLimit reads a whole file through fsys, or refuses it
// (ErrTooLarge) if it holds more than limit bytes, the most its format
// allows.
func ReadFileLimit(fsys FS, name string, limit int64) ([]byte, error) {
	return ReadFileInto(fsys, name, nil, limit)
}

// ReadFileInto is ReadFile reading into buf (from its start), which it
// grows only if the file does not fit: a caller that reads many files can
// reuse one buffer. It allocates for limit bytes at most, and reads one
// more at most, however large the file says it is.
func ReadFileInto(fsys FS, name string, buf []byte, limit int64) ([]byte, error) {
	switch f := fsys.(type) {
	case osFS:
		return f.readFile(name, buf, limit)
	case *refusalFS:
		b, err := ReadFileInto(f.FS, name, buf, limit)
		return b, f.mapErr(err)
	}
	return readFileInto(fsys, name, buf, limit)
}

// tooLarge is the error of a file past its limit.
func tooLarge(name string, size, limit int64) error {
	return &fs.PathError{Op: "read", Path: name, Err: &LimitError{Size: size, Limit: limit}}
}

// readFileInto is ReadFileInto through the FS interface.
func readFileInto(fsys FS, name string, buf []byte, limit int64) ([]byte, error) {
	f, err := fsys.OpenFile(name, readOnly, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Read into a buffer of the file's size (plus one byte, to see the end
	// without growing it), as os.ReadFile does; a file that grows meanwhile
	// is still read whole, up to its limit.
	size := int64(0)
	if info, err := f.Stat(); err == nil {
		size = info.Size()
	}
	if size > limit {
		return nil, tooLarge(name, size, limit)
	}
	if int64(cap(buf)) < size+1 {
		buf = make([]byte, 0, size+1)
	}
	buf = buf[:0]
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return nil, tooLarge(name, int64(len(buf)), limit)
		}
		if errors.Is(err, io.EOF) {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// confinement is the root of a Confine and what is known of it.
type confinement struct {
	root   string // as the caller gave it, cleaned
	prefix string // root with a trailing separator: what paths below it start with
	// real is root with its symbolic links resolved (*string, nil until
	// first needed): below it, no element may be a link.
	real atomic.Pointer[string]
}

func newConfinement(root string) *confinement {
	root = filepath.Clean(root)
	prefix := root
	if !strings.HasSuffix(prefix, string(filepath.Separator)) {
		prefix += string(filepath.Separator)
	}
	return &confinement{root: root, prefix: prefix}
}

// below returns the part of name below the root, and whether name is
// below it (the root itself is not).
func (c *confinement) below(name string) (string, bool) {
	name = filepath.Clean(name)
	if c.root == "." && !filepath.IsAbs(name) {
		if name == "." || name == ".." || strings.HasPrefix(name, ".."+string(filepath.Separator)) {
			return "", false
		}
		return name, true
	}
	rel, ok := strings.CutPrefix(name, c.prefix)
	return rel, ok && rel != ""
}

// resolved returns the root with its links resolved; again, rather than
// as known, when fresh. A root that does not exist yet is its parent
// resolved and its own name (Open creates it), or as given when that
// fails too.
func (c *confinement) resolved(fresh bool) string {
	if p := c.real.Load(); p != nil && !fresh {
		return *p
	}
	r, err := filepath.EvalSymlinks(c.root)
	if err != nil {
		r = c.root
		if p, perr := filepath.EvalSymlinks(filepath.Dir(c.root)); perr == nil {
			r = filepath.Join(p, filepath.Base(c.root))
		}
	}
	c.real.Store(&r)
	return r
}

// elements returns the paths, in the caller's terms, of the elements of
// rel below the root, from the first to rel itself.
func (c *confinement) elements(rel string) []string {
	parts := strings.Split(rel, string(filepath.Separator))
	out := make([]string, len(parts))
	p := c.root
	for i, part := range parts {
		p = filepath.Join(p, part)
		out[i] = p
	}
	return out
}

// whatIs describes a file mode for an ErrFileType error.
func whatIs(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory where a file belongs"
	case m.IsRegular():
		return "a regular file where a directory belongs"
	}
	return "not a regular file or directory"
}
