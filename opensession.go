package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/chunkwriter"
	"github.com/sessionstore/sessionstore/internal/deltalog"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// An openSession is one session opened by a Store: its lock, its metadata,
// its in-memory index and its writers. The Store's registry (registry.go)
// finds it and counts the calls using it; every call works on it with mu
// held, and every field is guarded by mu.
//
// # States
//
// The session is always in exactly one state (the state field), and every
// change of state goes through one of the become methods in this file:
//
//	                        open (openSession.open)
//	 opening ─────────────────────────┬──────────────┬────────────┐
//	    │ a clean format 2 session    │ otherwise    │ a failure  │ corruption
//	    ▼                             ▼              ▼ kept by    ▼
//	  lazy ──── materialize ──────► indexed         the Store   damaged
//	    │  ▲                          ▲   │                       ▲
//	    │  │ endAppending             │   │ a failed sync,        │ found by
//	    ▼  │                          │   │ write or checkpoint   │ materialize
//	appending ── materialize ─────────┘   ▼                       │
//	    └───────── a failed sync ──────► failed ─── materialize ──┘
//
//	 any state ── Close, eviction, a failed repair, a failed open ──► closed
//
// What each state holds and allows:
//
//   - opening: the call that registered the session is opening it (with mu
//     held); others wait until its open ends (the registry's entry).
//     Nothing is allowed yet.
//   - lazy: opened without its index (lazy.go): tip is HEAD's entry and the
//     memIndex is empty. Load from HEAD, Head and appends (which move it to
//     appending) work as they are; every other call first loads the index
//     (materialize), which moves it to indexed, or damaged.
//   - appending: a writer appending without its index: the memIndex is
//     partial, from the HEAD the session was opened with on. Appends chain
//     onto it; anything else, a pending Branch selection and the start of a
//     new chunk load the index first (endAppending, then materialize).
//   - indexed: the whole index is in memory; every call is allowed (a
//     read-only store refuses writes with ErrReadOnly in every state).
//   - failed: a sync, a write the store could not cut back, or a checkpoint
//     failed (cause): nothing written since may be durable, so writes are
//     refused with ErrSessionFailed and reads see the acknowledged events.
//     The index may still be partial or absent (tip set); materialize loads
//     it as a reader would, repairing nothing (loadFailed). The failure
//     outlives a close to make room: the registry reopens the session
//     failed until the Store is reopened.
//   - damaged: reconciliation or a reader's analysis found corruption
//     (cause, a *CorruptionError): the valid prefix is readable, writes are
//     refused, and calls return the damage besides their result. A reader
//     leaves it when its next analysis finds the log whole (a writer's work
//     in progress); a writer only by reopening the Store after a repair.
//   - closed: the session's files are closed and cause says why: ErrClosed,
//     a failed open, or a failed repair after which the next call opens the
//     session again from its files (the registry forgets a closed session
//     when its last call ends). Every call gets cause.
//
// A read-only store's sessions (readonly.go) use the same states: they are
// never appending or failed, and a refresh may move them from damaged back
// to indexed.
type openSession struct {
	mu  sync.Mutex
	id  uuid.UUID
	dir string

	opts *Options // the Store's, read-only
	// rfs is what the session's log is read through: opts.fs, or for a
	// read-only session whose JOURNAL names a journal, that journal's
	// records laid over it (journal.Overlay).
	rfs vfs.FS
	hub *hub // where published events go (hub.go)

	state sessionState
	// cause is why the session is failed (the write error), damaged (a
	// *CorruptionError) or closed; nil in the other states.
	cause error
	// writeFailure is the failure that stopped writes: set on entering
	// failed, and kept when damage is found afterwards, so that a session
	// closed to make room reopens stopped (registry.go).
	writeFailure error

	lock   io.Closer
	meta   Meta
	format int // of the session's files (session.go: formatVersion)

	entry *regEntry // the registry's (registry.go): the calls using the session, the end of its open

	memIndex            // the events in memory: none (lazy), from HEAD on (appending), or all
	headEntry *entry    // HEAD's entry while the memIndex does not hold it (lazy; failed before its index loads)
	pending   uuid.UUID // parent chosen by Branch or by a lane switch or move, uuid.Nil if none
	lanes     *laneSet  // the lanes file (lanes.go); nil: none, the implicit lane
	lanesErr  error     // the damage of the lanes file, which lane calls return
	revision  Revision  // of the files when a read-only session last looked (readonly.go)
	// keyStamp is the stamp of an encrypted session's key record when a
	// read-only session last read its files: a Reencrypt changes it, and
	// the digests of blob records with it (readonly.go's refresh).
	keyStamp keyStamp
	repaired []string // repairs reconciliation made that Repair has not returned
	line     []byte   // reused encoding buffer

	chunks chunkwriter.Writer // internal/chunkwriter
	deltas *deltalog.Writer   // the durable delta stream (stream_durable.go); nil until first used
	index  *indexFile         // index.go
	pipe   commitPipeline     // commit.go: records in flight and the sync that carries them
	// writingBlobs counts the blobs of appends that have not written their
	// lines yet; GC keeps them.
	writingBlobs map[[32]byte]int
	files        durableFiles // where the session's durable facts go (durable.go)
	// The shared journal (journal.go): jmark is the owner the session's
	// JOURNAL durably names when it is this Store's journal ("" else),
	// read and written by the commit leader only; journaled says records
	// went through the journal since the session's chunks were last
	// synced and its records forgotten (closeFiles).
	jmark     string
	journaled bool
	watch     metaWatcher // told of each session.json write; nil for none

	// What the derived files hold, so that Close and Flush write only what
	// changed: the HEAD file's event, and whether events were appended
	// since the open (session.json's UpdatedAt lags).
	headOnDisk uuid.UUID
	appended   bool
	// lastWrite is the newest time (Unix nanoseconds) of the events
	// appended since the open, or found by the open's recovery newer than
	// session.json's UpdatedAt (a writer that did not close); 0 if none.
	// Meta and List report UpdatedAt as the later of it and session.json's
	// (updatedAt); Close and Flush write it to session.json.
	lastWrite int64

	// fork is the prefix a fork inherits (fork.go), resolved on first
	// use; nil for a session that is not a fork.
	fork *forkPrefix

	// usage is the session's token totals while known exactly (usage.go).
	usage sessionUsage
}

