package seam

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// LogWriter writes one session's log in an object store, holding the
// session's lease: the fencing of the log; it reads the log back too
// (ReadView). Obj, ID, Store and Now are set
// once; the other fields are guarded by Mu, which a caller holds across
// each PutLocked so that the log's numbers follow its order.
type LogWriter struct {
	Obj   Objects
	ID    uuid.UUID        // the session
	Store uuid.UUID        // the Store that holds the lease
	Now   func() time.Time // the local monotonic clock, for the grace of deletions only

	// Window is how many data objects PutData keeps in flight (Window
	// when 0); set once, before the lease is taken.
	Window int
	// Local is recorded in the lease's create and open markers
	// (Header.Local): it acknowledges data after the local sync. Guarded
	// by Mu.
	Local bool
	// OnLost, when set, is called (in a goroutine of its own) when a
	// data object's Create fails and the writer had not failed before:
	// a lease that acknowledges after the local sync stores what it
	// acknowledged through a new lease (the root's recoverTail). Set once.
	OnLost func(error)
	// Carry is the window the lease's markers record when larger than
	// its own: the largest of the leases before it whose Creates may
	// still be in flight (Take). Guarded by Mu.
	Carry uint64
	// Fills is how many numbers after its open marker the lease filled
	// (FillLocked), recorded by a Store that takes the session with
	// the marker: set by Take before it. Guarded by Mu.
	Fills int

	Mu    sync.Mutex
	Lease uuid.UUID // this open's lease
	// Seq is the newest log object this lease stored with every object
	// of the lease before it (0 before it holds the session): what State
	// holds and what is acknowledged. Issued is the newest number whose
	// Create it issued (PutData: up to Window beyond Seq).
	Seq    uint64
	Issued uint64
	Lost   error   // ErrFenced or ErrRemote once a Create failed: no more log objects
	State  *State  // the log's state as of Seq
	Meta   []byte  // session.json as the log holds it
	Dying  []Dying // data objects sealing made unneeded, to delete after the lease time
	Holder bool    // the lease is held (between its open marker and its release)
	// Renewed says the lease put a renewal (Renew), which its release
	// deletes (EndRenewals).
	Renewed bool
	// Written is when this lease last wrote to the object store (a log
	// object or a renewal), on the local clock Now: Renew is due when it
	// is a while ago.
	Written time.Time

	flight   map[uint64]*inFlight // PutData's Creates not yet applied, by number
	failedAt uint64               // the first number of this lease whose Create failed; 0 for none
	moved    *sync.Cond           // on Mu: a Create in flight ended
	draining int                  // DrainLocked calls waiting: PutData issues nothing meanwhile
}

// inFlight is a data object whose Create PutData issued.
type inFlight struct {
	h    *Header
	done bool
	err  error // the Create's failure, once done
}

// window is the writer's window: Window unless set.
func (l *LogWriter) window() int {
	if l.Window > 0 {
		return l.Window
	}
	return Window
}

// cond returns the condition Creates in flight signal, on Mu (held).
func (l *LogWriter) cond() *sync.Cond {
	if l.moved == nil {
		l.moved = sync.NewCond(&l.Mu)
	}
	return l.moved
}

// Take starts a lease whose marker is to be created next, after log
// object seq, with Mu held: the lease's numbers follow seq.
//
// carry is the largest window of the leases before it whose Creates may
// still be in flight (the taken marker's MaxInFlight), fills how many
// numbers after its marker it will fill (FillLocked), which the marker
// records.
func (l *LogWriter) Take(lease uuid.UUID, seq uint64, st *State, meta []byte, carry uint64, fills int) {
	l.Lease, l.State, l.Meta, l.Seq, l.Issued, l.Lost, l.Holder = lease, st, meta, seq, seq, nil, true
	l.failedAt, l.Carry, l.Fills = 0, carry, fills
}

// DrainLocked waits, with Mu held (released while it waits), until no
// Create of PutData is in flight: each was stored and applied in order,
// or failed (Lost says why).
func (l *LogWriter) DrainLocked() {
	l.draining++
	for len(l.flight) > 0 {
		l.cond().Wait()
	}
	l.draining--
	l.cond().Broadcast()
}

