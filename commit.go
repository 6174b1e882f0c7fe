package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/commit"
	"github.com/sessionstore/sessionstore/internal/journal"
)

// Group commit
//
// Appends to one session are serialized by the session's mutex, but the
// write and the fdatasync that make them durable are shared: the session's
// commit pipeline (internal/commit's Pipeline, h.pipe) groups the records
// queued since the last sync started and has the first append of each
// group write and sync them once for all (the package documentation
// describes it). An append encodes its lines under the mutex, queues them
// at the end of the active chunk (in memory: chunkwriter.Writer.Enqueue),
// adds its records to the pipeline and joins the open group (append.go:
// writeBatch); then it waits in Pipeline.Commit until they are durable.
// The session is the pipeline's Log (commitLog): writeGroup writes and
// syncs a group's bytes, through the store's journal or the chunk;
// publish moves durable records into the in-memory index, writes their
// index lines and tells subscribers.
//
// In-flight records are invisible to readers (Load, Tree, Event, Head see
// only published events), but the next append takes the newest in-flight
// record as its parent, so appends still chain in the order they took the
// mutex. A failed write is cut back (chunkwriter.Writer.WriteAt): every
// record in flight is dropped, since the later ones name dropped parents,
// and each of their appends fails with the error, while the session goes
// on from its last published event. A failed sync leaves the in-flight
// records' state unknown: they are dropped from memory, every waiter gets
// the error, and the session refuses writes (ErrSessionFailed), as after
// any failed sync. Reopening the session finds each of them absent, or
// present whole.
//
// Starting a new chunk first settles the old one (Pipeline.Settle): it
// waits for a running sync, writes and syncs whatever is still in flight
// and publishes it, all under the mutex, so a chunk is always fully
// durable before it is sealed or closed.

// inflightRecord is a record written to the active chunk and not yet
// known to be durable: the pipeline's record type.
type inflightRecord struct {
	entry entry
	event Event       // as returned to the caller, for subscribers
	use   *eventUsage // the usage its record reports (usage.go), nil for none
}

// commitPipeline is the session's group commit.
type commitPipeline = commit.Pipeline[inflightRecord]

// newCommitPipeline returns h's commit pipeline, on h's mutex and chunk
// writer, with h as its Log.
func newCommitPipeline(h *openSession) commitPipeline {
	return commit.New[inflightRecord](&h.mu, &h.chunks, (*commitLog)(h))
}

// commit waits until the records of group g, which the caller joined with
// h.mu held, are published (durable), leading the group's write and sync
// if the caller is its first to commit (Pipeline.Commit). It returns with
// h.mu unlocked.
func (h *openSession) commit(g *commit.Group) error { return h.pipe.Commit(g) }

// settle makes every in-flight record durable and published, with h.mu
// held, so that the active chunk can be sealed or closed: it waits for a
// running sync and writes and syncs the rest itself without releasing the
// mutex (Pipeline.Settle).
func (h *openSession) settle() error { return h.pipe.Settle() }

// commitLog is the open session as its commit pipeline's Log: the
// pipeline calls it with h.mu held, but for Write, which a group's leader
// calls without it.
type commitLog openSession

// Stopped is the error of an append refused because writes stopped.
func (l *commitLog) Stopped() error { return (*openSession)(l).failedErr() }

// Write writes and syncs a group's bytes (writeGroup).
func (l *commitLog) Write(c activeChunk, q []byte, off int64) (pending func() error, werr, serr error, journaled bool) {
	return (*openSession)(l).writeGroup(c, q, off)
}

// Journaled records that records went through the journal since the
// session's records there were last forgotten (closeFiles).
func (l *commitLog) Journaled() { l.journaled = true }

// Publish publishes durable records (publish).
func (l *commitLog) Publish(rs []inflightRecord) { (*openSession)(l).publish(rs) }

