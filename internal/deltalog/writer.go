package deltalog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Options tune a Writer.
type Options struct {
	FileMode, DirMode fs.FileMode
	// SyncInterval is the most time a written record waits for its sync.
	SyncInterval time.Duration
	// SyncBytes unsynced bytes start a sync at once.
	SyncBytes int
	// SegmentBytes is the size past which a settled marker ends the
	// segment: the next record goes to a new one, and the segments before
	// the one ended are removed (every delta in them is superseded).
	SegmentBytes int64
}

// Segments lists the generations of the segments in dir, oldest first;
// none for a missing directory. Other names are ignored.
func Segments(fsys vfs.FS, dir string) ([]uint64, error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var gens []uint64
	for _, n := range names {
		if g, ok := ParseSegmentName(n); ok {
			gens = append(gens, g)
		}
	}
	return gens, nil // ReadDir's order is sorted, and names are fixed-width
}

// Writer appends to a stream. Its methods are safe for concurrent use.
type Writer struct {
	fsys vfs.FS
	dir  string
	o    Options

	// syncing serializes syncs and segment changes; taken before mu.
	syncing sync.Mutex
	mu      sync.Mutex
	gen     uint64
	f       vfs.File
	size    int64
	dirty   int  // bytes written since the last sync began
	armed   bool // a sync is scheduled
	timer   *time.Timer
	err     error // sticky: the first write or sync failure
	closed  bool
	buf     []byte
}

// Open starts a new segment in dir (created if needed), after the newest
// one there, and returns a writer of it. keepFrom is the oldest
// generation to keep: older segments are removed (their deltas are
// superseded). The new segment's directory entry is durable before Open
// returns; its magic is synced with its first records.
func Open(fsys vfs.FS, dir string, keepFrom uint64, o Options) (*Writer, error) {
	if _, err := fsys.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		// A new directory: its entry in its parent is made durable, or a
		// power loss would take every segment synced in it.
		if err := fsys.MkdirAll(dir, o.DirMode); err != nil {
			return nil, err
		}
		if err := fsys.SyncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	gens, err := Segments(fsys, dir)
	if err != nil {
		return nil, err
	}
	gen := uint64(1)
	if len(gens) > 0 {
		gen = gens[len(gens)-1] + 1
	}
	w := &Writer{fsys: fsys, dir: dir, o: o}
	if err := w.create(gen); err != nil {
		return nil, err
	}
	for _, g := range gens {
		if g < keepFrom {
			_ = fsys.Remove(filepath.Join(dir, SegmentName(g))) // superseded; a later Open retries
		}
	}
	return w, nil
}

// Gen is the generation of the segment being written.
func (w *Writer) Gen() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen
}

// create makes segment gen, with its magic written and its entry durable,
// and makes it the writer's file; with w.syncing held, or before the
// writer is shared.
func (w *Writer) create(gen uint64) error {
	path := filepath.Join(w.dir, SegmentName(gen))
	f, err := w.fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, w.o.FileMode)
	if err != nil {
		return err
	}
	// The magic is synced with the first records: a power loss before
	// leaves the segment empty, torn or garbled, which readers cut.
	if _, err := f.WriteAt([]byte(Magic), 0); err != nil {
		f.Close()
		return err
	}
	if err := w.fsys.SyncDir(w.dir); err != nil {
		f.Close()
		return err
	}
	w.mu.Lock()
	w.gen, w.f, w.size = gen, f, int64(len(Magic))
	w.dirty += len(Magic) // synced with the first records
	w.mu.Unlock()
	return nil
}

// Delta writes a delta record; see the package doc for when it is
// durable. Errors: ErrTooLarge, with nothing written; the first write or
// sync failure of the writer, for this and every later call.
func (w *Writer) Delta(kind, callID, data string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	b, err := AppendDelta(w.buf[:0], kind, callID, data)
	if err != nil {
		return err
	}
	w.buf = b
	return w.writeLocked()
}

