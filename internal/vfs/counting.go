package vfs

import (
	"io/fs"
	"path/filepath"
	"sync"
)

// Counting wraps an FS and counts, per path, the opens and the bytes read,
// so tests can show which files an operation touched and how much of them
// it read.
type Counting struct {
	FS
	mu    sync.Mutex
	stats map[string]ReadStats
}

// ReadStats is what Counting saw of one path.
type ReadStats struct {
	Opens int   // OpenFile calls
	Reads int   // Read and ReadAt calls
	Bytes int64 // bytes returned by Read and ReadAt
}

// NewCounting wraps fsys.
func NewCounting(fsys FS) *Counting {
	return &Counting{FS: fsys, stats: map[string]ReadStats{}}
}

// Stats returns a copy of the counts so far, keyed by cleaned path.
func (c *Counting) Stats() map[string]ReadStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]ReadStats, len(c.stats))
	for k, v := range c.stats {
		out[k] = v
	}
	return out
}

// Reset forgets the counts so far.
func (c *Counting) Reset() {
	c.mu.Lock()
	c.stats = map[string]ReadStats{}
	c.mu.Unlock()
}

func (c *Counting) add(name string, opens, reads int, n int64) {
	name = filepath.Clean(name)
	c.mu.Lock()
	s := c.stats[name]
	s.Opens += opens
	s.Reads += reads
	s.Bytes += n
	c.stats[name] = s
	c.mu.Unlock()
}

// OpenFile implements FS.
func (c *Counting) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	c.add(name, 1, 0, 0)
	return &countingFile{File: f, c: c, name: name}, nil
}

type countingFile struct {
	File
	c    *Counting
	name string
}

func (f *countingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.c.add(f.name, 0, 1, int64(n))
	return n, err
}

func (f *countingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.add(f.name, 0, 1, int64(n))
	return n, err
}
