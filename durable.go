package sessionstore

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// durableFiles is the seam through which the durable facts of one open
// session leave the process, and through which they are read back when it
// is used. The engine above it (the open session, group commit, the chunk
// writer and sealing) decides what is written, in which order, and when a
// fact must be durable; an implementation decides only where the bytes go
// and how they are made durable there. localFiles keeps them in the
// session's directory. What else touches a session's files, and why it is
// not a durable fact of this seam: the recovery analysis and its repairs
// (recovery.go) and Verify, which are about the local files' state after a
// crash; index.jsonl (index.go), derived from the chunks and rebuilt from
// them; GC's removal of unreferenced blobs (blob.go); Create's making of
// the session directory and first session.json (session.go), before the
// session is open; Upgrade's and ConvertCompression's rewrites of a local
// session's chunks, index.jsonl and session.json (upgrade.go), made with
// the session closed and its lock held; and the store's catalogue (catalogue.go), a derived
// file at the root that the session tells of each putMeta, before and
// after it (metaWatcher).
//
// What crosses the seam, and what each method promises when it returns
// nil:
//
//   - A commit group (activeChunk.writeAt, then activeChunk.sync): the
//     bytes of one or more whole lines at (chunk, offset), the end of the
//     chunk's data. After sync they are durable: a crash keeps them.
//     Before sync a crash keeps any part of them, and the engine
//     acknowledges nothing until sync returns. A failed writeAt leaves the
//     chunk's data ending at offset (or reports errUnsynced: its state is
//     unknown, and the session stops writing).
//   - A new chunk (createChunk): chunk n exists, empty, and a crash keeps
//     it. openChunk reopens the newest chunk, whose data ends at size, for
//     appending.
//   - A sealed chunk (sealChunk): the full chunk n's records, compressed,
//     with the index lines of its records embedded, durable under the
//     sealed name before the plain chunk goes; a crash leaves one or both,
//     whole.
//   - A blob (putBlob): the record, addressed by its SHA-256, durable with
//     its name before the line naming it is written.
//   - The metadata (putMeta), the HEAD checkpoint (putHead) and the lanes
//     file (putLanes, lanes.go): each replaced atomically, the old or the
//     new content whole after a crash, the new one durable on return.
//
// Reads: readMeta, readLanes, readBlob (verified against its digest) and
// chunkReader (records by location, checked by their CRC-32C).
type durableFiles interface {
	createChunk(n uint32) (activeChunk, error)
	openChunk(n uint32, size int64) (activeChunk, error)
	sealChunk(n uint32, es []entry) error
	putBlob(d [32]byte, rec []byte) error
	readBlob(d [32]byte, size int64) ([]byte, error)
	putMeta(b []byte) error
	readMeta(id uuid.UUID) (Meta, int, error)
	putHead(id uuid.UUID) error
	putLanes(b []byte) error
	readLanes() (*laneSet, error) // nil, nil when the session has no lanes file
	chunkReader() *chunkReader
	// release ends the session's use of the files when it closes: a
	// remote session's lease (remote.go); nothing for local files.
	release(clean bool) error
}

// activeChunk is the chunk appends go to: see durableFiles.
type activeChunk interface {
	// writeAt writes a commit group's bytes at off, the end of the data.
	writeAt(data []byte, off int64) error
	// sync makes every byte written durable.
	sync() error
	// trim ends the chunk's storage at size, the end of its data, when no
	// more appends come; nothing depends on it.
	trim(size int64)
	close() error
}

// localFiles keeps a session's durable facts in its directory (the layout
// is in the package doc, On disk).
type localFiles struct {
	fsys     vfs.FS
	dir      string // the session's directory
	perm     os.FileMode
	dirPerm  os.FileMode
	maxChunk int64 // Options.ChunkSize: how far preallocation goes
	log      *slog.Logger
	blobDirs blob.Dirs // blob directories known durable (has its own mutex)
}

func (l *localFiles) chunkDir() string          { return filepath.Join(l.dir, chunksDir) }
func (l *localFiles) chunkPath(n uint32) string { return filepath.Join(l.dir, chunksDir, chunkName(n)) }

