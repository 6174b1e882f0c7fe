package vfs

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
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
