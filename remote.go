package sessionstore

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// Sessions on object storage
//
// With Options.Remote set, the object store is the system of record and
// the session's directory is its cache. remoteFiles is the durableFiles
// seam for such a session: every durable fact goes to the local files (as
// without a remote) and to the object store, and a call returns only when
// both hold it.
//
// The log. Each session has a log of numbered, immutable objects,
// sessions/<id>/log/<n> (n in 20 decimal digits, from 1; a window's
// worth of the newest may be free while their Creates are in flight), each
// written with ObjectStore.Create, which succeeds for exactly one writer.
// An object is a JSON header line (logHeader) and a payload:
//
//   - data: one commit group, the bytes written at (chunk, offset) of the
//     session's chunk, checked by their CRC-32C;
//   - seal: chunk c is sealed, its compressed file stored once as the
//     immutable object the header names (uploaded before the record),
//     with the chunk's exit table (seam.Exit: where the paths through
//     each of its lines leave it), a hint by which a restore downloads
//     the chunks a path crosses side by side (remote_fetch.go);
//   - meta: a new session.json (its payload), also copied to
//     meta/<id>/<n> for List;
//   - lanes: a new lanes file (its payload; lanes.go), which the state
//     of later markers carries;
//   - markers: create (the session's first object), open (a Store took
//     the session), release (Close let it go), delete (the session was
//     deleted: remote_delete.go). A marker's header holds
//     the whole state of the log before it (remoteState: the sealed
//     chunks, the data objects of the chunks not sealed, the data objects
//     sealing made unneeded) and its payload session.json, so a reader
//     needs only the newest marker and the objects after it.
//
// Fencing. A Store holds a session from the marker it created to its
// release. Its next object is always the number after its last one, and a
// Store taking the session creates its marker at the number after the
// newest object it saw, so a writer that lost the session (a zombie:
// paused, partitioned, slow) fails its next Create, stops with ErrFenced
// and acknowledges nothing more.
//
// Several Creates in flight. A holder does not wait for a commit group's
// Create before it writes the next group: it issues the Create of data
// object k once every object of its lease up to k-Window is stored
// (seam.Window, 4; recorded in its marker), and acknowledges a group
// once its object and every object of its lease before it are stored
// (seam.LogWriter.PutData; internal/commit's pending). One Create that
// fails (its number taken, or its state unknown) fails its group and
// every group after it, even those whose objects were stored: they lie
// after a number the lease does not hold. Each data object records the
// newest object its lease had stored when it was issued (Acked). Every
// other object (markers, seal, meta, lanes) is created alone, after
// every Create in flight ended. So, after the newest marker M of lease
// L, the log holds L's objects with up to Window numbers free among the
// newest (Creates in flight, or ones that will never land), and:
//
//   - A reader applies L's objects from M up to the first free number,
//     void of another lease (see taking below), or other lease's object
//     past the numbers M's Store filled (M records how many: Fills),
//     skipping L's own voids and other leases' objects among those
//     numbers (an earlier holder's late Creates, never acknowledged);
//     after a release or delete marker it applies nothing.
//     A free number that a later object of L proves stored (its Acked is
//     at least the number, or it lies Window or more past it) is damage:
//     a *CorruptionError naming the free number's key.
//   - A Store taking the session (an open; a Delete the same way) first
//     fills every free number after M with a void of its lease (Create;
//     a number found taken means the log moved: it reads it again), so
//     that none of L's Creates in flight can land there: L acknowledges
//     nothing at or after a void. Then it creates its marker after the
//     newest object, with the state the reader gets (up to the first
//     free number). Unless the log ended with a release marker (whose
//     lease waited for its Creates), it then fills the window-1 numbers
//     after its marker (FillLocked): L's Creates in flight lie at most
//     there, since L had stored nothing past the first void or the
//     marker. The window is the one M carries: markers record the largest
//     window of their lease and of the lease they took the session from
//     (seam.Header.Window), so a Store with a small window taking over
//     from one with a large window, then failing before its fills, leaves
//     the next taker enough to fill. A fill that finds a number taken by another lease's data
//     skips it (L's late Create: readers skip it too); one taken by a
//     marker or another lease's void is a Store that took the session
//     meanwhile, and the taker is fenced.
//
// Why each rule: without the fills before the marker, L's Create in
// flight at a free number lands after the listing, L acknowledges it
// and the objects after it, and readers, who start from the new marker
// whose state lacks them, lose them; a reader that skipped another
// lease's void would apply L's objects after a number L never stored; a
// fill that skipped a marker would let the taker acknowledge objects
// after another Store's marker (two holders, or a deleted session
// written again). remote_window_model_test.go checks these rules over
// every interleaving of a holder with its window in flight and one to
// three takers (opens and Deletes), with W of 2 and 3, and shows each
// rule's absence failing; remote_window_test.go runs a takeover with
// four Creates in flight on the real code.
//
// Numbers freed by compaction, and only there. A data object that a
// seal record made unneeded is replaced, LeaseTime after the sealing,
// by a tombstone (seam.Tombstone: kind "dead", no payload, 132 bytes; a
// Put, so the number stays taken), and a deleted session's objects by
// its delete marker (remote_delete.go). Log objects are deleted by
// compaction alone (internal/seam's compact.go): a Store that took the
// session deletes, in the background, every object below the marker it
// took the session from that its state does not keep, once CompactEvery
// (64) numbers lie below that marker since the last compaction, so that
// a session's object count stays bounded however many handoffs it sees.
// A freed number is one a stale Create can take, so the argument rests
// on three rules:
//
//   - Freed numbers lie below the newest marker. The compacting Store
//     deletes only below the marker it took the session from, after its
//     own marker, newer, was confirmed the newest (the next rule); a
//     marker is deleted only once a newer marker exists, so at any
//     moment a marker newer than every freed number is in the log.
//   - A taker checks its marker. After its marker (and its fills after
//     it) a Store taking the session lists the log's newest object
//     (seam.LogWriter.CheckNewestLocked); a newer one means its marker
//     landed in a freed number below a newer marker (its listing was
//     older than a compaction): it reads the log again, and its marker
//     stays where no reader looks (readers start from the newest
//     marker). A newer marker within its fills is met by a fill, which
//     fences it; one past them, by the listing. So the taker of a stale
//     listing, stalled however long between its listing and its Create
//     while others took the session, wrote and compacted, acknowledges
//     nothing. A Delete checks its marker the same way before it removes
//     anything (remote_delete.go); the create marker, number 1, is never
//     deleted, so a Create of the session's id still fails.
//   - A zombie's numbers stay taken. A holder taken over without its
//     release may still Create the numbers after what it stored: its
//     Creates go at most its window past its stored prefix, and the
//     taker's marker follows the newest object, at most that far, so
//     they lie within the window on each side of the taker's marker
//     (seam.KeepRange). The taker records that range in its marker's
//     state, every later marker carries it, and compaction never frees
//     it: the voids, the marker and the fills there keep failing the
//     zombie's Creates, however late. (A clean release leaves nothing
//     in flight: no range.) The data objects the state names (live,
//     dead) are never compacted either; a dead one goes by its
//     tombstone first.
//
// A reader whose listing is older than a compaction may find objects it
// listed gone: damage only if the log did not move since (seam's
// movedErr); it moved (a newer marker exists), so it reads the log
// again. Before compaction, no number was freed, and a stalled taker's
// marker landing in a freed number was the hole of builds that deleted
// dead data objects: remote_model_test.go checks the argument without
// compaction, remote_compact_model_test.go with it, exhaustively, and
// remote_stall_test.go and remote_compact_test.go on the real code with
// a taker paused between its listing and its Create. The cost: an
// extra LIST per open (the check), a LIST and one DELETE per object
// every CompactEvery numbers (in the background), and, for good, the
// create marker and 2W-1 numbers per takeover of a holder that did not
// release.

