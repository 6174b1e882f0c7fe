package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// Op names an operation for fault injection.
type Op string

// The operations a fault hook sees.
const (
	OpCreate   Op = "create"
	OpOpen     Op = "open"
	OpRead     Op = "read"
	OpWrite    Op = "write"
	OpSync     Op = "sync"
	OpTruncate Op = "truncate"
	OpRename   Op = "rename"
	OpRemove   Op = "remove"
	OpMkdir    Op = "mkdir"
	OpSyncDir  Op = "syncdir"
)

// FaultFunc decides whether an operation on path fails; a non-nil result is
// returned to the caller (wrapped in an *fs.PathError) and the operation has
// no effect.
//
// A result that is or wraps ErrPowerLoss cuts the power: that operation and
// every later one on the MemFS fail with ErrPowerLoss, whatever hook is
// installed afterwards, and the filesystem stays as it was before the
// operation (see MemFS.PowerOff).
type FaultFunc func(op Op, path string) error

// MemFS is an in-memory FS that simulates what survives a power loss.
//
// Per file it keeps the current data and the data as of the last Sync; per
// directory it keeps the current entries, the entries as of the last
// SyncDir, and the log of the changes between the two (creates, renames
// and removes; dirlog.go). A create, rename or remove is therefore durable
// only once its directory is synced, and written bytes only once the file
// is; until then a crash loses them or keeps them as its CrashMode says
// (only KeepRandomSectors keeps directory changes). CrashClone builds the
// filesystem a machine would find after rebooting. A fault hook
// (ErrPowerLoss) or PowerOff cuts the power: from then on every operation
// fails and the MemFS stays frozen in the state its crash clones come
// from, whatever the program that used it goes on doing. The zero value is
// not usable: call NewMemFS.
type MemFS struct {
	boot  string // BootID
	mu    sync.Mutex
	root  *memNode
	locks map[*memNode]bool
	fault FaultFunc
	// off is the operation at which the power was cut (its error wraps
	// ErrPowerLoss), nil while the power is on. Once set, nothing
	// changes the filesystem any more.
	off *fs.PathError
	// unsynced lists the directory changes made since their directories'
	// last SyncDir, oldest first (see dirlog.go), and persisted of them
	// are durable by now (they go at the next compaction).
	unsynced  []*dirChange
	persisted int
	// clock is the newest modification time given out (stamp): times
	// only grow, so that two changes never share one.
	clock time.Time
}

// stamp returns a modification time for a change made now, later than
// every one before. The caller holds m.mu.
func (m *MemFS) stamp() time.Time {
	t := time.Now()
	if !t.After(m.clock) {
		t = m.clock.Add(time.Nanosecond)
	}
	m.clock = t
	return t
}

type memNode struct {
	dir bool
	// file state
	data   []byte
	synced []byte
	// cut: the file was truncated below its synced size since its last
	// sync, to cutTo bytes at the least. The truncation is not durable
	// before the next sync, and it frees blocks: a crash keeps the synced
	// file whole, or the truncated one (see crashData), never the synced
	// bytes past cutTo.
	cut   bool
	cutTo int
	// dirtyLo and dirtyHi bound the bytes below len(synced) written since
	// the last sync (none when dirtyHi <= dirtyLo): unless the file was
	// cut, a sync copies only these and the tail past len(synced), not the
	// whole file (a preallocated journal is synced once per commit).
	dirtyLo, dirtyHi int
	// shared: data and synced are one array, as a crash clone's file is
	// until its first write (which copies data first), so that a clone
	// copies each file once.
	shared bool
	// directory state: the entries, the durable entries, and the changes
	// from these to those, oldest first (see dirlog.go)
	children       map[string]*memNode
	syncedChildren map[string]*memNode
	log            []*dirChange
	// syncedIn and syncedName name the node's durable entry (nil if it
	// has none, as for the root and a node whose create is not durable).
	syncedIn   *memNode
	syncedName string
	modTime    time.Time
	mode       fs.FileMode
}

