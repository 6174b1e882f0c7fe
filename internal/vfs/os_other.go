//go:build !linux

package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// datasync falls back to fsync where fdatasync is not available. On darwin
// this is fsync(2) as os.File.Sync implements it (F_FULLFSYNC).
func datasync(f *os.File) error { return f.Sync() }

// readFile is readFileInto on the operating system's filesystem.
func (o osFS) readFile(name string, buf []byte, limit int64) ([]byte, error) {
	return readFileInto(o, name, buf, limit)
}

// checkBelow checks, with lstat(2), that no element of rel before its
// last is anything but a directory, and returns the real path of rel. A
// concurrent swap of an element can defeat it: only Linux resolves paths
// below the root without following links in one step (os_linux.go).
func (c *confinement) checkBelow(op, rel string) (string, error) {
	real := c.resolved(false)
	shown := c.elements(rel)
	parts := strings.Split(rel, string(filepath.Separator))
	p := real
	for i, part := range parts[:len(parts)-1] {
		p = filepath.Join(p, part)
		info, err := os.Lstat(p)
		if err != nil {
			if pe, ok := err.(*fs.PathError); ok {
				pe.Op, pe.Path = op, shown[i]
			}
			return "", err
		}
		if m := info.Mode(); !m.IsDir() {
			return "", &fs.PathError{Op: op, Path: shown[i], Err: fileType(whatIs(m))}
		}
	}
	return filepath.Join(real, rel), nil
}

// remove is os.Remove, the elements below the root checked first.
func (o osFS) remove(name string) error {
	rel, ok := o.below(name)
	if !ok {
		return os.Remove(name)
	}
	real, err := o.c.checkBelow("remove", rel)
	if err != nil {
		return err
	}
	return renamed(os.Remove(real), name)
}

// rename is os.Rename, the elements below the root checked first.
func (o osFS) rename(oldname, newname string) error {
	realOld, realNew := oldname, newname
	if rel, ok := o.below(oldname); ok {
		r, err := o.c.checkBelow("rename", rel)
		if err != nil {
			return err
		}
		realOld = r
	}
	if rel, ok := o.below(newname); ok {
		r, err := o.c.checkBelow("rename", rel)
		if err != nil {
			return err
		}
		realNew = r
	}
	err := os.Rename(realOld, realNew)
	if le, ok := err.(*os.LinkError); ok {
		le.Old, le.New = oldname, newname
	}
	return err
}

// mkdirAll is os.MkdirAll; below the root, each element is made (or
// found) and then checked with lstat(2) not to be a link.
func (o osFS) mkdirAll(name string, perm fs.FileMode) error {
	rel, ok := o.below(name)
	if !ok {
		return mkdirAllOS(name, perm)
	}
	real := o.c.resolved(false)
	if err := mkdirAllOS(real, perm); err != nil {
		return err
	}
	shown := o.c.elements(rel)
	p := real
	for i, part := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, part)
		if err := os.Mkdir(p, perm); err != nil && !os.IsExist(err) {
			return renamed(err, shown[i])
		}
		info, err := os.Lstat(p)
		if err != nil {
			return renamed(err, shown[i])
		}
		if m := info.Mode(); !m.IsDir() {
			return &fs.PathError{Op: "mkdir", Path: shown[i], Err: fileType(whatIs(m))}
		}
	}
	return nil
}

// renamed gives a *fs.PathError the caller's name for the path.
func renamed(err error, name string) error {
	if pe, ok := err.(*fs.PathError); ok {
		pe.Path = name
	}
	return err
}
