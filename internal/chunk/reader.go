package chunk

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// Reader reads records by location, keeping the chunk files it opened
// until Close. It reads through a window: Fill loads a span of a chunk (a
// run of adjacent records) with one read, and Read serves records inside
// the window without further I/O. It is not safe for concurrent use.
type Reader struct {
	fsys  vfs.FS
	dir   string
	files map[uint32]Source
	cache *zchunk.Cache // given to the sealed chunks it opens

	winChunk uint32
	winOff   int64
	win      []byte
}

// NewReader returns a Reader of the chunks in dir.
func NewReader(fsys vfs.FS, dir string) *Reader {
	return &Reader{fsys: fsys, dir: dir, files: map[uint32]Source{}}
}

// SetCache gives the sealed chunks the Reader opens the frame cache c
// (zchunk.Cache), which also keeps their files open between Readers
// (OpenCached); nil, the default, keeps none.
func (r *Reader) SetCache(c *zchunk.Cache) { r.cache = c }

// File returns the source of chunk, opened at its first use and kept
// until Close. A chunk with neither file is a *corrupt.Error.
func (r *Reader) File(chunk uint32) (Source, error) {
	if f, ok := r.files[chunk]; ok {
		return f, nil
	}
	f, _, path, err := OpenCached(r.fsys, r.dir, chunk, r.cache)
	if errors.Is(err, os.ErrNotExist) {
		return nil, corrupt.Errorf(path, 0, "chunk file is missing")
	}
	if err != nil {
		return nil, err
	}
	r.files[chunk] = f
	return f, nil
}

// Reserve makes room for reads of up to n bytes at once.
func (r *Reader) Reserve(n int64) {
	if int64(cap(r.win)) < n {
		r.win = make([]byte, 0, n)
	}
}

// Fill loads n bytes of chunk from off into the window, or as many as the
// chunk holds.
func (r *Reader) Fill(chunk uint32, off int64, n int64) error {
	f, err := r.File(chunk)
	if err != nil {
		return err
	}
	if int64(cap(r.win)) < n {
		r.win = make([]byte, max(n, 2*int64(cap(r.win))))
	}
	r.win = r.win[:n]
	got, err := f.ReadAt(r.win, off)
	if err != nil && !errors.Is(err, io.EOF) {
		r.win = r.win[:0]
		return err
	}
	r.winChunk, r.winOff, r.win = chunk, off, r.win[:got]
	return nil
}

// SetWindow makes b, the n bytes of chunk from off (read by the caller
// from the chunk's Source), the window in place of the one Fill loaded,
// and returns that one's buffer for reuse.
func (r *Reader) SetWindow(chunk uint32, off int64, b []byte) (old []byte) {
	old = r.win[:0]
	r.winChunk, r.winOff, r.win = chunk, off, b
	return old
}

// Window returns the bytes the last Fill loaded, valid until the next.
func (r *Reader) Window() []byte { return r.win }

// InWindow reports whether the window holds all of loc's bytes.
func (r *Reader) InWindow(loc eventline.Location) bool {
	return loc.Chunk == r.winChunk && loc.Offset >= r.winOff && loc.End() <= r.winOff+int64(len(r.win))
}

// Read returns the header and payload of the event at loc; an inline
// record aliases the window, valid until the next Fill. Any mismatch
// between the location and what the chunk holds is a *corrupt.Error, and
// a location longer than any chunk line is refused before anything is
// read for it.
func (r *Reader) Read(loc eventline.Location) (eventline.Header, eventline.Payload, error) {
	if loc.Length > eventline.MaxChunkLine+1 {
		// No chunk line is that long: a damaged location is not read.
		return eventline.Header{}, eventline.Payload{}, corrupt.Errorf(r.Path(loc.Chunk), loc.Offset, "record of %d bytes is longer than a chunk line can be", loc.Length)
	}
	if !r.InWindow(loc) {
		if err := r.Fill(loc.Chunk, loc.Offset, int64(loc.Length)); err != nil {
			return eventline.Header{}, eventline.Payload{}, err
		}
	}
	if !r.InWindow(loc) {
		return eventline.Header{}, eventline.Payload{}, corrupt.Errorf(r.Path(loc.Chunk), loc.Offset, "record of %d bytes runs past the end of the chunk", loc.Length)
	}
	buf := r.win[loc.Offset-r.winOff : loc.End()-r.winOff]
	if buf[len(buf)-1] != '\n' {
		return eventline.Header{}, eventline.Payload{}, corrupt.Errorf(r.Path(loc.Chunk), loc.Offset, "record does not end where the index says")
	}
	h, p, err := eventline.ReadEvent(buf[:len(buf)-1])
	if err != nil {
		return eventline.Header{}, eventline.Payload{}, corrupt.Errorf(r.Path(loc.Chunk), loc.Offset, "%w", err)
	}
	return h, p, nil
}

// DamagedAt reports whether the bytes at loc do not start one whole
// framed line with a valid checksum: cut short, or the line that starts
// there (whatever length loc gives it) failing its frame or checksum, as a
// torn write or a damaged disk leaves them. A whole line with a valid
// checksum was written so: if it is invalid, or not the line loc
// describes, that is corruption, not damage. A chunk that cannot be read
// is not known to be damaged: false.
func (r *Reader) DamagedAt(loc eventline.Location) bool {
	n := min(max(int64(loc.Length), 4<<10), eventline.MaxChunkLine+1)
	for {
		if err := r.Fill(loc.Chunk, loc.Offset, n); err != nil {
			return false // not known to be damaged: the caller reports corruption, dropping nothing
		}
		if i := bytes.IndexByte(r.win, '\n'); i >= 0 {
			return jsonl.Verify(r.win[:i]) != nil
		}
		if bytes.IndexByte(r.win, 0) >= 0 {
			return true // no line holds a zero byte
		}
		if int64(len(r.win)) < n || n > eventline.MaxChunkLine {
			return true // the chunk ends before the line does, or no line is that long
		}
		n = min(2*n, eventline.MaxChunkLine+1)
	}
}

// Blocks widens [start, end) of chunk to whole compressed blocks when the
// chunk is sealed, so that reading it decompresses each block once,
// straight into the window, and the next read, ending at start, shares no
// block with this one.
func (r *Reader) Blocks(chunk uint32, start, end int64) (int64, int64) {
	f, err := r.File(chunk)
	if z, ok := f.(*zchunk.Reader); ok && err == nil && end > start {
		start, _ = z.Block(start)
		_, end = z.Block(end - 1)
	}
	return start, end
}

// Path is the name of chunk n's plain file, for errors.
func (r *Reader) Path(n uint32) string { return filepath.Join(r.dir, layout.ChunkName(n)) }

// Close closes the files the Reader opened and drops its window.
func (r *Reader) Close() {
	for _, f := range r.files {
		f.Close()
	}
	clear(r.files)
	r.win = nil
}
