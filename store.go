package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/parallel"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
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
	// recovering are the sessions recoverTail is storing the
	// acknowledged events of.
	recovering sync.Map

	reg *registry       // the open sessions (registry.go)
	cat *storeCatalogue // the derived copy of every session.json (catalogue.go, internal/catalogue)

	hub *hub // live fan-out to subscribers (hub.go)

	deferred deferredSessions // created under Options.DeferCreate, not yet written (defer.go)

	keys         keyCache          // the data keys of sessions touched (encrypt.go)
	workspaces   workspaceCache    // the workspaces last computed (workspace.go)
	marked       sync.Map          // sessions whose workspace marker is written (workspace_append.go)
	keysDirMade  onceOK            // the keys directory made and synced
	sessionsSync durable.Coalescer // the sessions directory's syncs of concurrent Creates (session.go)

	forks forkLock // orders Fork and Delete (forklock.go)

	polls pollers // a follower's polls of the sessions it has subscribers for (follow.go)

	search *searchIndex // the store-wide search index (searchindex.go, internal/search)

	tails tailSet // the running Tails (tail.go)
}

// Open opens the store rooted at dir, creating it when dir holds none: dir
// itself may be created, but not its parent, so that a mistyped path fails
// instead of making a new, empty store. A read-only store (Options.ReadOnly)
// creates nothing, unless it has a Remote: a follower's directory is its
// cache, made as a writer's is (follow.go). A nil opts selects the defaults. Open does not open any
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
	o.hostFS = o.fs
	o.fs = storeFS(o.fs, dir) // no link followed, no FIFO opened below dir (durable.go)
	root := filepath.Join(dir, sessionsDir)
	if info, err := o.fs.Stat(dir); err == nil && !info.IsDir() {
		return nil, fmt.Errorf("%w at %s (not a directory)", ErrNoStore, dir)
	}
	if o.ReadOnly && o.Remote == nil {
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
	if o.Remote != nil && !o.ReadOnly { // a follower holds no lease (follow.go)
		if o.storeID, err = holderID(o.fs, dir, o.FileMode); err != nil {
			return nil, err
		}
	}
	// The journal this Store's sessions share (journal.go): made, and
	// what dead writers left in theirs recovered, on the first commit.
	o.dead = &journal.DeadLogs{}
	o.jr = newStoreJournal(dir, &o)
	s := newStore(dir, o)
	s.purgeTrash() // what a crash left of a Delete (delete.go)
	return s, nil
}

// newStore returns a Store of the root dir with no session open.
func newStore(dir string, o Options) *Store {
	if o.storeID == uuid.Nil {
		o.storeID = uuid.New() // names this Store's leases of remote sessions
	}
	if o.Remote != nil {
		o.fetch = newFetchFS(o.fs, o.Remote, o.RemoteTimeout)
		o.fs = o.fetch
	}
	o.searchDirty = &dirtySessions{}
	o.frames = zchunk.NewCache(o.ReadCacheBytes)
	s := &Store{dir: dir, opts: o, hub: newHub(), forks: forkLock{mu: make(chan struct{}, 1)}}
	s.search = &searchIndex{}
	if o.Remote != nil {
		s.opts.recoverTail = s.recoverTail
	}
	s.cat = newCatalogue(dir, &s.opts)
	s.reg = newRegistry(&s.opts, s.hub, s.sessionDir, s.cat)
	return s
}

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
	b, err := readFile(fsys, path, nil, maxRootConfig)
	if errors.Is(err, os.ErrNotExist) {
		b, err := json.Marshal(rootConfig{Format: rootFormat, Compression: o.Compression})
		if err != nil {
			return err
		}
		// A temporary name of its own: another process opening the new
		// root at once writes the same file, and a shared temporary name
		// would let the first rename take it from the other.
		tmp := fmt.Sprintf("%s.%s.tmp", rootConfigName, uuid.NewString())
		if err := durable.ReplaceFileAs(fsys, dir, rootConfigName, tmp, append(b, '\n'), o.FileMode); err != nil {
			return fmt.Errorf("sessionstore: write %s: %w", path, err)
		}
		// The root may be another process's, found before it synced the
		// root's name (its Open syncs before it writes this file, which
		// was missing): the root's entries are durable with the file
		// (ReplaceFile synced the root), its name with this sync.
		if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
			return fmt.Errorf("sessionstore: create root: %w", err)
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
		return fmt.Errorf("%w: %s was created with Compression %q; open it with Options.Compression = %q, or convert the root with ConvertCompression to %q",
			ErrCompressionMismatch, dir, cfg.Compression, cfg.Compression, o.Compression)
	}
	return nil
}

