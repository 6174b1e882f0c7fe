package journal

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// ErrCorrupt is matched by every *CorruptionError.
var ErrCorrupt = errors.New("journal: corrupt data")

// ErrOwnerAlive reports a journal whose owner's lock is held: its owner
// is alive (or another process is replaying it), so its files already
// hold what it committed.
var ErrOwnerAlive = errors.New("journal: owner is alive")

// CorruptionError reports a journal file that is damaged beyond a torn
// tail. It matches ErrCorrupt with errors.Is.
type CorruptionError struct {
	Path   string // the journal file
	Offset int64  // byte offset of the damage
	Err    error  // what is wrong
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("journal: corrupt data in %s at offset %d: %v", e.Path, e.Offset, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptionError) Unwrap() error { return e.Err }

// Is reports whether target is ErrCorrupt.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// Log is what Read found in a journal file: the records to replay.
type Log struct {
	Path  string
	Owner string   // the owner id the header names
	Boot  [16]byte // the boot its writer ran in (BootHash), zeros if unknown
	// Entries are the OpWrite records of the log, in lsn order, without
	// those an OpForget made obsolete. Their Data alias one buffer.
	Entries []Entry
	// Start is the lsn replay started at; Next the lsn after the last
	// whole group (Start when there is none).
	Start, Next uint64
	// Torn is the offset where the log ended at a torn group (a commit
	// group partly there: some of its records, or a valid frame header
	// of one of them, with no later group after it), or -1.
	Torn int64
}

// Read reads the journal file name and returns its log. It does not take
// the owner's lock: the caller makes sure the owner is dead (Alive), or
// holds the lock, so the file does not change under it; Replay does both.
//
// It reads the whole file (its size is fixed at creation and at most
// MaxSize; a file of another size than its header says is corrupt),
// picks the valid header slot with the greater sequence, and reads
// commit groups from its start: each group whole, its records' lsns
// following one another from the header's start lsn, the first record of
// each group where the previous one ended or, when it wrapped, at the
// start of the record area. The log ends at the first group that is not
// there whole. If any record of a later group is found anywhere in the
// record area, the missing group was durable: Read returns a
// *CorruptionError at the offset where the log ended. Otherwise the group
// is a torn tail (a write a crash interrupted, never acknowledged) and is
// dropped whole; Torn says where. A damaged header slot is what a torn
// header write leaves: the other one is used, and if neither is valid the
// error is a *CorruptionError wrapping ErrNoHeader.
func Read(fsys vfs.FS, name string) (*Log, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := info.Size()
	if size < recordsStart || size > MaxSize {
		return nil, &CorruptionError{Path: name, Offset: 0, Err: fmt.Errorf("%w: file of %d bytes", ErrNoHeader, size)}
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return parse(name, buf)
}

// ReadBoot reads only the header slots of the journal file name and
// returns the boot its writer ran in (BootHash of its boot id; zeros if
// unknown). A reader in the same boot needs nothing of the journal: every
// record its owner acknowledged was written into its file before, and
// the page cache holds it for every process. Errors: the file's, or a
// *CorruptionError when neither slot is valid.
func ReadBoot(fsys vfs.FS, name string) ([16]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return [16]byte{}, err
	}
	defer f.Close()
	b := make([]byte, recordsStart)
	if _, err := f.ReadAt(b, 0); err != nil && !errors.Is(err, io.EOF) {
		return [16]byte{}, err
	}
	h0, err0 := decodeHeader(b[:slotSize])
	h1, err1 := decodeHeader(b[slotSize:])
	switch {
	case err0 == nil && (err1 != nil || h0.seq >= h1.seq):
		return h0.boot, nil
	case err1 == nil:
		return h1.boot, nil
	}
	return [16]byte{}, &CorruptionError{Path: name, Offset: 0, Err: err0}
}

// parse decodes a whole journal file held in b.
func parse(name string, b []byte) (*Log, error) {
	h0, err0 := decodeHeader(b[:slotSize])
	h1, err1 := decodeHeader(b[slotSize:recordsStart])
	var h header
	switch {
	case err0 == nil && (err1 != nil || h0.seq >= h1.seq):
		h = h0
	case err1 == nil:
		h = h1
	default:
		if errors.Is(err0, ErrUnsupportedVersion) {
			return nil, err0
		}
		if errors.Is(err1, ErrUnsupportedVersion) {
			return nil, err1
		}
		return nil, &CorruptionError{Path: name, Offset: 0, Err: err0}
	}
	if h.size != int64(len(b)) {
		return nil, &CorruptionError{Path: name, Offset: 0, Err: fmt.Errorf("%w: file of %d bytes, its header says %d", ErrBadRecord, len(b), h.size)}
	}
	if want := strings.TrimSuffix(filepath.Base(name), ".wal"); want != filepath.Base(name) && want != fmt.Sprintf("%x", h.owner) {
		return nil, &CorruptionError{Path: name, Offset: 16, Err: fmt.Errorf("%w: header names owner %x", ErrBadRecord, h.owner)}
	}
	log := &Log{Path: name, Owner: fmt.Sprintf("%x", h.owner), Start: h.startLSN, Next: h.startLSN, Torn: -1, Boot: h.boot}
	var (
		all      []Entry // every record of whole groups, forgets included
		group    []Entry
		pos      = h.startOff
		lsn      = h.startLSN
		first    uint64
		count    uint32
		consumed int64 // bytes the log takes, skips included: at most the record area
		end      int64 // where the log ended
		capacity = h.size - recordsStart
	)
	for {
		var fr frame
		var err error
		if len(group) == 0 {
			// A group starts where the last one ended or, having
			// wrapped, at the start of the record area.
			end = pos
			fr, err = decodeFrame(b[pos:], h.salt)
			if (err != nil || fr.lsn != lsn || fr.first != lsn) && pos != recordsStart {
				fr2, err2 := decodeFrame(b[recordsStart:], h.salt)
				if err2 == nil && fr2.lsn == lsn && fr2.first == lsn {
					consumed += h.size - pos
					pos, fr, err = recordsStart, fr2, nil
				}
			}
			if err != nil || fr.lsn != lsn || fr.first != lsn {
				break
			}
			first, count = fr.first, fr.count
		} else {
			fr, err = decodeFrame(b[pos:], h.salt)
			if err != nil || fr.lsn != lsn || fr.first != first || fr.count != count {
				break
			}
		}
		consumed += fr.size
		if consumed > capacity {
			return nil, &CorruptionError{Path: name, Offset: pos, Err: fmt.Errorf("%w: log longer than the record area", ErrBadRecord)}
		}
		group = append(group, Entry{LSN: fr.lsn, At: pos, Record: fr.rec})
		pos += fr.size
		lsn++
		if lsn == first+uint64(count) {
			all = append(all, group...)
			group = group[:0]
			log.Next = lsn
			if pos == h.size {
				pos = recordsStart
			}
		}
	}
	// The log ended at end with lsn log.Next missing or torn: a torn tail
	// unless a record of a later group is anywhere in the record area.
	// The frames of later groups a writer wrote do not overlap: their
	// bodies checked take the record area at most. More means frame
	// headers of later groups overlap, which no writer leaves either,
	// and bounds the scan's checksums to about twice the file's size.
	started := len(group) > 0
	var checked int64
	for off := int64(recordsStart); off+frameHeader <= h.size; off += align {
		l, fst, _, size, ok := peekFrame(b[off:], h.salt)
		if !ok || fst < log.Next {
			continue
		}
		if fst == log.Next {
			started = true // a frame header of the group that was being written
			continue
		}
		if checked += size; checked > capacity {
			return nil, &CorruptionError{Path: name, Offset: end, Err: fmt.Errorf("%w: lsn %d missing, frame headers of later groups overlap up to offset %d", ErrLostRecord, log.Next, off)}
		}
		if _, err := decodeFrame(b[off:], h.salt); err == nil {
			return nil, &CorruptionError{Path: name, Offset: end, Err: fmt.Errorf("%w: lsn %d missing, lsn %d at offset %d", ErrLostRecord, log.Next, l, off)}
		}
	}
	if started {
		log.Torn = end
	}
	log.Entries = applyForgets(all)
	return log, nil
}

// applyForgets returns the OpWrite entries of all that no later OpForget
// makes obsolete, in order: an entry is obsolete when a Forget of
// greater lsn has a prefix of its path.
//
// It takes time linear in the paths' bytes besides a sort, whatever the
// number of Forgets: the paths and prefixes are sorted together (a
// prefix before the paths it starts), so the Forgets whose prefix starts
// the current string are the chain on a stack, each holding the greatest
// lsn of the Forgets below it and itself. An entry is obsolete when that
// lsn is greater than its own.
func applyForgets(all []Entry) []Entry {
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(all[a].Path, all[b].Path); c != 0 {
			return c
		}
		// A Forget before the entries of its very path.
		return cmp.Compare(all[b].Op, all[a].Op)
	})
	type link struct {
		prefix string
		lsn    uint64 // the greatest lsn of the chain up to this Forget
	}
	var chain []link
	keep := make([]bool, len(all))
	n := 0
	for _, i := range order {
		e := &all[i]
		for len(chain) > 0 && !strings.HasPrefix(e.Path, chain[len(chain)-1].prefix) {
			chain = chain[:len(chain)-1]
		}
		var forgot uint64 // 0: no Forget covers e (lsns start at 1)
		if len(chain) > 0 {
			forgot = chain[len(chain)-1].lsn
		}
		if e.Op == OpForget {
			chain = append(chain, link{prefix: e.Path, lsn: max(forgot, e.LSN)})
			continue
		}
		if forgot < e.LSN {
			keep[i] = true
			n++
		}
	}
	out := make([]Entry, 0, n)
	for i := range all {
		if keep[i] {
			out = append(out, all[i])
		}
	}
	return out
}

