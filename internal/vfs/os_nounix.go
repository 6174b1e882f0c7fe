//go:build !unix

package vfs

import (
	"errors"
	"io/fs"
	"os"
)

// openFile is os.OpenFile.
func openFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

// lockFile is not implemented off unix: the store then cannot promise a
// single writer per session, and says so.
func lockFile(*os.File) error {
	return errors.New("vfs: file locking is not supported on this platform")
}
