package main

import (
	"context"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// ssStore adapts *sessionstore.Store, with default options except the
// chunk size. Append is Store.Append (safe from many goroutines,
// group-committed: one fdatasync of the active chunk per group, plus the
// blob's file and directory syncs for a record over 1 MiB); AppendBatch
// is Store.AppendBatch; Load is Store.Load (HEAD to root through each chunk
// line's parent location, in a session opened without its index); Tree is
// Store.Tree; List is Store.List (reads the root's catalogue and stats
// every session.json); ListRecent is Store.ListRecent (the catalogue's
// newest lines).
type ssStore struct{ s *sessionstore.Store }

func openSessionstore(chunkSize int64) func(dir string) (Store, error) {
	return func(dir string) (Store, error) {
		var o *sessionstore.Options
		if chunkSize != 0 {
			o = &sessionstore.Options{ChunkSize: chunkSize}
		}
		s, err := sessionstore.Open(dir, o)
		if err != nil {
			return nil, err
		}
		return ssStore{s}, nil
	}
}

// benchKeys is the key-encryption key of sessionstore-enc: a local key,
// as a key file would give it (a KMS would add its round trip once per
// session opened, not per event).
var benchKeys = func() *sessionstore.LocalKeys {
	k, err := sessionstore.NewLocalKeys("bench", map[string][]byte{"bench": []byte("0123456789abcdef0123456789abcdef")})
	if err != nil {
		panic(err)
	}
	return k
}()

// openSessionstoreEnc opens the store with Options.Keys: every session
// it creates is encrypted.
func openSessionstoreEnc(dir string) (Store, error) {
	s, err := sessionstore.Open(dir, &sessionstore.Options{Keys: benchKeys})
	if err != nil {
		return nil, err
	}
	return ssStore{s}, nil
}

// openSessionstoreEncRead is openSessionstoreRead with the key.
func openSessionstoreEncRead(dir string) (Store, error) {
	s, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true, Keys: benchKeys})
	if err != nil {
		return nil, err
	}
	return ssStore{s}, nil
}

// openSessionstoreRead opens the store with Options.ReadOnly: no lock, no
// file created or written.
func openSessionstoreRead(dir string) (Store, error) {
	s, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return ssStore{s}, nil
}

func (s ssStore) Create(ctx context.Context, name string) (uuid.UUID, error) {
	m, err := s.s.Create(ctx, sessionstore.Meta{Name: name})
	return m.ID, err
}

func toSS(ev Event) sessionstore.Event {
	return sessionstore.Event{Kind: sessionstore.Kind(ev.Kind), Role: sessionstore.Role(ev.Role), Record: ev.Payload}
}

func (s ssStore) Append(ctx context.Context, session uuid.UUID, ev Event) (uuid.UUID, error) {
	out, err := s.s.Append(ctx, session, toSS(ev))
	return out.ID, err
}

func (s ssStore) AppendBatch(ctx context.Context, session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	in := make([]sessionstore.Event, len(evs))
	for i, ev := range evs {
		in[i] = toSS(ev)
	}
	out, err := s.s.AppendBatch(ctx, session, in...)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, len(out))
	for i := range out {
		ids[i] = out[i].ID
	}
	return ids, nil
}

func (s ssStore) Branch(ctx context.Context, session, from uuid.UUID) error {
	return s.s.Branch(ctx, session, from)
}

func (s ssStore) Load(ctx context.Context, session uuid.UUID) ([]Event, error) {
	path, err := s.s.Load(ctx, session)
	if err != nil {
		return nil, err
	}
	out := make([]Event, len(path))
	for i, e := range path {
		out[i] = Event{ID: e.ID, ParentID: e.ParentID, Kind: string(e.Kind), Role: string(e.Role), Time: e.Time, Payload: e.Record}
	}
	return out, nil
}

func (s ssStore) Tree(ctx context.Context, session uuid.UUID) ([]Node, error) {
	nodes, err := s.s.Tree(ctx, session)
	if err != nil {
		return nil, err
	}
	out := make([]Node, len(nodes))
	for i, n := range nodes {
		out[i] = Node{ID: n.ID, ParentID: n.ParentID, Kind: string(n.Kind), Role: string(n.Role), Time: n.Time, Size: n.Size}
	}
	return out, nil
}

func (s ssStore) List(ctx context.Context) ([]SessionInfo, error) {
	metas, err := s.s.List(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SessionInfo, len(metas))
	for i, m := range metas {
		out[i] = SessionInfo{ID: m.ID, Name: m.Name, CreatedAt: m.CreatedAt}
	}
	return out, nil
}

// ListRecent is Store.ListRecent.
func (s ssStore) ListRecent(ctx context.Context, n int) ([]SessionInfo, error) {
	metas, err := s.s.ListRecent(ctx, n)
	if err != nil {
		return nil, err
	}
	out := make([]SessionInfo, len(metas))
	for i, m := range metas {
		out[i] = SessionInfo{ID: m.ID, Name: m.Name, CreatedAt: m.CreatedAt}
	}
	return out, nil
}

func (s ssStore) Close() error { return s.s.Close() }