// createChunk creates chunk n as a new, empty file whose directory entry
// is durable.
func (l *localFiles) createChunk(n uint32) (activeChunk, error) {
	path := l.chunkPath(n)
	f, err := l.fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, l.perm)
	if err != nil {
		return nil, err
	}
	if err := l.fsys.SyncDir(l.chunkDir()); err != nil {
		// The file exists but its entry may not be durable, and a failed
		// sync is not retried: the writer stops.
		f.Close()
		return nil, fmt.Errorf("%w: %w", err, errUnsynced)
	}
	return &localChunk{f: f, path: path, maxSize: l.maxChunk, log: l.log}, nil
}

// openChunk opens chunk n, whose valid data ends at size (free space may
// follow), for appending.
func (l *localFiles) openChunk(n uint32, size int64) (activeChunk, error) {
	path := l.chunkPath(n)
	f, err := l.fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &localChunk{f: f, path: path, alloc: max(size, info.Size()), maxSize: l.maxChunk, log: l.log}, nil
}

// sealBlockSize is the plain bytes per compressed block of a sealed
// chunk (internal/zchunk). On the shared real transcripts, 256 KiB blocks
// store sealed chunks in about 0.89x the bytes of 64 KiB ones (zchunk's
// default); reaching one line then decompresses up to 256 KiB, about
// 0.1-0.3 ms, and a Load along a path reads the blocks it needs once
// each, as before.
const sealBlockSize = 256 << 10

// sealChunk stores full chunk n compressed (internal/zchunk) with the
// index lines of its records es embedded, and removes the plain file. The
// compressed file is durable under its final name before the plain one is
// removed, so a crash leaves one or both, whole (reconciliation removes the
// plain file then). Index locations address logical offsets, which the
// compressed file keeps. A failure to remove the plain file is logged: the
// next open removes it.
func (l *localFiles) sealChunk(n uint32, es []entry) error {
	path := l.chunkPath(n)
	// Its records end where its last entry's does; free space may follow,
	// preallocated in steps of at most preallocMax.
	limit := int64(preallocMax + 4<<10)
	if len(es) > 0 {
		limit += es[len(es)-1].Loc.End()
	}
	data, err := readFile(l.fsys, path, nil, limit)
	if err != nil {
		return err
	}
	// Free space a failed trim left is not sealed: records end in a
	// newline, never in a zero byte.
	data = data[:len(data)-zeroTail(data)]
	lines := index.AppendLines(make([]byte, 0, len(es)*index.TypicalLine), es)
	if err := zchunk.WriteBlocks(l.fsys, path+sealedExt, data, lines, l.perm, sealBlockSize); err != nil {
		return err
	}
	if err := removeIfExists(l.fsys, path); err != nil {
		l.log.Warn("sessionstore: plain copy of a sealed chunk stays until the session is next opened", "path", path, "err", err)
	}
	return nil
}

func (l *localFiles) putBlob(d [32]byte, rec []byte) error {
	return blob.Put(l.fsys, l.dir, d, rec, l.perm, l.dirPerm, &l.blobDirs)
}

func (l *localFiles) readBlob(d [32]byte, size int64) ([]byte, error) {
	return readBlob(l.fsys, l.dir, d, size)
}

func (l *localFiles) putMeta(b []byte) error {
	return durable.ReplaceFile(l.fsys, l.dir, metaFile, b, l.perm)
}

func (l *localFiles) readMeta(id uuid.UUID) (Meta, int, error) {
	return readMeta(l.fsys, l.dir, id)
}

func (l *localFiles) putHead(id uuid.UUID) error {
	return writeHead(l.fsys, l.dir, id, l.perm)
}

func (l *localFiles) putLanes(b []byte) error {
	return durable.ReplaceFile(l.fsys, l.dir, lanesFile, b, l.perm)
}

func (l *localFiles) readLanes() (*laneSet, error) {
	return readLanes(l.fsys, l.dir)
}

func (l *localFiles) release(bool) error { return nil }

func (l *localFiles) chunkReader() *chunkReader {
	return newChunkReader(l.fsys, l.chunkDir())
}

// localChunk is the active chunk file. It preallocates: the file grows
// in steps of zeros (free space) ahead of the data, so that an fdatasync
// of an append seldom has to commit a new file size.
type localChunk struct {
	f       vfs.File
	path    string
	alloc   int64 // the file's size: data, then free space (zeros)
	maxSize int64
	log     *slog.Logger
}

