package sessionstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The trash
//
// Delete and Prune move a session's directory into the root's trash
// directory under one rename (delete.go). With Options.TrashFor positive
// (the default: DefaultTrashFor), the directory then stays there, whole,
// under a kept name
//
//	<id>.<deleted at>.<purge after>.<nonce>
//
// (the two times in Unix nanoseconds, 19 digits each), until its purge
// time passes, a Purge removes it, or an Undelete renames it back into
// the sessions directory. Every other name in the trash is a removal
// name: a session on its way out for good (a Delete with NoTrash or a
// Remote, an expired or purged entry, or what a crash left of one), whose
// files nothing reads again; a writable Store removes them when it opens
// and at each Delete, Prune, Purge and GCStore (purgeTrash).
//
// An entry is never removed under its kept name: it is first renamed to
// a removal name, and that rename synced, so that a crash during a
// removal never leaves a half-removed session under a name Undelete
// would bring back. Undelete and the removal's rename start from the same
// name, so when they race one of them finds it gone.

// TrashItem is a deleted session kept in the trash (Store.Trash).
type TrashItem struct {
	// Meta is the session's metadata as its session.json holds it (the
	// ID alone when it cannot be read: Err says why).
	Meta      Meta
	DeletedAt time.Time // when Delete or Prune moved it to the trash
	PurgeAt   time.Time // when it is removed for good, unless brought back first
	Bytes     int64     // the bytes of its files
	Err       error     // why Meta could not be read, if it could not
}

// trashEntry is a kept name of the trash, parsed.
type trashEntry struct {
	name             string
	id               uuid.UUID
	deleted, purgeAt time.Time
}

// maxTrashTime is the latest time a kept name holds.
var maxTrashTime = time.Unix(0, math.MaxInt64).UTC()

// keptTrashName is the kept name of a session deleted at deleted, to be
// removed after purgeAt.
func keptTrashName(id uuid.UUID, deleted, purgeAt time.Time, nonce uuid.UUID) string {
	return fmt.Sprintf("%s.%019d.%019d.%s", id, deleted.UnixNano(), purgeAt.UnixNano(), nonce)
}

// parseTrashName parses a kept name; ok is false for a removal name.
func parseTrashName(name string) (e trashEntry, ok bool) {
	parts := strings.Split(name, ".")
	if len(parts) != 4 || len(parts[1]) != 19 || len(parts[2]) != 19 {
		return e, false
	}
	id, err := uuid.Parse(parts[0])
	if err != nil || id.String() != parts[0] {
		return e, false
	}
	if n, err := uuid.Parse(parts[3]); err != nil || n.String() != parts[3] {
		return e, false
	}
	d, err1 := strconv.ParseInt(parts[1], 10, 64)
	p, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil || d < 0 || p < 0 {
		return e, false
	}
	return trashEntry{name: name, id: id, deleted: time.Unix(0, d).UTC(), purgeAt: time.Unix(0, p).UTC()}, true
}

// trashEntries returns the kept entries of the trash (of session id
// only, unless id is uuid.Nil), newest deletion first.
func (s *Store) trashEntries(id uuid.UUID) ([]trashEntry, error) {
	names, err := s.opts.fs.ReadDir(filepath.Join(s.dir, trashDir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sessionstore: read the trash: %w", err)
	}
	var out []trashEntry
	for _, n := range names {
		if e, ok := parseTrashName(n); ok && (id == uuid.Nil || e.id == id) {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b trashEntry) int {
		if c := b.deleted.Compare(a.deleted); c != 0 {
			return c
		}
		return cmp.Compare(b.name, a.name)
	})
	return out, nil
}

// Trash lists the deleted sessions the trash keeps, newest deletion
// first: those Undelete can bring back. It works on a read-only Store
// too, and changes nothing. An entry whose purge time has passed is
// listed until a writable Store removes it (Undelete still brings it back
// until then).
//
// Errors: ErrClosed; a context error; the file system's error reading
// the trash directory.
func (s *Store) Trash(ctx context.Context) ([]TrashItem, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	entries, err := s.trashEntries(uuid.Nil)
	if err != nil {
		return nil, err
	}
	out := make([]TrashItem, 0, len(entries))
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		path := filepath.Join(s.dir, trashDir, e.name)
		it := TrashItem{DeletedAt: e.deleted, PurgeAt: e.purgeAt}
		m, _, err := readMeta(s.opts.fs, path, e.id)
		if errors.Is(err, ErrNotFound) {
			continue // undeleted or removed meanwhile
		}
		if err != nil {
			m, it.Err = Meta{ID: e.id}, err
		}
		it.Meta = m
		it.Bytes, _ = treeSize(s.opts.fs, path)
		out = append(out, it)
	}
	return out, nil
}

