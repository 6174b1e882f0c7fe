package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// Forks and Delete across roots
//
// forks.lock (forklock.go) orders Fork and Delete among the processes of
// one root. Stores on different roots (machines) sharing one object store
// share no lock file, so with Options.Remote the two also meet in the
// object store, in the manner of Dekker's algorithm: each writes its
// claim, then reads the other's.
//
//   - Fork, once its session is in the object store (its log and
//     metadata), writes a registration sessions/<parent>/forks/<fork>,
//     then reads the parent's delete intent, then the parent: its
//     metadata and newest log object (not deleted: metaRemote). The
//     intent comes first: a Delete that commits removes it with the
//     session's objects, after its marker. It fails, the
//     registration and the fork removed again, when the parent is gone
//     (ErrNotFound) or a Delete of it is under way: an intent younger than
//     LeaseTime by the object store's clock (ErrLocked; a retry after
//     the Delete ended or gave up succeeds or finds the parent gone).
//   - Delete creates the intent sessions/<parent>/deleting, naming its
//     root (create-only: another root's young intent is ErrLocked; an
//     older one, a Delete that crashed, is replaced, as is this root's
//     own, a Delete retried), then lists the registrations: a fork
//     whose metadata is there refuses the Delete (ErrHasForks, the
//     intent removed), a stale one (the fork deleted since) is removed.
//     A fork is live while its log is there and does not end with a
//     delete marker.
//     Just before its delete marker it checks that the intent is its own
//     and younger than LeaseTime/2; if not (a Delete that waited for a
//     holder; another root's Delete that took it for a crashed one's),
//     it writes its intent again and lists the registrations again. The
//     marker commits; the intent and the registrations go with the
//     session's other objects (remote_delete.go, step 4).
//
// Why no fork outlives its parent: a linearizable object store (S3 is,
// for a key's writes and the listings after them) orders the four
// operations. If Delete's listing follows Fork's registration, Delete
// sees it and refuses. If not, Delete's intent precedes its listing,
// which precedes the registration, which precedes Fork's read of the
// intent: Fork sees the intent (or, if the Delete already committed, its
// marker) and fails. An intent Fork finds older than LeaseTime is taken
// for a crashed Delete's and ignored; the Delete that wrote it commits
// only with an intent younger than LeaseTime/2, so that case needs the
// Delete to pause for more than LeaseTime/2 between that check and its
// marker's arrival: the window every lease has (a pause longer than it),
// not a race of ordinary timing.
//
// A Delete that crashed after its intent leaves the parent unforkable
// (ErrLocked) for LeaseTime; one that failed removes its intent.

// forkRegPrefix is the prefix of the registrations of parent's forks.
func forkRegPrefix(parent uuid.UUID) string { return seam.SessionPrefix(parent) + "forks/" }

// deleteIntentKey names the intent of a Delete of session id.
func deleteIntentKey(id uuid.UUID) string { return seam.SessionPrefix(id) + "deleting" }

// registerRemoteFork is Fork's step for a parent kept in the object
// store, with forks.lock held: it writes fork's registration, then reads
// the parent. On errForkParentGone, ErrLocked (a Delete under way) or a
// failed call, it removes the registration again (the caller removes the
// fork).
func (s *Store) registerRemoteFork(ctx context.Context, parent, fork uuid.UUID) error {
	key := forkRegPrefix(parent) + fork.String()
	if err := s.opts.Remote.Put(ctx, key, nil); err != nil {
		return seam.RemoteErr("put", key, err)
	}
	err := s.checkRemoteParent(ctx, parent)
	if err != nil {
		if derr := s.opts.Remote.Delete(context.WithoutCancel(ctx), key); derr != nil && !errors.Is(derr, ErrObjectNotFound) {
			s.opts.Logger.Warn("sessionstore: removing a fork's registration again (stale: ignored by Delete)", "key", key, "err", derr)
		}
	}
	return err
}

// checkRemoteParent reads the parent of a fork after its registration:
// errForkParentGone when it is gone or deleted, ErrLocked when a Delete
// of it is under way.
//
// The intent is read first: a Delete that commits removes its intent with
// the session's other objects (remote_delete.go, step 4), after its
// marker, so a Fork that finds no intent then finds the marker.
func (s *Store) checkRemoteParent(ctx context.Context, parent uuid.UUID) error {
	intent, err := s.readIntent(ctx, parent)
	if err != nil {
		return err
	}
	if intent.present && intent.age < s.opts.LeaseTime {
		return fmt.Errorf("%w: a Delete of session %s is under way", ErrLocked, parent)
	}
	if _, err := s.metaRemote(ctx, parent); errors.Is(err, ErrNotFound) {
		return errForkParentGone
	} else if err != nil {
		return err
	}
	return nil
}

// deleteIntent is what a read of a session's delete intent found: whether
// there is one, whose (the root that wrote it: its Store id), and its age
// by the object store's clock.
type deleteIntent struct {
	present bool
	mine    bool
	age     time.Duration
}

