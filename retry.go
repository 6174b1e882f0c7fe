package sessionstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/canonical"
)

// Retries and optimistic concurrency
//
// An append may carry ids the caller chose (Event.ID, a UUIDv7): the id is
// then an idempotency key. A harness that retries an append after a
// timeout, a lost connection or a crash, with the same events and ids,
// gets the events stored the first time instead of a second copy. An
// append may also state the parent it expects (AppendOptions): when the
// session moved on, it fails with ErrConflict and writes nothing, which is
// what Compact does for its summary.
//
// Both are checks of the batch (the check hook of appendEvents), run
// under the session's mutex right before the lines are queued, so no other
// append lands between the check and the write. The id check needs the
// whole index (a lazy session loads it: the first append with an id after
// opening pays for reading index.jsonl once; appends without an id never
// do) and looks at the records in flight too: a retry that arrives while
// its original is still being synced waits for that sync, then finds the
// original published (and returns it) or dropped by a failed write (and
// writes the events itself). It never returns success for events that are
// not durable.

// AppendOptions are the conditions of AppendWith.
type AppendOptions struct {
	// ExpectParent, when not uuid.Nil, is the event the batch's first
	// event must become a child of: HEAD (the newest event, counting
	// appends in flight), or the pending Branch selection when there is
	// one. Another one gives ErrConflict and nothing is written.
	ExpectParent uuid.UUID
	// ExpectRoot requires the batch's first event to be a root: the
	// session holds no event (and no append is in flight). It cannot be
	// combined with ExpectParent.
	ExpectRoot bool
	// KeepTime stores each event's Time as the caller set it, in UTC,
	// instead of the time of the append: for history written elsewhere
	// first (an importer keeps the source's timestamps). An event whose
	// Time is zero still gets the time of the append. The store does not
	// require times to grow along a path.
	KeepTime bool
	// Stored, if not nil, is set by AppendWith to true when it returns the
	// batch as stored already and writes nothing, and to false otherwise:
	// a caller that counts the events it wrote (an importer racing another
	// Store that imports the same history) counts each once.
	Stored *bool
}

// storableTime reports whether t fits a chunk line's time: Unix
// nanoseconds, not negative, in an int64.
func storableTime(t time.Time) bool {
	return t.Unix() >= 0 && t.Unix() < math.MaxInt64/int64(time.Second)
}

// stated reports whether o states a parent.
func (o AppendOptions) stated() bool { return o.ExpectRoot || o.ExpectParent != uuid.Nil }

// AppendWith appends events in order as one unit, as AppendBatch does,
// under the conditions of opts and of the ids the caller chose.
//
// Caller-chosen ids: an event whose ID is set (it must be a UUIDv7 of the
// RFC 4122 variant, else ErrInvalidEvent) is stored under that id. When
// every event of the batch has an id that the session already holds
// (on any branch), each with the same content, AppendWith writes nothing
// and returns the events as they are stored (their ParentID, BranchFrom
// and Time are those of the first append). The same content means: the
// same Kind, the same Role, the same record in compact form (byte for
// byte after the compaction Append applies: key order and numbers as the
// caller wrote them), each event after the first a child of the event
// before it in the batch, and, when opts states a parent, the first
// event a child of that parent. Time, BranchFrom, Digest and Size are
// not compared. Stored events of another content, or a batch of which
// only some events are stored, give ErrConflict naming the id, and
// nothing is written: a batch cut short by a crash (a prefix of it
// durable) is completed by appending its missing events, with the ids
// they had, under ExpectParent set to the last stored one. The ids
// within a batch must be distinct (ErrInvalidEvent). Events without an
// id get a new one, as with Append, and are never stored already: a batch
// mixing both is new, or a conflict.
//
// Expected parent: when opts states one, the batch's first event must
// become its child (see AppendOptions), else ErrConflict. The ids are
// checked first: a retry whose original already moved HEAD is still
// recognized as stored.
//
// Durability: as AppendBatch when events are written. When AppendWith
// returns stored events, they were durable before the call returned
// (published, or waited for while their first append was in flight). Both
// checks and the write happen under the session's lock: another goroutine
// of this Store cannot append between them, another process cannot write
// the session at all (ErrLocked), and with Options.Remote another Store
// writes the session only after taking it over, from the log on object
// storage, which holds every acknowledged event: a retry sent to the new
// holder finds the events its first attempt stored.
//
// Errors: as AppendBatch, also for a batch that is stored (a read-only
// store gives ErrReadOnly, a session that stopped writing
// ErrSessionFailed: read the events with Event instead); ErrConflict,
// with nothing written;
// ErrInvalidEvent for an id that is not a UUIDv7, repeated ids, or opts
// with both ExpectRoot and ExpectParent. An empty batch returns nil, nil.
func (s *Store) AppendWith(ctx context.Context, session uuid.UUID, opts AppendOptions, events ...Event) ([]Event, error) {
	if opts.Stored != nil {
		*opts.Stored = false
	}
	if len(events) == 0 {
		return nil, nil
	}
	return s.appendEvents(ctx, session, events, opts, nil)
}