// sessionState is the state of an openSession; see openSession.
type sessionState uint8

const (
	stateOpening sessionState = iota
	stateLazy
	stateAppending
	stateIndexed
	stateFailed
	stateDamaged
	stateClosed
)

var stateNames = [...]string{"opening", "lazy", "appending", "indexed", "failed", "damaged", "closed"}

func (st sessionState) String() string {
	if int(st) < len(stateNames) {
		return stateNames[st]
	}
	return fmt.Sprintf("sessionState(%d)", st)
}

// newOpenSession returns a session in state opening, not yet registered.
func newOpenSession(id uuid.UUID, dir string, opts *Options, hb *hub) *openSession {
	h := &openSession{id: id, dir: dir, opts: opts, rfs: opts.fs, hub: hb}
	local := newLocalFiles(opts.fs, dir, opts.FileMode, opts.DirMode, opts.ChunkSize, opts.Logger.With("session", id), opts.frames)
	h.files = local
	if opts.Remote != nil {
		h.files = newRemoteFiles(local, opts, id)
	}
	h.pipe = newCommitPipeline(h)
	return h
}

// The transitions. Each one is the only way into its state.

// becomeLazy makes an opening, reading or appending session lazy, with
// HEAD's entry tip and no index in memory. A failed session appending
// without its index stays failed, its partial index dropped the same way.
func (h *openSession) becomeLazy(tip entry) {
	h.mustBeIn("becomeLazy", stateOpening, stateLazy, stateAppending, stateFailed)
	h.memIndex, h.headEntry = memIndex{}, &tip
	if h.state != stateFailed {
		h.state = stateLazy
	}
}

// becomeAppending makes a lazy writer append without its index: the
// memIndex starts with HEAD's entry.
func (h *openSession) becomeAppending() {
	h.mustBeIn("becomeAppending", stateLazy)
	head := *h.headEntry
	h.memIndex = memIndex{Entries: append(make([]entry, 0, 256), head), ByID: map[uuid.UUID]int32{head.ID: 0}, Partial: true}
	h.headEntry, h.state = nil, stateAppending
}

