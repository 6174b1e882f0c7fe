package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/eventline"
)

// Streaming forms
//
// LoadSeq, FullPathSeq and TreeSeq are Load, FullPath and Tree as Go
// iterators, for histories too large to hold as one slice. They share
// these rules:
//
//   - Snapshot. The path (or, for TreeSeq, the end of the log) is taken
//     when the iteration starts, under the session's mutex, from the
//     in-memory index: LoadSeq and FullPathSeq resolve every index entry
//     of the path then (about 220 bytes an event, no record), TreeSeq
//     notes the newest event. Events appended during the iteration, from
//     inside the loop or elsewhere, are not yielded; a Branch does not
//     change the path being read.
//   - Batches. Records are read as the caller iterates, in batches of at
//     most seqBatchBytes of lines and blob records (and seqBatchEvents
//     events), one batch at a time, so the memory an iteration holds is
//     one batch, whatever the total size of the records. TreeSeq copies
//     treeBatch nodes at a time.
//   - No lock across a yield. Neither the session's mutex nor a reference
//     to the open session is held while the loop body runs, only while a
//     batch is taken: the body may append to the session, Branch, Close
//     it or call anything else without deadlocking. Each batch is a call
//     of its own that Close waits for (ErrClosed after the Store closes).
//     If the session's lines moved between batches (Upgrade or
//     ConvertCompression rewrote its chunks), the batch is located again
//     in the session's index by id and read from there.
//   - Errors. An error is yielded once, with a zero value, and the
//     iteration ends; the events yielded before it are valid. A damaged
//     session yields the events of its valid prefix, then its
//     *CorruptionError, as Load returns both. Breaking out of the loop
//     releases everything at once.
//   - A session opened without its index (see Opening in the package doc)
//     loads it first, as Tree does: Load's walk from HEAD along the parent
//     locations reads every line of the path, records included, to find
//     the next one, so streaming that way would read the records twice or
//     hold them; the index lines cost a small part of that and locate
//     every record. With Options.Remote, where loading the index of a
//     session restored from the object store would download every sealed
//     chunk (their embedded indexes), LoadSeq (and FullPathSeq of HEAD's
//     path) takes the other way: it walks HEAD's path as Load does,
//     downloading the path's chunks and no others, keeps the entries, and
//     reads the records again in batches (each line decompressed twice,
//     no chunk off the path downloaded). TreeSeq, and FullPathSeq of
//     another leaf, load the index.

// seqBatchBytes and seqBatchEvents bound one batch of LoadSeq and
// FullPathSeq; treeBatch bounds one batch of TreeSeq. Variables so that
// tests can make a small session span many batches.
var (
	seqBatchBytes  int64 = 1 << 20
	seqBatchEvents       = 1024
	treeBatch            = 4096
)

// LoadSeq is Load as an iterator: the events of the active context, in
// Load's order, their records read in bounded batches as the loop asks
// for them (see Streaming forms in seq.go's doc: the path is a snapshot
// taken at the start, no lock is held across the loop body, an error is
// yielded once and ends the iteration).
//
// Errors: as Load, yielded.
func (s *Store) LoadSeq(ctx context.Context, session uuid.UUID) iter.Seq2[Event, error] {
	return s.pathSeq(ctx, session, uuid.Nil, true, true)
}

// FullPathSeq is FullPath as an iterator: every event from the root to
// leaf (the active path's end when leaf is uuid.Nil, as Load), past
// compactions, read in bounded batches as LoadSeq reads.
//
// Errors: as FullPath, yielded.
func (s *Store) FullPathSeq(ctx context.Context, session, leaf uuid.UUID) iter.Seq2[Event, error] {
	return s.pathSeq(ctx, session, leaf, leaf == uuid.Nil, false)
}