// Undelete brings back a session Delete or Prune moved to the trash,
// whole, as it was when deleted: its events, branches, blobs, HEAD and
// metadata. When the trash holds the id more than once (a session
// deleted, created again with the same id and deleted again), the newest
// deletion comes back.
//
// A fork comes back only while the session it forks is in the store
// (its prefix is read from that session's files): undelete that one
// first. From the moment Undelete brings a fork back, Delete refuses its
// parent (ErrHasForks), as for any fork.
//
// Durability: when Undelete returns nil, the session is durably back: its
// directory's rename into the sessions directory is synced, the sessions
// directory first, so that a crash never leaves it out of both
// directories. A crash during Undelete leaves the session in the trash,
// or back. Concurrent Undeletes, Purges and removals of the expired
// entries (in this process or another) rename the same entry: one of
// them wins, and the others find it gone.
//
// Errors: ErrReadOnly; ErrClosed; a context error; ErrNotFound when the
// trash does not hold the session (never deleted, removed for good, or,
// with Options.Remote, deleted: a remote delete is final), or when it
// is a fork whose parent the store does not hold; ErrExists when a
// session with its id exists (created again since); the file system's
// error (the session then stays in the trash, or, when a sync failed
// after the rename, is back, but a crash may return it to the trash).
func (s *Store) Undelete(ctx context.Context, id uuid.UUID) error {
	if err := s.checkDeletable(); err != nil {
		return err
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	entries, err := s.trashEntries(id)
	if err != nil {
		return err
	}
	if len(entries) == 0 {
		return fmt.Errorf("%w: session %s is not in the trash", ErrNotFound, id)
	}
	fsys := s.opts.fs
	trash := filepath.Join(s.dir, trashDir)
	// The newest entry that is a session: a directory with session.json
	// (Trash lists the same ones).
	var from string
	var meta Meta
	for _, e := range entries {
		path := filepath.Join(trash, e.name)
		if info, err := fsys.Stat(path); err != nil || !info.IsDir() {
			continue
		}
		m, _, err := readMeta(fsys, path, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("sessionstore: undelete session %s: %w", id, err)
		}
		from, meta = path, m
		break
	}
	if from == "" {
		return fmt.Errorf("%w: session %s is not in the trash", ErrNotFound, id)
	}
	dir := s.sessionDir(id)
	if err := s.clearUnmadeSession(ctx, dir); err != nil {
		return fmt.Errorf("sessionstore: undelete session %s: %w", id, err)
	}
	// With forks.lock held from the parent's check to the rename, a
	// Delete of the parent either comes first (and Undelete finds it
	// gone) or sees the fork back (forklock.go).
	flk, err := s.lockForks(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if err := flk.Close(); err != nil {
			s.opts.Logger.Warn("sessionstore: releasing forks.lock", "err", err)
		}
	}()
	parent := uuid.Nil
	if f := meta.ForkedFrom; f != nil && f.Session != id {
		switch _, err := fsys.Stat(filepath.Join(s.sessionDir(f.Session), metaFile)); {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%w: session %s forks session %s, which the store does not hold (undelete it first)", ErrNotFound, id, f.Session)
		case err != nil:
			return fmt.Errorf("sessionstore: undelete session %s: %w", id, err)
		}
		parent = f.Session
	}
	renamed := false
	err = s.cat.willWrite(id, func() (bool, error) {
		// Create's mkdir runs under the catalogue's lock too: a Create
		// of the id either came first or finds it back. (A directory
		// without session.json here is a Create under way: what a
		// crash left, clearUnmadeSession moved aside.)
		switch _, err := fsys.Stat(dir); {
		case err == nil:
			return false, fmt.Errorf("%w: session %s exists (created again since it was deleted)", ErrExists, id)
		case !errors.Is(err, fs.ErrNotExist):
			return false, err
		}
		if parent != uuid.Nil {
			if err := s.writeForkMarker(parent, id); err != nil {
				return false, err
			}
		}
		if err := fsys.Rename(from, dir); errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("%w: session %s left the trash meanwhile", ErrNotFound, id)
		} else if err != nil {
			return false, err
		}
		renamed = true
		if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
			return false, err
		}
		if err := fsys.SyncDir(trash); err != nil {
			return false, err
		}
		// An encrypted session's key record, back in keys/.
		return false, s.moveKeyOutOfSession(id)
	})
	s.forgetKey(id)
	if err != nil {
		if errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) {
			return err
		}
		if renamed {
			return fmt.Errorf("sessionstore: undelete session %s (back, but a crash may return it to the trash): %w", id, err)
		}
		return fmt.Errorf("sessionstore: undelete session %s: %w", id, err)
	}
	// The catalogue's commit record, under the session's lock as every
	// commit is; without it (an error, logged), the pending record sends
	// readers to session.json, with the same answers.
	lk, err := s.reg.lockSession(ctx, filepath.Join(dir, lockName))
	if err != nil {
		s.opts.Logger.Warn("sessionstore: locking an undeleted session", "session", id, "err", err)
		return nil
	}
	defer lk.Close()
	if m, _, err := readMeta(fsys, dir, id); err == nil {
		if err := s.cat.wrote(m); err != nil {
			s.opts.Logger.Warn("sessionstore: recording an undelete in the catalogue", "session", id, "err", err)
		}
	}
	return nil
}

