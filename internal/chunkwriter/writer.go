package chunkwriter

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/layout"
)

// Chunk is the active chunk appends go to (internal/seam's Chunk, for
// local files).
type Chunk interface {
	// WriteAt writes a commit group's bytes at off, the end of the data,
	// without a sync. On an error the data ends at off again, or the
	// error wraps durable.ErrUnsynced.
	WriteAt(data []byte, off int64) error
	// Sync makes every byte written durable.
	Sync() error
	// Trim ends the chunk's storage at size, the end of its data, when no
	// more appends come; nothing depends on it.
	Trim(size int64)
	Close() error
}

// Files is where a session's chunks go.
type Files interface {
	// CreateChunk creates chunk n, empty, its existence durable.
	CreateChunk(n uint32) (Chunk, error)
	// OpenChunk opens chunk n, whose data ends at size, for appending.
	OpenChunk(n uint32, size int64) (Chunk, error)
	// SealChunk seals full chunk n, whose records' entries are es, their
	// index lines embedded: durable under the sealed name before the
	// plain chunk goes.
	SealChunk(n uint32, es []eventline.Entry) error
}

// Config is what a Writer is built from.
type Config struct {
	Files    Files
	Dir      string // the chunks directory, for messages
	MaxSize  int64  // a chunk takes no line that would take it past MaxSize, unless it is empty
	Compress bool   // seal full chunks into compressed files
	Log      *slog.Logger
	// Mu is the session's mutex, held by every caller of the Writer; the
	// sealing goroutine takes it too.
	Mu *sync.Mutex
	// Embed returns the index entries of chunk n's records, whose lines
	// its sealed file embeds; Resealed (may be nil) is called after a
	// sealing, so that the caller's index.jsonl keeps only the lines of
	// plain chunks (Plain). Both are called with Mu held. The sealer
	// reads the entries Embed returns after releasing Mu: they must not
	// change while it does (the caller returns a copy of any it may
	// change).
	Embed    func(n uint32) []eventline.Entry
	Resealed func()
	// SealIdle is how long the session goes without an append before a
	// full chunk is sealed (see sealWait); 0 selects DefaultSealIdle, a
	// negative value seals at once.
	SealIdle time.Duration
}

// Sealing waits for a pause in the appends: compressing and writing a
// full 8 MiB chunk takes 100-200 ms of both cores and four syncs of the
// disk, which appends running beside it wait for (64 KiB tool results
// at half their rate, p99 5x). A burst of appends (a harness's tool
// results between two model calls) is written at the disk's pace, and
// its full chunks are sealed in the pause after it. Under a load without
// pauses sealing starts anyway once SealBacklog full chunks wait, which
// bounds the plain bytes (SealBacklog chunks) and the work put off.
const (
	DefaultSealIdle = 50 * time.Millisecond
	SealBacklog     = 4
)

// Writer appends framed records to the active (newest) chunk of a
// session and starts a new chunk when the active one would exceed
// MaxSize: see the package documentation. Its zero value is not usable;
// New returns one with no chunk open.
type Writer struct {
	files    Files
	dir      string
	maxSize  int64
	compress bool
	log      *slog.Logger // for sealing failures, which lose nothing
	embed    func(n uint32) []eventline.Entry
	resealed func()
	unsealed []uint32 // full chunks still plain: queued for the sealer, or left by a failed sealing (retried at the next rotation)

	// Background sealing: Rotate queues the full chunk and a goroutine
	// seals it (sealLoop) while appends go on. sealMu is the session's
	// mutex, which guards the fields below as it does the rest of the
	// writer.
	sealMu      *sync.Mutex
	sealRunning bool          // a sealLoop goroutine runs
	sealDone    chan struct{} // closed when it ends
	sealIdle    time.Duration // Config.SealIdle, defaulted
	lastWrite   time.Time     // of the newest Enqueue: sealing waits for a pause
	hurry       chan struct{} // closed by AwaitSealing: seal without waiting for a pause

	num      uint32
	active   Chunk // nil until the first append of a new session
	unsynced bool  // the active chunk holds bytes written through the journal and not synced since
	fresh    bool  // the active chunk was created by this writer: every record in it was appended through it
	size     int64 // the end of the active chunk's data, with the queued bytes
	next     uint32
	// Records are queued in memory and a commit leader writes the queue
	// with one write: queue holds them, from file offset
	// size-len(queue); spare is the buffer a leader handed back, reused
	// for the next queue.
	queue, spare []byte
}

