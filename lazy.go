package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/recovery"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Opening without the index
//
// Loading a session's index costs in proportion to the whole session: a
// session of 100,000 events holds 100,000 index lines and as many entries
// in memory. The commonest use of a session that is opened again is to
// resume it: Load the active path, then append. So a writable session of
// format 2 whose files need no repair opens with HEAD's index entry only
// (openLazy), and Load from HEAD follows the parent location each line
// holds (eventline.AppendEvent) instead of the in-memory index (loadLazy): it
// reads the lines of the path and nothing else. Appends need no index
// either (below). Any other call first loads the index exactly as a
// normal open would (materialize: reconcile), so every check and repair
// of the normal open runs before anything but the active path is read;
// and since the lazy open requires files that need no repair, nothing an
// append writes lands on a state reconciliation would have changed.
//
// Appending does not need the index either. The first append to a
// session opened without it (acquireAppend) opens the newest chunk at the
// end of HEAD's record and index.jsonl at its end, which the open checked,
// and keeps a partial index (h.partial) that starts at HEAD's entry:
// appends chain onto it, write their lines and index lines as always, and
// Load walks from the newest of them. What needs the whole index loads it
// then (materialize settles the records in flight, closes both files and
// reconciles, reading the new lines like any others): every other call, a
// pending Branch selection (restored after the session was closed to make
// room), and the start of a new chunk, whose sealing embeds the full
// chunk's index lines. The files an append writes are the same either
// way, and so is what a crash can lose. While the index is partial, the
// check that a new event id is not in the session yet covers the events
// from HEAD on only; ids come from UUIDv7, whose time and random bits make
// a repeat of an older id out of reach.
//
// A read-only store (readonly.go) opens a format 2 session the same way
// when its log is clean (openLazyReader), and its analysis takes the place
// of reconciliation when a call needs the index. It repairs nothing, so it
// ignores the HEAD file and temporary replaces, and takes HEAD from the
// log: the last index line, or the newest valid record after it (a
// writer's append in progress, or an index line a crash lost), so that a
// reader never shows an older HEAD than the log holds. Each refresh of a
// session still lazy makes the check again.
//
// The files need no repair when: every chunk from 0 on is there once, as
// a plain or a sealed file, with no temporary file of a sealing, a HEAD
// replace or a session.json replace; and either the newest chunk is
// plain, the last line of index.jsonl is valid and names HEAD, in the
// newest chunk, the record it locates matches it, and only zero bytes
// (free space) follow that record; or the newest chunk is sealed,
// index.jsonl is empty and the sealed chunk's last record is HEAD
// (recovery.SealedTip: the state a Close that sealed the active chunk leaves). These are the states a clean Close, or a crash after the
// last append's index line and HEAD were written, leaves. Anything else
// takes the normal open. What a lazy open does not check until the index
// is loaded: the index lines before the last one and the embedded indexes
// of sealed chunks. Load checks every line it reads (its CRC-32C, and that
// it is the event its child names as parent), so the active path is
// verified either way; damage elsewhere is found by the first call that
// loads the index, as it would have been by a normal open.

// openLazy opens a writable session of format 2 without its index when its
// files need no repair (see above), setting h.headEntry to HEAD's entry and
// reporting true. It reports false, with h unchanged, when the session
// needs the normal open, also when reading a file failed: the normal open
// reads it again and reports the error. It writes nothing.
func (h *openSession) openLazy() bool {
	if h.meta.ForkedFrom != nil {
		return false // a fork's first event names no parent location (fork.go)
	}
	fsys := h.rfs
	for _, name := range []string{headfile.Temp, metaFile + ".tmp"} {
		if _, err := fsys.Stat(filepath.Join(h.dir, name)); !errors.Is(err, os.ErrNotExist) {
			return false
		}
	}
	head, exists, err := readHeadFile(fsys, filepath.Join(h.dir, headfile.Name))
	if err != nil || !exists {
		return false
	}
	last, ok := lazyTip(fsys, h.dir, h.format, false)
	if !ok || last.ID != head {
		return false
	}
	h.becomeLazy(last)
	h.headOnDisk = head
	h.initUsage(last.ID)
	if last.Time > h.meta.UpdatedAt.UnixNano() {
		// HEAD was written and session.json's UpdatedAt was not (a crash
		// in a Flush or Close between the two): as reconcile, find the
		// last write, which Close and Flush record.
		h.lastWrite, h.appended = last.Time, true
	}
	return true
}

