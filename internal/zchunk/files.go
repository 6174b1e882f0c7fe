package zchunk

import (
	"time"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// KeptFiles is the number of sealed chunk files a Cache keeps open
// between reads (see Cache.Open).
const KeptFiles = 64

const (
	// racyWindow: a file whose status changed less than this before it
	// was opened is not kept. A write into it made within the same tick
	// of the file system's clock could leave its times as they were, so
	// its identity would not show the change (the racy-file rule).
	racyWindow = 2 * time.Second
	// idleFiles: a kept file unused for this long is closed at the next
	// Open, so that a removed file's disk space is not held for long by a
	// Store that goes on reading other files.
	idleFiles = 30 * time.Second
)

// fileID is what a file's status says of its identity and content: its
// device and inode (which cannot be reused while the kept descriptor holds
// the inode), size, and modification and status-change times in
// nanoseconds (every write changes the latter).
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
}

// keptFile is a sealed chunk kept open: base holds the descriptor and the
// table, shared by the Readers handed out for it (share).
type keptFile struct {
	path       string
	base       *Reader
	id         fileID
	refs       int       // Readers handed out and not yet closed
	used       time.Time // when the last of them was handed out or closed
	gone       bool      // no longer in the set: closed at the last release
	prev, next *keptFile
}

type fileSet struct {
	m      map[string]*keptFile
	lru    keptFile // sentinel: lru.next is the most recently used
	closed bool
	racy   time.Duration // racyWindow; tests shorten it
}

// Open opens the sealed chunk at path as the package's Open does, except
// that the file is kept open for the next Open of the same path (up to
// KeptFiles files, the least recently used closed first, and none idle for
// more than 30 seconds): that Open costs a status of the path instead of
// an open, a status and a read of the footer and table.
//
// A kept file is used only while the path's status (device, inode, size,
// modification and status-change times) is the one it had when opened,
// and only if its status had not changed in the two seconds before that,
// so a file replaced, removed or written into since is opened again (and
// its damage reported as by Open); a frame is read from the file, or
// taken from the Cache's frames read from that very file since it was
// opened (see Cache). Only on Linux; elsewhere Open is the package's
// Open. With c nil the package's Open.
//
// A Reader it returns must be closed as any other; a kept file's
// descriptor is closed when the last Reader using it is closed after it
// left the set (Close of the Cache, eviction, a changed status).
func (c *Cache) Open(fsys vfs.FS, path string) (*Reader, error) {
	if c == nil {
		return Open(fsys, path)
	}
	info, err := fsys.Stat(path)
	if err != nil || !info.Mode().IsRegular() {
		c.forget(path)
		return c.opened(Open(fsys, path)) // its error, as it reports it
	}
	id, ok := identify(info)
	if !ok {
		return c.opened(Open(fsys, path))
	}
	if r := c.take(path, id); r != nil {
		return r, nil
	}
	r, err := Open(fsys, path)
	if err != nil {
		return nil, err
	}
	r.SetCache(c)
	fi, err := r.f.Stat()
	if err != nil {
		return r, nil
	}
	if now, ok := identify(fi); !ok || now != id {
		return r, nil // changed between the status and the open
	}
	return c.keep(path, id, r), nil
}

func (c *Cache) opened(r *Reader, err error) (*Reader, error) {
	if err != nil {
		return nil, err
	}
	r.SetCache(c)
	return r, nil
}

// take returns a Reader of the kept file at path if its identity is id;
// a kept file of another identity is dropped.
func (c *Cache) take(path string, id fileID) *Reader {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	k := c.files.m[path]
	if k == nil {
		return nil
	}
	if k.id != id {
		c.drop(k)
		return nil
	}
	now := time.Now()
	k.refs++
	k.used = now
	c.unlinkFile(k)
	c.pushFile(k)
	c.sweep(now)
	return k.base.share(c, k)
}

// keep adds r, opened at path with identity id, to the set and returns a
// Reader sharing its file; r itself if the set is closed or the file too
// recent to keep.
func (c *Cache) keep(path string, id fileID, r *Reader) *Reader {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	now := time.Now()
	c.sweep(now)
	if c.files.closed || now.Sub(time.Unix(0, id.ctime)) < c.files.racy {
		return r
	}
	if old := c.files.m[path]; old != nil {
		c.drop(old)
	}
	if c.files.m == nil {
		c.files.m = map[string]*keptFile{}
		c.files.lru.prev, c.files.lru.next = &c.files.lru, &c.files.lru
	}
	k := &keptFile{path: path, base: r, id: id, refs: 1, used: now}
	c.files.m[path] = k
	c.pushFile(k)
	for len(c.files.m) > KeptFiles {
		c.drop(c.files.lru.prev)
	}
	return r.share(c, k)
}

// sweep drops the kept files unused for more than idleFiles. Every file
// is looked at (there are at most KeptFiles): one still in use may have
// been handed out before an idle one. c.fmu is held.
func (c *Cache) sweep(now time.Time) {
	if c.files.m == nil {
		return
	}
	for t := c.files.lru.prev; t != &c.files.lru; {
		prev := t.prev
		if t.refs == 0 && now.Sub(t.used) > idleFiles {
			c.drop(t)
		}
		t = prev
	}
}

// forget drops the kept file at path, if any.
func (c *Cache) forget(path string) {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	if k := c.files.m[path]; k != nil {
		c.drop(k)
	}
}

// release is the Close of a Reader handed out for k.
func (c *Cache) release(k *keptFile) error {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	k.refs--
	k.used = time.Now()
	if k.refs == 0 && k.gone {
		return k.base.f.Close()
	}
	return nil
}

// drop takes k out of the set, closing its file unless a Reader still
// uses it (then the last one's Close does). c.fmu is held.
func (c *Cache) drop(k *keptFile) {
	c.unlinkFile(k)
	delete(c.files.m, k.path)
	k.gone = true
	if k.refs == 0 {
		k.base.f.Close()
	}
}

// CloseFiles closes the files the Cache keeps open (those still read from
// when their last Reader is closed). Open keeps files again afterwards,
// unless final: a Store's Close, after which it keeps none.
func (c *Cache) CloseFiles(final bool) {
	if c == nil {
		return
	}
	c.fmu.Lock()
	defer c.fmu.Unlock()
	for _, k := range c.files.m {
		c.drop(k)
	}
	c.files.closed = c.files.closed || final
}

// FilesKept returns the number of files kept open, for tests.
func (c *Cache) FilesKept() int {
	if c == nil {
		return 0
	}
	c.fmu.Lock()
	defer c.fmu.Unlock()
	return len(c.files.m)
}

func (c *Cache) unlinkFile(k *keptFile) {
	k.prev.next, k.next.prev = k.next, k.prev
	k.prev, k.next = nil, nil
}

func (c *Cache) pushFile(k *keptFile) {
	k.prev, k.next = &c.files.lru, c.files.lru.next
	c.files.lru.next.prev = k
	c.files.lru.next = k
}

// share returns a Reader of r's file and table, with a one-frame cache
// of its own, whose Close releases k.
func (r *Reader) share(c *Cache, k *keptFile) *Reader {
	return &Reader{
		f: r.f, path: r.path, size: r.size, table: r.table,
		metaOff: r.metaOff, metaLen: r.metaLen, metaSize: r.metaSize, metaCRC: r.metaCRC,
		cacheIdx: -1, cache: c, kept: k,
	}
}
