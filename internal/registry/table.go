package registry

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/google/uuid"
)

// holdPoll is how often CloseOne and Hold look again at a session some
// call still uses.
const holdPoll = 2 * time.Millisecond

// Config says how a Table makes and closes its sessions.
type Config[S any] struct {
	// Max is how many sessions may stay registered once idle ones can be
	// closed: beyond it, idle sessions are closed, least recently used
	// first. Sessions in use are never closed, so more may be registered
	// while calls use them.
	Max int
	// New makes the value of a session being registered, for the entry
	// given (its ID set). It is called with the table's mutex held, and
	// must not call the table.
	New func(e *Entry[S]) S
	// CloseIdle closes a session the table closes to respect Max, or that
	// CloseOne closes. The table's mutex is not held; the session's id is
	// marked closing until it returns.
	CloseIdle func(s S) error
}

// An Entry is one session registered in a Table: its value and what the
// table counts of it.
type Entry[S any] struct {
	ID    uuid.UUID
	Value S // made by Config.New; never changed

	refs int // calls using the session; guarded by the table's mu
	// prev and next link e into the idle list while no call uses it
	// (both nil otherwise); guarded by the table's mu.
	prev, next *Entry[S]
	ready      chan struct{} // closed by Opened
}

// Opened reports that the open of e has ended, whatever its outcome: the
// calls waiting for it in Acquire go on. The caller Acquire told to open
// e calls it once.
func (e *Entry[S]) Opened() { close(e.ready) }

// A Table holds the sessions a Store has open, keyed by id, with K the
// values kept for sessions closed while they were open. Its methods may be
// called concurrently.
type Table[S, K any] struct {
	cfg Config[S]

	mu      sync.Mutex // guards every field below and every entry's refs, prev and next
	entries map[uuid.UUID]*Entry[S]
	// idle is the head of the list of the entries no call uses, linked
	// through their prev and next, most recently used first (idle.next);
	// linked in place, so that a call's release allocates nothing.
	idle    Entry[S]
	nidle   int                         // entries in the idle list
	closing map[uuid.UUID]chan struct{} // sessions being closed (to make room, by CloseOne or Hold)
	kept    map[uuid.UUID]K
}

// NewTable returns an empty table.
func NewTable[S, K any](cfg Config[S]) *Table[S, K] {
	t := &Table[S, K]{cfg: cfg, entries: map[uuid.UUID]*Entry[S]{}, closing: map[uuid.UUID]chan struct{}{}, kept: map[uuid.UUID]K{}}
	t.idle.prev, t.idle.next = &t.idle, &t.idle
	return t
}

// pushIdle links e first in the idle list, with t.mu held.
func (t *Table[S, K]) pushIdle(e *Entry[S]) {
	e.prev, e.next = &t.idle, t.idle.next
	t.idle.next.prev = e
	t.idle.next = e
	t.nidle++
}

// unlinkIdle takes e out of the idle list if it is in it, with t.mu held.
func (t *Table[S, K]) unlinkIdle(e *Entry[S]) {
	if e.next == nil {
		return
	}
	e.prev.next = e.next
	e.next.prev = e.prev
	e.prev, e.next = nil, nil
	t.nidle--
}

// Acquire returns the entry of session id, counting the caller as a call
// using it until it calls Release. When id is being closed, it first
// waits until the close ends. When id is registered, it waits until its
// open has ended (Opened) and returns it with open false: the session may
// have failed to open, which the caller finds in its value. Otherwise it
// registers a new entry (Config.New), closes idle sessions beyond Max, and
// returns it with open true: the caller must open it and then call Opened,
// and on a failure to open, Forget and Release it before Opened. When ctx
// ends while it waits, Acquire returns ctx's error and holds nothing.
func (t *Table[S, K]) Acquire(ctx context.Context, id uuid.UUID) (e *Entry[S], open bool, err error) {
	for {
		t.mu.Lock()
		if closing, err := t.awaitClosing(ctx, id); closing {
			// Being closed: waited, now open it again.
			if err != nil {
				return nil, false, err
			}
			continue
		}
		if e, ok := t.entries[id]; ok {
			t.ref(e)
			t.mu.Unlock()
			select {
			case <-e.ready:
				return e, false, nil
			case <-ctx.Done():
				// Another call is still opening the session (perhaps
				// waiting for its lock): give up without waiting for it.
				t.Release(e)
				return nil, false, ctx.Err()
			}
		}
		e := &Entry[S]{ID: id, refs: 1, ready: make(chan struct{})}
		e.Value = t.cfg.New(e)
		t.entries[id] = e
		victims := t.evictLocked()
		t.mu.Unlock()
		t.closeVictims(victims)
		return e, true, nil
	}
}

