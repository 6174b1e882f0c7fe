//go:build linux

package zchunk

import (
	"bytes"
	"encoding/binary"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// writeSealed writes data to path through a temporary file renamed over
// it, as sealing does.
func writeSealed(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, data, 0o600))
	require.NoError(t, os.Rename(tmp, path))
}

// readKept reads the whole logical content of a Cache.Open'd file and
// closes its Reader.
func readKept(t *testing.T, c *Cache, fsys vfs.FS, path string) ([]byte, error) {
	t.Helper()
	r, err := c.Open(fsys, path)
	if err != nil {
		return nil, err
	}
	defer func() { assert.NoError(t, r.Close()) }()
	// Part of a block first (the frame cache's kind of read), then all.
	part := make([]byte, 10)
	if _, err := r.ReadAt(part, 5); err != nil {
		return nil, err
	}
	b := make([]byte, r.Size())
	_, err = r.ReadAt(b, 0)
	return b, err
}

// TestFilesKept: a sealed chunk opened through a Cache is kept open and
// serves the next Open of its path without an open; a file replaced at the
// path, or written into, is opened again, its content and damage read as
// they are now; a Reader closed twice leaves the kept file to the others.
func TestFilesKept(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.zst")
	src := transcript(21, 600<<10, false)
	data, err := encode(src, nil, BlockSize)
	require.NoError(t, err)
	writeSealed(t, path, data)

	c := NewCache(64 << 20)
	c.files.racy = 50 * time.Millisecond
	time.Sleep(100 * time.Millisecond) // the file is no longer racy
	cnt := vfs.NewCounting(vfs.Default)
	opens := func() int { return cnt.Stats()[path].Opens }

	for range 3 {
		got, err := readKept(t, c, cnt, path)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(src, got))
	}
	assert.Equal(t, 1, opens(), "opened once, kept for the next reads")
	assert.Equal(t, 1, c.FilesKept())

	r, err := c.Open(cnt, path)
	require.NoError(t, err)
	require.NoError(t, r.Close())
	assert.ErrorIs(t, r.Close(), fs.ErrClosed, "a second Close")
	got, err := readKept(t, c, cnt, path)
	require.NoError(t, err, "the kept file is still open for the others")
	assert.True(t, bytes.Equal(src, got))
	assert.Equal(t, 1, opens())

	// Replaced by another chunk: its content.
	other := transcript(22, 600<<10, false)
	data2, err := encode(other, nil, BlockSize)
	require.NoError(t, err)
	writeSealed(t, path, data2)
	got, err = readKept(t, c, cnt, path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(other, got), "the file at the path now")
	assert.Equal(t, 2, opens())

	// Kept again once no longer racy; then its table damaged in place.
	time.Sleep(100 * time.Millisecond)
	_, err = readKept(t, c, cnt, path)
	require.NoError(t, err)
	_, err = readKept(t, c, cnt, path)
	require.NoError(t, err)
	assert.Equal(t, 3, opens(), "kept at the third open since the replacement")
	require.Equal(t, 1, c.FilesKept())
	foot := data2[len(data2)-FooterSize:]
	tableOff := int64(binary.LittleEndian.Uint64(foot[0:8]))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{data2[tableOff] ^ 0x40}, tableOff)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = readKept(t, c, cnt, path)
	assert.ErrorIs(t, err, ErrTableChecksum, "the damage, as Open reports it")
	var fe *FormatError
	if assert.ErrorAs(t, err, &fe) {
		assert.Equal(t, path, fe.Path)
	}

	// Removed: not found, and no longer kept.
	require.NoError(t, os.Remove(path))
	_, err = readKept(t, c, cnt, path)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.Equal(t, 0, c.FilesKept())
}

// TestFilesRacy: a file whose status changed within the racy window
// before its open is not kept: every Open opens it.
func TestFilesRacy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.zst")
	data, err := encode(transcript(23, 100<<10, false), nil, BlockSize)
	require.NoError(t, err)
	writeSealed(t, path, data)
	c := NewCache(64 << 20) // the default window, two seconds
	cnt := vfs.NewCounting(vfs.Default)
	for range 3 {
		_, err := readKept(t, c, cnt, path)
		require.NoError(t, err)
	}
	assert.Equal(t, 3, cnt.Stats()[path].Opens)
	assert.Equal(t, 0, c.FilesKept())
}

