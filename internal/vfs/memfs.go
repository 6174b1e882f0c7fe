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
type FaultFunc func(op Op, path string) error

// MemFS is an in-memory FS that simulates what survives a power loss.
//
// Per file it keeps the current data and the data as of the last Sync; per
// directory it keeps the current entries and the entries as of the last
// SyncDir. A create, rename or remove is therefore lost in a crash unless the
// directory was synced afterwards, and written bytes are lost unless the file
// was synced. CrashClone builds the filesystem a machine would find after
// rebooting. The zero value is not usable: call NewMemFS.
type MemFS struct {
	mu    sync.Mutex
	root  *memNode
	locks map[*memNode]bool
	fault FaultFunc
}

type memNode struct {
	dir bool
	// file state
	data   []byte
	synced []byte
	// cut: the file was truncated below its synced size since its last
	// sync. Truncation frees blocks, so a crash keeps the old file or the
	// new one, not a mix of their sectors (KeepRandomSectors).
	cut bool
	// directory state
	children       map[string]*memNode
	syncedChildren map[string]*memNode
	modTime        time.Time
	mode           fs.FileMode
}

func newDir(perm fs.FileMode) *memNode {
	return &memNode{dir: true, children: map[string]*memNode{}, syncedChildren: map[string]*memNode{}, mode: fs.ModeDir | perm, modTime: time.Now()}
}

// NewMemFS returns an empty in-memory filesystem whose root "/" exists and
// is durable.
func NewMemFS() *MemFS {
	return &MemFS{root: newDir(0o755), locks: map[*memNode]bool{}}
}

// SetFault installs a fault hook (nil removes it).
func (m *MemFS) SetFault(f FaultFunc) {
	m.mu.Lock()
	m.fault = f
	m.mu.Unlock()
}

func (m *MemFS) check(op Op, path string) error {
	if m.fault == nil {
		return nil
	}
	if err := m.fault(op, path); err != nil {
		return &fs.PathError{Op: string(op), Path: path, Err: err}
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
			return nil, "", &fs.PathError{Op: op, Path: name, Err: errors.New("not a directory")}
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
	dir, base, err := m.lookupParent("open", name)
	if err != nil {
		return nil, err
	}
	n, ok := dir.children[base]
	switch {
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case ok && n.dir && flag&(os.O_WRONLY|os.O_RDWR) != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		if err := m.check(OpCreate, name); err != nil {
			return nil, err
		}
		n = &memNode{mode: perm, modTime: time.Now()}
		dir.children[base] = n
	default:
		if err := m.check(OpOpen, name); err != nil {
			return nil, err
		}
	}
	if flag&os.O_TRUNC != 0 && !n.dir {
		n.data = nil
		n.cut = n.cut || len(n.synced) > 0
	}
	return &memFile{fs: m, node: n, name: name, flag: flag}, nil
}

// MkdirAll implements FS.
func (m *MemFS) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	dir := m.root
	for _, p := range split(name) {
		next, ok := dir.children[p]
		if !ok {
			if err := m.check(OpMkdir, name); err != nil {
				return err
			}
			next = newDir(perm)
			dir.children[p] = next
		} else if !next.dir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: errors.New("not a directory")}
		}
		dir = next
	}
	return nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
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
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
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
	delete(odir.children, obase)
	ndir.children[nbase] = n
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(name string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !n.dir {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
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
	n, err := m.lookup("syncdir", name)
	if err != nil {
		return err
	}
	if !n.dir {
		return &fs.PathError{Op: "syncdir", Path: name, Err: errors.New("not a directory")}
	}
	if err := m.check(OpSyncDir, name); err != nil {
		return err
	}
	n.syncedChildren = make(map[string]*memNode, len(n.children))
	for k, v := range n.children {
		n.syncedChildren[k] = v
	}
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
	// KeepSynced keeps only synced data: every unsynced write is lost.
	KeepSynced CrashMode = iota
	// KeepAll keeps every write, synced or not (directory entries still
	// follow their last SyncDir).
	KeepAll
	// KeepRandom keeps, per file, a random prefix of the unsynced tail
	// (seeded), the way a disk that persisted some blocks would.
	KeepRandom
	// KeepZeroedTail keeps the current size of each file but replaces its
	// unsynced tail with zeros: the size reached the disk, the data did not.
	KeepZeroedTail
	// KeepGarbageTail is KeepZeroedTail with random bytes (seeded) instead
	// of zeros.
	KeepGarbageTail
	// KeepRandomSectors keeps each 512-byte sector of a file's unsynced
	// changes, or its synced content, at random (seeded), independently:
	// blocks reach the disk in any order, so an unsynced write that
	// overwrites a file's preallocated space may leave holes. The file has
	// its current or its synced size, at random. A file truncated below
	// its synced size since its last sync keeps one version whole.
	KeepRandomSectors
)

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
// each directory holds the entries it had at its last SyncDir, and each file
// holds its synced data plus what mode keeps of the rest. Locks are dropped,
// as the kernel drops them for a dead process. The receiver is unchanged.
func (m *MemFS) CrashClone(mode CrashMode, seed uint64) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	seen := map[*memNode]*memNode{}
	var clone func(n *memNode) *memNode
	clone = func(n *memNode) *memNode {
		if c, ok := seen[n]; ok {
			return c
		}
		c := &memNode{dir: n.dir, mode: n.mode, modTime: n.modTime}
		seen[n] = c
		if n.dir {
			c.children = map[string]*memNode{}
			// In name order, so that KeepRandom's draws go to the same
			// files for the same seed.
			names := make([]string, 0, len(n.syncedChildren))
			for k := range n.syncedChildren {
				names = append(names, k)
			}
			sort.Strings(names)
			for _, k := range names {
				c.children[k] = clone(n.syncedChildren[k])
			}
			c.syncedChildren = maps(c.children)
			return c
		}
		c.data = crashData(n, mode, rng)
		c.synced = append([]byte(nil), c.data...)
		return c
	}
	root := clone(m.root)
	return &MemFS{root: root, locks: map[*memNode]bool{}}
}

