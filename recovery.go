package sessionstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// reconcile brings a session's derived files in line with its chunks when
// the session is opened for writing, and loads the in-memory index. The
// chunks are the source of truth; the index and HEAD are derived from them.
//
//  1. Read the valid prefix of index.jsonl. Index lines are never synced,
//     so after a power loss the file may end in a torn line or even hold a
//     hole of zeros before later lines (blocks persist out of order): the
//     index is cut at its first invalid line and the rest is rebuilt.
//     Every kept entry must name a known parent, be new, and tile the
//     chunks (each record starts where the previous one ended, or at offset
//     0 of the next chunk); a violation is corruption.
//  2. Check that the last kept entry matches the record at its location.
//  3. Scan the chunks from the end of that record (so the work is
//     proportional to the unindexed tail) and index every complete, valid
//     record found. A tail of the newest chunk that holds no valid record
//     (a torn write) is copied to "<chunk>.broken-<offset>" and cut off. An
//     invalid record followed by a valid one, or any invalid data in a
//     sealed chunk, is corruption.
//  4. Drop the temporary file of an interrupted session.json replace (the
//     old file is whole), finish or discard an interrupted HEAD replace, and
//     rewrite HEAD if it is missing or older than the newest event.
//
// Every repair is synced before the session is used, and each step is
// idempotent, so a crash during reconciliation is recovered by the next one.
func (s *Store) reconcile(h *handle) error {
	fsys := s.opts.fs
	log := s.opts.Logger.With("session", h.id)
	indexPath := filepath.Join(h.dir, indexName)
	chunkDir := filepath.Join(h.dir, chunksDir)

	// Size the index structures from the index file (about 250 bytes a
	// line), so a large session is loaded without regrowing them.
	hint := 16
	if info, err := fsys.Stat(indexPath); err == nil {
		hint += int(info.Size() / minIndexLine)
	}
	h.byID = make(map[uuid.UUID]int32, hint)
	h.entries = make([]entry, 0, hint)
	scan, err := readIndex(fsys, indexPath, func(e *entry, off int64) error {
		if len(h.entries) == 0 {
			if e.Loc.Chunk != 0 || e.Loc.Offset != 0 {
				return corruptf(indexPath, off, "first entry is at chunk %d offset %d, not at the start of chunk 0", e.Loc.Chunk, e.Loc.Offset)
			}
		} else if prev := &h.entries[len(h.entries)-1]; !(e.Loc.Chunk == prev.Loc.Chunk && e.Loc.Offset == prev.Loc.end()) && !(e.Loc.Chunk == prev.Loc.Chunk+1 && e.Loc.Offset == 0) {
			return corruptf(indexPath, off, "entry %s at chunk %d offset %d does not follow the previous record", e.ID, e.Loc.Chunk, e.Loc.Offset)
		}
		if err := h.add(e); err != nil {
			return corruptf(indexPath, off, "%w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if scan.bad >= 0 {
		log.Warn("sessionstore: index tail is invalid; rebuilding it from the chunks", "path", indexPath, "offset", scan.bad, "err", scan.badErr)
	}

	chunks, err := listChunks(fsys, chunkDir)
	if err != nil {
		return err
	}
	for i, n := range chunks {
		if n != uint32(i) {
			return corruptf(filepath.Join(chunkDir, chunkName(uint32(i))), 0, "chunk file is missing (found %s)", chunkName(n))
		}
	}

	start := location{}
	if len(h.entries) > 0 {
		last := &h.entries[len(h.entries)-1]
		r := newChunkReader(fsys, chunkDir)
		_, err := readEntry(r, last)
		r.close()
		if err != nil {
			return err
		}
		start = location{Chunk: last.Loc.Chunk, Offset: last.Loc.end()}
	}

	firstNew := len(h.entries)
	activeSize := int64(0)
	for _, n := range chunks {
		if n < start.Chunk {
			continue
		}
		off := int64(0)
		if n == start.Chunk {
			off = start.Offset
		}
		newest := n == chunks[len(chunks)-1]
		end, err := s.scanChunk(h, filepath.Join(chunkDir, chunkName(n)), n, off, newest, log)
		if err != nil {
			return err
		}
		if newest {
			activeSize = end
		}
	}

	added := h.entries[firstNew:]
	if scan.bad >= 0 || len(added) > 0 || scan.size != scan.end {
		if err := rewriteIndexTail(fsys, indexPath, scan.end, added, s.opts.FileMode); err != nil {
			return err
		}
		log.Info("sessionstore: index rebuilt from chunks", "path", indexPath, "entries_added", len(added))
	}
	indexSize := scan.end
	for i := range added {
		indexSize += int64(len(encodeIndexLine(nil, &added[i])))
	}
	if h.index, err = openIndexFile(fsys, indexPath, indexSize, s.opts.FileMode); err != nil {
		return err
	}

	// An interrupted metadata replace leaves its temporary file behind: the
	// old session.json is intact, so the temporary file is dropped.
	if err := removeIfExists(fsys, filepath.Join(h.dir, metaFile+".tmp")); err != nil {
		return err
	}

	h.chunks = chunkWriter{fsys: fsys, dir: chunkDir, perm: s.opts.FileMode, maxSize: s.opts.ChunkSize}
	if len(chunks) > 0 {
		if err := h.chunks.openActive(chunks[len(chunks)-1], activeSize); err != nil {
			return err
		}
	}
	return s.reconcileHead(h, log)
}

// scanChunk indexes the records of one chunk from off, adding them to h,
// and returns the offset where valid data ends.
func (s *Store) scanChunk(h *handle, path string, n uint32, off int64, newest bool, log *slog.Logger) (int64, error) {
	fsys := s.opts.fs
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := jsonl.NewScanner(io.NewSectionReader(f, off, 1<<62), off)
	var (
		end      = off
		firstBad = int64(-1)
		badErr   error
	)
	for sc.Next() {
		line := sc.Line()
		hdr, rec, err := decodeEventLine(line)
		if err != nil {
			if firstBad < 0 {
				firstBad, badErr = sc.Offset(), err
			}
			continue
		}
		if firstBad >= 0 {
			return 0, corruptf(path, firstBad, "invalid record followed by a valid one at offset %d: %w", sc.Offset(), badErr)
		}
		e := &entry{header: hdr, Size: int64(len(rec)), Loc: location{Chunk: n, Offset: sc.Offset(), Length: uint32(len(line) + 1)}}
		if err := h.add(e); err != nil {
			return 0, corruptf(path, sc.Offset(), "%w", err)
		}
		end = sc.End()
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if firstBad < 0 && len(sc.Tail()) > 0 {
		firstBad, badErr = sc.Offset(), io.ErrUnexpectedEOF
	}
	if firstBad < 0 {
		return end, nil
	}
	if !newest {
		return 0, corruptf(path, firstBad, "invalid data in a sealed chunk: %w", badErr)
	}
	log.Warn("sessionstore: cutting torn tail of chunk", "path", path, "offset", firstBad, "err", badErr)
	if err := cutTail(fsys, path, firstBad, s.opts.FileMode); err != nil {
		return 0, err
	}
	return firstBad, nil
}

// cutTail keeps the bytes of path from off aside in "<path>.broken-<off>"
// (synced, with its directory), then truncates path at off and syncs it.
func cutTail(fsys vfs.FS, path string, off int64, perm os.FileMode) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	tail := make([]byte, info.Size()-off)
	if _, err := f.ReadAt(tail, off); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	keep := fmt.Sprintf("%s.broken-%d", path, off)
	k, err := fsys.OpenFile(keep, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := k.Write(tail); err != nil {
		k.Close()
		return err
	}
	if err := k.Sync(); err != nil {
		k.Close()
		return err
	}
	if err := k.Close(); err != nil {
		return err
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return err
	}
	if err := f.Truncate(off); err != nil {
		return err
	}
	return f.Sync()
}

// rewriteIndexTail cuts the index at end, appends the lines of added and
// syncs the file.
func rewriteIndexTail(fsys vfs.FS, path string, end int64, added []entry, perm os.FileMode) error {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(end); err != nil {
		return err
	}
	var buf []byte
	for i := range added {
		buf = encodeIndexLine(buf, &added[i])
	}
	if _, err := f.WriteAt(buf, end); err != nil {
		return err
	}
	return f.Sync()
}

// reconcileHead finishes or discards an interrupted HEAD replace and makes
// the HEAD file name the newest event.
func (s *Store) reconcileHead(h *handle, log *slog.Logger) error {
	fsys := s.opts.fs
	headPath := filepath.Join(h.dir, headName)
	tmpPath := filepath.Join(h.dir, headTemp)
	tmp, tmpExists, tmpErr := readHeadFile(fsys, tmpPath)
	if tmpExists {
		if _, known := h.byID[tmp]; tmpErr == nil && known {
			if err := fsys.Rename(tmpPath, headPath); err != nil {
				return err
			}
			log.Info("sessionstore: finished interrupted HEAD update", "head", tmp)
		} else if err := fsys.Remove(tmpPath); err != nil {
			return err
		}
		if err := fsys.SyncDir(h.dir); err != nil {
			return err
		}
	}
	onDisk, exists, err := readHeadFile(fsys, headPath)
	if err != nil {
		return err
	}
	if exists {
		if _, known := h.byID[onDisk]; !known {
			return corruptf(headPath, 0, "HEAD names event %s, which the log does not hold", onDisk)
		}
	}
	head := h.head()
	if head != uuid.Nil && head != onDisk {
		if err := writeHead(fsys, h.dir, head, s.opts.FileMode); err != nil {
			return err
		}
		log.Info("sessionstore: HEAD restored from the log", "head", head, "was", onDisk)
	}
	h.headOnDisk = head
	return nil
}

// removeIfExists removes a file and syncs its directory, doing nothing when
// the file is absent.
func removeIfExists(fsys vfs.FS, path string) error {
	err := fsys.Remove(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}