// becomeIndexed records that the whole index x is in memory.
func (h *openSession) becomeIndexed(x memIndex) {
	h.mustBeIn("becomeIndexed", stateOpening, stateLazy, stateIndexed, stateDamaged)
	h.memIndex, h.headEntry, h.cause, h.state = x, nil, nil, stateIndexed
}

// becomeFailed stops writes after err. A damaged or closed session stays
// as it is (it refuses writes already), keeping err as the write failure.
// The memIndex and tip are left as they are: loadFailed loads the rest.
func (h *openSession) becomeFailed(err error) {
	if h.writeFailure == nil {
		h.writeFailure = err
	}
	h.stopRenewal()
	switch h.state {
	case stateDamaged, stateClosed, stateFailed:
		return
	}
	h.cause, h.state = err, stateFailed
}

// becomeFailedIndexed makes a session whose writes stopped (writeFailure)
// failed with the whole index x: loadFailed.
func (h *openSession) becomeFailedIndexed(x memIndex) {
	h.mustBeIn("becomeFailedIndexed", stateOpening, stateFailed)
	h.memIndex, h.headEntry, h.cause, h.state = x, nil, h.writeFailure, stateFailed
}

// becomeDamaged records corruption: x holds the valid prefix.
func (h *openSession) becomeDamaged(x memIndex, d *CorruptionError) {
	h.mustBeIn("becomeDamaged", stateOpening, stateLazy, stateIndexed, stateFailed, stateDamaged)
	h.memIndex, h.headEntry, h.cause, h.state = x, nil, d, stateDamaged
	h.stopRenewal()
}

// stopRenewal ends the lease renewal of a remote session that writes no
// more (failed, damaged): its lease then runs out LeaseTime after its last
// write or renewal, and another Store, which reads the object store's
// log, may take the session over, as it could a holder that died.
func (h *openSession) stopRenewal() {
	if rf, ok := h.files.(*remoteFiles); ok {
		rf.stopRenewal()
	}
}

// becomeClosed closes the session's files and makes every later call get
// err, returning the error of closing the files. It is idempotent.
func (h *openSession) becomeClosed(err error) error {
	if h.state == stateClosed {
		return nil
	}
	cerr := h.closeFiles()
	h.cause, h.state = err, stateClosed
	return cerr
}

// mustBeIn panics unless h is in one of the states: a transition from
// another state is a bug in the package.
func (h *openSession) mustBeIn(op string, states ...sessionState) {
	for _, st := range states {
		if h.state == st {
			return
		}
	}
	panic(fmt.Sprintf("sessionstore: %s in state %s (session %s)", op, h.state, h.id))
}

// What the states allow.

// usable reports why no call may use the session, if none may.
func (h *openSession) usable() error {
	if h.state == stateClosed {
		return h.cause
	}
	return nil
}

// damage is the corruption a damaged session was found with, else nil.
func (h *openSession) damage() error {
	if h.state == stateDamaged {
		return h.cause
	}
	return nil
}

// writable reports why the session refuses writes, if it does.
func (h *openSession) writable() error {
	switch {
	case h.state == stateClosed:
		return h.cause
	case h.opts.ReadOnly:
		return ErrReadOnly
	case h.state == stateDamaged:
		return h.cause
	case h.state == stateFailed:
		return fmt.Errorf("%w: %w", ErrSessionFailed, h.cause)
	}
	return nil
}

// failedErr is the error of a call refused because writes stopped, or nil.
func (h *openSession) failedErr() error {
	if h.writeFailure == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrSessionFailed, h.writeFailure)
}

// lazyHead returns HEAD's entry when the session has no whole index in
// memory: opened without it, or appending without it.
func (h *openSession) lazyHead() (entry, bool) {
	switch {
	case h.headEntry != nil:
		return *h.headEntry, true
	case h.Partial:
		return h.Entries[len(h.Entries)-1], true
	}
	return entry{}, false
}

// head is the newest event in log order: every Append moves HEAD to the
// event it writes and nothing else moves it.
func (h *openSession) head() uuid.UUID {
	if h.headEntry != nil {
		return h.headEntry.ID
	}
	if e, ok := h.Last(); ok {
		return e.ID
	}
	if f := h.meta.ForkedFrom; f != nil {
		return f.Event // a fork with no events of its own (fork.go)
	}
	return uuid.Nil
}

