package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Forks and Delete
//
// Delete refuses a session while a fork of it exists (ErrHasForks): the
// fork's history is read from the parent's files. Fork and Delete may run
// at once, in one Store or in two processes sharing the root, so the
// check and the creation must be ordered. Two pieces do it:
//
//   - forks.lock, a lock file at the root (vfs.FS.Lock, and a mutex for
//     the Store's own goroutines). Delete holds it from its last check
//     for forks to its commit point (the move into the trash; with
//     Options.Remote, also the delete marker before it). Fork takes it
//     once its new session is durable (session.json written: List and
//     the catalogue see it), checks under it that the parent is still
//     there (its session.json; with Options.Remote, its metadata in the
//     object store), and leaves a marker at the root:
//     forks/<parent id>/<fork id>, an empty file. The parent's own files
//     are not written.
//   - Delete's check under the lock reads the parent's markers (a marker
//     whose session.json exists is a fork; one whose session is gone is
//     stale and ignored) and the Store's deferred sessions
//     (Options.DeferCreate: a fork not yet written is one all the same).
//     Forks made before markers existed are found as before, by the
//     session List made before the lock was taken: they were durable
//     before Delete started.
//
// Either Fork's check comes first, and its marker is there for Delete's
// check, or Delete's commit comes first, and Fork's check finds no
// session.json: the fork is removed again and Fork (or the first write
// of a deferred fork) returns ErrNotFound. No append to a fork is
// acknowledged whose parent a Delete took away.
//
// The marker needs no sync: it guards against a Delete running at the
// same time as the Fork, and a crash ends both; after a crash the fork's
// durable session.json is what List shows Delete. A Delete removes the
// deleted session's own markers directory. Stores on different roots
// sharing one object store (Options.Remote) share no lock file: there
// Fork and Delete also meet in the object store (remote_forks.go).

// Names of the fork markers; part of the layout.
const (
	forksDir     = "forks"      // at the root: a directory per parent, an empty file per fork of it
	forkLockName = "forks.lock" // at the root
)

// errForkParentGone is the error of a fork whose parent a Delete took
// away before the fork was recorded; it wraps ErrNotFound.
var errForkParentGone = errors.New("the session it forks was deleted")

// forkLock is the Store's side of forks.lock: its mutex orders the
// Store's own goroutines (a process holds a lock file once), the file the
// other processes.
type forkLock struct {
	mu chan struct{} // a mutex that a context can give up on
}