// TreeSeq is Tree as an iterator: every node of the session in Tree's
// order, up to the newest event when the iteration started, copied from
// the index a batch at a time with the session's mutex released between
// batches. It reads no record.
//
// Errors: as Tree, yielded; a *CorruptionError after the nodes of a
// damaged session's valid prefix.
func (s *Store) TreeSeq(ctx context.Context, session uuid.UUID) iter.Seq2[Node, error] {
	return func(yield func(Node, error) bool) {
		var pre *forkPrefix
		var end uuid.UUID // the newest event of the log at the start
		ran := false
		damaged := s.withHandle(ctx, session, func(h *openSession) error {
			var err error
			if pre, err = h.prefix(); err != nil {
				return err
			}
			ran = true
			if last, ok := h.Last(); ok {
				end = last.ID
			}
			return nil
		})
		if !ran {
			yield(Node{}, damaged)
			return
		}
		var buf []Node
		if pre != nil { // a fork's prefix path: an immutable snapshot
			for si, seg := range pre.segs {
				v := s.segPreviews(ctx, pre, &pre.segs[si])
				for k := 0; k < len(seg.path); k += treeBatch {
					buf = nodes(buf[:0], seg.path[k:min(k+treeBatch, len(seg.path))], v)
					if !yieldAll(buf, yield) {
						return
					}
				}
			}
		}
		pos, last := 0, uuid.Nil
		for end != uuid.Nil && last != end {
			var ferr error
			err := s.withHandle(ctx, session, func(h *openSession) error {
				ferr = h.treeBatch(&pos, last, end)
				if ferr == nil {
					stop := min(pos+treeBatch, int(h.ByID[end])+1)
					buf = nodes(buf[:0], h.Entries[pos:stop], s.ownPreviews(ctx, h, h.Entries[pos:stop]))
					pos, last = stop, h.Entries[stop-1].ID
				}
				return nil
			})
			if ferr == nil && err != nil && !isDamage(err) {
				ferr = err
			}
			if ferr != nil {
				yield(Node{}, ferr)
				return
			}
			if !yieldAll(buf, yield) {
				return
			}
		}
		if damaged != nil {
			yield(Node{}, damaged)
		}
	}
}

// treeBatch checks, with h.mu held, that TreeSeq can go on from *pos, the
// position after last (uuid.Nil: none yet), to end: the index may have
// been loaded again since the last batch (the session closed and opened),
// and then last is looked up.
func (h *openSession) treeBatch(pos *int, last, end uuid.UUID) error {
	if _, ok := h.ByID[end]; !ok {
		return fmt.Errorf("%w: event %s left session %s during the iteration", ErrNotFound, end, h.id)
	}
	if last == uuid.Nil || (*pos <= len(h.Entries) && *pos > 0 && h.Entries[*pos-1].ID == last) {
		return nil
	}
	i, ok := h.ByID[last]
	if !ok {
		return fmt.Errorf("%w: event %s left session %s during the iteration", ErrNotFound, last, h.id)
	}
	*pos = int(i) + 1
	return nil
}

// isDamage reports whether err, from withHandle after its function ran,
// is the session's damage (its valid prefix was used).
func isDamage(err error) bool {
	var ce *CorruptionError
	return errors.As(err, &ce)
}

func yieldAll[T any](vs []T, yield func(T, error) bool) bool {
	for i := range vs {
		if !yield(vs[i], nil) {
			return false
		}
	}
	return true
}

// pathSeq is LoadSeq and FullPathSeq: the path resolved at the start
// (resolvePath), its records read a batch at a time (seqBatch).
func (s *Store) pathSeq(ctx context.Context, session, leaf uuid.UUID, fromHead, boundaries bool) iter.Seq2[Event, error] {
	return func(yield func(Event, error) bool) {
		p, err := s.seqPath(ctx, session, leaf, fromHead, boundaries)
		if err != nil {
			yield(Event{}, err)
			return
		}
		for _, run := range p.runs {
			for k := 0; k < len(run.entries); {
				end := batchEnd(run.entries, k)
				evs, err := s.seqBatch(ctx, session, p, run.seg, run.entries[k:end])
				if err != nil {
					yield(Event{}, err)
					return
				}
				if !yieldAll(evs, yield) {
					return
				}
				k = end
			}
		}
		if p.damaged != nil {
			yield(Event{}, p.damaged)
		}
	}
}

// seqPath resolves the path for pathSeq, inside a call Close waits for,
// loading the index of a session opened without it; with a remote, HEAD's
// path of a session opened without its index is resolved by walking its
// lines instead (seqPathLazy).
func (s *Store) seqPath(ctx context.Context, session, leaf uuid.UUID, fromHead, boundaries bool) (*resolvedPath, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if fromHead && s.opts.fetch != nil {
		if p, err := s.seqPathLazy(ctx, session, boundaries); !errors.Is(err, errNeedIndex) {
			return p, err
		}
	}
	key, err := s.ownKey(ctx, session)
	if err != nil {
		return nil, err
	}
	h, err := s.reg.acquire(ctx, session, nil)
	if err != nil {
		return nil, err
	}
	return s.resolvePath(h, key, leaf, fromHead, boundaries)
}

