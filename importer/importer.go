// Package importer writes sessions read from other tools' files into a
// sessionstore Store. Its subpackages read the formats (claude, pi, codex);
// this package holds what they share: the Session a reader produces, the
// ids derived from the source so that importing again adds nothing, the
// error that names a malformed line, the reading of lines bounded by the
// store's record limit (LineReader), the telling of the formats apart
// (Sniff, FormatError), and Write, which appends a Session's events to a
// Store.
//
// Bad input: a problem with one line is reported (a *LineError) and the
// rest of the file read; a problem with one file, or with the session it
// holds as the store sees it (SessionProblem), is reported for that file
// and the other files are imported. What stops an import is the
// context's end or the store's failure. Readers keep no recursion whose
// depth the input decides, and take time and memory linear in the input.
//
// Provider state: what a transcript holds that a model provider wants
// back verbatim (Anthropic's signed thinking blocks, OpenAI's reasoning
// items) is kept as sessionstore.ProviderState, in the shapes the
// adapters send back; each reader's doc says which.
//
// Idempotence: every id a reader produces is derived from the source (ID)
// and written as a caller-chosen id (sessionstore.Store.AppendWith), so
// Write skips the events a session already holds and appends only new
// ones: importing the same files twice adds nothing, and importing a
// transcript that grew since adds its new records.
//
// Durability: when Write returns nil, every event it appended is durable
// (AppendWith's contract). A crash during Write leaves a prefix of the new
// events written, each run of them whole or absent; writing the session
// again completes it.
package importer

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
)

// ErrMalformed is wrapped by a LineError for a line that is not what its
// format says (not JSON, a missing id, a parent named before it exists).
var ErrMalformed = errors.New("importer: malformed input")

// ErrInvalidSession is returned by Write for a Session whose events do not
// form a tree (an event without an id, a repeated id, a parent that comes
// after its child or is missing, more than one root) or have a time the
// store cannot hold (see Storable); nothing is written.
var ErrInvalidSession = errors.New("importer: invalid session")

// LineError locates a problem in a source file: the file, the 1-based line
// number, and what is wrong. Readers report a LineError for each bad line
// and go on with the rest of the file.
type LineError struct {
	Path string
	Line int
	Err  error
}

