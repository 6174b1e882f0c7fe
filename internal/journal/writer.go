package journal

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Dir is the directory, under the root, that holds the journal files.
const Dir = "journal"

// WALPath is the journal file of owner under root.
func WALPath(root, owner string) string { return filepath.Join(root, Dir, owner+".wal") }

// LockPath is the lock file of owner under root.
func LockPath(root, owner string) string { return filepath.Join(root, Dir, owner+".lock") }

// Errors of the Writer.
var (
	// ErrFailed is returned by every Commit after a write, a sync, an
	// apply or a checkpoint failed: the state of the journal or of the
	// files it covers is unknown, so the writer refuses further commits
	// and leaves the journal file in place for a replay. It wraps the
	// first failure.
	ErrFailed = errors.New("journal: writer refuses commits after an earlier failure")
	// ErrClosed is returned by Commit after Close.
	ErrClosed = errors.New("journal: writer closed")
	// ErrApply wraps the error of a Commit's apply. The writer goes on:
	// the records are durable in the journal and their files may hold
	// them in part, so a replay after a crash writes them whole, and a
	// checkpoint may pass them without a replay ever writing them. The
	// caller, which did not acknowledge them, must leave its files so
	// that either is right: write nothing after them until it has cut
	// them out of the file, synced it and committed a Forget covering it
	// (or stop writing the file).
	ErrApply = errors.New("journal: apply failed")
	// ErrTooLarge reports a Commit whose records take more than half the
	// record area (Writer.MaxCommit): the caller writes and syncs such
	// data directly.
	ErrTooLarge = errors.New("journal: records larger than the journal allows")
	// ErrBadOwner reports an owner id that is not 32 lower-case hex
	// digits.
	ErrBadOwner = errors.New("journal: owner id is not 32 hex digits")
)

// Options configure Create. The zero value is the default.
type Options struct {
	// Size is the journal file's size in bytes, preallocated at creation:
	// 0 means DefaultSize; otherwise between MinSize and MaxSize, rounded
	// down to a multiple of 4096.
	Size int64
	// SyncFiles makes the files at paths (relative to the root,
	// slash-separated) durable; a checkpoint calls it before it lets the
	// journal reuse the space of the records that wrote them. A path may
	// name a file removed since (after a Forget): it is skipped. nil
	// opens each file and syncs it.
	SyncFiles func(paths []string) error
	// FileMode and DirMode are the permissions of the files and of the
	// directory Create makes; 0 means 0o600 and 0o700.
	FileMode, DirMode fs.FileMode

	// small lets tests ask for files smaller than MinSize.
	small bool
}

// Stats counts what a Writer did.
type Stats struct {
	Commits     int64 // Commit calls that returned their records durable
	Records     int64 // records made durable
	Groups      int64 // commit groups: one write and one sync each
	Syncs       int64 // syncs of the journal file (groups and headers)
	Wraps       int64 // groups written back at the start of the record area
	Checkpoints int64 // headers written with a new start
	RoomWaits   int64 // times a group waited for a checkpoint to free room
}

// Writer appends records to one journal file, group-committing
// concurrent callers; see the package doc.
type Writer struct {
	fsys      vfs.FS
	root      string
	owner     string
	path      string
	salt      uint32
	size      int64 // file size
	capacity  int64 // record area: size - recordsStart
	maxCommit int64
	f         vfs.File
	lock      io.Closer
	syncFiles func([]string) error
	perm      fs.FileMode

	stop    chan struct{} // closed by Close: the checkpointer returns
	stopped chan struct{} // closed when the checkpointer has returned
	kick    chan struct{} // wakes the checkpointer (buffered, 1)

	mu   sync.Mutex
	cond *sync.Cond // on mu: applies finished, a checkpoint ended, the leader went idle

	queue   []*commit    // commits waiting for a group, oldest first
	leading bool         // a leader is forming, writing or syncing a group
	active  atomic.Int64 // Commit calls between queueing and return (raised under mu)
	err     error        // sticky failure (wraps ErrFailed)
	cause   error        // what caused err
	closed  bool

	// The ring. Virtual positions count every byte the record area has
	// taken since creation, the bytes skipped at a wrap included; the
	// physical offset of a virtual position v is recordsStart + v mod
	// capacity.
	tail    int64  // physical offset of the next group
	written int64  // virtual position of tail
	nextLSN uint64 // lsn of the next record
	headV   int64  // virtual position of the durable header's start
	groups  []*group
	hdr     header // the durable header
	hdrSlot int    // the slot holding it
	ckpt    bool   // a checkpoint is running
	stats   Stats
}

