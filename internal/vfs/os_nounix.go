//go:build !unix

package vfs

import (
	"errors"
	"os"
)

// lockFile is not implemented off unix: the store then cannot promise a
// single writer per session, and says so.
func lockFile(*os.File) error {
	return errors.New("vfs: file locking is not supported on this platform")
}