func (e *LineError) Error() string {
	return fmt.Sprintf("%s:%d: %v", e.Path, e.Line, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Malformed returns a LineError wrapping ErrMalformed with the message of
// format and args.
func Malformed(path string, line int, format string, args ...any) *LineError {
	return &LineError{Path: path, Line: line, Err: fmt.Errorf("%w: %s", ErrMalformed, fmt.Sprintf(format, args...))}
}

// Session is one session read from another tool's files.
type Session struct {
	// Meta is the session's metadata. Its ID must be set (derived from
	// the source's session id with ID, so that importing again finds it).
	// A subagent's session sets ParentSession (and SpawnedBy) to a
	// session written before it.
	Meta sessionstore.Meta
	// Events are the session's events, parents before children, each
	// with ID (a UUIDv7: see ID), ParentID (uuid.Nil for the one root),
	// Time (kept as the source's time), Kind, Role and Record. BranchFrom
	// is ignored: Write branches where an event's parent is not the
	// event written before it, and the store sets it.
	Events []sessionstore.Event
	// Head is the event HEAD names after the import: the source tool's
	// current position. It must be a leaf; Write writes it last. uuid.Nil
	// means the last event.
	Head uuid.UUID
	// Path is the source file, for messages.
	Path string
}

// ID returns a UUIDv7 derived from the source: its time field is t's Unix
// milliseconds (clamped to the field's range) and its random bits are the
// SHA-256 of key, so the same key and time give the same id on every
// import. A key names the record in its source beyond doubt, such as
// "claude:" + the record's uuid.
func ID(key string, t time.Time) uuid.UUID {
	ms := t.UnixMilli()
	if ms < 0 {
		ms = 0
	}
	if ms >= 1<<48 {
		ms = 1<<48 - 1
	}
	sum := sha256.Sum256([]byte(key))
	var id uuid.UUID
	var ts [8]byte
	binary.BigEndian.PutUint64(ts[:], uint64(ms))
	copy(id[:6], ts[2:])
	copy(id[6:], sum[:10])
	id[6] = id[6]&0x0f | 0x70 // version 7
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}

// Storable reports whether the store can hold t as an event's time: from
// 1970 to 2262 (Unix nanoseconds in an int64). Readers report a source
// time outside that range and use another (see each reader's doc): Write
// refuses a session with an event at such a time.
func Storable(t time.Time) bool {
	return t.Unix() >= 0 && t.Unix() < math.MaxInt64/int64(time.Second)
}

// WriteResult counts what Write did.
type WriteResult struct {
	Created  bool // the session was made by this Write
	Added    int  // events appended by this Write
	Existing int  // events the session held already, or that another writer stored meanwhile
}

// Write appends the events of s that the Store does not hold yet, creating
// the session first if it does not exist, and returns what it did. Runs of
// events that follow one another (each the child of the one before) go in
// one AppendWith with their ids and times (AppendOptions.KeepTime); an
// event whose parent is not the event written before it is written after
// a Branch to its parent. s.Head is written last, so HEAD names it when
// Write returns, unless s.Head was stored already and other events are
// new: the store moves HEAD only by appending, so HEAD is then the last
// event written. A session created meanwhile by another Write of the same
// session is written to as found.
//
// Writes of one session to one Store run one at a time: goroutines
// importing the same files side by side each find what the others wrote.
// Writes through other Stores (other processes) may store a run first;
// AppendWith then returns it as stored (AppendOptions.Stored), and it is
// counted in Existing: Added counts each event once over all the writers.
//
// A session this Write made, or found empty, and to which the store
// refused its first run for the session's own content (see
// SessionProblem: a record over Options.MaxRecordSize, say) is deleted
// again before Write returns, so no empty session is left behind; a
// session that holds events by then (another Store stored part of the
// run: ErrConflict) is kept.
//
// Errors: ErrInvalidSession (nothing written); the Store's errors, with
// the events of the runs before the failed one written (and durable), and
// no Branch selection left pending. Use SessionProblem to tell a problem
// of this session from one of the store.
func Write(ctx context.Context, st *sessionstore.Store, s *Session) (WriteResult, error) {
	var res WriteResult
	order, err := writeOrder(s)
	if err != nil {
		return res, err
	}
	id := s.Meta.ID
	unlock := lockSession(st, id)
	defer unlock()
	if _, err := st.Meta(ctx, id); errors.Is(err, sessionstore.ErrNotFound) {
		// Another Write of the same session may create it first.
		if _, err := st.Create(ctx, s.Meta); err == nil {
			res.Created = true
		} else if !errors.Is(err, sessionstore.ErrExists) {
			return res, fmt.Errorf("importer: create session %s from %s: %w", id, s.Path, err)
		}
	} else if err != nil {
		return res, err
	}
	held := make(map[uuid.UUID]bool)
	if !res.Created {
		nodes, err := st.Tree(ctx, id)
		if err != nil {
			return res, err
		}
		for _, n := range nodes {
			held[n.ID] = true
		}
	}
	empty := len(held) == 0
	head, err := st.Head(ctx, id)
	if err != nil {
		return res, err
	}
	var run []sessionstore.Event
	flush := func() error {
		if len(run) == 0 {
			return nil
		}
		if hook, ok := ctx.Value(beforeRunKey{}).(func()); ok {
			hook()
		}
		parent := run[0].ParentID
		var stored bool
		opts := sessionstore.AppendOptions{KeepTime: true, ExpectParent: parent, ExpectRoot: parent == uuid.Nil, Stored: &stored}
		branched := parent != uuid.Nil && parent != head
		if branched {
			if err := st.Branch(ctx, id, parent); err != nil {
				return fmt.Errorf("importer: branch to %s in session %s: %w", parent, id, err)
			}
		}
		for i := range run {
			run[i].ParentID = uuid.Nil // AppendWith takes the parent from the store
			run[i].BranchFrom = uuid.Nil
		}
		out, err := st.AppendWith(ctx, id, opts, run...)
		if err != nil {
			if branched {
				// Cancel the selection, so that the session's next append
				// follows HEAD again (even when ctx was cancelled).
				_ = st.Branch(context.WithoutCancel(ctx), id, head)
			}
			return fmt.Errorf("importer: append %d events to session %s from %s: %w", len(run), id, s.Path, err)
		}
		run = run[:0]
		if !stored {
			res.Added += len(out)
			head = out[len(out)-1].ID
			return nil
		}
		// Another writer stored the run first: HEAD is where it left it,
		// and the selection made for the run is still pending.
		res.Existing += len(out)
		if head, err = st.Head(ctx, id); err != nil {
			return err
		}
		if branched {
			if err := st.Branch(ctx, id, head); err != nil {
				return fmt.Errorf("importer: cancel the branch to %s in session %s: %w", parent, id, err)
			}
		}
		return nil
	}
	fail := func(err error) (WriteResult, error) {
		if empty && res.Added == 0 && res.Existing == 0 && SessionProblem(err) && heldNothing(ctx, st, id) {
			// The store refused the session's first run: leave no empty
			// session behind (importing again would refuse it again).
			if derr := st.Delete(context.WithoutCancel(ctx), id); derr != nil {
				err = fmt.Errorf("%w (and the empty session was left: %w)", err, derr)
			} else {
				res.Created = false
			}
		}
		return res, err
	}
	for _, ev := range order {
		if held[ev.ID] {
			res.Existing++
			continue
		}
		if len(run) > 0 && ev.ParentID != run[len(run)-1].ID {
			if err := flush(); err != nil {
				return fail(err)
			}
		}
		run = append(run, ev)
	}
	if err := flush(); err != nil {
		return fail(err)
	}
	return res, nil
}

// heldNothing reports whether session id of st holds no event, looked at
// again: a refused first run may be one another Store (another process)
// stored part of meanwhile (ErrConflict), and what it stored stays.
func heldNothing(ctx context.Context, st *sessionstore.Store, id uuid.UUID) bool {
	nodes, err := st.Tree(context.WithoutCancel(ctx), id)
	return err == nil && len(nodes) == 0
}

// beforeRunKey keys a test's hook in the context of Write, called before
// each run is appended.
type beforeRunKey struct{}

// SessionProblem reports whether err, from Write, is a problem of the one
// session written rather than of the store or the call: its content as
// the store sees it (ErrInvalidSession, the store's ErrInvalidEvent, such
// as a record over Options.MaxRecordSize, and ErrInvalidMeta), a session
// the store holds with other content (ErrConflict), or the store's copy of
// that session, damaged (ErrCorrupt) or of a newer format
// (ErrUnsupportedFormat). An import reports such a problem for the
// session's file and goes on with the next file; importing again meets
// it again. Any other error (the context's, a closed or read-only store,
// an I/O failure, a session another writer holds) stops an import.
func SessionProblem(err error) bool {
	for _, target := range []error{ErrInvalidSession, sessionstore.ErrInvalidEvent, sessionstore.ErrRecordTooLarge, sessionstore.ErrInvalidMeta, sessionstore.ErrConflict, sessionstore.ErrCorrupt, sessionstore.ErrUnsupportedFormat} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// writing holds a mutex per Store and session being written by Write,
// under writingMu.
var (
	writing   = map[writeKey]*writeLock{}
	writingMu sync.Mutex
)

type writeKey struct {
	st *sessionstore.Store
	id uuid.UUID
}

type writeLock struct {
	mu    sync.Mutex
	users int // goroutines holding or waiting for mu, under writingMu
}

// lockSession waits until no other Write writes session id of st, and
// returns the function that ends this one's turn. The entry is dropped
// when no goroutine holds or waits for it.
func lockSession(st *sessionstore.Store, id uuid.UUID) func() {
	k := writeKey{st, id}
	writingMu.Lock()
	l := writing[k]
	if l == nil {
		l = &writeLock{}
		writing[k] = l
	}
	l.users++
	writingMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		writingMu.Lock()
		if l.users--; l.users == 0 {
			delete(writing, k)
		}
		writingMu.Unlock()
	}
}

// writeOrder checks that s's events form one tree with parents first and
// returns them in the order Write writes them: as given, with s.Head moved
// to the end.
func writeOrder(s *Session) ([]sessionstore.Event, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidSession, s.Path, fmt.Sprintf(format, args...))
	}
	if s.Meta.ID == uuid.Nil {
		return nil, bad("no session id")
	}
	seen := make(map[uuid.UUID]bool, len(s.Events))
	parents := make(map[uuid.UUID]bool, len(s.Events))
	roots := 0
	for i, ev := range s.Events {
		switch {
		case ev.ID == uuid.Nil:
			return nil, bad("event %d has no id", i)
		case !ev.Time.IsZero() && !Storable(ev.Time):
			return nil, bad("event %d (%s) has time %s, outside 1970 to 2262, which the store cannot hold", i, ev.ID, ev.Time.Format(time.RFC3339Nano))
		case seen[ev.ID]:
			return nil, bad("event %d repeats id %s", i, ev.ID)
		case ev.ParentID == uuid.Nil:
			if roots++; roots > 1 {
				return nil, bad("event %d (%s) is a second root", i, ev.ID)
			}
		case !seen[ev.ParentID]:
			return nil, bad("event %d (%s) names parent %s, which does not come before it", i, ev.ID, ev.ParentID)
		}
		seen[ev.ID] = true
		parents[ev.ParentID] = true
	}
	order := s.Events
	if s.Head != uuid.Nil {
		if !seen[s.Head] {
			return nil, bad("head %s is not one of its events", s.Head)
		}
		if parents[s.Head] {
			return nil, bad("head %s has children: it must be a leaf", s.Head)
		}
		order = make([]sessionstore.Event, 0, len(s.Events))
		var last sessionstore.Event
		for _, ev := range s.Events {
			if ev.ID == s.Head {
				last = ev
				continue
			}
			order = append(order, ev)
		}
		order = append(order, last)
	}
	return order, nil
}