// group is a commit group made durable and not yet checkpointed.
type group struct {
	endOff   int64        // physical offset after it (the next group's, unless it wraps)
	endV     int64        // virtual position after it
	nextLSN  uint64       // lsn after its last record
	applying atomic.Int64 // its commits whose apply has not returned
	paths    map[string]struct{}
}

// commit is one Commit call's records, queued for a group.
type commit struct {
	frames []byte
	recs   []Record
	wake   chan struct{} // signaled once: the commit is done, or its caller leads
	done   bool          // set (under mu) before wake is signaled, by finish only
	lsn    uint64        // its last record's lsn
	err    error
	grp    *group
}

// Create makes a new journal under root with a fresh random owner id:
// it takes the owner's lock (LockPath), writes the file (WALPath) with
// zeros up to its size and an empty log, syncs it and its directory, and
// starts the background checkpointer. When it returns nil the journal
// file exists, durably, and holds no record. When it fails it removes
// the journal and lock files it made (a crash meanwhile may leave them:
// a journal file with no valid header, which no Commit ever used).
func Create(fsys vfs.FS, root string, opts *Options) (*Writer, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	switch {
	case o.Size == 0:
		o.Size = DefaultSize
	case o.small && o.Size >= minTestSize && o.Size <= MaxSize:
	case o.Size < MinSize || o.Size > MaxSize:
		return nil, fmt.Errorf("journal: size %d out of bounds [%d, %d]", o.Size, MinSize, MaxSize)
	}
	o.Size &^= slotSize - 1
	var id [16]byte
	var salt [4]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, err
	}
	if _, err := rand.Read(salt[:]); err != nil {
		return nil, err
	}
	owner := hex.EncodeToString(id[:])
	dir := filepath.Join(root, Dir)
	if o.FileMode == 0 {
		o.FileMode = 0o600
	}
	if o.DirMode == 0 {
		o.DirMode = 0o700
	}
	if err := fsys.MkdirAll(dir, o.DirMode); err != nil {
		return nil, err
	}
	if err := fsys.SyncDir(root); err != nil {
		return nil, err
	}
	lock, err := fsys.Lock(LockPath(root, owner), o.FileMode)
	if err != nil {
		return nil, err
	}
	w := &Writer{
		fsys: fsys, root: root, owner: owner, path: WALPath(root, owner),
		salt: binary.LittleEndian.Uint32(salt[:]), size: o.Size,
		capacity: o.Size - recordsStart, lock: lock, syncFiles: o.SyncFiles, perm: o.FileMode,
		stop: make(chan struct{}), stopped: make(chan struct{}), kick: make(chan struct{}, 1),
		tail: recordsStart, nextLSN: 1,
	}
	w.maxCommit = (w.capacity / 2) &^ (align - 1)
	w.cond = sync.NewCond(&w.mu)
	if w.syncFiles == nil {
		w.syncFiles = w.syncPaths
	}
	w.hdr = header{salt: w.salt, owner: id, seq: 1, size: w.size, startOff: recordsStart, startLSN: 1, boot: BootHash(fsys.BootID())}
	if err := w.preallocate(); err != nil {
		// Remove what was begun (best effort: the failure is what
		// Create reports), so that a retry on a full disk does not
		// leak a partial journal each time; the lock file last, still
		// locked.
		if w.f != nil {
			w.f.Close()
			w.fsys.Remove(w.path)
		}
		w.fsys.Remove(LockPath(root, owner))
		lock.Close()
		return nil, err
	}
	go w.checkpointer()
	return w, nil
}

// preallocate writes the file: zeros, then the first header, synced,
// and syncs its directory.
func (w *Writer) preallocate() error {
	f, err := w.fsys.OpenFile(w.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, w.perm)
	if err != nil {
		return err
	}
	w.f = f
	zeros := make([]byte, min(w.size, 1<<20))
	for off := int64(0); off < w.size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), w.size-off)
		if _, err := f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
	}
	if _, err := f.WriteAt(w.hdr.encode(), 0); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return w.fsys.SyncDir(filepath.Join(w.root, Dir))
}

// Owner is the journal's owner id (32 hex digits).
func (w *Writer) Owner() string { return w.owner }

