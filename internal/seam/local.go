package seam

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// Local keeps one session's durable facts in its directory (the layout
// is internal/layout's). Its fields are set once, before the first call;
// the blob calls are safe for concurrent use, the others are called by
// the session's one writer at a time.
type Local struct {
	FS       vfs.FS
	Dir      string // the session's directory
	Perm     os.FileMode
	DirPerm  os.FileMode
	MaxChunk int64        // the chunk size: how far preallocation goes
	Log      *slog.Logger // where what needs no caller's action is told

	blobDirs blob.Dirs // blob directories known durable (has its own mutex)
}

// ChunkDir is the session's chunks directory.
func (l *Local) ChunkDir() string { return filepath.Join(l.Dir, layout.ChunksDir) }

// ChunkPath is the path of plain chunk n.
func (l *Local) ChunkPath(n uint32) string {
	return filepath.Join(l.Dir, layout.ChunksDir, layout.ChunkName(n))
}

// CreateChunk creates chunk n as a new, empty file whose directory entry
// is durable when it returns. A failed directory sync wraps
// durable.ErrUnsynced: the file exists, its name may not be durable.
func (l *Local) CreateChunk(n uint32) (*Chunk, error) {
	path := l.ChunkPath(n)
	f, err := l.FS.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, l.Perm)
	if err != nil {
		return nil, err
	}
	if err := l.FS.SyncDir(l.ChunkDir()); err != nil {
		// The file exists but its entry may not be durable, and a failed
		// sync is not retried: the writer stops.
		f.Close()
		return nil, fmt.Errorf("%w: %w", err, durable.ErrUnsynced)
	}
	return &Chunk{f: f, path: path, maxSize: l.MaxChunk, log: l.Log}, nil
}

// OpenChunk opens chunk n, whose valid data ends at size (free space may
// follow), for appending.
func (l *Local) OpenChunk(n uint32, size int64) (*Chunk, error) {
	path := l.ChunkPath(n)
	f, err := l.FS.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &Chunk{f: f, path: path, alloc: max(size, info.Size()), maxSize: l.MaxChunk, log: l.Log}, nil
}

// SealBlockSize is the plain bytes per compressed block of a sealed
// chunk (internal/zchunk). On the shared real transcripts, 256 KiB blocks
// store sealed chunks in about 0.89x the bytes of 64 KiB ones (zchunk's
// default); reaching one line then decompresses up to 256 KiB, about
// 0.1-0.3 ms, and a Load along a path reads the blocks it needs once
// each, as before.
const SealBlockSize = 256 << 10

// SealChunk stores full chunk n, whose records end at end, compressed
// (internal/zchunk) with lines, the index lines of its records, embedded,
// and removes the plain file. The compressed file is durable under its
// final name before the plain one is removed, so a crash leaves one or
// both, whole (reconciliation removes the plain file then). Index
// locations address logical offsets, which the compressed file keeps. A
// failure to remove the plain file is logged: the next open removes it.
// A plain file larger than its records and preallocation allow is the
// file system's refusal (vfs.ErrTooLarge).
func (l *Local) SealChunk(n uint32, end int64, lines []byte) error {
	path := l.ChunkPath(n)
	// Free space may follow the records, preallocated in steps of at
	// most PreallocMax.
	data, err := vfs.ReadFileInto(l.FS, path, nil, end+PreallocMax+4<<10)
	if err != nil {
		return err
	}
	// Free space a failed trim left is not sealed: records end in a
	// newline, never in a zero byte.
	data = data[:len(data)-chunk.ZeroTail(data)]
	if err := zchunk.WriteBlocks(l.FS, path+layout.SealedExt, data, lines, l.Perm, SealBlockSize); err != nil {
		return err
	}
	if err := durable.RemoveFile(l.FS, path); err != nil {
		l.Log.Warn("sessionstore: plain copy of a sealed chunk stays until the session is next opened", "path", path, "err", err)
	}
	return nil
}

// PutBlob stores record rec, whose SHA-256 is d, as a blob (blob.Put),
// split when strs, its strings stored apart, is not empty
// (blob.PutSplit): durable with its name, and its strings, when it
// returns nil.
func (l *Local) PutBlob(d [32]byte, rec []byte, strs []blob.Ref) error {
	return blob.PutSplit(l.FS, l.Dir, d, rec, strs, l.Perm, l.DirPerm, &l.blobDirs)
}

// ReadBlob reads the blob with digest d of a record of size bytes,
// verified (blob.Read: damage is a *corrupt.Error).
func (l *Local) ReadBlob(d [32]byte, size int64) ([]byte, error) {
	return blob.Read(l.FS, l.Dir, d, size)
}

// PutMeta replaces session.json with b atomically: the old content or
// the new, whole, after a crash; the new one durable on return.
func (l *Local) PutMeta(b []byte) error {
	return durable.ReplaceFile(l.FS, l.Dir, layout.MetaFile, b, l.Perm)
}

// PutHead replaces the HEAD checkpoint with id atomically, as PutMeta
// does.
func (l *Local) PutHead(id uuid.UUID) error {
	if err := headfile.Write(l.FS, l.Dir, id, l.Perm); err != nil {
		return fmt.Errorf("sessionstore: %w", err)
	}
	return nil
}

// PutLanes replaces the lanes file with b atomically, as PutMeta does.
func (l *Local) PutLanes(b []byte) error {
	return durable.ReplaceFile(l.FS, l.Dir, layout.LanesFile, b, l.Perm)
}