// Release ends a call's use of e. When it was the last call and e is
// still registered, e becomes idle (most recently used), and idle sessions
// beyond Max are closed (Config.CloseIdle), least recently used first,
// before Release returns.
func (t *Table[S, K]) Release(e *Entry[S]) {
	t.mu.Lock()
	victims := t.unref(e)
	t.mu.Unlock()
	t.closeVictims(victims)
}

// Forget removes e from the table if it is still registered, so that the
// next Acquire of its id registers a new entry; the calls using e keep
// it until they Release it. When e was registered and keep is not nil,
// keep changes the value kept for its id (as Keep), in the same critical
// section. Forget reports whether e was registered.
func (t *Table[S, K]) Forget(e *Entry[S], keep func(k *K)) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.entries[e.ID] != e {
		return false
	}
	t.takeLocked(e)
	if keep != nil {
		t.keepLocked(e.ID, keep)
	}
	return true
}

// Keep calls f, with the table's mutex held, on the value kept for
// session id (the zero K when none is), and keeps what f leaves there. f
// must not call the table.
func (t *Table[S, K]) Keep(id uuid.UUID, f func(k *K)) {
	t.mu.Lock()
	t.keepLocked(id, f)
	t.mu.Unlock()
}

func (t *Table[S, K]) keepLocked(id uuid.UUID, f func(k *K)) {
	k := t.kept[id]
	f(&k)
	t.kept[id] = k
}

// Take removes and returns the value kept for session id, and whether one
// was.
func (t *Table[S, K]) Take(id uuid.UUID) (K, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k, ok := t.kept[id]
	delete(t.kept, id)
	return k, ok
}

// Lookup returns the value of session id if registered, once its open
// has ended (it waits for it).
func (t *Table[S, K]) Lookup(id uuid.UUID) (S, bool) {
	t.mu.Lock()
	e, ok := t.entries[id]
	t.mu.Unlock()
	if !ok {
		var zero S
		return zero, false
	}
	<-e.ready
	return e.Value, true
}

// Opened returns the value of session id if registered and its open has
// ended, without waiting.
func (t *Table[S, K]) Opened(id uuid.UUID) (S, bool) {
	t.mu.Lock()
	e, ok := t.entries[id]
	t.mu.Unlock()
	if ok {
		select {
		case <-e.ready:
			return e.Value, true
		default:
		}
	}
	var zero S
	return zero, false
}

// Get returns the value of session id if registered, opened or not.
func (t *Table[S, K]) Get(id uuid.UUID) (S, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[id]; ok {
		return e.Value, true
	}
	var zero S
	return zero, false
}

// Len returns how many sessions are registered.
func (t *Table[S, K]) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.entries)
}

// Refs returns how many calls use session id (0 when not registered).
func (t *Table[S, K]) Refs(id uuid.UUID) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if e, ok := t.entries[id]; ok {
		return e.refs
	}
	return 0
}

// ref counts a call using e, with t.mu held.
func (t *Table[S, K]) ref(e *Entry[S]) {
	e.refs++
	t.unlinkIdle(e)
}

// unref drops a call's use of e, with t.mu held, making e idle when it
// was the last and e is registered; it returns the sessions to close.
func (t *Table[S, K]) unref(e *Entry[S]) []*Entry[S] {
	e.refs--
	if e.refs == 0 && t.entries[e.ID] == e {
		t.pushIdle(e)
		return t.evictLocked()
	}
	return nil
}

// evictLocked picks idle sessions to close while more than Max are
// registered, least recently used first, removing them from the table and
// marking them closing, with t.mu held.
func (t *Table[S, K]) evictLocked() []*Entry[S] {
	var out []*Entry[S]
	for len(t.entries) > t.cfg.Max && t.nidle > 0 {
		e := t.idle.prev // the least recently used
		t.unlinkIdle(e)
		delete(t.entries, e.ID)
		t.closing[e.ID] = make(chan struct{})
		out = append(out, e)
	}
	return out
}