// A missing object is damage. Since no number from the newest marker on
// is freed, every object a listing names there is there when read, unless
// the log moved; one that is not (a bucket lifecycle rule, an operator)
// is a *CorruptionError naming its key. A free number
// after the newest marker is damage when a later object of the lease was
// issued after it was stored (its Acked; every object but a data object
// is created after all before it were); only among the newest objects of
// a holder that stopped without its release can a lost object not be
// told from a Create in flight, and the view ends before it. The one
// exception is a log written by an earlier build, which deleted the data
// objects of sealed chunks: an object missing below a seal record read
// after it is skipped (internal/seam's ReadView).
//
// Builds before compaction. They take a session without checking that
// their marker is the newest, so a number compaction freed could take a
// stalled one's marker: while Stores of such builds use a bucket, every
// Store of this build sets Options.RemoteKeepLog (no compaction). Their
// readers find no damage in a compacted log (they read from the newest
// marker); a log object gone under their reading is reported as damage
// where this build reads again.
//
// Builds before windows. They read a log with free numbers as damage,
// apply late objects of other leases after a marker, and fill nothing
// when they take a session over. A bucket that Stores of such builds
// still use must be written with RemoteWindow 1 (no free numbers, no
// fills) until every Store runs this build.
//
// Handoff. Opening a session whose newest marker is a release marker
// takes it at once. Opening one another Store holds fails with ErrLocked,
// or with Options.WaitForLock waits (polling) until it is released or its
// holder wrote nothing and renewed nothing for Options.LeaseTime on the
// object store's own clock (the newest log object's and the renewal's
// modification times against a probe object's, never the local clock:
// HolderIdle); then the open takes it over. A holder that writes nothing
// renews its lease (see Renewal below), so only a holder that stopped
// (crashed, cut off, or closed without its release) is taken over; a
// holder taken over all the same returns ErrFenced from its next write.
//
// Opening reconciles the local files with the log (reconcileLocal): a
// sealed chunk the local files lack is downloaded whole, the plain chunks
// are rebuilt from their data objects (only those newer than what the
// local files held at their last clean release, recorded in remote.json),
// bytes or chunks the log does not hold are cut (they were never
// acknowledged), and the index and HEAD are rebuilt from the chunks.
// Blobs are fetched when a read needs them, verified by their digest.
//
// Acknowledged means remote. A commit group's Append returns nil only
// after the local fdatasync and the Create of its data object (issued
// first, so the two run side by side), and the Creates of every group
// before it, succeeded. A Create that fails for another reason than
// ErrObjectExists leaves the object's state unknown: the session stops
// writing (ErrRemote, matched with ErrSessionFailed), and the registry
// forgets it, so that the next call opens it again from the log: the
// events of the failed group are then kept if their object was stored,
// cut if not. Every remote call of an open or a read takes the caller's
// context; those of the commit pipeline and of sealing, which serve many
// callers, are bounded by Options.RemoteTimeout.
//
// Acknowledged after the local sync (Options.RemoteDurability
// DurableLocal). A group is acknowledged once its local fdatasync
// succeeded, its data object's Create issued before (PutData) and still
// in flight; a failed Create fails the session's next call, as above.
// What keeps that from losing acknowledged events:
//
//   - At most the window is acknowledged and not stored: PutData issues a
//     Create only while fewer than Window are in flight, and a group
//     waits for its slot before its local sync.
//   - They all lie in the newest chunk, plain: a new chunk and a sealing
//     start only once nothing is in flight (settleLocal). So the local
//     directory holds every stored byte and, after them in that chunk,
//     the acknowledged ones not stored, then perhaps a torn write.
//   - The lease's create and open markers say so (seam.Header.Local).
//     An open that finds the newest marker to be such a lease of this
//     Store (the root's holder.id; only one process of a machine holds
//     its lock) and not released keeps the whole records after the log's
//     end in that chunk (reconcileLocal's keepTail), and, once its own
//     marker is created, stores them as its own data objects before
//     anything else (storeTail). Its marker records Local too, so a crash
//     in between leaves the next open here to do the same.
//   - After a failed Create (ErrRemote), the Store opens the session
//     again itself, in the background, until it can (recoverTail): a
//     healthy Store stores its tail though no call of the session comes.
//   - A Fork at an event of this Store's lease waits until it is stored
//     (settleLocal): the fork reads its prefix from the log.
//   - Another Store taking the session over first makes its marker the
//     newest: the tail is then cut here, as bytes the log never held.
//     That, and the loss of the disk, is the loss window Durability
//     documents; events a reader elsewhere sees are only stored ones.

// The log's objects, their state and keys are internal/seam's, under the
// engine's names.
type (
	logHeader    = seam.Header
	remoteState  = seam.State
	sealedObject = seam.Sealed
	logPiece     = seam.Piece
	seqRange     = seam.SeqRange
)

// Kinds of log objects.
const (
	logCreate  = seam.KindCreate
	logOpen    = seam.KindOpen
	logRelease = seam.KindRelease
	logDelete  = seam.KindDelete
	logData    = seam.KindData
	logSeal    = seam.KindSeal
	logMeta    = seam.KindMeta
	logLanes   = seam.KindLanes
	metaPrefix = seam.MetaPrefix
)

// remoteStateFile (internal/layout) records, in a session's directory,
// the log object the local files match exactly, written after a clean
// release: the next open fetches only newer objects.

// decodeLogObject is seam.DecodeObject with its errors in the root's
// types: damage a *CorruptionError naming the key, another version
// ErrUnsupportedFormat.
func decodeLogObject(key string, b []byte) (*logHeader, []byte, error) {
	h, payload, err := seam.DecodeObject(key, b)
	return h, payload, remoteDamage(err)
}

// remoteDamage returns an error of the remote log (internal/seam) in the
// root's types: damage a *CorruptionError, another version
// ErrUnsupportedFormat; any other error as it is. Each error of a joined
// one (errors.Join) is mapped on its own.
func remoteDamage(err error) error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs := j.Unwrap()
		out := make([]error, len(errs))
		for i, e := range errs {
			out[i] = remoteDamage(e)
		}
		return errors.Join(out...)
	}
	var ve *seam.VersionError
	if errors.As(err, &ve) {
		return fmt.Errorf("%w: %w", ErrUnsupportedFormat, err)
	}
	return damage(err)
}