// errRecheck is a check's signal that it released the session's mutex
// (waiting for a sync, loading the index) and must run again.
var errRecheck = errors.New("sessionstore: check again")

// storedBatch is a check's signal that the batch is stored already: the
// append writes nothing and returns events.
type storedBatch struct{ events []Event }

func (b *storedBatch) Error() string { return "sessionstore: the batch is stored already" }

// storedOrErr returns the events of a storedBatch, or err.
func storedOrErr(err error) ([]Event, error) {
	var b *storedBatch
	if errors.As(err, &b) {
		return b.events, nil
	}
	return nil, err
}

// checkCallerID refuses an id a caller set that is not a UUIDv7.
func checkCallerID(id uuid.UUID) error {
	if id != uuid.Nil && (id.Version() != 7 || id.Variant() != uuid.RFC4122) {
		return invalidEventf("ID %s is not a UUIDv7 (version %d, variant %s): set ID to a new uuid.NewV7(), or leave it unset for Append to assign one", id, id.Version(), id.Variant())
	}
	return nil
}

// retryCheck returns the check of a batch with caller-chosen ids or an
// expected parent, which runs next (the caller's check, nil for none)
// when the batch is not stored; nil when there is nothing to check.
// byID reports whether the check needs the whole index.
func retryCheck(batch []pendingEvent, opts AppendOptions, next func(h *openSession) error) (check func(h *openSession) error, byID bool, err error) {
	if opts.ExpectRoot && opts.ExpectParent != uuid.Nil {
		return nil, false, invalidEventf("AppendOptions: ExpectRoot and ExpectParent %s contradict each other", opts.ExpectParent)
	}
	for i := range batch {
		id := batch[i].ev.ID
		if id == uuid.Nil {
			continue
		}
		byID = true
		for j := range i {
			if batch[j].ev.ID == id {
				return nil, false, invalidEventf("events %d and %d of the batch have the same ID %s", j, i, id)
			}
		}
	}
	if !byID && !opts.stated() {
		return nil, false, nil
	}
	parent := func(h *openSession) error {
		if err := h.writable(); err != nil {
			return err // a session that refuses writes answers no retry either
		}
		if err := checkParent(h, opts); err != nil {
			return err
		}
		if next != nil {
			return next(h)
		}
		return nil
	}
	if !byID {
		return parent, false, nil
	}
	return func(h *openSession) error {
		if err := h.writable(); err != nil {
			return err
		}
		if h.Partial || h.headEntry != nil {
			// Ids are looked up in the whole index.
			if err := h.materialize(); err != nil {
				return err
			}
			if h.Partial || h.headEntry != nil {
				return fmt.Errorf("sessionstore: session %s: its index is not loaded (state %s)", h.id, h.state)
			}
			return errRecheck
		}
		for i := range batch {
			if id := batch[i].ev.ID; id != uuid.Nil && h.inFlight(id) {
				// The first attempt is being written: wait for its sync.
				h.pipe.WaitSync()
				return errRecheck
			}
		}
		stored, err := h.storedBatch(batch, opts)
		if err != nil {
			return err
		}
		if stored != nil {
			if opts.Stored != nil {
				*opts.Stored = true // final: the append returns these events
			}
			return &storedBatch{events: stored}
		}
		return parent(h)
	}, true, nil
}

// checkParent checks the parent opts expects against the next parent,
// with h.mu held.
func checkParent(h *openSession, opts AppendOptions) error {
	if !opts.stated() {
		return nil
	}
	next, how := h.tip(), "HEAD"
	if h.pending != uuid.Nil {
		next, how = h.pending, "the pending Branch selection"
	}
	if next != opts.ExpectParent {
		want := "a root (an empty session)"
		if !opts.ExpectRoot {
			want = "a child of " + opts.ExpectParent.String()
		}
		got := "nothing"
		if next != uuid.Nil {
			got = next.String()
		}
		return fmt.Errorf("%w: session %s: the append was to be %s, but the next parent (%s) is %s; nothing was written", ErrConflict, h.id, want, how, got)
	}
	return nil
}

// inFlight reports whether id names a record in flight.
func (h *openSession) inFlight(id uuid.UUID) bool {
	fl := h.pipe.Inflight()
	for i := range fl {
		if fl[i].entry.ID == id {
			return true
		}
	}
	return false
}

