package sessionstore

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Store holds the sessions under one root directory. Its methods are safe
// for concurrent use. A Store opens a session for writing the first time a
// call needs the session's timeline (Append, Branch, Head, Load, Event,
// Tree, ...) and holds its lock until Close, or until it closes the session
// to make room (Options.MaxOpenSessions); a read-only store takes no lock.
// List and Meta read only session.json and take no lock.
type Store struct {
	dir  string
	opts Options

	// closeMu is held shared by every call in flight and exclusively by
	// Close, so Close waits for them.
	closeMu sync.RWMutex
	closed  atomic.Bool

	mu       sync.Mutex // guards sessions, idle, closing and every handle's refs and elem
	sessions map[uuid.UUID]*handle
	idle     list.List                   // open handles no call uses, most recently used first
	closing  map[uuid.UUID]chan struct{} // sessions being closed to respect MaxOpenSessions
	// Branch selections of sessions closed to respect MaxOpenSessions,
	// restored when they reopen: closing an idle session must not change
	// where its next event goes.
	selections map[uuid.UUID]uuid.UUID
	// Sessions closed to respect MaxOpenSessions after a failed sync
	// stopped their writes, with their newest acknowledged event: they
	// reopen stopped (loadFailed), as the package doc promises until the
	// Store is reopened.
	failures map[uuid.UUID]failure
	// Repairs reconciliation made in sessions closed to respect
	// MaxOpenSessions before a Repair reported them: the next Repair does.
	repaired map[uuid.UUID][]string

	hub *hub // live fan-out to subscribers (hub.go)
}

// handle is an open, locked session: its in-memory index and its writers.
// Every field is guarded by mu.
type handle struct {
	mu  sync.Mutex
	id  uuid.UUID
	dir string

	openErr error // set when opening failed; the handle is then unusable
	lock    io.Closer
	meta    Meta
	format  int // of the session's files (session.go: formatVersion)

	refs  int           // calls using the handle; guarded by Store.mu
	elem  *list.Element // in Store.idle when refs is 0; guarded by Store.mu
	ready chan struct{} // closed once opening the handle succeeded or failed

	entries []entry             // every event, in log order
	byID    map[uuid.UUID]int32 // id -> position in entries
	// lazy is HEAD's entry while the session is open without its index
	// (lazy.go: entries and byID are empty then), else nil.
	lazy *entry
	// partial: the session appends without its index (lazy.go): entries
	// start at the HEAD it was opened with, and byID holds only those.
	partial bool
	pending uuid.UUID // parent chosen by Branch, uuid.Nil if none

	chunks   chunkWriter
	index    *indexFile
	inflight []inflightRecord // written, not yet known durable (commit.go)
	// writingBlobs counts the blobs of appends that have not written their
	// lines yet; GC keeps them.
	writingBlobs map[[32]byte]int
	blobDirs     blobDirs     // blob directories known durable (has its own mutex)
	syncing      bool         // a commit leader is syncing the active chunk
	lastBatch    int          // records the last commit sync covered
	open         *commitGroup // the in-flight records no sync has started on (commit.go)
	synced       *sync.Cond   // on mu: in-flight records were published or failed
	readOnly     bool         // opened by a read-only store (readonly.go)
	revision     Revision     // of the files when a read-only handle last looked
	failed       error        // sticky write failure
	damaged      error        // *CorruptionError found on open: reads see the valid prefix, writes are refused
	headOnDisk   uuid.UUID    // what the HEAD file holds
	appended     bool         // events appended since open
	repaired     []string     // repairs reconciliation made that Repair has not returned
	line         []byte       // reused encoding buffer
}

