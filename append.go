package sessionstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/commit"
	"github.com/sessionstore/sessionstore/internal/eventline"
)

// Appending
//
// An append has two halves. The first runs under the session's mutex and
// is the open session's (this file): it stores the batch's large records
// as blobs, with the mutex released while they are written (writeBlobs),
// picks the parent (the newest event written, the pending Branch
// selection, or the caller's), encodes the lines, and queues them at the
// end of the active chunk, starting a new chunk when the batch does not
// fit (writeBatch). The second half is group commit (internal/commit's
// Pipeline, with the session as its Log: commit.go): the queued lines
// are written and made durable together with those of concurrent
// appends, then published.

// pendingEvent is an event to append: the caller's event and its record
// after prepareRecord, and, for a record stored as a blob, its digest.
type pendingEvent struct {
	ev       Event
	rec      []byte
	big      bool       // over Options.BlobThreshold: a blob in every format
	strs     []blob.Ref // its strings of at least Options.StringThreshold: a split blob from format 3
	digest   [32]byte   // of rec, when big or strs is set
	keepTime bool       // AppendOptions.KeepTime: ev.Time, when set, is the event's time
	preview  preview    // of rec, for the index entry (internal/eventline/preview.go)
	// plain is the record when rec is its envelope, sealed under key
	// (an encrypted session: encrypt.go); nil otherwise.
	plain []byte
	key   *sessionKey
	use   *eventUsage // the usage the record reports (usage.go); nil for none
}

// record is the record the caller appended: p.plain, else p.rec.
func (p *pendingEvent) record() []byte {
	if p.key != nil {
		return p.plain
	}
	return p.rec
}

// pendingOf returns the pendingEvent of ev and its prepared record,
// hashing a record that goes to a blob (and the strings it would store
// apart: blob.Strings, for a record at least Options.StringThreshold
// long) and making the record's preview, a blob's too, since the append
// holds its record (internal/eventline/preview.go). Appends call it
// before they take the session's mutex, so that no one waits for the
// hashing or the preview. The session's format decides later whether
// the strings are stored apart (pendingEvent.isBlob).
//
// With key (an encrypted session, encrypt.go), the record stored is its
// envelope, which everything below sees in its place (blob or inline,
// hashed, split: never), p.plain the record, and the preview, made from
// the record, is sealed once the event's id is known (writeBatch).
func (s *Store) pendingOf(ev Event, rec []byte, key *sessionKey) pendingEvent {
	if key != nil {
		k, _ := eventline.KindCodeOf([]byte(ev.Kind))
		p := pendingEvent{ev: ev, plain: rec, rec: key.sealRecord(rec), key: key, preview: eventline.PreviewOf(k, rec), use: usageOf(ev.Kind, rec)}
		p.big = s.opts.BlobThreshold >= 0 && len(p.rec) > s.opts.BlobThreshold
		if p.big {
			p.digest = sha256.Sum256(p.rec)
		}
		return p
	}
	k, _ := eventline.KindCodeOf([]byte(ev.Kind))
	p := pendingEvent{ev: ev, rec: rec, preview: eventline.PreviewOf(k, rec), use: usageOf(ev.Kind, rec)}
	p.big = s.opts.BlobThreshold >= 0 && len(rec) > s.opts.BlobThreshold
	if t := s.opts.StringThreshold; t > 0 && len(rec) >= t+2 {
		p.strs = blob.Strings(rec, t)
	}
	if p.big || len(p.strs) > 0 {
		p.digest = sha256.Sum256(rec)
	}
	return p
}

// isBlob reports whether p's record is stored as a blob in a session of
// format format, and the strings stored apart with it (none before
// format 3).
func (p *pendingEvent) isBlob(format int) (bool, []blob.Ref) {
	if format < splitFormat {
		return p.big, nil
	}
	return p.big || len(p.strs) > 0, p.strs
}

// tip is the newest event written, in flight or published: the parent of
// the next append.
func (h *openSession) tip() uuid.UUID {
	if fl := h.pipe.Inflight(); len(fl) > 0 {
		return fl[len(fl)-1].entry.ID
	}
	return h.head()
}

// hasChild reports whether an event of the session (its own, those in
// flight, or its fork prefix's) is a child of id, with h.mu held: whether
// an append to id starts a branch beside it. Without the whole index (a
// session appending without it), it answers true, the conservative
// answer: BranchFrom marks a branch that may have no sibling.
func (h *openSession) hasChild(id uuid.UUID) bool {
	if h.Partial || h.state == stateLazy {
		return true
	}
	fl := h.pipe.Inflight()
	for i := range fl {
		if fl[i].entry.ParentID == id {
			return true
		}
	}
	for i := range h.Entries {
		if h.Entries[i].ParentID == id {
			return true
		}
	}
	if pre, err := h.prefix(); err == nil && pre != nil {
		if at, ok := pre.pos[id]; ok {
			seg := pre.segs[at.seg]
			return at.i+1 < len(seg.path) || at.seg+1 < len(pre.segs)
		}
	}
	return false
}

