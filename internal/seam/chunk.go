package seam

import (
	"fmt"
	"log/slog"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Chunk is the active chunk file of a session kept in local files: the
// chunk appends go to. It preallocates: the file grows in steps of zeros
// (free space) ahead of the data, so that an fdatasync of an append
// seldom has to commit a new file size. Readers skip the free space:
// records hold no zero byte. A Chunk is not safe for concurrent use: its
// session's commit pipeline calls it from one goroutine at a time.
type Chunk struct {
	f       vfs.File
	path    string
	alloc   int64 // the file's size: data, then free space (zeros)
	maxSize int64
	log     *slog.Logger
}

// Path is the chunk file's path.
func (c *Chunk) Path() string { return c.path }

// WriteAt writes data at offset off, the end of the data, first growing
// the free space if data does not fit. The bytes are not durable until
// Sync. On an error it cuts the file back to off, so that the data ends
// there again; if that fails too, the error wraps durable.ErrUnsynced.
func (c *Chunk) WriteAt(data []byte, off int64) error {
	if len(data) == 0 {
		return nil
	}
	end := off + int64(len(data))
	err := c.grow(end, len(data))
	if err == nil {
		_, err = c.f.WriteAt(data, off)
	}
	if err != nil {
		if terr := c.f.Truncate(off); terr != nil {
			return fmt.Errorf("sessionstore: write %s: %w (and cutting back failed: %v): %w", c.path, err, terr, durable.ErrUnsynced)
		}
		c.alloc = off
		return fmt.Errorf("sessionstore: write %s: %w", c.path, err)
	}
	return nil
}

// Reserve makes room for a write of n bytes at off, the end of the data,
// so that writing them afterwards (Fill, once a journal holds them
// durably) only fills space the file has: it writes zeros from the file's
// end (or off) up to the next multiple of ReserveStep after the data.
// The free space stays that small because a journaled write's sync is the
// journal's, not this file's: zeros ahead would save no sync a new file
// size, and would only be bytes on disk (ones each open session kept while
// appending, 64-256 KiB before). On an error it cuts the file back to off,
// as WriteAt does.
func (c *Chunk) Reserve(off int64, n int) error {
	end := off + int64(n)
	if end <= c.alloc {
		return nil
	}
	to := (end + ReserveStep - 1) &^ (ReserveStep - 1)
	to = max(min(to, c.maxSize), end)
	err := c.writeZeros(max(c.alloc, off), to)
	if err == nil {
		c.alloc = to
		return nil
	}
	if terr := c.f.Truncate(off); terr != nil {
		return fmt.Errorf("sessionstore: write %s: %w (and cutting back failed: %v): %w", c.path, err, terr, durable.ErrUnsynced)
	}
	c.alloc = off
	return fmt.Errorf("sessionstore: write %s: %w", c.path, err)
}

// Fill writes data at off into space Reserve made, without a sync and
// without cutting back on an error: the caller, whose journal holds the
// bytes, decides what a failure means.
func (c *Chunk) Fill(data []byte, off int64) error {
	_, err := c.f.WriteAt(data, off)
	return err
}

// Cut ends the file at off, dropping the data and free space after it
// (not synced: Sync makes the cut durable).
func (c *Chunk) Cut(off int64) error {
	if err := c.f.Truncate(off); err != nil {
		return err
	}
	c.alloc = off
	return nil
}

// Preallocation steps: the free space grows by the data's size, at least
// PreallocMin and at most PreallocMax, and never past the chunk's maximum
// size (unless one batch needs more). A write of PreallocSkip or more
// that does not fit the free space extends the file by itself, with no
// zeros after it: zeros written ahead are written to the disk too, in the
// next sync, so for large records (tool results of 64 KiB) they would
// double the bytes each sync writes, which costs more than the journal
// commit of the new size that they save (bench/: 64 KiB tool results at
// 703 appends/s with zeros, against 922/s for a plain growing file).
const (
	PreallocMin  = 64 << 10
	PreallocMax  = 256 << 10
	PreallocSkip = 32 << 10
	// ReserveStep is the free space Reserve leaves: the data rounded up
	// to a multiple of it.
	ReserveStep = 4 << 10
)

// zeros is written to preallocate free space.
var zeros [64 << 10]byte

// grow makes the file at least end bytes long, for a write of write
// bytes ending there, writing zeros beyond the data. The next sync makes
// them durable with the records.
func (c *Chunk) grow(end int64, write int) error {
	if end <= c.alloc {
		return nil
	}
	if write >= PreallocSkip {
		c.alloc = end // the write itself extends the file
		return nil
	}
	n := (end + min(max(end, PreallocMin), PreallocMax) + 4095) &^ 4095
	n = min(n, max(c.maxSize, end))
	if err := c.writeZeros(end, n); err != nil {
		return err
	}
	c.alloc = n
	return nil
}

// writeZeros writes zeros from offset from up to to (not synced).
func (c *Chunk) writeZeros(from, to int64) error {
	for off := from; off < to; {
		k, err := c.f.WriteAt(zeros[:min(int64(len(zeros)), to-off)], off)
		if err != nil {
			return err
		}
		off += int64(k)
	}
	return nil
}

// Sync makes every byte written durable (fdatasync). A failure leaves
// their state unknown; the caller does not retry it.
func (c *Chunk) Sync() error {
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("sessionstore: sync %s: %w", c.path, err)
	}
	return nil
}

// Trim cuts the free space off at size, the end of the data, so that a
// chunk no longer written takes only its data. Nothing depends on it: a
// failure is logged and leaves free space, which readers skip.
func (c *Chunk) Trim(size int64) {
	if c.alloc <= size {
		return
	}
	if err := c.f.Truncate(size); err != nil {
		c.log.Warn("sessionstore: free space stays at the end of a chunk", "path", c.path, "err", err)
		return
	}
	c.alloc = size
}

// Close closes the file.
func (c *Chunk) Close() error {
	return c.f.Close()
}