// TestFilesBound: at most KeptFiles files are kept, the least recently
// used closed first; a Reader still using a file closed out of the set
// reads on until its Close. CloseFiles closes them all; after a final one
// the Cache keeps none.
func TestFilesBound(t *testing.T) {
	dir := t.TempDir()
	src := transcript(24, 50<<10, false)
	data, err := encode(src, nil, BlockSize)
	require.NoError(t, err)
	c := NewCache(64 << 20)
	c.files.racy = 0
	cnt := vfs.NewCounting(vfs.Default)
	paths := make([]string, KeptFiles+8)
	for i := range paths {
		paths[i] = filepath.Join(dir, "c"+string(rune('A'+i/26))+string(rune('a'+i%26))+".zst")
		writeSealed(t, paths[i], data)
	}
	held, err := c.Open(cnt, paths[0])
	require.NoError(t, err)
	for _, p := range paths {
		_, err := readKept(t, c, cnt, p)
		require.NoError(t, err)
	}
	assert.Equal(t, KeptFiles, c.FilesKept())
	b := make([]byte, len(src))
	_, err = held.ReadAt(b, 0)
	require.NoError(t, err, "a Reader of a file closed out of the set")
	assert.True(t, bytes.Equal(src, b))
	require.NoError(t, held.Close())

	cnt.Reset()
	_, err = readKept(t, c, cnt, paths[len(paths)-1])
	require.NoError(t, err)
	_, err = readKept(t, c, cnt, paths[0])
	require.NoError(t, err)
	assert.Equal(t, 0, cnt.Stats()[paths[len(paths)-1]].Opens, "the most recent is kept")
	assert.Equal(t, 1, cnt.Stats()[paths[0]].Opens, "the least recent was closed")

	c.CloseFiles(false)
	assert.Equal(t, 0, c.FilesKept())
	_, err = readKept(t, c, cnt, paths[1])
	require.NoError(t, err)
	assert.Equal(t, 1, c.FilesKept(), "kept again")
	c.CloseFiles(true)
	_, err = readKept(t, c, cnt, paths[2])
	require.NoError(t, err)
	assert.Equal(t, 0, c.FilesKept(), "none after a final CloseFiles")
}

// TestFilesKeptFrames: a frame read from a kept file serves the next
// Readers of that file without a read; a file replaced at the path, or a
// frame written into in place, is read as it is now.
func TestFilesKeptFrames(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.zst")
	src := transcript(25, 600<<10, false)
	data, err := encode(src, nil, BlockSize)
	require.NoError(t, err)
	writeSealed(t, path, data)
	c := NewCache(64 << 20)
	c.files.racy = 50 * time.Millisecond
	time.Sleep(100 * time.Millisecond)
	cnt := vfs.NewCounting(vfs.Default)
	reads := func() int { return cnt.Stats()[path].Reads }

	got, err := readKept(t, c, cnt, path)
	require.NoError(t, err)
	require.True(t, bytes.Equal(src, got))
	before := reads()
	got, err = readKept(t, c, cnt, path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(src, got))
	assert.Equal(t, before+len(mustTable(t, c, cnt, path))-1, reads(),
		"the frame read in part comes from the cache; every other is read for the whole")

	// Replaced by a chunk whose first block has the same length and other
	// letters, and no longer racy when first read: its bytes.
	first := mustTable(t, c, cnt, path)[0]
	other := bytes.Clone(src)
	for i := first.logOff; i < first.logOff+first.logLen; i++ {
		if other[i] >= 'a' && other[i] <= 'y' {
			other[i]++
		}
	}
	data2, err := encode(other, nil, BlockSize)
	require.NoError(t, err)
	writeSealed(t, path, data2)
	time.Sleep(100 * time.Millisecond)
	got, err = readKept(t, c, cnt, path)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(other, got), "the replacing file's frames, not the kept ones")
	require.Equal(t, first.logLen, mustTable(t, c, cnt, path)[0].logLen, "the same first block's length")

	// The first frame (the one kept) written into in place: the damage.
	r, err := c.Open(cnt, path)
	require.NoError(t, err)
	e := r.table[0]
	require.NoError(t, r.Close())
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte{data2[e.compOff+e.compLen/2] ^ 0x01}, e.compOff+e.compLen/2)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = readKept(t, c, cnt, path)
	assert.ErrorIs(t, err, ErrBadFrame)
}