// Path is the journal file's path.
func (w *Writer) Path() string { return w.path }

// MaxCommit is the most bytes the frames of one Commit may take: half
// the record area. A record of n bytes of data and a path of p bytes
// takes 43+p+n bytes, rounded up to a multiple of 8.
func (w *Writer) MaxCommit() int64 { return w.maxCommit }

// Stats returns what the writer did so far.
func (w *Writer) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stats
}

// Forget commits a Forget record for prefix: once it returns nil, no
// replay applies the records committed before it to a path starting with
// prefix. The caller has made those files durable (or removed them)
// before calling it.
func (w *Writer) Forget(ctx context.Context, prefix string) (uint64, error) {
	return w.Commit(ctx, []Record{{Op: OpForget, Path: prefix}}, nil)
}

// Commit makes recs durable in the journal and then applies them, and
// returns the lsn of the last of them.
//
// It checks and encodes the records, queues them, and waits for a group
// to carry them: concurrent callers share one write and one sync of the
// journal file (see the package doc). Once the group is synced it calls
// apply, in the caller's goroutine (nil: the writer itself writes each
// OpWrite record's data into its file, without a sync); apply must write
// every OpWrite record into its file, and must not call Commit. Commit
// returns after apply.
//
// When Commit returns nil the records are durable: after a crash at any
// later point, a replay applies them (unless a Forget made them
// obsolete, or a checkpoint made their files durable). When it returns an
// error, the records may be durable or not, but they are all there or
// none is: a replay never shows part of one Commit's records.
//
// ctx is checked before the records are queued only. Errors: ctx's,
// ErrInvalidRecord, ErrTooLarge (nothing written), ErrClosed, an error
// wrapping ErrFailed (after this or an earlier failure), an error
// wrapping ErrApply and apply's (the records are durable, their files
// may hold them in part: see ErrApply; the writer goes on).
func (w *Writer) Commit(ctx context.Context, recs []Record, apply func() error) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if len(recs) == 0 {
		return 0, fmt.Errorf("%w: no records", ErrInvalidRecord)
	}
	var size int64
	for i := range recs {
		if err := checkRecord(&recs[i]); err != nil {
			return 0, err
		}
		size += frameSize(len(recs[i].Path), len(recs[i].Data))
		if size > w.maxCommit {
			return 0, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, w.maxCommit)
		}
	}
	c := &commit{frames: make([]byte, 0, size), recs: recs, wake: make(chan struct{}, 1)}
	for i := range recs {
		c.frames = appendFrame(c.frames, w.salt, &recs[i])
	}

	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return 0, ErrClosed
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return 0, err
	}
	w.queue = append(w.queue, c)
	w.active.Add(1)
	lead := !w.leading
	w.leading = true
	w.mu.Unlock()

	// Woken, c is done (finish set done, lsn, err and grp before the
	// signal, which orders them before these reads) or its caller leads:
	// then nothing else touches c until its own lead finishes it.
	if !lead {
		<-c.wake
	}
	if !c.done {
		w.lead() // handed the lead: c is at the head of the queue
	}
	lsn, err := c.lsn, c.err
	var aerr error
	if err == nil {
		if apply == nil {
			apply = func() error { return w.applyRecords(recs) }
		}
		aerr = apply()
	}
	if aerr != nil {
		// The records are durable here, their files may hold them in
		// part: the caller did not acknowledge them and makes its files
		// whole (see ErrApply). A checkpoint may pass them.
		err = fmt.Errorf("%w: %w", ErrApply, aerr)
	}
	// Without mu, but for the last apply of a group (a leader may wait
	// for room: the checkpoint can now free the group) and the last
	// Commit under way (Close waits for it): each wakes the waiters on
	// cond, taking mu after its count fell, so that a waiter that saw the
	// old count under mu is already waiting.
	applied := c.grp != nil && c.grp.applying.Add(-1) == 0
	if w.active.Add(-1) == 0 || applied {
		w.mu.Lock()
		w.cond.Broadcast()
		w.mu.Unlock()
	}
	return lsn, err
}

// fail makes err the writer's sticky failure, if it has none. The caller
// holds mu.
func (w *Writer) fail(err error) {
	if w.err == nil {
		w.err = fmt.Errorf("%w: %w", ErrFailed, err)
		w.cause = err
	}
	w.cond.Broadcast()
}