// Dir returns the store's root directory.
func (s *Store) Dir() string { return s.dir }

// CloseSession closes one session as Close closes each: it waits for the
// calls using it to end (while ctx allows), checkpoints HEAD and the
// metadata, closes its files and releases its lock, and with a Remote
// releases it in the object store, so that another Store, on any
// machine, opens it at once instead of waiting out Options.LeaseTime. A
// worker of a fleet calls it when it is done with a session for now. The
// next call that uses the session opens it again. A session this Store
// does not have open is left alone; the error is that of the close
// (the events were durable already), or ctx's.
func (s *Store) CloseSession(ctx context.Context, session uuid.UUID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	return s.reg.closeOne(ctx, session)
}

// Close waits for calls in flight, then closes every open session: it
// checkpoints HEAD and the metadata's UpdatedAt (both atomically replaced
// and synced), closes the files and releases the locks; then it ends every
// subscription (their channels close, Err reports ErrClosed). Events
// appended before Close were already durable; Close adds no durability to
// them.
// Close is idempotent; every other method returns ErrClosed afterwards.
func (s *Store) Close() error {
	s.polls.close() // before the calls in flight are waited for: a poll is one
	s.closeMu.Lock()
	if s.closed.Swap(true) {
		s.closeMu.Unlock()
		return nil
	}
	err := s.reg.closeAll()
	s.opts.frames.CloseFiles(true) // the sealed chunks kept open for reads
	if s.opts.jr != nil {
		// Every session closed has synced its chunks and forgotten its
		// records: the journal's last checkpoint finds nothing to do.
		err = errors.Join(err, s.opts.jr.close())
	}
	s.closeMu.Unlock()
	// The subscriptions end once no call can start: a SubscribeFrom's
	// replay, between two batches, then gets ErrClosed instead of
	// waiting for the lock this Close held.
	s.hub.close()
	s.tails.close()
	return err
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
func (s *Store) withHandle(ctx context.Context, id uuid.UUID, fn func(h *openSession) error) error {
	return s.useHandle(ctx, id, s.reg.acquire, fn)
}

// useHandle is withHandle with the handle from get: acquire, or
// acquireLazy for fn that can use a session without its index loaded.
func (s *Store) useHandle(ctx context.Context, id uuid.UUID, get func(context.Context, uuid.UUID, *Meta) (*openSession, error), fn func(h *openSession) error) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	h, err := get(ctx, id, nil)
	if err != nil {
		return err
	}
	defer s.reg.release(h)
	if err := fn(h); err != nil {
		return err
	}
	if h.damage() != nil {
		return h.damage()
	}
	return nil
}

// Append adds an event to the session as a child of HEAD, or of the event
// chosen by Branch (then BranchFrom is set to it), and makes it HEAD. It
// assigns the event's ID (UUIDv7), ParentID, BranchFrom and Time, and
// returns the stored event. An ID the caller set (a UUIDv7) is used
// instead and makes the append idempotent: see AppendWith.
//
// Durability: when Append returns nil the event's record is on stable
// storage (written and fdatasync'ed in its chunk) and survives a crash or
// power loss. The index line and HEAD are derived from the chunk and are
// restored by reconciliation if a crash loses them. When Append returns an
// error the event was not acknowledged; after a crash it is either absent or,
// if its bytes reached the disk whole, present.
//
// Errors: ErrInvalidEvent (with ErrRecordTooLarge) for bad input, and then
// nothing is written; ErrConflict, with nothing written, when the
// caller's ID is stored with other content; ErrNotFound; ErrLocked;
// ErrSessionFailed after an earlier I/O failure; ErrClosed;
// *CorruptionError if the session could not be opened.
func (s *Store) Append(ctx context.Context, session uuid.UUID, ev Event) (Event, error) {
	return s.appendOne(ctx, session, ev, nil)
}

