// Package headfile is the encoding of a session's HEAD file: the id of
// the newest event of the active branch in canonical form and a newline,
// 37 bytes. The file is absent while the session has no events.
//
// Encode and Decode turn an id into the file's bytes and back. Read
// reads a HEAD file, never more than Size bytes of it; Write replaces it
// atomically (internal/durable: temporary file, sync, rename, directory
// sync), and when Write returns nil the new HEAD is durable. A crash
// during a Write leaves the old HEAD, the new one, or a Temp file beside
// the old one, never a mix. Repairing HEAD (finishing or dropping a Temp
// file, keeping a bad one aside in Broken) is the caller's.
package headfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The file names of a session's HEAD. Temp is the temporary file of an
// atomic replace. Broken keeps the bytes of a HEAD that reconciliation
// found bad (not an id, or naming an event the log does not hold) before
// it rebuilds HEAD from the log, as a torn tail's bytes are kept.
const (
	Name   = "HEAD"
	Temp   = Name + ".tmp"
	Broken = Name + ".broken"
)

// Size is a HEAD file's size, and the most of it a reader reads.
const Size = canonical.UUIDLen + 1

// Encode returns the content of a HEAD file naming id.
func Encode(id uuid.UUID) []byte {
	return append(canonical.AppendUUID(make([]byte, 0, Size), id), '\n')
}

// Decode parses a HEAD file's content: exactly a canonical non-nil id
// and a newline. Anything else is an error.
func Decode(b []byte) (uuid.UUID, error) {
	if len(b) != Size || b[Size-1] != '\n' {
		return uuid.Nil, errors.New("HEAD is not a uuid and a newline")
	}
	id, err := canonical.ParseUUID(b[:Size-1])
	if err != nil {
		return uuid.Nil, err
	}
	if id == uuid.Nil {
		return uuid.Nil, errors.New("HEAD names the nil uuid")
	}
	return id, nil
}

// Read reads and decodes the HEAD (or Temp) file at path; exists is false
// when there is none. A file that is not Size bytes, or does not decode,
// is a *corrupt.Error. A larger file is refused without being read
// (vfs.ErrTooLarge, with exists true), and a path that is not a regular
// file (vfs.ErrFileType) is refused too: both are returned as the file
// system reports them.
func Read(fsys vfs.FS, path string) (id uuid.UUID, exists bool, err error) {
	var buf [Size + 1]byte
	b, err := vfs.ReadFileInto(fsys, path, buf[:0], Size)
	if errors.Is(err, os.ErrNotExist) {
		return uuid.Nil, false, nil
	}
	if errors.Is(err, vfs.ErrTooLarge) {
		return uuid.Nil, true, err
	}
	if err != nil {
		return uuid.Nil, false, err
	}
	id, err = Decode(b)
	if err != nil {
		return uuid.Nil, true, corrupt.Errorf(path, 0, "%w", err)
	}
	return id, true, nil
}

// Write atomically replaces the HEAD file of the session directory dir
// with one naming id (durable.ReplaceFile). When it returns nil the new
// HEAD is durable.
func Write(fsys vfs.FS, dir string, id uuid.UUID, perm os.FileMode) error {
	if err := durable.ReplaceFile(fsys, dir, Name, Encode(id), perm); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Join(dir, Name), err)
	}
	return nil
}