// seqPathLazy resolves HEAD's path of a session with a remote opened
// without its index (see Opening without the index) as Load reads it:
// walking the lines of the path from HEAD (walkFromHead), so that a
// session restored from the object store downloads the chunks on the
// path and no others, keeping each line's entry and not its record, which
// the batches read again from the chunks, by then downloaded. It returns
// errNeedIndex when the session has its index loaded, or the path needs
// it.
func (s *Store) seqPathLazy(ctx context.Context, session uuid.UUID, boundaries bool) (*resolvedPath, error) {
	key, err := s.ownKey(ctx, session)
	if err != nil {
		return nil, err
	}
	ctx, p := withHeadPrefetch(ctx)
	defer p.wait()
	h, err := s.reg.acquireLazy(ctx, session, nil)
	if err != nil {
		return nil, err
	}
	head, ok := h.lazyHead()
	ok = ok && h.pending == uuid.Nil // read under the mutex
	s.reg.release(h)
	if !ok {
		return nil, errNeedIndex
	}
	var steps []entry // newest first
	n, compaction, err := s.walkFromHead(ctx, key, h.dir, head, boundaries, func(_ int, hd header, pl eventline.Payload, loc eventline.Location) {
		steps = append(steps, eventline.EntryOf(hd, pl, loc, eventline.Preview{}))
	})
	if err != nil {
		return nil, err
	}
	at := contextOrder(n, compaction)
	path := make([]entry, n)
	for k := range n {
		path[at(k)] = steps[k]
	}
	return &resolvedPath{h: h, runs: []pathRun{{seg: -1, entries: path}}}, nil
}

// batchEnd returns the end of the batch of es that starts at k: at least
// one entry, then as many as fit in seqBatchBytes and seqBatchEvents.
func batchEnd(es []entry, k int) int {
	bytes := int64(0)
	end := k
	for end < len(es) && end-k < seqBatchEvents {
		n := int64(es[end].Loc.Length)
		if es[end].Blob {
			n += es[end].Size
		}
		if end > k && bytes+n > seqBatchBytes {
			break
		}
		bytes += n
		end++
	}
	return end
}

// seqBatch reads one batch of a path, run, held by segment seg (-1: the
// session itself), inside a call Close waits for. When the session's own
// lines fail to read, it looks the batch up in the session's index again
// and, if its lines moved (the chunks were rewritten), reads them there;
// if the session is gone (deleted), the error is ErrNotFound.
func (s *Store) seqBatch(ctx context.Context, session uuid.UUID, p *resolvedPath, seg int, run []entry) ([]Event, error) {
	evs, err := s.readBatch(ctx, p.h, p.pre, seg, run) // records opened by readRun
	if err == nil || seg >= 0 || ctx.Err() != nil || errors.Is(err, ErrClosed) {
		return evs, err
	}
	var moved []entry
	var fresh *openSession
	herr := s.withHandle(ctx, session, func(h *openSession) error {
		fresh, moved = h, h.relocate(run)
		return nil
	})
	if fresh == nil && errors.Is(herr, ErrNotFound) {
		return nil, herr // deleted meanwhile: its files are gone, not damaged
	}
	if moved == nil {
		return nil, err
	}
	return s.readBatch(ctx, fresh, p.pre, seg, moved)
}

// readBatch is readRun inside a call Close waits for.
func (s *Store) readBatch(ctx context.Context, h *openSession, pre *forkPrefix, seg int, run []entry) ([]Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	return s.readRun(ctx, h, pre, seg, run)
}

// relocate returns the entries of the events of run as h's index has them
// now, with h.mu held; nil if one is missing or none moved.
func (h *openSession) relocate(run []entry) []entry {
	out := make([]entry, len(run))
	same := true
	for k := range run {
		i, ok := h.ByID[run[k].ID]
		if !ok {
			return nil
		}
		out[k] = h.Entries[i]
		same = same && out[k].Loc == run[k].Loc
	}
	if same {
		return nil
	}
	return out
}
