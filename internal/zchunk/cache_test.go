package zchunk

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// cachedOpen opens data at testPath (a MemFS of its own) with cache c.
func cachedOpen(t *testing.T, data []byte, c *Cache) *Reader {
	t.Helper()
	r, err := openBytes(t, data)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	r.SetCache(c)
	return r
}

// TestCacheSharedAcrossReaders: a frame decompressed for a read of part
// of its block serves a later Reader of the same file without a second
// decompression, for part or all of the block; a frame read whole into
// the caller's buffer is not kept.
func TestCacheSharedAcrossReaders(t *testing.T) {
	src := transcript(10, 300<<10, false)
	data, err := encode(src, nil, BlockSize)
	require.NoError(t, err)
	c := NewCache(64 << 20)

	r1 := cachedOpen(t, data, c)
	require.Greater(t, len(r1.table), 3)
	e := r1.table[2]
	buf := make([]byte, 100)
	_, err = r1.ReadAt(buf, e.logOff+10)
	require.NoError(t, err)
	assert.Equal(t, string(src[e.logOff+10:e.logOff+110]), string(buf))
	assert.Equal(t, int64(1), r1.decodes.Load())
	assert.Equal(t, 1, c.Len())

	r2 := cachedOpen(t, data, c)
	_, err = r2.ReadAt(buf, e.logOff+20)
	require.NoError(t, err)
	assert.Equal(t, string(src[e.logOff+20:e.logOff+120]), string(buf))
	whole := make([]byte, e.logLen)
	_, err = r2.ReadAt(whole, e.logOff)
	require.NoError(t, err)
	assert.Equal(t, string(src[e.logOff:e.logOff+e.logLen]), string(whole))
	assert.Equal(t, int64(0), r2.decodes.Load(), "both reads served by the cache")

	// A whole block read into the caller's buffer decompresses and keeps
	// nothing.
	o := r2.table[3]
	whole = make([]byte, o.logLen)
	_, err = r2.ReadAt(whole, o.logOff)
	require.NoError(t, err)
	assert.Equal(t, int64(1), r2.decodes.Load())
	assert.Equal(t, 1, c.Len())

	// Without a cache, nothing is shared.
	r3 := cachedOpen(t, data, nil)
	_, err = r3.ReadAt(buf, e.logOff+10)
	require.NoError(t, err)
	assert.Equal(t, int64(1), r3.decodes.Load())
}

// TestCacheFileChanged: a file replaced at the same path, or damaged,
// since its frame was kept, reads what it holds now: the new bytes, or
// the damage, never the kept frame.
func TestCacheFileChanged(t *testing.T) {
	src := transcript(10, 300<<10, false)
	data, err := encode(src, nil, BlockSize)
	require.NoError(t, err)
	c := NewCache(64 << 20)
	r1 := cachedOpen(t, data, c)
	e := r1.table[2]
	buf := make([]byte, 100)
	_, err = r1.ReadAt(buf, e.logOff+10)
	require.NoError(t, err)

	// Another chunk at the same path whose third frame starts at the
	// same offset: its bytes, not the kept ones.
	other := bytes.Clone(src)
	for i := e.logOff; i < e.logOff+e.logLen; i++ {
		if other[i] >= 'a' && other[i] <= 'y' {
			other[i]++
		}
	}
	data2, err := encode(other, nil, BlockSize)
	require.NoError(t, err)
	r2 := cachedOpen(t, data2, c)
	require.Equal(t, e.compOff, r2.table[2].compOff, "the frame before it is the same")
	_, err = r2.ReadAt(buf, e.logOff+10)
	require.NoError(t, err)
	assert.Equal(t, string(other[e.logOff+10:e.logOff+110]), string(buf))
	assert.NotEqual(t, string(src[e.logOff+10:e.logOff+110]), string(buf))

	// The first file again, with a byte of that frame flipped: the
	// damage is reported.
	bad := bytes.Clone(data)
	bad[e.compOff+e.compLen/2] ^= 0x01
	r3 := cachedOpen(t, bad, c)
	_, err = r3.ReadAt(buf, e.logOff+10)
	assert.ErrorIs(t, err, ErrBadFrame)
}

// TestCacheBound: the cache holds at most its limit, dropping the least
// recently used frame first, and never a frame above an eighth of it.
func TestCacheBound(t *testing.T) {
	src := transcript(12, 1<<20, false)
	data, err := encode(src, nil, BlockSize)
	require.NoError(t, err)
	require.Greater(t, len(data), 0)
	per := int64(BlockSize + BlockSize/2) // a frame and its compressed bytes, at most
	c := NewCache(8 * per)
	r := cachedOpen(t, data, c)
	buf := make([]byte, 10)
	for _, e := range r.table {
		_, err := r.ReadAt(buf, e.logOff)
		require.NoError(t, err)
		c.mu.Lock()
		assert.LessOrEqual(t, c.used, c.limit)
		c.mu.Unlock()
	}
	require.Greater(t, len(r.table), c.Len(), "some frames were dropped")
	require.Greater(t, c.Len(), 1)
	// The last frame read is kept, the first is not.
	// (read by another Reader, which has no frame of its own yet)
	last, first := r.table[len(r.table)-1], r.table[0]
	r1 := cachedOpen(t, data, c)
	_, err = r1.ReadAt(buf, last.logOff+1)
	require.NoError(t, err)
	assert.Equal(t, int64(0), r1.decodes.Load(), "the last frame is kept")
	_, err = r1.ReadAt(buf, first.logOff+1)
	require.NoError(t, err)
	assert.Equal(t, int64(1), r1.decodes.Load(), "the first frame was dropped")

	// A cache too small for any frame keeps none.
	small := NewCache(per)
	r2 := cachedOpen(t, data, small)
	_, err = r2.ReadAt(buf, first.logOff+1)
	require.NoError(t, err)
	assert.Equal(t, 0, small.Len())
	assert.Nil(t, NewCache(0))
}

// TestCachePooledBufferCounted: the compressed bytes a frame is kept with
// hold no more memory than the cache counts for them, even when they were
// read into a larger buffer of the pool (one a frame found kept gave
// back): the cache's budget bounds what it holds.
func TestCachePooledBufferCounted(t *testing.T) {
	src := transcript(13, 300<<10, false)
	data, err := encode(src, nil, BlockSize)
	require.NoError(t, err)
	probe := cachedOpen(t, data, nil)
	require.Greater(t, len(probe.table), 1)
	e := probe.table[0]
	limit := 8 * (e.compLen + e.logLen) // the frame is kept
	buf := make([]byte, 10)
	for range 20 {
		// A buffer of the pool far larger than the cache's budget.
		putCompBuf(make([]byte, 4*limit))
		c := NewCache(limit)
		r := cachedOpen(t, data, c)
		_, err := r.ReadAt(buf, e.logOff+1)
		require.NoError(t, err)
		require.Equal(t, 1, c.Len())
		var held int64
		c.mu.Lock()
		for _, k := range c.m {
			held += int64(cap(k.comp) + cap(k.data))
		}
		c.mu.Unlock()
		require.LessOrEqual(t, held, c.limit, "the memory the kept frame holds")
	}
}
