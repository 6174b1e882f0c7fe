package sessionstore

import (
	"log/slog"
	"os"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/chunkwriter"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// durableFiles is the seam through which the durable facts of one open
// session leave the process, and through which they are read back when it
// is used. The engine above it (the open session, group commit, the chunk
// writer and sealing) decides what is written, in which order, and when a
// fact must be durable; an implementation decides only where the bytes go
// and how they are made durable there. localFiles keeps them in the
// session's directory, through internal/seam's Local and Chunk, which
// hold the file-level work and state its contract; this interface is the
// engine's view of it, its reads in the root's types (Meta, the lanes,
// chunkReader). What else touches a session's files, and why it is
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
//   - A commit group (activeChunk.WriteAt, then activeChunk.Sync): the
//     bytes of one or more whole lines at (chunk, offset), the end of the
//     chunk's data. After Sync they are durable: a crash keeps them.
//     Before Sync a crash keeps any part of them, and the engine
//     acknowledges nothing until Sync returns. A failed WriteAt leaves the
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
//     its name before the line naming it is written; split (strs, from
//     format 3), its strings too, each a blob of its own.
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
	putBlob(d [32]byte, rec []byte, strs []blob.Ref) error
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

// activeChunk is the chunk appends go to (internal/chunkwriter's
// Chunk): see durableFiles.
type activeChunk = chunkwriter.Chunk

// localFiles is the seam's local files (internal/seam's Local) as the
// engine calls them: its reads turned into the root's types (Meta, the
// lanes, a chunkReader) and its damage into *CorruptionError.
type localFiles struct {
	*seam.Local
	frames *zchunk.Cache // the Store's (Options.ReadCacheBytes), for chunkReader
}

// newLocalFiles returns the local files of the session in dir.
func newLocalFiles(fsys vfs.FS, dir string, perm, dirPerm os.FileMode, maxChunk int64, log *slog.Logger, frames *zchunk.Cache) *localFiles {
	return &localFiles{&seam.Local{FS: fsys, Dir: dir, Perm: perm, DirPerm: dirPerm, MaxChunk: maxChunk, Log: log}, frames}
}

// Preallocation and sealing sizes (internal/seam), under the engine's
// names.
const (
	preallocMax   = seam.PreallocMax
	sealBlockSize = seam.SealBlockSize
)

func (l *localFiles) createChunk(n uint32) (activeChunk, error) {
	c, err := l.CreateChunk(n)
	if err != nil {
		return nil, err
	}
	return &localChunk{c}, nil
}

func (l *localFiles) openChunk(n uint32, size int64) (activeChunk, error) {
	c, err := l.OpenChunk(n, size)
	if err != nil {
		return nil, err
	}
	return &localChunk{c}, nil
}

// sealChunk seals chunk n with the index lines of its records es
// embedded (seam.Local.SealChunk).
func (l *localFiles) sealChunk(n uint32, es []entry) error {
	var end int64
	if len(es) > 0 {
		end = es[len(es)-1].Loc.End()
	}
	lines := index.AppendLines(make([]byte, 0, len(es)*index.TypicalLine), es)
	return refusal(l.SealChunk(n, end, lines))
}

func (l *localFiles) putBlob(d [32]byte, rec []byte, strs []blob.Ref) error {
	return l.PutBlob(d, rec, strs)
}

func (l *localFiles) readBlob(d [32]byte, size int64) ([]byte, error) {
	rec, err := l.ReadBlob(d, size)
	return rec, damage(err)
}

func (l *localFiles) putMeta(b []byte) error { return l.PutMeta(b) }

func (l *localFiles) readMeta(id uuid.UUID) (Meta, int, error) {
	return readMeta(l.FS, l.Dir, id)
}

func (l *localFiles) putHead(id uuid.UUID) error { return l.PutHead(id) }

func (l *localFiles) putLanes(b []byte) error { return l.PutLanes(b) }

func (l *localFiles) readLanes() (*laneSet, error) {
	return readLanes(l.FS, l.Dir)
}

func (l *localFiles) release(bool) error { return nil }

func (l *localFiles) chunkReader() *chunkReader {
	return newChunkReader(l.FS, l.ChunkDir(), l.frames)
}

// localChunk is the active chunk of local files (internal/seam's Chunk)
// as the engine calls it.
type localChunk struct {
	*seam.Chunk
}

func (c *localChunk) WriteAt(data []byte, off int64) error { return c.Chunk.WriteAt(data, off) }
func (c *localChunk) reserve(off int64, n int) error       { return c.Reserve(off, n) }
func (c *localChunk) Sync() error                          { return c.Chunk.Sync() }
func (c *localChunk) Trim(size int64)                      { c.Chunk.Trim(size) }
func (c *localChunk) Close() error                         { return c.Chunk.Close() }

// errUnsynced marks append failures after which the file's state on disk
// is unknown: the session must stop writing (durable.ErrUnsynced, which
// the packages below wrap).
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