// clearUnmadeSession moves aside, to a removal name in the trash, a
// session directory dir without session.json that no Create is making
// (its lock free: what a crash during a Create left), so that Undelete
// can bring the deleted session back in its place. A directory with
// session.json, or none, is left as it is.
func (s *Store) clearUnmadeSession(ctx context.Context, dir string) error {
	fsys := s.opts.fs
	if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	if _, err := fsys.Stat(filepath.Join(dir, metaFile)); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	lk, err := s.reg.lockSession(ctx, filepath.Join(dir, lockName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // moved meanwhile
	}
	if err != nil {
		return err
	}
	defer lk.Close()
	if _, err := fsys.Stat(filepath.Join(dir, metaFile)); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err // made meanwhile
	}
	nonce, err := s.opts.newID()
	if err != nil {
		return err
	}
	_, err = moveToTrash(fsys, s.dir, dir, filepath.Base(dir)+"."+nonce.String(), s.opts.DirMode)
	return err
}

// Purge removes a session for good: from the trash, every copy of it
// there, and, when the store holds it, the session itself, as Delete
// removes it but without the trash (with Delete's checks: a session
// another writer holds is refused with ErrLocked, one that forks read
// from with ErrHasForks). It also removes the trash's expired entries.
// Purging an id the store holds nowhere returns nil.
//
// Durability: when Purge returns nil, no directory holds a file of the
// session, durably (as Delete with NoTrash). A crash during Purge leaves
// the session whole where it was (in the store, or in the trash) or on
// its way out: a trash entry under a removal name, which nothing reads
// again and the next writable Open removes.
//
// Errors: Delete's; the file system's error renaming or removing a trash
// entry.
func (s *Store) Purge(ctx context.Context, id uuid.UUID) error {
	if err := s.beginDelete(ctx, id); err != nil {
		return err
	}
	defer s.end()
	// The trash's copies first, then the store's, until a pass finds
	// neither: an Undelete (of another Store) racing a pass brings back
	// a copy the next pass removes, and a Delete racing it leaves one in
	// the trash the next pass dooms.
	const passes = 8
	for pass := 1; ; pass++ {
		entries, err := s.trashEntries(id)
		if err != nil {
			return err
		}
		if err := s.doomTrash(entries); err != nil {
			return fmt.Errorf("sessionstore: purge session %s: %w", id, err)
		}
		_, statErr := s.opts.fs.Stat(s.sessionDir(id))
		if err := s.deleteSession(ctx, id, nil, false); err != nil {
			return err
		}
		if len(entries) == 0 && errors.Is(statErr, fs.ErrNotExist) {
			break
		}
		if pass == passes {
			return fmt.Errorf("%w: session %s: other Stores kept deleting or undeleting it through %d passes", ErrConflict, id, passes)
		}
	}
	if _, err := s.emptyTrash(); err != nil {
		return fmt.Errorf("sessionstore: purge session %s: %w", id, err)
	}
	return nil
}