// lookup returns the entry of an event.
func (h *openSession) lookup(id uuid.UUID) (*entry, error) {
	i, ok := h.ByID[id]
	if !ok {
		return nil, fmt.Errorf("%w: event %s in session %s", ErrNotFound, id, h.id)
	}
	return &h.Entries[i], nil
}

// open opens a session registered in state opening, with h.mu held:
// locks it, creates its files if create is not nil, and reads them
// (reconciling them for a writer). prior is the failure the Store kept of
// an earlier open of the session in this Store (nil if none): the session
// then opens failed (loadFailed). On an error the session's files are
// closed and h stays opening; the registry closes it.
func (h *openSession) open(ctx context.Context, lockSession func(string) (io.Closer, error), create *Meta, prior *failure) error {
	fsys := h.opts.fs
	if h.opts.ReadOnly {
		if rf, ok := h.files.(*remoteFiles); ok {
			// A follower: its cache first holds what the log holds.
			lk, err := rf.follow(ctx, lockSession)
			if err != nil {
				return err
			}
			h.lock = lk
		}
		return h.openReader()
	}
	lk, err := lockSession(filepath.Join(h.dir, lockName))
	if err != nil {
		if create == nil && errors.Is(err, os.ErrNotExist) {
			if _, serr := fsys.Stat(filepath.Join(h.dir, metaFile)); serr != nil && noSession(fsys, h.dir, serr) {
				// Deleted (Delete) since the caller found it.
				return fmt.Errorf("%w: session %s", ErrNotFound, h.id)
			}
		}
		return err
	}
	h.lock = lk
	ok := false
	defer func() {
		if !ok {
			h.closeFiles()
		}
	}()
	if _, remote := h.files.(*remoteFiles); !remote && create == nil {
		// A dead writer's journal may hold acknowledged records the
		// chunks lack: they go in first (journal.go).
		root := filepath.Dir(filepath.Dir(h.dir))
		if h.jmark, err = takeOver(ctx, fsys, root, h.dir, h.opts.jr.current(), h.opts.FileMode, h.opts.dead); err != nil {
			return err
		}
	}

	if rf, ok := h.files.(*remoteFiles); ok {
		// The object store decides first: whether the session exists,
		// and who holds it (remote.go).
		if create != nil {
			b, merr := encodeMeta(*create, formatVersion)
			if merr != nil {
				return merr
			}
			err = rf.create(ctx, b)
		} else {
			err = rf.acquire(ctx, h.opts.WaitForLock)
		}
		if err != nil {
			return err
		}
	}
	if create != nil {
		if err := createSessionFiles(fsys, h.dir, *create, h.opts); err != nil {
			return err
		}
		h.meta, h.format = create.clone(), formatVersion
	} else if h.meta, h.format, err = h.files.readMeta(h.id); err != nil {
		return err
	}
	if create == nil {
		if _, err := h.prefix(); err != nil {
			return err
		}
	}
	h.chunks = h.newChunkWriter()
	switch {
	case prior != nil:
		h.writeFailure = prior.err
		err = h.loadFailed(prior.head)
	case create == nil && h.openLazy():
	default:
		err = h.reconcile()
	}
	if err == nil {
		err = h.openLanes()
	}
	ok = err == nil
	return err
}

// materialize loads the whole index into memory if it is not, with h.mu
// held: a lazy writer reconciles (which may repair what it finds: see
// recovery.go), a reader analyzes, a failed session loads it repairing
// nothing. On an error the session stays as it was, so a later call tries
// again, unless a repair failed after changing files: then the session
// closes (the files changed under its lazy state) and the next call opens
// it again.
func (h *openSession) materialize() error {
	if h.Partial {
		if err := h.endAppending(); err != nil {
			return err
		}
	}
	// endAppending may have waited, releasing the mutex: another call may
	// have closed the session meanwhile.
	if err := h.usable(); err != nil {
		return err
	}
	if h.headEntry == nil {
		return nil
	}
	switch {
	case h.opts.ReadOnly:
		return h.reload()
	case h.state == stateFailed:
		return h.loadFailed(h.headEntry.ID)
	}
	err := h.reconcile()
	if errors.Is(err, errRepairFailed) {
		h.becomeClosed(fmt.Errorf("sessionstore: session %s closed, to be opened again by the next call: %w", h.id, err))
	}
	return err
}

