package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The shared journal
//
// A writing Store keeps one journal (internal/journal) under its root,
// journal/<owner>.wal, made once it holds two sessions open, and every
// session it holds then commits its small groups through it
// (storeJournal.commitWith): a commit leader (commit.go) hands its group's chunk bytes to the journal,
// which shares one write and one fdatasync among the groups of every
// session committing at that moment, then writes the bytes into the
// chunk without a sync and publishes them. The chunk is made durable
// later, at a checkpoint: when the session starts a new chunk (rotate),
// when it closes (closeFiles: the chunk is synced and a Forget of the
// session's records committed before its lock is released), when a
// flush settles it, and when the journal's ring is half full (the
// journal syncs the files its records wrote, in the background).
//
// Which journal may hold a session's records that its chunks do not
// durably hold is recorded in the session's JOURNAL file: the owner id of
// that journal (32 hex digits and a newline; or 32 dashes: none), made
// durable (journal.WriteMarker) before the session's first commit through
// that journal.
//
// Taking a session over (its writer's lock) reads JOURNAL first
// (takeOver: journal.TakeOver): when it names a journal whose file still
// exists and whose owner is dead (no process holds its lock: a Claim of
// internal/journal), the session's
// records in it are written into their chunks and synced, and JOURNAL
// then durably names none, before anything reads or changes the chunks,
// so a session whose writer died opens with every acknowledged event and
// a dead journal is never applied over a chunk changed since. A journal
// whose owner lives needs nothing: the owner closed the session, which
// synced its chunks and forgot its records. A writing Store, before its
// first commit through a journal of its own, claims every dead owner's
// journal left under the root, applies it to the sessions whose JOURNAL
// still names it, and removes it (journal.Recover).
//
// A read-only Store changes nothing: when JOURNAL names a journal, its
// records for the session are laid over the chunks as it reads them
// (journal.Overlay), so that it sees what a dead writer acknowledged and a
// crash left only in the journal.

// markerName is a session's file naming the journal that may hold its
// records; part of the format.
const markerName = layout.JournalMarker

// storeJournal is a writing Store's journal, made in the background once
// the Store holds two sessions open (prepare), or, in tests
// (journalAlways), at the first commit.
type storeJournal struct {
	fsys    vfs.FS
	root    string
	size    int64
	perm    fs.FileMode
	dirPerm fs.FileMode
	log     *slog.Logger
	dead    *journal.DeadLogs

	wanted atomic.Bool                    // prepare was called: commits go through the journal
	start  sync.Once                      // prepare
	ready  atomic.Pointer[journal.Writer] // w once made, until close: writer's path without mu
	mu     sync.Mutex
	w      *journal.Writer
	err    error // why it could not be created: sessions sync their chunks themselves
	closed bool
}

// newStoreJournal returns the journal of a writing Store of root with
// options o, or nil when the store has none: read-only, with a Remote
// (whose acknowledgement waits for the object store), or JournalSize
// negative.
func newStoreJournal(root string, o *Options) *storeJournal {
	if o.ReadOnly || o.Remote != nil || o.JournalSize < 0 {
		return nil
	}
	return &storeJournal{fsys: o.fs, root: root, size: o.JournalSize, perm: o.FileMode, dirPerm: o.DirMode, log: o.Logger, dead: o.dead}
}

