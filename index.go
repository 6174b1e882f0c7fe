package sessionstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"sync"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/jsonl"
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

// indexFile is the open index.jsonl of a writable session. Lines are
// written after the record they describe is durable and are not synced:
// reconciliation rebuilds whatever a crash loses (see doc.go).
//
// After a failed write the file is left alone for good (err): it may end
// in a torn line, or, after a failed rewrite, hold its old lines or the
// new ones (see reset), all of which reconciliation repairs (it keeps the
// valid prefix, drops the lines of sealed chunks and rebuilds the rest
// from the chunks). A line written after that would leave a gap in the
// index, which reconciliation rightly takes for corruption: an append
// already in flight when a rewrite fails publishes its events afterwards.
type indexFile struct {
	fsys vfs.FS
	path string
	perm os.FileMode
	f    vfs.File
	size int64
	buf  []byte
	err  error // the first failed write; nothing is written after it
}

func openIndexFile(fsys vfs.FS, path string, size int64, perm os.FileMode) (*indexFile, error) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	return &indexFile{fsys: fsys, path: path, perm: perm, f: f, size: size}, nil
}

// append writes the index lines of es at the end of the file.
func (x *indexFile) append(es ...*entry) error {
	if x.err != nil {
		return x.err
	}
	x.buf = x.buf[:0]
	for _, e := range es {
		x.buf = eventline.AppendIndex(x.buf, e)
	}
	n, err := x.f.WriteAt(x.buf, x.size)
	x.size += int64(n)
	if err != nil {
		x.err = fmt.Errorf("sessionstore: write index: %w", err)
		return x.err
	}
	return nil
}

// reset replaces the file's lines with those of es: after a chunk is
// sealed, the lines of its records leave index.jsonl, since the sealed file
// embeds them. The new lines are written to a temporary file, which is
// synced and renamed over index.jsonl, its directory synced
// (replaceFile); later lines are appended to the new file. A crash leaves
// the old file whole (its lines of sealed chunks are skipped when the
// session is loaded, and reconciliation drops them) or the new one whole
// with a prefix of the lines appended since. Not in place: a truncation
// and the write after it reach the disk in no set order until the file
// is synced, and a file system that kept the write and lost the
// truncation would leave the new lines followed by the old ones, which
// name earlier records again (reconciliation takes that for corruption).
func (x *indexFile) reset(es []entry) error {
	if x.err != nil {
		return x.err
	}
	x.buf = encodeIndexLines(x.buf[:0], es)
	err := durable.ReplaceFile(x.fsys, filepath.Dir(x.path), filepath.Base(x.path), x.buf, x.perm)
	var f vfs.File
	if err == nil {
		f, err = x.fsys.OpenFile(x.path, os.O_RDWR, 0)
	}
	if err != nil {
		x.err = fmt.Errorf("sessionstore: rewrite index: %w", err)
		return x.err
	}
	x.f.Close() // the replaced file, which nothing reads or writes any more
	x.f, x.size = f, int64(len(x.buf))
	return nil
}

func (x *indexFile) close() error { return x.f.Close() }

// indexScan is what readIndex found.
type indexScan struct {
	end    int64 // offset just past the last valid line
	bad    int64 // offset of the first line that failed, or -1
	badErr error
	size   int64 // file size
}

// readIndex decodes index.jsonl indexBlock bytes at a time, splitting a
// block between two goroutines when it holds at least parallelMin bytes.
// Variables so that tests can exercise block and half boundaries.
var (
	indexBlock  = 1 << 20
	parallelMin = 64 << 10
)

// readIndex reads the valid prefix of an index file, calling add for each
// line in order with its offset, up to the first line that is torn or fails
// its frame, checksum or decoding. It does not judge the lines after that:
// the caller rebuilds them from the chunks. An error from add stops the
// scan and is returned.
//
// Opening a session is dominated by this function, so it reads the file in
// large blocks and decodes the two halves of each block in parallel; add is
// still called in file order from the calling goroutine.
func readIndex(fsys vfs.FS, path string, add func(e *entry, off int64) error) (indexScan, error) {
	res := indexScan{bad: -1}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, refusal(err) // a link, a FIFO: damage
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return res, err
	}
	res.size = info.Size()
	buf := make([]byte, min(int64(indexBlock), res.size+1))
	var halves [2]decodedLines
	carry, base := 0, int64(0) // bytes kept from the last block; file offset of buf[0]
	for {
		n, err := io.ReadFull(f, buf[carry:])
		eof := errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
		if err != nil && !eof {
			return res, err
		}
		data := buf[:carry+n]
		cut := bytes.LastIndexByte(data, '\n') + 1
		if cut == 0 && len(data) > eventline.MaxIndexLine {
			// No index line is that long: the first bad line, read no
			// further (a sparse file may hold gigabytes of zeros).
			res.bad, res.badErr = base, fmt.Errorf("%w: more than %d bytes", jsonl.ErrLineTooLong, eventline.MaxIndexLine)
			return res, nil
		}
		if cut == 0 && !eof {
			// One line longer than the buffer: grow it and read on.
			buf = append(buf, make([]byte, len(buf))...)
			carry = len(data)
			continue
		}
		decodeLinesParallel(data[:cut], &halves)
		for _, h := range halves {
			for i := range h.entries {
				if err := add(&h.entries[i], base+h.offsets[i]); err != nil {
					return res, err
				}
			}
			res.end = base + h.end
			if h.err != nil {
				res.bad, res.badErr = base+h.end, h.err
				return res, nil
			}
		}
		if eof {
			if cut < len(data) {
				res.bad, res.badErr = base+int64(cut), io.ErrUnexpectedEOF
			}
			return res, nil
		}
		carry = copy(buf, data[cut:])
		base += int64(cut)
	}
}