// Note is something an import met that loses nothing and asks for no
// fix, but is worth telling: a source the importer read in a way its
// format allows yet a reader may not expect.
type Note struct {
	Path string // the source file
	Line int    // its 1-based line; 0 for the whole file
	Text string
}

// String formats the note as <path>:<line>: <text> (<path>: <text> for
// the whole file).
func (n Note) String() string {
	if n.Line == 0 {
		return n.Path + ": " + n.Text
	}
	return fmt.Sprintf("%s:%d: %s", n.Path, n.Line, n.Text)
}

// Report sums up an import: the input read, what was written, each
// problem found on the way (a *LineError for a malformed line; the import
// goes on after it), and the notes.
type Report struct {
	Files    int   // source files read
	Bytes    int64 // bytes of them
	Lines    int   // lines read
	Sessions int   // sessions written (made or found)
	Created  int   // sessions made
	Added    int   // events appended
	Existing int   // events found already stored
	Errors   []error
	Notes    []Note // not problems: an import with notes and no Errors is whole
}

// Add counts the result of one Write.
func (r *Report) Add(res WriteResult) {
	r.Sessions++
	if res.Created {
		r.Created++
	}
	r.Added += res.Added
	r.Existing += res.Existing
}

// Err returns the report's problems joined (errors.Join), or nil.
func (r *Report) Err() error { return errors.Join(r.Errors...) }

