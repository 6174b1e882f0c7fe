package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/deltalog"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Durable deltas
//
// With Options.DurableDeltas, a session's deltas are also written to its
// delta stream, the directory stream/ of the session's directory, as
// records of segment files (internal/deltalog). Publish writes its delta
// at once (one write system call, no sync: a process that dies loses
// nothing Publish returned for), and a background sync follows within
// Options.DeltaSyncInterval, or as soon as Options.DeltaSyncBytes wait
// for one: a power loss loses at most the deltas of the last
// DeltaSyncInterval, and the segment then ends torn or with garbage,
// which every reader cuts at its last good record.
//
// Every commit of events to the session writes a settled marker naming
// its last event, after the events are durable and before Append
// returns; the marker supersedes every delta before it. The deltas after
// the last marker are the partial output of an answer in progress or cut
// short: PartialOutput returns them, provided no event of the log follows
// the marker's (a marker a crash lost after its events were durable), so
// a settled answer is never shown twice, and durable deltas are never
// presented as events: Load and the other reads of the log never see
// them. Superseded segments are removed when a segment passes
// deltaSegmentBytes (at a marker) and when a writer starts, so the stream
// holds about the deltas of the current answer and at most two segments'
// worth of superseded ones.
//
// A writer never writes to a segment it did not create: each Store that
// starts writing a session's stream starts a new segment, so the bytes a
// reader in another process positioned itself on never change under it
// (tail.go).

// deltaStreamDir is the directory of a session's delta stream.
const deltaStreamDir = "stream"

// deltaSegmentBytes is the size past which a settled marker ends a
// segment; a variable for tests.
var deltaSegmentBytes int64 = 1 << 20

// maxPartialBytes bounds the deltas PartialOutput returns, in bytes of
// their records: a stream holding more after its last marker is damaged.
const maxPartialBytes = 64 << 20

// ErrInvalidCursor is returned by Tail for a cursor it did not make.
var ErrInvalidCursor = errors.New("sessionstore: invalid stream cursor")

// streamDir is the directory of the session's delta stream.
func (h *openSession) streamDir() string { return filepath.Join(h.dir, deltaStreamDir) }

// durableDeltas reports whether the session writes its deltas.
func (h *openSession) durableDeltas() bool {
	return h.opts.DurableDeltas && !h.opts.ReadOnly && !h.meta.Encrypted
}

