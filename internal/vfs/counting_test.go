package vfs

import (
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCountingOpensReadsBytes(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	writeFile(t, m, "/d/a", "0123456789")
	writeFile(t, m, "/d/b", "xyz")
	c := NewCounting(m)
	assert.Empty(t, c.Stats(), "writes through the inner FS are not counted")

	f, err := c.OpenFile("/d/a", os.O_RDONLY, 0)
	require.NoError(t, err)
	buf := make([]byte, 4)
	n, err := f.Read(buf) // 4 bytes
	require.NoError(t, err)
	require.Equal(t, 4, n)
	n, err = f.ReadAt(buf[:3], 8) // 2 bytes and io.EOF
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 2, n)
	n, err = f.ReadAt(buf, 20) // 0 bytes and io.EOF: still a call
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, 0, n)
	require.NoError(t, f.Close())

	// A second open of the same file under another spelling of its path.
	g, err := c.OpenFile("/d/../d/./a", os.O_RDONLY, 0)
	require.NoError(t, err)
	rest, err := io.ReadAll(g)
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(rest))
	require.NoError(t, g.Close())

	b, err := ReadFile(c, "/d/b")
	require.NoError(t, err)
	require.Equal(t, "xyz", string(b))

	stats := c.Stats()
	a := stats[filepath.Clean("/d/a")]
	assert.Equal(t, 2, a.Opens)
	assert.Equal(t, int64(4+2+0+10), a.Bytes)
	// io.ReadAll issues at least one Read that returns data and one that
	// returns io.EOF.
	assert.GreaterOrEqual(t, a.Reads, 3+2)
	bs := stats["/d/b"]
	assert.Equal(t, 1, bs.Opens)
	assert.Equal(t, int64(3), bs.Bytes)
	assert.GreaterOrEqual(t, bs.Reads, 2)
	assert.Len(t, stats, 2, "keys are cleaned paths: %v", stats)
}

func TestCountingExactReadCount(t *testing.T) {
	m := NewMemFS()
	writeFile(t, m, "/f", "abcdef")
	c := NewCounting(m)
	f, err := c.OpenFile("/f", os.O_RDONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	for i := 0; i < 3; i++ {
		_, err := f.Read(make([]byte, 2))
		require.NoError(t, err)
	}
	for i := 0; i < 4; i++ {
		_, err := f.ReadAt(make([]byte, 1), int64(i))
		require.NoError(t, err)
	}
	assert.Equal(t, map[string]ReadStats{"/f": {Opens: 1, Reads: 7, Bytes: 6 + 4}}, c.Stats())
}

func TestCountingFailedOpenNotCounted(t *testing.T) {
	c := NewCounting(NewMemFS())
	_, err := c.OpenFile("/missing", os.O_RDONLY, 0)
	require.ErrorIs(t, err, fs.ErrNotExist)
	assert.Empty(t, c.Stats())
}

func TestCountingWritesAreNotReads(t *testing.T) {
	m := NewMemFS()
	c := NewCounting(m)
	f, err := c.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte("hello"))
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("!"), 5)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	assert.Equal(t, map[string]ReadStats{"/f": {Opens: 1}}, c.Stats())

	// The writes went through to the wrapped FS.
	got, err := ReadFile(m, "/f")
	require.NoError(t, err)
	assert.Equal(t, "hello!", string(got))
}

func TestCountingReset(t *testing.T) {
	m := NewMemFS()
	writeFile(t, m, "/f", "abc")
	c := NewCounting(m)
	_, err := ReadFile(c, "/f")
	require.NoError(t, err)
	require.NotEmpty(t, c.Stats())

	c.Reset()
	assert.Empty(t, c.Stats())

	// Counting starts again from zero.
	f, err := c.OpenFile("/f", os.O_RDONLY, 0)
	require.NoError(t, err)
	_, err = f.ReadAt(make([]byte, 3), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	assert.Equal(t, map[string]ReadStats{"/f": {Opens: 1, Reads: 1, Bytes: 3}}, c.Stats())
}

func TestCountingStatsIsACopy(t *testing.T) {
	m := NewMemFS()
	writeFile(t, m, "/f", "abc")
	c := NewCounting(m)
	_, err := ReadFile(c, "/f")
	require.NoError(t, err)
	s := c.Stats()
	s["/f"] = ReadStats{Opens: 100}
	s["/other"] = ReadStats{Opens: 1}
	assert.Equal(t, 1, c.Stats()["/f"].Opens)
	assert.NotContains(t, c.Stats(), "/other")
}

// Counting is an FS: the rest of the interface passes through to the
// wrapped one.
func TestCountingPassesThrough(t *testing.T) {
	m := NewMemFS()
	c := NewCounting(m)
	var _ FS = c
	testFSContract(t, c, "/", true)
}

func TestCountingOverDefault(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	require.NoError(t, os.WriteFile(name, []byte("on disk"), 0o644))
	c := NewCounting(Default)
	b, err := ReadFile(c, name)
	require.NoError(t, err)
	assert.Equal(t, "on disk", string(b))
	s := c.Stats()[name]
	assert.Equal(t, 1, s.Opens)
	assert.Equal(t, int64(7), s.Bytes)
}

// Concurrent readers are counted exactly (run with -race).
func TestCountingConcurrent(t *testing.T) {
	m := NewMemFS()
	writeFile(t, m, "/f", "0123456789")
	c := NewCounting(m)
	const workers, reads = 8, 50
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := c.OpenFile("/f", os.O_RDONLY, 0)
			if !assert.NoError(t, err) {
				return
			}
			defer f.Close()
			for i := 0; i < reads; i++ {
				_, err := f.ReadAt(make([]byte, 2), 0)
				assert.NoError(t, err)
			}
			if w == 0 {
				_ = c.Stats() // a reader of the stats meanwhile
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, ReadStats{Opens: workers, Reads: workers * reads, Bytes: workers * reads * 2}, c.Stats()["/f"])
}
