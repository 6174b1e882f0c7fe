package sessionstore

import (
	"bytes"
	"context"
	"errors"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/seam"
)

// Deleting a session on object storage
//
// With Options.Remote, Delete (delete.go) runs under the session's local
// lock, and before moving the local directory to the trash it deletes
// the session in the object store:
//
//  1. It reads the log's newest object (readView) and refuses, with
//     ErrLocked, a session another Store holds: one whose newest object
//     is not a release marker, was written by another Store, and whose
//     holder wrote or renewed its lease less than Options.LeaseTime ago
//     on the object store's clock (the test an open makes: remote.go,
//     HolderIdle). With Options.WaitForLock it polls.
//  2. It creates the next numbered log object, a delete marker (kind
//     "delete", no lease, no payload). This Create is the commit point:
//     before it the session is whole, after it every open of the session
//     on any Store returns ErrNotFound, since an open reads the newest
//     object first. Create-only numbering fences the rest: the free
//     numbers before the marker are filled with voids first, and, after
//     a holder that did not release, the numbers after it that its
//     Creates in flight could take with copies of the marker, so a
//     zombie writer acknowledges nothing at or after the marker; then,
//     as an open's marker, it checks that nothing lies after the marker
//     and its copies (copyDeleteMarker): a marker that landed in a number
//     compaction freed below a newer marker is stale, and the Delete
//     reads the log again; a Store that read the log before the marker and tries to
//     take the session creates its open marker at the marker's number,
//     fails, reads again and finds the session deleted. A Create whose
//     answer is lost (unknown state) is an error: the session is whole
//     or gone, and a retried Delete settles it by reading the log.
//  3. It deletes the session's metadata copies (meta/<id>/), which is
//     what List and ListRecent read; Meta reads the log's newest object
//     too and agrees with the open from step 2 on (but for a zombie's
//     late Create that landed after the marker, which Meta takes for a
//     live object until step 4 replaces it; a retried Delete does not
//     fill after the marker again).
//  4. It replaces every older log object but the tombstones by a copy of
//     the delete marker (Put: the number stays taken, so that no zombie
//     Create of it succeeds, and nothing of the session's content stays;
//     a tombstone holds none), and deletes every other object under
//     sessions/<id>/: blobs (a session's blobs are its own: no other
//     session refers to them), sealed chunks, the clock probe.
//
// A Delete frees no number (compaction never runs on a deleted session,
// and never frees number 1), so a session id once deleted cannot be
// created again: Create returns ErrExists. A Delete of a session whose
// newest object is a delete marker does steps 3 and 4 again and returns
// nil; of an id the object store has no log for, it does nothing there.
//
// The one window where List and opening disagree: from step 2 to step 3
// (and, after a Delete that failed or crashed in between, until a Delete
// of the id is retried), List and ListRecent still show the session,
// while Meta and every open return ErrNotFound. A zombie writer may also
// leave a blob or sealed chunk it uploaded before its fenced log Create;
// a retried Delete removes such objects.

// deleteMarker is the delete marker's bytes: the same for every session
// and every older log object it replaces, so that a retry recognises
// what it wrote by size and content.
func deleteMarker() []byte {
	b, err := seam.EncodeObject(&logHeader{Kind: logDelete}, nil)
	if err != nil {
		panic(err) // a fixed header always encodes
	}
	return b
}

// isDeleteMarker reports whether the log object h heads is a delete
// marker.
func isDeleteMarker(h *logHeader) bool { return h != nil && h.Kind == logDelete }

// remoteReader is a remoteFiles for reading a session's log outside an
// open: Delete's and Meta's.
func (s *Store) remoteReader(id uuid.UUID) *remoteFiles {
	r := newRemoteFiles(&localFiles{Local: &seam.Local{Log: s.opts.Logger.With("session", id)}}, &s.opts, id)
	r.fetch, r.Lease = nil, uuid.New()
	return r
}

