package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// sqliteStore is the schema a careful SQLite user would write, in one
// database file (session.db) in WAL mode:
//
//	sessions(id BLOB PRIMARY KEY, name, created_at)
//	events(seq INTEGER PRIMARY KEY, id BLOB UNIQUE, session_id BLOB,
//	       parent_id BLOB, kind, role, time, payload BLOB)
//	index events_session ON events(session_id, seq)
//
// Ids are 16-byte blobs. HEAD is the session's newest event (max seq), as
// in sessionstore. Append is one INSERT in autocommit mode whose parent is
// the pending Branch selection or, by a subquery, the newest event: one
// transaction, one WAL write and, with synchronous=FULL, one sync of the
// WAL per commit (SQLite also syncs the database file at each automatic
// checkpoint, every 1,000 WAL pages). The sync is fdatasync(2), as in the
// C SQLite Linux distributions ship, unless -sqlite-fdatasync=false keeps
// modernc.org/sqlite's default, fsync(2). With synchronous=NORMAL in WAL mode
// commits are not synced (only checkpoints are): a power loss can lose
// the last commits, so that peer is not durable in the sense the others
// are. Load is a recursive CTE from HEAD following parent_id. Tree reads
// the columns and length(payload). The *sql.DB has one connection
// (SetMaxOpenConns(1)) and busy_timeout=5000: database/sql queues
// concurrent writers on that connection, which is how SQLite serializes
// them anyway.
type sqliteStore struct {
	db      *sql.DB
	insert  *sql.Stmt
	mu      sync.Mutex
	pending map[uuid.UUID]uuid.UUID // Branch selections
}

const sqliteSchema = `
CREATE TABLE IF NOT EXISTS sessions(
	id BLOB PRIMARY KEY,
	name TEXT NOT NULL,
	created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS events(
	seq INTEGER PRIMARY KEY,
	id BLOB NOT NULL UNIQUE,
	session_id BLOB NOT NULL,
	parent_id BLOB,
	kind TEXT NOT NULL,
	role TEXT NOT NULL,
	time INTEGER NOT NULL,
	payload BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS events_session ON events(session_id, seq);
`

func openSQLite(synchronous string) func(dir string) (Store, error) {
	return func(dir string) (Store, error) {
		dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(%s)",
			filepath.Join(dir, "session.db"), synchronous)
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(1)
		if _, err := db.Exec(sqliteSchema); err != nil {
			db.Close()
			return nil, err
		}
		insert, err := db.Prepare(`INSERT INTO events(id, session_id, parent_id, kind, role, time, payload)
			VALUES(?1, ?2, COALESCE(?3, (SELECT id FROM events WHERE session_id = ?2 ORDER BY seq DESC LIMIT 1)), ?4, ?5, ?6, ?7)`)
		if err != nil {
			db.Close()
			return nil, err
		}
		return &sqliteStore{db: db, insert: insert, pending: map[uuid.UUID]uuid.UUID{}}, nil
	}
}

// openSQLiteRead opens the database read-only: mode=ro (SQLite opens the
// file with O_RDONLY) and query_only, no DDL, no journal_mode pragma (WAL
// mode is recorded in the file), no statement prepared for appends.
func openSQLiteRead(dir string) (Store, error) {
	dsn := fmt.Sprintf("file:%s?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)", filepath.Join(dir, "session.db"))
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &sqliteStore{db: db, pending: map[uuid.UUID]uuid.UUID{}}, nil
}

func (s *sqliteStore) Create(ctx context.Context, name string) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return id, err
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO sessions(id, name, created_at) VALUES(?, ?, ?)`, id[:], name, time.Now().UnixNano())
	return id, err
}

// takePending returns the Branch selection as a query argument (nil:
// the newest event) and clears it.
func (s *sqliteStore) takePending(session uuid.UUID) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.pending[session]; ok {
		delete(s.pending, session)
		return p[:]
	}
	return nil
}

func (s *sqliteStore) Append(ctx context.Context, session uuid.UUID, ev Event) (uuid.UUID, error) {
	id, err := uuid.NewV7()
	if err != nil {
		return id, err
	}
	_, err = s.insert.ExecContext(ctx, id[:], session[:], s.takePending(session), ev.Kind, ev.Role, time.Now().UnixNano(), []byte(ev.Payload))
	return id, err
}

func (s *sqliteStore) AppendBatch(ctx context.Context, session uuid.UUID, evs []Event) ([]uuid.UUID, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	st := tx.StmtContext(ctx, s.insert)
	parent := s.takePending(session)
	ids := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		if _, err := st.ExecContext(ctx, id[:], session[:], parent, ev.Kind, ev.Role, time.Now().UnixNano(), []byte(ev.Payload)); err != nil {
			return nil, err
		}
		ids[i] = id
		parent = id[:]
	}
	return ids, tx.Commit()
}

func (s *sqliteStore) Branch(ctx context.Context, session, from uuid.UUID) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[session] = from
	return nil
}

func (s *sqliteStore) Load(ctx context.Context, session uuid.UUID) ([]Event, error) {
	// UNION ALL in a recursive CTE yields rows in the order it generates
	// them, HEAD first; reversing in Go spares SQLite a sort.
	rows, err := s.db.QueryContext(ctx, `