// takeLocked removes the entry e from the table and from the idle list
// (if it is there), with t.mu held.
func (t *Table[S, K]) takeLocked(e *Entry[S]) {
	t.unlinkIdle(e)
	delete(t.entries, e.ID)
}

// closeVictims closes the sessions evictLocked (or CloseOne) picked with
// Config.CloseIdle, then ends their closing, and returns their errors.
func (t *Table[S, K]) closeVictims(victims []*Entry[S]) error {
	var errs []error
	for _, e := range victims {
		if err := t.cfg.CloseIdle(e.Value); err != nil {
			errs = append(errs, err)
		}
		t.mu.Lock()
		close(t.closing[e.ID])
		delete(t.closing, e.ID)
		t.mu.Unlock()
	}
	return errors.Join(errs...)
}

// awaitClosing, with t.mu held, reports whether session id is being
// closed; then it unlocks t.mu and waits until it is closed, or returns
// ctx's error when ctx ends first. Otherwise t.mu stays held.
func (t *Table[S, K]) awaitClosing(ctx context.Context, id uuid.UUID) (bool, error) {
	done, ok := t.closing[id]
	if !ok {
		return false, nil
	}
	t.mu.Unlock()
	select {
	case <-done:
		return true, nil
	case <-ctx.Done():
		return true, ctx.Err()
	}
}

// CloseOne closes session id if registered, as making room would
// (Config.CloseIdle), once no call uses it: it waits (polling) for the
// calls using it to end, while ctx allows, and for a close already under
// way. It returns CloseIdle's error, or ctx's; a session not registered
// is left alone.
func (t *Table[S, K]) CloseOne(ctx context.Context, id uuid.UUID) error {
	for {
		t.mu.Lock()
		if closing, err := t.awaitClosing(ctx, id); closing {
			if err != nil {
				return err
			}
			continue
		}
		e, ok := t.entries[id]
		if !ok {
			t.mu.Unlock()
			return nil
		}
		if e.refs == 0 {
			t.takeLocked(e)
			t.closing[id] = make(chan struct{})
			t.mu.Unlock()
			return t.closeVictims([]*Entry[S]{e})
		}
		t.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(holdPoll):
		}
	}
}

// Hold takes session id away from every call: once no call uses it
// (waiting, polling, while ctx allows, and for a close under way) it
// removes it from the table, marks it closing, and calls close on its
// value (closeValue) if it was registered. Until release is called, every Acquire,
// CloseOne and Hold of id waits; then they go on, registering the
// session anew. What is kept for id is kept through the close, and
// forgotten by release only when deleted is set. release must be called
// once. On ctx's end Hold returns its error and holds nothing.
func (t *Table[S, K]) Hold(ctx context.Context, id uuid.UUID, closeValue func(s S)) (release func(deleted bool), err error) {
	for {
		t.mu.Lock()
		if closing, err := t.awaitClosing(ctx, id); closing {
			if err != nil {
				return nil, err
			}
			continue
		}
		e, ok := t.entries[id]
		if ok && e.refs > 0 {
			t.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(holdPoll):
			}
			continue
		}
		if ok {
			t.takeLocked(e)
		}
		done := make(chan struct{})
		t.closing[id] = done
		t.mu.Unlock()
		if ok {
			closeValue(e.Value)
		}
		return func(deleted bool) {
			t.mu.Lock()
			if deleted {
				delete(t.kept, id)
			}
			delete(t.closing, id)
			close(done)
			t.mu.Unlock()
		}, nil
	}
}

// CloseAll removes every session from the table and closes each with
// closeValue, returning their errors joined. It is for a Store that no call
// uses any more: sessions being closed meanwhile are not waited for, and
// what is kept is left as it is.
func (t *Table[S, K]) CloseAll(closeValue func(id uuid.UUID, s S) error) error {
	t.mu.Lock()
	all := make([]*Entry[S], 0, len(t.entries))
	for _, e := range t.entries {
		e.prev, e.next = nil, nil
		all = append(all, e)
	}
	clear(t.entries)
	t.idle.prev, t.idle.next = &t.idle, &t.idle
	t.nidle = 0
	t.mu.Unlock()
	var errs []error
	for _, e := range all {
		if err := closeValue(e.ID, e.Value); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
