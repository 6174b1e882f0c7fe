package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/journal"
)

// Group commit
//
// Appends to one session are serialized by the session's mutex, but the
// write and the fdatasync that make them durable are shared. An append
// encodes its lines under the mutex, queues them at the end of the active
// chunk (in memory: chunkwriter.Writer.Enqueue) and records them as in flight;
// then it waits until they are durable. The records queued since the last
// sync started form a commit group; the first append to join it leads it:
// once the sync before has ended, it takes the queue, notes how many
// records are in flight, releases the mutex, writes the queue with one
// write and syncs the chunk, takes the mutex back and publishes those
// records (moves them into the in-memory index, writes their index lines,
// tells subscribers), then wakes the group's other callers, which wait on
// the group without taking the mutex again, and the next group's leader.
// Appends that arrive during a sync join the next group, so N concurrent
// appenders share a few writes and syncs instead of costing N, and the
// work under the mutex per append is only encoding. When the last sync
// covered more than one
// append, a new leader first yields the mutex for up to gatherWait, so that
// appends whose callers were just woken queue their records before the
// sync starts instead of waiting for the next; it stops early when most
// have come and the rest lag behind (gatherLag).
//
// In-flight records are invisible to readers (Load, Tree, Event, Head see
// only published events), but the next append takes the newest in-flight
// record as its parent, so appends still chain in the order they took the
// mutex. A failed write is cut back (chunkwriter.Writer.WriteAt): every record in
// flight is dropped, since the later ones name dropped parents, and each
// of their appends fails with the error, while the session goes on from
// its last published event. A failed sync leaves the in-flight records'
// state unknown: they are dropped from memory, every waiter gets the
// error, and the session refuses writes (ErrSessionFailed), as after any
// failed sync. Reopening the session finds each of them absent, or
// present whole.
//
// Starting a new chunk first settles the old one: it waits for a running
// sync, writes and syncs whatever is still in flight and publishes it, all
// under the mutex, so a chunk is always fully durable before it is sealed
// or closed.

// groupCommit is the state of a session's commit pipeline, guarded by the
// session's mutex.
type groupCommit struct {
	inflight  []inflightRecord // written, not yet known durable
	syncing   bool             // a commit leader is syncing the active chunk
	lastBatch int              // records the last commit sync covered
	open      *commitGroup     // the in-flight records no sync has started on
	synced    *sync.Cond       // on the session's mu: in-flight records were published or failed
	waiting   int              // calls in waitSync, which tests wait for
	settled   int              // settles that synced records in flight, which tests count
}

// waitSync waits, with the session's mutex released, until the records in
// flight are published or failed (synced).
func (p *groupCommit) waitSync() {
	p.waiting++
	p.synced.Wait()
	p.waiting--
}

// inflightRecord is a record written to the active chunk and not yet
// known to be durable.
type inflightRecord struct {
	entry entry
	event Event // as returned to the caller, for subscribers
}

// gatherWait bounds how long a commit leader yields the mutex before a
// sync when the previous sync covered more than one append, so that
// appends on their way write first and share the sync. A lone writer never
// waits.
const gatherWait = 200 * time.Microsecond

// gatherLag ends a gathering early: once half the records it waits for
// have come, a pause this long between two means the rest lag behind.
const gatherLag = 15 * time.Microsecond

// A commitGroup is the in-flight records one write and sync make durable:
// those queued since the last sync started (h.pipe.open). The first append to
// join a group leads it: once no other sync runs, it writes the queue,
// syncs and publishes the group. The others wait for done without taking
// the session's mutex again, so that the end of a sync wakes only the
// callers it made durable, plus the leader of the next group.
type commitGroup struct {
	records int           // records in the group
	lead    chan struct{} // closed once no sync runs before this group's
	done    chan struct{} // closed when the records are published, or failed
	err     error         // why they failed; read after done
	led     bool          // the first to join leads; set in commit
}

// join adds n records just queued to the open group, starting one if none
// is open, with h.mu held.
func (h *openSession) join(n int) *commitGroup {
	g := h.pipe.open
	if g == nil {
		g = &commitGroup{lead: make(chan struct{}), done: make(chan struct{})}
		h.pipe.open = g
		if !h.pipe.syncing {
			close(g.lead)
		}
	}
	g.records += n
	return g
}

