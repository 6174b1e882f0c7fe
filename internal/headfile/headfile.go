// Package headfile is the encoding of a session's HEAD file: the id of
// the newest event of the active branch in canonical form and a newline,
// 37 bytes. The file is absent while the session has no events.
//
// The package encodes and decodes bytes; it opens no file. Writing HEAD
// (an atomic replace: temporary file, sync, rename, directory sync) and
// repairing it are the callers': a crash during a replace leaves the old
// HEAD, the new one, or a Temp file beside the old one, never a mix.
package headfile

import (
	"errors"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
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