// appendOne appends one event; see appendEvents for check.
func (s *Store) appendOne(ctx context.Context, session uuid.UUID, ev Event, check func(h *openSession) error) (Event, error) {
	out, err := s.appendEvents(ctx, session, []Event{ev}, AppendOptions{}, check)
	if err != nil {
		return Event{}, err
	}
	return out[0], nil
}

// AppendBatch appends events in order as one unit: the first is a child of
// HEAD (or of the event chosen by Branch), each next one a child of the one
// before, and the last becomes HEAD. Use it for an assistant message and
// the tool calls it makes. The batch is written with one write and made
// durable with one fdatasync (shared with concurrent appends), and it is
// never split between chunks: a batch that does not fit in the active
// chunk starts a new one, and a batch larger than Options.ChunkSize gets a
// chunk of its own.
//
// Durability: when AppendBatch returns nil, every event of the batch is on
// stable storage. After a crash during the call, a prefix of the batch
// may be present (each event whole), never a gap: an event is present only
// if all the events before it are. On an error nothing was acknowledged.
//
// Events may carry ids the caller chose, as for AppendWith: a batch
// stored already is returned as stored.
//
// Errors: as Append. ErrInvalidEvent for any bad event, and then nothing is
// written; ErrConflict as for AppendWith. An empty batch returns nil, nil.
func (s *Store) AppendBatch(ctx context.Context, session uuid.UUID, events ...Event) ([]Event, error) {
	if len(events) == 0 {
		return nil, nil
	}
	return s.appendEvents(ctx, session, events, AppendOptions{}, nil)
}