func newDir(perm fs.FileMode) *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, syncedChildren: map[string]*memNode{}, mode: fs.ModeDir | perm, modTime: time.Now()}
}

// NewMemFS returns an empty in-memory filesystem whose root "/" exists and
// is durable.
func NewMemFS() *MemFS {
	return &MemFS{root: newDir(0o755), locks: map[*memNode]bool{}, boot: newBootID()}
}

// BootID is the MemFS's boot: a new one for each MemFS, and for each
// CrashClone (a power loss reboots).
func (m *MemFS) BootID() string { return m.boot }

// newBootID returns a random boot id.
func newBootID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(rand.Uint32())
	}
	return fmt.Sprintf("%x", b)
}

// SetFault installs a fault hook (nil removes it). It does not bring back
// the power once it is cut.
func (m *MemFS) SetFault(f FaultFunc) {
	m.mu.Lock()
	m.fault = f
	m.mu.Unlock()
}

// PowerOff cuts the power now, as a fault hook returning ErrPowerLoss does:
// every later operation fails with ErrPowerLoss and changes nothing, so the
// program that used m can be closed without touching what a crash leaves
// (CrashClone), however many goroutines it still runs. Cutting it again
// does nothing.
func (m *MemFS) PowerOff() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off == nil {
		m.off = &fs.PathError{Op: "poweroff", Path: "/", Err: ErrPowerLoss}
	}
}

// PowerCut returns the operation at which the power was cut, with the
// path it named, as an *fs.PathError wrapping ErrPowerLoss (Op "poweroff"
// for PowerOff), or nil while the power is on.
func (m *MemFS) PowerCut() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.off == nil {
		return nil // not a typed nil
	}
	return m.off
}

// powered fails every operation once the power is cut. The caller holds
// m.mu.
func (m *MemFS) powered(op, path string) error {
	if m.off != nil {
		return &fs.PathError{Op: op, Path: path, Err: ErrPowerLoss}
	}
	return nil
}

// check runs the fault hook for op on path. The caller holds m.mu.
func (m *MemFS) check(op Op, path string) error {
	if err := m.powered(string(op), path); err != nil {
		return err
	}
	if m.fault == nil {
		return nil
	}
	if err := m.fault(op, path); err != nil {
		pe := &fs.PathError{Op: string(op), Path: path, Err: err}
		if errors.Is(err, ErrPowerLoss) {
			m.off = pe
		}
		return pe
	}
	return nil
}

func split(name string) []string {
	name = filepath.ToSlash(filepath.Clean("/" + name))
	if name == "/" {
		return nil
	}
	return strings.Split(strings.TrimPrefix(name, "/"), "/")
}

// lookupDir returns the directory holding name and name's last element.
func (m *MemFS) lookupParent(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	dir := m.root
	for _, p := range parts[:len(parts)-1] {
		next, ok := dir.children[p]
		if !ok {
			return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
		}
		if !next.dir {
			return nil, "", &fs.PathError{Op: op, Path: name, Err: fileType(whatIs(0))}
		}
		dir = next
	}
	return dir, parts[len(parts)-1], nil
}