// doomTrash renames entries to removal names and syncs the trash: when
// it returns nil, no crash brings any of them back under a kept name. An
// entry gone meanwhile (undeleted, or doomed by another process) is
// skipped.
func (s *Store) doomTrash(entries []trashEntry) error {
	if len(entries) == 0 {
		return nil
	}
	fsys := s.opts.fs
	trash := filepath.Join(s.dir, trashDir)
	var errs []error
	for _, e := range entries {
		nonce, err := s.opts.newID()
		if err != nil {
			return err
		}
		err = fsys.Rename(filepath.Join(trash, e.name), filepath.Join(trash, e.id.String()+"."+nonce.String()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := fsys.SyncDir(trash); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// purgeTrash removes, durably, the trash's expired entries and what
// deletes left there under removal names (a crash, a failed removal), and
// returns the bytes it freed. Failures are logged: what stays costs space
// alone, and the next call tries again. Other processes may be removing
// the same files.
func (s *Store) purgeTrash() int64 {
	if s.opts.ReadOnly {
		return 0
	}
	if expired, err := s.expiredTrash(); err != nil {
		s.opts.Logger.Warn("sessionstore: reading the trash", "err", err)
	} else if err := s.doomTrash(expired); err != nil {
		s.opts.Logger.Warn("sessionstore: removing the trash's expired sessions", "err", err)
	}
	freed, err := s.emptyTrash()
	if err != nil {
		s.opts.Logger.Warn("sessionstore: emptying the trash", "err", err)
	}
	return freed
}

// expiredTrash returns the kept entries whose purge time has passed.
func (s *Store) expiredTrash() ([]trashEntry, error) {
	entries, err := s.trashEntries(uuid.Nil)
	if err != nil || len(entries) == 0 {
		return nil, err
	}
	now := s.opts.now()
	return slices.DeleteFunc(entries, func(e trashEntry) bool { return now.Before(e.purgeAt) }), nil
}

// emptyTrash removes the trash's entries under removal names (removeTree,
// then the trash synced) and returns the bytes it freed; kept entries
// stay.
func (s *Store) emptyTrash() (int64, error) {
	fsys := s.opts.fs
	trash := filepath.Join(s.dir, trashDir)
	names, err := fsys.ReadDir(trash)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var freed int64
	var errs []error
	removed := false
	for _, n := range names {
		if _, kept := parseTrashName(n); kept {
			continue
		}
		path := filepath.Join(trash, n)
		size, _ := treeSize(fsys, path)
		// An encrypted session's key goes first (crypto-shredding).
		if err := shredKeyFile(s, filepath.Join(path, keptKeyFile)); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := removeTree(fsys, path); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		removed = true
		freed += size
	}
	if removed {
		if err := fsys.SyncDir(trash); err != nil {
			errs = append(errs, err)
		}
	}
	return freed, errors.Join(errs...)
}

// trashNameFor is the name deleteSession moves session id's directory to:
// a kept name when the trash keeps it, else a removal name.
func (s *Store) trashNameFor(id uuid.UUID, keep bool) (name string, kept bool, err error) {
	nonce, err := s.opts.newID()
	if err != nil {
		return "", false, err
	}
	if !keep || s.opts.TrashFor < 0 || s.opts.Remote != nil {
		return id.String() + "." + nonce.String(), false, nil
	}
	now := s.opts.now()
	// A purge time past what Unix nanoseconds hold (the year 2262) is
	// that limit: kept for as long as the name can say.
	purgeAt := maxTrashTime
	if s.opts.TrashFor < maxTrashTime.Sub(now) {
		purgeAt = now.Add(s.opts.TrashFor)
	}
	return keptTrashName(id, now, purgeAt, nonce), true, nil
}