// Open opens the store rooted at dir, creating it when dir holds none: dir
// itself may be created, but not its parent, so that a mistyped path fails
// instead of making a new, empty store. A read-only store (Options.ReadOnly)
// creates nothing. A nil opts selects the defaults. Open does not open any
// session: sessions are opened and locked on first use, and reconciled
// when a call first needs the index (a clean format 2 session opens
// without it: see Opening in the package doc).
//
// When Open creates a store, its directories and sessionstore.json are
// durable when it returns.
//
// Errors: ErrInvalidOptions; ErrNoStore when dir's parent does not exist,
// or for a read-only open, when dir holds no store; ErrCompressionMismatch;
// ErrUnsupportedFormat for a sessionstore.json of a format other than 1;
// a *CorruptionError for a damaged sessionstore.json; or the filesystem
// error that prevented creating the root.
func Open(dir string, opts *Options) (*Store, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	dir = filepath.Clean(dir)
	root := filepath.Join(dir, sessionsDir)
	if info, err := o.fs.Stat(dir); err == nil && !info.IsDir() {
		return nil, fmt.Errorf("%w at %s (not a directory)", ErrNoStore, dir)
	}
	if o.ReadOnly {
		// Read what is there, as it is: no directory, no configuration
		// file, no compression mode check (reading is layout-blind).
		if info, err := o.fs.Stat(root); errors.Is(err, os.ErrNotExist) || (err == nil && !info.IsDir()) {
			return nil, fmt.Errorf("%w at %s (no %s directory)", ErrNoStore, dir, sessionsDir)
		} else if err != nil {
			return nil, fmt.Errorf("sessionstore: open root read-only: %w", err)
		}
		return newStore(dir, o), nil
	}
	if _, err := o.fs.Stat(root); errors.Is(err, os.ErrNotExist) {
		parent := filepath.Dir(dir)
		if _, err := o.fs.Stat(parent); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w at %s, and its parent directory %s does not exist to create one in", ErrNoStore, dir, parent)
		}
		if err := o.fs.MkdirAll(root, o.DirMode); err != nil {
			return nil, fmt.Errorf("sessionstore: create root: %w", err)
		}
		if err := o.fs.SyncDir(dir); err != nil {
			return nil, fmt.Errorf("sessionstore: create root: %w", err)
		}
		if err := o.fs.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, fmt.Errorf("sessionstore: create root: %w", err)
		}
	} else if err != nil {
		return nil, fmt.Errorf("sessionstore: open root: %w", err)
	}
	if err := checkRootConfig(o.fs, dir, o); err != nil {
		return nil, err
	}
	return newStore(dir, o), nil
}

// newStore returns a Store of the root dir with no session open.
func newStore(dir string, o Options) *Store {
	return &Store{dir: dir, opts: o, sessions: map[uuid.UUID]*handle{}, closing: map[uuid.UUID]chan struct{}{},
		selections: map[uuid.UUID]uuid.UUID{}, failures: map[uuid.UUID]failure{}, repaired: map[uuid.UUID][]string{}, hub: newHub()}
}

// rootConfigName is the file that records how a root stores its chunks;
// part of the format.
const rootConfigName = "sessionstore.json"

// rootFormat is the version of sessionstore.json itself (each session
// records its own format in session.json).
const rootFormat = 1

type rootConfig struct {
	Format      int    `json:"format"`
	Compression string `json:"compression"`
}

// checkRootConfig records the compression mode of a new root, and refuses
// to open an existing root in the other mode, or one whose
// sessionstore.json has a format this build does not know (a format
// member lost or changed reads as another format).
func checkRootConfig(fsys vfs.FS, dir string, o Options) error {
	path := filepath.Join(dir, rootConfigName)
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		b, err := json.Marshal(rootConfig{Format: rootFormat, Compression: o.Compression})
		if err != nil {
			return err
		}
		if err := replaceFile(fsys, dir, rootConfigName, append(b, '\n'), o.FileMode); err != nil {
			return fmt.Errorf("sessionstore: write %s: %w", path, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("sessionstore: read %s: %w", path, err)
	}
	var cfg rootConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return corruptf(path, 0, "%w", err)
	}
	if cfg.Format != rootFormat {
		return fmt.Errorf("%w: %s has format %d, this build reads %d", ErrUnsupportedFormat, path, cfg.Format, rootFormat)
	}
	if cfg.Compression != o.Compression {
		return fmt.Errorf("%w: %s was created with Compression %q; open it with Options.Compression = %q, or use another directory for %q (there is no conversion)",
			ErrCompressionMismatch, dir, cfg.Compression, cfg.Compression, o.Compression)
	}
	return nil
}

// Dir returns the store's root directory.
func (s *Store) Dir() string { return s.dir }

