package main

import (
	"context"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/google/uuid"
)

// rawStore is the physical limit of a durable append: each event becomes
// one line shaped like a sessionstore chunk line (id, parent id, kind,
// role, RFC 3339 timestamp, the payload inline, a CRC-32C), appended to
// one file (raw.log) with one write(2) and one fdatasync(2). Nothing else:
// no index, no metadata, no blobs, no compression. The line is written
// under a mutex (which also assigns the parent); the fdatasync runs
// outside it, so concurrent writers' syncs may overlap and share a
// journal commit in the kernel. It implements only the writes.
type rawStore struct {
	mu      sync.Mutex
	f       *os.File
	heads   map[uuid.UUID]uuid.UUID
	pending map[uuid.UUID]uuid.UUID
	buf     []byte
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func openRaw(dir string) (Store, error) {
	f, err := os.OpenFile(filepath.Join(dir, "raw.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &rawStore{f: f, heads: map[uuid.UUID]uuid.UUID{}, pending: map[uuid.UUID]uuid.UUID{}}, nil
}

func (s *rawStore) Create(ctx context.Context, name string) (uuid.UUID, error) {
	return uuid.NewV7()
}

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
	crc := crc32.Checksum(b[start:], castagnoli)
	b = append(b, `,"crc":"`...)
	for range 8 - len(strconv.FormatUint(uint64(crc), 16)) {
		b = append(b, '0')
	}
	b = strconv.AppendUint(b, uint64(crc), 16)
	return append(b, "\"}\n"...)
}

func (s *rawStore) write(session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	s.mu.Lock()
	parent, ok := s.pending[session]
	if ok {
		delete(s.pending, session)
	} else {
		parent = s.heads[session]
	}
	s.buf = s.buf[:0]
	ids := make([]uuid.UUID, len(evs))
	for i := range evs {
		id, err := uuid.NewV7()
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		s.buf = appendLine(s.buf, id, parent, &evs[i], time.Now())
		ids[i], parent = id, id
	}
	_, err := s.f.Write(s.buf)
	s.heads[session] = parent
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := syscall.Fdatasync(int(s.f.Fd())); err != nil {
		return nil, err
	}
	return ids, nil
}

func (s *rawStore) Append(ctx context.Context, session uuid.UUID, ev Event) (uuid.UUID, error) {
	return appendOne(s.write, session, ev)
}

func (s *rawStore) AppendBatch(ctx context.Context, session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	return s.write(session, evs)
}

func (s *rawStore) Branch(ctx context.Context, session, from uuid.UUID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[session] = from
	return nil
}

func (s *rawStore) Load(context.Context, uuid.UUID) ([]Event, error) { return nil, errUnsupported }
func (s *rawStore) Tree(context.Context, uuid.UUID) ([]Node, error)  { return nil, errUnsupported }
func (s *rawStore) List(context.Context) ([]SessionInfo, error)      { return nil, errUnsupported }
func (s *rawStore) Close() error                                     { return s.f.Close() }
