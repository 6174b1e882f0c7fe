package sessionstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// listChunks returns the chunk numbers present in dir, plain or sealed,
// ascending and without repeats.
func listChunks(fsys vfs.FS, dir string) ([]uint32, error) {
	forms, _, err := chunkForms(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(forms))
	for n := range forms {
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

// chunkForm says which files hold a chunk.
type chunkForm struct{ plain, sealed bool }

// chunkForms maps each chunk number in dir to the files that hold it, and
// lists the temporary files of interrupted sealings.
func chunkForms(fsys vfs.FS, dir string) (map[uint32]chunkForm, []string, error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, refusal(err)
	}
	out := map[uint32]chunkForm{}
	var temps []string
	for _, name := range names {
		if layout.ParseSealTemp(name) {
			temps = append(temps, name)
			continue
		}
		if n, sealed, ok := layout.ParseChunkName(name); ok {
			f := out[n]
			if sealed {
				f.sealed = true
			} else {
				f.plain = true
			}
			out[n] = f
		}
	}
	return out, temps, nil
}

// chunkSource is a chunk opened for reading by logical offset: a plain file
// or a compressed sealed one.
type chunkSource interface {
	io.ReaderAt
	io.Closer
}

// openChunk opens chunk n of dir for reading, plain if that file exists,
// else sealed. It returns the source, its logical size and the path of the
// file opened. A sealed file that is not in its format is a
// *CorruptionError.
func openChunk(fsys vfs.FS, dir string, n uint32) (chunkSource, int64, string, error) {
	path := filepath.Join(dir, chunkName(n))
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err == nil {
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, path, err
		}
		return f, info.Size(), path, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, 0, path, refusal(err)
	}
	zr, err := zchunk.Open(fsys, path+sealedExt)
	if err != nil {
		return nil, 0, path + sealedExt, sealedErr(err)
	}
	return zr, zr.Size(), path + sealedExt, nil
}

// sealedErr turns a compressed chunk's format error, the damage a package
// below the root found in it (damage), or the seam's refusal of its file
// (refusal), into a *CorruptionError and returns other errors as they
// are.
func sealedErr(err error) error {
	var fe *zchunk.FormatError
	if errors.As(err, &fe) {
		return &CorruptionError{Path: fe.Path, Offset: fe.Offset, Err: fe.Err}
	}
	return damage(err)
}

// chunkWriter appends framed records to the active (newest) chunk of a
// session and starts a new chunk when the active one would exceed maxSize.
//
// Protocol of one append: the record is queued in memory (enqueue), and
// the session's group commit writes the queue with one WriteAt at the end
// of the data, then syncs the file (fdatasync), sharing both between the
// records queued since the last sync (see commit.go). On a write error the
// file is cut back to the end of the data so no partial record stays
// behind. A new chunk file is created and its directory synced before the
// first record is written to it, so a durable record never sits in a file
// whose name a crash could lose.
//
// Free space: the active chunk is preallocated by writing zeros past the
// end of its data, in steps (grow), so that most fdatasyncs write data
// only and need no journal commit for a new file size (1.3-1.5x more
// durable appends per second in this package's benchmarks on ext4), but
// not for a commit of 32 KiB or more, which extends the file by itself
// (localChunk.grow). Records hold no zero byte, so zeros running to the end of a plain chunk
// are free space, not a torn write; the free space is cut off when the
// chunk is closed or fills up. After a power loss, part of an unsynced
// write may be missing in the middle of the free space (sectors reach the
// disk in any order): an invalid line holding zeros that run from its
// start or a 512-byte boundary to a 512-byte boundary is such a hole, and
// it and everything after it are the torn tail (walkRecords, hole).
type chunkWriter struct {
	files    durableFiles // where the chunks go (durable.go)
	dir      string       // the chunks directory, for messages
	maxSize  int64
	compress bool         // seal full chunks into compressed files
	log      *slog.Logger // for sealing failures, which lose nothing
	// embed returns the index entries of chunk n's records, whose lines
	// its sealed file embeds; resealed is called after a sealing, so that
	// index.jsonl keeps only the lines of plain chunks.
	embed    func(n uint32) []entry
	resealed func()
	unsealed []uint32 // full chunks still plain: queued for the sealer, or left by a failed sealing (retried at the next rotation)

	// Background sealing: rotate queues the full chunk and a goroutine
	// seals it (sealLoop) while appends go on. sealMu is the session's
	// mutex, which guards the fields below as it does the rest of the
	// writer.
	sealMu      *sync.Mutex
	sealRunning bool          // a sealLoop goroutine runs
	sealDone    chan struct{} // closed when it ends

	num    uint32
	active activeChunk // nil until the first append of a new session
	fresh  bool        // the active chunk was created by this writer: every record in it was appended through it
	size   int64       // the end of the active chunk's data, with the queued bytes
	next   uint32      // number of the next chunk to create
	// Records are queued in memory and a commit leader writes the queue
	// with one write (commit.go): queue holds them, from file offset
	// size-len(queue); spare is the buffer a leader handed back, reused
	// for the next queue.
	queue, spare []byte
}