// Close waits for calls in flight, then closes every open session: it
// checkpoints HEAD and the metadata's UpdatedAt (both atomically replaced
// and synced), closes the files and releases the locks; then it ends every
// subscription (their channels close, Err reports ErrClosed). Events
// appended before Close were already durable; Close adds no durability to
// them.
// Close is idempotent; every other method returns ErrClosed afterwards.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	var errs []error
	for id, h := range s.sessions {
		if err := s.closeHandle(h); err != nil {
			errs = append(errs, fmt.Errorf("sessionstore: close session %s: %w", id, err))
		}
	}
	clear(s.sessions)
	s.hub.close()
	return errors.Join(errs...)
}

func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.closeMu.RLock()
	if s.closed.Load() {
		s.closeMu.RUnlock()
		return ErrClosed
	}
	return nil
}

func (s *Store) end() { s.closeMu.RUnlock() }

// withHandle runs fn with the session's open handle and its mutex held,
// inside a call that Close waits for.
func (s *Store) withHandle(ctx context.Context, id uuid.UUID, fn func(h *handle) error) error {
	return s.useHandle(ctx, id, s.acquire, fn)
}

// useHandle is withHandle with the handle from get: acquire, or
// acquireLazy for fn that can use a session without its index loaded.
func (s *Store) useHandle(ctx context.Context, id uuid.UUID, get func(context.Context, uuid.UUID, *Meta) (*handle, error), fn func(h *handle) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	h, err := get(ctx, id, nil)
	if err != nil {
		return err
	}
	defer s.release(h)
	if err := fn(h); err != nil {
		return err
	}
	if h.damaged != nil {
		return h.damaged
	}
	return nil
}

// acquire returns the open handle of a session with its mutex held,
// opening (and, when create is non-nil, creating) the session first, with
// its index loaded. The caller must pass the handle to release when done.
func (s *Store) acquire(ctx context.Context, id uuid.UUID, create *Meta) (*handle, error) {
	return s.acquireReady(ctx, id, create, s.materialize)
}

// acquireReady is acquireLazy, then ready(h) with the mutex held; on its
// error the handle is released.
func (s *Store) acquireReady(ctx context.Context, id uuid.UUID, create *Meta, ready func(h *handle) error) (*handle, error) {
	h, err := s.acquireLazy(ctx, id, create)
	if err != nil {
		return nil, err
	}
	if err := ready(h); err != nil {
		s.release(h)
		return nil, err
	}
	return h, nil
}

