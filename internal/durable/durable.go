// Package durable makes files and directories durable on a vfs.FS: an
// atomic replace of a whole file (ReplaceFile, ReplaceFileAs), the
// making of directories whose names survive a crash (MkdirAll), the sync
// of a file's data (SyncFile) and the removal of a file whose absence
// survives a crash (RemoveFile).
//
// Each function, when it returns nil, has synced what it wrote: the
// file's data and the directory entries it made or changed. On an error
// or a crash part way, ReplaceFile leaves the old file or the new one,
// whole, plus perhaps its temporary file; MkdirAll leaves some of the
// directories, each either named durably or, after a crash, gone;
// RemoveFile leaves the file or not.
// Callers above (recovery) remove the temporary files a crash leaves.
// ErrUnsynced is what a caller wraps a failure in after which a file's
// state on disk is unknown (a failed sync is not retried).
//
// A Coalescer shares one run of an operation, such as a directory's sync,
// among the goroutines that ask for it at once, each served by a run
// that began after it asked.
package durable

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// ErrUnsynced marks failures after which the state of a file on disk is
// unknown (a sync that failed, a write that could not be cut back): the
// writer of the file must stop, since a failed sync is not retried.
var ErrUnsynced = errors.New("chunk state unknown after failure")

// ReplaceFile atomically replaces dir/name with data: write a temporary
// file (name+".tmp"), sync it, close it, rename it over the target, sync
// the directory. When it returns nil the new content is durable; a crash
// at any point leaves the old content or the new, whole, plus perhaps the
// temporary file, which the caller's recovery removes.
func ReplaceFile(fsys vfs.FS, dir, name string, data []byte, perm os.FileMode) error {
	return ReplaceFileAs(fsys, dir, name, name+".tmp", data, perm)
}

// ReplaceFileAs is ReplaceFile with the temporary file named tmp.
func ReplaceFileAs(fsys vfs.FS, dir, name, tmp string, data []byte, perm os.FileMode) error {
	tmp = filepath.Join(dir, tmp)
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}

// MkdirAll makes directory dir and its missing parents, as os.MkdirAll
// does, and syncs the parent of each directory it made: when it returns
// nil, dir's name and those of the parents it made are durable, so that
// files later synced in it are never left out of every directory by a
// crash. A dir that exists costs one Stat.
func MkdirAll(fsys vfs.FS, dir string, perm os.FileMode) error {
	var made []string
	for d := dir; ; {
		if _, err := fsys.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		made = append(made, d)
		up := filepath.Dir(d)
		if up == d {
			break
		}
		d = up
	}
	if len(made) == 0 {
		return nil
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range made {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// SyncFile makes the data of the file at path durable.
func SyncFile(fsys vfs.FS, path string) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// RemoveFile removes a file and syncs its directory, doing nothing when
// the file is absent. When it returns nil the file is gone durably.
func RemoveFile(fsys vfs.FS, path string) error {
	err := fsys.Remove(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}