func maps(in map[string]*memNode) map[string]*memNode {
	out := make(map[string]*memNode, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

// crashData is the content a file has after a crash. Unsynced data is
// modeled as a tail beyond the synced prefix (the store only appends and
// truncates); an unsynced overwrite of synced bytes keeps either version.
func crashData(n *memNode, mode CrashMode, rng *rand.Rand) []byte {
	switch mode {
	case KeepAll:
		return append([]byte(nil), n.data...)
	case KeepRandom:
		common := 0
		for common < len(n.data) && common < len(n.synced) && n.data[common] == n.synced[common] {
			common++
		}
		if common < len(n.synced) || len(n.data) <= common {
			// The synced tail was rewritten or cut: keep one version whole.
			if rng.IntN(2) == 0 {
				return append([]byte(nil), n.synced...)
			}
			return append([]byte(nil), n.data...)
		}
		keep := common + rng.IntN(len(n.data)-common+1)
		return append([]byte(nil), n.data[:keep]...)
	case KeepZeroedTail, KeepGarbageTail:
		// The file has its current size; bytes up to the synced length
		// are the synced ones, the rest never reached the disk.
		out := make([]byte, len(n.data))
		common := copy(out, n.synced)
		if mode == KeepGarbageTail {
			for i := common; i < len(out); i++ {
				out[i] = byte(rng.Uint32())
			}
		} else {
			clear(out[common:])
		}
		return out
	case KeepRandomSectors:
		if n.cut {
			if rng.IntN(2) == 0 {
				return append([]byte(nil), n.synced...)
			}
			return append([]byte(nil), n.data...)
		}
		size := len(n.synced)
		if rng.IntN(2) == 0 {
			size = len(n.data)
		}
		out := make([]byte, size)
		for off := 0; off < size; off += sectorSize {
			end := min(off+sectorSize, size)
			now, was := sector(n.data, off, end), sector(n.synced, off, end)
			// A sector the file no longer has whole (cut since the last
			// sync) keeps its synced content.
			if len(now) == end-off && !bytes.Equal(now, was) && rng.IntN(2) == 0 {
				copy(out[off:end], now)
			} else {
				copy(out[off:end], was)
			}
		}
		return out
	default:
		return append([]byte(nil), n.synced...)
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
	f.node.modTime = time.Now()
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
	f.node.synced = append([]byte(nil), f.node.data...)
	f.node.cut = false
	return nil
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
	if size < int64(len(f.node.synced)) {
		f.node.cut = true
	}
	if size <= int64(len(f.node.data)) {
		f.node.data = f.node.data[:size:size]
	} else {
		grown := make([]byte, size)
		copy(grown, f.node.data)
		f.node.data = grown
	}
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.closed {
		return nil, &fs.PathError{Op: "stat", Path: f.name, Err: errClosed}
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
	return nil
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