func (w *chunkWriter) path(n uint32) string { return filepath.Join(w.dir, chunkName(n)) }

// openActive opens chunk num, whose valid data ends at size (free space
// may follow), for appending.
func (w *chunkWriter) openActive(num uint32, size int64) error {
	c, err := w.files.openChunk(num, size)
	if err != nil {
		return err
	}
	w.num, w.active, w.size, w.next, w.fresh = num, c, size, num+1, false
	w.queue = w.queue[:0]
	return nil
}

// create starts chunk num, new and empty, its existence durable.
func (w *chunkWriter) create(num uint32) error {
	c, err := w.files.createChunk(num)
	if err != nil {
		return err
	}
	w.num, w.active, w.size, w.next, w.fresh = num, c, 0, num+1, true
	w.queue = w.queue[:0]
	return nil
}

// full reports whether a line of n bytes needs a new chunk: there is no
// active chunk yet, or the line would take a non-empty one past maxSize.
func (w *chunkWriter) full(n int) bool {
	return w.active == nil || (w.size > 0 && w.size+int64(n) > w.maxSize)
}

// rotate closes the active chunk, queues it for sealing (when
// compressing: see startSealing) and starts the next one. The caller has
// made every record of the active chunk durable.
func (w *chunkWriter) rotate() error {
	next := w.next
	if w.active != nil {
		w.trim()
		// The full chunk takes no more records, even if starting the next
		// one fails: sealing may remove its plain file, so a record written
		// there would be lost. The next append retries the start.
		err := w.active.close()
		w.active = nil
		if w.compress {
			w.unsealed = append(w.unsealed, w.num)
			w.startSealing()
		}
		if err != nil {
			return fmt.Errorf("sessionstore: close full chunk %s: %w", w.path(w.num), err)
		}
	}
	if err := w.create(next); err != nil {
		return fmt.Errorf("sessionstore: start chunk %s: %w", w.path(next), err)
	}
	return nil
}

// writeAt writes a commit group's bytes at offset off of the active
// chunk, the end of its data (durableFiles).
func (w *chunkWriter) writeAt(data []byte, off int64) error {
	return w.active.writeAt(data, off)
}

// trim cuts the free space off the active chunk, so that a chunk no
// longer written takes only its data, unless records are queued.
func (w *chunkWriter) trim() {
	if w.active == nil || len(w.queue) > 0 {
		return
	}
	w.active.trim(w.size)
}

// nextAt is where enqueue would put the next line (its Length unset).
func (w *chunkWriter) nextAt() location { return location{Chunk: w.num, Offset: w.size} }

// enqueue appends line to the queue of the active chunk, to be written
// by takeQueue's caller, and returns its location.
func (w *chunkWriter) enqueue(line []byte) location {
	loc := location{Chunk: w.num, Offset: w.size, Length: uint32(len(line))}
	w.queue = append(w.queue, line...)
	w.size += int64(len(line))
	return loc
}

