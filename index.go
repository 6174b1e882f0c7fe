package sessionstore

import (
	"bytes"
	"io"
	"path/filepath"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// nodeOf returns the payload-free public view of e.
func nodeOf(e *entry) Node { return nodeWith(e, e.Preview.String()) }

// nodeWith is nodeOf with the preview's text given.
func nodeWith(e *entry, preview string) Node {
	var ev Event
	fillHeader(&ev, &e.Header)
	return Node{ID: ev.ID, ParentID: ev.ParentID, BranchFrom: ev.BranchFrom, Kind: ev.Kind, Role: ev.Role, Time: ev.Time, Size: e.Size, Preview: preview}
}

// nodes appends the nodes of es to dst, their previews sharing one string
// (one allocation for all, not one per node).
func nodes(dst []Node, es []entry) []Node {
	n := 0
	for i := range es {
		n += len(es[i].Preview.Bytes())
	}
	var b []byte
	if n > 0 {
		b = make([]byte, 0, n)
		for i := range es {
			b = append(b, es[i].Preview.Bytes()...)
		}
	}
	all, at := string(b), 0
	for i := range es {
		k := len(es[i].Preview.Bytes())
		dst = append(dst, nodeWith(&es[i], all[at:at+k]))
		at += k
	}
	return dst
}

// sealedIndex reads the index embedded in sealed chunk n of dir (see
// doc.go): the index lines of all its records, in order. The lines must
// tile the chunk's logical bytes from offset 0 to its end. Any failure to
// read or check them is a *CorruptionError naming the sealed file; the
// offset is that of the bad line within the embedded index. offsets holds
// each line's offset there.
func sealedIndex(fsys vfs.FS, dir string, n uint32) (es []entry, offsets []int64, err error) {
	m, err := openSealedMeta(fsys, dir, n)
	if err != nil {
		return nil, nil, err
	}
	defer m.close()
	if err := m.read(new(zchunk.MetaBuffer)); err != nil {
		return nil, nil, err
	}
	return m.decode(nil, true)
}

// sealedMeta is the embedded index of a sealed chunk, read in steps so
// that a caller reading many can size the slice that takes their entries
// first (bound), and reuse the memory for the index lines (read).
type sealedMeta struct {
	path  string
	chunk uint32
	zr    *zchunk.Reader
	lines []byte // the index lines, after read
	size  int64  // the chunk's logical size
}

// openSealedMeta opens sealed chunk n of dir for reading its embedded
// index. The caller closes it.
func openSealedMeta(fsys vfs.FS, dir string, n uint32) (*sealedMeta, error) {
	path := filepath.Join(dir, chunkName(n)+sealedExt)
	zr, err := zchunk.Open(fsys, path)
	if err != nil {
		return nil, sealedErr(err)
	}
	// One index line, of at most eventline.MaxIndexLine bytes and a newline, per
	// record of at least eventline.MinChunkLine: a larger embedded index is damage,
	// not read.
	if limit := (zr.Size() + eventline.MinChunkLine - 1) / eventline.MinChunkLine * (eventline.MaxIndexLine + 1); zr.MetaSize() > limit {
		zr.Close()
		return nil, corruptf(path, 0, "embedded index of %d bytes for a chunk of %d (at most %d)", zr.MetaSize(), zr.Size(), limit)
	}
	return &sealedMeta{path: path, chunk: n, zr: zr, size: zr.Size()}, nil
}

// bound returns an upper bound on the number of entries the embedded
// index holds, if it is valid, before reading it: from its length as the
// footer records it, and from the chunk's length (each entry names a line
// of at least eventline.MinChunkLine bytes), which the frame table's checksum
// covers. The footer's metadata length is checked only when the index is
// read, so a damaged one alone could ask for gigabytes.
func (m *sealedMeta) bound() int {
	return int(min(m.zr.MetaSize()/eventline.MinIndexLine, m.zr.Size()/eventline.MinChunkLine)) + 1
}

// read reads the index lines into b's memory.
func (m *sealedMeta) read(b *zchunk.MetaBuffer) error {
	lines, err := m.zr.MetaWith(b)
	if err != nil {
		return sealedErr(err)
	}
	m.lines = lines
	return nil
}

func (m *sealedMeta) close() { m.zr.Close() }

var newline = []byte{'\n'}

// decode decodes and checks the index lines, after read, into dst[:0]
// (whose array is used if large enough) and returns the entries and, if
// asked, each line's offset, or a *CorruptionError.
func (m *sealedMeta) decode(dst []entry, withOffsets bool) (es []entry, offsets []int64, err error) {
	d := index.Lines{Entries: dst[:0], NoOffsets: !withOffsets}
	d.Decode(m.lines, 0)
	if d.Err == nil && d.End != int64(len(m.lines)) {
		d.Err = io.ErrUnexpectedEOF
	}
	if d.Err != nil {
		return nil, nil, corruptf(m.path, d.End, "embedded index: %v", d.Err)
	}
	end := int64(0)
	for i := range d.Entries {
		if l := d.Entries[i].Loc; l.Chunk != m.chunk || l.Offset != end {
			off := int64(0)
			for range i {
				off += int64(bytes.IndexByte(m.lines[off:], '\n') + 1)
			}
			return nil, nil, corruptf(m.path, off, "embedded index: entry %s at chunk %d offset %d, want chunk %d offset %d", d.Entries[i].ID, l.Chunk, l.Offset, m.chunk, end)
		}
		end = d.Entries[i].Loc.End()
	}
	if end != m.size {
		return nil, nil, corruptf(m.path, d.End, "embedded index covers %d of the chunk's %d bytes", end, m.size)
	}
	return d.Entries, d.Offsets, nil
}

// The index's types (internal/index), under the names the package's
// engine has used for them.
type (
	memIndex  = index.Mem
	indexFile = index.File
)