// appendEvents appends evs as one batch. check, if not nil, runs under the
// session's mutex right before the events are written (again after any
// wait that released the mutex); its error is returned and nothing is
// written. Caller-chosen ids and opts add the checks of retry.go before
// it; a batch already stored is returned as it is stored.
func (s *Store) appendEvents(ctx context.Context, session uuid.UUID, evs []Event, opts AppendOptions, check func(h *openSession) error) ([]Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	key, err := s.ownKey(ctx, session)
	if err != nil {
		return nil, err
	}
	batch := make([]pendingEvent, len(evs))
	for i, ev := range evs {
		kept := ev.Time
		if opts.KeepTime {
			if !kept.IsZero() && !storableTime(kept) {
				return nil, fmt.Errorf("%w: event %d: time %s is outside 1970 to 2262, which the store cannot hold", ErrInvalidEvent, i, kept.Format(eventline.TimeLayout))
			}
			ev.Time = time.Time{} // the check below is of the other fields
		}
		rec, err := prepareRecord(ev, s.opts.MaxRecordSize)
		if err != nil {
			if len(evs) > 1 {
				return nil, fmt.Errorf("event %d of the batch: %w", i, err)
			}
			return nil, err
		}
		ev.Time = kept
		batch[i] = s.pendingOf(ev, rec, key)
		batch[i].keepTime = opts.KeepTime
	}
	if err := s.materialize(ctx, session); err != nil { // a deferred session's files first
		return nil, err
	}
	get := s.reg.acquireAppend
	if check != nil {
		get = s.reg.acquire
	}
	if retry, byID, err := retryCheck(batch, opts, check); err != nil {
		return nil, err
	} else if retry != nil {
		check = retry
		if byID {
			get = s.reg.acquire
		}
	}
	h, err := get(ctx, session, nil)
	if err != nil {
		return nil, err
	}
	g, out, err := h.queue(ctx, batch, uuid.Nil, check)
	if err != nil {
		s.reg.release(h)
		return storedOrErr(err)
	}
	err = h.commit(g)
	s.reg.releaseUnlocked(h)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Flush is a barrier: it returns once every event appended to the session
// before the call is durable (each Append already waits for its own), and
// makes the derived files current: a chunk being sealed in the background
// is finished (and its lines leave index.jsonl), index.jsonl is synced and
// the HEAD file replaced if it lags, and session.json's UpdatedAt written
// if it lags the events appended (see Meta). After Flush, reopening the
// session after a crash has nothing to rebuild for the events appended so
// far.
//
// Errors: ErrNotFound, ErrLocked, ErrClosed, ErrReadOnly, ErrSessionFailed.
func (s *Store) Flush(ctx context.Context, session uuid.UUID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	h, err := s.reg.acquireAppend(ctx, session, nil)
	if err != nil {
		return err
	}
	defer s.reg.release(h)
	return h.flush()
}

// Load returns the active context of a session: the events from the root
// to the end of the active path, oldest first, with their records
// resolved, stopping at the
// newest compaction on the path (see compaction.go: the compaction, the
// events it keeps verbatim, then everything after it). It reads only
// those events' records, located through the in-memory index, or, in a
// session opened without its index (see Opening in the package doc),
// through the parent location each chunk line holds. An empty session
// loads as an empty slice. FullPath walks past compactions.
//
// The end of the active path is the event the next Append extends
// (NextParent): HEAD, or a pending Branch selection or lane switch. So
// the context Load returns is the one an appended answer continues:
// right after Branch(from), Load ends at from although HEAD has not moved
// yet; LoadPath(Head) gives the path to HEAD.
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

// FullPath returns every event from the root to leaf (with uuid.Nil, to
// the end of the active path, as Load), oldest first, with records, walking past compaction
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
	if fromHead && s.opts.fetch != nil {
		var p *headPrefetch
		ctx, p = withHeadPrefetch(ctx)
		defer p.wait()
	}
	key, err := s.ownKey(ctx, session)
	if err != nil {
		return nil, err
	}
	h, err := s.reg.acquireLazy(ctx, session, nil)
	if err != nil {
		return nil, err
	}
	if head, ok := h.lazyHead(); ok && fromHead && h.pending == uuid.Nil && !(h.opts.ReadOnly && h.hasLanesFile()) {
		// Without the index: follow the lines' parent locations, unless
		// the path needs the index after all.
		s.reg.release(h)
		out, err := s.loadLazy(ctx, key, h.dir, head, boundaries)
		if !errors.Is(err, errNeedIndex) {
			if oerr := s.openEvents(key, session, out); oerr != nil {
				return nil, oerr
			}
			return out, err
		}
		if h, err = s.reg.acquire(ctx, session, nil); err != nil {
			return nil, err
		}
	} else if err := h.materialize(); err != nil {
		s.reg.release(h)
		return nil, err
	}
	p, err := s.resolvePath(h, key, leaf, fromHead, boundaries)
	if err != nil {
		return nil, err
	}
	return s.readPath(ctx, p) // records opened by readRun
}

// resolvedPath is a path's index entries, taken from the session's index
// under its mutex (a snapshot: later appends are not on it), with what
// reading their records needs: Load reads them all at once (readPath),
// the streaming forms a batch at a time (seq.go).
type resolvedPath struct {
	h       *openSession
	pre     *forkPrefix // a fork's prefix (fork.go); nil for other sessions
	runs    []pathRun   // oldest first
	damaged error       // the session's damage, reported after its events
}

// pathRun is a run of a path's entries held by one session: the session
// itself (seg -1), or segment seg of a fork's prefix.
type pathRun struct {
	seg     int
	entries []entry
}