// mustTable returns the frame table of the file at path, through c.
func mustTable(t *testing.T, c *Cache, fsys vfs.FS, path string) []entry {
	t.Helper()
	r, err := c.Open(fsys, path)
	require.NoError(t, err)
	defer r.Close()
	return r.table
}

// ageFiles makes every kept file look unused for longer than idleFiles.
func ageFiles(c *Cache) {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	for _, k := range c.files.m {
		k.used = k.used.Add(-2 * idleFiles)
	}
}

// keptPaths returns the paths of the files kept open.
func keptPaths(c *Cache) []string {
	c.fmu.Lock()
	defer c.fmu.Unlock()
	var ps []string
	for p := range c.files.m {
		ps = append(ps, p)
	}
	return ps
}

// TestFilesIdle: a kept file unused for longer than idleFiles is closed
// by the next Open, whether that Open finds its own file kept or keeps a
// new one, and even when a file used for longer (a Reader still open)
// was handed out before it.
func TestFilesIdle(t *testing.T) {
	dir := t.TempDir()
	data, err := encode(transcript(25, 50<<10, false), nil, BlockSize)
	require.NoError(t, err)
	c := NewCache(64 << 20)
	c.files.racy = 0
	var paths []string
	for _, n := range []string{"a", "b", "c"} {
		p := filepath.Join(dir, n+".zst")
		writeSealed(t, p, data)
		paths = append(paths, p)
	}
	a, b, cc := paths[0], paths[1], paths[2]

	// An Open served by a kept file closes the idle others.
	_, err = readKept(t, c, vfs.Default, a)
	require.NoError(t, err)
	_, err = readKept(t, c, vfs.Default, b)
	require.NoError(t, err)
	require.Equal(t, 2, c.FilesKept())
	ageFiles(c)
	_, err = readKept(t, c, vfs.Default, a)
	require.NoError(t, err)
	assert.Equal(t, []string{a}, keptPaths(c), "b, idle, closed by the Open of a")

	// A Reader held open on the least recently handed out file does not
	// keep an idle file handed out after it open.
	held, err := c.Open(vfs.Default, a)
	require.NoError(t, err)
	_, err = readKept(t, c, vfs.Default, b)
	require.NoError(t, err)
	require.Equal(t, 2, c.FilesKept())
	ageFiles(c)
	_, err = readKept(t, c, vfs.Default, cc)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{a, cc}, keptPaths(c), "b, idle, closed; a in use")
	require.NoError(t, held.Close())

	// An Open of a file too recent to keep closes the idle ones too.
	d := filepath.Join(dir, "d.zst")
	writeSealed(t, d, data)
	c.files.racy = time.Hour
	ageFiles(c)
	_, err = readKept(t, c, vfs.Default, d)
	require.NoError(t, err)
	assert.Empty(t, keptPaths(c), "a and c, idle, closed; d not kept")
}

// TestFilesCloseTwice: a second Close of a Reader sharing a kept file
// reports, as that of a Reader with a file of its own does, fs.ErrClosed
// with the file's path.
func TestFilesCloseTwice(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.zst")
	data, err := encode(transcript(26, 50<<10, false), nil, BlockSize)
	require.NoError(t, err)
	writeSealed(t, path, data)
	c := NewCache(64 << 20)
	c.files.racy = 0
	for _, kept := range []bool{false, true} {
		var r *Reader
		if kept {
			r, err = c.Open(vfs.Default, path)
			require.NoError(t, err)
			require.NotNil(t, r.kept, "a Reader of the kept file")
		} else {
			r, err = Open(vfs.Default, path)
			require.NoError(t, err)
		}
		require.NoError(t, r.Close())
		err = r.Close()
		assert.ErrorIs(t, err, fs.ErrClosed, "kept %v", kept)
		var pe *fs.PathError
		if assert.ErrorAs(t, err, &pe, "kept %v", kept) {
			assert.Equal(t, path, pe.Path)
		}
	}
}
