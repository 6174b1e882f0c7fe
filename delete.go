package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Deleting a session
//
// A session is deleted in two steps, so that a crash leaves it whole or
// gone and never half removed:
//
//  1. under the session's lock and catalogue.lock, its directory is
//     renamed into the root's trash directory, under a name of its own
//     ("<id>.<nonce>"), and both directories are synced; the catalogue
//     gets a pending record for the id (internal/catalogue). The rename is the
//     commit point: before it the session is whole where it was, after
//     it the sessions directory has no entry for it, so List, ListRecent,
//     Meta and every call that opens it see no session.
//  2. with the trash keeping it (Options.TrashFor positive, no Remote),
//     nothing more: the entry's name says until when it is kept
//     (trash.go). Otherwise (and when a kept entry expires or is purged,
//     after its rename to a removal name) the files under the trash entry
//     are removed, then its directories, deepest first, each synced once
//     emptied and before it is removed (removeTree), and the trash
//     directory is synced last: then no crash brings back a byte of the
//     session, in a directory or out of every one.
//
// What a crash leaves in the trash under a removal name is removed by the
// next Open of a writable store, Delete, Prune, Purge or GCStore
// (purgeTrash), as durably: nothing there is ever read again. The trash's
// own entry is synced before a session is moved into it, so a crash never
// leaves a session's files out of every directory, where no purge would
// find them.

// Delete removes a session and everything stored in its directory: its
// chunks, index, HEAD, session.json, and its blobs (blobs live in their
// session's directory; no other session refers to them, since a fork
// reads its parent's files and a parent with forks is not deleted). The
// root's trash keeps it, whole, for Options.TrashFor (a week by default):
// Trash lists it, Undelete brings it back, Purge removes it for good
// (trash.go). With NoTrash, or with Options.Remote, it is removed at
// once.
//
// If this Store has the session open, Delete waits (while ctx allows)
// until no call uses it, closes it, and keeps other calls of this Store
// from opening it until the delete is done; they then get ErrNotFound.
// Its subscriptions in this Store end, their Err matching ErrNotFound.
// Delete refuses a session another writer holds (another Store, in this
// process or another: its lock file is held) with ErrLocked, or with
// Options.WaitForLock waits for it while ctx allows. It refuses, with an
// error matching ErrHasForks that names them, a session that a fork
// reads from: any session List returns that names it in
// Meta.ForkedFrom, a fork a Fork call of any Store on this root made or
// is making meanwhile, and a fork this Store holds deferred
// (Options.DeferCreate). A Fork racing the Delete either makes its fork
// first, and the Delete refuses, or finds the parent gone and returns
// ErrNotFound, leaving no fork (forklock.go). Not seen: a fork whose
// session.json cannot be read, a deferred fork of another Store (its
// first write then fails with ErrNotFound, acknowledging nothing). With
// Options.Remote, forks made by Stores on other roots sharing the object
// store are seen too, through their registrations there
// (remote_forks.go): such a Fork and this Delete never both succeed, and
// a Delete of another root under way makes this one ErrLocked.
// Deleting a session the store does not hold returns nil, so Delete is
// idempotent, and two Deletes of one id at once are safe: one removes it,
// the other returns nil or ErrLocked.
//
// Durability: when Delete returns nil, the session is durably gone: its
// directory's move out of the sessions directory is synced, and no crash
// brings it back (but Undelete does, while the trash keeps it). Its files
// are durably in the trash, or, when the trash keeps nothing, durably
// gone too: their removals are synced, so that after a crash no directory holds any of them, not the
// trash either, and none is left on the disk out of every directory
// (where a file system check would gather it into lost+found). A crash
// during Delete leaves the session either whole (it opens with every
// acknowledged event, undamaged) or gone, its files then in the trash,
// which the next Open of a writable store, Delete, Prune or GCStore
// empties as durably. An error after the move is durable (recording it
// in the catalogue, removing the files, syncing their removal) is
// logged, not returned: the session is gone, its files are removed later
// (a crash may bring them back into the trash meanwhile), and the
// catalogue notices the change by its directory stamp. A read-only Store
// in another process that has the session open reports it gone
// (ErrNotFound) at its next call, and an open racing the Delete reports
// ErrNotFound too.
//
// With Options.Remote (remote_delete.go), Delete also refuses with
// ErrLocked a session another Store holds (its newest log object is not a
// release and is younger than Options.LeaseTime on the object store's
// clock; Options.WaitForLock waits), and deletes the session in the
// object store before its local directory: the Create of a delete marker
// as the log's next object is the commit point. Before it the session is
// whole everywhere; after it every open of it, on any Store, returns
// ErrNotFound, Meta does too, and a zombie holder's next write fails with
// ErrFenced. When Delete returns nil, the object store holds of the
// session only its log objects, each replaced by the marker (the numbers
// stay taken, so a Create of the same id returns ErrExists): no meta copy
// (List and ListRecent omit it), blob, sealed chunk or probe. Between the
// marker and the removal of its metadata copies, and after a Delete that
// failed or crashed there until one is retried, List and ListRecent may
// still name the session that opens report gone. An error after the
// marker says the session is deleted but some objects stay; a retried
// Delete (of an id whose log ends with the marker) removes them and
// returns nil. The bytes of a blob or sealed chunk a zombie uploaded
// after the delete, before its fenced log write, stay until a retry.
//
// Errors: ErrReadOnly; ErrLocked; ErrHasForks; ErrClosed; a context
// error; with Options.Remote, ErrRemote (before the marker: the session is
// whole; after it: deleted, objects stay, retry); the file system error
// that stopped the move (the session is then whole; or, when a directory
// sync after the rename failed, gone from this Store, but a crash may
// bring it back whole; with Options.Remote it is deleted already).
func (s *Store) Delete(ctx context.Context, session uuid.UUID) error {
	if err := s.beginDelete(ctx, session); err != nil {
		return err
	}
	defer s.end()
	s.purgeTrash()
	return s.deleteSession(ctx, session, nil, true)
}