// remoteFiles is durableFiles for a session kept in an object store: see
// the top of this file. Its log, and the lease it holds, is
// internal/seam's LogWriter.
type remoteFiles struct {
	*localFiles
	*seam.LogWriter
	fetch   *fetchFS // the Store's filesystem (remote_fetch.go)
	timeout time.Duration
	leaseT  time.Duration
	// unsent are the chunks sealed here whose upload (or seal record)
	// failed: the next sealing and the release try them again. Guarded
	// by LogWriter.Mu.
	unsent []uint32
	// exits are the exit tables (seam.Exit) of the chunks in unsent,
	// which their seal records carry.
	exits map[uint32][]seam.Exit
	// renewStop ends the renewal of the lease (renewLease) that acquire
	// and create start, a renewal in flight too; release calls it and
	// waits for renewDone.
	renewStop context.CancelFunc
	renewDone chan struct{}
	// compacting is the compaction acquire started (startCompaction),
	// which release waits for.
	compacting sync.WaitGroup
	// marker is the number of this lease's marker (guarded by Mu).
	marker uint64
	// keepLog is Options.RemoteKeepLog: no compaction.
	keepLog bool
	// ackLocal is Options.RemoteDurability DurableLocal: a group is
	// acknowledged after the local sync, its Create following.
	ackLocal bool
	// keepTail is set by acquire for reconcileLocal when the log's
	// newest marker is an unreleased lease of this Store that
	// acknowledged after the local sync (seam.Header.Local): the local
	// bytes past the log are acknowledged events, kept and stored (tail)
	// instead of cut.
	keepTail bool
	tail     localTail

	// A follower's (follow.go): the view its cache matches; while
	// reconcileLocal runs for a later look, the cache's state (trust,
	// in place of remote.json) and that an append leaves the derived
	// files (appendOnly), which it reports it did (derivedLag).
	following  *followState
	trust      *localRemoteState
	appendOnly bool
	derivedLag bool
}

// newRemoteFiles returns the files of session id kept in o.Remote, with
// local as their cache.
func newRemoteFiles(local *localFiles, o *Options, id uuid.UUID) *remoteFiles {
	r := &remoteFiles{
		localFiles: local,
		LogWriter:  &seam.LogWriter{Obj: remoteObjects{o.Remote}, ID: id, Store: o.storeID, Now: time.Now, Window: o.RemoteWindow, Local: o.RemoteDurability == DurableLocal},
		fetch:      o.fetch, timeout: o.RemoteTimeout, leaseT: o.LeaseTime, keepLog: o.RemoteKeepLog,
		ackLocal: o.RemoteDurability == DurableLocal,
	}
	if r.ackLocal && o.recoverTail != nil {
		r.OnLost = func(err error) {
			if !errors.Is(err, ErrFenced) {
				o.recoverTail(id)
			}
		}
	}
	return r
}

// remoteObjects is an ObjectStore as the seam calls it.
type remoteObjects struct{ ObjectStore }

func (o remoteObjects) Stat(ctx context.Context, key string) (seam.ObjectInfo, error) {
	info, err := o.ObjectStore.Stat(ctx, key)
	return seam.ObjectInfo(info), err
}

func (o remoteObjects) List(ctx context.Context, prefix string, limit int) ([]seam.ObjectInfo, error) {
	infos, err := o.ObjectStore.List(ctx, prefix, limit)
	out := make([]seam.ObjectInfo, len(infos))
	for i, info := range infos {
		out[i] = seam.ObjectInfo(info)
	}
	return out, err
}

func (r *remoteFiles) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), r.timeout)
}

func (r *remoteFiles) putLog(h *logHeader, payload []byte) (uint64, error) {
	ctx, cancel := r.ctx()
	defer cancel()
	r.Mu.Lock()
	defer r.Mu.Unlock()
	return r.PutLocked(ctx, h, payload)
}

func (r *remoteFiles) createChunk(n uint32) (activeChunk, error) {
	if err := r.settleLocal(); err != nil {
		return nil, err
	}
	c, err := r.localFiles.createChunk(n)
	if err != nil {
		return nil, err
	}
	return &remoteChunk{activeChunk: c, r: r, n: n}, nil
}

func (r *remoteFiles) openChunk(n uint32, size int64) (activeChunk, error) {
	c, err := r.localFiles.openChunk(n, size)
	if err != nil {
		return nil, err
	}
	return &remoteChunk{activeChunk: c, r: r, n: n}, nil
}

// remoteChunk is the active chunk of a remote session: a commit group's
// bytes are written locally, then made durable by the local sync and the
// Create of their data object, side by side.
type remoteChunk struct {
	activeChunk
	r    *remoteFiles
	n    uint32
	pend []byte // written since the last sync
	off  int64  // where pend starts
}

func (c *remoteChunk) WriteAt(data []byte, off int64) error {
	if err := c.activeChunk.WriteAt(data, off); err != nil {
		return err
	}
	if len(data) == 0 {
		return nil
	}
	if len(c.pend) == 0 {
		c.off = off
	} else if off != c.off+int64(len(c.pend)) {
		return fmt.Errorf("sessionstore: write at %d after %d unsynced bytes from %d: %w", off, len(c.pend), c.off, errUnsynced)
	}
	c.pend = append(c.pend, data...)
	return nil
}

func (c *remoteChunk) Sync() error {
	pending, err := c.syncPending()
	if pending != nil {
		if perr := pending(); err == nil {
			err = perr
		}
	}
	return err
}

// syncPending issues the Create of the data object of the bytes written
// since the last sync (seam.LogWriter.PutData: it waits while the log's
// window of Creates is in flight), then syncs the local chunk while it
// is in flight. It returns the local sync's error and, when a Create was
// issued, pending: its wait, nil once the object and every one before it
// are stored. The commit pipeline acknowledges the group once both are
// nil; the next group is written and its Create issued meanwhile.
func (c *remoteChunk) syncPending() (pending func() error, err error) {
	if c.r.ackLocal {
		return c.syncLocal()
	}
	if len(c.pend) > 0 {
		c.r.Mu.Lock()
		pending = c.r.PutData(c.r.timeout, &logHeader{Kind: logData, Chunk: c.n, Off: c.off}, c.pend)
		c.r.Mu.Unlock()
		c.pend = c.pend[:0] // PutData encoded a copy
	}
	if err := c.activeChunk.Sync(); err != nil {
		if pending != nil {
			_ = pending() // the group fails: its Create ends first
		}
		return nil, err
	}
	return pending, nil
}

// syncLocal is syncPending for a session that acknowledges after the
// local sync (ackLocal): the Create of the data object of the bytes
// written since the last sync is issued (seam.LogWriter.PutData: it
// waits while the window is in flight), then the local chunk is synced,
// and the group is acknowledged: pending is nil, the Create following.
// A Create that failed before (Lost) fails the group; one that fails
// later fails the session's next call, and recoverTail stores the
// group.
func (c *remoteChunk) syncLocal() (pending func() error, err error) {
	var lost error
	if len(c.pend) > 0 {
		c.r.Mu.Lock()
		c.r.PutData(c.r.timeout, &logHeader{Kind: logData, Chunk: c.n, Off: c.off}, c.pend)
		c.r.Mu.Unlock()
		c.pend = c.pend[:0] // PutData encoded a copy
	}
	if err := c.activeChunk.Sync(); err != nil {
		return nil, err
	}
	if lost == nil {
		c.r.Mu.Lock()
		lost = c.r.Lost
		c.r.Mu.Unlock()
	}
	if lost != nil {
		return func() error { return lost }, nil
	}
	return nil, nil
}

// settleLocal waits, when groups are acknowledged after the local sync
// (ackLocal), until no Create of a data object is in flight, and returns
// why the lease is lost if it is: a new chunk and a sealing start only
// once every group acknowledged before them is stored, so that the
// groups acknowledged and not yet stored all lie in the newest chunk,
// plain (reconcileLocal's keepTail relies on it). Without ackLocal the
// groups were acknowledged once stored: nothing to wait for.
func (r *remoteFiles) settleLocal() error {
	if !r.ackLocal {
		return nil
	}
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.DrainLocked()
	return r.Lost
}