// markRemoteDeleted is steps 1 to 3 above, with the session's local lock
// held: when it returns nil the delete marker is in the log (it was, or
// this call created it) and the metadata copies are gone; beforeMarker
// runs just before the marker's Create (Delete's last check for forks
// made from other roots: remote_forks.go), and its error stops the
// Delete before the marker; marked says
// whether a delete marker is in the log (false: the object store has no
// log for the session). An error before the marker leaves the session
// whole.
func (s *Store) markRemoteDeleted(ctx context.Context, id uuid.UUID, beforeMarker func() error) (marked bool, err error) {
	r := s.remoteReader(id)
	marker := deleteMarker()
	for {
		v, err := r.readView(ctx)
		if errors.Is(err, errLogMoved) {
			continue // read while another Store wrote: read it again
		}
		if err != nil {
			return false, err
		}
		if v == nil {
			return false, nil
		}
		if v.Deleted() {
			break
		}
		if v.Marker.Kind != logRelease && v.Marker.Store != r.Store {
			if gone, err := r.holderGone(ctx, v, s.opts.WaitForLock); err != nil {
				return false, err
			} else if !gone {
				continue
			}
		}
		if err := r.FillGaps(ctx, v, r.Lease); errors.Is(err, errLogMoved) {
			continue
		} else if err != nil {
			return false, err
		}
		if err := beforeMarker(); err != nil {
			return false, err
		}
		key := seam.LogKey(id, v.NewestSeq+1)
		err = s.opts.Remote.Create(ctx, key, marker)
		if errors.Is(err, ErrObjectExists) {
			continue // another writer came first: read the log again
		}
		if err != nil {
			return false, seam.RemoteErr("create", key, err)
		}
		last := v.NewestSeq + 1
		if !v.Clean() {
			// Creates of the holder still in flight land after the
			// marker at most this far: copies of it take the numbers
			// first (a taken one is such a Create: never acknowledged,
			// and replaced in step 4).
			last = v.NewestSeq + staleWindow(v)
		}
		if stale, err := s.copyDeleteMarker(ctx, r, v.NewestSeq+2, last); err != nil {
			return true, err
		} else if stale {
			continue
		}
		break
	}
	prefix := metaPrefix + id.String() + "/"
	infos, err := s.opts.Remote.List(ctx, prefix, 0)
	if err != nil {
		return true, seam.RemoteErr("list", prefix, err)
	}
	for _, o := range infos {
		if err := s.opts.Remote.Delete(ctx, o.Key); err != nil {
			return true, seam.RemoteErr("delete", o.Key, err)
		}
	}
	return true, nil
}

// copyDeleteMarker creates the copies of the delete marker at numbers
// from to last, then confirms that nothing lies after them: stale
// reports a marker that landed in a number compaction freed below a
// newer marker (its listing was that old; remote.go, "Numbers freed by
// compaction"), found as a newer object past the copies, or a marker or
// void of another Store among them. The caller then reads the log again
// and removes nothing: the stale marker and its copies lie below the
// newer marker, where no reader looks.
func (s *Store) copyDeleteMarker(ctx context.Context, r *remoteFiles, from, last uint64) (stale bool, err error) {
	marker := deleteMarker()
	for n := from; n <= last; n++ {
		k := seam.LogKey(r.ID, n)
		err := s.opts.Remote.Create(ctx, k, marker)
		if errors.Is(err, ErrObjectExists) {
			h, err := r.headerOf(ctx, k)
			if err != nil {
				return false, err
			}
			if seam.IsMarker(h.Kind) || h.Kind == seam.KindVoid {
				return true, nil
			}
			continue // a Create of the holder in flight
		}
		if err != nil {
			return false, seam.RemoteErr("create", k, err)
		}
	}
	r.Seq = last
	if err := r.CheckNewestLocked(ctx); errors.Is(err, errLogMoved) {
		return true, nil
	} else if err != nil {
		return false, err
	}
	return false, nil
}

// removeRemoteObjects is step 4 above, for a session whose log ends with
// a delete marker.
func (s *Store) removeRemoteObjects(ctx context.Context, id uuid.UUID) error {
	obj := s.opts.Remote
	// The key object again: the Delete destroyed it before the marker;
	// one put back since (by nothing the Store does) goes too.
	if err := s.destroyKeyObject(ctx, id); err != nil {
		return err
	}
	marker, tomb := deleteMarker(), seam.Tombstone()
	prefix, lprefix := seam.SessionPrefix(id), seam.LogPrefix(id)
	infos, err := obj.List(ctx, prefix, 0)
	if err != nil {
		return seam.RemoteErr("list", prefix, err)
	}
	for _, o := range infos {
		if _, ok := seam.ParseLogKey(lprefix, o.Key); !ok {
			if err := obj.Delete(ctx, o.Key); err != nil {
				return seam.RemoteErr("delete", o.Key, err)
			}
			continue
		}
		if o.Size == int64(len(marker)) || o.Size == int64(len(tomb)) {
			b, err := obj.Get(ctx, o.Key, 0, -1)
			if err != nil && !errors.Is(err, ErrObjectNotFound) {
				return seam.RemoteErr("get", o.Key, err)
			}
			if err != nil || bytes.Equal(b, marker) || bytes.Equal(b, tomb) {
				// The marker, a tombstone (no content), or a dead data
				// object an earlier build deleted: nothing to replace.
				continue
			}
		}
		if err := obj.Put(ctx, o.Key, marker); err != nil {
			return seam.RemoteErr("put", o.Key, err)
		}
	}
	return nil
}

// remoteDeleted reports whether the newest log object of session id is a
// delete marker: for Meta, so that it agrees with opening.
func (s *Store) remoteDeleted(ctx context.Context, id uuid.UUID) (bool, error) {
	prefix := seam.LogPrefix(id)
	infos, err := s.opts.Remote.List(ctx, prefix, 1)
	if err != nil {
		return false, seam.RemoteErr("list", prefix, err)
	}
	marker := deleteMarker()
	if len(infos) == 0 || infos[0].Size != int64(len(marker)) {
		return false, nil
	}
	b, err := s.opts.Remote.Get(ctx, infos[0].Key, 0, -1)
	if err != nil {
		return false, seam.RemoteErr("get", infos[0].Key, err)
	}
	return bytes.Equal(b, marker), nil
}
