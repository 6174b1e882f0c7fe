package sessionstore

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/durable"
	sessreg "github.com/sessionstore/sessionstore/internal/registry"
)

// registry holds a Store's open sessions: it opens a session on first use,
// counts the calls using each one, and closes idle ones beyond
// Options.MaxOpenSessions, least recently used first (the table,
// internal/registry's Table). It keeps what must outlive a session closed
// to make room (kept): its pending Branch selection, the failure that
// stopped its writes, and the repairs its reconciliation made that Repair
// has not reported. It forgets a closed session (a repair that failed
// closes one) when the last call using it ends, so that the next call
// opens it again from its files. Lock order: a session's mu, then the
// table's.
type registry struct {
	opts *Options
	hub  *hub
	dir  func(uuid.UUID) string // a session's directory
	// watch is given to every session it opens: the catalogue, told of
	// each session.json write (opensession.go, metaWatcher).
	watch metaWatcher

	tab *sessreg.Table[*openSession, kept]

	// opened holds, for each session this registry opened, when it last
	// did (Prune's KeepRecent).
	opened sync.Map // uuid.UUID -> time.Time
}

// regEntry is a session's entry in the registry's table: the count of
// the calls using it, its place among the idle ones, and whether its open
// has ended.
type regEntry = sessreg.Entry[*openSession]

// kept is what the registry keeps of a session closed while open, until
// it opens again: closing an idle session must not change where its next
// event goes, a session whose writes a failed sync stopped reopens failed
// (loadFailed), as the package doc promises until the Store is reopened,
// and the next Repair reports the repairs reconciliation made.
type kept struct {
	selection uuid.UUID // the pending Branch selection; uuid.Nil if none
	failure   failure   // the failure that stopped writes; err nil if none
	repaired  []string  // repairs not reported by a Repair yet
}

// add adds what a later close keeps to k: its selection and failure
// replace k's, its repairs follow k's.
func (k *kept) add(later kept) {
	if later.selection != uuid.Nil {
		k.selection = later.selection
	}
	if later.failure.err != nil {
		k.failure = later.failure
	}
	k.repaired = append(k.repaired, later.repaired...)
}

// failure is what the registry keeps of a session closed after a failed
// sync: the error, and the newest acknowledged event.
type failure struct {
	err  error
	head uuid.UUID
}

func newRegistry(opts *Options, hb *hub, dir func(uuid.UUID) string, watch metaWatcher) *registry {
	r := &registry{opts: opts, hub: hb, dir: dir, watch: watch}
	r.tab = sessreg.NewTable[*openSession, kept](sessreg.Config[*openSession]{
		Max:       opts.MaxOpenSessions,
		New:       r.newSession,
		CloseIdle: r.closeIdle,
	})
	return r
}

// newSession is the table's Config.New: a session in state opening, its
// mutex held while the call that registered it opens it, so that other
// callers wait for the result. The mutex is taken with the table's held,
// against the lock order, on a session no other call has yet.
func (r *registry) newSession(e *regEntry) *openSession {
	r.opened.Store(e.ID, time.Now())
	h := newOpenSession(e.ID, r.dir(e.ID), r.opts, r.hub)
	h.watch = r.watch
	h.entry = e
	h.mu.Lock()
	return h
}

// openedAt returns when this registry last opened session id, the time
// now when it has it open, and false when it never opened it: wall clock
// times (time.Now), so that the clock Options' tests replace keeps its
// sequence of readings.
func (r *registry) openedAt(id uuid.UUID) (time.Time, bool) {
	if _, ok := r.tab.Opened(id); ok {
		return time.Now(), true
	}
	t, ok := r.opened.Load(id)
	if !ok {
		return time.Time{}, false
	}
	return t.(time.Time), true
}

// lookup returns the registered session id, nil if none, having waited
// for its open to end.
func (r *registry) lookup(id uuid.UUID) *openSession {
	h, _ := r.tab.Lookup(id)
	return h
}