// takeQueue hands the queued bytes and their file offset to the caller,
// who writes them (writeAt) and then returns the buffer with giveBack.
// The queue starts empty again.
func (w *chunkWriter) takeQueue() ([]byte, int64) {
	q, off := w.queue, w.size-int64(len(w.queue))
	w.queue, w.spare = w.spare[:0], nil
	return q, off
}

// sync makes the bytes written to f, the active chunk, durable.
func (w *chunkWriter) sync(f activeChunk) error {
	return f.sync()
}

// giveBack returns a buffer takeQueue handed out, for reuse.
func (w *chunkWriter) giveBack(q []byte) {
	if w.spare == nil && cap(q) <= maxSpareQueue {
		w.spare = q
	}
}

// maxSpareQueue bounds the queue buffer kept for reuse.
const maxSpareQueue = 1 << 20

// startSealing starts a background goroutine that seals the chunks
// queued in unsealed, unless one runs. The caller holds the session's
// mutex.
func (w *chunkWriter) startSealing() {
	if !w.sealRunning {
		w.sealRunning, w.sealDone = true, make(chan struct{})
		go w.sealLoop()
	}
}

// sealLoop seals the queued chunks, outside the session's mutex, until
// none is left but those whose sealing failed in this run (the next
// rotation retries them).
func (w *chunkWriter) sealLoop() {
	w.sealMu.Lock()
	defer w.sealMu.Unlock()
	var failed []uint32
	for {
		var todo []uint32
		for _, n := range w.unsealed {
			if !slices.Contains(failed, n) {
				todo = append(todo, n)
			}
		}
		if len(todo) == 0 {
			w.sealRunning = false
			close(w.sealDone)
			return
		}
		failed = append(failed, w.sealChunks(todo)...)
	}
}

// sealChunks seals chunks todo, which are in unsealed, and returns those
// that stay plain. It releases the session's mutex while it works. Then it
// drops the sealed chunks from unsealed, and their lines from index.jsonl.
func (w *chunkWriter) sealChunks(todo []uint32) (failed []uint32) {
	// The entries of a full chunk are published and never change; growing
	// the session's entries copies them, so the slices stay valid.
	embeds := make([][]entry, len(todo))
	for i, n := range todo {
		embeds[i] = w.embed(n)
	}
	w.sealMu.Unlock()
	var sealed []uint32
	for i, n := range todo {
		if w.seal(n, embeds[i]) {
			sealed = append(sealed, n)
		} else {
			failed = append(failed, n)
		}
	}
	w.sealMu.Lock()
	w.unsealed = slices.DeleteFunc(w.unsealed, func(n uint32) bool { return slices.Contains(sealed, n) })
	if len(sealed) > 0 && w.resealed != nil {
		w.resealed()
	}
	return failed
}

// plain reports whether chunk n's index lines belong in index.jsonl: it
// is the active chunk, or a full one not sealed (yet).
func (w *chunkWriter) plain(n uint32) bool {
	return (w.active != nil && n == w.num) || slices.Contains(w.unsealed, n)
}

// awaitSealing waits until no chunk is being sealed in the background.
// The caller holds the session's mutex, which the wait releases.
func (w *chunkWriter) awaitSealing() {
	for w.sealRunning {
		done := w.sealDone
		w.sealMu.Unlock()
		<-done
		w.sealMu.Lock()
	}
}

// seal seals full chunk n, whose records' entries are es (durableFiles:
// sealChunk). Sealing saves space and nothing depends on it, so a failure
// is logged, the plain chunk stays and the next rotation retries. It
// reports whether the sealed file is in place.
func (w *chunkWriter) seal(n uint32, es []entry) bool {
	if err := w.files.sealChunk(n, es); err != nil {
		w.log.Warn("sessionstore: chunk stays uncompressed", "path", w.path(n), "err", err)
		return false
	}
	return true
}

func (w *chunkWriter) close() error {
	if w.active == nil {
		return nil
	}
	err := w.active.close()
	w.active = nil
	return err
}

