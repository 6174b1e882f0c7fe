package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The shared journal
//
// A writing Store keeps one journal (internal/journal) under its root,
// journal/<owner>.wal, and every session it holds commits through it: a
// commit leader (commit.go) hands its group's chunk bytes to the journal,
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
// durable before the session's first commit through that journal.
//
// Taking a session over (its writer's lock) reads JOURNAL first: when it
// names a journal whose file still exists and whose owner is dead (no
// process holds its lock: internal/journal's Claim), the session's
// records in it are written into their chunks and synced, and JOURNAL
// then durably names none, before anything reads or changes the chunks,
// so a session whose writer died opens with every acknowledged event and
// a dead journal is never applied over a chunk changed since. A journal
// whose owner lives needs nothing: the owner closed the session, which
// synced its chunks and forgot its records. Opening a writing Store
// claims every dead owner's journal left under the root, applies it to
// the sessions whose JOURNAL still names it, and removes it.
//
// A read-only Store changes nothing: when JOURNAL names a journal, its
// records for the session are laid over the chunks as it reads them
// (journalOverlay), so that it sees what a dead writer acknowledged and a
// crash left only in the journal.

// markerName is a session's file naming the journal that may hold its
// records; part of the format.
const markerName = layout.JournalMarker

// markerSize is the size of a JOURNAL file: an owner id (or markerNone)
// and a newline.
const markerSize = 33

// markerNone is what JOURNAL holds when no journal holds the session's
// records.
var markerNone = strings.Repeat("-", 32)

