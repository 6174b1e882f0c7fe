package sessionstore

import (
	"container/list"
	"context"
	"errors"
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
// Options.MaxOpenSessions, least recently used first. It keeps what must
// outlive a session closed to make room: its pending Branch selection, the
// failure that stopped its writes, and the repairs its reconciliation made
// that Repair has not reported. It forgets a closed session (a repair that
// failed closes one) when the last call using it ends, so that the next
// call opens it again from its files.
type registry struct {
	opts *Options
	hub  *hub
	dir  func(uuid.UUID) string // a session's directory
	// watch is given to every session it opens: the catalogue, told of
	// each session.json write (opensession.go, metaWatcher).
	watch metaWatcher

	mu       sync.Mutex // guards every field below and every session's refs and elem
	sessions map[uuid.UUID]*openSession
	idle     list.List                   // open sessions no call uses, most recently used first
	closing  map[uuid.UUID]chan struct{} // sessions being closed to respect MaxOpenSessions
	// Branch selections of sessions closed to respect MaxOpenSessions,
	// restored when they reopen: closing an idle session must not change
	// where its next event goes.
	selections map[uuid.UUID]uuid.UUID
	// Sessions closed to respect MaxOpenSessions after a failed sync
	// stopped their writes, with their newest acknowledged event: they
	// reopen failed (loadFailed), as the package doc promises until the
	// Store is reopened.
	failures map[uuid.UUID]failure
	// Repairs reconciliation made in sessions closed to respect
	// MaxOpenSessions before a Repair reported them: the next Repair does.
	repaired map[uuid.UUID][]string
}

// failure is what the registry keeps of a session closed after a failed
// sync: the error, and the newest acknowledged event.
type failure struct {
	err  error
	head uuid.UUID
}

func newRegistry(opts *Options, hb *hub, dir func(uuid.UUID) string, watch metaWatcher) *registry {
	return &registry{opts: opts, hub: hb, dir: dir, watch: watch, sessions: map[uuid.UUID]*openSession{}, closing: map[uuid.UUID]chan struct{}{},
		selections: map[uuid.UUID]uuid.UUID{}, failures: map[uuid.UUID]failure{}, repaired: map[uuid.UUID][]string{}}
}

// lookup returns the registered session id, nil if none, having waited
// for its open to end.
func (r *registry) lookup(id uuid.UUID) *openSession {
	r.mu.Lock()
	h := r.sessions[id]
	r.mu.Unlock()
	if h != nil {
		<-h.ready
	}
	return h
}

// updatedAt returns the UpdatedAt of session id as its open session in
// this registry knows it (openSession.updatedAt), and false when it is not
// open (or still opening): session.json then says.
func (r *registry) updatedAt(id uuid.UUID) (time.Time, bool) {
	r.mu.Lock()
	h := r.sessions[id]
	r.mu.Unlock()
	if h == nil {
		return time.Time{}, false
	}
	select {
	case <-h.ready:
	default:
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
	return r.acquireReady(ctx, id, create, (*openSession).materialize)
}

// acquireAppend is acquire for appends: a lazy session starts appending
// without its index (appendMode).
func (r *registry) acquireAppend(ctx context.Context, id uuid.UUID, _ *Meta) (*openSession, error) {
	return r.acquireReady(ctx, id, nil, (*openSession).appendMode)
}

// acquireReady is acquireLazy, then ready(h) with the mutex held; on its
// error the session is released.
func (r *registry) acquireReady(ctx context.Context, id uuid.UUID, create *Meta, ready func(h *openSession) error) (*openSession, error) {
	h, err := r.acquireLazy(ctx, id, create)
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
	for {
		r.mu.Lock()
		if closing, err := r.awaitClosing(ctx, id); closing {
			// Being closed to make room: waited, now open it again.
			if err != nil {
				return nil, err
			}
			continue
		}
		if h, ok := r.sessions[id]; ok {
			r.ref(h)
			r.mu.Unlock()
			select {
			case <-h.ready:
			case <-ctx.Done():
				// Another call is still opening the session (perhaps
				// waiting for its lock): give up without waiting for it.
				r.mu.Lock()
				victims := r.unref(h)
				r.mu.Unlock()
				r.closeVictims(victims)
				return nil, ctx.Err()
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
			if r.opts.ReadOnly {
				if err := h.refresh(); err != nil {
					r.release(h)
					return nil, err
				}
			}
			return h, nil
		}
		h := newOpenSession(id, r.dir(id), r.opts, r.hub)
		h.watch = r.watch
		h.refs = 1
		h.mu.Lock() // held while opening, so other callers wait for the result
		r.sessions[id] = h
		victims := r.evictLocked()
		r.mu.Unlock()
		r.closeVictims(victims)
		if err := r.openNew(ctx, h, create); err != nil {
			return nil, err
		}
		return h, nil
	}
}

// openNew opens a session registered in state opening, with h.mu held. On
// failure (also on a panic) it closes and removes the session, so that
// other callers do not wait on a session that never opened.
func (r *registry) openNew(ctx context.Context, h *openSession, create *Meta) error {
	opened := false
	defer close(h.ready)
	defer func() {
		if !opened {
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
	r.mu.Lock()
	prior, wasFailed := r.failures[h.id]
	delete(r.failures, h.id)
	r.mu.Unlock()
	var p *failure
	if wasFailed {
		p = &prior
	}
	lock := func(path string) (io.Closer, error) { return r.lockSession(ctx, path) }
	if err := h.open(ctx, lock, create, p); err != nil {
		if wasFailed {
			r.mu.Lock()
			r.failures[h.id] = prior
			r.mu.Unlock()
		}
		h.becomeClosed(err)
		return err
	}
	r.mu.Lock()
	if sel, ok := r.selections[h.id]; ok {
		h.pending = sel
		delete(r.selections, h.id)
	}
	if rep, ok := r.repaired[h.id]; ok {
		h.repaired = append(rep, h.repaired...)
		delete(r.repaired, h.id)
	}
	r.mu.Unlock()
	opened = true
	return nil
}

// lockSession takes a session's lock file, waiting for it while ctx
// allows when Options.WaitForLock is set (sessreg.Lock).
func (r *registry) lockSession(ctx context.Context, path string) (io.Closer, error) {
	return sessreg.Lock(ctx, r.opts.fs, path, r.opts.FileMode, r.opts.WaitForLock, ErrLocked)
}

// ref counts a call using h, with r.mu held.
func (r *registry) ref(h *openSession) {
	h.refs++
	if h.elem != nil {
		r.idle.Remove(h.elem)
		h.elem = nil
	}
}

// unref drops a call's reference to h, with r.mu held, making h idle when
// it was the last.
func (r *registry) unref(h *openSession) []*openSession {
	h.refs--
	if h.refs == 0 && r.sessions[h.id] == h {
		h.elem = r.idle.PushFront(h)
		return r.evictLocked()
	}
	return nil
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
		r.mu.Lock() // lock order: a session's mu, then the registry's
		if r.sessions[h.id] == h {
			delete(r.sessions, h.id)
			if h.pending != uuid.Nil {
				r.selections[h.id] = h.pending
			}
		}
		r.mu.Unlock()
	}
	h.mu.Unlock()
	r.releaseUnlocked(h)
}

// closeLost closes a remote session that lost its lease or whose remote
// state is unknown (remote.go), with h.mu held, so that release forgets
// it and the next call opens it again from the object store.
func (r *registry) closeLost(h *openSession) {
	if h.state != stateFailed || !remoteLost(h.writeFailure) {
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
		if h.state == stateFailed && remoteLost(h.writeFailure) {
			r.release(h) // closes it and forgets it, unlocking h.mu
			return
		}
		h.mu.Unlock()
	}
	r.mu.Lock()
	victims := r.unref(h)
	r.mu.Unlock()
	r.closeVictims(victims)
}

// evictLocked picks idle sessions to close while more than MaxOpenSessions
// are open, removing them from r.sessions and marking them closing, with
// r.mu held.
func (r *registry) evictLocked() []*openSession {
	var out []*openSession
	for len(r.sessions) > r.opts.MaxOpenSessions && r.idle.Len() > 0 {
		h := r.idle.Remove(r.idle.Back()).(*openSession)
		h.elem = nil
		delete(r.sessions, h.id)
		r.closing[h.id] = make(chan struct{})
		out = append(out, h)
	}
	return out
}

// closeVictims closes sessions evictLocked (or closeOne) picked. A
// failure is logged, and returned for CloseSession: the events were
// durable already, and what failed (a HEAD or metadata checkpoint) is
// rebuilt when the session is next opened.
// closeKeeping closes h, keeping what must outlive the close: its
// pending Branch selection, the failure that stopped its writes and the
// repairs not reported yet. r.mu is not held.
func (r *registry) closeKeeping(h *openSession) error {
	h.mu.Lock()
	pending, repaired := h.pending, h.repaired
	failed := failure{err: h.writeFailure, head: h.head()}
	h.mu.Unlock()
	err := h.close()
	r.mu.Lock()
	if pending != uuid.Nil {
		r.selections[h.id] = pending
	}
	if failed.err != nil && !remoteLost(failed.err) {
		r.failures[h.id] = failed
	}
	if len(repaired) > 0 {
		r.repaired[h.id] = append(r.repaired[h.id], repaired...)
	}
	r.mu.Unlock()
	return err
}

func (r *registry) closeVictims(victims []*openSession) error {
	var errs []error
	for _, h := range victims {
		if err := r.closeKeeping(h); err != nil {
			r.opts.Logger.Warn("sessionstore: closing an idle session failed", "session", h.id, "err", err)
			errs = append(errs, err)
		}
		r.mu.Lock()
		close(r.closing[h.id])
		delete(r.closing, h.id)
		r.mu.Unlock()
	}
	return errors.Join(errs...)
}

// closeAll closes every open session, for Store.Close.
func (r *registry) closeAll() error {
	var errs []error
	for id, h := range r.sessions {
		if err := h.close(); err != nil {
			errs = append(errs, fmt.Errorf("sessionstore: close session %s: %w", id, err))
		}
	}
	clear(r.sessions)
	return errors.Join(errs...)
}

// awaitClosing, with r.mu held, reports whether session id is being
// closed (to make room, or by CloseSession); then it unlocks r.mu and
// waits until it is closed, or returns ctx's error when ctx ends first.
// Otherwise r.mu stays held.
func (r *registry) awaitClosing(ctx context.Context, id uuid.UUID) (bool, error) {
	done, ok := r.closing[id]
	if !ok {
		return false, nil
	}
	r.mu.Unlock()
	select {
	case <-done:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// closeOne closes session id if this Store has it open, as the registry
// making room would, once no call uses it: it waits (polling) for the
// calls using it to end, while ctx allows. Its Branch selection and a
// failure that stopped its writes are kept, as for eviction.
func (r *registry) closeOne(ctx context.Context, id uuid.UUID) error {
	const poll = 2 * time.Millisecond
	for {
		r.mu.Lock()
		if closing, err := r.awaitClosing(ctx, id); closing {
			if err != nil {
				return err
			}
			continue
		}
		h, ok := r.sessions[id]
		if !ok {
			r.mu.Unlock()
			return nil
		}
		if h.refs == 0 {
			if h.elem != nil {
				r.idle.Remove(h.elem)
				h.elem = nil
			}
			delete(r.sessions, id)
			r.closing[id] = make(chan struct{})
			r.mu.Unlock()
			return r.closeVictims([]*openSession{h})
		}
		r.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

// hold takes session id away from every call of this Store, for Delete:
// once no call uses it (waiting, polling, while ctx allows) it closes the
// session if open and marks it as being closed, so that calls wanting it
// wait (awaitClosing) until release is called, and then open it again
// from its files, if any are left. What the registry kept for the
// session (Branch selection, failure, repairs) is kept through the close
// and forgotten on release only if deleted (a Delete that failed before
// moving the session leaves it as it was).
func (r *registry) hold(ctx context.Context, id uuid.UUID) (release func(deleted bool), err error) {
	const poll = 2 * time.Millisecond
	for {
		r.mu.Lock()
		if closing, err := r.awaitClosing(ctx, id); closing {
			if err != nil {
				return nil, err
			}
			continue
		}
		h, ok := r.sessions[id]
		if ok && h.refs > 0 {
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(poll):
			}
			continue
		}
		if ok {
			if h.elem != nil {
				r.idle.Remove(h.elem)
				h.elem = nil
			}
			delete(r.sessions, id)
		}
		done := make(chan struct{})
		r.closing[id] = done
		r.mu.Unlock()
		if ok {
			if err := r.closeKeeping(h); err != nil {
				r.opts.Logger.Warn("sessionstore: closing a session to delete it", "session", id, "err", err)
			}
		}
		return func(deleted bool) {
			r.mu.Lock()
			if deleted {
				delete(r.selections, id)
				delete(r.failures, id)
				delete(r.repaired, id)
			}
			delete(r.closing, id)
			close(done)
			r.mu.Unlock()
		}, nil
	}
}