// queue is the first half of an append, with h.mu held: it stores the
// batch's large records as blobs (writeBlobs), then encodes the batch and
// queues its lines at the end of the active chunk (writeBatch), returning
// the commit group they joined; commit is the second half. check, if not
// nil, runs before the blobs are written and again before the lines are
// queued: a refused append writes nothing. A check that released the
// mutex returns errRecheck and runs again. from is as for writeBatch.
func (h *openSession) queue(ctx context.Context, batch []pendingEvent, from uuid.UUID, check func(h *openSession) error) (*commit.Group, []Event, error) {
	for check != nil {
		err := check(h)
		if err == nil {
			break
		}
		if err != errRecheck {
			return nil, nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
	}
	pls, err := h.writeBlobs(batch)
	if err != nil {
		return nil, nil, err
	}
	return h.writeBatch(ctx, batch, pls, from, check)
}

// writeBlobs stores the records of the batch over the blob threshold as
// blobs and returns the payloads of all its records: inline, or blob
// references. It is called with h.mu held and returns with it held, but
// writes the blobs without it: compressing a large record and syncing its
// file and directory take milliseconds, which other appends to the session
// need not wait for. Until the lines naming them are written (in flight),
// GC keeps the blobs and their temporary files: their digests are counted
// in h.writingBlobs, until blobsWritten.
func (h *openSession) writeBlobs(batch []pendingEvent) ([]payload, error) {
	pls := make([]payload, len(batch))
	var big []int
	for i := range batch {
		pls[i] = eventline.Inline(batch[i].rec)
		ok, refs := batch[i].isBlob(h.format)
		batch[i].strs = refs // the strings stored apart, if any: protected with the blob
		if ok {
			big = append(big, i)
		}
	}
	if len(big) == 0 {
		return pls, nil
	}
	if err := h.writable(); err != nil {
		return nil, err
	}
	for _, i := range big {
		pls[i] = payload{Blob: true, Digest: batch[i].digest, Size: int64(len(batch[i].rec))}
	}
	h.protectBlobs(batch, pls, 1)
	h.mu.Unlock()
	var err error
	for _, i := range big {
		if err = h.files.putBlob(pls[i].Digest, batch[i].rec, batch[i].strs); err != nil {
			err = fmt.Errorf("sessionstore: write blob: %w", err)
			break
		}
	}
	h.mu.Lock()
	if err != nil {
		h.blobsWritten(batch, pls)
		if errors.Is(err, errUnsynced) {
			h.becomeFailed(err)
		}
		return nil, err
	}
	return pls, nil
}

// blobsWritten ends the protection writeBlobs gave the blobs of pls and
// their strings, with h.mu held: their lines are in flight (or were not
// written).
func (h *openSession) blobsWritten(batch []pendingEvent, pls []payload) {
	h.protectBlobs(batch, pls, -1)
}

// protectBlobs adds by (1 or -1) to the count in h.writingBlobs of each
// blob of pls and each of its strings (batch[i].strs), with h.mu held.
func (h *openSession) protectBlobs(batch []pendingEvent, pls []payload, by int) {
	if h.writingBlobs == nil {
		h.writingBlobs = map[[32]byte]int{}
	}
	add := func(d [32]byte) {
		if h.writingBlobs[d] += by; h.writingBlobs[d] <= 0 {
			delete(h.writingBlobs, d)
		}
	}
	for i, p := range pls {
		if p.Blob {
			add(p.Digest)
			for _, r := range batch[i].strs {
				add(r.Digest)
			}
		}
	}
}

// writeBatch queues the lines of a batch at the end of the active chunk,
// with h.mu held, and records them in flight. pls are the records'
// payloads from writeBlobs, whose protection from GC ends when writeBatch
// returns. The batch's first event is a child of from with BranchFrom set
// when from is not uuid.Nil (AppendBranchSummary), else of the pending
// Branch selection, else of the newest event; either way the selection is
// used up once the batch is queued (commitLog.Dropped gives it back if
// the write fails). from is a parameter, not a selection set for the call: waiting
// for a sync releases the mutex, and another append would take it. It
// returns the commit group the batch joined, for commit.
func (h *openSession) writeBatch(ctx context.Context, batch []pendingEvent, pls []payload, from uuid.UUID, check func(h *openSession) error) (*commit.Group, []Event, error) {
	defer h.blobsWritten(batch, pls)
	if err := h.writable(); err != nil {
		return nil, nil, err
	}
	out := make([]Event, len(batch))
	for i, p := range batch {
		// A caller's id was checked by the batch's check (retry.go),
		// which runs again right before the lines are queued.
		id := p.ev.ID
		if id == uuid.Nil {
			var err error
			if id, err = h.opts.newID(); err != nil {
				return nil, nil, fmt.Errorf("sessionstore: new event id: %w", err)
			}
			if h.known(id) || (i > 0 && id == out[i-1].ID) {
				return nil, nil, fmt.Errorf("sessionstore: id source returned duplicate id %s", id)
			}
		}
		t := h.opts.now().UTC()
		if p.keepTime && !p.ev.Time.IsZero() {
			t = p.ev.Time.UTC()
		}
		out[i] = Event{ID: id, Kind: p.ev.Kind, Role: p.ev.Role, Time: t, Record: p.record(), Size: pls[i].Size}
		if pls[i].Blob {
			out[i].Digest = string(canonical.AppendDigest(nil, pls[i].Digest))
		}
	}
	hdrs := make([]header, len(batch))
	starts := make([]int, len(batch)+1)
	for {
		if err := h.writable(); err != nil {
			return nil, nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		if err := h.appendMode(); err != nil {
			return nil, nil, err
		}
		if check != nil {
			if err := check(h); err == errRecheck {
				continue
			} else if err != nil {
				return nil, nil, err
			}
		}
		if err := h.newIDs(batch); err != nil {
			return nil, nil, err
		}
		h.line = h.line[:0]
		parent, branch := h.tip(), uuid.Nil
		switch {
		case from != uuid.Nil:
			parent, branch = from, from
		case h.pending != uuid.Nil:
			parent = h.pending
			if h.hasChild(parent) {
				branch = parent // a new path beside the child; else it goes on from a leaf
			}
		}
		// In format 2 each line names where its parent's line is: the
		// parent's entry, then the line before it in the batch, which is
		// queued at base (a rotation below changes base, and the loop
		// encodes the batch again).
		var at location
		base := h.chunks.NextAt()
		if h.format >= 2 && parent != uuid.Nil {
			at = h.locationOf(parent)
		}
		for i := range batch {
			out[i].ParentID, out[i].BranchFrom = parent, branch
			hdrs[i] = headerOf(&out[i])
			starts[i] = len(h.line)
			pl := pls[i]
			pl.ParentAt = at
			h.line = eventline.AppendEvent(h.line, &hdrs[i], pl)
			parent, branch = out[i].ID, uuid.Nil
			if h.format >= 2 {
				at = location{Chunk: base.Chunk, Offset: base.Offset + int64(starts[i]), Length: uint32(len(h.line) - starts[i])}
			}
		}
		starts[len(batch)] = len(h.line)
		if !h.chunks.Full(len(h.line)) {
			break
		}
		// A new chunk. While a sync runs, wait for it (which releases the
		// mutex) and look again: another append may have started the new
		// chunk meanwhile, and the parent may have changed. Otherwise
		// settle the old chunk without releasing the mutex and start the
		// new one.
		if h.pipe.Syncing() {
			h.pipe.WaitSync()
			continue
		}
		if h.Partial && h.chunks.Active() != nil {
			// Sealing the full chunk embeds all its index lines: load
			// the index (which settles the records in flight), then
			// encode again. (Without an active chunk, HEAD is in a
			// sealed one, and there is nothing to seal.)
			if err := h.materialize(); err != nil {
				return nil, nil, err
			}
			continue
		}
		if err := h.settle(); err != nil {
			return nil, nil, err
		}
		h.writeIndex() // the full chunk's lines, before the new chunk's
		if err := h.failedErr(); err != nil {
			return nil, nil, err
		}
		if err := h.chunks.Rotate(); err != nil {
			if errors.Is(err, errUnsynced) {
				h.becomeFailed(err)
				h.opts.Logger.Error("sessionstore: session stops writing", "session", h.id, "err", err)
			}
			return nil, nil, err
		}
	}
	loc := h.chunks.Enqueue(h.line)
	for i := range batch {
		l := location{Chunk: loc.Chunk, Offset: loc.Offset + int64(starts[i]), Length: uint32(starts[i+1] - starts[i])}
		pv := batch[i].preview
		if k := batch[i].key; k != nil {
			// Sealed here, where the event's id is known: the sealing
			// binds it (a few hundred nanoseconds for at most 48 bytes).
			pv = k.sealPreview(hdrs[i].ID, pv)
		}
		h.pipe.Add(inflightRecord{entry: eventline.EntryOf(hdrs[i], pls[i], l, pv), event: out[i], use: batch[i].use})
	}
	h.pending = uuid.Nil
	return h.pipe.Join(len(batch)), out, nil
}

// locationOf returns where the line of event id is, published or in
// flight; a zero location if the session has no such event.
func (h *openSession) locationOf(id uuid.UUID) location {
	fl := h.pipe.Inflight()
	for i := len(fl) - 1; i >= 0; i-- {
		if fl[i].entry.ID == id {
			return fl[i].entry.Loc
		}
	}
	if i, ok := h.ByID[id]; ok {
		return h.Entries[i].Loc
	}
	return location{}
}

// known reports whether id names an event of the session, published or in
// flight.
func (h *openSession) known(id uuid.UUID) bool {
	if _, ok := h.ByID[id]; ok {
		return true
	}
	fl := h.pipe.Inflight()
	for i := range fl {
		if fl[i].entry.ID == id {
			return true
		}
	}
	return false
}
