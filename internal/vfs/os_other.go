//go:build !linux

package vfs

import "os"

// datasync falls back to fsync where fdatasync is not available. On darwin
// this is fsync(2) as os.File.Sync implements it (F_FULLFSYNC).
func datasync(f *os.File) error { return f.Sync() }

// readFileOS is readFileInto on the operating system's filesystem.
func readFileOS(name string, buf []byte) ([]byte, error) { return readFileInto(Default, name, buf) }
