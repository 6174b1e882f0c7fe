package sessionstore

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Errors returned by Open, Close and every Store method once the store is
// closed.
var (
	// ErrClosed is returned by every call on a Store after Close.
	ErrClosed = errors.New("sessionstore: store is closed")
	// ErrCompressionMismatch is returned by Open when the root was created
	// with another Options.Compression; the error says which.
	ErrCompressionMismatch = errors.New("sessionstore: compression mode differs from the root's")
	// ErrNoStore is returned by Open when there is no store to open: a
	// read-only open of a directory that holds none, or a writable open
	// whose directory's parent does not exist (Open creates the root
	// directory itself, never its parents, so that a mistyped path is an
	// error rather than a new, empty store). The error names the
	// directory.
	ErrNoStore = errors.New("sessionstore: no store")
)

// Errors returned by the session and event lookups (Meta, UpdateMeta,
// Append, Branch, Head, Load, LoadPath, Event, Tree, Children).
var (
	// ErrNotFound reports a session or event id that the store does not hold.
	ErrNotFound = errors.New("sessionstore: not found")
	// ErrExists is returned by Create when a session with the given id exists.
	ErrExists = errors.New("sessionstore: already exists")
	// ErrForkChain is returned for a fork whose chain of ForkedFrom
	// sessions is longer than the store follows (64), or loops.
	ErrForkChain = errors.New("sessionstore: fork chain too long or cyclic")
	// ErrConflict is returned, with nothing written, by an append that
	// would contradict what the session holds: an event whose
	// caller-chosen id is stored with other content, a batch only part of
	// which is stored, or an expected parent (AppendOptions) that is not
	// the next parent. The error names the id. See retry.go.
	ErrConflict = errors.New("sessionstore: conflict")
)

// Errors returned when a session's files are shared or damaged.
var (
	// ErrLocked reports that another writer (another Store, in this process
	// or another one) holds the session. It is wrapped in an *fs.PathError
	// that names the lock file.
	ErrLocked = errors.New("sessionstore: session is locked by another writer")
	// ErrReadOnly is returned by every call that would write through a
	// store opened with Options.ReadOnly.
	ErrReadOnly = errors.New("sessionstore: store is read-only")
	// ErrCorrupt is matched by every *CorruptionError.
	ErrCorrupt = errors.New("sessionstore: corrupt data")
	// ErrUnsupportedFormat reports a session, or a root's
	// sessionstore.json, written in a format version this build does not
	// read.
	ErrUnsupportedFormat = errors.New("sessionstore: unsupported format version")
	// ErrSessionFailed is returned by every write to a session after a
	// sync of its files failed, or a write the store could not undo (an
	// index line, session.json, or a chunk write it could not cut back;
	// a chunk write it cut back fails only its own appends). The store
	// never retries an fsync:
	// after a failed one the kernel may have dropped the dirty pages, so
	// the only safe path is to close the store and open it again, which
	// reconciles the files. Events acknowledged before the failure stay
	// readable.
	ErrSessionFailed = errors.New("sessionstore: session refuses writes after an earlier I/O failure; reopen the store")
)

// Errors returned by Delete and Prune.
var (
	// ErrHasForks is returned by Delete for a session that live forks
	// read their history from (Meta.ForkedFrom names it); the error
	// names the forks. Delete them first. Prune skips such a session and
	// reports it with this error.
	ErrHasForks = errors.New("sessionstore: session has forks")
	// ErrInvalidPolicy reports a PrunePolicy Prune refuses: one that
	// selects nothing by age or count (it would remove every session it
	// matches), or a negative KeepNewest.
	ErrInvalidPolicy = errors.New("sessionstore: invalid prune policy")
	// ErrPinned is why Prune kept a session its policy chose: the session
	// is pinned (Meta.Pinned, PinLabel).
	ErrPinned = errors.New("sessionstore: session is pinned")
	// ErrRecentlyUsed is why Prune kept a session its policy chose: it was
	// written, or opened by the pruning Store, within
	// PrunePolicy.KeepRecent.
	ErrRecentlyUsed = errors.New("sessionstore: session used recently")
)

// Errors returned for bad input; nothing is written when they are returned.
var (
	// ErrInvalidEvent reports an event Append refuses: unknown kind or role,
	// a record that is not valid JSON, no record (empty or null) for a
	// kind other than KindCustom, or fields the store assigns itself.
	ErrInvalidEvent = errors.New("sessionstore: invalid event")
	// ErrRecordTooLarge reports a record over Options.MaxRecordSize. Errors
	// that match it also match ErrInvalidEvent.
	ErrRecordTooLarge = errors.New("sessionstore: record too large")
	// ErrInvalidMeta reports session metadata Create or UpdateMeta refuses:
	// a changed ID or CreatedAt, a string that is not valid UTF-8, a time
	// JSON cannot encode, or more than session.json holds (1 MiB).
	ErrInvalidMeta = errors.New("sessionstore: invalid session metadata")
	// ErrInvalidOptions reports Options that Open refuses.
	ErrInvalidOptions = errors.New("sessionstore: invalid options")
	// ErrInvalidQuery reports a Query or cursor that ListPage and
	// Sessions refuse: a negative Limit, a cursor they did not return.
	ErrInvalidQuery = errors.New("sessionstore: invalid list query")
)