// writer returns the journal's writer, creating the journal on first
// use; nil when it could not be created (logged once: sessions then sync
// their own chunks) or the store closed.
func (j *storeJournal) writer() *journal.Writer {
	if w := j.ready.Load(); w != nil {
		return w
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.w == nil && j.err == nil && !j.closed {
		// First, what dead writers left (journal.Recover): it runs once,
		// before this Store writes through a journal of its own, so that
		// an Open beside a live writer changes nothing.
		if err := journal.Recover(context.Background(), j.fsys, j.root, j.perm, j.log, j.dead); err != nil {
			j.log.Error("sessionstore: dead journals not recovered", "err", err)
		}
		j.w, j.err = journal.Create(j.fsys, j.root, &journal.Options{Size: j.size, FileMode: j.perm, DirMode: j.dirPerm})
		if j.err != nil {
			j.log.Error("sessionstore: no shared journal; each session syncs its own chunks", "dir", filepath.Join(j.root, journal.Dir), "err", j.err)
		}
	}
	if j.closed {
		return nil
	}
	if j.w != nil {
		j.ready.Store(j.w)
	}
	return j.w
}

// commitWith returns the journal writer a commit group of n bytes goes
// through, or nil: the group is written into its chunk and synced there.
// A group goes through the journal when it is smaller than
// journalMaxGroup and a quarter of the journal, and the journal is ready:
// it is made (prepare) once the Store holds two sessions open at once
// (registry.openNew), whose commits it can then share. A Store that
// holds one session at a time never makes it, and its session syncs its
// own chunk, which is as durable and, alone, faster (bench/: append300
// and tool16k 1.16-1.19x side by side; BenchmarkFleetAppend one session
// 7,997 against 6,084 appends/s), with no journal file beside the data.
// Once it is wanted, a commit waits for it to be made, as it would for
// a sync. With journalAlways (tests), every group that fits goes through
// it, made at the first.
func (j *storeJournal) commitWith(n int) *journal.Writer {
	if n == 0 || n >= journalMaxGroup || int64(n) >= j.size/4 {
		return nil
	}
	if w := j.ready.Load(); w != nil {
		return w
	}
	if journalAlways || j.wanted.Load() {
		return j.writer() // waits for the journal being made
	}
	return nil
}

// journalAlways sends every commit group that fits through the journal,
// making it at the first. This package's TestMain sets it, so that the
// crash, fault and flip suites written for the journal keep committing
// through it; TestJournalOneSessionAlone turns it off.
var journalAlways = false

// prepare starts making the journal in the background, once: a second
// session of the Store opened (registry.openNew), so commits may come at
// once, and they need not wait for all of the file's preallocation
// (writer waits for what is left).
func (j *storeJournal) prepare() {
	if j == nil {
		return
	}
	j.wanted.Store(true)
	if prepareJournal {
		j.start.Do(func() { go j.writer() })
	}
}

// prepareJournal lets prepare start the journal in the background. This
// package's TestMain turns it off, so that the crash-point tests, which
// cut the power at the nth operation of a workload run again and again,
// see the journal made at the first commit, in the same place each run.
var prepareJournal = true

// current is the journal's owner id, "" if it has none yet (or j is
// nil: no journal).
func (j *storeJournal) current() string {
	if w := j.writerIfAny(); w != nil {
		return w.Owner()
	}
	return ""
}

// writerIfAny returns the journal's writer if it was created, without
// creating it; nil for a nil j.
func (j *storeJournal) writerIfAny() *journal.Writer {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.w
}

// rel is path (below the root) as a journal record names it.
func (j *storeJournal) rel(path string) (string, error) {
	r, err := filepath.Rel(j.root, path)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(r), nil
}

// close closes the journal (a last checkpoint, then its files are
// removed), after every session closed.
func (j *storeJournal) close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.closed = true
	j.ready.Store(nil)
	if j.w == nil {
		return nil
	}
	if err := j.w.Close(); err != nil {
		if errors.Is(err, journal.ErrFailed) {
			// A failure the commits it failed reported, and whose
			// sessions stopped writing: the journal stays for a replay.
			j.log.Error("sessionstore: the journal failed earlier; it stays for the next writer to replay", "path", j.w.Path(), "err", err)
			return nil
		}
		return fmt.Errorf("sessionstore: close journal %s: %w", j.w.Path(), err)
	}
	return nil
}

// sessionPrefix is the journal path prefix of the session in dir.
func (j *storeJournal) sessionPrefix(dir string) (string, error) {
	r, err := j.rel(dir)
	if err != nil {
		return "", err
	}
	return r + "/", nil
}

// takeOver is journal.TakeOver, with a damaged journal reported as the
// store's *CorruptionError (journalErr): it makes the session in dir,
// whose writer lock the caller just took, safe to write, and returns the
// owner its JOURNAL names afterwards when that is this Store's journal
// (mine), "" else.
func takeOver(ctx context.Context, fsys vfs.FS, root, dir string, mine string, perm fs.FileMode, dead *journal.DeadLogs) (string, error) {
	owner, err := journal.TakeOver(ctx, fsys, root, dir, mine, perm, dead)
	return owner, journalErr(err)
}

// journalErr converts a journal's *journal.CorruptionError into the
// store's *CorruptionError.
func journalErr(err error) error {
	var ce *journal.CorruptionError
	if errors.As(err, &ce) {
		return &CorruptionError{Path: ce.Path, Offset: ce.Offset, Err: ce.Err}
	}
	return err
}
