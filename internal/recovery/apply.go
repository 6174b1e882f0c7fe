package recovery

import (
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Apply carries out the repairs of plan p (see the package comment) in
// the session directory dir, each synced before the next, and returns the
// size of index.jsonl after them. It changes files only; a crash at any
// point leaves files the next analysis plans the rest of the repairs
// from. A plan that found corruption (p.Corrupt) is not to be applied.
func Apply(fsys vfs.FS, dir string, p *Plan, perm os.FileMode) (int64, error) {
	chunkDir := filepath.Join(dir, layout.ChunksDir)
	indexPath := filepath.Join(dir, layout.IndexFile)
	x := &p.Index
	if p.TornPath != "" {
		if err := cutTail(fsys, p.TornPath, p.ActiveSize, p.TornKeep, perm); err != nil {
			return 0, err
		}
	}
	// Records found after the last index line in the newest chunk may
	// never have been synced: a writer that died before its fdatasync, or
	// whose fdatasync failed, left them in the page cache. Sync the chunk
	// before an index line or HEAD names them durably (a torn tail's cut
	// synced it already).
	if n := len(p.Chunks); n > 0 && !p.NewestSealed && p.TornPath == "" {
		newest := p.Chunks[n-1]
		for _, e := range x.Entries[p.FirstNew:] {
			if e.Loc.Chunk == newest {
				if err := durable.SyncFile(fsys, filepath.Join(chunkDir, layout.ChunkName(newest))); err != nil {
					return 0, err
				}
				break
			}
		}
	}
	indexEnd, added := p.IndexEnd, p.PlainEntries(x.Entries[p.FirstNew:])
	if p.StaleLines > 0 || p.RewriteIndex {
		indexEnd, added = 0, p.PlainEntries(x.Entries)
	}
	indexSize := indexEnd
	if p.IndexBad >= 0 || len(added) > 0 || p.IndexSize != indexEnd {
		var err error
		if indexSize, err = rewriteIndexTail(fsys, indexPath, indexEnd, added, perm); err != nil {
			return 0, err
		}
	}
	if p.MetaTemp {
		if err := durable.RemoveFile(fsys, filepath.Join(dir, layout.MetaFile+".tmp")); err != nil {
			return 0, err
		}
	}
	for _, n := range p.Unsealed {
		if err := durable.RemoveFile(fsys, filepath.Join(chunkDir, layout.ChunkName(n))); err != nil {
			return 0, err
		}
	}
	for _, name := range p.SealTemps {
		if err := durable.RemoveFile(fsys, filepath.Join(chunkDir, name)); err != nil {
			return 0, err
		}
	}

	headPath := filepath.Join(dir, headfile.Name)
	tmpPath := filepath.Join(dir, headfile.Temp)
	if p.HeadFinish {
		if err := fsys.Rename(tmpPath, headPath); err != nil {
			return 0, err
		}
		if err := fsys.SyncDir(dir); err != nil {
			return 0, err
		}
	} else if p.HeadTemp {
		if err := durable.RemoveFile(fsys, tmpPath); err != nil {
			return 0, err
		}
	}
	head := p.Head()
	if p.HeadBad != nil {
		// Keep the bad checkpoint aside before a new one is written: moved
		// under its kept name, whatever its size (a sparse file of
		// gigabytes is never read), the move synced, so that a crash in
		// between finds the same bad HEAD, which the next analysis keeps
		// aside again, or none, which it rebuilds.
		if err := fsys.Rename(headPath, p.HeadKeep); err != nil {
			return 0, err
		}
		if err := fsys.SyncDir(filepath.Dir(p.HeadKeep)); err != nil {
			return 0, err
		}
	}
	if head != uuid.Nil && (head != p.HeadOnDisk || p.HeadBad != nil) {
		if err := headfile.Write(fsys, dir, head, perm); err != nil {
			return 0, err
		}
	}
	return indexSize, nil
}

// writeSynced writes data to a new file at path, which must not exist
// (a kept-aside file is never replaced), and syncs it and its directory.
// It is durable.ReplaceFile's atomic write (a temporary file synced, then
// renamed): a new file's entry can reach the disk before its data, and
// path, the name the bytes are promised under, must hold them whole or
// not exist. A crash before the rename leaves only the temporary file,
// which the next attempt rewrites (keepName gives it the same path while
// path does not exist). The bytes of a file's tail are copied a block at
// a time, so that their size (a sparse file may claim gigabytes) costs no
// memory.
func writeSynced[B keptBytes](fsys vfs.FS, path string, data B, perm os.FileMode) error {
	if _, err := fsys.Stat(path); err == nil {
		return &os.PathError{Op: "keep", Path: path, Err: os.ErrExist}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp := path + ".tmp"
	w, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	switch d := any(data).(type) {
	case []byte:
		_, err = w.Write(d)
	case tailBytes:
		err = d.copyTo(w)
	}
	if err != nil {
		w.Close()
		return err
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// keptBytes is what writeSynced keeps: bytes in memory, or a file's tail.
type keptBytes interface{ []byte | tailBytes }

// tailBytes is the bytes of f from off to end, less the zero bytes that
// end them (free space): what a cut keeps aside.
type tailBytes struct {
	f        vfs.File
	off, end int64
}

// copyTo writes the bytes to w from its start, a block at a time; a block
// of zeros is not written (w reads zeros there), and w ends with the last
// byte that is not zero.
func (t tailBytes) copyTo(w vfs.File) error {
	buf := make([]byte, min(t.end-t.off, 1<<20))
	var data int64 // end of the last byte not zero, from off
	for at := t.off; at < t.end; {
		n, err := t.f.ReadAt(buf[:min(int64(len(buf)), t.end-at)], at)
		if z := chunk.ZeroTail(buf[:n]); z < n {
			data = at - t.off + int64(n-z)
			if _, werr := w.WriteAt(buf[:n], at-t.off); werr != nil {
				return werr
			}
		}
		at += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	return w.Truncate(data)
}

// cutTail keeps the bytes of path from off aside in the new file keep
// (synced, with its directory), then truncates path at off and syncs it.
func cutTail(fsys vfs.FS, path string, off int64, keep string, perm os.FileMode) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	tail := tailBytes{f: f, off: off, end: info.Size()}
	if err := writeSynced(fsys, keep, tail, perm); err != nil {
		return err
	}
	if err := f.Truncate(off); err != nil {
		return err
	}
	return f.Sync()
}

// rewriteIndexTail cuts the index at end, appends the lines of added,
// syncs the file and returns its new size. When the file holds nothing
// past end, the lines are appended in place. Otherwise its first end
// bytes and the new lines replace it (durable.ReplaceFile: a temporary
// file synced, renamed over it, the directory synced), as index.File's
// Reset does and for its reason: cut in place, a crash before the sync
// could leave the new lines followed by the bytes the truncation was to
// drop, which may be whole lines naming records already named (a sealed
// chunk's, or those of the lines the rewrite drops).
func rewriteIndexTail(fsys vfs.FS, path string, end int64, added []eventline.Entry, perm os.FileMode) (int64, error) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var buf []byte
	if info.Size() > end {
		buf = make([]byte, end, end+int64(len(added))*index.TypicalLine)
		if _, err := f.ReadAt(buf, 0); err != nil {
			return 0, err
		}
	}
	for i := range added {
		buf = eventline.AppendIndex(buf, &added[i])
	}
	if info.Size() > end {
		return int64(len(buf)), durable.ReplaceFile(fsys, filepath.Dir(path), filepath.Base(path), buf, perm)
	}
	if _, err := f.WriteAt(buf, end); err != nil {
		return 0, err
	}
	return end + int64(len(buf)), f.Sync()
}