// New returns the writer c describes, with no chunk open: the first
// append starts chunk 0 unless OpenActive or SetNext says otherwise.
func New(c Config) Writer {
	idle := c.SealIdle
	if idle == 0 {
		idle = DefaultSealIdle
	}
	return Writer{files: c.Files, dir: c.Dir, maxSize: c.MaxSize, compress: c.Compress, log: c.Log,
		sealMu: c.Mu, embed: c.Embed, resealed: c.Resealed, sealIdle: idle}
}

func (w *Writer) path(n uint32) string { return filepath.Join(w.dir, layout.ChunkName(n)) }

// OpenActive opens chunk num, whose valid data ends at size (free space
// may follow), for appending.
func (w *Writer) OpenActive(num uint32, size int64) error {
	c, err := w.files.OpenChunk(num, size)
	if err != nil {
		return err
	}
	w.num, w.active, w.size, w.next, w.fresh = num, c, size, num+1, false
	w.queue = w.queue[:0]
	return nil
}

// SetNext makes n the number of the next chunk to start, with no chunk
// open: the newest chunk is sealed, and the next append starts chunk n.
func (w *Writer) SetNext(n uint32) { w.next = n }

// Compressing reports whether full chunks are sealed.
func (w *Writer) Compressing() bool { return w.compress }

// AddUnsealed records that full chunk n is still plain: the next
// rotation seals it.
func (w *Writer) AddUnsealed(n uint32) { w.unsealed = append(w.unsealed, n) }

// create starts chunk num, new and empty, its existence durable.
func (w *Writer) create(num uint32) error {
	c, err := w.files.CreateChunk(num)
	if err != nil {
		return err
	}
	w.num, w.active, w.size, w.next, w.fresh = num, c, 0, num+1, true
	w.queue = w.queue[:0]
	return nil
}

// Active returns the active chunk, nil when none is open.
func (w *Writer) Active() Chunk { return w.active }

// Num is the number of the active chunk (the last one open).
func (w *Writer) Num() uint32 { return w.num }

// Fresh reports whether the active chunk was created by this writer
// (Rotate), so that every record in it was appended through it, not
// opened with records (OpenActive).
func (w *Writer) Fresh() bool { return w.fresh }

// Size is the end of the active chunk's data, with the queued bytes.
func (w *Writer) Size() int64 { return w.size }

// MaxSize is Config.MaxSize.
func (w *Writer) MaxSize() int64 { return w.maxSize }

// Queued reports whether records are queued, not yet taken (TakeQueue).
func (w *Writer) Queued() bool { return len(w.queue) > 0 }

// Full reports whether a line of n bytes needs a new chunk: there is no
// active chunk yet, or the line would take a non-empty one past MaxSize.
func (w *Writer) Full(n int) bool {
	return w.active == nil || (w.size > 0 && w.size+int64(n) > w.maxSize)
}

