package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"
)

// boltStore keeps everything in one bbolt file (session.bolt), default
// options (each commit writes its pages, fdatasyncs, writes the meta page
// and fdatasyncs again):
//
//	bucket "sessions": session id (16 bytes) -> created_at (8) | name
//	bucket "events", one nested bucket per session id:
//	    event id (16 bytes, UUIDv7) -> parent id (16) | time (8) |
//	                                    kind len (1) | kind | role len (1) | role | payload
//
// Event ids are UUIDv7 generated inside the write transaction, so keys
// sort in append order and HEAD is the bucket's last key. Append is one
// Put in one db.Update with one writer; with several writers it goes
// through db.Batch, bbolt's group commit (several writers' Puts in one
// transaction: one commit, two fdatasyncs, for the group). Create (a Put
// in "sessions" and the session's bucket) is committed the same way. Load
// follows parent ids from HEAD with Gets in one read transaction, copying
// each payload out of the mmap.
type boltStore struct {
	db      *bolt.DB
	batch   bool // appends and creates use db.Batch (set by PrepareWrites)
	mu      sync.Mutex
	pending map[uuid.UUID]uuid.UUID
}

var (
	boltSessions = []byte("sessions")
	boltEvents   = []byte("events")
)

func openBolt(dir string) (Store, error) {
	db, err := bolt.Open(filepath.Join(dir, "session.bolt"), 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(boltSessions); err != nil {
			return err
		}
		_, err := tx.CreateBucketIfNotExists(boltEvents)
		return err
	})
	if err != nil {
		db.Close()
		return nil, err
	}
	return &boltStore{db: db, pending: map[uuid.UUID]uuid.UUID{}}, nil
}

// openBoltRead opens the file read-only (Options.ReadOnly: a shared lock,
// no transaction committed): the buckets exist already.
func openBoltRead(dir string) (Store, error) {
	db, err := bolt.Open(filepath.Join(dir, "session.bolt"), 0o600, &bolt.Options{Timeout: 10 * time.Second, ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return &boltStore{db: db, pending: map[uuid.UUID]uuid.UUID{}}, nil
}

// PrepareWrites (writePreparer) makes appends and creates use db.Batch
// when several goroutines write, with MaxBatchSize = writers so that a
// group of all the writers commits at once rather than waiting out
// MaxBatchDelay (10 ms by default) for more; one writer keeps db.Update (a
// Batch of one waits out the delay).
func (s *boltStore) PrepareWrites(writers int, bytes int64) error {
	if writers > 1 {
		s.batch = true
		s.db.MaxBatchSize = writers
	}
	return nil
}

func (s *boltStore) Create(ctx context.Context, name string) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return id, err
	}
	// fn may run more than once under db.Batch; each run puts the same
	// key and creates the bucket in a new transaction.
	err = s.commit()(func(tx *bolt.Tx) error {
		v := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
		if err := tx.Bucket(boltSessions).Put(id[:], append(v, name...)); err != nil {
			return err
		}
		_, err := tx.Bucket(boltEvents).CreateBucket(id[:])
		return err
	})
	return id, err
}

// commit is how a write transaction is committed: db.Batch after
// PrepareWrites with several writers, else db.Update.
func (s *boltStore) commit() func(func(*bolt.Tx) error) error {
	if s.batch {
		return s.db.Batch
	}
	return s.db.Update
}

func (s *boltStore) takePending(session uuid.UUID) (uuid.UUID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.pending[session]
	delete(s.pending, session)
	return p, ok
}

func encodeBolt(parent uuid.UUID, ev *Event, t time.Time) []byte {
	v := make([]byte, 0, 16+8+2+len(ev.Kind)+len(ev.Role)+len(ev.Payload))
	v = append(v, parent[:]...)
	v = binary.BigEndian.AppendUint64(v, uint64(t.UnixNano()))
	v = append(v, byte(len(ev.Kind)))
	v = append(v, ev.Kind...)
	v = append(v, byte(len(ev.Role)))
	v = append(v, ev.Role...)
	return append(v, ev.Payload...)
}

// decodeBolt decodes a value; the payload aliases v.
func decodeBolt(k, v []byte) (Event, error) {
	var ev Event
	if len(k) != 16 || len(v) < 26 {
		return ev, errors.New("bbolt: short event")
	}
	copy(ev.ID[:], k)
	copy(ev.ParentID[:], v)
	ev.Time = time.Unix(0, int64(binary.BigEndian.Uint64(v[16:]))).UTC()
	v = v[24:]
	n := int(v[0])
	ev.Kind, v = intern(v[1:1+n]), v[1+n:]
	n = int(v[0])
	ev.Role, v = intern(v[1:1+n]), v[1+n:]
	ev.Payload = v
	return ev, nil
}

