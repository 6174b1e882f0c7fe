//go:build !unix

package vfs

import (
	"errors"
	"io/fs"
	"os"
)

// open is os.OpenFile, after checking (lstat) that no element below the
// root and not the last is anything but a directory, and then (stat of
// the file opened) that it opened a regular file, or a directory (dir).
// The last element is checked not to be a link before the open, which a
// concurrent swap can defeat.
func (o osFS) open(name string, flag int, perm fs.FileMode, dir bool) (*os.File, error) {
	path, below := name, false
	if rel, ok := o.below(name); ok {
		below = true
		real, err := o.c.checkBelow("open", rel)
		if err != nil {
			return nil, err
		}
		path = real
	}
	if info, err := os.Lstat(path); err == nil && info.Mode()&fs.ModeSymlink != 0 && (!dir || below) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fileType(whatIs(info.Mode()))}
	}
	f, err := os.OpenFile(path, flag, perm)
	if err != nil {
		return nil, renamed(err, name)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if m := info.Mode(); dir && !m.IsDir() || !dir && !m.IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: fileType(whatIs(m))}
	}
	return f, nil
}

// lockFile is not implemented off unix: the store then cannot promise a
// single writer per session, and says so.
func lockFile(*os.File) error {
	return errors.New("vfs: file locking is not supported on this platform")
}

// unlockFile has nothing to release off unix.
func unlockFile(*os.File) error { return nil }