// acquireLazy is acquire for a caller that can use a session opened
// without its index (h.lazy set; see lazy.go).
func (s *Store) acquireLazy(ctx context.Context, id uuid.UUID, create *Meta) (*handle, error) {
	for {
		s.mu.Lock()
		if done, ok := s.closing[id]; ok {
			// Being closed to make room: wait, then open it again.
			s.mu.Unlock()
			select {
			case <-done:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if h, ok := s.sessions[id]; ok {
			s.ref(h)
			s.mu.Unlock()
			select {
			case <-h.ready:
			case <-ctx.Done():
				// Another call is still opening the session (perhaps
				// waiting for its lock): give up without waiting for it.
				s.mu.Lock()
				victims := s.unref(h)
				s.mu.Unlock()
				s.closeVictims(victims)
				return nil, ctx.Err()
			}
			h.mu.Lock()
			if h.openErr != nil {
				err := h.openErr
				s.release(h)
				return nil, err
			}
			if create != nil {
				s.release(h)
				return nil, fmt.Errorf("%w: session %s", ErrExists, id)
			}
			if h.readOnly {
				if err := s.refresh(h); err != nil {
					s.release(h)
					return nil, err
				}
			}
			return h, nil
		}
		h := &handle{id: id, dir: s.sessionDir(id), refs: 1, ready: make(chan struct{})}
		h.synced = sync.NewCond(&h.mu)
		h.mu.Lock() // held while opening, so other callers wait for the result
		s.sessions[id] = h
		victims := s.evictLocked()
		s.mu.Unlock()
		s.closeVictims(victims)
		if err := s.openNew(ctx, h, create); err != nil {
			return nil, err
		}
		return h, nil
	}
}

// openNew opens a new handle registered in s.sessions, with h.mu held. On
// failure (also on a panic) it removes the handle, so that other callers
// do not wait on a handle that never opened.
func (s *Store) openNew(ctx context.Context, h *handle, create *Meta) error {
	opened := false
	defer close(h.ready)
	defer func() {
		if !opened {
			if h.openErr == nil {
				h.openErr = fmt.Errorf("sessionstore: opening session %s failed", h.id)
			}
			s.mu.Lock()
			if s.sessions[h.id] == h {
				delete(s.sessions, h.id)
			}
			s.mu.Unlock()
			s.release(h)
		}
	}()
	if err := s.openHandle(ctx, h, create); err != nil {
		h.openErr = err
		return err
	}
	s.mu.Lock()
	if sel, ok := s.selections[h.id]; ok {
		h.pending = sel
		delete(s.selections, h.id)
	}
	if r, ok := s.repaired[h.id]; ok {
		h.repaired = append(r, h.repaired...)
		delete(s.repaired, h.id)
	}
	s.mu.Unlock()
	opened = true
	return nil
}

// failure is what the Store keeps of a session closed after a failed
// sync: the error, and the newest acknowledged event.
type failure struct {
	err  error
	head uuid.UUID
}

// ref counts a call using h, with s.mu held.
func (s *Store) ref(h *handle) {
	h.refs++
	if h.elem != nil {
		s.idle.Remove(h.elem)
		h.elem = nil
	}
}

// unref drops a call's reference to h, with s.mu held, making h idle when
// it was the last.
func (s *Store) unref(h *handle) []*handle {
	h.refs--
	if h.refs == 0 && s.sessions[h.id] == h {
		h.elem = s.idle.PushFront(h)
		return s.evictLocked()
	}
	return nil
}

// release unlocks a handle acquire returned. When no call uses it any
// more it becomes idle, and idle handles beyond Options.MaxOpenSessions
// are closed, least recently used first.
func (s *Store) release(h *handle) {
	h.mu.Unlock()
	s.releaseUnlocked(h)
}

// releaseUnlocked is release for a caller that has unlocked h.mu already.
func (s *Store) releaseUnlocked(h *handle) {
	s.mu.Lock()
	victims := s.unref(h)
	s.mu.Unlock()
	s.closeVictims(victims)
}

// evictLocked picks idle handles to close while more than MaxOpenSessions
// are open, removing them from s.sessions and marking them closing, with
// s.mu held.
func (s *Store) evictLocked() []*handle {
	var out []*handle
	for len(s.sessions) > s.opts.MaxOpenSessions && s.idle.Len() > 0 {
		h := s.idle.Remove(s.idle.Back()).(*handle)
		h.elem = nil
		delete(s.sessions, h.id)
		s.closing[h.id] = make(chan struct{})
		out = append(out, h)
	}
	return out
}

// closeVictims closes handles evictLocked picked. A failure is logged: the
// events were durable already, and what failed (a HEAD or metadata
// checkpoint) is rebuilt when the session is next opened.
func (s *Store) closeVictims(victims []*handle) {
	for _, h := range victims {
		h.mu.Lock()
		pending, repaired := h.pending, h.repaired
		failed := failure{err: h.failed, head: h.head()}
		h.mu.Unlock()
		if err := s.closeHandle(h); err != nil {
			s.opts.Logger.Warn("sessionstore: closing an idle session failed", "session", h.id, "err", err)
		}
		s.mu.Lock()
		if pending != uuid.Nil {
			s.selections[h.id] = pending
		}
		if failed.err != nil {
			s.failures[h.id] = failed
		}
		if len(repaired) > 0 {
			s.repaired[h.id] = append(s.repaired[h.id], repaired...)
		}
		close(s.closing[h.id])
		delete(s.closing, h.id)
		s.mu.Unlock()
	}
}

// openHandle locks a session, creates its files if asked, and reconciles
// them.
func (s *Store) openHandle(ctx context.Context, h *handle, create *Meta) error {
	fsys := s.opts.fs
	if create != nil {
		if err := fsys.MkdirAll(h.dir, s.opts.DirMode); err != nil {
			return err
		}
	} else if _, err := fsys.Stat(filepath.Join(h.dir, metaFile)); err != nil && noSession(fsys, h.dir, err) {
		return fmt.Errorf("%w: session %s", ErrNotFound, h.id)
	} else if err != nil {
		return err
	}
	if s.opts.ReadOnly {
		return s.openReadOnly(h)
	}
	lockPath := filepath.Join(h.dir, lockName)
	lk, err := s.lockSession(ctx, lockPath)
	if err != nil {
		return err
	}
	h.lock = lk
	ok := false
	defer func() {
		if !ok {
			h.closeFiles()
		}
	}()
	if create != nil {
		if err := s.createFiles(h.dir, *create); err != nil {
			return err
		}
		h.meta, h.format = create.clone(), formatVersion
	} else {
		if h.meta, h.format, err = readMeta(fsys, h.dir, h.id); err != nil {
			return err
		}
	}
	s.mu.Lock()
	failed, wasFailed := s.failures[h.id]
	delete(s.failures, h.id)
	s.mu.Unlock()
	if wasFailed {
		h.failed = failed.err
		if err := s.loadFailed(h, failed.head); err != nil {
			s.mu.Lock()
			s.failures[h.id] = failed
			s.mu.Unlock()
			return err
		}
		ok = true
		return nil
	}
	if create == nil && s.openLazy(h) {
		ok = true
		return nil
	}
	if err := s.reconcile(h); err != nil {
		return err
	}
	ok = true
	return nil
}

// lockSession takes a session's lock file, waiting for it while ctx
// allows when Options.WaitForLock is set.
func (s *Store) lockSession(ctx context.Context, path string) (io.Closer, error) {
	const poll = 5 * time.Millisecond
	for {
		lk, err := s.opts.fs.Lock(path, s.opts.FileMode)
		if !errors.Is(err, vfs.ErrLocked) {
			return lk, err
		}
		locked := &fs.PathError{Op: "lock", Path: path, Err: ErrLocked}
		if !s.opts.WaitForLock {
			return nil, locked
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (waited until: %w)", locked, ctx.Err())
		case <-time.After(poll):
		}
	}
}

func (h *handle) closeFiles() error {
	var errs []error
	if h.index != nil {
		errs = append(errs, h.index.close())
		h.index = nil
	}
	errs = append(errs, h.chunks.close())
	if h.lock != nil {
		errs = append(errs, h.lock.Close())
		h.lock = nil
	}
	return errors.Join(errs...)
}

// closeHandle checkpoints HEAD and metadata and closes the session.
func (s *Store) closeHandle(h *handle) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.openErr != nil {
		return nil
	}
	h.chunks.awaitSealing()
	var errs []error
	if h.failed == nil && h.damaged == nil && !h.readOnly {
		h.chunks.trim()
		if head := h.head(); head != h.headOnDisk {
			if err := writeHead(s.opts.fs, h.dir, head, s.opts.FileMode); err != nil {
				errs = append(errs, err)
			} else {
				h.headOnDisk = head
			}
		}
		if h.appended {
			m := h.meta.clone()
			newest, ok := h.lazyHead()
			if !ok {
				newest = h.entries[len(h.entries)-1]
			}
			if last := time.Unix(0, newest.Time).UTC(); last.After(m.UpdatedAt) {
				m.UpdatedAt = last
				errs = append(errs, h.writeMeta(m))
			}
		}
	}
	errs = append(errs, h.closeFiles())
	h.openErr = ErrClosed
	return errors.Join(errs...)
}

// dropHandle closes h, with h.mu held, after a failure that leaves it
// unusable (err), and removes it from the Store, so that the next call
// opens the session again from its files. Calls waiting on h get err. A
// pending Branch selection is kept for the next handle.
func (s *Store) dropHandle(h *handle, err error) {
	h.closeFiles()
	h.openErr = fmt.Errorf("sessionstore: session %s closed, to be opened again by the next call: %w", h.id, err)
	s.mu.Lock()
	if s.sessions[h.id] == h {
		delete(s.sessions, h.id)
	}
	if h.pending != uuid.Nil {
		s.selections[h.id] = h.pending
	}
	s.mu.Unlock()
}

// writable reports why the session refuses writes, if it does.
func (h *handle) writable() error {
	if h.openErr != nil {
		return h.openErr
	}
	if h.readOnly {
		return ErrReadOnly
	}
	if h.damaged != nil {
		return h.damaged
	}
	if h.failed != nil {
		return fmt.Errorf("%w: %w", ErrSessionFailed, h.failed)
	}
	return nil
}

// truncate drops the entries from the first one drop matches onwards,
// leaving the valid prefix of a damaged session.
func (h *handle) truncate(drop func(e *entry) bool) {
	for i := range h.entries {
		if drop(&h.entries[i]) {
			h.truncateTo(i)
			return
		}
	}
}

// truncateTo drops every entry from position n on.
func (h *handle) truncateTo(n int) {
	for _, e := range h.entries[n:] {
		delete(h.byID, e.ID)
	}
	h.entries = h.entries[:n]
}

// writeMeta atomically replaces session.json and updates the cached copy.
func (h *handle) writeMeta(m Meta) error {
	b, err := encodeMeta(m, h.format)
	if err != nil {
		return err
	}
	if err := replaceFile(h.chunks.fsys, h.dir, metaFile, b, h.chunks.perm); err != nil {
		// The old or the new file is whole on disk, but which one a crash
		// would keep is unknown after a failed sync: stop writing.
		h.failed = err
		return fmt.Errorf("sessionstore: write %s: %w", filepath.Join(h.dir, metaFile), err)
	}
	h.meta = m
	return nil
}

// head is the newest event in log order: every Append moves HEAD to the
// event it writes and nothing else moves it.
func (h *handle) head() uuid.UUID {
	if h.lazy != nil {
		return h.lazy.ID
	}
	if len(h.entries) == 0 {
		return uuid.Nil
	}
	return h.entries[len(h.entries)-1].ID
}

// lookup returns the entry of an event.
func (h *handle) lookup(id uuid.UUID) (*entry, error) {
	i, ok := h.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: event %s in session %s", ErrNotFound, id, h.id)
	}
	return &h.entries[i], nil
}