// sealChunk seals chunk n locally, uploads the sealed file as an
// immutable object and records it in the log. A failure to store it
// remotely leaves the chunk's data objects in place (the log still holds
// the chunk): it is logged, since the local sealing succeeded, and the
// upload is tried again at the next sealing and at the release
// (sendUnsent).
func (r *remoteFiles) sealChunk(n uint32, es []entry) error {
	if err := r.settleLocal(); err != nil {
		return err
	}
	exits := r.exitsOf(n, es)
	if err := r.localFiles.sealChunk(n, es); err != nil {
		return err
	}
	r.Mu.Lock()
	r.unsent = append(r.unsent, n)
	if exits != nil {
		if r.exits == nil {
			r.exits = map[uint32][]seam.Exit{}
		}
		r.exits[n] = exits
	}
	r.Mu.Unlock()
	r.sendUnsent()
	r.deleteDying()
	return nil
}

// sendUnsent uploads the chunks sealed here and not yet recorded in the
// log (unsent), oldest first; one that fails is logged and stays for the
// next try, and the others are tried all the same. Until a chunk is
// recorded the log keeps its data objects, so that nothing is lost, only
// bytes kept. The list is this open's: a chunk whose last try, at the
// release, failed too keeps its data objects in the log for good.
func (r *remoteFiles) sendUnsent() {
	r.Mu.Lock()
	todo := slices.Clone(r.unsent)
	r.Mu.Unlock()
	for _, n := range todo {
		r.Mu.Lock()
		stop := r.Lost != nil || !r.Holder
		_, done := r.State.SealedChunk(n)
		r.Mu.Unlock()
		if stop {
			return
		}
		if !done {
			if err := r.uploadSealed(n); err != nil {
				r.Log.Warn("sessionstore: sealed chunk not stored remotely yet; its data objects stay, and the next sealing or the release tries again", "chunk", n, "err", err)
				continue
			}
		}
		r.Mu.Lock()
		r.unsent = slices.DeleteFunc(r.unsent, func(c uint32) bool { return c == n })
		r.Mu.Unlock()
	}
}

func (r *remoteFiles) uploadSealed(n uint32) error {
	path := r.ChunkPath(n) + sealedExt
	zr, err := zchunk.Open(r.FS, path)
	if err != nil {
		return err
	}
	size, meta := zr.Size(), zr.MetaSize()
	zr.Close()
	// Its blocks and metadata compressed, raw at worst, with their frames.
	b, err := readFile(r.FS, path, nil, size+size>>10+meta+meta>>10+1<<16)
	if err != nil {
		return err
	}
	key := seam.SealedKey(r.ID, n, r.Lease)
	ctx, cancel := r.ctx()
	defer cancel()
	if err := r.Obj.Create(ctx, key, b); err != nil && !errors.Is(err, ErrObjectExists) {
		return seam.RemoteErr("create", key, err)
	}
	r.Mu.Lock()
	exits := r.exits[n]
	r.Mu.Unlock()
	if _, err = r.putLog(&logHeader{Kind: logSeal, Chunk: n, Key: key, Size: size, Exits: exits}, nil); err != nil {
		return err
	}
	r.Mu.Lock()
	delete(r.exits, n)
	r.Mu.Unlock()
	return nil
}