// lead forms the next group from the head of the queue, writes it with
// one write, syncs it, finishes its commits and hands the lead to the
// next queued commit. The caller leads (w.leading) and holds nothing.
func (w *Writer) lead() {
	w.mu.Lock()
	defer w.mu.Unlock()
	var take int
	var n int64
	for take < len(w.queue) && n+int64(len(w.queue[take].frames)) <= w.maxCommit {
		n += int64(len(w.queue[take].frames))
		take++
	}
	cs := append([]*commit(nil), w.queue[:take]...)
	w.queue = w.queue[take:]
	// Room in the ring: a group that does not fit before the file's end
	// goes to recordsStart, and the bytes skipped count as taken.
	var off, skip int64
	waited := false
	for w.err == nil {
		off, skip = w.tail, 0
		if off+n > w.size {
			off, skip = recordsStart, w.size-w.tail
		}
		if w.written-w.headV+skip+n <= w.capacity {
			break
		}
		if !waited {
			w.stats.RoomWaits++
			waited = true
		}
		w.kickCheckpoint()
		w.cond.Wait()
	}
	if w.err != nil {
		w.finish(cs, nil, w.err)
		w.handOff()
		return
	}
	first := w.nextLSN
	var count uint32
	for _, c := range cs {
		count += uint32(len(c.recs))
	}
	w.mu.Unlock()

	buf := make([]byte, 0, n)
	lsn := first
	for _, c := range cs {
		at := len(buf)
		buf = append(buf, c.frames...)
		for range c.recs {
			at += int(sealFrame(buf[at:], w.salt, lsn, first, count))
			lsn++
		}
		c.lsn = lsn - 1
	}
	_, err := w.f.WriteAt(buf, off)
	if err == nil {
		err = w.f.Sync()
	}

	w.mu.Lock()
	w.stats.Syncs++
	if err != nil {
		w.fail(err)
		w.finish(cs, nil, w.err)
		w.handOff()
		return
	}
	g := &group{endOff: off + n, nextLSN: lsn, paths: map[string]struct{}{}}
	g.applying.Store(int64(len(cs)))
	if g.endOff == w.size {
		g.endOff = recordsStart
	}
	w.written += skip + n
	g.endV = w.written
	w.tail, w.nextLSN = g.endOff, lsn
	w.groups = append(w.groups, g)
	for _, c := range cs {
		for i := range c.recs {
			r := &c.recs[i]
			if r.Op == OpWrite {
				g.paths[r.Path] = struct{}{}
				continue
			}
			for _, og := range w.groups {
				for p := range og.paths {
					if strings.HasPrefix(p, r.Path) {
						delete(og.paths, p)
					}
				}
			}
		}
	}
	w.stats.Groups++
	w.stats.Records += int64(count)
	w.stats.Commits += int64(len(cs))
	if skip > 0 {
		w.stats.Wraps++
	}
	w.finish(cs, g, nil)
	if w.written-w.headV > w.capacity/2 {
		w.kickCheckpoint()
	}
	w.handOff()
}

