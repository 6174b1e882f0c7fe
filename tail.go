package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/deltalog"
)

// Following a session from another process
//
// Tail reads a session's delta stream (stream_durable.go) and its log as
// files, so it follows a session that any process on the machine writes:
// the committed events and the durable deltas, in one ordered stream,
// each update with a cursor to resume from. Its position is a segment
// of the stream, an offset in it, and the last event it delivered; the
// offset only ever moves past whole good records of a segment that no
// writer changes once another reader could have seen its bytes, and the
// events come from the log in its order, so resuming from a cursor
// delivers exactly what follows it.
//
// Order. A settled marker in the stream names the last event of a commit,
// written after the events are durable and before Append returns: on
// meeting one, Tail delivers the events of the log after its last one up
// to the marker's, then goes on with the deltas after the marker, the
// order in which they happened. Events no marker names (appended by a
// Store without DurableDeltas, or whose marker a crash lost) are found by
// the log itself: each round takes the newest event of the log, then
// reads the stream to its end, then delivers the events up to that
// newest one, so a delta published before an event is delivered before
// it.
//
// What is lost. Deltas are delivered from the segments present when Tail
// reads: a cursor into a segment removed since (superseded, see
// stream_durable.go) resumes at the next segment, and the deltas it
// missed there were superseded by events it receives. Events are never
// lost or repeated.

// Tail is a stream of a session's committed events and durable deltas,
// made by [Store.Tail]. Its methods are safe for concurrent use.
type Tail struct {
	// C delivers the updates in order, each with its Cursor; Missed is
	// never set (Tail reads at the consumer's pace). C is closed when the
	// tail ends: its context is done, Close is called, the Store is
	// closed, or an error stops it (Err).
	C <-chan Update

	ch     chan Update
	done   chan struct{}
	exited chan struct{}
	once   sync.Once
	errMu  sync.Mutex
	err    error
}

// Close ends the tail; when it returns, C is closed.
func (t *Tail) Close() {
	t.stop(nil)
	<-t.exited
}

// Err reports why the tail ended: nil while it runs and after Close; the
// context's error; ErrClosed; a *CorruptionError for a damaged segment
// that no newer segment follows (a segment a dead writer left torn or
// garbled is left for the next one); an error of the log's reads.
func (t *Tail) Err() error {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	return t.err
}

func (t *Tail) stop(err error) {
	t.once.Do(func() {
		t.errMu.Lock()
		t.err = err
		t.errMu.Unlock()
		close(t.done)
	})
}

// tailPos is a position in a session's stream.
type tailPos struct {
	gen  uint64    // segment (0: before the first)
	off  int64     // offset of the next record to read in it (0: its start)
	last uuid.UUID // the last event delivered (uuid.Nil: none)
}

// String is the cursor: "<gen>.<off>.<event id or ->".
func (p tailPos) String() string {
	ev := "-"
	if p.last != uuid.Nil {
		ev = p.last.String()
	}
	return strconv.FormatUint(p.gen, 10) + "." + strconv.FormatInt(p.off, 10) + "." + ev
}

// parseTailCursor parses what tailPos.String made.
func parseTailCursor(c string) (tailPos, error) {
	var p tailPos
	parts := strings.Split(c, ".")
	if len(parts) != 3 || len(c) > 80 {
		return p, fmt.Errorf("%w: %q", ErrInvalidCursor, c)
	}
	var err error
	if p.gen, err = strconv.ParseUint(parts[0], 10, 64); err != nil {
		return p, fmt.Errorf("%w: %q", ErrInvalidCursor, c)
	}
	if p.off, err = strconv.ParseInt(parts[1], 10, 64); err != nil || p.off < 0 {
		return p, fmt.Errorf("%w: %q", ErrInvalidCursor, c)
	}
	if parts[2] != "-" {
		if p.last, err = uuid.Parse(parts[2]); err != nil || p.last.String() != parts[2] || p.last == uuid.Nil {
			return p, fmt.Errorf("%w: %q", ErrInvalidCursor, c)
		}
	}
	if p.String() != c {
		return p, fmt.Errorf("%w: %q", ErrInvalidCursor, c)
	}
	return p, nil
}