// Settled writes a settled marker for the event id, which supersedes every
// delta written before it. When the segment is past SegmentBytes, the
// marker ends it: the segment before it is removed and the next record
// goes to a new segment.
func (w *Writer) Settled(id [16]byte) error {
	w.mu.Lock()
	if err := w.usable(); err != nil {
		w.mu.Unlock()
		return err
	}
	w.buf = AppendSettled(w.buf[:0], id)
	err := w.writeLocked()
	roll := err == nil && w.o.SegmentBytes > 0 && w.size >= w.o.SegmentBytes
	w.mu.Unlock()
	if roll {
		return w.roll()
	}
	return err
}

func (w *Writer) usable() error {
	if w.err != nil {
		return w.err
	}
	if w.closed {
		return errors.New("deltalog: writer closed")
	}
	return nil
}

// writeLocked writes w.buf at the end of the segment and schedules its
// sync; with w.mu held.
func (w *Writer) writeLocked() error {
	if _, err := w.f.WriteAt(w.buf, w.size); err != nil {
		w.err = fmt.Errorf("deltalog: write %s: %w", w.f.Name(), err)
		return w.err
	}
	w.size += int64(len(w.buf))
	w.dirty += len(w.buf)
	switch {
	case w.o.SyncBytes > 0 && w.dirty >= w.o.SyncBytes:
		if w.timer != nil {
			w.timer.Stop()
		}
		w.armed = true
		go w.syncNow()
	case !w.armed:
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(w.o.SyncInterval, w.syncNow)
		} else {
			w.timer.Reset(w.o.SyncInterval)
		}
	}
	return nil
}

// syncNow syncs what was written; the scheduled sync.
func (w *Writer) syncNow() {
	_ = w.Sync()
}

// Sync makes every record written so far durable.
func (w *Writer) Sync() error {
	w.syncing.Lock()
	defer w.syncing.Unlock()
	return w.syncLocked()
}

// syncLocked is Sync with w.syncing held.
func (w *Writer) syncLocked() error {
	w.mu.Lock()
	f, dirty, err := w.f, w.dirty, w.err
	w.dirty, w.armed = 0, false
	w.mu.Unlock()
	if err != nil || dirty == 0 || f == nil {
		return err
	}
	if err := f.Sync(); err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = fmt.Errorf("deltalog: sync %s: %w", f.Name(), err)
		}
		err = w.err
		w.mu.Unlock()
		return err
	}
	return nil
}

// roll ends the current segment after syncing it and starts the next.
func (w *Writer) roll() error {
	w.syncing.Lock()
	defer w.syncing.Unlock()
	if err := w.syncLocked(); err != nil {
		return err
	}
	w.mu.Lock()
	if w.closed || w.size < w.o.SegmentBytes {
		w.mu.Unlock()
		return w.err
	}
	old, gen := w.f, w.gen
	w.mu.Unlock()
	if err := w.create(gen + 1); err != nil {
		w.mu.Lock()
		if w.err == nil {
			w.err = fmt.Errorf("deltalog: start segment %d: %w", gen+1, err)
		}
		w.mu.Unlock()
		return w.err
	}
	_ = old.Close()
	// Every delta before the marker that ended gen is superseded: the
	// segments before gen go (gen stays, for readers behind).
	if gen > 1 {
		if gens, err := Segments(w.fsys, w.dir); err == nil {
			for _, g := range gens {
				if g < gen {
					_ = w.fsys.Remove(filepath.Join(w.dir, SegmentName(g)))
				}
			}
		}
	}
	return nil
}

// Close syncs what was written and closes the segment.
func (w *Writer) Close() error {
	w.syncing.Lock()
	defer w.syncing.Unlock()
	err := w.syncLocked()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.timer != nil {
		w.timer.Stop()
	}
	if w.f != nil {
		err = errors.Join(err, w.f.Close())
	}
	return err
}