// beginDelete is the start of Delete and Purge of session: it refuses a
// read-only store and a session that forks name (Meta.ForkedFrom, in
// List's answer; deleteSession checks again under forks.lock), and
// begins a call Close waits for: on nil, the caller must call s.end.
func (s *Store) beginDelete(ctx context.Context, session uuid.UUID) error {
	if err := s.checkDeletable(); err != nil {
		return err
	}
	forks, _, err := s.forkIndex(ctx)
	if err != nil {
		return err
	}
	if f := forks[session]; len(f) > 0 {
		return forksError(session, f)
	}
	return s.begin(ctx)
}

// checkDeletable returns the error of Delete and Prune for a store they
// cannot delete from.
func (s *Store) checkDeletable() error {
	if s.opts.ReadOnly {
		return ErrReadOnly
	}
	return nil
}

// forkIndex returns, for each session that forks name in
// Meta.ForkedFrom, those forks' ids, and the metadata of every session
// (List's: the catalogue holds ForkedFrom). Sessions whose session.json
// cannot be read are left out. The forks this Store holds deferred
// (Options.DeferCreate), which List does not return, are forks all the
// same (forklock.go).
func (s *Store) forkIndex(ctx context.Context) (map[uuid.UUID][]uuid.UUID, []Meta, error) {
	metas, err := s.List(ctx)
	var le *ListError
	if err != nil && !errors.As(err, &le) {
		return nil, nil, err
	}
	forks := forksOf(metas)
	for parent, fork := range s.deferred.forks() {
		if !slices.Contains(forks[parent], fork) { // made meanwhile: listed
			forks[parent] = append(forks[parent], fork)
		}
	}
	return forks, metas, nil
}

// forksOf maps each session forks name to those forks' ids.
func forksOf(metas []Meta) map[uuid.UUID][]uuid.UUID {
	out := map[uuid.UUID][]uuid.UUID{}
	for _, m := range metas {
		if m.ForkedFrom != nil && m.ForkedFrom.Session != m.ID {
			out[m.ForkedFrom.Session] = append(out[m.ForkedFrom.Session], m.ID)
		}
	}
	return out
}

// forksError is Delete's error for session, which forks read from.
func forksError(session uuid.UUID, forks []uuid.UUID) error {
	names := make([]string, len(forks))
	for i, f := range forks {
		names[i] = f.String()
	}
	return fmt.Errorf("%w: session %s is forked by %s", ErrHasForks, session, strings.Join(names, ", "))
}