// zeroTail returns how many zero bytes end b.
func zeroTail(b []byte) int {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return len(b) - n
}

// chunkReader reads records by location, keeping the chunk files it opened
// until close. It reads through a window: fill loads a span of a chunk (a
// run of adjacent records) with one read, and read serves records inside
// the window without further I/O.
type chunkReader struct {
	fsys  vfs.FS
	dir   string
	files map[uint32]chunkSource

	winChunk uint32
	winOff   int64
	win      []byte
}

func newChunkReader(fsys vfs.FS, dir string) *chunkReader {
	return &chunkReader{fsys: fsys, dir: dir, files: map[uint32]chunkSource{}}
}

func (r *chunkReader) file(chunk uint32) (chunkSource, error) {
	if f, ok := r.files[chunk]; ok {
		return f, nil
	}
	f, _, path, err := openChunk(r.fsys, r.dir, chunk)
	if errors.Is(err, os.ErrNotExist) {
		return nil, corruptf(path, 0, "chunk file is missing")
	}
	if err != nil {
		return nil, err
	}
	r.files[chunk] = f
	return f, nil
}

// reserve makes room for reads of up to n bytes at once.
func (r *chunkReader) reserve(n int64) {
	if int64(cap(r.win)) < n {
		r.win = make([]byte, 0, n)
	}
}

// fill loads n bytes of chunk from off into the window, or as many as the
// chunk holds.
func (r *chunkReader) fill(chunk uint32, off int64, n int64) error {
	f, err := r.file(chunk)
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
		return sealedErr(err)
	}
	r.winChunk, r.winOff, r.win = chunk, off, r.win[:got]
	return nil
}

// read returns the header and payload of the event at loc; an inline
// record aliases the window, valid until the next fill. Any mismatch between the
// location and what the chunk holds is a *CorruptionError.
func (r *chunkReader) read(loc location) (header, payload, error) {
	inWindow := func() bool {
		return loc.Chunk == r.winChunk && loc.Offset >= r.winOff && loc.End() <= r.winOff+int64(len(r.win))
	}
	if loc.Length > eventline.MaxChunkLine+1 {
		// No chunk line is that long: a damaged location is not read.
		return header{}, payload{}, corruptf(r.path(loc.Chunk), loc.Offset, "record of %d bytes is longer than a chunk line can be", loc.Length)
	}
	if !inWindow() {
		if err := r.fill(loc.Chunk, loc.Offset, int64(loc.Length)); err != nil {
			return header{}, payload{}, err
		}
	}
	if !inWindow() {
		return header{}, payload{}, corruptf(r.path(loc.Chunk), loc.Offset, "record of %d bytes runs past the end of the chunk", loc.Length)
	}
	buf := r.win[loc.Offset-r.winOff : loc.End()-r.winOff]
	if buf[len(buf)-1] != '\n' {
		return header{}, payload{}, corruptf(r.path(loc.Chunk), loc.Offset, "record does not end where the index says")
	}
	h, p, err := eventline.ReadEvent(buf[:len(buf)-1])
	if err != nil {
		return header{}, payload{}, corruptf(r.path(loc.Chunk), loc.Offset, "%w", err)
	}
	return h, p, nil
}

