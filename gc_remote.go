package sessionstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/seam"
)

// Collecting the object store
//
// GC of a session kept in an object store (Options.Remote) removes, from
// the session's prefix, after its local files (GCWith):
//
//   - blob objects that no event of the session refers to (left by an
//     append that failed after its blob's upload, or a holder that died
//     between the two), keeping those an append in flight is writing and
//     the strings of every split blob kept;
//   - sealed chunk objects that no seal record in the log names (an
//     upload whose seal record failed, or a holder that died between
//     them), keeping this lease's own: its seal records may still come
//     (remote.go, sendUnsent).
//
// Then it compacts the log at once (compactNow: the log objects below its
// own lease's marker that the state does not keep; an open does the same
// in the background every 64 numbers, below the marker it took the
// session from: remote.go, "Numbers freed by compaction"). It removes no
// metadata copy (the holder keeps the newest: copyMeta), and no lease's
// probes.
//
// Why it is safe beside other Stores. Only the holder collects: GC opens
// the session for writing, under its lease, and holds the session's
// mutex throughout, so no append of this Store starts meanwhile. It
// removes only objects it listed before it checked that it still holds
// the session (the newest log object is its lease's, no Create failed,
// and the lease was written or renewed within LeaseTime/2 by the object
// store's clock): a Store taking the session over uploads nothing before its
// open marker, which is then the newest object, so nothing such a Store
// uploaded is among them; and a sealed object's key names the lease
// that uploaded it. An object younger than LeaseTime by the object
// store's clock (StoreClock) is kept whatever it is: an upload a
// previous holder had in flight when it lost the session. The removals
// go on only while the hold check is younger than LeaseTime/4 by the
// local clock; then the hold is checked again.
//
// What that leaves, said plainly: blobs are content-addressed, so a Store
// that took the session over may append an event whose record is the
// very content of an orphan blob object (its upload finds the object
// there and reuses it). Were this process paused for longer than the
// lease between its last check and a removal reaching the object store,
// that removal would take a blob object the new event names (its holder's
// local copy stays; a restore elsewhere would report the blob missing).
// Object stores offer no delete conditioned on another object, so no
// lease can fence a delete; the window is any lease's: a pause longer
// than LeaseTime. A crash or a failed call in the middle of GC removes
// only objects that no event needs; the next GC finishes.

// sweep removes, or with dry counts, the objects of the session's prefix
// that no event or seal record of the log needs (see above); referenced
// are the digests of the blobs the session's events, its appends in
// flight and its blob writes refer to. It returns the objects and bytes
// removed (that would be).
func (r *remoteFiles) sweep(ctx context.Context, referenced map[[32]byte]bool, dry bool) (int, int64, error) {
	prefix := seam.SessionPrefix(r.ID)
	blobs, err := r.Obj.List(ctx, prefix+"blobs/", 0)
	if err != nil {
		return 0, 0, seam.RemoteErr("list", prefix+"blobs/", err)
	}
	sealed, err := r.Obj.List(ctx, prefix+"chunks/", 0)
	if err != nil {
		return 0, 0, seam.RemoteErr("list", prefix+"chunks/", err)
	}
	now, err := r.StoreClock(ctx)
	if err != nil {
		return 0, 0, err
	}
	old := func(o seam.ObjectInfo) bool { return now.Sub(o.ModTime) >= r.leaseT }

	// The strings of the split blobs kept, as each object names them (its
	// table only, by ranged reads): the object may be split where the
	// local file is not, or otherwise (a Store with another
	// StringThreshold stored it first, and the upload here reused it).
	keep := maps.Clone(referenced)
	for _, o := range blobs {
		d, ok := blobDigestOf(o.Key, prefix)
		if !ok || !referenced[d] {
			continue
		}
		refs, err := blob.TableRefs(o.Key, func(off, n int64) ([]byte, error) {
			b, err := r.Obj.Get(ctx, o.Key, off, n)
			if err != nil {
				return nil, seam.RemoteErr("get", o.Key, err)
			}
			return b, nil
		})
		if err != nil {
			return 0, 0, damage(err)
		}
		for _, ref := range refs {
			keep[ref.Digest] = true
		}
	}
	r.Mu.Lock()
	named := map[string]bool{}
	for _, s := range r.State.Sealed {
		named[s.Key] = true
	}
	own := "." + r.Lease.String() + "."
	r.Mu.Unlock()

	var victims []seam.ObjectInfo
	for _, o := range blobs {
		if d, ok := blobDigestOf(o.Key, prefix); ok && !keep[d] && old(o) {
			victims = append(victims, o)
		}
	}
	for _, o := range sealed {
		if !named[o.Key] && !strings.Contains(o.Key, own) && old(o) {
			victims = append(victims, o)
		}
	}
	var n int
	var bytes int64
	if dry {
		for _, o := range victims {
			n, bytes = n+1, bytes+o.Size
		}
		return n, bytes, nil
	}
	var checked time.Time
	for _, o := range victims {
		if time.Since(checked) >= r.leaseT/4 {
			if err := r.stillHolds(ctx); err != nil {
				return n, bytes, err
			}
			checked = time.Now()
		}
		if err := r.Obj.Delete(ctx, o.Key); err != nil && !errors.Is(err, ErrObjectNotFound) {
			return n, bytes, seam.RemoteErr("delete", o.Key, err)
		}
		n, bytes = n+1, bytes+o.Size
	}
	return n, bytes, nil
}

