package zchunk

import (
	"bytes"
	"sync"
)

// Cache keeps decompressed frames for the Readers given it (SetCache), up
// to a budget of bytes, the least recently used dropped first: a frame
// read again (a search hit's record, a path's event read once more) costs
// a read of its compressed bytes instead of their decompression.
//
// A cached frame is used only when the compressed bytes read from the
// file now are equal to those it was decompressed from (and whose
// CRC-32C was checked then), or, for a Reader of a file the Cache keeps
// open (Open), when it was read from that file, whose path's status was
// found unchanged when the Reader was handed out (see Open): so a file
// replaced or damaged since never yields the old bytes: the cache changes
// how fast a read is, never what it returns or which damage it reports.
// It is safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	limit int64
	used  int64
	m     map[cacheKey]*cacheEntry
	lru   cacheEntry // sentinel: lru.next is the most recently used

	fmu   sync.Mutex
	files fileSet // sealed chunk files kept open (files.go)
}

type cacheKey struct {
	path string
	off  int64 // the frame's offset in the file
}

type cacheEntry struct {
	key        cacheKey
	comp, data []byte // never modified once cached
	id         fileID // of the kept file it was read from (Cache.Open); zero: unknown
	prev, next *cacheEntry
}

// NewCache returns a cache of at most limit bytes of frames (compressed
// and decompressed bytes both count); a frame larger than an eighth of it
// is not kept. limit <= 0 gives nil, a Cache that keeps nothing.
func NewCache(limit int64) *Cache {
	if limit <= 0 {
		return nil
	}
	c := &Cache{limit: limit, m: map[cacheKey]*cacheEntry{}}
	c.lru.prev, c.lru.next = &c.lru, &c.lru
	c.files.racy = racyWindow
	return c
}

// getKept returns the frame at key if it was read from the kept file of
// identity id, without reading its compressed bytes: a Reader handed out
// for a kept file found the path's status unchanged since the file was
// opened (Cache.Open), and the file had not changed for two seconds before
// that, so its bytes are still those the frame was decompressed from.
func (c *Cache) getKept(key cacheKey, id fileID) []byte {
	if c == nil || id == (fileID{}) {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if e == nil || e.id != id {
		return nil
	}
	c.unlink(e)
	c.pushFront(e)
	return e.data
}

// get returns the frame at key if it was decompressed from exactly comp;
// a frame found so for a Reader of a kept file takes its identity id.
func (c *Cache) get(key cacheKey, comp []byte, id fileID) []byte {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.m[key]
	if e == nil {
		return nil
	}
	if !bytes.Equal(e.comp, comp) {
		c.remove(e) // the file changed: the entry is of no further use
		return nil
	}
	if id != (fileID{}) {
		e.id = id
	}
	c.unlink(e)
	c.pushFront(e)
	return e.data
}

// put keeps data, decompressed from comp (checked), at key; the caller
// never modifies either afterwards.
func (c *Cache) put(key cacheKey, comp, data []byte, id fileID) {
	if c == nil {
		return
	}
	size := int64(len(comp) + len(data))
	if size > c.limit/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.m[key]; old != nil {
		c.remove(old)
	}
	e := &cacheEntry{key: key, comp: comp, data: data, id: id}
	c.m[key] = e
	c.pushFront(e)
	c.used += size
	for c.used > c.limit {
		c.remove(c.lru.prev)
	}
}

// Len returns the number of frames kept, for tests.
func (c *Cache) Len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

func (c *Cache) remove(e *cacheEntry) {
	c.unlink(e)
	delete(c.m, e.key)
	c.used -= int64(len(e.comp) + len(e.data))
}

func (c *Cache) unlink(e *cacheEntry) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (c *Cache) pushFront(e *cacheEntry) {
	e.prev, e.next = &c.lru, c.lru.next
	c.lru.next.prev = e
	c.lru.next = e
}

// compBufs holds buffers for the compressed bytes of frames read through
// a Cache that turned out to be kept already (Reader.decode).
var compBufs sync.Pool

// compBuf returns a buffer of n bytes, its contents undefined.
func compBuf(n int64) []byte {
	if b, ok := compBufs.Get().(*[]byte); ok && int64(cap(*b)) >= n {
		return (*b)[:n]
	}
	return make([]byte, n)
}

func putCompBuf(b []byte) { compBufs.Put(&b) }