func (m *MemFS) lookup(op, name string) (*memNode, error) {
	if len(split(name)) == 0 {
		return m.root, nil
	}
	dir, base, err := m.lookupParent(op, name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	if !ok {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return n, nil
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.powered("open", name); err != nil {
		return nil, err
	}
	dir, base, err := m.lookupParent("open", name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case ok && n.dir:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fileType(whatIs(fs.ModeDir))}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		if err := m.check(OpCreate, name); err != nil {
			return nil, err
		}
		n = &memNode{mode: perm, modTime: m.stamp()}
		dir.children[base] = n
		dir.modTime = n.modTime
		m.logChange(&dirChange{op: dirCreate, node: n, to: dir, toName: base})
	default:
		if err := m.check(OpOpen, name); err != nil {
			return nil, err
		}
		if flag&os.O_TRUNC != 0 && !n.dir {
			// Truncating an existing file changes it, like Truncate(0).
			if err := m.check(OpTruncate, name); err != nil {
				return nil, err
			}
			n.truncate(0)
			n.modTime = m.stamp()
		}
	}
	return &memFile{fs: m, node: n, name: name, flag: flag}, nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.powered("mkdir", name); err != nil {
		return err
	}
	dir := m.root
	for _, p := range split(name) {
		next, ok := dir.children[p]
		if !ok {
			if err := m.check(OpMkdir, name); err != nil {
				return err
			}
			next = newDir(perm)
			next.modTime = m.stamp()
			dir.children[p] = next
			dir.modTime = next.modTime
			m.logChange(&dirChange{op: dirCreate, node: next, to: dir, toName: p})
		} else if !next.dir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: fileType(whatIs(0))}
		}
		dir = next
	}
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.powered("remove", name); err != nil {
		return err
	}
	dir, base, err := m.lookupParent("remove", name)
	if err != nil {
		return err
	}
	n, ok := dir.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.dir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	if err := m.check(OpRemove, name); err != nil {
		return err
	}
	delete(dir.children, base)
	dir.modTime = m.stamp()
	m.logChange(&dirChange{op: dirRemove, node: n, from: dir, fromName: base})
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.powered("rename", newname); err != nil {
		return err
	}
	odir, obase, err := m.lookupParent("rename", oldname)
	if err != nil {
		return err
	}
	n, ok := odir.children[obase]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	ndir, nbase, err := m.lookupParent("rename", newname)
	if err != nil {
		return err
	}
	if err := m.check(OpRename, newname); err != nil {
		return err
	}
	if odir == ndir && obase == nbase {
		return nil // renaming a file to itself does nothing
	}
	delete(odir.children, obase)
	ndir.children[nbase] = n
	odir.modTime = m.stamp()
	ndir.modTime = odir.modTime
	m.logChange(&dirChange{op: dirRename, node: n, from: odir, fromName: obase, to: ndir, toName: nbase})
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(name string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.powered("readdir", name); err != nil {
		return nil, err
	}
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fileType(whatIs(0))}
	}
	names := make([]string, 0, len(n.children))
	for k := range n.children {
		names = append(names, k)
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.powered("stat", name); err != nil {
		return nil, err
	}
	n, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return n.info(filepath.Base(name)), nil
}

// SyncDir implements FS.
func (m *MemFS) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.powered("syncdir", name); err != nil {
		return err
	}
	n, err := m.lookup("syncdir", name)
	if err != nil {
		return err
	}
	if !n.dir {
		return &fs.PathError{Op: "syncdir", Path: name, Err: fileType(whatIs(0))}
	}
	if err := m.check(OpSyncDir, name); err != nil {
		return err
	}
	m.syncDir(n)
	return nil
}

// Lock implements FS. Locks are per MemFS: a second Lock of the same file
// fails with ErrLocked until the first is closed.
func (m *MemFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	mf := f.(*memFile)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.locks[mf.node] {
		return nil, &fs.PathError{Op: "lock", Path: name, Err: ErrLocked}
	}
	m.locks[mf.node] = true
	return &memLock{fs: m, node: mf.node}, nil
}

type memLock struct {
	fs   *MemFS
	node *memNode
	once sync.Once
}

func (l *memLock) Close() error {
	l.once.Do(func() {
		l.fs.mu.Lock()
		delete(l.fs.locks, l.node)
		l.fs.mu.Unlock()
	})
	return nil
}

// CrashMode says which unsynced file data a crash clone keeps.
type CrashMode int

