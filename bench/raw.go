package main

import (
	"context"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// The raw peers write each event as one line shaped like a sessionstore
// chunk line (id, parent id, kind, role, RFC 3339 timestamp, the payload
// inline, a CRC-32C) to one file, raw.log, and make it durable with
// fdatasync(2). Nothing else: no index, no metadata, no blobs, no
// compression. They implement only the writes.
//
// rawFloor is the floor of a durable append: the lines go into space
// preallocated with synced zeros, as sessionstore's active chunk is, so an
// fdatasync writes the data blocks and need not commit a new file size
// (on ext4, no journal commit). Appends are group-committed, as in the
// package's rawLog (commit_bench_test.go): a writer queues its lines; if
// no write is in flight it writes the whole queue with one pwrite(2),
// fdatasyncs, and returns with every writer in that group; otherwise it
// waits for a group that covers its lines. With one writer that is one
// write and one fdatasync per event. A Create is a line too (the
// session's id, name and creation time, with a CRC-32C), queued and
// group-committed as an append's lines are: the floor of a durable create
// that shares its sync with every other write in flight.
//
// rawGrow is the extra, not the floor: one write(2) to a growing O_APPEND
// file and one fdatasync(2) per event, the write under a mutex and the
// sync outside it (concurrent writers' syncs may overlap in the kernel).
// Each sync also commits the file's new size.
type rawFloor struct {
	mu    sync.Mutex
	cond  *sync.Cond
	f     *os.File
	lines rawLines

	queue, spare   []byte
	off            int64 // file offset of queue[0]: the end of the data written
	size           int64 // bytes preallocated (zeros written and synced)
	queued, synced int   // groups of lines queued, made durable
	syncing        bool
	err            error // sticky: a failed write or sync fails every later append
}

// rawLines assigns ids and parents and encodes the lines; its caller
// holds the store's mutex.
type rawLines struct {
	heads   map[uuid.UUID]uuid.UUID
	pending map[uuid.UUID]uuid.UUID // Branch selections
}

func newRawLines() rawLines {
	return rawLines{heads: map[uuid.UUID]uuid.UUID{}, pending: map[uuid.UUID]uuid.UUID{}}
}

// encode appends the lines of evs to b and returns their ids.
func (l *rawLines) encode(b []byte, session uuid.UUID, evs []Event) ([]byte, []uuid.UUID, error) {
	parent, ok := l.pending[session]
	if ok {
		delete(l.pending, session)
	} else {
		parent = l.heads[session]
	}
	ids := make([]uuid.UUID, len(evs))
	for i := range evs {
		id, err := uuid.NewV7()
		if err != nil {
			return b, nil, err
		}
		b = appendLine(b, id, parent, &evs[i], time.Now())
		ids[i], parent = id, id
	}
	l.heads[session] = parent
	return b, ids, nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendLine encodes ev as a chunk-like line.
func appendLine(b []byte, id, parent uuid.UUID, ev *Event, t time.Time) []byte {
	start := len(b)
	b = append(b, `{"id":"`...)
	b = append(b, id.String()...)
	b = append(b, `","parent_id":"`...)
	b = append(b, parent.String()...)
	b = append(b, `","kind":"`...)
	b = append(b, ev.Kind...)
	b = append(b, `","role":"`...)
	b = append(b, ev.Role...)
	b = append(b, `","timestamp":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","record":`...)
	b = append(b, ev.Payload...)
	return appendCRC(b, start)
}

// appendCreateLine encodes a new session as a line: its id, name (quoted;
// the workloads' names are ASCII) and creation time, and a CRC-32C.
func appendCreateLine(b []byte, id uuid.UUID, name string, t time.Time) []byte {
	start := len(b)
	b = append(b, `{"session":"`...)
	b = append(b, id.String()...)
	b = append(b, `","name":`...)
	b = strconv.AppendQuote(b, name)
	b = append(b, `,"created_at":"`...)
	b = t.UTC().AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	return appendCRC(b, start)
}

// appendCRC appends the CRC-32C of b[start:] as the line's last field and
// ends the line.
func appendCRC(b []byte, start int) []byte {
	crc := crc32.Checksum(b[start:], castagnoli)
	b = append(b, `,"crc":"`...)
	for range 8 - len(strconv.FormatUint(uint64(crc), 16)) {
		b = append(b, '0')
	}
	b = strconv.AppendUint(b, uint64(crc), 16)
	return append(b, "\"}\n"...)
}

// rawCreateOverhead bounds the bytes a create line adds to the session's
// name (id, timestamp, CRC and field names: about 110).
const rawCreateOverhead = 160

// rawLineOverhead bounds the bytes a line adds to its payload (ids,
// kind, role, timestamp, CRC and field names: about 190 for the
// workloads' events).
const rawLineOverhead = 256

// rawInitialSize is what Open preallocates before PrepareWrites says how
// much a workload will write.
const rawInitialSize = 1 << 20

func openRawFloor(dir string) (Store, error) {
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	s := &rawFloor{f: f, lines: newRawLines()}
	s.cond = sync.NewCond(&s.mu)
	if err := s.preallocate(rawInitialSize); err != nil {
		f.Close()
		return nil, err
	}
	return s, nil
}

// preallocate extends the file to size bytes by writing zeros past its
// end and fdatasyncing them (a size change: one journal commit). Only a
// group's leader, or a caller with no append in flight, calls it.
func (s *rawFloor) preallocate(size int64) error {
	if size <= s.size {
		return nil
	}
	zeros := make([]byte, min(size-s.size, 1<<20))
	for off := s.size; off < size; {
		n := min(int64(len(zeros)), size-off)
		if _, err := s.f.WriteAt(zeros[:n], off); err != nil {
			return err
		}
		off += n
	}
	if err := syscall.Fdatasync(int(s.f.Fd())); err != nil {
		return err
	}
	s.size = size
	return nil
}

// PrepareWrites preallocates the space a workload's appends or creates
// will take, outside the timed region (writePreparer).
func (s *rawFloor) PrepareWrites(writers int, bytes int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.syncing {
		return errors.New("raw: PrepareWrites during writes")
	}
	return s.preallocate(s.off + bytes)
}

func (s *rawFloor) write(session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	var ids []uuid.UUID
	err := s.commit(func(b []byte) ([]byte, error) {
		var err error
		b, ids, err = s.lines.encode(b, session, evs)
		return b, err
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// commit queues the lines encode appends to the queue (called with the
// store's mutex held) and returns once a group covering them is written
// and fdatasynced.
func (s *rawFloor) commit(encode func(b []byte) ([]byte, error)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	var err error
	if s.queue, err = encode(s.queue); err != nil {
		return err
	}
	s.queued++
	mine := s.queued
	for s.synced < mine {
		if s.err != nil {
			return s.err
		}
		if s.syncing {
			s.cond.Wait()
			continue
		}
		// Lead a group: write everything queued so far and sync it.
		s.syncing = true
		data, off, upto := s.queue, s.off, s.queued
		s.queue, s.spare = s.spare[:0], nil
		s.off += int64(len(data))
		s.mu.Unlock()
		var err error
		if end := off + int64(len(data)); end > s.size {
			// The workload wrote more than it announced: grow in steps,
			// inside the timing, as sessionstore's active chunk does.
			err = s.preallocate(max(end, 2*s.size))
		}
		if err == nil {
			_, err = s.f.WriteAt(data, off)
		}
		if err == nil {
			err = syscall.Fdatasync(int(s.f.Fd()))
		}
		s.mu.Lock()
		s.syncing, s.spare = false, data
		s.cond.Broadcast()
		if err != nil {
			s.err = err
			return err
		}
		s.synced = upto
	}
	return nil
}

// Create writes the session's line (appendCreateLine) and returns when a
// group covering it is durable.
func (s *rawFloor) Create(ctx context.Context, name string) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return id, err
	}
	return id, s.commit(func(b []byte) ([]byte, error) {
		return appendCreateLine(b, id, name, time.Now()), nil
	})
}

func (s *rawFloor) Append(ctx context.Context, session uuid.UUID, ev Event) (uuid.UUID, error) {
	return appendOne(s.write, session, ev)
}

func (s *rawFloor) AppendBatch(ctx context.Context, session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	return s.write(session, evs)
}

func (s *rawFloor) Branch(ctx context.Context, session, from uuid.UUID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines.pending[session] = from
	return nil
}

func (s *rawFloor) Load(context.Context, uuid.UUID) ([]Event, error) { return nil, errUnsupported }
func (s *rawFloor) Tree(context.Context, uuid.UUID) ([]Node, error)  { return nil, errUnsupported }
func (s *rawFloor) List(context.Context) ([]SessionInfo, error)      { return nil, errUnsupported }
func (s *rawFloor) ListRecent(context.Context, int) ([]SessionInfo, error) {
	return nil, errUnsupported
}
func (s *rawFloor) Close() error { return s.f.Close() }

// rawGrow: see rawFloor's comment.
type rawGrow struct {
	mu    sync.Mutex
	f     *os.File
	lines rawLines
	buf   []byte
}

func openRawGrow(dir string) (Store, error) {
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &rawGrow{f: f, lines: newRawLines()}, nil
}

func (s *rawGrow) write(session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	s.mu.Lock()
	var (
		ids []uuid.UUID
		err error
	)
	s.buf, ids, err = s.lines.encode(s.buf[:0], session, evs)
	if err == nil {
		_, err = s.f.Write(s.buf)
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := syscall.Fdatasync(int(s.f.Fd())); err != nil {
		return nil, err
	}
	return ids, nil
}

func (s *rawGrow) Create(ctx context.Context, name string) (uuid.UUID, error) {
	return uuid.NewV7()
}

func (s *rawGrow) Append(ctx context.Context, session uuid.UUID, ev Event) (uuid.UUID, error) {
	return appendOne(s.write, session, ev)
}

func (s *rawGrow) AppendBatch(ctx context.Context, session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	return s.write(session, evs)
}

func (s *rawGrow) Branch(ctx context.Context, session, from uuid.UUID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines.pending[session] = from
	return nil
}

func (s *rawGrow) Load(context.Context, uuid.UUID) ([]Event, error)       { return nil, errUnsupported }
func (s *rawGrow) Tree(context.Context, uuid.UUID) ([]Node, error)        { return nil, errUnsupported }
func (s *rawGrow) List(context.Context) ([]SessionInfo, error)            { return nil, errUnsupported }
func (s *rawGrow) ListRecent(context.Context, int) ([]SessionInfo, error) { return nil, errUnsupported }
func (s *rawGrow) Close() error                                           { return s.f.Close() }