// Dying are data objects unneeded since a time.
type Dying struct {
	Since time.Time
	Seqs  []SeqRange
}

// PutLocked creates the next log object, of header h (its Lease and Store
// set to the writer's) and payload, with Mu held by the caller, and
// returns its number. When it returns nil the object is durable in the
// object store and applied to State (a seal record's data objects
// become Dying). An object of that number that exists is this writer's
// only if it holds exactly these bytes (a Create retried after its answer
// was lost); otherwise another writer took the session, and the writer is
// fenced: this and every later call return an error matching ErrFenced.
// Any other failure leaves the object's state unknown: every later call
// returns an error matching ErrRemote. A writer that does not hold the
// session writes nothing (ErrRemote).
//
// PutLocked first waits for the Creates of PutData in flight (DrainLocked,
// which releases Mu while it waits): every object but a data object is
// created alone, after every object before it is stored.
func (l *LogWriter) PutLocked(ctx context.Context, h *Header, payload []byte) (uint64, error) {
	l.DrainLocked()
	if l.Lost != nil {
		return 0, l.Lost
	}
	if !l.Holder {
		return 0, fmt.Errorf("%w: session %s is not held", ErrRemote, l.ID)
	}
	h.Lease, h.Store, h.Acked = l.Lease, l.Store, l.Seq
	if h.Kind == KindCreate || h.Kind == KindOpen || h.Kind == KindRelease {
		h.Window = int(max(uint64(l.window()), l.Carry))
	}
	if h.Kind == KindOpen {
		h.Fills = l.Fills
	}
	if h.Kind == KindCreate || h.Kind == KindOpen {
		h.Local = l.Local
	}
	b, err := EncodeObject(h, payload)
	if err != nil {
		return 0, err
	}
	seq := l.Seq + 1
	if err := l.create(ctx, seq, b); err != nil {
		l.Lost = err
		return 0, err
	}
	l.Seq, l.Issued = seq, seq
	if l.Now != nil {
		l.Written = l.Now()
	}
	before := State{Live: l.State.Live}
	if h.Kind == KindSeal {
		before.Live = slices.Clone(l.State.Live)
	}
	l.State.Apply(seq, h)
	if h.Kind == KindSeal {
		now := l.Now()
		var dead []SeqRange
		for _, p := range before.Live {
			if p.Chunk == h.Chunk {
				dead = AddSeq(dead, p.Seq)
			}
		}
		if len(dead) > 0 {
			l.Dying = append(l.Dying, Dying{Since: now, Seqs: dead})
		}
		StampDead(l.State.Dead, now)
	}
	return seq, nil
}

// create creates log object seq holding b, without Mu. An object of that
// number that exists is this writer's only if it holds exactly these
// bytes (a Create retried after its answer was lost); otherwise another
// writer took the session: ErrFenced. Any other failure leaves the
// object's state unknown: ErrRemote.
func (l *LogWriter) create(ctx context.Context, seq uint64, b []byte) error {
	key := LogKey(l.ID, seq)
	err := l.Obj.Create(ctx, key, b)
	if errors.Is(err, ErrObjectExists) && l.storedOwn(ctx, key, b) {
		// A retry of a Create whose first answer was lost: the object is
		// this one (its header names this lease), not another writer's.
		err = nil
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrObjectExists):
		return fmt.Errorf("%w: session %s: log object %s exists (another writer took the session)", ErrFenced, l.ID, key)
	default:
		return fmt.Errorf("%w: session %s: the state of log object %s is unknown: %w", ErrRemote, l.ID, key, RemoteErr("create", key, err))
	}
}