// Rotate closes the active chunk, queues it for sealing (when
// compressing: see startSealing) and starts the next one. The caller has
// made every record of the active chunk durable.
func (w *Writer) Rotate() error {
	next := w.next
	if w.active != nil && w.unsynced {
		// A checkpoint: the full chunk's bytes the journal holds are
		// made durable in it before it is closed (and sealed).
		if err := w.active.Sync(); err != nil {
			return fmt.Errorf("sessionstore: sync full chunk %s: %w: %w", w.path(w.num), err, durable.ErrUnsynced)
		}
		w.unsynced = false
	}
	if w.active != nil {
		w.Trim()
		// The full chunk takes no more records, even if starting the next
		// one fails: sealing may remove its plain file, so a record written
		// there would be lost. The next append retries the start.
		err := w.active.Close()
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

// WriteAt writes a commit group's bytes at offset off of the active
// chunk, the end of its data (Chunk.WriteAt).
func (w *Writer) WriteAt(data []byte, off int64) error {
	return w.active.WriteAt(data, off)
}

// MarkUnsynced records that bytes went into the active chunk without a
// sync (a journal holds them durably): Rotate, Checkpoint and Close sync
// the chunk first.
func (w *Writer) MarkUnsynced() { w.unsynced = true }

// MarkSynced records that the caller synced the active chunk.
func (w *Writer) MarkSynced() { w.unsynced = false }

// Checkpoint syncs the active chunk when bytes went into it unsynced
// (MarkUnsynced), so that it holds its records durably by itself.
func (w *Writer) Checkpoint() error {
	if w.active != nil && w.unsynced {
		if err := w.active.Sync(); err != nil {
			return err
		}
		w.unsynced = false
	}
	return nil
}

// Trim cuts the free space off the active chunk, so that a chunk no
// longer written takes only its data, unless records are queued.
func (w *Writer) Trim() {
	if w.active == nil || len(w.queue) > 0 {
		return
	}
	w.active.Trim(w.size)
}

// NextAt is where Enqueue would put the next line (its Length unset).
func (w *Writer) NextAt() eventline.Location { return eventline.Location{Chunk: w.num, Offset: w.size} }

// Enqueue appends line to the queue of the active chunk, to be written
// by TakeQueue's caller, and returns its location.
func (w *Writer) Enqueue(line []byte) eventline.Location {
	loc := eventline.Location{Chunk: w.num, Offset: w.size, Length: uint32(len(line))}
	if w.sealRunning {
		w.lastWrite = time.Now()
	}
	w.queue = append(w.queue, line...)
	w.size += int64(len(line))
	return loc
}

// TakeQueue hands the queued bytes and their file offset to the caller,
// who writes them (WriteAt) and then returns the buffer with GiveBack.
// The queue starts empty again.
func (w *Writer) TakeQueue() ([]byte, int64) {
	q, off := w.queue, w.size-int64(len(w.queue))
	w.queue, w.spare = w.spare[:0], nil
	return q, off
}

// GiveBack returns a buffer TakeQueue handed out, for reuse.
func (w *Writer) GiveBack(q []byte) {
	if w.spare == nil && cap(q) <= maxSpareQueue {
		w.spare = q
	}
}

// DropQueue drops the queued records, which are never written; the end
// of the data stays where they would have ended (the session stops
// writing).
func (w *Writer) DropQueue() { w.queue = w.queue[:0] }

// CutBack drops the queued records and makes off, where a failed write
// left the chunk's data ending, the end of the data again.
func (w *Writer) CutBack(off int64) {
	w.queue = w.queue[:0]
	w.size = off
}

// maxSpareQueue bounds the queue buffer kept for reuse.
const maxSpareQueue = 1 << 20

// startSealing starts a background goroutine that seals the chunks
// queued in unsealed, unless one runs. The caller holds the session's
// mutex.
func (w *Writer) startSealing() {
	if !w.sealRunning {
		w.sealRunning, w.sealDone, w.hurry = true, make(chan struct{}), make(chan struct{})
		w.lastWrite = time.Now()
		go w.sealLoop()
	}
}

// sealWait returns how long sealing waits before it starts on todo, with
// the session's mutex held: until the appends have paused for sealIdle,
// unless SealBacklog chunks wait or AwaitSealing hurries it (0: start).
func (w *Writer) sealWait(todo []uint32) time.Duration {
	if w.sealIdle < 0 || len(todo) >= SealBacklog {
		return 0
	}
	select {
	case <-w.hurry:
		return 0
	default:
	}
	return max(0, w.sealIdle-time.Since(w.lastWrite))
}

// sealLoop seals the queued chunks, outside the session's mutex, once
// the appends pause (sealWait), until none is left but those whose
// sealing failed in this run (the next rotation retries them).
func (w *Writer) sealLoop() {
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
		if d := w.sealWait(todo); d > 0 {
			hurry := w.hurry
			w.sealMu.Unlock()
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-hurry:
				t.Stop()
			}
			w.sealMu.Lock()
			continue
		}
		failed = append(failed, w.sealChunks(todo)...)
	}
}

