package catalogue

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/parallel"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The catalogue's files at the store root.
const (
	Name     = "catalogue.jsonl" // the snapshot
	LogName  = "catalogue.log"   // the log
	LockName = "catalogue.lock"  // the writers' lock file
)

const (
	// format 2 added the lineage members (forked_from, parent_session,
	// spawned_by, depth); a catalogue of format 1 is unusable to this
	// build and rebuilt from the session.json files.
	format = 2
	// MaxLog is how many records the log holds before a writer folds it
	// into a new snapshot: a backwards read (Backwards) reads the whole
	// log.
	MaxLog = 256
)

// ErrUnusable says the catalogue cannot be used as it is (damaged, of
// another generation, or unknown format); callers fall back to the
// session.json files.
var ErrUnusable = errors.New("sessionstore: catalogue unusable")

// ErrAbsent is what Config.ReadMeta returns (or wraps) for a session
// directory without session.json: not a session (a Create that did not
// finish, or a Delete's).
var ErrAbsent = errors.New("sessionstore: catalogue: no session.json")

// Config is what a Catalogue needs of the store it serves.
type Config struct {
	FS       vfs.FS
	Root     string      // the store's root
	FileMode fs.FileMode // for the catalogue's files
	ReadOnly bool        // a reader never writes the catalogue
	Logger   *slog.Logger
	// ReadMeta reads session.json of the session directory sdir, with id
	// id, into buf (returned for reuse): the metadata, or ErrAbsent when
	// there is none, or another error for one that cannot be read.
	ReadMeta func(sdir string, id uuid.UUID, buf []byte) (Meta, []byte, error)
}

// Catalogue is a Store's access to its catalogue files: reading them, and
// for a writable store the protocol's steps and rewrites. mu orders the
// Store's own writers before they take the lock file. Its methods are
// safe for concurrent use.
//
// The Store's appends to the log run in batches (withLog): an append that
// arrives while a batch holds the lock joins the next batch, which takes
// the lock once, checks the log once, writes every record of its appends
// in one write and, after releasing the lock, syncs once for all of them
// if any asked for a sync. A record is written, and synced, only after
// its own step ran (Create's mkdir, Delete's move), so each still follows
// its change as the protocol says; batching only shares the lock, the
// write and the sync.
type Catalogue struct {
	mu       sync.Mutex
	fsys     vfs.FS
	root     string // the store's root
	fileMode fs.FileMode
	readOnly bool
	logger   *slog.Logger
	readMeta func(sdir string, id uuid.UUID, buf []byte) (Meta, []byte, error)

	batchMu sync.Mutex // guards next
	next    *catBatch  // the batch appends join, not yet started; nil if none

	logSync durable.Coalescer // the syncs of the log after batches (withLog)

	// known is the log as this Store's last batch left it, guarded by mu:
	// current checks that the file still ends as it did instead of
	// reading it again. nil when unknown (before the first batch, after
	// a rewrite).
	known *knownLog
}

// New returns the catalogue of the store cfg describes. It reads and
// writes nothing until it is used.
func New(cfg Config) *Catalogue {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Catalogue{fsys: cfg.FS, root: cfg.Root, fileMode: cfg.FileMode, readOnly: cfg.ReadOnly, logger: logger, readMeta: cfg.ReadMeta}
}

// knownLog is the log as a batch left it: folded, and its last line
// (with its newline), which ends the file at log.size.
type knownLog struct {
	log  *catLog
	last []byte
}

// header returns the log's header line, with its newline.
func (l *catLog) header() []byte {
	return AppendRecord(nil, Record{Kind: KindHeader, Dir: l.head, Gen: l.Gen})
}

// catBatch is appends to the log that run together (withLog). done is
// closed when the batch has run, each append's err set.
type catBatch struct {
	appends []*catAppend
	done    chan struct{}
}

// catAppend is one append of a batch: rec as withLog takes it, and its
// outcome.
type catAppend struct {
	rec func(l *catLog) (Record, bool, error)
	err error
}

