package index

import (
	"bytes"
	"io"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// ReadSealed reads the index embedded in sealed chunk n at path (see the
// root package's doc.go): the index lines of all its records, in order.
// The lines must tile the chunk's logical bytes from offset 0 to its end.
// A failure to check them is a *corrupt.Error naming the sealed file, the
// offset that of the bad line within the embedded index; a failure to
// read them is internal/zchunk's error. offsets holds each line's offset
// there.
func ReadSealed(fsys vfs.FS, path string, n uint32) (es []eventline.Entry, offsets []int64, err error) {
	m, err := OpenSealed(fsys, path, n)
	if err != nil {
		return nil, nil, err
	}
	defer m.Close()
	if err := m.Read(new(zchunk.MetaBuffer)); err != nil {
		return nil, nil, err
	}
	return m.Decode(nil, true)
}

// Sealed is the embedded index of a sealed chunk, read in steps so
// that a caller reading many can size the slice that takes their entries
// first (Bound), and reuse the memory for the index lines (Read).
type Sealed struct {
	path  string
	chunk uint32
	zr    *zchunk.Reader
	lines []byte // the index lines, after read
	size  int64  // the chunk's logical size
}

// OpenSealed opens sealed chunk n, at path, for reading its embedded
// index. An embedded index larger than the chunk's records can have is a
// *corrupt.Error, not read. The caller closes it.
func OpenSealed(fsys vfs.FS, path string, n uint32) (*Sealed, error) {
	zr, err := zchunk.Open(fsys, path)
	if err != nil {
		return nil, err
	}
	// One index line, of at most eventline.MaxIndexLine bytes and a newline, per
	// record of at least eventline.MinChunkLine: a larger embedded index is damage,
	// not read.
	if limit := (zr.Size() + eventline.MinChunkLine - 1) / eventline.MinChunkLine * (eventline.MaxIndexLine + 1); zr.MetaSize() > limit {
		zr.Close()
		return nil, corrupt.Errorf(path, 0, "embedded index of %d bytes for a chunk of %d (at most %d)", zr.MetaSize(), zr.Size(), limit)
	}
	return &Sealed{path: path, chunk: n, zr: zr, size: zr.Size()}, nil
}

// Bound returns an upper bound on the number of entries the embedded
// index holds, if it is valid, before reading it: from its length as the
// footer records it, and from the chunk's length (each entry names a
// line of at least eventline.MinChunkLine bytes), which the frame table's
// checksum covers. The footer's metadata length is checked only when the index is
// read, so a damaged one alone could ask for gigabytes.
func (m *Sealed) Bound() int {
	return int(min(m.zr.MetaSize()/eventline.MinIndexLine, m.zr.Size()/eventline.MinChunkLine)) + 1
}

// Read reads the index lines into b's memory (internal/zchunk's error if
// it cannot).
func (m *Sealed) Read(b *zchunk.MetaBuffer) error {
	lines, err := m.zr.MetaWith(b)
	if err != nil {
		return err
	}
	m.lines = lines
	return nil
}

// Close closes the sealed chunk.
func (m *Sealed) Close() { m.zr.Close() }

// Decode decodes and checks the index lines, after Read, into dst[:0]
// (whose array is used if large enough) and returns the entries and, if
// asked, each line's offset, or a *corrupt.Error.
func (m *Sealed) Decode(dst []eventline.Entry, withOffsets bool) (es []eventline.Entry, offsets []int64, err error) {
	d := Lines{Entries: dst[:0], NoOffsets: !withOffsets}
	d.Decode(m.lines, 0)
	if d.Err == nil && d.End != int64(len(m.lines)) {
		d.Err = io.ErrUnexpectedEOF
	}
	if d.Err != nil {
		return nil, nil, corrupt.Errorf(m.path, d.End, "embedded index: %v", d.Err)
	}
	end := int64(0)
	for i := range d.Entries {
		if l := d.Entries[i].Loc; l.Chunk != m.chunk || l.Offset != end {
			off := int64(0)
			for range i {
				off += int64(bytes.IndexByte(m.lines[off:], '\n') + 1)
			}
			return nil, nil, corrupt.Errorf(m.path, off, "embedded index: eventline.Entry %s at chunk %d offset %d, want chunk %d offset %d", d.Entries[i].ID, l.Chunk, l.Offset, m.chunk, end)
		}
		end = d.Entries[i].Loc.End()
	}
	if end != m.size {
		return nil, nil, corrupt.Errorf(m.path, d.End, "embedded index covers %d of the chunk's %d bytes", end, m.size)
	}
	return d.Entries, d.Offsets, nil
}