// finish ends the commits of a group and wakes their callers. The caller
// holds mu.
func (w *Writer) finish(cs []*commit, g *group, err error) {
	for _, c := range cs {
		c.done, c.err, c.grp = true, err, g
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
}

// handOff passes the lead to the oldest queued commit, or ends it. The
// caller leads and holds mu.
func (w *Writer) handOff() {
	if len(w.queue) == 0 {
		w.leading = false
		w.cond.Broadcast()
		return
	}
	w.queue[0].wake <- struct{}{}
}

// applyRecords writes the OpWrite records into their files: Commit's
// default apply.
func (w *Writer) applyRecords(recs []Record) error {
	for i := range recs {
		r := &recs[i]
		if r.Op != OpWrite {
			continue
		}
		f, err := w.fsys.OpenFile(filepath.Join(w.root, filepath.FromSlash(r.Path)), os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		_, err = f.WriteAt(r.Data, r.Offset)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// syncPaths is the default SyncFiles: it opens and syncs each file,
// skipping a missing one, syncWorkers at a time (a device serves
// concurrent syncs of different files together), and returns the first
// error.
func (w *Writer) syncPaths(paths []string) error {
	work := make(chan string)
	errs := make(chan error, syncWorkers)
	var wg sync.WaitGroup
	for range min(syncWorkers, len(paths)) {
		wg.Go(func() {
			var first error
			for p := range work {
				if err := w.syncPath(p); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		})
	}
	for _, p := range paths {
		work <- p
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// syncWorkers bounds the concurrent syncs of a checkpoint's files.
const syncWorkers = 16

// syncPath opens and syncs the file p, skipping it if it is missing.
func (w *Writer) syncPath(p string) error {
	f, err := w.fsys.OpenFile(filepath.Join(w.root, filepath.FromSlash(p)), os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (w *Writer) kickCheckpoint() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// checkpointer runs checkpoints when kicked, until Close.
func (w *Writer) checkpointer() {
	defer close(w.stopped)
	for {
		select {
		case <-w.stop:
			return
		case <-w.kick:
		}
		w.checkpoint()
	}
}

// checkpoint frees the ring up to the end of the newest group that it
// and every earlier group are applied: it syncs the files their records
// wrote (SyncFiles), then writes the header slot not in use with that
// start, and syncs it. Commits go on meanwhile. A failure fails the
// writer.
func (w *Writer) checkpoint() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.ckpt {
		w.cond.Wait()
	}
	if w.err != nil {
		return
	}
	k := 0
	for k < len(w.groups) && w.groups[k].applying.Load() == 0 {
		k++
	}
	if k == 0 {
		// Nothing applied to free yet: a leader waiting for room
		// waits for the applies, which wake it, and it kicks again.
		return
	}
	w.ckpt = true
	last := w.groups[k-1]
	set := map[string]struct{}{}
	for _, g := range w.groups[:k] {
		for p := range g.paths {
			set[p] = struct{}{}
		}
	}
	w.groups = append(w.groups[:0:0], w.groups[k:]...)
	paths := make([]string, 0, len(set))
	for p := range set {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	h := w.hdr
	h.seq++
	h.startOff, h.startLSN = last.endOff, last.nextLSN
	slot := 1 - w.hdrSlot
	w.mu.Unlock()

	err := w.syncFiles(paths)
	if err == nil {
		_, err = w.f.WriteAt(h.encode(), int64(slot)*slotSize)
	}
	if err == nil {
		err = w.f.Sync()
	}

	w.mu.Lock()
	w.ckpt = false
	w.stats.Syncs++
	if err != nil {
		w.fail(fmt.Errorf("checkpoint: %w", err))
		return
	}
	w.hdr, w.hdrSlot, w.headV = h, slot, last.endV
	w.stats.Checkpoints++
	w.cond.Broadcast()
}

// Close waits for the commits under way, makes every file the journal
// covers durable (a last checkpoint), and removes the journal file and
// then its lock file, which it releases last. The removals are not
// synced: a crash may bring the files back, and the journal then holds
// no record to replay. After a failure it only releases the file and the
// lock, leaving the journal for a replay, and returns the failure: one
// wrapping ErrFailed when an earlier call failed the Writer (its callers
// have seen it), its own cause, not wrapping ErrFailed, when the last
// checkpoint failed. Calling it again returns nil.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	for w.active.Load() > 0 || w.leading {
		w.cond.Wait()
	}
	w.mu.Unlock()
	close(w.stop)
	<-w.stopped
	w.mu.Lock()
	failed := w.err != nil
	w.mu.Unlock()
	w.checkpoint()
	w.mu.Lock()
	err := w.err
	if !failed && err != nil {
		// Its own last checkpoint failed: no commit has reported it.
		err = fmt.Errorf("journal: close %s: last %w", w.path, w.cause)
	}
	w.mu.Unlock()
	if cerr := w.f.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err == nil {
		// No directory sync: the last checkpoint synced every file the
		// journal covers and made durable a header whose start is the
		// log's end, so a journal file a crash brings back reads as an
		// empty log. Its owner is dead, so a reader replays it
		// (nothing) and removes it as any dead owner's journal.
		err = w.fsys.Remove(w.path)
	}
	if err == nil {
		// Still locked: another process taking the lock meanwhile finds
		// the owner alive, or, once the name is gone, no journal.
		err = w.fsys.Remove(LockPath(w.root, w.owner))
	}
	if err == nil {
		// A replayer that found the owner alive left its replay lock
		// file (Take). With the journal gone it guards nothing: a
		// replayer holding or making it finds no journal.
		if rerr := w.fsys.Remove(ReplayLockPath(w.root, w.owner)); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = rerr
		}
	}
	if lerr := w.lock.Close(); err == nil {
		err = lerr
	}
	return err
}