// deleteSession is Delete after its checks, inside a call Close waits for.
// still, if not nil, is Prune's last check, run once no call of this
// Store uses the session and its lock is held (the session closed, so
// session.json holds its last write): its error keeps the session and is
// returned.
//
// keep says whether the session goes to the trash for Options.TrashFor
// (Delete, Prune) or is removed for good at once (Purge).
func (s *Store) deleteSession(ctx context.Context, id uuid.UUID, still func() error, keep bool) error {
	s.workspaces.forget(id) // its files' names and digests leave memory too
	fsys := s.opts.fs
	dir := s.sessionDir(id)
	if s.opts.Remote != nil {
		// The object store decides whether the session exists; its
		// directory here is a cache, made (as an open makes it) so that
		// its lock keeps this root's other processes out.
		if err := fsys.MkdirAll(dir, s.opts.DirMode); err != nil {
			return fmt.Errorf("sessionstore: delete session %s: %w", id, err)
		}
	} else if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return fmt.Errorf("sessionstore: delete session %s: %w", id, err)
	}
	release, err := s.reg.hold(ctx, id)
	if err != nil {
		return err
	}
	// What the registry keeps of the session (a Branch selection, the
	// failure that stopped its writes) is forgotten only once it is gone.
	deleted := false
	defer func() { release(deleted) }()
	lk, err := s.reg.lockSession(ctx, filepath.Join(dir, lockName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	if still != nil {
		if err := still(); err != nil {
			lk.Close()
			return err
		}
	}
	if keep && s.opts.Remote == nil && s.opts.TrashFor > 0 {
		// The trash keeps the session for Undelete: a dead writer's
		// journal may hold acknowledged records its chunks lack, and
		// the journal's recovery looks only in the sessions directory
		// (journal.go), so they go into the chunks first. And a
		// directory without session.json (a Create cut short) is no
		// session to keep.
		if _, err := takeOver(ctx, fsys, s.dir, dir, s.opts.jr.current(), s.opts.FileMode, s.opts.dead); err != nil {
			lk.Close()
			return fmt.Errorf("sessionstore: delete session %s: %w", id, err)
		}
		if _, err := fsys.Stat(filepath.Join(dir, metaFile)); errors.Is(err, fs.ErrNotExist) {
			keep = false
		}
	}
	// From the last check for forks to the commit point, no Fork can
	// record itself (forklock.go).
	flk, err := s.lockForks(ctx)
	if err != nil {
		lk.Close()
		return err
	}
	unlockForks := sync.OnceFunc(func() {
		if err := flk.Close(); err != nil {
			s.opts.Logger.Warn("sessionstore: releasing forks.lock", "err", err)
		}
	})
	defer unlockForks()
	switch forks, err := s.liveForks(id); {
	case err != nil:
		lk.Close()
		return fmt.Errorf("sessionstore: delete session %s: %w", id, err)
	case len(forks) > 0:
		lk.Close()
		return forksError(id, forks)
	}
	var objErr error // with Remote: the session is deleted, but objects of it stay
	if s.opts.Remote != nil {
		// Forks made on other roots: the object store orders them with
		// this Delete (remote_forks.go).
		endIntent, err := s.beginRemoteDelete(ctx, id)
		if err != nil {
			lk.Close()
			return fmt.Errorf("sessionstore: delete session %s: %w", id, err)
		}
		marked, err := s.markRemoteDeleted(ctx, id, func() error {
			if err := s.freshIntent(ctx, id); err != nil {
				return err
			}
			// An encrypted session's key goes first (encrypt_remote.go).
			return s.destroyKeyObject(ctx, id)
		})
		deleted = marked
		if !marked {
			endIntent() // (a marked session's intent goes with its objects)
		}
		if err == nil && marked {
			err = s.removeRemoteObjects(ctx, id)
		}
		if err != nil && !marked {
			lk.Close()
			return fmt.Errorf("sessionstore: delete session %s: %w", id, err)
		}
		if err != nil {
			objErr = fmt.Errorf("sessionstore: delete session %s: it is deleted, but some of its objects stay (a retried Delete removes them): %w", id, err)
		}
	}
	name, kept, err := s.trashNameFor(id, keep)
	if err != nil {
		lk.Close()
		return err
	}
	{
		// An encrypted session's key: into its directory, to go to the
		// trash with it; or destroyed first, before any data goes
		// (crypto-shredding: encrypt.go). With Remote, the local key
		// record is a copy, and the object store's is gone already.
		var kerr error
		if kept && s.opts.Remote == nil {
			kerr = s.moveKeyIntoSession(id)
		} else {
			kerr = s.destroyKey(id)
		}
		if kerr != nil {
			lk.Close()
			return fmt.Errorf("sessionstore: delete session %s: %w", id, kerr)
		}
	}
	s.forgetKey(id)
	var moved bool
	var moveErr error
	err = s.cat.willWrite(id, func() (bool, error) {
		if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return true, nil
		}
		moved, moveErr = moveToTrash(fsys, s.dir, dir, name, s.opts.DirMode)
		return false, moveErr
	})
	deleted = deleted || moved
	if moved {
		s.removeForkMarkers(id)
		// Its sealed chunks may be kept open for reads (zchunk.Cache.Open):
		// closed, so that their space is freed with the files.
		s.opts.frames.CloseFiles(false)
	}
	unlockForks()
	if cerr := lk.Close(); cerr != nil {
		s.opts.Logger.Warn("sessionstore: releasing a deleted session's lock", "session", id, "err", cerr)
	}
	switch {
	case !moved && err != nil:
		return errors.Join(fmt.Errorf("sessionstore: delete session %s: %w", id, err), objErr)
	case !moved:
		return objErr // deleted meanwhile
	case moveErr != nil && s.opts.Remote != nil:
		// The object store holds the delete: no crash brings it back.
		return errors.Join(fmt.Errorf("sessionstore: delete session %s: %w", id, moveErr), objErr)
	case moveErr != nil:
		return fmt.Errorf("sessionstore: delete session %s (moved aside, but a crash may bring it back): %w", id, moveErr)
	case err != nil:
		// The move is durable; the catalogue's record of it is not, so
		// its directory stamp is behind, which sends ListRecent to
		// List and the next writer to a rewrite (internal/catalogue).
		s.opts.Logger.Warn("sessionstore: recording a delete in the catalogue", "session", id, "err", err)
	}
	s.hub.end(id, fmt.Errorf("%w: session %s was deleted", ErrNotFound, id))
	if kept {
		return objErr // in the trash until its purge time (trash.go)
	}
	trash := filepath.Join(s.dir, trashDir)
	if err := removeTree(fsys, filepath.Join(trash, name)); err != nil {
		s.opts.Logger.Warn("sessionstore: removing a deleted session's files (left in the trash)", "session", id, "err", err)
		return objErr
	}
	if err := fsys.SyncDir(trash); err != nil {
		s.opts.Logger.Warn("sessionstore: syncing the trash", "session", id, "err", err)
	}
	return objErr
}