// readIntent reads session id's delete intent.
func (s *Store) readIntent(ctx context.Context, id uuid.UUID) (deleteIntent, error) {
	key := deleteIntentKey(id)
	b, err := s.opts.Remote.Get(ctx, key, 0, -1)
	if errors.Is(err, ErrObjectNotFound) {
		return deleteIntent{}, nil
	}
	if err != nil {
		return deleteIntent{}, seam.RemoteErr("get", key, err)
	}
	info, err := s.opts.Remote.Stat(ctx, key)
	if errors.Is(err, ErrObjectNotFound) {
		return deleteIntent{}, nil // removed meanwhile
	}
	if err != nil {
		return deleteIntent{}, seam.RemoteErr("stat", key, err)
	}
	now, err := s.remoteReader(id).StoreClock(ctx)
	if err != nil {
		return deleteIntent{}, err
	}
	return deleteIntent{present: true, mine: bytes.Equal(b, []byte(s.opts.storeID.String())), age: now.Sub(info.ModTime)}, nil
}

// beginRemoteDelete is Delete's claim, with the session's local lock and
// forks.lock held: it creates the session's delete intent (replacing
// one older than LeaseTime: a Delete that crashed), then lists its forks'
// registrations. It returns ErrLocked while another Delete's intent is
// young, ErrHasForks for a live fork (its intent removed again); end
// removes the intent of a Delete that did not commit.
func (s *Store) beginRemoteDelete(ctx context.Context, id uuid.UUID) (end func(), err error) {
	key := deleteIntentKey(id)
	mine := []byte(s.opts.storeID.String())
	end = func() {
		// Only this root's: another root may have taken it over.
		ctx := context.WithoutCancel(ctx)
		if b, err := s.opts.Remote.Get(ctx, key, 0, -1); err != nil || !bytes.Equal(b, mine) {
			return
		}
		if err := s.opts.Remote.Delete(ctx, key); err != nil && !errors.Is(err, ErrObjectNotFound) {
			s.opts.Logger.Warn("sessionstore: removing a delete intent (forks of the session wait LeaseTime)", "key", key, "err", err)
		}
	}
	if err := s.opts.Remote.Create(ctx, key, mine); errors.Is(err, ErrObjectExists) {
		// This root's own (a Delete that failed or crashed here, retried)
		// is taken back; another root's, once older than LeaseTime.
		intent, err := s.readIntent(ctx, id)
		if err != nil {
			return nil, err
		}
		if intent.present && !intent.mine && intent.age < s.opts.LeaseTime {
			return nil, fmt.Errorf("%w: another Delete of session %s is under way", ErrLocked, id)
		}
		if err := s.opts.Remote.Put(ctx, key, mine); err != nil {
			end() // its state unknown: it may be there
			return nil, seam.RemoteErr("put", key, err)
		}
	} else if err != nil {
		end() // its state unknown: it may be there
		return nil, seam.RemoteErr("create", key, err)
	}
	if err := s.checkRemoteForks(ctx, id); err != nil {
		end()
		return nil, err
	}
	return end, nil
}

// checkRemoteForks lists the registrations of session id's forks:
// ErrHasForks for those whose log is in the object store and not
// deleted; the registrations of forks deleted since are removed.
func (s *Store) checkRemoteForks(ctx context.Context, id uuid.UUID) error {
	prefix := forkRegPrefix(id)
	infos, err := s.opts.Remote.List(ctx, prefix, 0)
	if err != nil {
		return seam.RemoteErr("list", prefix, err)
	}
	var live []uuid.UUID
	for _, o := range infos {
		name := strings.TrimPrefix(o.Key, prefix)
		fork, err := uuid.Parse(name)
		if err != nil || fork.String() != name {
			continue // not a registration
		}
		alive, err := s.remoteLive(ctx, fork)
		switch {
		case err != nil:
			return err
		case alive:
			live = append(live, fork)
		default:
			if err := s.opts.Remote.Delete(ctx, o.Key); err != nil && !errors.Is(err, ErrObjectNotFound) {
				return seam.RemoteErr("delete", o.Key, err)
			}
		}
	}
	if len(live) > 0 {
		return forksError(id, live)
	}
	return nil
}

// freshIntent is Delete's check just before its delete marker: an intent
// older than LeaseTime/2 (the Delete waited, for a holder say), or
// another root's (it took this one for a crashed Delete's), is written
// again and the forks listed again, so that a Fork that took it for a
// crashed Delete's is seen.
func (s *Store) freshIntent(ctx context.Context, id uuid.UUID) error {
	intent, err := s.readIntent(ctx, id)
	if err != nil || intent.mine && intent.age < s.opts.LeaseTime/2 {
		return err
	}
	// Stale, or another root's (which took this one for a crashed
	// Delete's): this root's again, and the forks listed again.
	key := deleteIntentKey(id)
	if err := s.opts.Remote.Put(ctx, key, []byte(s.opts.storeID.String())); err != nil {
		return seam.RemoteErr("put", key, err)
	}
	return s.checkRemoteForks(ctx, id)
}

// remoteLive reports whether session id's log is in the object store and
// its newest object is not a delete marker.
func (s *Store) remoteLive(ctx context.Context, id uuid.UUID) (bool, error) {
	prefix := seam.LogPrefix(id)
	infos, err := s.opts.Remote.List(ctx, prefix, 1)
	if err != nil {
		return false, seam.RemoteErr("list", prefix, err)
	}
	if len(infos) == 0 {
		return false, nil
	}
	deleted, err := s.remoteDeleted(ctx, id)
	return !deleted, err
}