// readMarker returns the owner id dir's JOURNAL file names, "" when it is
// missing or names none; a file that holds neither is a
// *CorruptionError.
func readMarker(fsys vfs.FS, dir string) (string, error) {
	path := filepath.Join(dir, markerName)
	b, err := readFile(fsys, path, nil, markerSize)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if len(b) < markerSize {
		// A marker being made when the write failed or the power went:
		// no commit went through its journal (it is durable first).
		return "", nil
	}
	s, ok := strings.CutSuffix(string(b), "\n")
	if !ok || len(b) != markerSize {
		return "", corruptf(path, 0, "journal marker of %d bytes, want an owner id and a newline", len(b))
	}
	if s == markerNone {
		return "", nil
	}
	if !isOwnerID(s) {
		return "", corruptf(path, 0, "journal marker %q is not an owner id", s)
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

// writeMarker makes dir's JOURNAL name owner ("" for none), durably when
// it returns nil: written in place (one sector, never torn) and synced,
// or created, synced and its directory synced.
func writeMarker(fsys vfs.FS, dir, owner string, perm fs.FileMode) error {
	if owner == "" {
		owner = markerNone
	}
	path := filepath.Join(dir, markerName)
	_, serr := fsys.Stat(path)
	created := errors.Is(serr, fs.ErrNotExist)
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE, perm)
	if err != nil {
		return fmt.Errorf("sessionstore: write %s: %w", path, err)
	}
	_, err = f.WriteAt([]byte(owner+"\n"), 0)
	if err == nil {
		err = f.Truncate(markerSize)
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

// storeJournal is a writing Store's journal, created when a session
// first commits through it.
type storeJournal struct {
	fsys    vfs.FS
	root    string
	size    int64
	perm    fs.FileMode
	dirPerm fs.FileMode
	log     *slog.Logger
	dead    *deadLogs

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
		// First, what dead writers left (journal.go: recoverJournals):
		// it runs once, before this Store writes through a journal of
		// its own, so that an Open beside a live writer changes nothing.
		if err := recoverJournals(context.Background(), j.fsys, j.root, j.perm, j.log, j.dead); err != nil {
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

// prepare starts making the journal in the background, once: a Create
// or an append began, so a commit is coming, and it need not wait for all
// of the file's preallocation (writer waits for what is left).
func (j *storeJournal) prepare() {
	if j == nil || !prepareJournal {
		return
	}
	j.start.Do(func() { go j.writer() })
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

// takeOver makes a session whose writer lock the caller just took safe to
// write (see the section above): when its JOURNAL names a dead owner's
// journal, the session's records in it are written into its chunks and
// synced, and JOURNAL is made to name none. It returns the owner
// JOURNAL names afterwards when that is this Store's journal ("" else).
func takeOver(ctx context.Context, fsys vfs.FS, root, dir string, mine string, perm fs.FileMode, dead *deadLogs) (string, error) {
	owner, err := readMarker(fsys, dir)
	var ce *CorruptionError
	if errors.As(err, &ce) {
		// A marker a crash damaged: whichever dead journal holds the
		// session's records, they go into its chunks.
		return "", takeOverAny(ctx, fsys, root, dir, mine, perm, dead)
	}
	if err != nil || owner == "" {
		return "", err
	}
	if owner == mine {
		return owner, nil
	}
	if _, err := fsys.Stat(journal.WALPath(root, owner)); errors.Is(err, fs.ErrNotExist) {
		return "", nil // closed by its owner, or replayed and removed
	}
	r, err := filepath.Rel(root, dir)
	if err != nil {
		return "", err
	}
	applied, err := applyDead(ctx, fsys, root, owner, filepath.ToSlash(r)+"/", dead)
	if err != nil || !applied {
		return "", err
	}
	return "", writeMarker(fsys, dir, "", perm)
}

// takeOverAny is takeOver for a session whose JOURNAL cannot be read:
// every dead owner's journal under root is applied to the session, and
// JOURNAL is made to name none.
func takeOverAny(ctx context.Context, fsys vfs.FS, root, dir, mine string, perm fs.FileMode, dead *deadLogs) error {
	names, err := fsys.ReadDir(filepath.Join(root, journal.Dir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sessionstore: list journals: %w", err)
	}
	r, err := filepath.Rel(root, dir)
	if err != nil {
		return err
	}
	for _, name := range names {
		owner, ok := strings.CutSuffix(name, ".wal")
		if !ok || !isOwnerID(owner) || owner == mine {
			continue
		}
		if _, err := applyDead(ctx, fsys, root, owner, filepath.ToSlash(r)+"/", dead); err != nil {
			return err
		}
	}
	return writeMarker(fsys, dir, "", perm)
}

// applyDead applies the records under prefix of owner's journal, if its
// owner is dead, holding its claim: applied reports whether it did (or
// found it had nothing to), false when the owner is alive or its journal
// is gone. It reads the journal through dead (nil: no cache).
func applyDead(ctx context.Context, fsys vfs.FS, root, owner, prefix string, dead *deadLogs) (applied bool, err error) {
	c, err := journal.Take(ctx, fsys, root, owner)
	if errors.Is(err, journal.ErrOwnerAlive) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("sessionstore: claim journal %s: %w", journal.WALPath(root, owner), err)
	}
	defer c.Release()
	log, err := dead.read(fsys, root, c, owner)
	if errors.Is(err, fs.ErrNotExist) {
		return false, c.Remove() // removed meanwhile: only its lock files were left
	}
	if err != nil {
		return false, journalErr(err)
	}
	if err := settleDead(fsys, root, log, prefix); err != nil {
		return false, fmt.Errorf("sessionstore: replay journal %s into %s: %w", journal.WALPath(root, owner), prefix, err)
	}
	return true, nil
}

// deadLogs keeps the dead journal a take-over read last, so that taking
// over the many sessions one dead writer left reads its journal once, not
// once a session (a 64 MiB journal read again for each of a thousand
// sessions opened after a crash). A dead owner's journal never changes:
// only a replayer holding its claim removes it, and owner ids are never
// reused, so the log read stays right for as long as the file exists,
// which read checks under the claim. One log is kept: a crash leaves one
// dead journal per process that was writing.
type deadLogs struct {
	mu    sync.Mutex
	owner string
	log   *journal.Log
	reads int // journal reads, for tests
}

// read returns the log of owner's journal under root, whose claim c the
// caller holds; fs.ErrNotExist when the file is gone. A nil d reads every
// time.
func (d *deadLogs) read(fsys vfs.FS, root string, c *journal.Claim, owner string) (*journal.Log, error) {
	if d == nil {
		return c.Read()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.owner == owner && d.log != nil {
		if _, err := fsys.Stat(journal.WALPath(root, owner)); err != nil {
			d.owner, d.log = "", nil
			return nil, err
		}
		return d.log, nil
	}
	log, err := c.Read()
	d.reads++
	if err != nil {
		return nil, err
	}
	d.owner, d.log = owner, log
	return log, nil
}

// forget drops owner's log: its journal was removed.
func (d *deadLogs) forget(owner string) {
	if d == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.owner == owner {
		d.owner, d.log = "", nil
	}
}

// settleDead makes the records under prefix of a dead owner's journal
// durable in their files. In another boot than the owner's (the machine
// went down with it), the page cache is gone: the records are written
// into their files and synced (Log.Apply). In the owner's boot (the
// process died, the machine did not), the files hold every record the
// owner acknowledged, written before the acknowledgement: they are only
// synced, and a record the owner made durable in the journal but had not
// written into its file yet, unacknowledged, stays out, as a reader
// beside it saw the session.
func settleDead(fsys vfs.FS, root string, log *journal.Log, prefix string) error {
	if id := fsys.BootID(); id == "" || log.Boot != journal.BootHash(id) {
		_, err := log.Apply(fsys, root, prefix)
		return err
	}
	seen := map[string]bool{}
	for _, e := range log.Under(prefix) {
		if seen[e.Path] {
			continue
		}
		seen[e.Path] = true
		if err := syncFile(fsys, filepath.Join(root, filepath.FromSlash(e.Path))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
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

// recoverJournals claims every dead owner's journal under root, applies
// it to each session whose JOURNAL still names it, and removes it: a
// writing Store's Open. A journal it cannot claim (its owner alive, or
// another process replaying it) is left; one it cannot read is left and
// logged (the sessions it covers report it when opened).
func recoverJournals(ctx context.Context, fsys vfs.FS, root string, perm fs.FileMode, log *slog.Logger, dead *deadLogs) error {
	names, err := fsys.ReadDir(filepath.Join(root, journal.Dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sessionstore: list journals: %w", err)
	}
	for _, name := range names {
		owner, ok := strings.CutSuffix(name, ".wal")
		if !ok || !isOwnerID(owner) {
			continue
		}
		if err := recoverJournal(ctx, fsys, root, owner, perm, dead); err != nil {
			log.Error("sessionstore: dead journal left for its sessions to replay", "path", journal.WALPath(root, owner), "err", err)
		}
	}
	return nil
}

// recoverJournal is recoverJournals for one journal.
func recoverJournal(ctx context.Context, fsys vfs.FS, root, owner string, perm fs.FileMode, dead *deadLogs) error {
	c, err := journal.Take(ctx, fsys, root, owner)
	if errors.Is(err, journal.ErrOwnerAlive) {
		return nil
	}
	if err != nil {
		return err
	}
	defer c.Release()
	defer dead.forget(owner)
	jl, err := dead.read(fsys, root, c, owner)
	if errors.Is(err, fs.ErrNotExist) {
		return c.Remove()
	}
	if err != nil {
		return journalErr(err)
	}
	// The sessions the log covers, in order of first record.
	var prefixes []string
	seen := map[string]bool{}
	for _, e := range jl.Entries {
		p, ok := sessionOfPath(e.Path)
		if ok && !seen[p] {
			seen[p] = true
			prefixes = append(prefixes, p)
		}
	}
	for _, p := range prefixes {
		dir := filepath.Join(root, filepath.FromSlash(p))
		named, err := readMarker(fsys, dir)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if named != owner {
			continue // taken over since, or deleted
		}
		if err := settleDead(fsys, root, jl, p); err != nil {
			return err
		}
		if err := writeMarker(fsys, dir, "", perm); err != nil {
			return err
		}
	}
	return c.Remove()
}

// sessionOfPath returns the session prefix ("sessions/<id>/") of a
// journal record's path.
func sessionOfPath(p string) (string, bool) {
	rest, ok := strings.CutPrefix(p, sessionsDir+"/")
	if !ok {
		return "", false
	}
	i := strings.IndexByte(rest, '/')
	if i <= 0 {
		return "", false
	}
	return p[:len(sessionsDir)+1+i+1], true
}

// journalOverlay returns fsys with the records of owner's journal for
// the session in dir laid over the files they write, for a read-only
// Store: nil when JOURNAL names no journal or its file is gone. A journal
// that cannot be read (its owner alive and writing it, or damaged) lays
// nothing over: a live owner's chunks hold what it acknowledged, and a
// writer taking the session over reports the damage.
func journalOverlay(fsys vfs.FS, root, dir string) vfs.FS {
	owner, err := readMarker(fsys, dir)
	if err != nil || owner == "" {
		return nil
	}
	wal := journal.WALPath(root, owner)
	boot, err := journal.ReadBoot(fsys, wal)
	if err != nil {
		return nil
	}
	if id := fsys.BootID(); id != "" && boot == journal.BootHash(id) {
		// Written in this boot: its owner wrote every record it
		// acknowledged into the chunks before, and whether it lives or
		// was killed, the page cache holds them.
		return nil
	}
	jl, err := journal.Read(fsys, wal)
	if err != nil {
		return nil
	}
	r, err := filepath.Rel(root, dir)
	if err != nil {
		return nil
	}
	es := jl.Under(filepath.ToSlash(r) + "/")
	if len(es) == 0 {
		return nil
	}
	o := &overlayFS{FS: fsys, files: map[string][]journal.Entry{}}
	for _, e := range es {
		p := filepath.Join(root, filepath.FromSlash(e.Path))
		o.files[p] = append(o.files[p], e)
	}
	return o
}

// overlayFS lays journal records over the files they write, for reading:
// a file read through it holds each record's data at its offset, and is
// at least as long as the records reach.
type overlayFS struct {
	vfs.FS
	files map[string][]journal.Entry
}

func (o *overlayFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := o.FS.OpenFile(name, flag, perm)
	if err != nil {
		return f, err
	}
	es := o.files[name]
	if len(es) == 0 || flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		return f, nil
	}
	return &overlayFile{File: f, es: es}, nil
}

func (o *overlayFS) Stat(name string) (fs.FileInfo, error) {
	info, err := o.FS.Stat(name)
	if err != nil {
		return info, err
	}
	if end := recordsEnd(o.files[name]); end > info.Size() {
		return sizedInfo{info, end}, nil
	}
	return info, nil
}

// recordsEnd is where the furthest of es ends.
func recordsEnd(es []journal.Entry) int64 {
	var end int64
	for _, e := range es {
		end = max(end, e.Offset+int64(len(e.Data)))
	}
	return end
}

type overlayFile struct {
	vfs.File
	es []journal.Entry
}

// ReadAt reads the file and fills in the records' bytes where the file
// has none: past its end, or zeros (a chunk's free space, where a power
// loss left the unsynced write out). A byte the file holds that is not
// zero is the file's: a record never changes a byte its owner had written
// (chunks are appended to), so such a byte is the file's newer content (a
// session written again since the overlay was read).
func (f *overlayFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	end := off + int64(len(b))
	for _, e := range f.es {
		eEnd := e.Offset + int64(len(e.Data))
		if eEnd <= off || e.Offset >= end {
			continue
		}
		lo, hi := max(off, e.Offset), min(end, eEnd)
		if lo-off > int64(n) {
			continue // a gap past the file's end before the record
		}
		for i := lo; i < hi; i++ {
			if i-off >= int64(n) || b[i-off] == 0 {
				b[i-off] = e.Data[i-e.Offset]
			}
		}
		n = max(n, int(hi-off))
	}
	if n == len(b) {
		err = nil
	}
	return n, err
}

func (f *overlayFile) Stat() (fs.FileInfo, error) {
	info, err := f.File.Stat()
	if err != nil {
		return info, err
	}
	if end := recordsEnd(f.es); end > info.Size() {
		return sizedInfo{info, end}, nil
	}
	return info, nil
}

// sizedInfo is a FileInfo with another size.
type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (s sizedInfo) Size() int64 { return s.size }