// exitsOf returns the exit table (seam.Exit) of plain chunk n, whose
// entries are es, reading from the chunk the lines whose parent is in
// another: nil when a line cannot be read (the table is a hint; the seal
// goes on without it).
func (r *remoteFiles) exitsOf(n uint32, es []entry) []seam.Exit {
	f, err := r.FS.OpenFile(r.ChunkPath(n), os.O_RDONLY, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	var line []byte
	return seam.Exits(es, func(i int) (eventline.Location, bool) {
		loc := es[i].Loc
		if loc.Length < 2 || loc.Length > eventline.MaxChunkLine+1 {
			return eventline.Location{}, false
		}
		line = slices.Grow(line[:0], int(loc.Length))[:loc.Length]
		if _, err := f.ReadAt(line, loc.Offset); err != nil || line[len(line)-1] != '\n' {
			return eventline.Location{}, false
		}
		_, pl, err := eventline.ReadEvent(line[:len(line)-1])
		if err != nil || pl.ParentAt.Length == 0 {
			return eventline.Location{}, false
		}
		return pl.ParentAt, true
	})
}

// deleteDying replaces the data objects sealing made unneeded LeaseTime
// ago by tombstones (seam.Tombstone, a Put): a Store reading an older
// state of the log may still read them until then. Those younger stay in
// the state (Dead) the release marker records, for the next holder to
// replace. The objects are replaced, not deleted: only compaction frees
// numbers (see "Numbers freed by compaction" above).
func (r *remoteFiles) deleteDying() {
	r.Mu.Lock()
	var due []seqRange
	keep := r.Dying[:0]
	for _, d := range r.Dying {
		if r.Now().Sub(d.Since) >= r.leaseT {
			due = append(due, d.Seqs...)
		} else {
			keep = append(keep, d)
		}
	}
	r.Dying = keep
	r.Mu.Unlock()
	if len(due) == 0 {
		return
	}
	ctx, cancel := r.ctx()
	defer cancel()
	var deleted []seqRange
	tomb := seam.Tombstone()
	for _, rg := range due {
		for seq := rg.From; seq <= rg.To; seq++ {
			if err := r.Obj.Put(ctx, seam.LogKey(r.ID, seq), tomb); err != nil {
				r.Log.Warn("sessionstore: unneeded log object stays", "key", seam.LogKey(r.ID, seq), "err", err)
				continue
			}
			deleted = seam.AddSeq(deleted, seq)
		}
	}
	r.Mu.Lock()
	r.State.Dead = seam.DropSeqs(r.State.Dead, deleted)
	r.Mu.Unlock()
}

// putBlob stores the blob locally and as an immutable object, before the
// line naming it is written; a split blob's strings first, each an
// object of its own, so that no object names a string the object store
// lacks. An object already there with the digest is reused once its
// content verifies.
func (r *remoteFiles) putBlob(d [32]byte, rec []byte, strs []blob.Ref) error {
	if err := r.localFiles.putBlob(d, rec, strs); err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	defer cancel()
	done := map[[32]byte]bool{}
	for _, sr := range strs {
		if done[sr.Digest] {
			continue
		}
		done[sr.Digest] = true
		b, err := readFile(r.FS, blobPath(r.Dir, sr.Digest), nil, blob.MaxFile(sr.Size))
		if err != nil {
			return err
		}
		if err := seam.PutBlobObject(ctx, r.Obj, r.ID, sr.Digest, b, sr.Size, nil); err != nil {
			return err
		}
	}
	b, err := readFile(r.FS, blobPath(r.Dir, d), nil, blob.MaxFile(int64(len(rec))))
	if err != nil {
		return err
	}
	return seam.PutBlobObject(ctx, r.Obj, r.ID, d, b, int64(len(rec)), blob.LocalStrings(r.FS, r.Dir))
}

func (r *remoteFiles) readBlob(d [32]byte, size int64) ([]byte, error) {
	rec, err := r.localFiles.readBlob(d, size)
	if err == nil {
		return rec, nil
	}
	if !blob.Incomplete(r.FS, r.Dir, d) {
		// Nothing is absent now: a concurrent read of a blob sharing a
		// string may have fetched it since this one failed.
		return r.localFiles.readBlob(d, size)
	}
	ctx, cancel := r.ctx()
	defer cancel()
	if err := fetchBlob(ctx, r.Obj, r.FS, r.ID, r.Dir, d, size, r.Perm, r.DirPerm); err != nil {
		return nil, err
	}
	return r.localFiles.readBlob(d, size)
}

// fetchBlob downloads blob d of session id into its directory dir,
// verified by its digest first (seam.FetchBlob), its damage a
// *CorruptionError.
func fetchBlob(ctx context.Context, obj seam.Objects, fsys vfs.FS, id uuid.UUID, dir string, d [32]byte, size int64, perm, dirPerm os.FileMode) error {
	return damage(seam.FetchBlob(ctx, obj, fsys, id, dir, d, size, perm, dirPerm))
}

// putMeta replaces session.json locally, then records it in the log and
// copies it where List reads it.
func (r *remoteFiles) putMeta(b []byte) error {
	if err := r.localFiles.putMeta(b); err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	defer cancel()
	r.Mu.Lock()
	seq, err := r.PutLocked(ctx, &logHeader{Kind: logMeta}, b)
	if err == nil {
		r.Meta = slices.Clone(b)
	}
	r.Mu.Unlock()
	if err != nil {
		return err
	}
	r.copyMeta(ctx, seq, b)
	return nil
}

// putLanes replaces the lanes file locally, then records it in the log;
// the state of the markers after it carries it.
func (r *remoteFiles) putLanes(b []byte) error {
	if err := r.localFiles.putLanes(b); err != nil {
		return err
	}
	ctx, cancel := r.ctx()
	defer cancel()
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if _, err := r.PutLocked(ctx, &logHeader{Kind: logLanes}, b); err != nil {
		return err
	}
	r.State.Lanes = slices.Clone(b)
	return nil
}

// copyMeta writes meta/<id>/<seq> for List and deletes older copies. A
// failure is logged: List shows the older copy until the next one.
func (r *remoteFiles) copyMeta(ctx context.Context, seq uint64, b []byte) {
	key := seam.MetaKey(r.ID, seq)
	if err := r.Obj.Create(ctx, key, b); err != nil && !errors.Is(err, ErrObjectExists) {
		r.Log.Warn("sessionstore: metadata copy for List not stored", "key", key, "err", err)
		return
	}
	infos, err := r.Obj.List(ctx, metaPrefix+r.ID.String()+"/", 0)
	if err != nil {
		return
	}
	for _, o := range infos {
		if o.Key < key {
			if err := r.Obj.Delete(ctx, o.Key); err != nil {
				r.Log.Warn("sessionstore: older metadata copy stays", "key", o.Key, "err", err)
			}
		}
	}
}

// release ends the lease with a release marker, so that another Store
// may open the session at once. With clean (the session wrote everything
// it acknowledged, and the local files hold exactly the log), it records
// in remote.json that the local files match the marker. A Store that
// lost the session writes nothing.
func (r *remoteFiles) release(clean bool) error {
	if r.following != nil {
		return r.releaseFollower(clean)
	}
	r.stopRenewal()
	r.compacting.Wait()
	r.Mu.Lock()
	held := r.Holder
	r.Mu.Unlock()
	if !held {
		return nil
	}
	r.sendUnsent()
	r.deleteDying()
	ctx, cancel := r.ctx()
	defer cancel()
	r.Mu.Lock()
	defer r.Mu.Unlock()
	if !errors.Is(r.Lost, ErrFenced) {
		// The Creates in flight end first (within RemoteTimeout): the
		// release follows every object of the lease. A fenced lease
		// writes nothing more: its Creates end on their own.
		r.DrainLocked()
	}
	r.Holder = false
	if errors.Is(r.Lost, ErrFenced) {
		return nil
	}
	if r.Lost != nil {
		// The state of the object after r.Seq is unknown: release after
		// the newest object if it is this lease's.
		infos, err := r.Obj.List(ctx, seam.LogPrefix(r.ID), 1)
		if err != nil || len(infos) == 0 {
			return seam.RemoteErr("list", seam.LogPrefix(r.ID), err)
		}
		newest := infos[0]
		seq, ok := seam.ParseLogKey(seam.LogPrefix(r.ID), newest.Key)
		if !ok {
			return corruptf(newest.Key, 0, "not a log object name")
		}
		h, err := r.headerOf(ctx, newest.Key)
		if err != nil || h.Lease != r.Lease {
			return err
		}
		if seq < r.Issued {
			// A Create of this lease is not in the log yet and may
			// still land: no release, which it could land after; the
			// session is taken over after LeaseTime, with fills.
			return fmt.Errorf("%w: session %s: log object %d of this lease is not stored; no release", ErrRemote, r.ID, r.Issued)
		}
		// The objects whose Create failed but were stored are this
		// lease's: the release's state holds them (their events stay,
		// unacknowledged). One of another lease (a void of a Store
		// taking the session) ends the lease: no release.
		for k := r.Seq + 1; k <= seq; k++ {
			key := seam.LogKey(r.ID, k)
			h, err := r.headerOf(ctx, key)
			if err != nil {
				return err
			}
			if h.Lease != r.Lease {
				return fmt.Errorf("%w: session %s: log object %s is another lease's", ErrFenced, r.ID, key)
			}
			r.State.Apply(k, h)
		}
		r.Seq, r.Lost, r.Holder, clean = seq, nil, true, false
		defer func() { r.Holder = false }()
	} else {
		r.Holder = true
		defer func() { r.Holder = false }()
	}
	seq, err := r.PutLocked(ctx, &logHeader{Kind: logRelease, State: r.State.Clone()}, r.Meta)
	if err != nil {
		return err
	}
	if r.Renewed {
		r.EndRenewals(ctx, r.Lease) // released: its renewals count no more
	}
	if !clean {
		return nil
	}
	ls := localRemoteState{Seq: seq, Lease: r.Lease}
	if len(r.State.Sealed) > 0 {
		ls.SealedThrough = slices.MaxFunc(r.State.Sealed, func(a, b sealedObject) int { return cmp.Compare(a.Chunk, b.Chunk) }).Chunk
		ls.SealedDigest = sealedDigest(r.State.Sealed, ls.SealedThrough)
	}
	b, _ := json.Marshal(ls)
	return durable.ReplaceFile(r.FS, r.Dir, remoteStateFile, b, r.Perm)
}

// headerOf reads the header of the log object key.
func (r *remoteFiles) headerOf(ctx context.Context, key string) (*logHeader, error) {
	b, err := r.Obj.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, seam.RemoteErr("get", key, err)
	}
	h, _, err := decodeLogObject(key, b)
	return h, err
}

// localRemoteState is remote.json.
//
// SealedThrough and SealedDigest vouch for the sealed chunks the
// directory holds: at the clean release that wrote them, every sealed
// chunk file in the directory whose chunk the log sealed, up to chunk
// SealedThrough, held that seal's object (checked when it was downloaded,
// or reconciled by the open, or sealed by this Store and so recorded);
// SealedDigest is sealedDigest of the log's sealed chunks then. A sealed
// chunk never changes in the log once sealed, and a Store writes a sealed
// chunk file only as the log's object, so a later open whose log has the
// same sealed chunks up to SealedThrough (the same digest) trusts those
// files by their names, without reading each one's footer: an open then
// costs nothing per sealed chunk the directory holds, however many the
// session has. (What that skips is a check of structure only: damage in a
// file is found by the read that meets it, as before.)
type localRemoteState struct {
	Seq           uint64    `json:"seq"`
	Lease         uuid.UUID `json:"lease"`
	SealedThrough uint32    `json:"sealed_through,omitempty"`
	SealedDigest  string    `json:"sealed_digest,omitempty"`
}