const (
	// KeepSynced keeps only synced data: every unsynced write and
	// truncation is lost.
	KeepSynced CrashMode = iota
	// KeepAll keeps every write and truncation, synced or not (directory
	// entries still follow their last SyncDir: no unsynced create, rename
	// or remove is kept).
	KeepAll
	// KeepRandom keeps, per file, a random prefix (seeded) of its unsynced
	// changes in file order, the way a disk that persisted blocks in order
	// up to some point would: of the 512-byte sectors that unsynced writes
	// changed inside the synced size (a preallocated chunk's free space,
	// say), the first ones hold the new content and the others their
	// synced content, and only when every one of them reached the disk
	// does the file also keep a random prefix, in bytes, of what was
	// written past its synced size.
	KeepRandom
	// KeepZeroedTail keeps the current size of each file, but what was
	// written past the synced size reads as zeros: the size reached the
	// disk, the data did not. Of the sectors that unsynced writes changed
	// inside the synced size, a random prefix (seeded) holds the new
	// content and the others their synced content (zeros, in preallocated
	// space).
	KeepZeroedTail
	// KeepGarbageTail is KeepZeroedTail with random bytes (seeded) instead
	// of zeros, and instead of the changed bytes of the sectors past the
	// prefix that reached the disk.
	KeepGarbageTail
	// KeepRandomSectors keeps each 512-byte sector of a file's unsynced
	// changes, or its synced content, at random (seeded), independently:
	// blocks reach the disk in any order, so an unsynced write that
	// overwrites a file's preallocated space may leave holes. The file has
	// its current or its synced size, at random. It is the only mode that
	// keeps unsynced directory changes: each create, rename or remove made
	// since its directory's last SyncDir is kept or lost at random,
	// independently of the others and of file data (see CrashClone).
	KeepRandomSectors
)

// A truncation below the synced size (Truncate, or an open with O_TRUNC)
// is not durable before the next sync, and it frees the blocks past the
// cut. So in every mode but KeepSynced and KeepAll, a file cut since its
// last sync keeps, at random, its synced content whole or the cut:
// KeepRandom and KeepRandomSectors then keep the current content whole;
// KeepZeroedTail and KeepGarbageTail keep the current size, the synced
// bytes up to the cut and zeros or garbage after it. Never the synced
// bytes past the cut under a newer size.

// CrashModes lists every CrashMode, for tests that try them all.
var CrashModes = []CrashMode{KeepSynced, KeepAll, KeepRandom, KeepZeroedTail, KeepGarbageTail, KeepRandomSectors}

func (m CrashMode) String() string {
	switch m {
	case KeepSynced:
		return "keep-synced"
	case KeepAll:
		return "keep-all"
	case KeepRandom:
		return "keep-random-prefix"
	case KeepZeroedTail:
		return "zeroed-tail"
	case KeepGarbageTail:
		return "garbage-tail"
	case KeepRandomSectors:
		return "random-sectors"
	}
	return fmt.Sprintf("CrashMode(%d)", int(m))
}