// reconcile analyzes a session's files (analyze), applies the repairs the
// plan names (applyRepairs), then opens index.jsonl and the newest chunk
// for appending, with h.mu held: the session is then indexed, or damaged
// when the analysis found corruption (nothing is changed on disk then).
// On an error h is unchanged but for files it opened, which it closes; an
// error after a repair changed files is marked errRepairFailed.
func (h *openSession) reconcile() (err error) {
	fsys := h.opts.fs
	log := h.opts.Logger.With("session", h.id)
	p, err := analyze(fsys, h.dir, false, h.outside())
	if err != nil {
		return err
	}
	if p.corrupt != nil {
		log.Error("sessionstore: session is damaged; its valid prefix is readable and writes are refused", "path", p.corrupt.Path, "offset", p.corrupt.Offset, "err", p.corrupt.Err, "valid_events", len(p.index.Entries))
		h.becomeDamaged(p.index, p.corrupt)
		return nil
	}
	repairs := p.repairs()
	defer func() {
		if err != nil && len(repairs) > 0 {
			err = fmt.Errorf("%w: %w", errRepairFailed, err)
		}
	}()
	if p.lostErr != nil {
		log.Error("sessionstore: reconcile: acknowledged events lost; cutting the damaged end of the log", "path", p.lostErr.Path, "offset", p.lostErr.Offset, "err", p.lostErr.Err)
	}
	for _, r := range repairs {
		log.Warn("sessionstore: reconcile: " + r)
	}
	indexSize, err := applyRepairs(fsys, h.dir, p, h.opts.FileMode)
	if err != nil {
		return err
	}
	ix, err := index.OpenFile(fsys, filepath.Join(h.dir, indexName), indexSize, h.opts.FileMode)
	if err != nil {
		return err
	}
	chunks := h.newChunkWriter()
	if chunks.Compressing() {
		for i, n := range p.chunks[:max(len(p.chunks)-1, 0)] {
			if !p.sealed[i] {
				chunks.AddUnsealed(n)
			}
		}
	}
	if n := len(p.chunks); n > 0 && p.newestSealed {
		chunks.SetNext(p.chunks[n-1] + 1) // the next append starts a new chunk
	} else if n > 0 {
		if err := chunks.OpenActive(p.chunks[n-1], p.activeSize); err != nil {
			ix.Close()
			return err
		}
	}
	if err := h.chunks.Close(); err != nil {
		// The journal's bytes of the chunk it had open are not known
		// durable in it: the session is not taken further.
		ix.Close()
		chunks.Close()
		return err
	}
	h.index, h.chunks = ix, chunks
	h.becomeIndexed(p.index)
	h.headOnDisk = h.head()
	var last uuid.UUID
	if e, ok := p.index.Last(); ok {
		last = e.ID
	}
	h.initUsage(last)
	if e, ok := p.index.Last(); ok && e.Time > h.meta.UpdatedAt.UnixNano() {
		// A writer appended and did not close (a crash): its events are
		// newer than session.json says; Close and Flush record them. A
		// session that appended without its index before loading it
		// knows its newest append already, which may be later than its
		// last event's time (AppendOptions.KeepTime).
		h.lastWrite, h.appended = max(h.lastWrite, e.Time), true
	}
	h.repaired = append(h.repaired, repairs...) // made: Repair reports them
	return nil
}

// newChunkWriter returns the session's chunk writer, with no file open.
// The sealer embeds the session's entries of a full chunk and, after a
// sealing, has index.jsonl rewritten without them: both run with the
// session's mutex held (chunkwriter.Config.Mu).
func (h *openSession) newChunkWriter() chunkwriter.Writer {
	log := h.opts.Logger.With("session", h.id)
	return chunkwriter.New(chunkwriter.Config{Files: writerFiles{h.files}, Dir: filepath.Join(h.dir, chunksDir), MaxSize: h.opts.ChunkSize,
		Compress: h.opts.Compression == CompressionZstd, Log: log,
		Mu: &h.mu,
		Embed: func(n uint32) []entry {
			es := index.ChunkEntries(h.Entries, n)
			if h.meta.Encrypted {
				// A copy: the sealer reads it without the mutex, and
				// fillPreviews (tree.go) may give an encrypted session's
				// entries their previews meanwhile.
				es = slices.Clone(es)
			}
			return es
		},
		Resealed: func() {
			if h.index == nil {
				// Closed while the chunk was sealed: index.jsonl keeps
				// the sealed chunk's lines, which the next open drops.
				return
			}
			var keep []entry
			for i := range h.Entries {
				if h.chunks.Plain(h.Entries[i].Loc.Chunk) {
					keep = append(keep, h.Entries[i])
				}
			}
			if err := h.index.Reset(keep); err != nil {
				h.becomeFailed(err)
				log.Error("sessionstore: index write failed; session stops writing until reopened", "err", err)
			}
		}})
}