// finish ends group g with err (nil when its records are published).
func (h *openSession) finish(g *commitGroup, err error) {
	if h.pipe.open == g {
		h.pipe.open = nil
	}
	g.err = err
	close(g.done)
}

// closed reports whether c is closed.
func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// commit waits until the records of group g, which the caller joined with
// h.mu held, are published (durable), leading the group's write and sync
// if the caller joined it first. It returns with h.mu unlocked.
func (h *openSession) commit(g *commitGroup) error {
	if g.led {
		h.mu.Unlock()
		<-g.done
		return g.err
	}
	g.led = true
	defer h.mu.Unlock()
	for !closed(g.lead) && !closed(g.done) {
		h.mu.Unlock()
		select {
		case <-g.lead:
		case <-g.done:
		}
		h.mu.Lock()
	}
	if closed(g.done) { // settled with a new chunk's start, or failed
		return g.err
	}
	if err := h.failedErr(); err != nil {
		// The session stopped writing while g waited: its records (and
		// those of the open group behind it) were never written. Drop
		// them, so that nothing names them as the next parent.
		h.pipe.inflight = h.pipe.inflight[:0]
		h.chunks.DropQueue()
		h.failGroups(g, err)
		return err
	}
	h.gather(g)
	if closed(g.done) { // settled meanwhile
		return g.err
	}
	// Every record in flight is in g: older groups are finished.
	h.pipe.syncing, h.pipe.open = true, nil
	n, f := len(h.pipe.inflight), h.chunks.Active()
	q, off := h.chunks.TakeQueue()
	h.pipe.lastBatch = n
	h.mu.Unlock()
	werr, serr, viaJournal := h.writeGroup(f, q, off)
	h.mu.Lock()
	if viaJournal {
		h.chunks.MarkUnsynced()
		h.journaled = true
	}
	h.chunks.GiveBack(q)
	h.pipe.syncing = false
	if next := h.pipe.open; next != nil {
		close(next.lead)
	}
	switch {
	case werr != nil:
		h.writeFailed(g, off, werr)
	case serr != nil:
		h.syncFailed(g, serr)
	default:
		h.publish(n)
		h.finish(g, nil)
	}
	return g.err
}

// writeGroup writes a commit group's bytes q at off, the end of the data
// of f, the active chunk, and makes them durable: through the store's
// journal (journal.go) when it has one and f is a local chunk, else by
// writing f and syncing it. The caller is the group's leader (or settles,
// with h.mu held); h.jmark is the leader's.
//
// Through the journal: room is made in f first (a failure there is a
// write error, cut back, as writing f directly), JOURNAL is made to name
// the journal if it does not yet, then the journal commits the bytes
// (sharing its write and sync with the other sessions committing) and,
// once they are durable there, they are written into f, without a sync:
// nothing of a group reaches the chunk, where readers look, before it is
// durable. viaJournal reports that the bytes went so: f holds them, not
// yet durably. A failure of the journal's commit or of the write into f
// after it leaves the group's state unknown (serr).
func (h *openSession) writeGroup(f activeChunk, q []byte, off int64) (werr, serr error, viaJournal bool) {
	lc, local := f.(*localChunk)
	var w *journal.Writer
	if jr := h.opts.jr; jr != nil && local && len(q) > 0 && int64(len(q)) < jr.size/4 {
		w = jr.writer()
	}
	if w == nil {
		if werr = h.chunks.WriteAt(q, off); werr == nil {
			serr = f.Sync()
		}
		return werr, serr, false
	}
	if werr = lc.reserve(off, len(q)); werr != nil {
		return werr, nil, false
	}
	if h.jmark != w.Owner() {
		if err := journal.WriteMarker(h.opts.fs, h.dir, w.Owner(), h.opts.FileMode); err != nil {
			return nil, err, false
		}
		h.jmark = w.Owner()
	}
	path, err := h.opts.jr.rel(lc.Path())
	if err != nil {
		return err, nil, false
	}
	rec := []journal.Record{{Op: journal.OpWrite, Path: path, Offset: off, Data: q}}
	_, err = w.Commit(context.Background(), rec, func() error {
		return lc.Fill(q, off)
	})
	if errors.Is(err, journal.ErrApply) {
		// The group is durable in the journal and in part in f: cut it
		// out of f, make f durable without it and forget f's records,
		// so that neither a replay nor the bytes left in f bring it
		// back; the session then goes on from off, as after a failed
		// write (writeFailed). If that fails, its state is unknown.
		werr = fmt.Errorf("sessionstore: write %s: %w", lc.Path(), err)
		if cerr := h.cutJournaled(w, lc, path, off); cerr != nil {
			return nil, fmt.Errorf("%w (and cutting it back failed: %v)", werr, cerr), false
		}
		return werr, nil, false
	}
	if err != nil {
		return nil, fmt.Errorf("sessionstore: commit %s through the journal: %w", lc.Path(), err), false
	}
	return nil, nil, true
}