func (c *Catalogue) sessions() string { return filepath.Join(c.root, layout.SessionsDir) }

// lock takes the catalogue's lock file, waiting for another holder (a
// writer holds it for an append, or a rewrite).
func (c *Catalogue) lock() (io.Closer, error) {
	c.mu.Lock()
	for {
		lk, err := c.fsys.Lock(filepath.Join(c.root, LockName), c.fileMode)
		if err == nil {
			return unlockBoth{lk, &c.mu}, nil
		}
		if !errors.Is(err, vfs.ErrLocked) {
			c.mu.Unlock()
			return nil, err
		}
		time.Sleep(time.Millisecond)
	}
}

type unlockBoth struct {
	lk io.Closer
	mu *sync.Mutex
}

func (u unlockBoth) Close() error {
	err := u.lk.Close()
	u.mu.Unlock()
	return err
}

// WillWrite is step 1 of the protocol for session id: with the lock held,
// it brings the catalogue up to date if it is not (rebuild), runs
// change (Create's mkdir, Delete's move; may be nil, and may say that no
// write follows), and appends a pending record with the sessions
// directory's stamp after it. When it returns nil the record is durable
// (the log synced after it was written); an error of change is returned
// as it is, and nothing is appended for it.
func (c *Catalogue) WillWrite(id uuid.UUID, change func() (skip bool, err error)) error {
	return c.withLog(func(l *catLog) (Record, bool, error) {
		if change != nil {
			skip, err := change()
			if err != nil || skip {
				return Record{}, false, err
			}
		}
		return Record{Kind: KindPending, ID: id}, true, nil
	})
}

// Wrote is step 3: m is now durable in session.json. It appends a commit
// record with m and session.json's stamp, without a sync: a crash may
// take it, which sends readers to session.json. After an error the
// pending record stays open, with the same effect; the caller stops
// writing as after any failed write. The catalogue keeps m: the caller
// must not change it (its Labels, its ForkedFrom) afterwards.
func (c *Catalogue) Wrote(m Meta) error {
	// The caller holds the session's lock: no one changes session.json
	// before the record is written.
	st, err := statStamp(c.fsys, filepath.Join(c.sessions(), m.ID.String(), layout.MetaFile))
	if err != nil {
		return err
	}
	r := Record{Kind: KindCommit, ID: m.ID, File: st, Meta: m}
	return c.withLog(func(l *catLog) (Record, bool, error) { return r, false, nil })
}

// withLog runs one append under the lock: it reads the log, rewrites the
// catalogue first if it is unusable, has an unsynced tail or the sessions
// directory changed behind it, then appends the record rec returns
// (stamped with the directory's stamp after rec ran) and folds the log
// into a new snapshot once it is long; then, if sync, it syncs the log.
// An error of rec is returned and nothing appended for it.
//
// Appends of the Store's goroutines are batched: the first append to find
// no batch waiting starts one and leads it; the appends that arrive until
// it gets the lock (while the batch before holds it) join it. The leader
// runs every rec of its batch in arrival order, under one lock and
// against one read of the log, and writes their records in one write,
// stamped with the directory's stamp after the last rec. It syncs after
// releasing the lock, so that the next batch writes meanwhile: one sync
// of the log serves every batch written before it began (logSync). When
// withLog returns nil its record is written, and durable if sync; a
// failed write fails every append of the batch that had a record, a
// failed sync those that asked for one.
func (c *Catalogue) withLog(rec func(l *catLog) (Record, bool, error)) error {
	a := &catAppend{rec: rec}
	c.batchMu.Lock()
	b := c.next
	lead := b == nil
	if lead {
		b = &catBatch{done: make(chan struct{})}
		c.next = b
	}
	b.appends = append(b.appends, a)
	c.batchMu.Unlock()
	if !lead {
		<-b.done
		return a.err
	}
	defer close(b.done)
	lk, err := c.lock() // waits for the batch before this one
	c.batchMu.Lock()
	c.next = nil // appends from now on make the next batch
	appends := b.appends
	c.batchMu.Unlock()
	if err != nil {
		for _, a := range appends {
			a.err = err
		}
		return err
	}
	synced := c.runBatch(appends)
	lk.Close()
	if len(synced) > 0 {
		// The records are written: a later batch's sync, or a rewrite
		// (which syncs the pending records it keeps), may make them
		// durable first, and no sync of this one can lose them.
		if err := c.logSync.Do(c.syncLog); err != nil {
			for _, a := range synced {
				a.err = err
			}
		}
	}
	return a.err
}