// add records a new entry in memory after checking it against the tree:
// its parent must be known and its id new.
func (h *handle) add(e *entry) error {
	if len(h.entries) == cap(h.entries) {
		// Double the array: append grows a large slice by a quarter, so
		// a session of n events would copy about 5n entries into fresh
		// memory over its life, under the session's mutex; doubling copies
		// about 2n.
		grown := make([]entry, len(h.entries), max(2*cap(h.entries), 256))
		copy(grown, h.entries)
		h.entries = grown
	}
	h.entries = append(h.entries, *e)
	return h.adopt(1)
}

// adopt indexes the last k entries, which the caller placed at the end of
// h.entries, checking each one's id is new and its parent known. On an
// error h.entries ends before the entry that failed.
func (h *handle) adopt(k int) error {
	for n := len(h.entries) - k; n < len(h.entries); n++ {
		e := &h.entries[n]
		// In log order a parent usually is the previous event: skip the map.
		if e.ParentID != uuid.Nil && (n == 0 || h.entries[n-1].ID != e.ParentID) {
			if _, ok := h.byID[e.ParentID]; !ok {
				h.entries = h.entries[:n]
				return fmt.Errorf("event %s names unknown parent %s", e.ID, e.ParentID)
			}
		}
		h.byID[e.ID] = int32(n)
		if len(h.byID) != n+1 {
			// The id was already there: put the first occurrence back.
			id := e.ID
			h.entries = h.entries[:n]
			for i := range h.entries {
				if h.entries[i].ID == id {
					h.byID[id] = int32(i)
					return fmt.Errorf("duplicate event id %s (first at position %d)", id, i)
				}
			}
		}
	}
	return nil
}

