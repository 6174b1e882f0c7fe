package chunk

import (
	"errors"
	"io"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// ReadRun bounds one read of a ParentWalk: a larger window saves little
// (reads of the page cache are cheap) and costs fresh memory.
const ReadRun = 128 << 10

// ErrNoParentAt is ParentWalk.Up's report that a line names no parent
// location (a line of format 1): the path cannot be followed from it.
var ErrNoParentAt = errors.New("the line names no parent location")

// ParentWalk reads the lines of a path from an event towards the root,
// each at the parent location (eventline.Payload.ParentAt) of the one
// before, checking each: its CRC-32C (Read), that it holds the event the
// line before names as its parent, and that the parent location is
// before the line. It reads and never writes. It is not safe for
// concurrent use.
type ParentWalk struct {
	r     *Reader
	loc   eventline.Location // of the next line
	want  uuid.UUID          // the event it must hold
	child eventline.Location // of the line that named loc; zero for the first
	// A read takes the record and up to behind bytes before it, where its
	// ancestors are when the path runs back through adjacent records (a
	// branch appended in one go). behind doubles while it does and drops
	// to zero at a jump, so a long run costs few reads and the bytes read
	// off the path stay within about those on it.
	behind int64
	// ahead decodes the blocks of a sealed chunk before the window while
	// the caller parses the window's lines (a walk runs towards the
	// chunk's start); nil when none is under way.
	ahead *readAhead
	spare []byte // the buffer the next read-ahead fills
	taken int    // windows the read-ahead served, for tests
}

// readAhead is a read of a sealed chunk's span in a goroutine of its own:
// its result is read only after done is closed.
type readAhead struct {
	done  chan struct{}
	chunk uint32
	off   int64
	buf   []byte
	err   error
}

// NewParentWalk starts a walk of the chunks in dir from head, the newest
// event of the path, whose entry locates its line. blockSize is the
// plain bytes per block of a sealed chunk, whose blocks a read widens to.
func NewParentWalk(fsys vfs.FS, dir string, head eventline.Entry, blockSize int64) *ParentWalk {
	r := NewReader(fsys, dir)
	r.Reserve(ReadRun + 2*blockSize)
	return &ParentWalk{r: r, loc: head.Loc, want: head.ID}
}

// Next reads the next line of the path: its header, its payload (whose
// record aliases the walk's buffer until the next call) and location.
// Damage is a *corrupt.Error (a line that does not hold the event
// expected names the line that named it, or HEAD's line for the first),
// or what Reader.Read reports.
func (w *ParentWalk) Next() (eventline.Header, eventline.Payload, eventline.Location, error) {
	r, loc := w.r, w.loc
	if !r.InWindow(loc) && !w.takeAhead(loc) {
		start, end := r.Blocks(loc.Chunk, max(loc.Offset-min(w.behind, ReadRun-int64(loc.Length)), 0), loc.End())
		if err := r.Fill(loc.Chunk, start, end-start); err != nil {
			return eventline.Header{}, eventline.Payload{}, loc, err
		}
		w.readAhead()
	}
	hd, pl, err := r.Read(loc)
	if err != nil {
		return eventline.Header{}, eventline.Payload{}, loc, err
	}
	if hd.ID != w.want {
		if w.child.Length == 0 {
			return eventline.Header{}, eventline.Payload{}, loc, corrupt.Errorf(r.Path(loc.Chunk), loc.Offset, "record %s is not HEAD's event %s", hd.ID, w.want)
		}
		return eventline.Header{}, eventline.Payload{}, loc, corrupt.Errorf(r.Path(w.child.Chunk), w.child.Offset, "the parent location names event %s, not the parent %s", hd.ID, w.want)
	}
	return hd, pl, loc, nil
}

// Up moves the walk to the parent of the line Next returned (hd, pl):
// ErrNoParentAt if the line names no parent location, a *corrupt.Error if
// it names one that is not before the line.
func (w *ParentWalk) Up(hd eventline.Header, pl eventline.Payload) error {
	up, loc := pl.ParentAt, w.loc
	if up.Length == 0 {
		return ErrNoParentAt
	}
	if up.Chunk > loc.Chunk || (up.Chunk == loc.Chunk && up.End() > loc.Offset) {
		return corrupt.Errorf(w.r.Path(loc.Chunk), loc.Offset, "event %s names a parent location at chunk %d offset %d, not before it", hd.ID, up.Chunk, up.Offset)
	}
	if up.Chunk == loc.Chunk && up.End() == loc.Offset {
		w.behind = min(max(2*w.behind, 4<<10), ReadRun)
	} else {
		w.behind = 0
	}
	w.loc, w.want, w.child = up, hd.ParentID, loc
	return nil
}

// takeAhead waits for the read-ahead under way, if any, and makes its
// span the window when it holds all of loc's bytes (then starts the next
// one). It reports whether it did.
func (w *ParentWalk) takeAhead(loc eventline.Location) bool {
	a := w.ahead
	if a == nil {
		return false
	}
	<-a.done
	w.ahead = nil
	if a.err != nil || a.chunk != loc.Chunk || loc.Offset < a.off || loc.End() > a.off+int64(len(a.buf)) {
		w.spare = a.buf
		return false
	}
	w.spare = w.r.SetWindow(a.chunk, a.off, a.buf)
	w.taken++
	w.readAhead()
	return true
}

// readAhead starts reading, in a goroutine, up to ReadRun bytes of the
// blocks before the window when its chunk is sealed: decompressing them
// is what a read of a sealed chunk costs. The walk waits for it before
// its next read (takeAhead, Close), so the chunk is never read twice at
// once by the walk, and the buffer is the walk's spare one, which no
// line the caller holds aliases.
func (w *ParentWalk) readAhead() {
	chunk, off := w.r.winChunk, w.r.winOff
	f, err := w.r.File(chunk)
	z, sealed := f.(*zchunk.Reader)
	if err != nil || !sealed || off == 0 {
		return
	}
	start, end := w.r.Blocks(chunk, max(off-ReadRun, 0), off)
	if end <= start {
		return
	}
	buf := w.spare
	if int64(cap(buf)) < end-start {
		buf = make([]byte, end-start, max(end-start, int64(cap(w.r.win))))
	}
	a := &readAhead{done: make(chan struct{}), chunk: chunk, off: start, buf: buf[:end-start]}
	w.spare, w.ahead = nil, a
	go func() {
		defer close(a.done)
		n, err := z.ReadAt(a.buf, a.off)
		if err != nil && !errors.Is(err, io.EOF) {
			a.err = err
		}
		a.buf = a.buf[:n]
	}()
}

// Close waits for a read-ahead under way and closes the files the walk
// opened.
func (w *ParentWalk) Close() {
	if a := w.ahead; a != nil {
		<-a.done
		w.ahead = nil
	}
	w.r.Close()
}