// cutJournaled cuts the chunk lc back to off after a failed write of a
// journaled group there, syncs it and commits a Forget of its path.
func (h *openSession) cutJournaled(w *journal.Writer, lc *localChunk, path string, off int64) error {
	if err := lc.Cut(off); err != nil {
		return err
	}
	if err := lc.Sync(); err != nil {
		return err
	}
	_, err := w.Forget(context.Background(), path)
	return err
}

// gather lets more appends join g before its leader syncs, with h.mu held
// (released while it yields). When the last sync covered more than one
// append, its callers are likely to append again at once: it yields, for
// gatherWait at most, until as many records as that sync covered are in
// the group besides the leader's. It stops early once most have come and
// the rest lag behind by gatherLag: they are held up (preempted, woken
// late) and the next sync covers them.
func (h *openSession) gather(g *commitGroup) {
	want := g.records + h.pipe.lastBatch - 1
	if h.pipe.lastBatch <= 1 || g.records >= want {
		return
	}
	start := time.Now()
	deadline, last, seen := start.Add(gatherWait), start, g.records
	for g.records < want && !closed(g.done) {
		h.mu.Unlock()
		runtime.Gosched()
		h.mu.Lock()
		now := time.Now()
		if g.records != seen {
			last, seen = now, g.records
		}
		if !now.Before(deadline) || (2*seen >= want && now.Sub(last) > gatherLag) {
			return
		}
	}
}

// settle makes every in-flight record durable and published, with h.mu
// held, so that the active chunk can be sealed or closed: it waits for a
// running sync and writes and syncs the rest itself without releasing the
// mutex.
func (h *openSession) settle() error {
	for h.pipe.syncing {
		h.pipe.waitSync()
	}
	if err := h.failedErr(); err != nil {
		return err
	}
	if len(h.pipe.inflight) == 0 {
		return nil
	}
	q, off := h.chunks.TakeQueue()
	f := h.chunks.Active()
	err, serr, viaJournal := h.writeGroup(f, q, off)
	h.chunks.GiveBack(q)
	if err != nil {
		return h.writeFailed(nil, off, err)
	}
	if serr != nil {
		return h.syncFailed(nil, serr)
	}
	if viaJournal {
		// Settling makes the chunk durable (it is to be sealed or
		// closed): a checkpoint of the chunk, not only of the journal.
		h.journaled = true
		if err := f.Sync(); err != nil {
			return h.syncFailed(nil, err)
		}
		h.chunks.MarkSynced()
	}
	h.pipe.settled++
	h.publish(len(h.pipe.inflight))
	if g := h.pipe.open; g != nil {
		h.finish(g, nil)
	}
	return nil
}

// writeFailed handles a failed write of the queued records of group g (nil
// from settle), which writeAt cut back to off: every record in flight is
// dropped (the later ones name dropped parents) and their appends fail,
// but the session goes on writing. A Branch selection a dropped record
// used is pending again (the newest, unless a newer one is pending): no
// event was appended, so where the next one goes has not changed. If even
// cutting back failed, the session stops writing.
func (h *openSession) writeFailed(g *commitGroup, off int64, err error) error {
	if errors.Is(err, errUnsynced) {
		return h.syncFailed(g, err)
	}
	for i := len(h.pipe.inflight) - 1; i >= 0 && h.pending == uuid.Nil; i-- {
		h.pending = h.pipe.inflight[i].event.BranchFrom
	}
	h.pipe.inflight = h.pipe.inflight[:0]
	h.chunks.CutBack(off)
	h.failGroups(g, err)
	return err
}

// syncFailed handles a failed write or sync of the active chunk, for group
// g (nil from settle): the in-flight records may or may not be on disk, so
// none is acknowledged and the session stops writing.
func (h *openSession) syncFailed(g *commitGroup, err error) error {
	failed := fmt.Errorf("%w: %w", err, errUnsynced)
	h.becomeFailed(failed)
	h.pipe.inflight = h.pipe.inflight[:0]
	h.chunks.DropQueue()
	h.failGroups(g, failed)
	h.opts.Logger.Error("sessionstore: session stops writing", "session", h.id, "err", failed)
	return failed
}

