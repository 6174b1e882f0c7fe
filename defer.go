package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"path/filepath"
	"slices"
	"sync"

	"github.com/google/uuid"
)

// Deferred Create (Options.DeferCreate). Create checks and completes the
// metadata, as it always does, and records it here instead of writing
// it; the session's first write through this Store (appendEvents,
// UpdateMeta) calls materialize, which makes the files exactly as an
// immediate Create would (createNow: the catalogue's pending record, the
// session directory, session.json, the lock, the commit record; with a
// Remote, the session's objects) and only then writes. So:
//
//   - Until then nothing is on disk or in the object store: a crash, a
//     Close, or a window that never starts leaves no trace, and the
//     session is absent from List, ListPage, Sessions and ListRecent, and
//     Meta, Load, Head and the other reads answer ErrNotFound, in this
//     Store as in any other: reads report what is stored.
//   - Create refuses an id that this Store already holds deferred, that
//     is open in this Store, or whose session.json exists (in the object
//     store too, with a Remote): ErrExists, as without the option.
//   - Two creators that defer one id (two Stores, two processes) are both
//     answered by Create; the first whose first write makes the files
//     wins. The other's first write finds the session made (ErrExists,
//     from the same checks an immediate Create makes under the session's
//     lock) and writes nothing into it: every later write of that Store
//     to the id returns the same ErrExists, so it never merges into the
//     winner's session. ErrLocked (the other creator holds the id's lock
//     but has not written session.json yet) leaves the session deferred:
//     a retry then gets ErrExists, or makes it if the other creator gave
//     up before making anything.
//   - The files are made before the first write, not with it: a crash
//     during the first write can leave the session made with its
//     metadata and without the events being written (as a crash right
//     after an immediate Create does), never a part of its metadata; once
//     the write returns nil, both are durable.
//   - A subagent's first write makes its deferred parent first, so that
//     no stored session names a parent that is not stored.
//
// deferredSessions is the Store's set of them; its zero value is empty.
type deferredSessions struct {
	mu sync.Mutex
	m  map[uuid.UUID]*deferredSession
}

// deferredSession is one deferred session; mu orders its first writes,
// so that one makes its files and the others wait for the outcome.
type deferredSession struct {
	mu   sync.Mutex
	meta Meta
	key  *sessionKey // an encrypted session's new key, written when its files are made (encrypt.go)
	made bool        // its files are made; it is no longer deferred
	lost error       // another writer made the id first (or its fork's parent is gone): the answer to every write; written with both mutexes held
}

// lose records err as the answer to every write of e, with e.mu held.
func (d *deferredSessions) lose(e *deferredSession, err error) {
	d.mu.Lock()
	e.lost = err
	d.mu.Unlock()
}

// meta returns a deferred session's metadata.
func (d *deferredSessions) meta(id uuid.UUID) (Meta, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e, ok := d.m[id]
	if !ok || e.lost != nil {
		return Meta{}, false
	}
	return e.meta.clone(), true
}

// forks yields each deferred fork's parent and id, in id order. An entry
// made is removed from the map; one lost is no fork.
func (d *deferredSessions) forks() iter.Seq2[uuid.UUID, uuid.UUID] {
	d.mu.Lock()
	var ids []uuid.UUID
	parents := map[uuid.UUID]uuid.UUID{}
	for id, e := range d.m {
		if f := e.meta.ForkedFrom; e.lost == nil && f != nil && f.Session != id {
			ids = append(ids, id)
			parents[id] = f.Session
		}
	}
	d.mu.Unlock()
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	return func(yield func(uuid.UUID, uuid.UUID) bool) {
		for _, id := range ids {
			if !yield(parents[id], id) {
				return
			}
		}
	}
}

func (d *deferredSessions) get(id uuid.UUID) *deferredSession {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[id]
}

func (d *deferredSessions) remove(id uuid.UUID, e *deferredSession) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m[id] == e {
		delete(d.m, id)
	}
}

// deferCreate is Create under Options.DeferCreate, for checked metadata,
// inside a call Close waits for. It writes nothing.
func (s *Store) deferCreate(ctx context.Context, meta Meta, key *sessionKey) (Meta, error) {
	exists := fmt.Errorf("%w: session %s", ErrExists, meta.ID)
	if s.reg.lookup(meta.ID) != nil {
		return Meta{}, exists
	}
	if _, err := s.opts.fs.Stat(filepath.Join(s.sessionDir(meta.ID), metaFile)); err == nil {
		return Meta{}, exists
	}
	if s.opts.Remote != nil {
		switch _, err := s.metaRemote(ctx, meta.ID); {
		case err == nil:
			return Meta{}, exists
		case !errors.Is(err, ErrNotFound):
			return Meta{}, fmt.Errorf("sessionstore: create session %s: %w", meta.ID, err)
		}
	}
	d := &s.deferred
	hold := func() error {
		d.mu.Lock()
		defer d.mu.Unlock()
		if _, ok := d.m[meta.ID]; ok {
			return exists
		}
		if d.m == nil {
			d.m = map[uuid.UUID]*deferredSession{}
		}
		d.m[meta.ID] = &deferredSession{meta: meta.clone(), key: key}
		return nil
	}
	if f := meta.ForkedFrom; f != nil {
		// A deferred fork is one for its parent's Delete as soon as it is
		// held here (forklock.go).
		if err := s.checkForkParent(ctx, f.Session, uuid.Nil, hold); err != nil {
			if errors.Is(err, errForkParentGone) {
				return Meta{}, fmt.Errorf("%w: fork %s: %w (session %s)", ErrNotFound, meta.ID, err, f.Session)
			}
			return Meta{}, err
		}
		return meta.clone(), nil
	}
	if err := hold(); err != nil {
		return Meta{}, err
	}
	return meta.clone(), nil
}

// materialize makes the files of session id if this Store holds it
// deferred, before a write, inside a call Close waits for; it does
// nothing for any other id. Its errors are createNow's, and the
// ErrExists of a session another writer made first (see above).
func (s *Store) materialize(ctx context.Context, id uuid.UUID) error {
	e := s.deferred.get(id)
	if e == nil {
		return nil
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.lost != nil:
		return e.lost
	case e.made:
		return nil
	}
	if p := e.meta.ParentSession; p != uuid.Nil {
		if err := s.materialize(ctx, p); err != nil {
			return fmt.Errorf("sessionstore: make parent session %s of deferred session %s: %w", p, id, err)
		}
	}
	var err error
	if _, serr := s.opts.fs.Stat(filepath.Join(s.sessionDir(id), metaFile)); serr == nil {
		// Made by another writer since Create: it may hold it open
		// (createNow would answer ErrLocked), but it is not ours.
		err = fmt.Errorf("%w: session %s", ErrExists, id)
	} else {
		_, err = s.createNow(ctx, e.meta, e.key)
	}
	switch {
	case err == nil:
		s.cacheKey(id, e.key)
	case errors.Is(err, ErrExists):
		s.deferred.lose(e, fmt.Errorf("%w: session %s, created deferred here, was made first by another writer", ErrExists, id))
		return e.lost
	case errors.Is(err, errForkParentGone):
		// A fork whose parent another Store deleted before the fork was
		// made: it was removed again, and no write of it can be kept.
		s.deferred.lose(e, err)
		return e.lost
	default:
		if _, serr := s.opts.fs.Stat(filepath.Join(s.sessionDir(id), metaFile)); serr != nil {
			return err // nothing made: still deferred, a retry makes it
		}
		// session.json is made, the create's end failed (the session
		// stopped writing, see Create): it is a session now.
	}
	e.made = true
	s.deferred.remove(id, e)
	return err
}
