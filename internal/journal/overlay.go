package journal

import (
	"io/fs"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Overlay returns fsys with the records of the journal that the JOURNAL
// marker of the session directory dir names laid over the files they
// write, for a reader that changes nothing (a read-only store): nil when
// the marker names no journal or its file is gone, when the journal was
// written in this boot (its owner wrote every record it acknowledged into
// its file before acknowledging it, and whether it lives or was killed,
// the page cache holds them), or when it holds no record for the
// session. A journal that cannot be read (its owner alive and writing it,
// or damaged) lays nothing over: a live owner's files hold what it
// acknowledged, and a writer taking the session over reports the damage.
//
// A file opened for reading through it reads with ReadAt as its own
// bytes with each record's data filled in where the file has none (past
// its end, or zeros), and is at least as long as the records reach (Stat,
// and the opened file's Stat): chunks are read so (io.SectionReader over
// ReadAt). Its Read, a file opened for writing, and every other call are
// fsys's own.
func Overlay(fsys vfs.FS, root, dir string) vfs.FS {
	owner, err := ReadMarker(fsys, dir)
	if err != nil || owner == "" {
		return nil
	}
	wal := WALPath(root, owner)
	boot, err := ReadBoot(fsys, wal)
	if err != nil {
		return nil
	}
	if id := fsys.BootID(); id != "" && boot == BootHash(id) {
		// Written in this boot: its owner wrote every record it
		// acknowledged into the chunks before, and whether it lives or
		// was killed, the page cache holds them.
		return nil
	}
	jl, err := Read(fsys, wal)
	if err != nil {
		return nil
	}
	r, err := filepath.Rel(root, dir)
	if err != nil {
		return nil
	}
	es := jl.Under(filepath.ToSlash(r) + "/")
	if len(es) == 0 {
		return nil
	}
	o := &overlayFS{FS: fsys, files: map[string][]Entry{}}
	for _, e := range es {
		p := filepath.Join(root, filepath.FromSlash(e.Path))
		o.files[p] = append(o.files[p], e)
	}
	return o
}

// overlayFS lays journal records over the files they write, for reading:
// a file read through it holds each record's data at its offset, and is
// at least as long as the records reach.
type overlayFS struct {
	vfs.FS
	files map[string][]Entry
}

func (o *overlayFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	f, err := o.FS.OpenFile(name, flag, perm)
	if err != nil {
		return f, err
	}
	es := o.files[name]
	if len(es) == 0 || flag&(os.O_WRONLY|os.O_RDWR) != 0 {
		return f, nil
	}
	return &overlayFile{File: f, es: es}, nil
}

func (o *overlayFS) Stat(name string) (fs.FileInfo, error) {
	info, err := o.FS.Stat(name)
	if err != nil {
		return info, err
	}
	if end := recordsEnd(o.files[name]); end > info.Size() {
		return sizedInfo{info, end}, nil
	}
	return info, nil
}

// recordsEnd is where the furthest of es ends.
func recordsEnd(es []Entry) int64 {
	var end int64
	for _, e := range es {
		end = max(end, e.Offset+int64(len(e.Data)))
	}
	return end
}

type overlayFile struct {
	vfs.File
	es []Entry
}

// ReadAt reads the file and fills in the records' bytes where the file
// has none: past its end, or zeros (a chunk's free space, where a power
// loss left the unsynced write out). A byte the file holds that is not
// zero is the file's: a record never changes a byte its owner had written
// (chunks are appended to), so such a byte is the file's newer content (a
// session written again since the overlay was read).
func (f *overlayFile) ReadAt(b []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(b, off)
	end := off + int64(len(b))
	for _, e := range f.es {
		eEnd := e.Offset + int64(len(e.Data))
		if eEnd <= off || e.Offset >= end {
			continue
		}
		lo, hi := max(off, e.Offset), min(end, eEnd)
		if lo-off > int64(n) {
			continue // a gap past the file's end before the record
		}
		for i := lo; i < hi; i++ {
			if i-off >= int64(n) || b[i-off] == 0 {
				b[i-off] = e.Data[i-e.Offset]
			}
		}
		n = max(n, int(hi-off))
	}
	if n == len(b) {
		err = nil
	}
	return n, err
}

func (f *overlayFile) Stat() (fs.FileInfo, error) {
	info, err := f.File.Stat()
	if err != nil {
		return info, err
	}
	if end := recordsEnd(f.es); end > info.Size() {
		return sizedInfo{info, end}, nil
	}
	return info, nil
}

// sizedInfo is a FileInfo with another size.
type sizedInfo struct {
	fs.FileInfo
	size int64
}

func (s sizedInfo) Size() int64 { return s.size }
