package index

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
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// File is the open index.jsonl of a writable session. Lines are
// added after the record they describe is durable and are not synced:
// reconciliation rebuilds whatever a crash loses (the root package's doc.go).
// Append holds the lines in memory and writes them, all held lines with
// one write, once they are HoldLines lines or describe HoldBytes of
// records; Flush, Sync and Close write them too, and Reset drops them
// (the lines it writes include theirs). So the file can lag the chunks by
// up to that many records while a writer appends, as it can after a
// crash: readers find the records past the index's end in the chunks.
//
// After a failed write the file is left alone for good (err): it may end
// in a torn line, or, after a failed rewrite, hold its old lines or the
// new ones (see Reset), all of which reconciliation repairs (it keeps the
// valid prefix, drops the lines of sealed chunks and rebuilds the rest
// from the chunks). A line written after that would leave a gap in the
// index, which reconciliation rightly takes for corruption: an append
// already in flight when a rewrite fails publishes its events afterwards.
type File struct {
	fsys vfs.FS
	path string
	perm os.FileMode
	f    vfs.File
	size int64
	buf  []byte
	err  error // the first failed write; nothing is written after it

	held      []byte // lines appended and not yet written
	heldLines int    // lines in held
	heldBytes int64  // bytes of the records they describe
}

// HoldLines and HoldBytes bound what Append holds before it writes: the
// lines, and the bytes of the records they describe (what a reader scans
// in the chunk past the index's end).
const (
	HoldLines = 64
	HoldBytes = 128 << 10
)

// OpenFile opens (or creates) the index file at path for appending at
// size, the end of its valid lines.
func OpenFile(fsys vfs.FS, path string, size int64, perm os.FileMode) (*File, error) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return nil, err
	}
	return &File{fsys: fsys, path: path, perm: perm, f: f, size: size}, nil
}

// Append adds the index lines of es after those added before. It holds
// them in memory, and writes every line it holds with one write once they
// are HoldLines or more, or describe HoldBytes or more of records. An
// error is that of the write (the lines held are then lost for good: the
// file keeps its valid prefix, and writes nothing more).
func (x *File) Append(es ...*eventline.Entry) error {
	if x.err != nil {
		return x.err
	}
	for _, e := range es {
		x.held = eventline.AppendIndex(x.held, e)
		x.heldBytes += int64(e.Loc.Length)
	}
	x.heldLines += len(es)
	if x.heldLines < HoldLines && x.heldBytes < HoldBytes {
		return nil
	}
	return x.Flush()
}

// Held reports how many lines Append holds, not yet written.
func (x *File) Held() int { return x.heldLines }

// Flush writes the lines Append holds at the end of the file, with one
// write, without a sync.
func (x *File) Flush() error {
	if x.heldLines == 0 {
		return nil
	}
	n, err := x.f.WriteAt(x.held, x.size)
	x.size += int64(n)
	x.held, x.heldLines, x.heldBytes = x.held[:0], 0, 0
	if err != nil {
		x.err = fmt.Errorf("sessionstore: write index: %w", err)
		return x.err
	}
	return nil
}

// Reset replaces the file's lines with those of es: after a chunk is
// sealed, the lines of its records leave index.jsonl, since the sealed file
// embeds them. The new lines are written to a temporary file, which is
// synced and renamed over index.jsonl, its directory synced
// (durable.ReplaceFile); later lines are appended to the new file. A crash leaves
// the old file whole (its lines of sealed chunks are skipped when the
// session is loaded, and reconciliation drops them) or the new one whole
// with a prefix of the lines appended since. Not in place: a truncation
// and the write after it reach the disk in no set order until the file
// is synced, and a file system that kept the write and lost the
// truncation would leave the new lines followed by the old ones, which
// name earlier records again (reconciliation takes that for corruption).
func (x *File) Reset(es []eventline.Entry) error {
	if x.err != nil {
		return x.err
	}
	x.buf = AppendLines(x.buf[:0], es)
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
	x.held, x.heldLines, x.heldBytes = x.held[:0], 0, 0 // es has their lines
	return nil
}

// Sync writes the lines Append holds and makes every line written durable
// (fdatasync).
func (x *File) Sync() error {
	if err := x.Flush(); err != nil {
		return err
	}
	return x.f.Sync()
}

// Path is the file's path.
func (x *File) Path() string { return x.path }

// Close writes the lines Append holds, without a sync, and closes the
// file.
func (x *File) Close() error { return errors.Join(x.Flush(), x.f.Close()) }

// Scan is what Read found.
type Scan struct {
	End    int64 // offset just past the last valid line
	Bad    int64 // offset of the first line that failed, or -1
	BadErr error
	Size   int64 // file size
}

// Read decodes index.jsonl readBlock bytes at a time, splitting a
// block between two goroutines when it holds at least parallelMin bytes.
// Variables so that tests can exercise block and half boundaries.
var (
	readBlock   = 1 << 20
	parallelMin = 64 << 10
)