// Under returns the entries whose path starts with prefix, in order.
func (l *Log) Under(prefix string) []Entry {
	var out []Entry
	for _, e := range l.Entries {
		if strings.HasPrefix(e.Path, prefix) {
			out = append(out, e)
		}
	}
	return out
}

// Replayed says what a replay did.
type Replayed struct {
	Records int      // records written into their files
	Files   []string // files written and synced, in the order first written
	Skipped []string // missing files whose records were skipped
}

// Apply writes the entries under prefix into their files below root, in
// order, and syncs each file it wrote. A missing file is skipped (it was
// removed after its content became durable elsewhere: see the package
// doc). When it returns nil those files hold the records durably; a
// crash before leaves each record written or not, and applying again is
// harmless: a record writes the same bytes at the same offset.
func (l *Log) Apply(fsys vfs.FS, root, prefix string) (Replayed, error) {
	var out Replayed
	files := map[string]vfs.File{}
	missing := map[string]bool{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	for _, e := range l.Under(prefix) {
		f, ok := files[e.Path]
		if !ok {
			if missing[e.Path] {
				continue
			}
			var err error
			f, err = fsys.OpenFile(filepath.Join(root, filepath.FromSlash(e.Path)), os.O_WRONLY, 0)
			if errors.Is(err, fs.ErrNotExist) {
				missing[e.Path] = true
				out.Skipped = append(out.Skipped, e.Path)
				continue
			}
			if err != nil {
				return out, err
			}
			files[e.Path] = f
			out.Files = append(out.Files, e.Path)
		}
		if _, err := f.WriteAt(e.Data, e.Offset); err != nil {
			return out, err
		}
		out.Records++
	}
	for _, p := range out.Files {
		if err := files[p].Sync(); err != nil {
			return out, err
		}
	}
	return out, nil
}

// checkOwner refuses an owner id that is not 32 lower-case hex digits,
// so that it names a file in Dir and nothing else.
func checkOwner(owner string) error {
	if !isOwnerID(owner) {
		return fmt.Errorf("%w: %q", ErrBadOwner, owner)
	}
	return nil
}

// Alive reports whether owner's lock is held, by trying to take it and
// releasing it at once: true while its Writer is open (or another
// process replays its journal).
func Alive(fsys vfs.FS, root, owner string) (bool, error) {
	if err := checkOwner(owner); err != nil {
		return false, err
	}
	l, err := fsys.Lock(LockPath(root, owner), 0o600)
	if errors.Is(err, vfs.ErrLocked) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, l.Close()
}

// Replay applies owner's journal under root to the files whose path
// starts with prefix (Log.Apply), holding a Claim meanwhile. It fails
// with ErrOwnerAlive when the owner holds its lock, with an error
// wrapping fs.ErrNotExist when there is no journal file (its owner closed
// it: every file it covered is durable), and with Read's errors.
func Replay(fsys vfs.FS, root, owner, prefix string) (Replayed, error) {
	c, err := Take(context.Background(), fsys, root, owner)
	if err != nil {
		return Replayed{}, err
	}
	defer c.Release()
	log, err := c.Read()
	if err != nil {
		return Replayed{}, err
	}
	return log.Apply(fsys, root, prefix)
}

// Remove removes a dead owner's journal (Claim.Remove), holding a Claim.
// The caller has replayed every session the journal covered. It fails
// with ErrOwnerAlive when the owner holds its lock.
func Remove(fsys vfs.FS, root, owner string) error {
	c, err := Take(context.Background(), fsys, root, owner)
	if err != nil {
		return err
	}
	defer c.Release()
	return c.Remove()
}

// ReplayLockPath is the lock a replayer of owner's journal holds
// (Take): it tells a replayer from the owner, which never takes it.
func ReplayLockPath(root, owner string) string {
	return filepath.Join(root, Dir, owner+".replay")
}

// ClaimPoll is how often Take looks again while another replayer holds
// a journal.
const ClaimPoll = 2 * time.Millisecond

// A Claim is a replayer's hold on a dead owner's journal: its replay
// lock and its owner's lock. While a process holds it no other process
// replays, removes or writes that journal.
type Claim struct {
	fsys   vfs.FS
	root   string
	owner  string
	replay io.Closer
	lock   io.Closer
}

// Take claims owner's journal under root for a replay. It first takes
// the replay lock (ReplayLockPath), waiting while another replayer holds
// it (it looks again every ClaimPoll until ctx is done: a replay is
// short), then the owner's lock: if the owner holds it, the owner is
// alive and Take fails with ErrOwnerAlive (the owner never takes the
// replay lock, so a held owner's lock under a held replay lock is the
// owner's). Either lock file is created if missing.
func Take(ctx context.Context, fsys vfs.FS, root, owner string) (*Claim, error) {
	if err := checkOwner(owner); err != nil {
		return nil, err
	}
	var replay io.Closer
	for {
		var err error
		replay, err = fsys.Lock(ReplayLockPath(root, owner), 0o600)
		if err == nil {
			break
		}
		if !errors.Is(err, vfs.ErrLocked) {
			return nil, err
		}
		t := time.NewTimer(ClaimPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("journal: waiting for another replay of %s: %w", owner, ctx.Err())
		case <-t.C:
		}
	}
	lock, err := fsys.Lock(LockPath(root, owner), 0o600)
	if err != nil {
		replay.Close()
		if errors.Is(err, vfs.ErrLocked) {
			return nil, fmt.Errorf("%w: %s", ErrOwnerAlive, owner)
		}
		return nil, err
	}
	return &Claim{fsys: fsys, root: root, owner: owner, replay: replay, lock: lock}, nil
}

// Read reads the claimed journal (Read): an error wrapping
// fs.ErrNotExist when it is gone.
func (c *Claim) Read() (*Log, error) { return Read(c.fsys, WALPath(c.root, c.owner)) }

// Remove removes the claimed journal file, then its lock files, and
// syncs the directory. The caller has replayed every file the journal
// covered (or found it needs none).
func (c *Claim) Remove() error {
	if err := c.fsys.Remove(WALPath(c.root, c.owner)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	// The lock files may be gone already: the owner's Close removes its
	// lock file before releasing the lock this claim then took.
	for _, p := range []string{LockPath(c.root, c.owner), ReplayLockPath(c.root, c.owner)} {
		if err := c.fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return c.fsys.SyncDir(filepath.Join(c.root, Dir))
}

// Release releases the claim's locks.
func (c *Claim) Release() {
	c.lock.Close()
	c.replay.Close()
}
