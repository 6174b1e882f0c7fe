package sessionstore

import (
	"context"
	"fmt"
	"os"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// readHeadFile reads and decodes a HEAD (or HEAD.tmp) file
// (headfile.Read); exists is false when there is none. A file that is not
// 37 bytes, or does not decode, is a *CorruptionError; so is a path that
// is not a regular file (a link, a FIFO: see refusal), which a caller
// tells apart with errors.Is vfs.ErrFileType. A larger file is refused
// without being read.
func readHeadFile(fsys vfs.FS, path string) (id uuid.UUID, exists bool, err error) {
	id, exists, err = headfile.Read(fsys, path)
	return id, exists, damage(err)
}

// writeHead atomically replaces the HEAD file (headfile.Write: temp
// write, sync, rename, directory sync).
func writeHead(fsys vfs.FS, dir string, id uuid.UUID, perm os.FileMode) error {
	if err := headfile.Write(fsys, dir, id, perm); err != nil {
		return fmt.Errorf("sessionstore: %w", err)
	}
	return nil
}

// Head returns the newest event of the session's active branch, or uuid.Nil
// for a session without events. A pending Branch selection (or a lane
// switch not appended to yet) does not change it: HEAD moves only when
// Append writes the next event. Load ends where that event will go
// (NextParent), which is HEAD unless a selection is pending.
//
// Errors: ErrNotFound, ErrLocked, ErrClosed.
func (s *Store) Head(ctx context.Context, session uuid.UUID) (uuid.UUID, error) {
	var head uuid.UUID
	err := s.useHandle(ctx, session, s.reg.acquireLazy, func(h *openSession) error {
		head = h.head()
		return nil
	})
	return head, err
}

// Branch selects from as the parent of the next appended event: the first
// phase of a branch switch. HEAD does not move and nothing is written;
// Load returns the path to from at once; the next Append becomes a child
// of from, with BranchFrom set to from when from already has a child (an
// append to a leaf goes on from it and starts no branch), and only then
// does HEAD move. The selection lives in memory only: Close or a crash
// forgets it (for a durable one, see SwitchLane and MoveLane: after a
// reopen the next parent is the active lane's tip again). Branch to the
// current HEAD cancels a pending selection. The append it chooses moves
// the active lane, whose tip is HEAD.
//
// Errors: ErrNotFound when from is not in the session; ErrLocked; ErrClosed.
func (s *Store) Branch(ctx context.Context, session, from uuid.UUID) error {
	return s.withHandle(ctx, session, func(h *openSession) error {
		if h.opts.ReadOnly {
			return ErrReadOnly
		}
		if _, err := h.lookup(from); err != nil && !h.inPrefix(from) { // a fork's prefix (fork.go)
			return err
		}
		if from == h.tip() {
			h.pending = uuid.Nil
		} else {
			h.pending = from
		}
		return nil
	})
}

// activeLeaf is the last event of the active path, the path Load returns
// and the next Append extends: the pending parent, else HEAD. h.mu is
// held and the index loaded.
func (h *openSession) activeLeaf() uuid.UUID {
	if p := h.pendingParent(); p != uuid.Nil {
		return p
	}
	return h.head()
}

// pendingParent is the parent the next Append takes instead of HEAD, or
// uuid.Nil: a Branch selection, or the tip of a lane switched to or
// moved and not appended to yet. A read-only store's session takes it
// from the lanes file as it is now (a writer's Branch selection is in
// its memory, not on disk); a damaged file names none. h.mu is held and
// the index loaded.
func (h *openSession) pendingParent() uuid.UUID {
	if h.pending != uuid.Nil || !h.opts.ReadOnly {
		return h.pending
	}
	ls, err := h.currentLanes()
	if err != nil {
		return uuid.Nil
	}
	if t := ls.lanes[ls.active].tip; t != h.head() {
		return t
	}
	return uuid.Nil
}

// NextParent returns the event the next Append will be a child of: the
// pending Branch selection, or the tip of a lane switched to or moved and
// not appended to yet, if there is one, else HEAD (uuid.Nil for an
// empty session), and whether the next event will start a branch (its
// parent already has a child). It is the last event of the path Load
// returns. On a read-only Store it reads a lane switch from the lanes
// file; another process's Branch selection, held in its memory, is not
// seen.
//
// Errors: ErrNotFound, ErrLocked, ErrClosed.
func (s *Store) NextParent(ctx context.Context, session uuid.UUID) (parent uuid.UUID, branching bool, err error) {
	err = s.withHandle(ctx, session, func(h *openSession) error {
		if p := h.pendingParent(); p != uuid.Nil {
			parent, branching = p, h.hasChild(p)
		} else {
			parent = h.tip()
		}
		return nil
	})
	return parent, branching, err
}