// Read reads the valid prefix of an index file, calling add for each
// line in order with its offset, up to the first line that is torn or fails
// its frame, checksum or decoding. It does not judge the lines after that:
// the caller rebuilds them from the chunks. An error from add stops the
// scan and is returned.
//
// Opening a session is dominated by this function, so it reads the file in
// large blocks and decodes the two halves of each block in parallel; add is
// still called in file order from the calling goroutine.
func Read(fsys vfs.FS, path string, add func(e *eventline.Entry, off int64) error) (Scan, error) {
	res := Scan{Bad: -1}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return res, nil
	}
	if err != nil {
		return res, err // a link, a FIFO: the caller's file system reports it as damage
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return res, err
	}
	res.Size = info.Size()
	buf := make([]byte, min(int64(readBlock), res.Size+1))
	var halves [2]Lines
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
			res.Bad, res.BadErr = base, fmt.Errorf("%w: more than %d bytes", jsonl.ErrLineTooLong, eventline.MaxIndexLine)
			return res, nil
		}
		if cut == 0 && !eof {
			// One line longer than the buffer: grow it and read on.
			buf = append(buf, make([]byte, len(buf))...)
			carry = len(data)
			continue
		}
		decodeParallel(data[:cut], &halves)
		for _, h := range halves {
			for i := range h.Entries {
				if err := add(&h.Entries[i], base+h.Offsets[i]); err != nil {
					return res, err
				}
			}
			res.End = base + h.End
			if h.Err != nil {
				res.Bad, res.BadErr = base+h.End, h.Err
				return res, nil
			}
		}
		if eof {
			if cut < len(data) {
				res.Bad, res.BadErr = base+int64(cut), io.ErrUnexpectedEOF
			}
			return res, nil
		}
		carry = copy(buf, data[cut:])
		base += int64(cut)
	}
}

// MaxPresize bounds the entries an open sets room for from the size
// of index.jsonl alone (about 3.5 MB of them).
const MaxPresize = 1 << 14

// TypicalLine is the length of a long index line (a blob reference's
// is about 330 bytes), for sizing a buffer for many.
const TypicalLine = 330

// Lines holds the entries decoded from part of a block.
type Lines struct {
	Entries   []eventline.Entry
	Offsets   []int64 // offset of each eventline.Entry's line in the block, unless noOffsets
	NoOffsets bool
	End       int64 // offset just past the last good line (of the first bad one if err)
	Err       error // why the line at end failed
}

// decodeParallel decodes the newline-terminated lines of block into
// two halves, the second in another goroutine when there is a CPU for it.
func decodeParallel(block []byte, halves *[2]Lines) {
	mid := len(block)
	if len(block) >= parallelMin && runtime.GOMAXPROCS(0) > 1 {
		mid = len(block)/2 + bytes.IndexByte(block[len(block)/2:], '\n') + 1
	}
	var wg sync.WaitGroup
	wg.Go(func() { halves[1].Decode(block[mid:], int64(mid)) })
	halves[0].Decode(block[:mid], 0)
	wg.Wait()
	if halves[0].Err != nil {
		halves[1] = Lines{End: halves[0].End, Entries: halves[1].Entries[:0], Offsets: halves[1].Offsets[:0]}
	}
}

// Decode decodes the lines of part, whose first byte is at offset base of
// its block, stopping at the first bad line.
func (d *Lines) Decode(part []byte, base int64) {
	d.Entries, d.Offsets, d.End, d.Err = d.Entries[:0], d.Offsets[:0], base, nil
	lines := bytes.Count(part, newline)
	if cap(d.Entries) < lines {
		d.Entries = make([]eventline.Entry, 0, lines)
	}
	if cap(d.Offsets) < lines && !d.NoOffsets {
		d.Offsets = make([]int64, 0, lines)
	}
	for len(part) > 0 {
		nl := bytes.IndexByte(part, '\n')
		e, err := eventline.DecodeIndex(part[:nl])
		if err != nil {
			d.Err = err
			return
		}
		d.Entries = append(d.Entries, e)
		if !d.NoOffsets {
			d.Offsets = append(d.Offsets, d.End)
		}
		d.End += int64(nl + 1)
		part = part[nl+1:]
	}
}

// AppendLines appends the index lines of es to dst.
func AppendLines(dst []byte, es []eventline.Entry) []byte {
	for i := range es {
		dst = eventline.AppendIndex(dst, &es[i])
	}
	return dst
}

// ChunkEntries returns the entries of the records in chunk n, a contiguous
// run of es (which is in log order).
func ChunkEntries(es []eventline.Entry, n uint32) []eventline.Entry {
	lo := sort.Search(len(es), func(i int) bool { return es[i].Loc.Chunk >= n })
	hi := sort.Search(len(es), func(i int) bool { return es[i].Loc.Chunk > n })
	return es[lo:hi]
}

var newline = []byte{'\n'}