// damagedAt reports whether the bytes at loc do not start one whole
// framed line with a valid checksum: cut short, or the line that starts
// there (whatever length loc gives it) failing its frame or checksum, as a
// torn write or a damaged disk leaves them. A whole line with a valid
// checksum was written so: if it is invalid, or not the line loc
// describes, that is corruption, not damage.
func (r *chunkReader) damagedAt(loc location) bool {
	n := min(max(int64(loc.Length), 4<<10), eventline.MaxChunkLine+1)
	for {
		if err := r.fill(loc.Chunk, loc.Offset, n); err != nil {
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

// blocks widens [start, end) of chunk to whole compressed blocks when the
// chunk is sealed, so that reading it decompresses each block once,
// straight into the window, and the next read, ending at start, shares no
// block with this one.
func (r *chunkReader) blocks(chunk uint32, start, end int64) (int64, int64) {
	f, err := r.file(chunk)
	if z, ok := f.(*zchunk.Reader); ok && err == nil && end > start {
		start, _ = z.Block(start)
		_, end = z.Block(end - 1)
	}
	return start, end
}

// path is the name of chunk n's plain file, for errors.
func (r *chunkReader) path(n uint32) string { return filepath.Join(r.dir, chunkName(n)) }

func (r *chunkReader) close() {
	for _, f := range r.files {
		f.Close()
	}
	clear(r.files)
	r.win = nil
}

// recordWalk is what walkRecords found after the last valid record.
type recordWalk struct {
	end    int64 // just past the last valid record
	bad    int64 // offset of the invalid tail (no valid record after it), or -1
	badErr error // why the tail's first line failed
	size   int64 // where the scan stopped: the end of the bytes read
}

// walkRecords decodes the framed records of a chunk from off to size,
// calling rec for each valid one with its header, payload and location.
// Zero bytes running to the end are free space (see chunkWriter). An
// invalid stretch followed by a valid record is passed to gap (its offset,
// the valid record's offset, why its first line failed) before that
// record, except that in a chunk that may end in a torn write (newest, the
// active plain chunk) a hole (see hole) ends the walk: it and all after it
// are the invalid tail. An error from rec or gap stops the walk and is
// returned; so is a read error, a compressed file's damage as a
// *CorruptionError.
func walkRecords(f io.ReaderAt, n uint32, off, size int64, newest bool, rec func(h header, p payload, loc location) error, gap func(bad, next int64, err error) error) (recordWalk, error) {
	w := recordWalk{end: off, bad: -1}
	sc := jsonl.NewScannerSize(io.NewSectionReader(f, off, size-off), off, size-off, eventline.MaxChunkLine)
	sc.TrackHoles(sectorSize)
	for sc.Next() {
		line := sc.Line()
		err := sc.Malformed() // too long, or holding zeros: no record
		var hdr header
		var pl payload
		if err == nil {
			hdr, pl, err = eventline.DecodeEvent(line)
		}
		if err != nil {
			if w.bad < 0 {
				w.bad, w.badErr = sc.Offset(), err
			}
			if newest && sc.Hole() {
				w.bad, w.badErr = sc.Offset(), errHole
				w.size = size
				return w, nil
			}
			continue
		}
		if w.bad >= 0 {
			if err := gap(w.bad, sc.Offset(), w.badErr); err != nil {
				return w, err
			}
			w.bad, w.badErr = -1, nil
		}
		if err := rec(hdr, pl, location{Chunk: n, Offset: sc.Offset(), Length: uint32(len(line) + 1)}); err != nil {
			return w, err
		}
		w.end = sc.End()
	}
	w.size = sc.End()
	if err := sc.Err(); err != nil {
		return w, sealedErr(err)
	}
	if w.bad < 0 && !sc.TailZero() {
		w.bad, w.badErr = sc.Offset(), io.ErrUnexpectedEOF
	}
	return w, nil
}

// errHole is why a torn tail starts at a hole.
var errHole = errors.New("zero bytes of a write that had not reached the disk")

// sectorSize is the unit in which a disk persists a write, at the
// smallest.
const sectorSize = 512

// A hole is a run of zero bytes in a line that starts at the line's
// start or at a sector boundary and ends at a sector boundary: a sector
// of an unsynced write that did not reach the disk, in the free space of
// a preallocated chunk. Records hold no zero byte. walkRecords has the
// line scanner find them (jsonl.Scanner.TrackHoles), without keeping the
// zeros; hole asks it of one line.

// hole reports whether line, at offset off of its chunk, holds a hole.
func hole(line []byte, off int64) bool {
	sc := jsonl.NewScanner(io.MultiReader(bytes.NewReader(line), bytes.NewReader(newline)), off, len(line))
	sc.TrackHoles(sectorSize)
	return sc.Next() && sc.Hole()
}

var newline = []byte{'\n'}