// Dropped gives a Branch selection a record dropped by a failed write
// used back: it is pending again (the newest, unless a newer one is
// pending), since no event was appended, so where the next one goes has
// not changed.
func (l *commitLog) Dropped(rs []inflightRecord) {
	for i := len(rs) - 1; i >= 0 && l.pending == uuid.Nil; i-- {
		l.pending = rs[i].event.BranchFrom
	}
}

// Stop stops the session's writes after a failed sync.
func (l *commitLog) Stop(err error) {
	h := (*openSession)(l)
	h.becomeFailed(err)
	h.opts.Logger.Error("sessionstore: session stops writing", "session", h.id, "err", err)
}

// journalMaxGroup bounds the commit groups that go through the journal:
// a larger group (a 64 KiB tool result) is written into its chunk and
// synced there. The journal shares one sync among the sessions that
// commit at once, which is what small records need; for a large group
// the bytes dominate the sync, and the journal would write them twice
// (into the journal, then into the chunk, synced again at a checkpoint).
// bench/ (tool64k, tool64k-8w, side by side): 1.33x and 2.1x the
// throughput of sending them through the journal.
const journalMaxGroup = 32 << 10

// writeGroup writes a commit group's bytes q at off, the end of the data
// of f, the active chunk, and makes them durable: through the store's
// journal (journal.go) when it has one ready, f is a local chunk and the
// group is small (storeJournal.commitWith), else by writing f and syncing
// it; for a remote session's chunk, by issuing the Create of the group's
// data log object, then syncing f while it is in flight: pending waits
// for the Create (remoteChunk.syncPending), and the next group may be
// written meanwhile. The caller is the commit pipeline
// (commitLog.Write): a group's leader, without h.mu, or Pipeline.Settle,
// with it held; h.jmark is the caller's.
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
func (h *openSession) writeGroup(f activeChunk, q []byte, off int64) (pending func() error, werr, serr error, viaJournal bool) {
	lc, local := f.(*localChunk)
	var w *journal.Writer
	if jr := h.opts.jr; jr != nil && local {
		w = jr.commitWith(len(q))
	}
	if w == nil {
		if werr = h.chunks.WriteAt(q, off); werr != nil {
			return nil, werr, nil, false
		}
		if rc, ok := f.(*remoteChunk); ok {
			// The local sync, then the log object's Create in flight.
			pending, serr = rc.syncPending()
			return pending, nil, serr, false
		}
		return nil, nil, f.Sync(), false
	}
	if werr = lc.reserve(off, len(q)); werr != nil {
		return nil, werr, nil, false
	}
	if h.jmark != w.Owner() {
		if err := journal.WriteMarker(h.opts.fs, h.dir, w.Owner(), h.opts.FileMode); err != nil {
			return nil, nil, err, false
		}
		h.jmark = w.Owner()
	}
	path, err := h.opts.jr.rel(lc.Path())
	if err != nil {
		return nil, err, nil, false
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
		// write (internal/commit). If that fails, its state is unknown.
		werr = fmt.Errorf("sessionstore: write %s: %w", lc.Path(), err)
		if cerr := h.cutJournaled(w, lc, path, off); cerr != nil {
			return nil, nil, fmt.Errorf("%w (and cutting it back failed: %v)", werr, cerr), false
		}
		return nil, werr, nil, false
	}
	if err != nil {
		return nil, nil, fmt.Errorf("sessionstore: commit %s through the journal: %w", lc.Path(), err), false
	}
	return nil, nil, nil, true
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

// publish moves done, the oldest in-flight records, now durable, into the
// in-memory index, adds their index lines (index.File holds them and
// writes them in batches: see writeIndex) and hands them to subscribers;
// the pipeline then drops them from the flight and wakes the waiters.
func (h *openSession) publish(done []inflightRecord) {
	n := len(done)
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
	h.appended = true
	h.addUsage(done)
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
	h.opts.searchDirty.note(h.id)
	h.settleDeltas(events)
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