// openLazyReader is openLazy for a read-only store, which repairs nothing
// and so needs only the log to be clean: HEAD is the newest record, found
// from the last index line (recovery.Tip with follow), and the HEAD file, which a writer
// replaces only now and then, is not read.
func (h *openSession) openLazyReader() bool {
	rev, err := revisionOf(h.rfs, h.dir)
	if err != nil {
		return false
	}
	last, ok := lazyTip(h.rfs, h.dir, h.format, true)
	if !ok {
		return false
	}
	// The revision from before the check: if the log grew meanwhile, the
	// next call sees a change and looks again.
	h.becomeLazy(last)
	h.revision = rev
	return true
}

// appendMode readies h for an append, with h.mu held. A session with its
// index, or appending without it, stays as it is, and so does one of a
// read-only store (the append refuses it: writable). A lazy one starts
// appending without its index, unless a Branch selection is pending, whose
// location only the index holds; failing that, the index is loaded.
// Failing to open a file for appending, like everything else, is left to
// the normal open (materialize), which reports or repairs it.
//
// writeBatch calls it again after each wait that released the mutex: a
// call that failed to load the index meanwhile left the session lazy.
func (h *openSession) appendMode() error {
	if h.state != stateLazy || h.opts.ReadOnly {
		return nil
	}
	if h.pending == uuid.Nil && h.startAppending() == nil {
		return nil
	}
	return h.materialize()
}

// startAppending prepares a lazy session for appends, with h.mu held: it
// opens the newest chunk at the end of HEAD's record and index.jsonl at
// its end (as openLazy found them: nothing has written since) and makes
// HEAD's entry the first of a partial index (state appending). On an
// error h is unchanged.
func (h *openSession) startAppending() error {
	head := *h.headEntry
	indexPath := filepath.Join(h.dir, indexName)
	info, err := h.opts.fs.Stat(indexPath)
	if err != nil {
		return err
	}
	chunks := h.newChunkWriter()
	if _, err := h.opts.fs.Stat(filepath.Join(h.dir, chunksDir, chunkName(head.Loc.Chunk))); errors.Is(err, os.ErrNotExist) {
		// HEAD is in a sealed chunk (recovery.SealedTip): the first append starts
		// the next chunk.
		chunks.SetNext(head.Loc.Chunk + 1)
	} else if err := chunks.OpenActive(head.Loc.Chunk, head.Loc.End()); err != nil {
		return err
	}
	ix, err := index.OpenFile(h.opts.fs, indexPath, info.Size(), h.opts.FileMode)
	if err != nil {
		chunks.Close()
		return err
	}
	h.chunks, h.index = chunks, ix
	h.becomeAppending()
	return nil
}

// loadFailed loads the index of a session whose writes stopped after a
// failed sync, with h.mu held: when materialize loads it, or when the
// session reopens in the same Store after it was closed to make room
// (openSession.open). The records that sync carried are in the chunk file
// but were never acknowledged, and may not be on disk: reconciling would
// index them and name one in a durable HEAD, which a power loss would then
// leave naming a record that is gone. So the index is loaded as a reader
// loads it, repairing nothing, and cut after head, the newest acknowledged
// event (uuid.Nil: none), as the in-memory index of a session that had
// its index all along is. The session is then failed with its whole index,
// or damaged. On an error h is unchanged.
func (h *openSession) loadFailed(head uuid.UUID) error {
	p, err := analyze(h.rfs, h.dir, true, h.outside())
	if err != nil {
		return err
	}
	x := p.index
	switch i, ok := x.ByID[head]; {
	case head == uuid.Nil:
		x.TruncateTo(0)
	case ok:
		x.TruncateTo(int(i) + 1)
	case p.damage() == nil:
		return fmt.Errorf("sessionstore: the files of session %s do not hold its newest acknowledged event %s", h.id, head)
	}
	if d := p.damage(); d != nil {
		h.becomeDamaged(x, d)
		return nil
	}
	h.becomeFailedIndexed(x)
	return nil
}