// stillHolds checks that this Store still holds the session: no Create of
// its lease failed, the log's newest object is its lease's, and the lease
// was written or renewed less than LeaseTime/2 ago by the object store's
// clock (else ErrLocked: a renewal that failed could let another Store
// take the session over while GC removes).
func (r *remoteFiles) stillHolds(ctx context.Context) error {
	r.Mu.Lock()
	lost, holder := r.Lost, r.Holder
	r.Mu.Unlock()
	if lost != nil {
		return lost
	}
	if !holder {
		return fmt.Errorf("%w: session %s is not held here", ErrFenced, r.ID)
	}
	seqs, objs, err := r.ListLog(ctx, 1)
	if err != nil {
		return err
	}
	if len(seqs) == 0 {
		return fmt.Errorf("%w: session %s has no log", ErrFenced, r.ID)
	}
	newest := objs[len(objs)-1]
	h, err := r.headerOf(ctx, newest.Key)
	if err != nil {
		return err
	}
	if h.Lease != r.Lease {
		return fmt.Errorf("%w: session %s: log object %s is another lease's", ErrFenced, r.ID, newest.Key)
	}
	// And the lease is fresh, by the object store's clock: its newest
	// object or its renewal younger than LeaseTime/2, so that no Store
	// may take it over before the removals of the next LeaseTime/4 end.
	now, err := r.StoreClock(ctx)
	if err != nil {
		return err
	}
	last := newest.ModTime
	if info, err := r.Obj.Stat(ctx, seam.RenewKey(r.ID, r.Lease)); err == nil && info.ModTime.After(last) {
		last = info.ModTime
	} else if err != nil && !errors.Is(err, ErrObjectNotFound) {
		return seam.RemoteErr("stat", seam.RenewKey(r.ID, r.Lease), err)
	}
	if idle := now.Sub(last); idle >= r.leaseT/2 {
		return fmt.Errorf("%w: session %s: this Store's lease was last written or renewed %v ago (lease %v): GC removes nothing more", ErrLocked, r.ID, idle, r.leaseT)
	}
	return nil
}

// blobDigestOf parses the digest out of the key of one of the session's
// blob objects (seam.BlobKey), prefix the session's.
func blobDigestOf(key, prefix string) ([32]byte, bool) {
	var d [32]byte
	h, ok := strings.CutPrefix(key, prefix+"blobs/")
	if !ok || len(h) != 64 {
		return d, false
	}
	_, err := hex.Decode(d[:], []byte(h))
	return d, err == nil && hex.EncodeToString(d[:]) == h // its own name, not one spelt otherwise
}

// compactNow is compaction for GC (startCompaction's, at once and
// whatever the numbers since the last one): it deletes, or with dry
// counts, the log objects below this lease's own marker that its state
// does not keep. The marker is the newest, or a newer one exists (the
// lease's open checked it: CheckNewestLocked), so the numbers it frees
// lie below a marker, as compaction's argument needs (remote.go,
// "Numbers freed by compaction"); a reader whose listing predates the
// marker finds objects gone and reads the log again.
func (r *remoteFiles) compactNow(ctx context.Context, dry bool) (int, int64, error) {
	if r.keepLog {
		return 0, 0, nil
	}
	r.compacting.Wait()
	r.Mu.Lock()
	st, below := r.State.Clone(), r.marker
	r.Mu.Unlock()
	stats, err := r.Compact(ctx, st, below, dry)
	if err != nil {
		return stats.Objects, stats.Bytes, err
	}
	if !dry {
		r.Mu.Lock()
		if below > r.State.Compacted {
			r.State.Compacted, r.State.CompactFrom = below, stats.From
		}
		r.Mu.Unlock()
	}
	return stats.Objects, stats.Bytes, nil
}