// Errors returned by the format migrations (Upgrade, ConvertCompression).
var (
	// ErrRemoteUnsupported is returned by ConvertCompression and
	// Reencrypt with Options.Remote, whose chunks the object store holds,
	// by Upgrade of a remote session of a format that cannot be remote
	// (1), and by Rewrap with an ObjectStore that is not an
	// ObjectReplacer.
	ErrRemoteUnsupported = errors.New("sessionstore: not supported with Options.Remote")
)

// Errors returned by the lane calls (CreateLane, MoveLane, DeleteLane,
// SwitchLane; lanes.go), beside ErrNotFound for an unknown lane or event
// and ErrExists for a lane name taken; nothing is written when they are
// returned.
var (
	// ErrInvalidLane reports a lane name the store refuses (empty, over
	// MaxLaneName bytes, not valid UTF-8, or holding a control
	// character), or a lane beyond MaxLanes.
	ErrInvalidLane = errors.New("sessionstore: invalid lane")
	// ErrActiveLane is returned by DeleteLane for the active lane.
	ErrActiveLane = errors.New("sessionstore: lane is active")
)

// CorruptionError reports stored data that is complete but invalid: a
// record whose checksum or contents are wrong, an index entry that
// disagrees with its chunk, a record that names an unknown parent. It
// matches ErrCorrupt with errors.Is.
type CorruptionError struct {
	Path   string // file holding the bad data
	Offset int64  // byte offset of the bad record or line in Path
	Err    error  // what is wrong
}

// Error formats the error as "sessionstore: corrupt data in <path> at
// offset <n>: <cause>".
func (e *CorruptionError) Error() string {
	return fmt.Sprintf("sessionstore: corrupt data in %s at offset %d: %v", e.Path, e.Offset, e.Err)
}

// Unwrap returns the underlying cause.
func (e *CorruptionError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

func corruptf(path string, off int64, format string, args ...any) error {
	return &CorruptionError{Path: path, Offset: off, Err: fmt.Errorf(format, args...)}
}

// damage returns err as a *CorruptionError when it is the report of
// damage of a package below the root (*corrupt.Error: the same path,
// offset and cause) or a refusal of the file system (refusal); any other
// error, a *CorruptionError already among them, as it is.
func damage(err error) error {
	var ce *corrupt.Error
	if errors.As(err, &ce) && !errors.As(err, new(*CorruptionError)) {
		return &CorruptionError{Path: ce.Path, Offset: ce.Offset, Err: ce.Err}
	}
	return refusal(err)
}

// refusal returns err as a *CorruptionError when it is the file system
// seam's refusal of a path (internal/vfs): a symbolic link, a FIFO, a
// device, a socket, a file of the other type where a regular file or a
// directory belongs (vfs.ErrFileType), or a file larger than its format
// allows (vfs.ErrTooLarge, at the offset of that limit). The error names
// the path the seam refused, and still matches the seam's sentinel. Any
// other error, a *CorruptionError already among them, is returned as it
// is.
func refusal(err error) error {
	if err == nil || !(errors.Is(err, vfs.ErrFileType) || errors.Is(err, vfs.ErrTooLarge)) || errors.As(err, new(*CorruptionError)) {
		return err
	}
	ce := &CorruptionError{Err: err}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		ce.Path, ce.Err = pe.Path, pe.Err
	}
	var le *vfs.LimitError
	if errors.As(err, &le) {
		ce.Offset = le.Limit
	}
	return ce
}

func invalidEventf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidEvent, fmt.Sprintf(format, args...))
}

// ListError is returned by List, beside the metadata of every session it
// could read, when the session.json of some sessions could not be read:
// one damaged file never hides the other sessions. errors.Is and errors.As
// see each session's error (a *CorruptionError, ErrUnsupportedFormat, an
// *fs.PathError for an I/O error).
type ListError struct {
	Unreadable []UnreadableSession // in the order of their ids
}

// UnreadableSession is a session List could not read.
type UnreadableSession struct {
	ID   uuid.UUID
	Path string // its session.json
	Err  error
}

// Error names the first unreadable session and counts the others.
func (e *ListError) Error() string {
	if len(e.Unreadable) == 0 {
		return "sessionstore: list: no unreadable session"
	}
	u := e.Unreadable[0]
	msg := fmt.Sprintf("sessionstore: list: cannot read %s: %v", u.Path, u.Err)
	if n := len(e.Unreadable) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more unreadable sessions)", n)
	}
	return msg
}

// Unwrap returns the error of each unreadable session.
func (e *ListError) Unwrap() []error {
	out := make([]error, len(e.Unreadable))
	for i, u := range e.Unreadable {
		out[i] = u.Err
	}
	return out
}