// closeFiles closes the session's files and releases its lock.
func (h *openSession) closeFiles() error {
	var errs []error
	if h.deltas != nil {
		errs = append(errs, h.deltas.Close())
		h.deltas = nil
	}
	if h.index != nil {
		errs = append(errs, h.index.Close())
		h.index = nil
	}
	if h.journaled {
		errs = append(errs, h.forgetJournal())
	}
	errs = append(errs, h.chunks.Close())
	// A remote session's lease ends (remote.go): with a clean release when
	// every acknowledged event is in the files and nothing failed.
	errs = append(errs, h.files.release(h.writeFailure == nil && h.state != stateDamaged && h.state != stateOpening))
	if h.lock != nil {
		errs = append(errs, h.lock.Close())
		h.lock = nil
	}
	return errors.Join(errs...)
}

// forgetJournal is the session's checkpoint before its lock is
// released: the active chunk's bytes the journal holds are synced, a
// Forget of the session's records is committed and JOURNAL removed, so
// that no replay of
// this Store's journal writes into the session's files once another
// writer may have changed them (journal.go). When the sync fails the
// records stay in the journal, for a replay after a crash.
func (h *openSession) forgetJournal() error {
	if err := h.chunks.Checkpoint(); err != nil {
		return err
	}
	w := h.opts.jr.writerIfAny()
	if w == nil {
		return nil
	}
	prefix, err := h.opts.jr.sessionPrefix(h.dir)
	if err != nil {
		return err
	}
	if _, err := w.Forget(context.Background(), prefix); err != nil {
		return fmt.Errorf("sessionstore: forget session %s in the journal: %w", h.id, err)
	}
	h.journaled = false
	// No journal holds the session's records now: JOURNAL goes, without
	// a sync (a crash that brings it back names records forgotten).
	if err := h.opts.fs.Remove(filepath.Join(h.dir, markerName)); err == nil || errors.Is(err, fs.ErrNotExist) {
		h.jmark = ""
	}
	return nil
}

// close checkpoints HEAD and metadata and closes the session: Close, and
// the registry making room.
func (h *openSession) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == stateClosed || h.state == stateOpening {
		return nil
	}
	h.chunks.AwaitSealing()
	var errs []error
	if h.writable() == nil {
		h.chunks.Trim()
		// Sealing may load the index first, which can find the session
		// damaged or fail and close it: only a session still writable
		// then writes HEAD and session.json.
		errs = append(errs, h.sealOnClose())
	}
	if h.writable() == nil {
		if head := h.head(); head != h.headOnDisk {
			if err := h.files.putHead(head); err != nil {
				errs = append(errs, err)
			} else {
				h.headOnDisk = head
			}
		}
		errs = append(errs, h.writeUpdatedAt())
	}
	errs = append(errs, h.becomeClosed(ErrClosed))
	return errors.Join(errs...)
}

// sealOnCloseMin is the least data the active chunk must hold for Close
// to seal it (a quarter of Options.ChunkSize if that is less). A session
// closed and reopened after every few appends (the registry making room,
// a harness that runs once per turn) would otherwise leave a chunk per
// visit; below this size a chunk stays plain and the next visit appends
// to it.
const sealOnCloseMin = 16 << 10