// maxIndexPresize bounds the entries an open sets room for from the size
// of index.jsonl alone (about 3.5 MB of them).
const maxIndexPresize = 1 << 14

// typicalIndexLine is the length of a long index line (a blob reference's
// is about 330 bytes), for sizing a buffer for many.
const typicalIndexLine = 330

// decodedLines holds the entries decoded from part of a block.
type decodedLines struct {
	entries   []entry
	offsets   []int64 // offset of each entry's line in the block, unless noOffsets
	noOffsets bool
	end       int64 // offset just past the last good line (of the first bad one if err)
	err       error // why the line at end failed
}

// decodeLinesParallel decodes the newline-terminated lines of block into
// two halves, the second in another goroutine when there is a CPU for it.
func decodeLinesParallel(block []byte, halves *[2]decodedLines) {
	mid := len(block)
	if len(block) >= parallelMin && runtime.GOMAXPROCS(0) > 1 {
		mid = len(block)/2 + bytes.IndexByte(block[len(block)/2:], '\n') + 1
	}
	var wg sync.WaitGroup
	wg.Go(func() { halves[1].decode(block[mid:], int64(mid)) })
	halves[0].decode(block[:mid], 0)
	wg.Wait()
	if halves[0].err != nil {
		halves[1] = decodedLines{end: halves[0].end, entries: halves[1].entries[:0], offsets: halves[1].offsets[:0]}
	}
}

// decode decodes the lines of part, whose first byte is at offset base of
// its block, stopping at the first bad line.
func (d *decodedLines) decode(part []byte, base int64) {
	d.entries, d.offsets, d.end, d.err = d.entries[:0], d.offsets[:0], base, nil
	lines := bytes.Count(part, newline)
	if cap(d.entries) < lines {
		d.entries = make([]entry, 0, lines)
	}
	if cap(d.offsets) < lines && !d.noOffsets {
		d.offsets = make([]int64, 0, lines)
	}
	for len(part) > 0 {
		nl := bytes.IndexByte(part, '\n')
		e, err := eventline.DecodeIndex(part[:nl])
		if err != nil {
			d.err = err
			return
		}
		d.entries = append(d.entries, e)
		if !d.noOffsets {
			d.offsets = append(d.offsets, d.end)
		}
		d.end += int64(nl + 1)
		part = part[nl+1:]
	}
}

// encodeIndexLines appends the index lines of es to dst.
func encodeIndexLines(dst []byte, es []entry) []byte {
	for i := range es {
		dst = eventline.AppendIndex(dst, &es[i])
	}
	return dst
}

// chunkEntries returns the entries of the records in chunk n, a contiguous
// run of es (which is in log order).
func chunkEntries(es []entry, n uint32) []entry {
	lo := sort.Search(len(es), func(i int) bool { return es[i].Loc.Chunk >= n })
	hi := sort.Search(len(es), func(i int) bool { return es[i].Loc.Chunk > n })
	return es[lo:hi]
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
	d := decodedLines{entries: dst[:0], noOffsets: !withOffsets}
	d.decode(m.lines, 0)
	if d.err == nil && d.end != int64(len(m.lines)) {
		d.err = io.ErrUnexpectedEOF
	}
	if d.err != nil {
		return nil, nil, corruptf(m.path, d.end, "embedded index: %v", d.err)
	}
	end := int64(0)
	for i := range d.entries {
		if l := d.entries[i].Loc; l.Chunk != m.chunk || l.Offset != end {
			off := int64(0)
			for range i {
				off += int64(bytes.IndexByte(m.lines[off:], '\n') + 1)
			}
			return nil, nil, corruptf(m.path, off, "embedded index: entry %s at chunk %d offset %d, want chunk %d offset %d", d.entries[i].ID, l.Chunk, l.Offset, m.chunk, end)
		}
		end = d.entries[i].Loc.End()
	}
	if end != m.size {
		return nil, nil, corruptf(m.path, d.end, "embedded index covers %d of the chunk's %d bytes", end, m.size)
	}
	return d.entries, d.offsets, nil
}

// memIndex is the in-memory index of a session (internal/index).
type memIndex = index.Mem