// writeAt writes data at offset off, the end of the data, first growing
// the free space if data does not fit. On an error it cuts the file back
// to off (errUnsynced if that fails too).
func (c *localChunk) writeAt(data []byte, off int64) error {
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
			return fmt.Errorf("sessionstore: write %s: %w (and cutting back failed: %v): %w", c.path, err, terr, errUnsynced)
		}
		c.alloc = off
		return fmt.Errorf("sessionstore: write %s: %w", c.path, err)
	}
	return nil
}

// reserve makes room for a write of n bytes at off, the end of the data,
// as writeAt does before it writes, so that writing them afterwards
// (through the journal: commit.go) only fills space the file has. On an
// error it cuts the file back to off, as writeAt does.
func (c *localChunk) reserve(off int64, n int) error {
	err := c.grow(off+int64(n), n)
	if err == nil {
		return nil
	}
	if terr := c.f.Truncate(off); terr != nil {
		return fmt.Errorf("sessionstore: write %s: %w (and cutting back failed: %v): %w", c.path, err, terr, errUnsynced)
	}
	c.alloc = off
	return fmt.Errorf("sessionstore: write %s: %w", c.path, err)
}

// Preallocation steps: the free space grows by the data's size, at least
// preallocMin and at most preallocMax, and never past the chunk's maximum
// size (unless one batch needs more). A write of preallocSkip or more
// that does not fit the free space extends the file by itself, with no
// zeros after it: zeros written ahead are written to the disk too, in the
// next sync, so for large records (tool results of 64 KiB) they would
// double the bytes each sync writes, which costs more than the journal
// commit of the new size that they save (bench/: 64 KiB tool results at
// 703 appends/s with zeros, against 922/s for a plain growing file).
const (
	preallocMin  = 64 << 10
	preallocMax  = 256 << 10
	preallocSkip = 32 << 10
)

// zeros is written to preallocate free space.
var zeros [64 << 10]byte

// grow makes the file at least end bytes long, for a write of write
// bytes ending there, writing zeros beyond the data. The next sync makes them durable with the records.
func (c *localChunk) grow(end int64, write int) error {
	if end <= c.alloc {
		return nil
	}
	if write >= preallocSkip {
		c.alloc = end // the write itself extends the file
		return nil
	}
	n := (end + min(max(end, preallocMin), preallocMax) + 4095) &^ 4095
	n = min(n, max(c.maxSize, end))
	for off := end; off < n; {
		k, err := c.f.WriteAt(zeros[:min(int64(len(zeros)), n-off)], off)
		if err != nil {
			return err
		}
		off += int64(k)
	}
	c.alloc = n
	return nil
}

// sync makes the chunk's data durable (fdatasync).
func (c *localChunk) sync() error {
	if err := c.f.Sync(); err != nil {
		return fmt.Errorf("sessionstore: sync %s: %w", c.path, err)
	}
	return nil
}

// trim cuts the free space off, so that a chunk no longer written takes
// only its data. Nothing depends on it: a failure leaves free space, which
// readers skip.
func (c *localChunk) trim(size int64) {
	if c.alloc <= size {
		return
	}
	if err := c.f.Truncate(size); err != nil {
		c.log.Warn("sessionstore: free space stays at the end of a chunk", "path", c.path, "err", err)
		return
	}
	c.alloc = size
}

func (c *localChunk) close() error {
	return c.f.Close()
}

// errUnsynced marks append failures after which the file's state on disk
// is unknown: the session must stop writing.
var errUnsynced = durable.ErrUnsynced

// storeFS is fsys as the store rooted at dir uses it: confined below dir,
// so that no symbolic link under the root is followed (vfs.Confine), and
// with every refusal of the seam (a link, a FIFO, a device, a file of the
// wrong type, a file larger than its format allows) a *CorruptionError
// naming the path (refusal). The seam opens no file that is not a regular
// file or a directory as expected, and never blocks on one, so no call
// of the store writes through such a path, reads through it, or waits on
// it.
func storeFS(fsys vfs.FS, dir string) vfs.FS {
	return vfs.MapRefusals(vfs.Confine(fsys, dir), refusal)
}

// readFile reads the file at path whole, or refuses it as a
// *CorruptionError when it is larger than limit, the most its format
// allows, or is not a regular file (refusal); into buf's memory if it has
// room (vfs.ReadFileInto).
func readFile(fsys vfs.FS, path string, buf []byte, limit int64) ([]byte, error) {
	b, err := vfs.ReadFileInto(fsys, path, buf, limit)
	return b, refusal(err)
}