// sealChunks seals chunks todo, which are in unsealed, and returns those
// that stay plain. It releases the session's mutex while it works. Then it
// drops the sealed chunks from unsealed, and their lines from index.jsonl.
func (w *Writer) sealChunks(todo []uint32) (failed []uint32) {
	// The entries Embed returns do not change (Config.Embed); growing the
	// session's entries copies them, so the slices stay valid.
	embeds := make([][]eventline.Entry, len(todo))
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

// Plain reports whether chunk n's index lines belong in index.jsonl: it
// is the active chunk, or a full one not sealed (yet).
func (w *Writer) Plain(n uint32) bool {
	return (w.active != nil && n == w.num) || slices.Contains(w.unsealed, n)
}

// Sealing reports whether chunks are being sealed in the background.
func (w *Writer) Sealing() bool { return w.sealRunning }

// AwaitSealing waits until no chunk is being sealed in the background,
// starting the sealing without waiting for a pause in the appends. The
// caller holds the session's mutex, which the wait releases.
func (w *Writer) AwaitSealing() {
	for w.sealRunning {
		// Each time: a rotation while the mutex was released may have
		// started another sealing.
		select {
		case <-w.hurry:
		default:
			close(w.hurry)
		}
		done := w.sealDone
		w.sealMu.Unlock()
		<-done
		w.sealMu.Lock()
	}
}

// seal seals full chunk n, whose records' entries are es
// (Files.SealChunk). Sealing saves space and nothing depends on it, so a
// failure is logged, the plain chunk stays and the next rotation
// retries. It reports whether the sealed file is in place.
func (w *Writer) seal(n uint32, es []eventline.Entry) bool {
	if err := w.files.SealChunk(n, es); err != nil {
		w.log.Warn("sessionstore: chunk stays uncompressed", "path", w.path(n), "err", err)
		return false
	}
	return true
}

// SealActive seals the active chunk as Rotate's sealing does, but now and
// with the caller waiting, when the entries Config.Embed returns for it
// cover its whole data: it closes the chunk (Close: synced first), seals
// it (Files.SealChunk) and calls Config.Resealed. Otherwise the chunk
// stays open and plain. Nothing depends on the sealing: a failure to
// close or seal is logged, and the chunk stays plain, closed. The next
// append after it starts a new chunk. The caller has settled every
// record (nothing queued).
func (w *Writer) SealActive() {
	n := w.num
	es := w.embed(n)
	if len(es) == 0 || es[0].Loc.Offset != 0 || es[len(es)-1].Loc.End() != w.size {
		return // not the whole chunk: leave it plain
	}
	if err := w.Close(); err != nil {
		w.log.Warn("sessionstore: chunk stays uncompressed", "path", w.path(n), "err", err)
		return
	}
	if w.seal(n, es) && w.resealed != nil {
		w.resealed()
	}
}

// Close closes the active chunk, first syncing the bytes written into it
// unsynced (a checkpoint: whoever opens the chunk next, this session's
// next writer or another process, finds them durable there).
func (w *Writer) Close() error {
	if w.active == nil {
		return nil
	}
	var err error
	if w.unsynced {
		if err = w.active.Sync(); err == nil {
			w.unsynced = false
		}
	}
	err = errors.Join(err, w.active.Close())
	w.active = nil
	return err
}