// Append adds an event to the session as a child of HEAD, or of the event
// chosen by Branch (then BranchFrom is set to it), and makes it HEAD. It
// assigns the event's ID (UUIDv7), ParentID, BranchFrom and Time, and
// returns the stored event.
//
// Durability: when Append returns nil the event's record is on stable
// storage (written and fdatasync'ed in its chunk) and survives a crash or
// power loss. The index line and HEAD are derived from the chunk and are
// restored by reconciliation if a crash loses them. When Append returns an
// error the event was not acknowledged; after a crash it is either absent or,
// if its bytes reached the disk whole, present.
//
// Errors: ErrInvalidEvent (with ErrRecordTooLarge) for bad input, and then
// nothing is written; ErrNotFound; ErrLocked; ErrSessionFailed after an
// earlier I/O failure; ErrClosed; *CorruptionError if the session could not
// be opened.
func (s *Store) Append(ctx context.Context, session uuid.UUID, ev Event) (Event, error) {
	return s.appendOne(ctx, session, ev, nil)
}

// appendOne appends one event; see appendEvents for check.
func (s *Store) appendOne(ctx context.Context, session uuid.UUID, ev Event, check func(h *handle) error) (Event, error) {
	out, err := s.appendEvents(ctx, session, []Event{ev}, check)
	if err != nil {
		return Event{}, err
	}
	return out[0], nil
}