// runBatch runs a batch's appends with the lock held (withLog), setting
// the err of each that failed, and returns those whose record is written
// and must be synced.
func (c *Catalogue) runBatch(appends []*catAppend) (synced []*catAppend) {
	fail := func(as []*catAppend, err error) {
		for _, a := range as {
			a.err = err
		}
	}
	l, f, err := c.current()
	if err != nil {
		fail(appends, err)
		return nil
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	var recs []Record
	var written []*catAppend // the appends with a record, in order
	commit := false
	for _, a := range appends {
		r, sync, err := a.rec(l)
		if err != nil || r.Kind == 0 {
			a.err = err
			continue
		}
		recs, written = append(recs, r), append(written, a)
		if sync {
			synced = append(synced, a)
		}
		commit = commit || r.Kind == KindCommit
	}
	if len(recs) == 0 {
		return synced
	}
	dir, err := statStamp(c.fsys, c.sessions())
	if err != nil {
		fail(written, err)
		return nil
	}
	var buf []byte
	for _, r := range recs {
		r.Dir = dir
		buf = AppendRecord(buf, r)
	}
	_, err = f.WriteAt(buf, l.size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	f = nil
	if err != nil {
		fail(written, err)
		return nil
	}
	for _, r := range recs {
		r.Dir = dir
		l.add(r)
	}
	l.size += int64(len(buf))
	c.known = &knownLog{log: l, last: buf[bytes.LastIndexByte(buf[:len(buf)-1], '\n')+1:]}
	if commit && l.records >= MaxLog {
		if err := c.fold(); err != nil && c.logger != nil {
			c.logger.Warn("sessionstore: catalogue compaction", "err", err)
		}
	}
	return synced
}

// syncLog syncs the log, for logSync: whatever file the name holds then
// holds every record written before it (a rewrite keeps the open pending
// records, synced), so that syncing it makes them durable.
func (c *Catalogue) syncLog() error {
	f, err := c.fsys.OpenFile(filepath.Join(c.root, LogName), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// current returns the log with the lock held, rewriting the catalogue
// first when it cannot be appended to as it is, and the log file opened
// for writing, for the caller to close. The log this Store's last batch
// left is taken as it is when the file still starts with its header line
// (every rewrite, by any writer, writes a new generation's) and ends with
// that batch's last line at the same size, and the sessions directory's
// stamp is still its last record's; else the log is read again. (The
// snapshot is not checked then: a writer that died between its rewrite's
// two renames leaves a snapshot of a newer generation than the log,
// which readers take for an unusable catalogue until the next full read
// or fold, here or by another writer, rewrites it.)
func (c *Catalogue) current() (*catLog, vfs.File, error) {
	path := filepath.Join(c.root, LogName)
	if k := c.known; k != nil {
		c.known = nil
		f, err := c.fsys.OpenFile(path, os.O_RDWR, 0)
		if err == nil {
			if c.unchanged(f, k) {
				return k.log, f, nil
			}
			f.Close()
		}
	}
	l, err := c.readCurrent()
	if err != nil {
		return nil, nil, err
	}
	f, err := c.fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	return l, f, nil
}

// readCurrent is current reading the log.
func (c *Catalogue) readCurrent() (*catLog, error) {
	l, err := readCatLog(c.fsys, c.root)
	if err == nil && !l.tail {
		var snapGen int64
		snapGen, _, err = readCatHeader(c.fsys, c.root)
		if err == nil && snapGen == l.Gen {
			if d, err := statStamp(c.fsys, c.sessions()); err == nil && d == l.Dir {
				return l, nil
			}
		}
	}
	if _, err := c.rebuild(); err != nil {
		return nil, err
	}
	return readCatLog(c.fsys, c.root)
}

// unchanged reports whether the log file f is as k says the last batch
// left it (current), with the sessions directory's stamp its last
// record's.
func (c *Catalogue) unchanged(f vfs.File, k *knownLog) bool {
	info, err := f.Stat()
	if err != nil || info.Size() != k.log.size {
		return false
	}
	head := k.log.header()
	buf := make([]byte, max(len(head), len(k.last)))
	if _, err := f.ReadAt(buf[:len(head)], 0); err != nil || !bytes.Equal(buf[:len(head)], head) {
		return false
	}
	if _, err := f.ReadAt(buf[:len(k.last)], k.log.size-int64(len(k.last))); err != nil || !bytes.Equal(buf[:len(k.last)], k.last) {
		return false
	}
	d, err := statStamp(c.fsys, c.sessions())
	return err == nil && d == k.log.Dir
}

// readCatHeader reads the snapshot's header line alone.
func readCatHeader(fsys vfs.FS, dir string) (int64, Stamp, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, Name), os.O_RDONLY, 0)
	if err != nil {
		return 0, Stamp{}, err
	}
	defer f.Close()
	return readCatHeaderFrom(f)
}

func readCatHeaderFrom(f vfs.File) (int64, Stamp, error) {
	buf := make([]byte, 256)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, Stamp{}, err
	}
	i := bytes.IndexByte(buf[:n], '\n')
	if i < 0 {
		return 0, Stamp{}, ErrUnusable
	}
	r, err := DecodeRecord(buf[:i])
	if err != nil || r.Kind != KindHeader {
		return 0, Stamp{}, ErrUnusable
	}
	return r.Gen, r.Dir, nil
}

// rebuild rewrites the catalogue with the lock held: the snapshot, then a
// log holding the open pending records, under a new generation. It lists
// the sessions directory: entries of directories gone are dropped, and
// sessions the catalogue does not know (all of them when it is unusable),
// or whose session.json's stamp is not the recorded one, are read from
// session.json. It returns the new state. (The log's compaction folds it
// without the scan: fold.)
func (c *Catalogue) rebuild() (*State, error) {
	c.known = nil
	old, err := Load(c.fsys, c.root)
	if err != nil {
		old = nil
		// Keep the open pending records of a log that is still readable:
		// writers of other processes may be between their steps 1 and 3.
		if l, lerr := readCatLog(c.fsys, c.root); lerr == nil {
			old = &State{snap: &catSnapshot{}, log: l}
			old.log.committed = map[uuid.UUID]Entry{}
		}
	}
	dirStamp, err := statStamp(c.fsys, c.sessions())
	if err != nil {
		return nil, err
	}
	var gen int64
	if g, _, err := readCatHeader(c.fsys, c.root); err == nil {
		gen = g
	}
	if old != nil {
		gen = max(gen, old.log.Gen)
	}
	gen++

	pending := map[uuid.UUID]bool{}
	ids, err := SessionIDs(c.fsys, c.sessions())
	if err != nil {
		return nil, err
	}
	entries := make([]Entry, len(ids))
	known := make([]bool, len(ids))
	for i, id := range ids {
		if old == nil {
			continue
		}
		if old.log.pending[id] {
			pending[id] = true
		}
		if e, ok, _ := old.Lookup(id, -1); ok {
			entries[i], known[i] = e, true
		} else if e, ok := old.snapEntry(id); ok {
			entries[i], known[i] = e, true
		}
	}
	found := make([]bool, len(ids))
	workers := min(runtime.GOMAXPROCS(0), (len(ids)+readBatch-1)/readBatch)
	bufs := make([][]byte, max(workers, 1))
	parallel.ForEach(len(ids), workers, func(w, i int) {
		sdir := filepath.Join(c.sessions(), ids[i].String())
		st, serr := statStamp(c.fsys, filepath.Join(sdir, layout.MetaFile))
		if known[i] && serr == nil && st == entries[i].File {
			found[i] = true // as recorded; else read again, changed behind the catalogue
			return
		}
		m, buf, err := c.readMeta(sdir, ids[i], bufs[w])
		bufs[w] = buf
		switch {
		case errors.Is(err, ErrAbsent):
		case err != nil || serr != nil:
			entries[i], found[i] = Entry{File: st, Unreadable: true}, true
		default:
			entries[i], found[i] = Entry{File: st, Meta: m}, true
		}
	})
	n := 0
	for i := range ids {
		if found[i] {
			ids[n], entries[n] = ids[i], entries[i]
			n++
		}
	}
	ids, entries = ids[:n], entries[:n]

	snap := AppendRecord(make([]byte, 0, 256*(len(ids)+1)), Record{Kind: KindHeader, Dir: dirStamp, Gen: gen})
	for i, id := range ids {
		r := Record{Kind: KindEntry, ID: id, File: entries[i].File, Meta: entries[i].Meta}
		if entries[i].Unreadable {
			r.Kind, r.Meta = KindUnreadable, Meta{}
		}
		snap = AppendRecord(snap, r)
	}
	logb := AppendRecord(nil, Record{Kind: KindHeader, Dir: dirStamp, Gen: gen})
	for id := range pending {
		logb = AppendRecord(logb, Record{Kind: KindPending, Dir: dirStamp, ID: id})
	}
	if err := durable.ReplaceFile(c.fsys, c.root, Name, snap, c.fileMode); err != nil {
		return nil, err
	}
	if err := durable.ReplaceFile(c.fsys, c.root, LogName, logb, c.fileMode); err != nil {
		return nil, err
	}
	l := &catLog{Gen: gen, head: dirStamp, Dir: dirStamp, committed: map[uuid.UUID]Entry{}, pending: pending, size: int64(len(logb))}
	return &State{snap: &catSnapshot{Gen: gen, Dir: dirStamp, ids: ids, entries: entries}, log: l}, nil
}

// State returns the catalogue for a reader: as it is on disk if usable,
// else (a writable store) rewritten from the session.json files, else nil:
// the caller reads session.json files. The State is the caller's own: no
// later change of the files or of the catalogue changes it.
func (c *Catalogue) State() *State {
	st, err := Load(c.fsys, c.root)
	if err == nil || c.readOnly {
		return st
	}
	lk, err := c.lock()
	if err != nil {
		return nil
	}
	defer lk.Close()
	if st, err := Load(c.fsys, c.root); err == nil {
		return st // another writer rewrote it meanwhile
	}
	st, err = c.rebuild()
	if err != nil {
		return nil
	}
	return st
}

// SessionIDs lists the session directories under root (a store's
// sessions directory) in id order: the names that are ids in their
// canonical form.
func SessionIDs(fsys vfs.FS, root string) ([]uuid.UUID, error) {
	names, err := fsys.ReadDir(root)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, 0, len(names))
	var canon [36]byte
	for _, name := range names {
		if len(name) != 36 {
			continue
		}
		id, err := uuid.Parse(name)
		if err != nil || string(canonical.AppendUUID(canon[:0], id)) != name {
			continue // not a session directory
		}
		ids = append(ids, id)
	}
	// Names sorted (ReadDir sorts them) are ids sorted: lower-case hex
	// sorts as the bytes it encodes.
	if !slices.IsSortedFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }) {
		sort.Slice(ids, func(i, j int) bool { return bytesLess(ids[i][:], ids[j][:]) })
	}
	return ids, nil
}