// sealOnClose seals the active chunk when the session closes, with h.mu
// held and the session writable: a closed session is cold, and sealed
// chunks take about a fifth of the plain bytes (internal/zchunk). It
// seals through the seam as a full chunk's sealing does (sealChunk: the
// sealed file durable before the plain one goes), then rewrites
// index.jsonl without the chunk's lines, which the sealed file embeds.
// Nothing depends on it: a failure is logged and the chunk stays plain,
// appended to on the next open. The next append after it starts a new
// chunk; a lazy open finds HEAD as the sealed chunk's last record
// (recovery.SealedTip).
//
// The embedded index must cover every record of the chunk. A session
// appending without its index (partial) holds the entries of a chunk it
// created (fresh); one that went on appending to an older chunk loads its
// index first.
//
// It returns the error of loading the index, which may have left the
// session damaged or closed; a failure of the sealing itself is logged.
func (h *openSession) sealOnClose() error {
	w := &h.chunks
	if !w.Compressing() || h.opts.keepPlainOnClose || w.Active() == nil || w.Size() < min(sealOnCloseMin, w.MaxSize()/4) || w.Queued() {
		return nil
	}
	if h.Partial && !w.Fresh() {
		if err := h.materialize(); err != nil {
			h.opts.Logger.With("session", h.id).Warn("sessionstore: chunk stays uncompressed: loading the index to seal it failed", "err", err)
			return err
		}
		if h.writable() != nil || w.Active() == nil || w.Queued() {
			return nil
		}
	}
	w.SealActive()
	return nil
}

// metaWatcher hears of every write of session.json around it: the Store's
// catalogue (internal/catalogue), passed down to the session so that it calls
// up without knowing what listens. willWrite comes before the write (an
// error stops it), wrote after it is durable.
type metaWatcher interface {
	willWrite(id uuid.UUID, change func() (skip bool, err error)) error
	wrote(m Meta) error
}

// updatedAt is the session's UpdatedAt as Meta reports it: session.json's,
// or the newest time of an event appended since, if later. h.mu is held.
func (h *openSession) updatedAt() time.Time {
	if last := time.Unix(0, h.lastWrite).UTC(); h.lastWrite != 0 && last.After(h.meta.UpdatedAt) {
		return last
	}
	return h.meta.UpdatedAt
}

// writeUpdatedAt writes session.json if its UpdatedAt lags the events
// appended since the open, or its usage totals (Meta.Usage) lag the known
// ones (usage.go), for Close and Flush. h.mu is held and the
// session writable.
func (h *openSession) writeUpdatedAt() error {
	use, moved := h.recordedUsage()
	if !h.appended && !moved {
		return nil
	}
	if t := h.updatedAt(); !t.Equal(h.meta.UpdatedAt) || moved {
		m := h.meta.clone()
		m.UpdatedAt = t
		if moved {
			m.Usage = use
		}
		return h.writeMeta(m)
	}
	return nil
}

// writeMeta atomically replaces session.json and updates the cached copy,
// without m's usage totals if session.json would be too long with them.
// The watcher hears of it first; if it cannot, nothing is written.
func (h *openSession) writeMeta(m Meta) error {
	b, err := encodeMeta(m, h.format)
	if errors.Is(err, ErrInvalidMeta) && m.Usage != nil {
		// The usage totals do not fit beside the caller's metadata
		// (checkMeta leaves them out): none are recorded, and
		// Store.Usage reads them from the log. Until the totals move,
		// no write offers them again (recordedUsage).
		h.usage.unfit.events, h.usage.unfit.through = m.Usage.Events, m.Usage.Through
		m.Usage = nil
		b, err = encodeMeta(m, h.format)
	}
	if err != nil {
		return err
	}
	if h.watch != nil {
		if err := h.watch.willWrite(h.id, nil); err != nil {
			h.becomeFailed(err) // a failed sync is not retried
			return fmt.Errorf("sessionstore: write %s: catalogue: %w", filepath.Join(h.dir, metaFile), err)
		}
	}
	if err := h.files.putMeta(b); err != nil {
		// The old or the new file is whole on disk, but which one a crash
		// would keep is unknown after a failed sync: stop writing.
		h.becomeFailed(err)
		return fmt.Errorf("sessionstore: write %s: %w", filepath.Join(h.dir, metaFile), err)
	}
	h.meta = m
	if h.watch != nil {
		if err := h.watch.wrote(m); err != nil {
			h.becomeFailed(err)
			return fmt.Errorf("sessionstore: write %s: catalogue: %w", filepath.Join(h.dir, metaFile), err)
		}
	}
	return nil
}