// endAppending ends appending without the index, with h.mu held, so that
// materialize can load it: it makes the records in flight durable (unless
// a failure dropped them), then closes the chunk and index files, which
// the appends left as a clean open finds them, and keeps HEAD's entry
// only (lazy; a failed session stays failed). Waiting for a sync releases
// the mutex, so another call may have ended it (and loaded the index)
// meanwhile.
func (h *openSession) endAppending() error {
	if h.writeFailure == nil {
		if err := h.settle(); err != nil {
			return err
		}
	}
	for h.pipe.Syncing() {
		h.pipe.WaitSync()
	}
	if !h.Partial {
		return nil // another call ended it while this one waited
	}
	head := h.Entries[len(h.Entries)-1]
	cerr, ierr := h.chunks.Close(), h.index.Close()
	h.chunks, h.index = h.newChunkWriter(), nil
	if ierr != nil {
		// The index lines it held are lost: index.jsonl must not be
		// appended to again (a gap), as after any failed index write;
		// the next open rebuilds them from the chunks.
		h.becomeFailed(ierr)
	}
	h.becomeLazy(head) // a failed session stays failed
	return errors.Join(cerr, ierr)
}

// errNeedIndex is loadLazy's signal that the path needs the index: a line
// without a parent location (format 1), or a compaction whose record is a
// blob.
var errNeedIndex = errors.New("the path needs the index")