// Tail follows the session from cursor: "" for the start (every event of
// the log, then the deltas that no event has settled yet, then what
// comes), or the Cursor of an Update a Tail delivered, to resume just
// after that update with nothing lost or repeated (see the section
// comment above for the one exception: deltas superseded while the
// consumer was away).
//
// It reads files only, as a read-only store does, and polls every
// Options.TailInterval when it has read everything: it follows a session
// that another process writes, with Options.DurableDeltas for its deltas
// (without, it follows the events). In another process, open the store
// with Options.ReadOnly, since a writing Store takes the session's lock.
// With Options.Remote, on a follower (ReadOnly with a Remote), it sees
// the committed events once they are in the object store, and no delta:
// the delta stream stays on the writer's disk.
//
// Errors: ErrInvalidCursor for a cursor Tail did not make; ErrNotFound
// for a session the store does not hold or a cursor whose event it does
// not hold; ErrLocked; ErrClosed; ctx's error. Errors after it returns end
// the tail (Err).
func (s *Store) Tail(ctx context.Context, session uuid.UUID, cursor string) (*Tail, error) {
	var pos tailPos
	fresh := cursor == ""
	if !fresh {
		var err error
		if pos, err = parseTailCursor(cursor); err != nil {
			return nil, err
		}
	}
	var dir string
	err := s.withHandle(ctx, session, func(h *openSession) error {
		dir = h.streamDir()
		if pos.last != uuid.Nil {
			if _, ok := h.ByID[pos.last]; !ok && !(h.meta.ForkedFrom != nil && h.meta.ForkedFrom.Event == pos.last) {
				return fmt.Errorf("%w: event %s of cursor %q in session %s", ErrNotFound, pos.last, cursor, session)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if fresh {
		// Start at the last settled marker: the events up to it come
		// first (the marker delivers them), then the deltas after it.
		gens, err := deltalog.Segments(s.opts.fs, dir)
		if err != nil {
			return nil, damage(err)
		}
		if len(gens) > 0 {
			pos.gen = gens[0]
		}
		for i := len(gens) - 1; i >= 0; i-- {
			off, found, err := lastMarker(s, filepath.Join(dir, deltalog.SegmentName(gens[i])))
			if err != nil {
				return nil, err
			}
			if found {
				pos.gen, pos.off = gens[i], off
				break
			}
		}
	}
	ch := make(chan Update)
	t := &Tail{C: ch, ch: ch, done: make(chan struct{}), exited: make(chan struct{})}
	if !s.tails.add(t) {
		return nil, ErrClosed
	}
	go func() {
		defer close(t.exited)
		defer close(t.ch)
		defer s.tails.remove(t)
		err := s.runTail(ctx, t, session, dir, pos)
		t.stop(err)
	}()
	return t, nil
}

// tailSet is the Store's running tails, which Close ends.
type tailSet struct {
	mu     sync.Mutex
	m      map[*Tail]struct{}
	closed bool
}

func (ts *tailSet) add(t *Tail) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.closed {
		return false
	}
	if ts.m == nil {
		ts.m = map[*Tail]struct{}{}
	}
	ts.m[t] = struct{}{}
	return true
}

func (ts *tailSet) remove(t *Tail) {
	ts.mu.Lock()
	delete(ts.m, t)
	ts.mu.Unlock()
}

// close ends every tail with ErrClosed and waits until each has closed C.
func (ts *tailSet) close() {
	ts.mu.Lock()
	ts.closed = true
	var all []*Tail
	for t := range ts.m {
		all = append(all, t)
	}
	ts.mu.Unlock()
	for _, t := range all {
		t.stop(ErrClosed)
	}
	for _, t := range all {
		<-t.exited
	}
}

// lastMarker returns the offset of the last settled marker of a segment.
func lastMarker(s *Store, path string) (int64, bool, error) {
	off, found := int64(0), false
	_, err := deltalog.Scan(s.opts.fs, path, 0, func(r deltalog.Record) error {
		if r.Type == deltalog.TypeSettled {
			off, found = r.Off, true
		}
		return nil
	})
	var bad *corrupt.Error
	if err != nil && !errors.As(err, &bad) && !errors.Is(err, fs.ErrNotExist) {
		return 0, false, damage(err)
	}
	return off, found, nil
}

// errTailStop ends a scan when the tail is stopped.
var errTailStop = errors.New("tail stopped")

// runTail is the tail's loop; it returns why it ended.
func (s *Store) runTail(ctx context.Context, t *Tail, session uuid.UUID, dir string, pos tailPos) error {
	send := func(u Update) bool {
		select {
		case t.ch <- u:
			return true
		case <-t.done:
			return false
		case <-ctx.Done():
			return false
		}
	}
	// stopped is why a send was refused: Close, Store.Close (which set
	// the tail's error first) or the context.
	stopped := func() error {
		select {
		case <-t.done:
			return t.Err()
		default:
			return ctx.Err()
		}
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		progress := false
		// 1. The newest event of the log, before the stream is read.
		newest, err := s.newestEvent(ctx, session)
		if err != nil {
			return err
		}
		// 2. The stream, to its end.
		gens, err := deltalog.Segments(s.opts.fs, dir)
		if err != nil {
			return damage(err)
		}
		for {
			i, _ := slices.BinarySearch(gens, pos.gen)
			if i == len(gens) {
				break // nothing at or after pos.gen yet
			}
			if gens[i] != pos.gen {
				pos.gen, pos.off = gens[i], 0 // removed (superseded), or not started: the next
			}
			hasNext := i+1 < len(gens)
			path := filepath.Join(dir, deltalog.SegmentName(pos.gen))
			res, err := deltalog.Scan(s.opts.fs, path, pos.off, func(r deltalog.Record) error {
				switch r.Type {
				case deltalog.TypeDelta:
					p := pos
					p.off = r.End
					d := &Delta{Kind: DeltaKind(r.Kind), CallID: r.CallID, Data: r.Data}
					if !send(Update{Delta: d, Cursor: p.String()}) {
						return errTailStop
					}
					progress = true
				case deltalog.TypeSettled:
					last, err := s.tailEvents(ctx, session, pos, uuid.UUID(r.Event), r.Off, r.End, send)
					if err != nil {
						return err
					}
					if last != pos.last {
						progress = true
						pos.last = last
					}
				}
				pos.off = r.End
				return nil
			})
			if errors.Is(err, errTailStop) {
				return stopped()
			}
			if res.End > pos.off {
				pos.off = res.End // the magic
			}
			var bad *corrupt.Error
			switch {
			case err == nil:
			case errors.As(err, &bad) || errors.Is(err, fs.ErrNotExist):
				if !hasNext {
					if errors.Is(err, fs.ErrNotExist) {
						break // removed under us: the listing shows what follows
					}
					return damage(err)
				}
			default:
				return damage(err)
			}
			if !hasNext {
				break
			}
			// A newer segment exists: this one is complete (its writer
			// wrote it all before starting the next) once read again
			// after the listing, which the scan above did. Move on.
			pos.gen, pos.off = gens[i+1], 0
		}
		// 3. The events up to the newest seen before the stream was read.
		if newest != uuid.Nil {
			last, err := s.tailEvents(ctx, session, pos, newest, pos.off, pos.off, send)
			if err != nil {
				if errors.Is(err, errTailStop) {
					return stopped()
				}
				return err
			}
			if last != pos.last {
				progress = true
				pos.last = last
			}
		}
		if progress {
			continue
		}
		timer.Reset(s.opts.TailInterval)
		select {
		case <-timer.C:
		case <-t.done:
			return t.Err()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// newestEvent returns the newest event of the session's log (uuid.Nil:
// none).
func (s *Store) newestEvent(ctx context.Context, session uuid.UUID) (uuid.UUID, error) {
	var id uuid.UUID
	err := s.withHandle(ctx, session, func(h *openSession) error {
		if n := len(h.Entries); n > 0 {
			id = h.Entries[n-1].ID
		}
		return nil
	})
	return id, err
}

// tailEvents sends the events of the log after pos.last up to and
// including upto, in the order of the log, read in bounded batches. Each
// carries the cursor (pos.gen, at, its id), the last one (pos.gen, end,
// its id): a consumer that resumes from an event before the last reads
// the stream from at again, and the rest of the events come first. It
// returns the last event sent (pos.last when none: upto is not after
// pos.last, or not in the log). A refused send ends it with errTailStop.
func (s *Store) tailEvents(ctx context.Context, session uuid.UUID, pos tailPos, upto uuid.UUID, at, end int64, send func(Update) bool) (uuid.UUID, error) {
	var p *resolvedPath
	err := s.withHandle(ctx, session, func(h *openSession) error {
		stop, ok := h.ByID[upto]
		if !ok {
			return nil // not in the log: a marker of a log cut since
		}
		start := 0
		if pos.last != uuid.Nil {
			i, ok := h.ByID[pos.last]
			if !ok {
				if h.meta.ForkedFrom == nil || h.meta.ForkedFrom.Event != pos.last {
					return fmt.Errorf("%w: event %s in session %s", ErrNotFound, pos.last, session)
				}
			} else {
				start = int(i) + 1
			}
		}
		if int(stop) < start {
			return nil
		}
		p = &resolvedPath{h: h, runs: []pathRun{{seg: -1, entries: slices.Clone(h.Entries[start : stop+1])}}}
		return nil
	})
	if err != nil || p == nil {
		return pos.last, err
	}
	last := pos.last
	run := p.runs[0].entries
	for k := 0; k < len(run); {
		e := batchEnd(run, k)
		evs, err := s.seqBatch(ctx, session, p, -1, run[k:e])
		if err != nil {
			return last, err
		}
		for i := range evs {
			c := tailPos{gen: pos.gen, off: at, last: evs[i].ID}
			if k+i == len(run)-1 {
				c.off = end
			}
			if !send(Update{Event: &evs[i], Cursor: c.String()}) {
				return last, errTailStop
			}
			last = evs[i].ID
		}
		k = e
	}
	return last, nil
}