// encrypted reports whether session id is encrypted as its open session
// in this registry knows it; ok false when it is not open (or still
// opening): session.json then says.
func (r *registry) encrypted(id uuid.UUID) (enc, ok bool) {
	h, found := r.tab.Opened(id)
	if !found {
		return false, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == stateClosed || h.state == stateOpening {
		return false, false
	}
	return h.meta.Encrypted, true
}

// updatedAt returns the UpdatedAt of session id as its open session in
// this registry knows it (openSession.updatedAt), and false when it is not
// open (or still opening): session.json then says.
func (r *registry) updatedAt(id uuid.UUID) (time.Time, bool) {
	h, ok := r.tab.Opened(id)
	if !ok {
		return time.Time{}, false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.state == stateClosed || h.state == stateOpening {
		return time.Time{}, false
	}
	return h.updatedAt(), true
}

// live brings the UpdatedAt of metas up to date with the sessions this
// registry has open, whose session.json lags their appends until Close
// or Flush.
func (r *registry) live(metas []Meta) {
	for i := range metas {
		if t, ok := r.updatedAt(metas[i].ID); ok && t.After(metas[i].UpdatedAt) {
			metas[i].UpdatedAt = t
		}
	}
}

// acquire returns the open session id with its mutex held, opening (and,
// when create is non-nil, creating) it first, with its whole index
// loaded. The caller must pass it to release when done.
func (r *registry) acquire(ctx context.Context, id uuid.UUID, create *Meta) (*openSession, error) {
	return r.acquireReady(ctx, id, create, (*openSession).materialize, false)
}

// acquireAppend is acquire for appends: a lazy session starts appending
// without its index (appendMode).
func (r *registry) acquireAppend(ctx context.Context, id uuid.UUID, _ *Meta) (*openSession, error) {
	return r.acquireReady(ctx, id, nil, (*openSession).appendMode, false)
}

// acquireReady is acquireOpen (known: see there), then ready(h) with the
// mutex held; on its error the session is released.
func (r *registry) acquireReady(ctx context.Context, id uuid.UUID, create *Meta, ready func(h *openSession) error, known bool) (*openSession, error) {
	h, err := r.acquireOpen(ctx, id, create, known)
	if err != nil {
		return nil, err
	}
	if err := ready(h); err != nil {
		r.release(h)
		return nil, err
	}
	return h, nil
}

// acquireLazy is acquire for a caller that can use a session in any state
// with HEAD (lazy, appending: see lazy.go).
func (r *registry) acquireLazy(ctx context.Context, id uuid.UUID, create *Meta) (*openSession, error) {
	return r.acquireOpen(ctx, id, create, false)
}

// acquireOpen is acquireLazy; with known, a read-only Store's handle
// already indexed is used as it is, without looking for another writer's
// changes (acquireKnown).
func (r *registry) acquireOpen(ctx context.Context, id uuid.UUID, create *Meta, known bool) (*openSession, error) {
	e, open, err := r.tab.Acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	h := e.Value
	if open {
		if err := r.openNew(ctx, h, create); err != nil {
			return nil, err
		}
		return h, nil
	}
	h.mu.Lock()
	if err := h.usable(); err != nil {
		r.release(h)
		return nil, err
	}
	if create != nil {
		r.release(h)
		return nil, fmt.Errorf("%w: session %s", ErrExists, id)
	}
	if r.opts.ReadOnly && !(known && h.state == stateIndexed) {
		if err := h.follow(ctx); err != nil {
			r.release(h)
			return nil, err
		}
		if err := h.refresh(); err != nil {
			r.release(h)
			return nil, err
		}
	}
	return h, nil
}

// acquireKnown is acquire for reads of events the caller knows the
// session holds (a search hit): a read-only Store's handle already
// indexed is used without looking for another writer's changes; the
// caller checks what it read and acquires again (acquire) when it is not
// all there.
func (r *registry) acquireKnown(ctx context.Context, id uuid.UUID, _ *Meta) (*openSession, error) {
	if !r.opts.ReadOnly {
		return r.acquire(ctx, id, nil)
	}
	return r.acquireReady(ctx, id, nil, (*openSession).materialize, true)
}

// openNew opens a session registered in state opening, with h.mu held. On
// failure (also on a panic) it closes and forgets the session, so that
// other callers do not wait on a session that never opened. What the
// registry kept of the session is restored into it, or kept again when
// the open fails.
func (r *registry) openNew(ctx context.Context, h *openSession, create *Meta) error {
	opened := false
	var prior kept // what the table kept for the session, taken for the open
	wasKept := false
	defer h.entry.Opened()
	defer func() {
		if !opened {
			// A failed (or panicking) open gives back what was kept, so
			// that the next open finds it.
			if wasKept {
				r.tab.Keep(h.id, func(k *kept) {
					restored := prior
					restored.add(*k)
					*k = restored
				})
			}
			if h.state != stateClosed {
				h.becomeClosed(fmt.Errorf("sessionstore: opening session %s failed", h.id))
			}
			r.release(h)
		}
	}()
	fsys := r.opts.fs
	if create != nil {
		if err := fsys.MkdirAll(h.dir, r.opts.DirMode); err != nil {
			h.becomeClosed(err)
			return err
		}
	} else if _, err := fsys.Stat(filepath.Join(h.dir, metaFile)); err != nil && r.opts.Remote != nil {
		// A remote session this machine lacks: opening restores it, into
		// a directory whose name is durable before any file in it is.
		if err := durable.MkdirAll(fsys, h.dir, r.opts.DirMode); err != nil {
			h.becomeClosed(err)
			return err
		}
	} else if err != nil {
		if noSession(fsys, h.dir, err) {
			err = fmt.Errorf("%w: session %s", ErrNotFound, h.id)
		}
		h.becomeClosed(err)
		return err
	}
	prior, wasKept = r.tab.Take(h.id)
	var p *failure
	if prior.failure.err != nil {
		p = &prior.failure
	}
	lock := func(path string) (io.Closer, error) { return r.lockSession(ctx, path) }
	if err := h.open(ctx, lock, create, p); err != nil {
		h.becomeClosed(err)
		return err
	}
	if prior.selection != uuid.Nil {
		h.pending = prior.selection
	}
	if len(prior.repaired) > 0 {
		h.repaired = append(prior.repaired, h.repaired...)
	}
	opened = true
	if r.tab.Len() > 1 {
		// Two sessions open at once: their commits may share the
		// journal's syncs (journal.go, storeJournal.commitWith), which is
		// made now, in the background.
		r.opts.jr.prepare()
	}
	return nil
}

// lockSession takes a session's lock file, waiting for it while ctx
// allows when Options.WaitForLock is set (sessreg.Lock).
func (r *registry) lockSession(ctx context.Context, path string) (io.Closer, error) {
	return sessreg.Lock(ctx, r.opts.fs, path, r.opts.FileMode, r.opts.WaitForLock, ErrLocked)
}

// release unlocks a session acquire returned. When no call uses it any
// more it becomes idle, and idle sessions beyond Options.MaxOpenSessions
// are closed, least recently used first. A session the call left closed
// (a failed repair) is forgotten at once, keeping its Branch selection,
// so that the next call opens it again from its files; the calls still
// using it get its cause.
func (r *registry) release(h *openSession) {
	r.closeLost(h)
	if h.state == stateClosed {
		// Lock order: a session's mu, then the table's.
		var keep func(*kept)
		if sel := h.pending; sel != uuid.Nil {
			keep = func(k *kept) { k.selection = sel }
		}
		r.tab.Forget(h.entry, keep)
	}
	h.mu.Unlock()
	r.releaseUnlocked(h)
}

// closeLost closes a remote session that lost its lease or whose remote
// state is unknown (remote.go), with h.mu held, so that release forgets
// it and the next call opens it again from the object store. Only the
// last call using it closes it: another may be in the commit pipeline,
// which writes and syncs the chunk without h.mu (its release closes it).
func (r *registry) closeLost(h *openSession) {
	if h.state != stateFailed || !remoteLost(h.writeFailure) || r.tab.Refs(h.id) > 1 {
		return
	}
	h.chunks.AwaitSealing()
	if h.state != stateFailed {
		return // closed meanwhile
	}
	if err := h.becomeClosed(h.cause); err != nil {
		r.opts.Logger.Warn("sessionstore: closing a session after a remote failure", "session", h.id, "err", err)
	}
}

// releaseUnlocked is release for a caller that has unlocked h.mu already,
// and left the session open (commit).
func (r *registry) releaseUnlocked(h *openSession) {
	if r.opts.Remote != nil {
		h.mu.Lock()
		if h.state == stateFailed && remoteLost(h.writeFailure) && r.tab.Refs(h.id) <= 1 {
			r.release(h) // closes it and forgets it, unlocking h.mu
			return
		}
		h.mu.Unlock()
	}
	r.tab.Release(h.entry)
}

// closeKeeping closes h, keeping what must outlive the close: its
// pending Branch selection, the failure that stopped its writes and the
// repairs not reported yet. No lock of the table is held.
func (r *registry) closeKeeping(h *openSession) error {
	h.mu.Lock()
	later := kept{selection: h.pending, repaired: h.repaired}
	if h.writeFailure != nil && !remoteLost(h.writeFailure) {
		later.failure = failure{err: h.writeFailure, head: h.head()}
	}
	h.mu.Unlock()
	err := h.close()
	if later.selection != uuid.Nil || later.failure.err != nil || len(later.repaired) > 0 {
		r.tab.Keep(h.id, func(k *kept) { k.add(later) })
	}
	return err
}

// closeIdle is the table's Config.CloseIdle, for a session closed to
// respect MaxOpenSessions or by CloseSession (closeOne). A failure is
// logged, and returned for CloseSession: the events were durable already,
// and what failed (a HEAD or metadata checkpoint) is rebuilt when the
// session is next opened.
func (r *registry) closeIdle(h *openSession) error {
	err := r.closeKeeping(h)
	if err != nil {
		r.opts.Logger.Warn("sessionstore: closing an idle session failed", "session", h.id, "err", err)
	}
	return err
}

// closeAll closes every open session, for Store.Close.
func (r *registry) closeAll() error {
	return r.tab.CloseAll(func(id uuid.UUID, h *openSession) error {
		if err := h.close(); err != nil {
			return fmt.Errorf("sessionstore: close session %s: %w", id, err)
		}
		return nil
	})
}

// closeOne closes session id if this Store has it open, as the registry
// making room would, once no call uses it: it waits (polling) for the
// calls using it to end, while ctx allows. Its Branch selection and a
// failure that stopped its writes are kept, as for eviction.
func (r *registry) closeOne(ctx context.Context, id uuid.UUID) error {
	return r.tab.CloseOne(ctx, id)
}

// hold takes session id away from every call of this Store, for Delete:
// once no call uses it (waiting, polling, while ctx allows) it closes the
// session if open and marks it as being closed, so that calls wanting it
// wait until release is called, and then open it again from its files,
// if any are left. What the registry kept for the session (Branch
// selection, failure, repairs) is kept through the close and forgotten on
// release only if deleted (a Delete that failed before moving the session
// leaves it as it was).
func (r *registry) hold(ctx context.Context, id uuid.UUID) (release func(deleted bool), err error) {
	return r.tab.Hold(ctx, id, func(h *openSession) {
		if err := r.closeKeeping(h); err != nil {
			r.opts.Logger.Warn("sessionstore: closing a session to delete it", "session", id, "err", err)
		}
	})
}