// CrashClone returns the filesystem as it would be after a power loss now:
// each directory holds the entries it had at its last SyncDir (in
// KeepRandomSectors, with a random share of its changes since then
// applied, see below), and each file holds its synced data plus what mode
// keeps of the rest. Locks are dropped, as the kernel drops them for a
// dead process. The receiver is unchanged; the same mode and seed give
// the same clone.
//
// A directory change not made durable by a SyncDir (a create, remove or
// rename; a rename across directories is one change, in the logs of both,
// made durable by a SyncDir of either) may reach the disk at any moment,
// on its own (a journal commit that anything can trigger), and POSIX
// orders none of them, nor them against file data. KeepRandomSectors,
// which keeps each sector of unsynced data independently, keeps or loses
// each such change independently as well, with probability one half,
// applied in log order on top of the durable entries. Every other mode
// keeps none: KeepSynced is the baseline that keeps nothing unsynced, and
// KeepAll keeps every byte written, under the durable names only (what a
// process crash leaves, every name and byte, is what the SIGKILL tests
// make). What a kept change leaves:
//
//   - A change acts on the file (the inode), not on the name, and the
//     data follows the file: a kept create of a file whose data was never
//     synced shows what the mode keeps of its data (empty, or its size
//     with each sector new or zeros); a file renamed with unsynced data
//     has that data, torn the same way, under whichever name it keeps.
//   - A rename or remove takes the file from wherever it is at that point
//     (under its old name if an earlier rename was lost), and a create or
//     rename replaces whatever its new name held, so a file has one name
//     at most. A name removed and created again holds the old file (both
//     changes lost), nothing (the remove kept, the create lost) or the new
//     file. The rename of a temporary file over a name may be kept while
//     the temporary file's create is lost: the name then holds the new
//     file, with whatever of its data was synced, which is why the data
//     must be synced before the rename.
//   - A directory's entries are reachable only through its own entry:
//     changes kept inside a directory whose entry in its parent is lost
//     (MkdirAll made it and no SyncDir of the parent followed) are dropped
//     with it, as a disk cannot show a file in a directory it does not
//     have; so is a file made durable inside it by a SyncDir of its own.
//
// Keeping changes independently allows states that a directory held in
// one block would not show (its changes reach the disk in order, a
// prefix of them), such as a file lost because its rename to another name
// was lost while a later create of its old name was kept; POSIX promises
// no more, and code that syncs the directory before it depends on a
// change is safe either way.
func (m *MemFS) CrashClone(mode CrashMode, seed uint64) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	st := newCrashState()
	if mode == KeepRandomSectors {
		// Drawn first, in log order, so that the same seed keeps the same
		// changes and the data draws below go to the same files.
		for _, c := range m.unsynced {
			if !c.durable && rng.IntN(2) == 0 {
				c.apply(st)
			}
		}
	}
	seen := map[*memNode]*memNode{}
	var clone func(n, parent *memNode, name string) *memNode
	clone = func(n, parent *memNode, name string) *memNode {
		if c, ok := seen[n]; ok {
			return c // not reached: a node has one name at most
		}
		c := &memNode{dir: n.dir, mode: n.mode, modTime: n.modTime, syncedIn: parent, syncedName: name}
		seen[n] = c
		if n.dir {
			c.children = map[string]*memNode{}
			// In name order, so that KeepRandom's draws go to the same
			// files for the same seed.
			children := st.children(n)
			names := make([]string, 0, len(children))
			for k := range children {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				c.children[k] = clone(children[k], c, k)
			}
			c.syncedChildren = maps(c.children)
			return c
		}
		c.data = crashData(n, mode, rng)
		c.data = c.data[:len(c.data):len(c.data)] // an append past it copies
		c.synced, c.shared = c.data, true
		return c
	}
	root := clone(m.root, nil, "")
	return &MemFS{root: root, locks: map[*memNode]bool{}, clock: m.clock, boot: newBootID()}
}

