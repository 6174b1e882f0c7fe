package sessionstore

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"

	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// listChunks returns the chunk numbers present in dir, plain or sealed,
// ascending and without repeats (chunk.List); a refusal of the file
// system is a *CorruptionError.
func listChunks(fsys vfs.FS, dir string) ([]uint32, error) {
	out, err := chunk.List(fsys, dir)
	return out, refusal(err)
}

// chunkForm says which files hold a chunk.
type chunkForm struct{ plain, sealed bool }

// chunkForms maps each chunk number in dir to the files that hold it, and
// lists the temporary files of interrupted sealings (chunk.Forms); a
// refusal of the file system is a *CorruptionError.
func chunkForms(fsys vfs.FS, dir string) (map[uint32]chunkForm, []string, error) {
	forms, temps, err := chunk.Forms(fsys, dir)
	if err != nil {
		return nil, nil, refusal(err)
	}
	out := make(map[uint32]chunkForm, len(forms))
	for n, f := range forms {
		out[n] = chunkForm{plain: f.Plain, sealed: f.Sealed}
	}
	return out, temps, nil
}

// chunkSource is a chunk opened for reading by logical offset: a plain file
// or a compressed sealed one.
type chunkSource = chunk.Source

// openChunk opens chunk n of dir for reading, plain if that file exists,
// else sealed (chunk.Open). It returns the source, its logical size and
// the path of the file opened. A sealed file that is not in its format is
// a *CorruptionError.
func openChunk(fsys vfs.FS, dir string, n uint32) (chunkSource, int64, string, error) {
	f, size, path, err := chunk.Open(fsys, dir, n)
	return f, size, path, sealedErr(err)
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

	num      uint32
	active   activeChunk // nil until the first append of a new session
	unsynced bool        // the active chunk holds bytes written through the journal and not synced since (commit.go)
	fresh    bool        // the active chunk was created by this writer: every record in it was appended through it
	size     int64       // the end of the active chunk's data, with the queued bytes
	next     uint32      // number of the next chunk to create
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
	if w.active != nil && w.unsynced {
		// A checkpoint: the full chunk's bytes the journal holds are
		// made durable in it before it is closed (and sealed).
		if err := w.active.sync(); err != nil {
			return fmt.Errorf("sessionstore: sync full chunk %s: %w: %w", w.path(w.num), err, errUnsynced)
		}
		w.unsynced = false
	}
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

// close closes the active chunk, first syncing the bytes written into it
// through the journal (a checkpoint: whoever opens the chunk next, this
// session's next writer or another process, finds them durable there).
func (w *chunkWriter) close() error {
	if w.active == nil {
		return nil
	}
	var err error
	if w.unsynced {
		if err = w.active.sync(); err == nil {
			w.unsynced = false
		}
	}
	err = errors.Join(err, w.active.close())
	w.active = nil
	return err
}

// zeroTail returns how many zero bytes end b.
func zeroTail(b []byte) int { return chunk.ZeroTail(b) }

// chunkReader reads records by location (chunk.Reader), its damage as
// *CorruptionErrors.
type chunkReader struct{ r *chunk.Reader }

func newChunkReader(fsys vfs.FS, dir string) *chunkReader {
	return &chunkReader{chunk.NewReader(fsys, dir)}
}

// reserve makes room for reads of up to n bytes at once.
func (r *chunkReader) reserve(n int64) { r.r.Reserve(n) }

// fill loads n bytes of chunk from off into the window, or as many as the
// chunk holds.
func (r *chunkReader) fill(chunk uint32, off int64, n int64) error {
	return sealedErr(r.r.Fill(chunk, off, n))
}

// window is what the last fill loaded.
func (r *chunkReader) window() []byte { return r.r.Window() }

// inWindow reports whether the window holds all of loc's bytes.
func (r *chunkReader) inWindow(loc location) bool { return r.r.InWindow(loc) }

// read returns the header and payload of the event at loc; an inline
// record aliases the window, valid until the next fill. Any mismatch
// between the location and what the chunk holds is a *CorruptionError.
func (r *chunkReader) read(loc location) (header, payload, error) {
	h, p, err := r.r.Read(loc)
	return h, p, sealedErr(err)
}

// blocks widens [start, end) of chunk to whole compressed blocks when the
// chunk is sealed (chunk.Reader.Blocks).
func (r *chunkReader) blocks(chunk uint32, start, end int64) (int64, int64) {
	return r.r.Blocks(chunk, start, end)
}

// file returns the source of chunk, opened at its first use and kept
// until close.
func (r *chunkReader) file(chunk uint32) (chunkSource, error) {
	f, err := r.r.File(chunk)
	return f, sealedErr(err)
}

// path is the name of chunk n's plain file, for errors.
func (r *chunkReader) path(n uint32) string { return r.r.Path(n) }

func (r *chunkReader) close() { r.r.Close() }

// recordWalk is what walkRecords found after the last valid record.
type recordWalk = chunk.Walked

// walkRecords decodes the framed records of a chunk from off to size
// (chunk.Walk): rec is called for each valid one, gap for an invalid
// stretch followed by a valid record. An error from rec or gap stops the
// walk and is returned; so is a read error, a compressed file's damage as
// a *CorruptionError.
func walkRecords(f io.ReaderAt, n uint32, off, size int64, newest bool, rec func(h header, p payload, loc location) error, gap func(bad, next int64, err error) error) (recordWalk, error) {
	w, err := chunk.Walk(f, n, off, size, newest, rec, gap)
	return w, sealedErr(err)
}