// PutData issues the Create of the next data object, of header h (a
// data header: its Lease and Store set to the writer's) and payload,
// without waiting for the Creates before it, and returns a function
// that waits for it: nil once the object and every object of the lease
// before it are stored (and applied to State, in log order), else why
// not (ErrFenced, ErrRemote, as PutLocked). timeout bounds the Create,
// from its issue.
//
// At most Window data objects are in flight: PutData waits (releasing
// Mu) while Window objects after Seq are issued, or a DrainLocked waits
// for them to end (a seal record, meta, a release come first). Once one of them fails,
// no later one is acknowledged, even if it was stored (it lies after a
// number this lease does not hold), and nothing more is issued: Lost.
// With Mu held by the caller, as PutLocked.
func (l *LogWriter) PutData(timeout time.Duration, h *Header, payload []byte) func() error {
	for l.Lost == nil && l.Holder && (l.Issued >= l.Seq+uint64(l.window()) || l.draining > 0) {
		l.cond().Wait()
	}
	if l.Lost != nil {
		err := l.Lost
		return func() error { return err }
	}
	if !l.Holder {
		err := fmt.Errorf("%w: session %s is not held", ErrRemote, l.ID)
		return func() error { return err }
	}
	h.Lease, h.Store, h.Acked = l.Lease, l.Store, l.Seq
	b, err := EncodeObject(h, payload)
	if err != nil {
		return func() error { return err }
	}
	l.Issued++
	seq, f := l.Issued, &inFlight{h: h}
	if l.flight == nil {
		l.flight = map[uint64]*inFlight{}
	}
	l.flight[seq] = f
	done := make(chan struct{})
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err := l.create(ctx, seq, b)
		cancel()
		l.Mu.Lock()
		defer l.Mu.Unlock()
		f.done, f.err = true, err
		if err != nil && (l.failedAt == 0 || seq < l.failedAt) {
			l.failedAt = seq
			if l.Lost == nil && l.OnLost != nil {
				go l.OnLost(err)
			}
			if l.Lost == nil || errors.Is(err, ErrFenced) {
				l.Lost = err
			}
		}
		l.applyFlight()
		l.cond().Broadcast()
	}()
	return func() error {
		<-done
		l.Mu.Lock()
		defer l.Mu.Unlock()
		for l.Seq < seq && (l.failedAt == 0 || l.failedAt > seq) {
			l.cond().Wait()
		}
		if l.Seq >= seq {
			return nil
		}
		return l.Lost
	}
}

// applyFlight applies, with Mu held, the data objects in flight that are
// stored with every object before them, in log order, and forgets those
// that end after a failed one.
func (l *LogWriter) applyFlight() {
	for {
		f, ok := l.flight[l.Seq+1]
		if !ok || !f.done || f.err != nil || (l.failedAt != 0 && l.Seq+1 >= l.failedAt) {
			break
		}
		delete(l.flight, l.Seq+1)
		l.Seq++
		if l.Now != nil {
			l.Written = l.Now()
		}
		l.State.Apply(l.Seq, f.h)
	}
	if l.failedAt != 0 {
		for seq, f := range l.flight {
			if f.done && seq >= l.failedAt {
				delete(l.flight, seq)
			}
		}
	}
}

// FillLocked creates voids (KindVoid) at the n numbers after Seq, with
// Mu held, after the taking marker of a Store that took the session from
// a holder that may still have Creates in flight: once those numbers are
// taken, none of its Creates can land after the marker. A number found
// taken by another lease's data, seal, meta or lanes object is such a
// Create that landed first: readers skip it, and so does the fill. One
// taken by a marker or a void is another Store's that took the session
// meanwhile: the writer is fenced (ErrFenced).
func (l *LogWriter) FillLocked(ctx context.Context, n int) error {
	for range n {
		if l.Lost != nil {
			return l.Lost
		}
		seq := l.Seq + 1
		key := LogKey(l.ID, seq)
		b, err := EncodeObject(&Header{Kind: KindVoid, Lease: l.Lease, Store: l.Store}, nil)
		if err != nil {
			return err
		}
		err = l.Obj.Create(ctx, key, b)
		if errors.Is(err, ErrObjectExists) {
			got, gerr := l.Obj.Get(ctx, key, 0, -1)
			if gerr != nil {
				l.Lost = fmt.Errorf("%w: session %s: log object %s: %w", ErrRemote, l.ID, key, RemoteErr("get", key, gerr))
				return l.Lost
			}
			if !bytes.Equal(got, b) {
				h, _, derr := DecodeObject(key, got)
				if derr != nil || IsMarker(h.Kind) || h.Kind == KindVoid {
					l.Lost = fmt.Errorf("%w: session %s: log object %s exists (another writer took the session)", ErrFenced, l.ID, key)
					return l.Lost
				}
			}
			err = nil
		}
		if err != nil {
			l.Lost = fmt.Errorf("%w: session %s: the state of log object %s is unknown: %w", ErrRemote, l.ID, key, RemoteErr("create", key, err))
			return l.Lost
		}
		l.Seq, l.Issued = seq, seq
	}
	return nil
}

