package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// jsonlStore is the naive store many harnesses use: one JSONL file per
// session (sessions/<id>.jsonl), a header
// line with the session's name and creation time, then one line per event
// encoded with encoding/json. Append writes the line and fsyncs the file
// (os.File.Sync) under the session's mutex; Create fsyncs the new file and
// the directory. Load reads and decodes every line (streaming), keeps them
// all, and follows parent ids from the last line (HEAD). Tree decodes every
// line too, but keeps no payload. List reads the first line of every file.
type jsonlStore struct {
	dir      string
	mu       sync.Mutex
	sessions map[uuid.UUID]*jsonlSession
}

type jsonlSession struct {
	mu      sync.Mutex
	f       *os.File
	head    uuid.UUID
	pending *uuid.UUID
}

type jsonlHeader struct {
	SessionID uuid.UUID `json:"session_id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

type jsonlEvent struct {
	ID        uuid.UUID       `json:"id"`
	ParentID  uuid.UUID       `json:"parent_id"`
	SessionID uuid.UUID       `json:"session_id"`
	Time      time.Time       `json:"time"`
	Kind      string          `json:"kind"`
	Role      string          `json:"role,omitempty"`
	Payload   json.RawMessage `json:"payload"`
}

// maxJSONLLine bounds a line the readers accept.
const maxJSONLLine = 64 << 20

func openJSONL(dir string) (Store, error) {
	if err := os.MkdirAll(filepath.Join(dir, "sessions"), 0o700); err != nil {
		return nil, err
	}
	return &jsonlStore{dir: filepath.Join(dir, "sessions"), sessions: map[uuid.UUID]*jsonlSession{}}, nil
}

// openJSONLRead opens the store for reading: no directory is created.
func openJSONLRead(dir string) (Store, error) {
	return &jsonlStore{dir: filepath.Join(dir, "sessions"), sessions: map[uuid.UUID]*jsonlSession{}}, nil
}

func (s *jsonlStore) path(id uuid.UUID) string { return filepath.Join(s.dir, id.String()+".jsonl") }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *jsonlStore) Create(ctx context.Context, name string) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return id, err
	}
	f, err := os.OpenFile(s.path(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return id, err
	}
	line, err := json.Marshal(jsonlHeader{SessionID: id, Name: name, CreatedAt: time.Now().UTC()})
	if err == nil {
		_, err = f.Write(append(line, '\n'))
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		f.Close()
		return id, err
	}
	s.mu.Lock()
	s.sessions[id] = &jsonlSession{f: f}
	s.mu.Unlock()
	return id, nil
}

// session returns the open session, opening its file for appending and
// finding HEAD (the last line) if needed.
func (s *jsonlStore) session(id uuid.UUID) (*jsonlSession, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss, ok := s.sessions[id]; ok {
		return ss, nil
	}
	evs, err := s.readAll(id)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(s.path(id), os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	ss := &jsonlSession{f: f}
	if len(evs) > 0 {
		ss.head = evs[len(evs)-1].ID
	}
	s.sessions[id] = ss
	return ss, nil
}

func (s *jsonlStore) appendEvents(session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	ss, err := s.session(session)
	if err != nil {
		return nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	parent := ss.head
	if ss.pending != nil {
		parent, ss.pending = *ss.pending, nil
	}
	var buf []byte
	ids := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		line, err := json.Marshal(jsonlEvent{ID: id, ParentID: parent, SessionID: session, Time: time.Now().UTC(), Kind: ev.Kind, Role: ev.Role, Payload: ev.Payload})
		if err != nil {
			return nil, err
		}
		buf = append(append(buf, line...), '\n')
		ids[i], parent = id, id
	}
	if _, err := ss.f.Write(buf); err != nil {
		return nil, err
	}
	if err := ss.f.Sync(); err != nil {
		return nil, err
	}
	ss.head = parent
	return ids, nil
}

func (s *jsonlStore) Append(ctx context.Context, session uuid.UUID, ev Event) (uuid.UUID, error) {
	return appendOne(s.appendEvents, session, ev)
}

func (s *jsonlStore) AppendBatch(ctx context.Context, session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	return s.appendEvents(session, evs)
}

func (s *jsonlStore) Branch(ctx context.Context, session, from uuid.UUID) error {
	ss, err := s.session(session)
	if err != nil {
		return err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.pending = &from
	return nil
}

// scanLines calls fn for every event line of the session's file (the
// header line is skipped).
func (s *jsonlStore) scanLines(id uuid.UUID, fn func(line []byte) error) error {
	f, err := os.Open(s.path(id))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), maxJSONLLine)
	first := true
	for sc.Scan() {
		if first {
			first = false
			continue
		}
		if err := fn(sc.Bytes()); err != nil {
			return err
		}
	}
	return sc.Err()
}

// readAll decodes every event of the session.
func (s *jsonlStore) readAll(id uuid.UUID) ([]jsonlEvent, error) {
	var out []jsonlEvent
	err := s.scanLines(id, func(line []byte) error {
		var ev jsonlEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return err
		}
		out = append(out, ev)
		return nil
	})
	return out, err
}

func (s *jsonlStore) Load(ctx context.Context, session uuid.UUID) ([]Event, error) {
	all, err := s.readAll(session)
	if err != nil || len(all) == 0 {
		return nil, err
	}
	byID := make(map[uuid.UUID]int, len(all))
	for i := range all {
		byID[all[i].ID] = i
	}
	var out []Event
	for i := len(all) - 1; ; {
		e := &all[i]
		out = append(out, Event{ID: e.ID, ParentID: e.ParentID, Kind: e.Kind, Role: e.Role, Time: e.Time, Payload: e.Payload})
		if e.ParentID == uuid.Nil {
			break
		}
		var ok bool
		if i, ok = byID[e.ParentID]; !ok {
			return nil, fmt.Errorf("jsonl: missing parent %s", e.ParentID)
		}
	}
	slices.Reverse(out)
	return out, nil
}

func (s *jsonlStore) Tree(ctx context.Context, session uuid.UUID) ([]Node, error) {
	var (
		out []Node
		ev  jsonlEvent // reused: Unmarshal reuses its Payload buffer
	)
	err := s.scanLines(session, func(line []byte) error {
		ev = jsonlEvent{Payload: ev.Payload[:0]}
		if err := json.Unmarshal(line, &ev); err != nil {
			return err
		}
		out = append(out, Node{ID: ev.ID, ParentID: ev.ParentID, Kind: ev.Kind, Role: ev.Role, Time: ev.Time, Size: int64(len(ev.Payload))})
		return nil
	})
	return out, err
}

func (s *jsonlStore) List(ctx context.Context) ([]SessionInfo, error) {
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	out := make([]SessionInfo, 0, len(names))
	for _, n := range names {
		if !strings.HasSuffix(n.Name(), ".jsonl") {
			continue
		}
		h, err := readJSONLHeader(filepath.Join(s.dir, n.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, SessionInfo{ID: h.SessionID, Name: h.Name, CreatedAt: h.CreatedAt})
	}
	return out, nil
}

// ListRecent reads the directory (os.ReadDir sorts the names: a UUIDv7
// in text sorts in creation order) and the first line of the n newest
// files.
func (s *jsonlStore) ListRecent(ctx context.Context, n int) ([]SessionInfo, error) {
	names, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, err
	}
	out := make([]SessionInfo, 0, min(n, len(names)))
	for i := len(names) - 1; i >= 0 && len(out) < n; i-- {
		if !strings.HasSuffix(names[i].Name(), ".jsonl") {
			continue
		}
		h, err := readJSONLHeader(filepath.Join(s.dir, names[i].Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, SessionInfo{ID: h.SessionID, Name: h.Name, CreatedAt: h.CreatedAt})
	}
	return out, nil
}

// BuildSessions (bulkBuilder) writes one file per name, the header and
// evs as Create and Append would, from 32 goroutines; each file is
// fsynced and closed, and the directory is fsynced once at the end.
func (s *jsonlStore) BuildSessions(ctx context.Context, names []string, evs []Event) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, len(names))
	for i := range ids {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		ids[i] = id
	}
	write := func(i int) error {
		id := ids[i]
		line, err := json.Marshal(jsonlHeader{SessionID: id, Name: names[i], CreatedAt: time.Now().UTC()})
		if err != nil {
			return err
		}
		buf := append(line, '\n')
		var parent uuid.UUID
		for _, ev := range evs {
			eid, err := uuid.NewV7()
			if err != nil {
				return err
			}
			line, err := json.Marshal(jsonlEvent{ID: eid, ParentID: parent, SessionID: id, Time: time.Now().UTC(), Kind: ev.Kind, Role: ev.Role, Payload: ev.Payload})
			if err != nil {
				return err
			}
			buf = append(append(buf, line...), '\n')
			parent = eid
		}
		f, err := os.OpenFile(s.path(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = f.Write(buf)
		if err == nil {
			err = f.Sync()
		}
		return errors.Join(err, f.Close())
	}
	if err := parallel(32, len(names), write); err != nil {
		return nil, err
	}
	return ids, syncDir(s.dir)
}

func readJSONLHeader(path string) (jsonlHeader, error) {
	var h jsonlHeader
	f, err := os.Open(path)
	if err != nil {
		return h, err
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(f, 4096).ReadSlice('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return h, err
	}
	return h, json.Unmarshal(line, &h)
}

func (s *jsonlStore) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for _, ss := range s.sessions {
		errs = append(errs, ss.f.Close())
	}
	s.sessions = nil
	return errors.Join(errs...)
}