// loadLazy reads the path from head's event to the root, oldest first,
// following the parent location of each line, and resolves its blob
// records. With boundaries it stops at the newest compaction and returns
// the context Load does (compaction.go): the compaction, the events it
// keeps verbatim (walking on to its FirstKept), then the events after it.
//
// The path's length is unknown until the walk from HEAD ends, so the walk
// keeps what it decoded in fixed blocks and copies the records into
// shared slabs, and the events are built once, in their final place, at
// the end: regrowing one slice of events would copy it several times over
// into fresh memory, which is what a new process pays most for.
func (s *Store) loadLazy(ctx context.Context, key *sessionKey, dir string, head entry, boundaries bool) ([]Event, error) {
	blobs := s.startBlobReads(ctx, dir) // read while the walk goes on
	defer blobs.abandon()
	var steps [][]walkStep // newest first, in blocks of stepBlock
	var recs slab
	n, compaction, err := s.walkFromHead(ctx, key, dir, head, boundaries, func(k int, hd header, pl eventline.Payload, loc eventline.Location) {
		if k%stepBlock == 0 {
			steps = append(steps, make([]walkStep, 0, stepBlock))
		}
		st := walkStep{hd: hd, size: pl.Size}
		if pl.Blob {
			st.digest = pl.Digest
			blobs.add(k, eventline.NewEntry(hd, pl, loc))
		} else {
			st.rec = recs.copy(pl.Record)
		}
		steps[len(steps)-1] = append(steps[len(steps)-1], st)
	})
	if err != nil {
		return nil, err
	}

	at := contextOrder(n, compaction)
	out := make([]Event, n)
	for k := range n {
		st := &steps[k/stepBlock][k%stepBlock]
		ev := &out[at(k)]
		fillHeader(ev, &st.hd)
		ev.Size, ev.Record = st.size, st.rec
	}
	err = blobs.wait(out, func(k int) (int, bool) {
		if k >= n {
			return 0, false // past a compaction that keeps nothing
		}
		out[at(k)].Digest = string(canonical.AppendDigest(nil, steps[k/stepBlock][k%stepBlock].digest))
		return at(k), true
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// walkFromHead walks the path from head (HEAD's entry) along the parent
// locations its lines hold, calling visit with each line, newest first (k
// counts from 0; pl's record aliases the walk's buffer until visit
// returns). With boundaries it stops at the newest compaction and walks
// on from it to its FirstKept, as Load's context needs. It returns how
// many of the lines visited the context holds (n: past a compaction whose
// FirstKept is not on the path, none of the lines after it) and the step
// of the compaction (-1 for none); errNeedIndex when the path needs the
// index after all (a line without a parent location, a compaction stored
// as a blob).
//
// With a remote, the chunks the path crosses that a restore did not
// download yet are downloaded side by side ahead of the walk, as far as
// their exit tables tell (fetchFS.prefetch), from HEAD's line and again
// from each line the walk enters another chunk at; when the walk ends it
// cancels those downloads it did not need (it stopped at a compaction)
// and waits for them all.
func (s *Store) walkFromHead(ctx context.Context, key *sessionKey, dir string, head entry, boundaries bool, visit func(k int, hd header, pl eventline.Payload, loc eventline.Location)) (n, compaction int, err error) {
	cdir := filepath.Join(dir, chunksDir)
	prefetch := func(eventline.Location) {}
	if f := s.opts.fetch; f != nil {
		pctx, cancel := context.WithCancel(ctx)
		var waits []func()
		defer func() {
			cancel() // what the walk did not need
			for _, w := range waits {
				w()
			}
		}()
		prefetch = func(loc eventline.Location) { waits = append(waits, f.prefetch(pctx, cdir, loc)) }
	}
	prefetch(head.Loc)
	w := chunk.NewParentWalk(s.opts.fs, cdir, head, sealBlockSize)
	defer w.Close()
	compaction = -1       // the step of the compaction the walk stopped at
	firstKept := uuid.Nil // its FirstKept, which the walk goes on to
	for {
		if n%stepBlock == 0 {
			if err := ctx.Err(); err != nil {
				return 0, 0, err
			}
		}
		hd, pl, loc, err := w.Next()
		if err != nil {
			return 0, 0, sealedErr(err)
		}
		if boundaries && compaction < 0 && hd.Kind == eventline.KindCompaction {
			if pl.Blob {
				return 0, 0, errNeedIndex
			}
			compaction = n
			var rec CompactionRecord
			crec := pl.Record
			if key != nil {
				if crec, err = key.openRecord(crec); err != nil {
					return 0, 0, corruptf(dir, 0, "compaction %s: %w", hd.ID, err)
				}
			}
			if json.Unmarshal(crec, &rec) == nil {
				firstKept = rec.FirstKept
			}
		}
		visit(n, hd, pl, loc)
		n++
		if compaction >= 0 && (firstKept == uuid.Nil || hd.ID == firstKept) {
			return n, compaction, nil // the compaction keeps nothing, or all it keeps is read
		}
		if hd.ParentID == uuid.Nil {
			if compaction >= 0 {
				n = compaction + 1 // FirstKept is not on the path: nothing is kept
			}
			return n, compaction, nil
		}
		if pl.ParentAt.Chunk != loc.Chunk && pl.ParentAt.Length != 0 {
			prefetch(pl.ParentAt)
		}
		if err := w.Up(hd, pl); errors.Is(err, chunk.ErrNoParentAt) {
			return 0, 0, errNeedIndex
		} else if err != nil {
			return 0, 0, sealedErr(err)
		}
	}
}

// walkStep is what loadLazy keeps of an event until it builds the events.
type walkStep struct {
	hd     header
	size   int64
	rec    []byte   // in a slab; nil for a blob
	digest [32]byte // of a blob
}

const stepBlock = 1024

// contextOrder maps the steps of a walk of n events from HEAD to their
// places in the context: oldest first, except that a compaction (at step
// compaction, or -1 for none) comes first, before the events it keeps.
func contextOrder(n, compaction int) func(k int) int {
	if compaction < 0 {
		return func(k int) int { return n - 1 - k }
	}
	return func(k int) int {
		switch {
		case k == compaction:
			return 0
		case k > compaction:
			return n - k // kept: oldest first, after the compaction
		default:
			return n - 1 - k
		}
	}
}

// slab hands out copies of records from shared buffers: a path's records
// in a few allocations instead of one each.
type slab []byte

func (s *slab) copy(b []byte) []byte {
	k := len(b)
	if cap(*s)-len(*s) < k {
		*s = make([]byte, 0, max(256<<10, k))
	}
	out := append((*s)[len(*s):len(*s):len(*s)+k], b...)
	*s = (*s)[:len(*s)+k]
	return out
}

// lazyTip is recovery.Tip for a session of format 2 (whose lines name
// their parent's location): HEAD's entry when the session's log needs no
// repair, so that it opens without its index (see above).
func lazyTip(fsys vfs.FS, dir string, format int, follow bool) (entry, bool) {
	if format < 2 {
		return entry{}, false
	}
	return recovery.Tip(fsys, dir, follow)
}