func (s *boltStore) appendEvents(session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	pending, branched := s.takePending(session)
	ids := make([]uuid.UUID, len(evs))
	// fn may run more than once under db.Batch (bbolt retries a batch's
	// functions one by one after a failure), so it starts afresh each time.
	err := s.commit()(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltEvents).Bucket(session[:])
		if b == nil {
			return errors.New("bbolt: no such session")
		}
		parent := pending
		if !branched {
			if k, _ := b.Cursor().Last(); k != nil {
				copy(parent[:], k)
			}
		}
		for i := range evs {
			id, err := uuid.NewV7()
			if err != nil {
				return err
			}
			if err := b.Put(id[:], encodeBolt(parent, &evs[i], time.Now())); err != nil {
				return err
			}
			ids[i], parent = id, id
		}
		return nil
	})
	return ids, err
}

func (s *boltStore) Append(ctx context.Context, session uuid.UUID, ev Event) (uuid.UUID, error) {
	return appendOne(s.appendEvents, session, ev)
}

func (s *boltStore) AppendBatch(ctx context.Context, session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	return s.appendEvents(session, evs)
}

func (s *boltStore) Branch(ctx context.Context, session, from uuid.UUID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[session] = from
	return nil
}

func (s *boltStore) Load(ctx context.Context, session uuid.UUID) ([]Event, error) {
	var out []Event
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltEvents).Bucket(session[:])
		if b == nil {
			return errors.New("bbolt: no such session")
		}
		k, v := b.Cursor().Last()
		for k != nil {
			ev, err := decodeBolt(k, v)
			if err != nil {
				return err
			}
			ev.Payload = bytes.Clone(ev.Payload) // v lives in the mmap, valid only in the transaction
			out = append(out, ev)
			if ev.ParentID == uuid.Nil {
				break
			}
			k = ev.ParentID[:]
			if v = b.Get(k); v == nil {
				return errors.New("bbolt: missing parent")
			}
		}
		return nil
	})
	slices.Reverse(out)
	return out, err
}

func (s *boltStore) Tree(ctx context.Context, session uuid.UUID) ([]Node, error) {
	var out []Node
	err := s.db.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(boltEvents).Bucket(session[:])
		if b == nil {
			return errors.New("bbolt: no such session")
		}
		return b.ForEach(func(k, v []byte) error {
			ev, err := decodeBolt(k, v)
			if err != nil {
				return err
			}
			out = append(out, Node{ID: ev.ID, ParentID: ev.ParentID, Kind: ev.Kind, Role: ev.Role, Time: ev.Time, Size: int64(len(ev.Payload))})
			return nil
		})
	})
	return out, err
}

func (s *boltStore) List(ctx context.Context) ([]SessionInfo, error) {
	var out []SessionInfo
	err := s.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(boltSessions).ForEach(func(k, v []byte) error {
			si, err := decodeBoltSession(k, v)
			out = append(out, si)
			return err
		})
	})
	return out, err
}

// ListRecent walks the sessions bucket from its last key backwards: keys
// are UUIDv7 session ids, so in creation order.
func (s *boltStore) ListRecent(ctx context.Context, n int) ([]SessionInfo, error) {
	var out []SessionInfo
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(boltSessions).Cursor()
		for k, v := c.Last(); k != nil && len(out) < n; k, v = c.Prev() {
			si, err := decodeBoltSession(k, v)
			if err != nil {
				return err
			}
			out = append(out, si)
		}
		return nil
	})
	return out, err
}

func decodeBoltSession(k, v []byte) (SessionInfo, error) {
	var si SessionInfo
	if len(k) != 16 || len(v) < 8 {
		return si, errors.New("bbolt: bad session")
	}
	copy(si.ID[:], k)
	si.CreatedAt = time.Unix(0, int64(binary.BigEndian.Uint64(v))).UTC()
	si.Name = string(v[8:])
	return si, nil
}

// BuildSessions (bulkBuilder) creates one session per name, each holding
// evs, in one db.Update per 10,000 sessions.
func (s *boltStore) BuildSessions(ctx context.Context, names []string, evs []Event) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, 0, len(names))
	for len(names) > 0 {
		part := names[:min(len(names), 10000)]
		names = names[len(part):]
		var made []uuid.UUID
		err := s.db.Update(func(tx *bolt.Tx) error {
			made = made[:0]
			for _, name := range part {
				id, err := uuid.NewV7()
				if err != nil {
					return err
				}
				v := binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
				if err := tx.Bucket(boltSessions).Put(id[:], append(v, name...)); err != nil {
					return err
				}
				b, err := tx.Bucket(boltEvents).CreateBucket(id[:])
				if err != nil {
					return err
				}
				var parent uuid.UUID
				for i := range evs {
					eid, err := uuid.NewV7()
					if err != nil {
						return err
					}
					if err := b.Put(eid[:], encodeBolt(parent, &evs[i], time.Now())); err != nil {
						return err
					}
					parent = eid
				}
				made = append(made, id)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		ids = append(ids, made...)
	}
	return ids, nil
}

func (s *boltStore) Close() error { return s.db.Close() }

// intern returns the kinds and roles the benchmark uses without
// allocating.
func intern(b []byte) string {
	switch string(b) {
	case "message":
		return "message"
	case "tool_call":
		return "tool_call"
	case "tool_result":
		return "tool_result"
	case "user":
		return "user"
	case "assistant":
		return "assistant"
	case "tool":
		return "tool"
	case "":
		return ""
	}
	return string(b)
}