// Options are what the importers share.
type Options struct {
	// Progress, if not nil, is called with the report so far after each
	// session is written, so a caller can show progress on a large input.
	Progress func(Report)
}

// Progressed calls o.Progress with r if it is set.
func (o *Options) Progressed(r Report) {
	if o != nil && o.Progress != nil {
		o.Progress(r)
	}
}

// FileStats counts what reading one source file saw.
type FileStats struct {
	Lines int   // lines read
	Bytes int64 // bytes of them
}

// ReadFunc reads the one session of a source file: the session, the
// problems found in lines that were left out (each a *LineError), what was
// read, and an error for a file that holds no session.
type ReadFunc func(path string) (*Session, []error, FileStats, error)

// Files lists the files of paths: a file as named, a directory's .jsonl
// files (walked, in lexical order). Of a directory only regular files are
// taken (or links to one): a FIFO or device named *.jsonl could block a
// read, or never end. A path that is a link to a directory is walked as
// that directory; links inside a directory are not followed into
// directories.
func Files(paths []string) ([]string, error) {
	var files []string
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		err = filepath.WalkDir(walkRoot(p), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if strings.HasSuffix(d.Name(), ".jsonl") && RegularFile(path, d) {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return files, nil
}

// walkRoot is the root to walk for the directory p: p, or for a link to
// a directory, p with a separator after it, which WalkDir follows (it
// takes a link it is given as the root for a file).
func walkRoot(p string) string {
	if fi, err := os.Lstat(p); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return p + string(filepath.Separator)
	}
	return p
}

// RegularFile reports whether the entry d of a directory walk, at path,
// is a regular file or a link to one.
func RegularFile(path string, d fs.DirEntry) bool {
	switch {
	case d.Type().IsRegular():
		return true
	case d.Type()&fs.ModeSymlink != 0:
		fi, err := os.Stat(path)
		return err == nil && fi.Mode().IsRegular()
	}
	return false
}

// ImportFiles reads each of files with read and writes its session to st
// with Write, calling opts.Progress after each, for a format whose files
// hold one session each; source names the format in messages. A problem
// with one line or one file (a malformed line, a file that holds no
// session or is of another format, a session Write refuses or the store
// refuses for its content: see SessionProblem) is added to the report's
// Errors and the import goes on with the next file; the error returned
// is what stopped it: ctx's, or the store's, with the files before it
// imported and the rest not read.
func ImportFiles(ctx context.Context, st *sessionstore.Store, source string, files []string, read ReadFunc, opts *Options) (Report, error) {
	var rep Report
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		s, errs, fst, err := read(f)
		rep.Files++
		rep.Lines += fst.Lines
		rep.Bytes += fst.Bytes
		rep.Errors = append(rep.Errors, errs...)
		if err != nil {
			rep.Errors = append(rep.Errors, err)
			continue
		}
		res, err := Write(ctx, st, s)
		if SessionProblem(err) {
			rep.Errors = append(rep.Errors, fmt.Errorf("%s: %s: %w", source, f, err))
			if res.Created || res.Added > 0 {
				rep.Add(res)
			}
			continue
		}
		if err != nil {
			return rep, err
		}
		rep.Add(res)
		opts.Progressed(rep)
	}
	return rep, nil
}

// ReadPath opens the file at path and reads it with read, which gets the
// path as given (for messages) and as an absolute path (for labels, the
// path as given when it has none).
func ReadPath(path string, read func(r io.Reader, path, abs string) (*Session, []error, FileStats, error)) (*Session, []error, FileStats, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, FileStats{}, err
	}
	defer f.Close()
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return read(f, path, abs)
}