// sealedDigest returns the SHA-256, in hex, of the chunk, key and size of
// each of sealed up to chunk through, in the order of their chunks.
func sealedDigest(sealed []sealedObject, through uint32) string {
	sorted := slices.SortedFunc(slices.Values(sealed), func(a, b sealedObject) int { return cmp.Compare(a.Chunk, b.Chunk) })
	h := sha256.New()
	for _, s := range sorted {
		if s.Chunk <= through {
			fmt.Fprintf(h, "%d %s %d\n", s.Chunk, s.Key, s.Size)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// logView is the log as an open reads it (internal/seam's View).
type logView = seam.View

// readView is seam.LogWriter.ReadView with its errors in the root's
// types (remoteDamage).
func (r *remoteFiles) readView(ctx context.Context) (*logView, error) {
	v, err := r.ReadView(ctx)
	return v, remoteDamage(err)
}

// create makes the session's log, with its first object, for Create,
// and starts renewing the lease it holds.
func (r *remoteFiles) create(ctx context.Context, meta []byte) error {
	if err := r.createLog(ctx, meta); err != nil {
		return err
	}
	r.startRenewal() // after Mu: a renewal takes it
	return nil
}

func (r *remoteFiles) createLog(ctx context.Context, meta []byte) error {
	r.Mu.Lock()
	defer r.Mu.Unlock()
	r.Take(uuid.Must(uuid.NewV7()), 0, &remoteState{}, slices.Clone(meta), 0, 0)
	var err error
	r.marker, err = r.PutLocked(ctx, &logHeader{Kind: logCreate, State: &remoteState{}}, meta)
	if errors.Is(err, ErrFenced) {
		r.Holder, r.Lost = false, nil
		return fmt.Errorf("%w: session %s (in the object store)", ErrExists, r.ID)
	}
	if err != nil {
		r.Holder = false
		return err
	}
	r.copyMeta(ctx, r.Seq, meta)
	return nil
}

// Renewal. A holder that writes nothing keeps its lease by renewing it:
// once nothing of this lease reached the object store for a third of
// LeaseTime (checked every sixth), it puts the renewal object
// (seam.LogWriter.Renew: a LIST of the log's newest object, then one PUT
// of 36 bytes to one key per lease, which the lease's release deletes; a
// newest object of another lease fences the holder there, and it stops
// renewing). A session that writes no more (failed, damaged) stops
// renewing (openSession.stopRenewal).
// A Store that would take the session over counts the renewal as a write
// while it names the lease of the log's newest object (HolderIdle). So an
// open session is taken over only LeaseTime after its Store stopped
// renewing: it crashed, was cut off from the object store, or closed
// without its release. The cost of an idle open session is a LIST and a
// PUT every LeaseTime/3 (every 10 s with the default: 17,280 requests a
// day, $0.086 at S3's list price of $0.005 per 1,000), none while it
// writes. Fencing does not rest on it: a renewal that arrives late, or
// from a Store that lost the session, only delays a takeover.

// renewPeriod is how often renewLease checks whether a renewal is due.
func renewPeriod(lease time.Duration) time.Duration { return max(lease/6, 10*time.Millisecond) }

// startRenewal starts renewing the lease just taken.
func (r *remoteFiles) startRenewal() {
	r.stopRenewal() // one renewal per remoteFiles, whatever the number of takes
	ctx, stop := context.WithCancel(context.Background())
	r.renewStop, r.renewDone = stop, make(chan struct{})
	go r.renewLease(ctx, r.renewDone)
}

// stopRenewal ends the renewal, if one runs, and waits for it.
func (r *remoteFiles) stopRenewal() {
	if r.renewStop == nil {
		return
	}
	r.renewStop()
	<-r.renewDone
	r.renewStop, r.renewDone = nil, nil
}

// renewLease renews the lease when due until stop ends, which ends a
// renewal in flight too: stopRenewal (Close) waits for it.
func (r *remoteFiles) renewLease(stop context.Context, done chan struct{}) {
	defer close(done)
	t := time.NewTicker(renewPeriod(r.leaseT))
	defer t.Stop()
	for {
		select {
		case <-stop.Done():
			return
		case <-t.C:
		}
		r.Mu.Lock()
		due := r.Holder && r.Lost == nil && r.Now().Sub(r.Written) >= r.leaseT/3
		r.Mu.Unlock()
		if !due {
			continue
		}
		ctx, cancel := context.WithTimeout(stop, r.timeout)
		if err := r.Renew(ctx); err != nil && stop.Err() == nil {
			r.Log.Warn("sessionstore: lease renewal failed; it is tried again, and the session can be taken over LeaseTime after the last one", "session", r.ID, "err", err)
		}
		cancel()
	}
}

// leasePoll is how often an open waiting for a session another Store
// holds looks again.
func leasePoll(lease time.Duration) time.Duration {
	return min(max(lease/10, 10*time.Millisecond), time.Second)
}

// acquire takes the session for this Store: it waits for (wait) or
// refuses a session another Store holds, reconciles the local files with
// the log, and creates its open marker. It returns ErrNotFound for a
// session the object store does not hold.
func (r *remoteFiles) acquire(ctx context.Context, wait bool) error {
	for {
		v, err := r.readView(ctx)
		if errors.Is(err, errLogMoved) {
			continue // read while another Store wrote: read it again
		}
		if err != nil {
			return err
		}
		if v == nil || v.Deleted() {
			return fmt.Errorf("%w: session %s", ErrNotFound, r.ID)
		}
		// Held, unless released or held by this Store: a lease of an
		// earlier open of the session here, which closed without its
		// release (a remote failure), is this Store's to take.
		if v.Marker.Kind != logRelease && v.Marker.Store != r.Store {
			if gone, err := r.holderGone(ctx, v, wait); err != nil {
				return err
			} else if !gone {
				continue
			}
		}
		// An earlier lease of this Store that acknowledged after the
		// local sync and did not release: the local bytes past the log
		// are acknowledged events, kept and stored first.
		r.keepTail = !v.Clean() && v.Marker.Store == r.Store && v.Marker.Local
		if err := r.reconcileLocal(ctx, v, headPrefetchOf(ctx)); errors.Is(err, errLogMoved) {
			continue
		} else if err != nil {
			return err
		}
		r.Mu.Lock()
		// A lease storing another's tail records it too: a crash before
		// it is stored leaves the next open here to store it.
		r.LogWriter.Local = r.ackLocal || r.tail.End > r.tail.Off
		err = r.take(ctx, v)
		if err == nil {
			err = r.storeTail(ctx)
		}
		if errors.Is(err, ErrFenced) || errors.Is(err, errLogMoved) {
			// Another Store wrote meanwhile: read the log again.
			r.Lost, r.Holder = nil, false
			r.Mu.Unlock()
			continue
		}
		if err != nil {
			r.Holder = false
		}
		if err == nil {
			// The dead objects the log's state names die LeaseTime after
			// their sealing (At), or after now if it does not say.
			now := r.Now()
			seam.StampDead(r.State.Dead, now)
			for _, rg := range r.State.Dead {
				r.Dying = append(r.Dying, seam.Dying{Since: time.UnixMilli(rg.At), Seqs: []seqRange{rg}})
			}
		}
		r.Mu.Unlock()
		if err == nil {
			r.startRenewal() // after Mu: a renewal takes it
			r.startCompaction(v.MarkerSeq)
		}
		return err
	}
}

// storeTail stores the bytes reconcileLocal kept past the log (r.tail),
// with Mu held, after the lease's marker: as data objects of this lease,
// each of whole records and at most tailObject bytes, created one after
// the other, before the session writes anything else. A failure fails
// the open; the bytes stay in the local chunk, and the next open here
// stores what is left (this lease's marker records Local).
func (r *remoteFiles) storeTail(ctx context.Context) error {
	t := r.tail
	if t.End <= t.Off {
		return nil
	}
	f, err := r.FS.OpenFile(r.ChunkPath(t.Chunk), os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, t.End-t.Off)
	if _, err := f.ReadAt(b, t.Off); err != nil {
		return fmt.Errorf("sessionstore: read the unstored tail of %s: %w", r.ChunkPath(t.Chunk), err)
	}
	for off := 0; off < len(b); {
		n := len(b) - off
		if n > tailObject {
			// Whole records: up to the last line end within the limit,
			// or past it when one record is larger.
			if i := bytes.LastIndexByte(b[off:off+tailObject], '\n'); i >= 0 {
				n = i + 1
			} else if i := bytes.IndexByte(b[off:], '\n'); i >= 0 {
				n = i + 1
			}
		}
		if _, err := r.PutLocked(ctx, &logHeader{Kind: logData, Chunk: t.Chunk, Off: t.Off + int64(off)}, b[off:off+n]); err != nil {
			return err
		}
		off += n
	}
	r.Log.Info("sessionstore: stored the events acknowledged after the local sync that the object store lacked", "session", r.ID, "chunk", t.Chunk, "from", t.Off, "bytes", len(b))
	r.tail = localTail{}
	return nil
}

// tailObject bounds the data objects storeTail creates.
const tailObject = 4 << 20

// startCompaction deletes, in the background, the log objects below
// below (the marker this lease took the session from) that its state
// does not keep (seam.LogWriter.Compact), once CompactEvery numbers lie
// between the state's Compacted and it: the session's object count stays
// bounded however many handoffs it sees. Once every deletion succeeded,
// the state's Compacted moves to below and its CompactFrom to the oldest
// data object kept (which may die and go later), which the lease's
// release marker records; a compaction cut short (a failed deletion, a
// crash) is done again by the next holder. release waits for it.
func (r *remoteFiles) startCompaction(below uint64) {
	r.Mu.Lock()
	st := r.State.Clone()
	r.Mu.Unlock()
	if r.keepLog || !seam.CompactDue(st, below) {
		return
	}
	r.compacting.Add(1)
	go func() {
		defer r.compacting.Done()
		ctx, cancel := r.ctx()
		defer cancel()
		stats, err := r.Compact(ctx, st, below, false)
		if err != nil {
			r.Log.Warn("sessionstore: log compaction stopped; the next holder does it again", "session", r.ID, "err", err)
			return
		}
		r.Mu.Lock()
		if below > r.State.Compacted {
			r.State.Compacted, r.State.CompactFrom = below, stats.From
		}
		r.Mu.Unlock()
	}()
}

// take takes the session after the log v, with Mu held: it fills the
// numbers free after v's marker (seam's FillGaps: Creates of the
// previous holder that may still be in flight can no more land there),
// creates its open marker after v's newest object, and, unless the log
// ended with a release marker (whose lease waited for its Creates),
// fills the numbers after its marker that such Creates may still take
// (FillLocked). errLogMoved or ErrFenced: another Store wrote meanwhile.
func (r *remoteFiles) take(ctx context.Context, v *logView) error {
	lease := uuid.Must(uuid.NewV7())
	if err := r.FillGaps(ctx, v, lease); err != nil {
		return err
	}
	fills := 0
	st := v.State.Clone()
	if !v.Clean() {
		fills = int(staleWindow(v)) - 1
		// The numbers the holder's Creates may still take stay taken
		// for good: compaction never frees them.
		st.Keep = append(st.Keep, seam.KeepRange(v.NewestSeq+1, staleWindow(v)))
	}
	r.Take(lease, v.NewestSeq, st, v.Meta, staleWindow(v), fills)
	seq, err := r.PutLocked(ctx, &logHeader{Kind: logOpen, State: st.Clone()}, v.Meta)
	if err != nil {
		return err
	}
	r.marker = seq
	if err := r.FillLocked(ctx, fills); err != nil {
		return err
	}
	// The marker landed after every object, unless compaction had freed
	// its number below a newer marker (a listing that old): then the log
	// is read again.
	return r.CheckNewestLocked(ctx)
}

// staleWindow is how many Creates the leases before the log v's newest
// marker may still have in flight: the window the marker carries
// (seam.Header.Window: the largest of its lease's and those it took the
// session from).
func staleWindow(v *logView) uint64 {
	if v.Marker == nil {
		return 1
	}
	return v.Marker.MaxInFlight()
}

// holderGone reports whether the holder of the log v, another Store's
// lease, wrote and renewed nothing for LeaseTime (HolderIdle), so that the
// caller (an open, a Delete) may take the session. While it is held it
// returns ErrLocked, or with wait pauses one poll and returns false for
// the caller to read the log again.
func (r *remoteFiles) holderGone(ctx context.Context, v *logView, wait bool) (bool, error) {
	idle, err := r.HolderIdle(ctx, v, r.leaseT)
	if err != nil {
		return false, err
	}
	if idle >= r.leaseT {
		r.Log.Warn("sessionstore: taking over a session whose holder wrote nothing for the lease time", "newest", v.Newest.Key, "idle", idle)
		return true, nil
	}
	if !wait {
		return false, fmt.Errorf("%w: session %s is held by another Store (newest log object %s; it wrote or renewed its lease %s ago, lease %s)", ErrLocked, r.ID, v.Newest.Key, idle.Round(time.Millisecond), r.leaseT)
	}
	select {
	case <-ctx.Done():
		return false, ctx.Err()
	case <-time.After(leasePoll(r.leaseT)):
	}
	return false, nil
}

// remoteLost reports whether err stopped a remote session's writes for a
// remote cause, which its next open settles by reading the log.
func remoteLost(err error) bool {
	return err != nil && (errors.Is(err, ErrFenced) || errors.Is(err, ErrRemote))
}

// fetchMissingBlob is called after a read of blob d of the session in
// dir failed. When the store has a remote it downloads the blob, or the
// strings of a split blob, absent from the local directory, and reports
// whether the caller should read again: after a download, and also when
// nothing is absent any more, since another read of a blob sharing a
// string (Load reads several at once) may have fetched it since the
// caller's read failed. A download's error is ErrRemote, or a
// *CorruptionError naming the object's key: a restored session's blobs
// come when a read needs them.
func (s *Store) fetchMissingBlob(ctx context.Context, dir string, d [32]byte, size int64) (bool, error) {
	if s.opts.Remote == nil {
		return false, nil
	}
	if !blob.Incomplete(s.opts.fs, dir, d) {
		return true, nil
	}
	id, err := uuid.Parse(filepath.Base(dir))
	if err != nil {
		return false, nil
	}
	if err := fetchBlob(ctx, remoteObjects{s.opts.Remote}, s.opts.fs, id, dir, d, size, s.opts.FileMode, s.opts.DirMode); err != nil {
		return false, err
	}
	return true, nil
}

// listRemote is List for a store with a remote: the newest metadata copy
// of every session (meta/<id>/<n>), read several at a time.
func (s *Store) listRemote(ctx context.Context) ([]Meta, error) {
	ids, keys, err := s.remoteMetaKeys(ctx)
	if err != nil {
		return nil, err
	}
	metas, errs, err := s.readRemoteMetas(ctx, ids, keys)
	if err != nil {
		return nil, err
	}
	// A copy not found was replaced by a newer one since the listing.
	return listResult(ids, metas, errs, ErrObjectNotFound, func(i int) string { return keys[i] })
}

// remoteMetaKeys lists the metadata copies of every session (meta/<id>/<n>)
// and returns each session's id and the key of its newest copy, in
// ascending order of id. The listing returns a thousand keys a request
// (S3's page), and reads no copy.
func (s *Store) remoteMetaKeys(ctx context.Context) ([]uuid.UUID, []string, error) {
	infos, err := s.opts.Remote.List(ctx, metaPrefix, 0)
	if err != nil {
		return nil, nil, seam.RemoteErr("list", metaPrefix, err)
	}
	// Keys sort by id, then number: the last of each id is its newest.
	var ids []uuid.UUID
	var keys []string
	for _, o := range infos {
		rest, ok := strings.CutPrefix(o.Key, metaPrefix)
		idStr, _, cut := cutAt(rest, '/')
		ok = ok && cut
		id, err := uuid.Parse(idStr)
		if !ok || err != nil {
			continue
		}
		if n := len(ids); n > 0 && ids[n-1] == id {
			keys[n-1] = o.Key
			continue
		}
		ids, keys = append(ids, id), append(keys, o.Key)
	}
	return ids, keys, nil
}

// readRemoteMetas reads the metadata copies keys of the sessions ids, 16
// at a time: each one's Meta, or its error (ErrRemote). A copy not found
// was replaced by a newer one since the listing, which is read instead;
// a session with no copy left was deleted (ErrObjectNotFound).
func (s *Store) readRemoteMetas(ctx context.Context, ids []uuid.UUID, keys []string) ([]Meta, []error, error) {
	metas := make([]Meta, len(ids))
	errs := make([]error, len(ids))
	forEach(len(ids), 16, func(_, i int) {
		key := keys[i]
		b, err := s.opts.Remote.Get(ctx, key, 0, -1)
		if errors.Is(err, ErrObjectNotFound) {
			// Replaced by a newer copy since the listing (its holder
			// deletes the older ones), or deleted: the newest now.
			prefix := metaPrefix + ids[i].String() + "/"
			infos, lerr := s.opts.Remote.List(ctx, prefix, 0)
			if lerr != nil {
				errs[i] = seam.RemoteErr("list", prefix, lerr)
				return
			}
			if len(infos) == 0 {
				errs[i] = fmt.Errorf("get %s: %w", key, err) // deleted
				return
			}
			key = infos[len(infos)-1].Key
			b, err = s.opts.Remote.Get(ctx, key, 0, -1)
		}
		if err != nil {
			errs[i] = seam.RemoteErr("get", key, err)
			return
		}
		metas[i], _, errs[i] = decodeMeta(b, ids[i], key)
	})
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s.reg.live(metas)
	return metas, errs, nil
}

// listPageRemote is listPage with a remote: the metadata copies below
// before are listed (a few listings with an ObjectListerAfter:
// listPageAfter; else all of them, a listing request per thousand
// sessions; no copy read), then
// read newest first from before, 16 at a time, until n selected
// sessions are read: a page costs the listing and the reads of its own
// sessions (and of those q rejects on the way), not one read per session
// of the store.
func (s *Store) listPageRemote(ctx context.Context, q Query, before *uuid.UUID, n int) ([]listItem, listCost, error) {
	if la, ok := s.opts.Remote.(ObjectListerAfter); ok {
		items, cost, err := s.listPageAfter(ctx, la, q, before, n)
		if !errors.Is(err, errors.ErrUnsupported) {
			return items, cost, err
		}
	}
	ids, keys, err := s.remoteMetaKeys(ctx)
	if err != nil {
		return nil, listCost{}, err
	}
	end := len(ids) // ids below before: ids[:end]
	if before != nil {
		end, _ = slices.BinarySearchFunc(ids, *before, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	}
	items, _, cost, err := s.readMetasNewestFirst(ctx, q, ids[:end], keys[:end], n)
	return items, cost, err
}

// readMetasNewestFirst reads the metadata copies keys of the sessions
// ids (ascending), newest first, 16 at a time, until n sessions q
// selects are read: the items, how many matched, and the reads.
func (s *Store) readMetasNewestFirst(ctx context.Context, q Query, ids []uuid.UUID, keys []string, n int) ([]listItem, int, listCost, error) {
	end := len(ids)
	var items []listItem
	var cost listCost
	matched := 0
	for end > 0 && matched < n {
		start := max(0, end-16)
		metas, errs, err := s.readRemoteMetas(ctx, ids[start:end], keys[start:end])
		if err != nil {
			return nil, matched, cost, err
		}
		cost.reads += end - start
		for i := end - start - 1; i >= 0 && matched < n; i-- {
			switch {
			case errors.Is(errs[i], ErrObjectNotFound):
				// Replaced by a newer copy since the listing.
			case errs[i] != nil:
				items = append(items, listItem{bad: &UnreadableSession{ID: ids[start+i], Path: keys[start+i], Err: errs[i]}})
			case q.Matches(metas[i]):
				items = append(items, listItem{meta: metas[i]})
				matched++
			}
		}
		end = start
	}
	return items, matched, cost, nil
}

// metaRemote is Meta for a store with a remote: the session's newest
// metadata copy.
func (s *Store) metaRemote(ctx context.Context, id uuid.UUID) (Meta, error) {
	prefix := metaPrefix + id.String() + "/"
	infos, err := s.opts.Remote.List(ctx, prefix, 0)
	if err != nil {
		return Meta{}, seam.RemoteErr("list", prefix, err)
	}
	if len(infos) == 0 {
		return Meta{}, fmt.Errorf("%w: session %s", ErrNotFound, id)
	}
	if gone, err := s.remoteDeleted(ctx, id); err != nil || gone {
		return Meta{}, cmp.Or(err, fmt.Errorf("%w: session %s was deleted", ErrNotFound, id))
	}
	key := infos[len(infos)-1].Key
	b, err := s.opts.Remote.Get(ctx, key, 0, -1)
	if err != nil {
		return Meta{}, seam.RemoteErr("get", key, err)
	}
	m, _, err := decodeMeta(b, id, key)
	return m, err
}

func cutAt(s string, c byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// holderFile (internal/layout) names a root as the holder of the remote
// sessions' leases it takes. A process that opens the root after one that died holding a
// session takes the session back at once instead of after LeaseTime: the
// session's lock file guarantees that no other process of this machine
// uses it meanwhile, and another root (another machine) has another id.
// holderID reads the root's holder id, making it on first use.
func holderID(fsys vfs.FS, dir string, perm os.FileMode) (uuid.UUID, error) {
	path := filepath.Join(dir, holderFile)
	b, err := readFile(fsys, path, nil, 4<<10)
	if err == nil {
		id, perr := uuid.ParseBytes(bytes.TrimSpace(b))
		if perr != nil {
			return uuid.Nil, corruptf(path, 0, "holder id: %w", perr)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return uuid.Nil, err
	}
	id := uuid.New()
	if err := durable.ReplaceFile(fsys, dir, holderFile, []byte(id.String()+"\n"), perm); err != nil {
		return uuid.Nil, fmt.Errorf("sessionstore: create %s: %w", path, err)
	}
	return id, nil
}
