package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// MarkerSize is the size of a JOURNAL marker (layout.JournalMarker): an
// owner id, or 32 dashes for none, and a newline. Part of the format.
const MarkerSize = 33

// markerNone is what a JOURNAL marker holds when no journal holds its
// session's records.
var markerNone = strings.Repeat("-", 32)

// ReadMarker returns the owner id that the JOURNAL marker of the session
// directory dir names: "" when the file is missing, names none, or is
// shorter than MarkerSize (a marker being made when a write failed or the
// power went: WriteMarker makes it durable before the first commit
// through its journal, so no record can depend on it). A file that holds
// anything else, or is not a regular file, or is larger, is a
// *CorruptionError naming it; other errors are the file system's.
func ReadMarker(fsys vfs.FS, dir string) (string, error) {
	path := filepath.Join(dir, layout.JournalMarker)
	b, err := vfs.ReadFileLimit(fsys, path, MarkerSize)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if errors.Is(err, vfs.ErrFileType) || errors.Is(err, vfs.ErrTooLarge) {
		var off int64
		if errors.Is(err, vfs.ErrTooLarge) {
			off = MarkerSize
		}
		return "", &CorruptionError{Path: path, Offset: off, Err: err}
	}
	if err != nil {
		return "", err
	}
	if len(b) < MarkerSize {
		return "", nil
	}
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || len(b) != MarkerSize {
		return "", &CorruptionError{Path: path, Err: fmt.Errorf("journal marker of %d bytes, want an owner id and a newline", len(b))}
	}
	if s == markerNone {
		return "", nil
	}
	if !isOwnerID(s) {
		return "", &CorruptionError{Path: path, Err: fmt.Errorf("journal marker %q is not an owner id", s)}
	}
	return s, nil
}

// isOwnerID reports whether s is 32 lower-case hex digits.
func isOwnerID(s string) bool {
	if len(s) != 32 {
		return false
	}
	for _, c := range []byte(s) {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// WriteMarker makes the JOURNAL marker of dir name owner ("" for none).
// When it returns nil the marker is durable: an existing file is written
// in place (one sector, never torn) and synced; a new one is created,
// written, synced, and then dir is synced, so that its name survives a
// crash too. A crash before it returns leaves the marker as it was or
// the new one, or, for a new file, none or one shorter than MarkerSize,
// which ReadMarker reads as naming none.
func WriteMarker(fsys vfs.FS, dir, owner string, perm fs.FileMode) error {
	if owner == "" {
		owner = markerNone
	}
	path := filepath.Join(dir, layout.JournalMarker)
	_, serr := fsys.Stat(path)
	created := errors.Is(serr, fs.ErrNotExist)
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE, perm)
	if err != nil {
		return fmt.Errorf("sessionstore: write %s: %w", path, err)
	}
	_, err = f.WriteAt([]byte(owner+"\n"), 0)
	if err == nil {
		err = f.Truncate(MarkerSize)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && created {
		err = fsys.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("sessionstore: write %s: %w", path, err)
	}
	return nil
}