// deltaWriter returns the session's delta stream writer, starting a new
// segment the first time; with h.mu held. When it starts one and settle
// is set, it first writes a marker for the newest event of the log if
// the stream's last marker is another: events without a marker (a crash
// took it, or a Store without DurableDeltas appended them) supersede
// every delta before them, as PartialOutput reads it, and must not
// supersede the deltas this writer is about to write.
func (h *openSession) deltaWriter(settle bool) (*deltalog.Writer, error) {
	if h.deltas != nil {
		return h.deltas, nil
	}
	dir := h.streamDir()
	// Keep the segment of the last marker and those after it: they hold
	// the partial output a crash may have left. On damage, keep all.
	keep := uint64(0)
	st, scanErr := scanStream(h.opts.fs, dir, 0)
	if scanErr == nil {
		keep = st.markerGen
	}
	w, err := deltalog.Open(h.opts.fs, dir, keep, deltalog.Options{
		FileMode: h.opts.FileMode, DirMode: h.opts.DirMode,
		SyncInterval: h.opts.DeltaSyncInterval, SyncBytes: h.opts.DeltaSyncBytes,
		SegmentBytes: deltaSegmentBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("sessionstore: start the delta stream of session %s: %w", h.id, damage(err))
	}
	if settle && len(h.Entries) > 0 {
		if newest := h.Entries[len(h.Entries)-1].ID; scanErr != nil || uuid.UUID(st.marker) != newest {
			if err := w.Settled(newest); err != nil {
				_ = w.Close()
				return nil, fmt.Errorf("sessionstore: start the delta stream of session %s: %w", h.id, err)
			}
		}
	}
	h.deltas = w
	return w, nil
}

// settleDeltas writes the settled marker of a commit's events, durable
// when it is called, to the session's delta stream; with h.mu held. A
// failure is logged: the events are durable, and PartialOutput finds the
// deltas superseded by them all the same.
func (h *openSession) settleDeltas(events []Event) {
	if len(events) == 0 || !h.durableDeltas() {
		return
	}
	w, err := h.deltaWriter(false) // the marker of these events follows
	if err == nil {
		err = w.Settled(events[len(events)-1].ID)
	}
	if err != nil {
		h.opts.Logger.Error("sessionstore: settled marker not written to the delta stream", "session", h.id, "err", err)
	}
}

// publishDurable writes the delta to the session's stream and delivers
// it, under the session's mutex, so that the stream and the subscribers
// see the same order of deltas and events.
func (s *Store) publishDurable(ctx context.Context, session uuid.UUID, d Delta) error {
	return s.withHandle(ctx, session, func(h *openSession) error {
		if h.durableDeltas() {
			if err := h.writable(); err != nil {
				return err
			}
			w, err := h.deltaWriter(true)
			if err != nil {
				return err
			}
			if err := w.Delta(string(d.Kind), d.CallID, d.Data); err != nil {
				if errors.Is(err, deltalog.ErrTooLarge) {
					return invalidEventf("delta of session %s: %v", session, err)
				}
				return fmt.Errorf("sessionstore: write delta of session %s: %w", session, err)
			}
		}
		if t := s.hub.topic(session); t != nil {
			t.deliver(nil, &d)
		}
		return nil
	})
}

// Partial is the partial output PartialOutput found: the durable deltas
// of an answer that no event settled.
type Partial struct {
	// After is the event the answer follows: the newest event of the
	// session's log (for a fork without events of its own, its fork
	// point; uuid.Nil: none).
	After uuid.UUID
	// Deltas are the deltas, in the order they were published. They are
	// not events: what the model was producing when it stopped, never a
	// settled answer.
	Deltas []Delta
}

// Text returns the concatenated Data of the deltas of kind k (DeltaText:
// the answer's text so far; DeltaReasoning: its reasoning).
func (p Partial) Text(k DeltaKind) string {
	n := 0
	for _, d := range p.Deltas {
		if d.Kind == k {
			n += len(d.Data)
		}
	}
	b := make([]byte, 0, n)
	for _, d := range p.Deltas {
		if d.Kind == k {
			b = append(b, d.Data...)
		}
	}
	return string(b)
}

// PartialOutput returns the durable deltas of the session that no event
// has settled: the partial output of an answer a crash (of the process,
// or a power loss) interrupted, or of one in progress in another process.
// Call it after opening a session, as RepairInterruptedToolCalls is
// called, to show the user what was lost or to hand it to the model; the
// next event appended to the session supersedes it, so a harness that
// saves the partial answer appends it as an event of its own (marked
// interrupted as it sees fit).
//
// The deltas are those Publish wrote with Options.DurableDeltas since the
// stream's last settled marker, provided the session's log holds no event
// after the marker's (the events of a commit whose marker a crash lost
// supersede the deltas before them all the same). What a crash can have
// lost: a killed process nothing Publish returned for; a power loss the
// deltas of the last Options.DeltaSyncInterval. A stream segment that a
// crash cut or left garbage in is read up to its last good record; the
// rest of it is ignored. A session without partial output gives a Partial
// with no Deltas. It writes nothing, takes the session's lock as Load
// does, and works on a read-only store.
//
// Errors: as Load; a *CorruptionError when the deltas after the last
// marker exceed 64 MiB.
func (s *Store) PartialOutput(ctx context.Context, session uuid.UUID) (Partial, error) {
	var p Partial
	err := s.withHandle(ctx, session, func(h *openSession) error {
		st, err := scanStream(h.opts.fs, h.streamDir(), maxPartialBytes)
		if err != nil {
			return damage(err)
		}
		newest, after := uuid.Nil, uuid.Nil
		if n := len(h.Entries); n > 0 {
			newest = h.Entries[n-1].ID
			after = newest
		} else if h.meta.ForkedFrom != nil {
			after = h.meta.ForkedFrom.Event // a fork without events of its own
		}
		if uuid.UUID(st.marker) != newest || len(st.pending) == 0 {
			return nil // superseded by the events after the marker, or nothing pending
		}
		p.After, p.Deltas = after, st.pending
		return nil
	})
	return p, err
}

// streamState is what scanStream read of a stream.
type streamState struct {
	marker    [16]byte // the last settled marker's event (zero: none)
	markerGen uint64   // the segment holding it (0: none)
	pending   []Delta  // the deltas after it
}

// scanStream reads every segment of the stream in dir, oldest first, each
// up to its last good record, and returns the last settled marker and the
// deltas after it (bounded by limit bytes of data; 0: not kept). A
// missing directory is an empty stream.
func scanStream(fsys vfs.FS, dir string, limit int) (streamState, error) {
	var st streamState
	gens, err := deltalog.Segments(fsys, dir)
	if err != nil {
		return st, err
	}
	size := 0
	for _, g := range gens {
		path := filepath.Join(dir, deltalog.SegmentName(g))
		_, err := deltalog.Scan(fsys, path, 0, func(r deltalog.Record) error {
			switch r.Type {
			case deltalog.TypeSettled:
				st.marker, st.markerGen, st.pending, size = r.Event, g, nil, 0
			case deltalog.TypeDelta:
				if limit <= 0 {
					return nil
				}
				size += len(r.Data) + len(r.Kind) + len(r.CallID)
				if size > limit {
					return corruptf(path, r.Off, "more than %d bytes of deltas after the last settled marker", limit)
				}
				st.pending = append(st.pending, Delta{Kind: DeltaKind(r.Kind), CallID: r.CallID, Data: r.Data})
			}
			return nil
		})
		var bad *corrupt.Error
		switch {
		case err == nil, errors.As(err, &bad):
			// A record a crash cut or garbled ends the segment: the
			// records before it count, the rest is ignored.
		case errors.Is(err, fs.ErrNotExist):
			// Removed since the listing: superseded.
		default:
			return st, err
		}
	}
	return st, nil
}