func maps(in map[string]*memNode) map[string]*memNode {
	out := make(map[string]*memNode, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// crashData is the content a file has after a crash in mode (see the
// CrashMode constants). Unsynced changes are modeled as sectors changed
// inside the synced size (overwrites, such as appends into preallocated
// space) and a tail past it; a file cut below its synced size since its
// last sync keeps one version.
func crashData(n *memNode, mode CrashMode, rng *rand.Rand) []byte {
	switch mode {
	case KeepSynced:
		return append([]byte(nil), n.synced...)
	case KeepAll:
		return append([]byte(nil), n.data...)
	}
	if n.cut {
		if rng.IntN(2) == 0 {
			return append([]byte(nil), n.synced...) // the cut was lost
		}
		if mode == KeepZeroedTail || mode == KeepGarbageTail {
			// The cut and the size reached the disk, the data after the
			// cut did not. n.data is never shorter than cutTo.
			out := make([]byte, len(n.data))
			kept := copy(out, n.synced[:n.cutTo])
			if mode == KeepGarbageTail {
				garble(out[kept:], rng)
			}
			return out
		}
		return append([]byte(nil), n.data...)
	}
	// Not cut: n.data holds as many bytes as n.synced at least.
	size := len(n.synced)
	if mode == KeepRandomSectors {
		if rng.IntN(2) == 0 {
			size = len(n.data)
		}
		out := make([]byte, size)
		for off := 0; off < size; off += sectorSize {
			end := min(off+sectorSize, size)
			now, was := sector(n.data, off, end), sector(n.synced, off, end)
			if !bytes.Equal(now, was) && rng.IntN(2) == 0 {
				copy(out[off:end], now)
			} else {
				copy(out[off:end], was)
			}
		}
		return out
	}
	// The sectors changed inside the synced size, in file order, of which
	// the first kept reached the disk.
	var changed []int
	for off := 0; off < size; off += sectorSize {
		end := min(off+sectorSize, size)
		if !bytes.Equal(n.data[off:end], n.synced[off:end]) {
			changed = append(changed, off)
		}
	}
	kept := 0
	if len(changed) > 0 {
		kept = rng.IntN(len(changed) + 1)
	}
	out := make([]byte, size, len(n.data)) // zeros up to len(n.data)
	copy(out, n.synced)
	for _, off := range changed[:kept] {
		end := min(off+sectorSize, size)
		copy(out[off:end], n.data[off:end])
	}
	switch mode {
	case KeepRandom:
		if kept == len(changed) {
			tail := rng.IntN(len(n.data) - size + 1)
			out = append(out, n.data[size:size+tail]...)
		}
	case KeepZeroedTail, KeepGarbageTail:
		out = out[:len(n.data)]
		if mode == KeepGarbageTail {
			for _, off := range changed[kept:] {
				for i := off; i < min(off+sectorSize, size); i++ {
					if n.data[i] != n.synced[i] {
						out[i] = byte(rng.Uint32())
					}
				}
			}
			garble(out[size:], rng)
		}
	}
	return out
}

// garble fills b with random bytes.
func garble(b []byte, rng *rand.Rand) {
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
}

// sectorSize is the unit KeepRandomSectors keeps or loses.
const sectorSize = 512

// sector returns b[off:end], cut at the end of b (missing bytes read as
// zeros by the caller's zeroed buffer).
func sector(b []byte, off, end int) []byte {
	if off >= len(b) {
		return nil
	}
	return b[off:min(end, len(b))]
}

func (n *memNode) info(name string) fs.FileInfo {
	return memInfo{name: name, size: int64(len(n.data)), mode: n.mode, mod: n.modTime}
}

type memInfo struct {
	name string
	size int64
	mode fs.FileMode
	mod  time.Time
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return i.size }
func (i memInfo) Mode() fs.FileMode  { return i.mode }
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.mode.IsDir() }
func (i memInfo) Sys() any           { return nil }

type memFile struct {
	fs     *MemFS
	node   *memNode
	name   string
	flag   int
	pos    int64
	closed bool
}

var errClosed = fs.ErrClosed

func (f *memFile) Name() string { return f.name }

func (f *memFile) readable() error {
	if f.closed {
		return &fs.PathError{Op: "read", Path: f.name, Err: errClosed}
	}
	if f.node.dir {
		return &fs.PathError{Op: "read", Path: f.name, Err: errors.New("is a directory")}
	}
	if f.flag&os.O_WRONLY != 0 {
		return &fs.PathError{Op: "read", Path: f.name, Err: errors.New("file not open for reading")}
	}
	return f.fs.check(OpRead, f.name)
}

func (f *memFile) writable() error {
	if f.closed {
		return &fs.PathError{Op: "write", Path: f.name, Err: errClosed}
	}
	if f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return &fs.PathError{Op: "write", Path: f.name, Err: errors.New("file not open for writing")}
	}
	return nil
}

func (f *memFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.readable(); err != nil {
		return 0, err
	}
	if f.pos >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.readable(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "readat", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.node.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.node.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) writeAt(p []byte, off int64) (int, error) {
	if err := f.writable(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: fs.ErrInvalid}
	}
	if err := f.fs.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	end := off + int64(len(p))
	if f.node.shared {
		f.node.data = append([]byte(nil), f.node.data...)
		f.node.shared = false
	}
	if end > int64(len(f.node.data)) {
		if end <= int64(cap(f.node.data)) {
			// Bytes past len were never written: Truncate caps the slice.
			f.node.data = f.node.data[:end]
		} else {
			// Grow geometrically, so appending n bytes costs O(n).
			grown := make([]byte, end, max(end, 2*int64(cap(f.node.data))))
			copy(grown, f.node.data)
			f.node.data = grown
		}
	}
	copy(f.node.data[off:], p)
	f.node.dirty(int(off), int(end))
	f.node.modTime = f.fs.stamp()
	return len(p), nil
}