// storedBatch returns the batch's events as the session stores them when
// all of them are stored with the same content; nil when none is; an
// ErrConflict otherwise. It runs with h.mu held and the whole index
// loaded, and reads the stored records of inline events.
func (h *openSession) storedBatch(batch []pendingEvent, opts AppendOptions) ([]Event, error) {
	out := make([]Event, len(batch))
	found, missing := -1, -1
	for i := range batch {
		k, ok := h.ByID[batch[i].ev.ID]
		if id := batch[i].ev.ID; !ok && id != uuid.Nil && h.inPrefix(id) {
			// A fork's prefix is its parent's: an event of it cannot be
			// appended to the fork, nor be a retry of one appended here.
			return nil, fmt.Errorf("%w: session %s: event %s is in the fork's prefix, an event of session %s; nothing was written", ErrConflict, h.id, id, h.meta.ForkedFrom.Session)
		}
		if batch[i].ev.ID == uuid.Nil || !ok {
			if missing < 0 {
				missing = i
			}
			continue
		}
		if found < 0 {
			found = i
		}
		ev, err := h.sameContent(&h.Entries[k], &batch[i])
		if err != nil {
			return nil, err
		}
		out[i] = ev
	}
	switch {
	case found < 0:
		return nil, nil
	case missing >= 0:
		what := "has no id"
		if batch[missing].ev.ID != uuid.Nil {
			what = fmt.Sprintf("%s is not stored", batch[missing].ev.ID)
		}
		return nil, fmt.Errorf("%w: session %s: event %d of the batch (%s) is stored, event %d (%s) is not: append the events not stored, with ExpectParent, instead of the whole batch; nothing was written",
			ErrConflict, h.id, found, batch[found].ev.ID, missing, what)
	}
	for i := range out {
		var want uuid.UUID // ExpectRoot: uuid.Nil
		switch {
		case i > 0:
			want = out[i-1].ID
		case !opts.stated():
			continue
		default:
			want = opts.ExpectParent
		}
		if out[i].ParentID != want {
			return nil, fmt.Errorf("%w: session %s: event %s is stored as a child of %s, not of %s; nothing was written", ErrConflict, h.id, out[i].ID, out[i].ParentID, want)
		}
	}
	return out, nil
}

// sameContent returns the stored event of e, when it has the content of
// p (kind, role and record), else an ErrConflict naming the difference.
func (h *openSession) sameContent(e *entry, p *pendingEvent) (Event, error) {
	var ev Event
	fillHeader(&ev, &e.Header)
	differ := func(what string) (Event, error) {
		return Event{}, fmt.Errorf("%w: session %s: event %s is stored with another %s; nothing was written", ErrConflict, h.id, ev.ID, what)
	}
	want := headerOf(&Event{Kind: p.ev.Kind, Role: p.ev.Role})
	if want.Kind != e.Kind {
		return differ(fmt.Sprintf("kind (%s, not %s)", ev.Kind, p.ev.Kind))
	}
	if want.Role != e.Role {
		return differ(fmt.Sprintf("role (%q, not %q)", ev.Role, p.ev.Role))
	}
	if e.Size != int64(len(p.rec)) {
		return differ("record")
	}
	if p.key != nil {
		// Envelopes differ in their nonces: the records are compared.
		same, err := h.sameSealed(e, p)
		if err != nil {
			return Event{}, err
		}
		if !same {
			return differ("record")
		}
		if e.Blob {
			ev.Digest = string(canonical.AppendDigest(nil, e.Digest))
		}
	} else if e.Blob {
		if sha256.Sum256(p.rec) != e.Digest {
			return differ("record")
		}
		ev.Digest = string(canonical.AppendDigest(nil, e.Digest))
	} else {
		r := h.files.chunkReader()
		stored, err := readEntry(r, e)
		same := err == nil && bytes.Equal(stored.Record, p.rec)
		r.close()
		if err != nil {
			return Event{}, err
		}
		if !same {
			return differ("record")
		}
	}
	ev.Record, ev.Size = p.record(), e.Size
	return ev, nil
}

// sameSealed reports whether the stored envelope of e opens to p's record.
func (h *openSession) sameSealed(e *entry, p *pendingEvent) (bool, error) {
	var env []byte
	if e.Blob {
		b, err := readBlob(h.opts.fs, h.dir, e.Digest, e.Size)
		if err != nil {
			return false, err
		}
		env = b
	} else {
		r := h.files.chunkReader()
		stored, err := readEntry(r, e)
		r.close()
		if err != nil {
			return false, err
		}
		env = stored.Record
	}
	rec, err := p.key.openRecord(env)
	if err != nil {
		return false, corruptf(h.dir, 0, "event %s: %w", e.ID, err)
	}
	return bytes.Equal(rec, p.plain), nil
}

// newIDs checks, with h.mu held right before the batch is queued, that no
// caller-chosen id of the batch is in the session: the batch's check
// returned the stored events or a conflict for those that are, so this
// only guards the invariant that an id is written once.
func (h *openSession) newIDs(batch []pendingEvent) error {
	for i := range batch {
		if id := batch[i].ev.ID; id != uuid.Nil && h.known(id) {
			return fmt.Errorf("%w: session %s: event %s is in the session already; nothing was written", ErrConflict, h.id, id)
		}
	}
	return nil
}
