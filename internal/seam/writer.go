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

	Mu     sync.Mutex
	Lease  uuid.UUID // this open's lease
	Seq    uint64    // the newest log object this lease wrote; 0 before it holds the session
	Lost   error     // ErrFenced or ErrRemote once a Create failed: no more log objects
	State  *State    // the log's state as of Seq
	Meta   []byte    // session.json as the log holds it
	Dying  []Dying   // data objects sealing made unneeded, to delete after the lease time
	Holder bool      // the lease is held (between its open marker and its release)
	// Renewed says the lease put a renewal (Renew), which its release
	// deletes (EndRenewals).
	Renewed bool
	// Written is when this lease last wrote to the object store (a log
	// object or a renewal), on the local clock Now: Renew is due when it
	// is a while ago.
	Written time.Time
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
func (l *LogWriter) PutLocked(ctx context.Context, h *Header, payload []byte) (uint64, error) {
	if l.Lost != nil {
		return 0, l.Lost
	}
	if !l.Holder {
		return 0, fmt.Errorf("%w: session %s is not held", ErrRemote, l.ID)
	}
	h.Lease, h.Store = l.Lease, l.Store
	b, err := EncodeObject(h, payload)
	if err != nil {
		return 0, err
	}
	seq := l.Seq + 1
	key := LogKey(l.ID, seq)
	err = l.Obj.Create(ctx, key, b)
	if errors.Is(err, ErrObjectExists) && l.storedOwn(ctx, key, b) {
		// A retry of a Create whose first answer was lost: the object is
		// this one (its header names this lease), not another writer's.
		err = nil
	}
	if err != nil {
		if errors.Is(err, ErrObjectExists) {
			l.Lost = fmt.Errorf("%w: session %s: log object %s exists (another writer took the session)", ErrFenced, l.ID, key)
		} else {
			l.Lost = fmt.Errorf("%w: session %s: the state of log object %s is unknown: %w", ErrRemote, l.ID, key, RemoteErr("create", key, err))
		}
		return 0, l.Lost
	}
	l.Seq = seq
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
		// A Create of this lease holds Mu: once it is taken, l.Seq counts
		// every object of this lease that the listing could have seen.
		if newest > l.Seq && l.Lost == nil {
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
// (Renew) of the newest object's lease, if younger. Reading the renewal
// costs a Stat, only then.
func (l *LogWriter) HolderIdle(ctx context.Context, v *View, lease time.Duration) (time.Duration, error) {
	now, err := l.StoreClock(ctx)
	if err != nil {
		return 0, err
	}
	idle := now.Sub(v.Newest.ModTime)
	if idle < lease || v.NewestHead == nil {
		return idle, nil
	}
	key := RenewKey(l.ID, v.NewestHead.Lease)
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