func (f *memFile) Write(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	off := f.pos
	if f.flag&os.O_APPEND != 0 {
		off = int64(len(f.node.data))
	}
	n, err := f.writeAt(p, off)
	f.pos = off + int64(n)
	return n, err
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.flag&os.O_APPEND != 0 {
		return 0, &fs.PathError{Op: "writeat", Path: f.name, Err: errors.New("invalid use of WriteAt on file opened with O_APPEND")}
	}
	return f.writeAt(p, off)
}

func (f *memFile) Sync() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "sync", Path: f.name, Err: errClosed}
	}
	if err := f.fs.check(OpSync, f.name); err != nil {
		return err
	}
	f.node.sync()
	return nil
}

// dirty notes that bytes [lo, hi) of the file were written.
func (n *memNode) dirty(lo, hi int) {
	hi = min(hi, len(n.synced))
	if lo >= hi {
		return // past the synced size: sync copies the whole tail
	}
	if n.dirtyHi <= n.dirtyLo {
		n.dirtyLo, n.dirtyHi = lo, hi
		return
	}
	n.dirtyLo, n.dirtyHi = min(n.dirtyLo, lo), max(n.dirtyHi, hi)
}

// sync makes the file's content its synced content.
func (n *memNode) sync() {
	if n.cut || len(n.data) < len(n.synced) {
		n.synced = append([]byte(nil), n.data...)
	} else {
		if n.dirtyLo < n.dirtyHi {
			copy(n.synced[n.dirtyLo:n.dirtyHi], n.data[n.dirtyLo:n.dirtyHi])
		}
		// Only data may share synced's array (shared), and then they are
		// equal, or data was cut, or written (which copied it first).
		n.synced = append(n.synced, n.data[len(n.synced):]...)
	}
	n.cut, n.cutTo = false, 0
	n.dirtyLo, n.dirtyHi = 0, 0
}

func (f *memFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if err := f.writable(); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	if err := f.fs.check(OpTruncate, f.name); err != nil {
		return err
	}
	f.node.truncate(size)
	f.node.modTime = f.fs.stamp()
	return nil
}

// truncate sets the file's size, noting a cut below the synced size.
func (n *memNode) truncate(size int64) {
	if size < int64(len(n.synced)) {
		if !n.cut || int(size) < n.cutTo {
			n.cutTo = int(size)
		}
		n.cut = true
	}
	if size <= int64(len(n.data)) {
		n.data = n.data[:size:size]
	} else {
		grown := make([]byte, size)
		copy(grown, n.data)
		n.data = grown
	}
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, &fs.PathError{Op: "stat", Path: f.name, Err: errClosed}
	}
	if err := f.fs.powered("stat", f.name); err != nil {
		return nil, err
	}
	return f.node.info(filepath.Base(f.name)), nil
}

func (f *memFile) Close() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: errClosed}
	}
	f.closed = true
	// Without power the file is closed all the same (its handle is gone
	// with the machine), but Close says so.
	return f.fs.powered("close", f.name)
}

// String describes the filesystem tree with each file's sizes and a
// checksum of its content, for comparisons and test failure messages.
func (m *MemFS) String() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	var walk func(prefix string, n *memNode)
	walk = func(prefix string, n *memNode) {
		names := make([]string, 0, len(n.children))
		for k := range n.children {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			c := n.children[k]
			p := prefix + "/" + k
			if c.dir {
				fmt.Fprintf(&b, "%s/\n", p)
				walk(p, c)
				continue
			}
			fmt.Fprintf(&b, "%s (%d bytes, %d synced, crc32 %08x)\n", p, len(c.data), len(c.synced), crc32.ChecksumIEEE(c.data))
		}
	}
	walk("", m.root)
	return b.String()
}