WITH RECURSIVE path(id, parent_id, kind, role, time, payload) AS (
	SELECT id, parent_id, kind, role, time, payload FROM events
	WHERE seq = (SELECT max(seq) FROM events WHERE session_id = ?)
	UNION ALL
	SELECT e.id, e.parent_id, e.kind, e.role, e.time, e.payload
	FROM events e JOIN path p ON e.id = p.parent_id
)
SELECT id, parent_id, kind, role, time, payload FROM path`, session[:])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var (
			id, parent, payload []byte // Scan copies into a *[]byte
			ev                  Event
			t                   int64
		)
		if err := rows.Scan(&id, &parent, &ev.Kind, &ev.Role, &t, &payload); err != nil {
			return nil, err
		}
		ev.Payload = payload
		copy(ev.ID[:], id)
		copy(ev.ParentID[:], parent)
		ev.Time = time.Unix(0, t).UTC()
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

func (s *sqliteStore) Tree(ctx context.Context, session uuid.UUID) ([]Node, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, parent_id, kind, role, time, length(payload)
		FROM events WHERE session_id = ? ORDER BY seq`, session[:])
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		out        []Node
		id, parent sql.RawBytes
	)
	for rows.Next() {
		var (
			n Node
			t int64
		)
		if err := rows.Scan(&id, &parent, &n.Kind, &n.Role, &t, &n.Size); err != nil {
			return nil, err
		}
		copy(n.ID[:], id)
		copy(n.ParentID[:], parent)
		n.Time = time.Unix(0, t).UTC()
		out = append(out, n)
	}
	return out, rows.Err()
}

func (s *sqliteStore) List(ctx context.Context) ([]SessionInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, created_at FROM sessions ORDER BY id`)
	if err != nil {
		return nil, err
	}
	return scanSessions(rows)
}

// ListRecent walks the primary key backwards: ids are UUIDv7 blobs, so id
// order is creation order.
func (s *sqliteStore) ListRecent(ctx context.Context, n int) ([]SessionInfo, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, name, created_at FROM sessions ORDER BY id DESC LIMIT ?`, n)
	if err != nil {
		return nil, err
	}
	return scanSessions(rows)
}

func scanSessions(rows *sql.Rows) ([]SessionInfo, error) {
	defer rows.Close()
	var (
		out []SessionInfo
		id  sql.RawBytes
	)
	for rows.Next() {
		var (
			si SessionInfo
			t  int64
		)
		if err := rows.Scan(&id, &si.Name, &t); err != nil {
			return nil, err
		}
		copy(si.ID[:], id)
		si.CreatedAt = time.Unix(0, t).UTC()
		out = append(out, si)
	}
	return out, rows.Err()
}

// BuildSessions (bulkBuilder) creates one session per name, each holding
// evs, in one transaction.
func (s *sqliteStore) BuildSessions(ctx context.Context, names []string, evs []Event) ([]uuid.UUID, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	ins := tx.StmtContext(ctx, s.insert)
	ids := make([]uuid.UUID, len(names))
	for i, name := range names {
		id, err := uuid.NewV7()
		if err != nil {
			return nil, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO sessions(id, name, created_at) VALUES(?, ?, ?)`, id[:], name, time.Now().UnixNano()); err != nil {
			return nil, err
		}
		var parent any
		for _, ev := range evs {
			eid, err := uuid.NewV7()
			if err != nil {
				return nil, err
			}
			if _, err := ins.ExecContext(ctx, eid[:], id[:], parent, ev.Kind, ev.Role, time.Now().UnixNano(), []byte(ev.Payload)); err != nil {
				return nil, err
			}
			parent = eid[:]
		}
		ids[i] = id
	}
	return ids, tx.Commit()
}

func (s *sqliteStore) Close() error {
	if s.insert != nil {
		s.insert.Close()
	}
	return s.db.Close()
}