// lockForks takes forks.lock, waiting while ctx allows.
func (s *Store) lockForks(ctx context.Context) (io.Closer, error) {
	select {
	case s.forks.mu <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	const poll = time.Millisecond
	path := filepath.Join(s.dir, forkLockName)
	for {
		lk, err := s.opts.fs.Lock(path, s.opts.FileMode)
		if err == nil {
			return unlockForks{lk, s.forks.mu}, nil
		}
		if !errors.Is(err, vfs.ErrLocked) {
			<-s.forks.mu
			return nil, fmt.Errorf("sessionstore: %w", err)
		}
		select {
		case <-ctx.Done():
			<-s.forks.mu
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

type unlockForks struct {
	lk io.Closer
	mu chan struct{}
}

func (u unlockForks) Close() error {
	err := u.lk.Close()
	<-u.mu
	return err
}

// recordFork is Fork's check under forks.lock, for a fork whose
// session.json is durable: the parent must still be there, and then the
// marker names the fork in the parent's directory. When the parent is
// gone it removes the fork again and returns an error wrapping
// ErrNotFound and errForkParentGone; when the check or the marker fails,
// it removes the fork too (a fork Delete cannot see is not one to keep)
// and returns that error.
func (s *Store) recordFork(ctx context.Context, fork Meta) error {
	parent := fork.ForkedFrom.Session
	err := s.checkForkParent(ctx, parent, fork.ID, func() error {
		return s.writeForkMarker(parent, fork.ID)
	})
	if err == nil {
		return nil
	}
	if errors.Is(err, errForkParentGone) {
		err = fmt.Errorf("%w: fork %s: %w (session %s)", ErrNotFound, fork.ID, errForkParentGone, parent)
	} else {
		err = fmt.Errorf("sessionstore: fork %s of session %s: %w", fork.ID, parent, err)
	}
	if derr := s.deleteSession(context.WithoutCancel(ctx), fork.ID, nil, false); derr != nil {
		return errors.Join(err, fmt.Errorf("sessionstore: removing fork %s again: %w", fork.ID, derr))
	}
	return err
}

// checkForkParent runs then, with forks.lock held, if session parent is
// there (its session.json; with Options.Remote, its metadata in the
// object store, after fork's registration there: remote_forks.go; a
// deferred fork, uuid.Nil, is registered when it is written), and returns
// errForkParentGone if it is not.
func (s *Store) checkForkParent(ctx context.Context, parent, fork uuid.UUID, then func() error) error {
	lk, err := s.lockForks(ctx)
	if err != nil {
		return err
	}
	switch {
	case s.opts.Remote != nil && fork == uuid.Nil:
		_, err = s.metaRemote(ctx, parent)
	case s.opts.Remote != nil:
		// Stores of other roots share no lock file with this one: the
		// object store orders Fork and Delete (remote_forks.go).
		err = s.registerRemoteFork(ctx, parent, fork)
	default:
		_, err = s.opts.fs.Stat(filepath.Join(s.sessionDir(parent), metaFile))
	}
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrNotFound):
		err = errForkParentGone
	case err == nil:
		err = then()
	}
	if cerr := lk.Close(); err == nil {
		err = cerr
	}
	return err
}

// forkMarkers is the directory of parent's markers.
func (s *Store) forkMarkers(parent uuid.UUID) string {
	return filepath.Join(s.dir, forksDir, parent.String())
}

// writeForkMarker makes the marker of fork of parent.
func (s *Store) writeForkMarker(parent, fork uuid.UUID) error {
	dir := s.forkMarkers(parent)
	if err := s.opts.fs.MkdirAll(dir, s.opts.DirMode); err != nil {
		return err
	}
	f, err := s.opts.fs.OpenFile(filepath.Join(dir, fork.String()), os.O_WRONLY|os.O_CREATE, s.opts.FileMode)
	if err != nil {
		return err
	}
	return f.Close()
}

// removeForkMarkers removes the markers of a deleted session, with
// forks.lock held; a failure is logged: stale markers are ignored.
func (s *Store) removeForkMarkers(id uuid.UUID) {
	if err := removeTree(s.opts.fs, s.forkMarkers(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.opts.Logger.Warn("sessionstore: removing a deleted session's fork markers", "session", id, "err", err)
	}
}

// liveForks returns the forks of session id that Delete must not outlive,
// with forks.lock held: those its forks directory names whose
// session.json exists and names id in ForkedFrom (or cannot be read),
// and those this Store holds deferred.
func (s *Store) liveForks(id uuid.UUID) ([]uuid.UUID, error) {
	fsys := s.opts.fs
	names, err := fsys.ReadDir(s.forkMarkers(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var out []uuid.UUID
	for _, name := range names {
		f, err := uuid.Parse(name)
		if err != nil || f.String() != name {
			continue // not a marker
		}
		// A fork deleted leaves its marker: the session of its id is a
		// fork of id only if its metadata says so (the id may have been
		// created again since, as another session).
		switch m, _, err := readMeta(fsys, s.sessionDir(f), f); {
		case err == nil:
			if m.ForkedFrom != nil && m.ForkedFrom.Session == id {
				out = append(out, f)
			}
		case errors.Is(err, ErrNotFound):
		case errors.Is(err, fs.ErrNotExist):
		default:
			// Unreadable: taken for a fork, so that damage never lets
			// a Delete take a parent a fork reads.
			out = append(out, f)
		}
	}
	s.deferred.mu.Lock()
	for fid, e := range s.deferred.m {
		// An entry made is removed from the map; one lost is no fork.
		if e.lost == nil && e.meta.ForkedFrom != nil && e.meta.ForkedFrom.Session == id {
			out = append(out, fid)
		}
	}
	s.deferred.mu.Unlock()
	return out, nil
}