// storedOwn reports whether the object at key holds exactly b.
func (l *LogWriter) storedOwn(ctx context.Context, key string, b []byte) bool {
	got, err := l.Obj.Get(ctx, key, 0, -1)
	return err == nil && bytes.Equal(got, b)
}

// Renew renews the lease of a holder that wrote nothing for a while: it
// puts RenewKey(ID, Lease), holding the lease's id (a Put overwrites the lease's previous
// renewal: one object per lease, whatever the number of renewals).
// HolderIdle, which a Store that would take the session over reads,
// counts only the renewal of the lease of the log's newest object, so a
// holder that lost the session renews nothing that counts: a Store that
// took the session wrote an object of its own lease since. Renewal is
// liveness only: fencing never depends on it (a Create at a taken number
// fails whatever the clocks say). A Store that does not hold the session,
// or lost it, puts nothing and returns nil.
//
// Renew first lists the log's newest object: when it is another lease's
// (a Store took the session over, or deleted it), the writer is fenced
// then and there (Lost, ErrFenced) and puts nothing, so that an idle
// holder learns it lost the session without writing, and stops renewing.
func (l *LogWriter) Renew(ctx context.Context) error {
	l.Mu.Lock()
	lease, held := l.Lease, l.Holder && l.Lost == nil
	l.Mu.Unlock()
	if !held {
		return nil
	}
	seqs, infos, err := l.ListLog(ctx, 1)
	if err != nil {
		return err
	}
	if len(seqs) == 1 {
		newest := seqs[0]
		l.Mu.Lock()
		// A Create of this lease is issued with Mu held: once it is
		// taken, l.Issued counts every object of this lease that the
		// listing could have seen.
		if newest > l.Issued && l.Lost == nil {
			l.Lost = fmt.Errorf("%w: session %s: log object %s is another writer's (found renewing the lease)", ErrFenced, l.ID, infos[0].Key)
		}
		lost := l.Lost
		l.Mu.Unlock()
		if lost != nil {
			return nil
		}
	}
	key := RenewKey(l.ID, lease)
	if err := l.Obj.Put(ctx, key, []byte(lease.String())); err != nil {
		return RemoteErr("put", key, err)
	}
	l.Mu.Lock()
	if l.Now != nil {
		l.Written = l.Now()
	}
	l.Renewed = true
	l.Mu.Unlock()
	return nil
}

// HolderIdle returns how long the holder of the log v read has written
// nothing, on the object store's clock (StoreClock): the age of the
// newest log object, or, when that is at least lease old, of the renewal
// (Renew) of the newest marker's lease, if younger. Reading the renewal
// costs a Stat, only then.
func (l *LogWriter) HolderIdle(ctx context.Context, v *View, lease time.Duration) (time.Duration, error) {
	now, err := l.StoreClock(ctx)
	if err != nil {
		return 0, err
	}
	idle := now.Sub(v.Newest.ModTime)
	if idle < lease || v.Marker == nil {
		return idle, nil
	}
	// The holder is the newest marker's lease: the newest object may be
	// a late Create of an earlier lease, whose renewals count no more.
	key := RenewKey(l.ID, v.Marker.Lease)
	info, err := l.Obj.Stat(ctx, key)
	if errors.Is(err, ErrObjectNotFound) {
		return idle, nil // never renewed
	}
	if err != nil {
		return 0, RemoteErr("stat", key, err)
	}
	return min(idle, now.Sub(info.ModTime)), nil
}

// EndRenewals deletes the renewal of lease, once nothing can renew it:
// after its release, or after a Store took the session from it. A failure
// leaves an empty object that a Delete of the session removes.
func (l *LogWriter) EndRenewals(ctx context.Context, lease uuid.UUID) {
	_ = l.Obj.Delete(ctx, RenewKey(l.ID, lease))
}
