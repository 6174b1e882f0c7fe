// Package vfs is the filesystem seam of sessionstore. Every byte the store
// reads or writes goes through an FS, so tests can count reads, inject faults
// and simulate power loss.
//
// Two implementations live here: Default, backed by the operating system,
// and MemFS, an in-memory filesystem that tracks which data and directory
// entries have been synced and can produce a crash clone holding only what a
// power loss would have kept.
package vfs

import (
	"errors"
	"io"
	"io/fs"
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
// directory.
type FS interface {
	// OpenFile opens a file like os.OpenFile.
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// MkdirAll creates a directory and its parents like os.MkdirAll.
	MkdirAll(name string, perm fs.FileMode) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// Rename atomically replaces newname with oldname.
	Rename(oldname, newname string) error
	// ReadDir lists a directory's entry names in sorted order.
	ReadDir(name string) ([]string, error)
	// Stat describes a file.
	Stat(name string) (fs.FileInfo, error)
	// SyncDir makes the directory's entries (creates, renames, removes)
	// durable.
	SyncDir(name string) error
	// Lock takes an exclusive advisory lock on the named file, creating it
	// if needed. It fails at once with an error wrapping ErrLocked when
	// another holder has it. Closing the returned Closer releases the lock;
	// the operating system releases it when the process dies.
	Lock(name string, perm fs.FileMode) (io.Closer, error)
}

// ReadFile reads a whole file through fsys.
func ReadFile(fsys FS, name string) ([]byte, error) {
	return ReadFileInto(fsys, name, nil)
}

// ReadFileInto is ReadFile reading into buf (from its start), which it
// grows only if the file does not fit: a caller that reads many files can
// reuse one buffer.
func ReadFileInto(fsys FS, name string, buf []byte) ([]byte, error) {
	if _, ok := fsys.(osFS); ok {
		return readFileOS(name, buf)
	}
	return readFileInto(fsys, name, buf)
}

// readFileInto is ReadFileInto through the FS interface.
func readFileInto(fsys FS, name string, buf []byte) ([]byte, error) {
	f, err := fsys.OpenFile(name, readOnly, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// Read into a buffer of the file's size (plus one byte, to see the end
	// without growing it), as os.ReadFile does; a file that grows meanwhile
	// is still read whole.
	size := 0
	if info, err := f.Stat(); err == nil && info.Size() < 1<<40 {
		size = int(info.Size())
	}
	if cap(buf) < size+1 {
		buf = make([]byte, 0, size+1)
	}
	buf = buf[:0]
	for {
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
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