// Load returns the active context of a session: the events from the root
// to HEAD, oldest first, with their records resolved, stopping at the
// newest compaction on the path (see compaction.go: the compaction, the
// events it keeps verbatim, then everything after it). It reads only
// those events' records, located through the in-memory index, or, in a
// session opened without its index (see Opening in the package doc),
// through the parent location each chunk line holds. An empty session
// loads as an empty slice. FullPath walks past compactions.
//
// Errors: ErrNotFound, ErrLocked, ErrClosed, *CorruptionError for a record
// that does not match its index entry.
func (s *Store) Load(ctx context.Context, session uuid.UUID) ([]Event, error) {
	return s.loadPath(ctx, session, uuid.Nil, true, true)
}

// LoadPath is Load for the branch ending at leaf: the context a model
// would see with leaf as HEAD, compaction boundaries applied.
//
// Errors: as Load; ErrNotFound when leaf is not in the session.
func (s *Store) LoadPath(ctx context.Context, session, leaf uuid.UUID) ([]Event, error) {
	return s.loadPath(ctx, session, leaf, false, true)
}

// FullPath returns every event from the root to leaf (HEAD when leaf is
// uuid.Nil), oldest first, with records, walking past compaction
// boundaries: the whole history, for audit and export.
//
// Errors: as LoadPath.
func (s *Store) FullPath(ctx context.Context, session, leaf uuid.UUID) ([]Event, error) {
	return s.loadPath(ctx, session, leaf, leaf == uuid.Nil, false)
}

func (s *Store) loadPath(ctx context.Context, session, leaf uuid.UUID, fromHead, boundaries bool) ([]Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	h, err := s.acquireLazy(ctx, session, nil)
	if err != nil {
		return nil, err
	}
	if head, ok := h.lazyHead(); ok && fromHead {
		// Without the index: follow the lines' parent locations, unless
		// the path needs the index after all.
		s.release(h)
		out, err := s.loadLazy(ctx, h.dir, head, boundaries)
		if !errors.Is(err, errNeedIndex) {
			return out, err
		}
		if h, err = s.acquire(ctx, session, nil); err != nil {
			return nil, err
		}
	} else if err := s.materialize(h); err != nil {
		s.release(h)
		return nil, err
	}
	if fromHead {
		leaf = h.head()
	} else if leaf == uuid.Nil {
		s.release(h)
		return nil, fmt.Errorf("%w: the nil uuid is not an event", ErrNotFound)
	}
	var at []int32 // positions in h.entries, newest first
	if leaf != uuid.Nil {
		i, ok := h.byID[leaf]
		if !ok {
			s.release(h)
			return nil, fmt.Errorf("%w: event %s in session %s", ErrNotFound, leaf, session)
		}
		for {
			at = append(at, i)
			e := &h.entries[i]
			if e.ParentID == uuid.Nil || (boundaries && kinds[e.Kind] == KindCompaction) {
				break
			}
			i = h.byID[e.ParentID]
		}
	}
	path := make([]entry, len(at)) // oldest first, which is also file order
	for k, i := range at {
		path[len(at)-1-k] = h.entries[i]
	}
	damaged := h.damaged
	s.release(h)
	// Records never move once written, so they are read without the lock.
	r := newChunkReader(s.opts.fs, filepath.Join(h.dir, chunksDir))
	defer r.close()
	if boundaries && len(path) > 0 && kinds[path[0].Kind] == KindCompaction {
		kept, err := s.keptTail(h, r, &path[0])
		if err != nil {
			return nil, err
		}
		path = slices.Concat(path[:1], kept, path[1:])
	}
	out, err := s.readEntries(ctx, h, r, path)
	if err != nil {
		return nil, err
	}
	if damaged != nil {
		return out, damaged
	}
	return out, nil
}