// failGroups finishes g (if not nil) and the open group with err, after
// their records were dropped, and wakes whoever waits for a sync.
func (h *openSession) failGroups(g *commitGroup, err error) {
	if g != nil {
		h.finish(g, err)
	}
	if o := h.pipe.open; o != nil {
		h.finish(o, err)
	}
	h.pipe.synced.Broadcast()
}

// publish moves the first n in-flight records, now durable, into the
// in-memory index, adds their index lines (index.File holds them and
// writes them in batches: see writeIndex), hands them to subscribers and
// wakes the waiters.
func (h *openSession) publish(n int) {
	defer h.pipe.synced.Broadcast()
	if n == 0 {
		return
	}
	done := h.pipe.inflight[:n]
	first := len(h.Entries)
	events := make([]Event, n)
	for i := range done {
		if err := h.Add(&done[i].entry); err != nil {
			// Unreachable unless memory was corrupted: ids and parents
			// were checked when the records were written.
			h.becomeFailed(err)
			return
		}
		events[i] = done[i].event
		h.lastWrite = max(h.lastWrite, done[i].entry.Time)
	}
	h.pipe.inflight = append(h.pipe.inflight[:0], h.pipe.inflight[n:]...)
	h.appended = true
	es := make([]*entry, n)
	for i := range es {
		es[i] = &h.Entries[first+i]
	}
	if err := h.index.Append(es...); err != nil {
		// The events are durable: acknowledge them. The index will be
		// rebuilt from the chunk on the next open; until then, stop
		// writing.
		h.becomeFailed(err)
		h.opts.Logger.Error("sessionstore: index write failed; session stops writing until reopened", "session", h.id, "err", err)
	}
	h.hub.settled(h.id, events)
}

// writeIndex writes the index lines h.index holds, with h.mu held: at a
// checkpoint of the session's files (a new chunk, Flush and the close
// write them too, through index.File's Sync and Close), and before Verify
// reads the files. Until then index.jsonl lags the chunk by up to
// index.HoldLines records, which every reader finds in the chunk past the
// index's end, as after a crash (the root package's doc.go). A failed
// write stops the session's writes, as in publish: the events are
// durable, and the next open rebuilds the lines.
func (h *openSession) writeIndex() {
	if h.index == nil {
		return
	}
	if err := h.index.Flush(); err != nil {
		h.becomeFailed(err)
		h.opts.Logger.Error("sessionstore: index write failed; session stops writing until reopened", "session", h.id, "err", err)
	}
}

// flush is Flush with h.mu held.
func (h *openSession) flush() error {
	if h.damage() != nil {
		return h.damage()
	}
	// A chunk being sealed in the background still has its lines in
	// index.jsonl, which the sealing rewrites when it ends. Settling may
	// wait for a sync, which releases the mutex, and an append may start a
	// new chunk meanwhile: look again until no sealing runs.
	for {
		h.chunks.AwaitSealing()
		if err := h.settle(); err != nil {
			return err
		}
		if !h.chunks.Sealing() {
			break
		}
	}
	// The waits released the mutex: another call may have closed the
	// session (a failed repair) or ended its appending without the index
	// (lazy again: index.jsonl closed, every line written).
	if err := h.writable(); err != nil {
		return err
	}
	// The chunk holds its records durably too, not only the journal: a
	// flushed session's files are whole by themselves.
	if err := h.chunks.Checkpoint(); err != nil {
		h.becomeFailed(err)
		return err
	}
	if h.index == nil {
		path := filepath.Join(h.dir, indexName)
		if err := syncFile(h.opts.fs, path); err != nil {
			h.becomeFailed(err)
			return fmt.Errorf("sessionstore: sync %s: %w", path, err)
		}
	} else if err := h.index.Sync(); err != nil {
		h.becomeFailed(err)
		return fmt.Errorf("sessionstore: sync %s: %w", h.index.Path(), err)
	}
	if head := h.head(); head != h.headOnDisk {
		if err := h.files.putHead(head); err != nil {
			h.becomeFailed(err)
			return err
		}
		h.headOnDisk = head
	}
	return h.writeUpdatedAt()
}