// resolvePath resolves the path to leaf (HEAD's with fromHead), with
// compaction boundaries or not, as Load, LoadPath and FullPath read it,
// from h, acquired with its index loaded, which it releases.
func (s *Store) resolvePath(h *openSession, key *sessionKey, leaf uuid.UUID, fromHead, boundaries bool) (*resolvedPath, error) {
	if fromHead {
		leaf = h.activeLeaf()
	} else if leaf == uuid.Nil {
		s.reg.release(h)
		return nil, fmt.Errorf("%w: the nil uuid is not an event", ErrNotFound)
	}
	if h.meta.ForkedFrom != nil {
		return s.resolveForkPath(h, leaf, boundaries) // fork.go
	}
	var at []int32 // positions in h.entries, newest first
	if leaf != uuid.Nil {
		i, ok := h.ByID[leaf]
		if !ok {
			s.reg.release(h)
			return nil, fmt.Errorf("%w: event %s in session %s", ErrNotFound, leaf, h.id)
		}
		for {
			at = append(at, i)
			e := &h.Entries[i]
			if e.ParentID == uuid.Nil || (boundaries && e.Kind == eventline.KindCompaction) {
				break
			}
			i = h.ByID[e.ParentID]
		}
	}
	path := make([]entry, len(at)) // oldest first, which is also file order
	for k, i := range at {
		path[len(at)-1-k] = h.Entries[i]
	}
	damaged := h.damage()
	s.reg.release(h)
	// Records never move once written, so they are read without the lock.
	if boundaries && len(path) > 0 && path[0].Kind == eventline.KindCompaction {
		r := h.files.chunkReader()
		kept, err := h.keptTail(r, &path[0], key)
		r.close()
		if err != nil {
			return nil, err
		}
		path = slices.Concat(path[:1], kept, path[1:])
	}
	return &resolvedPath{h: h, runs: []pathRun{{seg: -1, entries: path}}, damaged: damaged}, nil
}

// readPath reads the events of p with their records resolved.
func (s *Store) readPath(ctx context.Context, p *resolvedPath) ([]Event, error) {
	var out []Event
	for i, run := range p.runs {
		evs, err := s.readRun(ctx, p.h, p.pre, run.seg, run.entries)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			out = evs // most paths are one run: no copy
		} else {
			out = append(out, evs...)
		}
	}
	if out == nil {
		out = []Event{}
	}
	if p.damaged != nil {
		return out, p.damaged
	}
	return out, nil
}

// readEntries reads the events of path with their records resolved,
// reading each run of adjacent records with one read.
func (s *Store) readEntries(ctx context.Context, dir string, r *chunkReader, path []entry) ([]Event, error) {
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
			path[end].Loc.Offset == path[end-1].Loc.End() && path[end].Loc.End()-path[k].Loc.Offset <= maxReadRun {
			end++
		}
		if err := r.fill(path[k].Loc.Chunk, path[k].Loc.Offset, path[end-1].Loc.End()-path[k].Loc.Offset); err != nil {
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
	blobs := s.startBlobReads(ctx, dir)
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

// maxReadRun bounds the bytes Load reads with one call.
const maxReadRun = 1 << 20

// readEntry reads an event and checks it against its index entry. A blob
// record is left unresolved.
func readEntry(r *chunkReader, e *entry) (Event, error) {
	h, p, err := r.read(e.Loc)
	if err != nil {
		return Event{}, err
	}
	if h != e.Header || p.Size != e.Size || p.Blob != e.Blob || p.Digest != e.Digest {
		return Event{}, corruptf(r.path(e.Loc.Chunk), e.Loc.Offset, "record %s does not match its index entry %s", h.ID, e.ID)
	}
	var ev Event
	fillHeader(&ev, &h)
	fillPayload(&ev, p)
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
	h, err := s.reg.acquire(ctx, session, nil)
	if err != nil {
		return Event{}, err
	}
	e, err := h.lookup(id)
	if err != nil {
		if ev, found, ferr := s.forkEvent(ctx, h, id); found { // a fork's prefix (fork.go)
			return ev, ferr
		}
		damaged := h.damage()
		s.reg.release(h)
		if damaged != nil {
			return Event{}, fmt.Errorf("%w (the session is damaged: only the events before the damage are readable): %w", err, damaged)
		}
		return Event{}, err
	}
	ent := *e
	s.reg.release(h)
	r := h.files.chunkReader()
	defer r.close()
	ev, err := readEntry(r, &ent)
	if err != nil || ev.Record == nil {
		return ev, err
	}
	evs := []Event{ev}
	err = s.unsealEvents(ctx, session, evs)
	return evs[0], err
}

// forEach is parallel.ForEach (internal/parallel), under the engine's name.
func forEach(n, workers int, f func(w, i int)) { parallel.ForEach(n, workers, f) }