// readEntries reads the events of path with their records resolved,
// reading each run of adjacent records with one read.
func (s *Store) readEntries(ctx context.Context, h *handle, r *chunkReader, path []entry) ([]Event, error) {
	out := make([]Event, len(path))
	var total int64
	for i := range path {
		total += int64(path[i].Loc.Length)
	}
	r.reserve(min(total, maxReadRun))
	for k := 0; k < len(path); {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		end := k + 1
		for end < len(path) && path[end].Loc.Chunk == path[k].Loc.Chunk &&
			path[end].Loc.Offset == path[end-1].Loc.end() && path[end].Loc.end()-path[k].Loc.Offset <= maxReadRun {
			end++
		}
		if err := r.fill(path[k].Loc.Chunk, path[k].Loc.Offset, path[end-1].Loc.end()-path[k].Loc.Offset); err != nil {
			return nil, err
		}
		for ; k < end; k++ {
			ev, err := readEntry(r, &path[k])
			if err != nil {
				return nil, err
			}
			out[k] = ev
		}
	}
	blobs := s.startBlobReads(ctx, h.dir)
	defer blobs.abandon()
	for k := range path {
		if path[k].Blob {
			blobs.add(k, path[k])
		}
	}
	if err := blobs.wait(out, func(k int) (int, bool) { return k, true }); err != nil {
		return nil, err
	}
	return out, nil
}

// forEach calls f(w, i) once for each i in [0, n), on up to workers
// goroutines (the caller's among them), and returns when all calls have.
// w, from 0 to workers-1, numbers the goroutine, for state each keeps.
func forEach(n, workers int, f func(w, i int)) {
	workers = max(min(workers, n), 1)
	var next atomic.Int64
	work := func(w int) {
		for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
			f(w, i)
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { work(w) })
	}
	work(0)
	wg.Wait()
}

// maxReadRun bounds the bytes Load reads with one call.
const maxReadRun = 1 << 20

// readEntry reads an event and checks it against its index entry. A blob
// record is left unresolved.
func readEntry(r *chunkReader, e *entry) (Event, error) {
	h, p, err := r.read(e.Loc)
	if err != nil {
		return Event{}, err
	}
	if h != e.header || p.Size != e.Size || p.Blob != e.Blob || p.Digest != e.Digest {
		return Event{}, corruptf(r.path(e.Loc.Chunk), e.Loc.Offset, "record %s does not match its index entry %s", h.ID, e.ID)
	}
	var ev Event
	h.fill(&ev)
	p.fill(&ev)
	return ev, nil
}

// Event returns one event with its record, or, for a record stored as a
// blob, with Record nil and Digest and Size set: Resolve reads the blob.
//
// It reads and checks that event's line only, so damage elsewhere in the
// session does not make it fail: in a damaged session (see the package
// doc) every event of the valid prefix (the events before the damage)
// reads without error. An event the valid prefix does not hold, intact
// or not, is reported with the *CorruptionError that ends the prefix
// (matching ErrNotFound too); Verify reads past the damage.
//
// Errors: ErrNotFound, ErrLocked, ErrClosed, *CorruptionError for a record
// that does not match its index entry, or for an event past the damage.
func (s *Store) Event(ctx context.Context, session, id uuid.UUID) (Event, error) {
	if err := s.begin(ctx); err != nil {
		return Event{}, err
	}
	defer s.end()
	h, err := s.acquire(ctx, session, nil)
	if err != nil {
		return Event{}, err
	}
	e, err := h.lookup(id)
	if err != nil {
		damaged := h.damaged
		s.release(h)
		if damaged != nil {
			return Event{}, fmt.Errorf("%w (the session is damaged: only the events before the damage are readable): %w", err, damaged)
		}
		return Event{}, err
	}
	ent := *e
	s.release(h)
	r := newChunkReader(s.opts.fs, filepath.Join(h.dir, chunksDir))
	defer r.close()
	return readEntry(r, &ent)
}

// replaceFile atomically replaces dir/name with data: write a temporary
// file, sync it, close it, rename it over the target, sync the directory.
// When it returns nil the new content is durable; a crash at any point
// leaves the old content or the new, whole, plus perhaps the temporary
// file, which reconciliation removes.
func replaceFile(fsys vfs.FS, dir, name string, data []byte, perm os.FileMode) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return fsys.SyncDir(dir)
}