// moveToTrash renames session directory dir to the trash directory of
// root under name, creating the trash durably first, and syncs both
// directories, one right after the other: when it returns nil the move
// is durable. A file system may write the two directories of a rename
// apart: synced in the sessions directory only, the move has lost the
// session's entry in both (its files out of every directory), synced in
// the trash only, it has one in both (a deleted session back). renamed
// says whether the rename was made (after it, a crash may leave the
// session gone).
func moveToTrash(fsys vfs.FS, root, dir, name string, perm fs.FileMode) (renamed bool, err error) {
	trash := filepath.Join(root, trashDir)
	if _, err := fsys.Stat(trash); errors.Is(err, fs.ErrNotExist) {
		if err := fsys.MkdirAll(trash, perm); err != nil {
			return false, err
		}
		if err := fsys.SyncDir(root); err != nil {
			return false, err
		}
	} else if err != nil {
		return false, err
	}
	if err := fsys.Rename(dir, filepath.Join(trash, name)); err != nil {
		return false, err
	}
	if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
		return true, err
	}
	return true, fsys.SyncDir(trash)
}

// removeTree removes path and everything under it: the files, then the
// directories, deepest first. A file already gone is not an error. Each
// directory is synced once its entries are removed, before it is removed
// itself: a directory whose removal reached the disk before the removals
// of its entries would leave them on the disk out of every directory (a
// file system check gathers such files into lost+found), so a deleted
// session's bytes would outlive its Delete. The directories of one depth
// are synced together (a journaling file system commits their syncs at
// once), one depth after the other, from the deepest. The removal of path
// itself is durable once its directory is synced, which is the caller's
// to do.
func removeTree(fsys vfs.FS, path string) error {
	info, err := fsys.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	// levels[d] holds the directories d levels below path that had
	// entries, once their files are removed; empty lists the others.
	var levels [][]string
	var empty []string
	if info.IsDir() {
		for dirs := []string{path}; len(dirs) > 0; {
			var level, next []string
			for _, dir := range dirs {
				names, err := fsys.ReadDir(dir)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
				if len(names) == 0 {
					empty = append(empty, dir)
					continue
				}
				level = append(level, dir)
				for _, n := range names {
					p := filepath.Join(dir, n)
					info, err := fsys.Stat(p)
					switch {
					case errors.Is(err, fs.ErrNotExist):
					case err != nil:
						return err
					case info.IsDir():
						next = append(next, p)
					default:
						if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
							return err
						}
					}
				}
			}
			levels = append(levels, level)
			dirs = next
		}
	}
	remove := func(p string) error {
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	for _, dir := range empty {
		if err := remove(dir); err != nil {
			return err
		}
	}
	for d := len(levels) - 1; d >= 0; d-- {
		errs := make([]error, len(levels[d]))
		forEach(len(levels[d]), 16, func(_, i int) {
			// Gone meanwhile: removed by another process's purge, which
			// synced it first.
			if err := fsys.SyncDir(levels[d][i]); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs[i] = err
			}
		})
		if err := errors.Join(errs...); err != nil {
			return err
		}
		for _, dir := range levels[d] {
			if err := remove(dir); err != nil {
				return err
			}
		}
	}
	if !info.IsDir() {
		return remove(path)
	}
	return nil
}

// treeSize returns the bytes of the files under path (path itself if a
// file).
func treeSize(fsys vfs.FS, path string) (int64, error) {
	info, err := fsys.Stat(path)
	if err != nil {
		return 0, err
	}
	if !info.IsDir() {
		return info.Size(), nil
	}
	names, err := fsys.ReadDir(path)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, n := range names {
		size, err := treeSize(fsys, filepath.Join(path, n))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return total, err
		}
		total += size
	}
	return total, nil
}
