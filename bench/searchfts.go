package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
)

// ftsIndex is the search workload's SQLite FTS5 peer: one database file
// (search.db, WAL mode) with one FTS5 table,
//
//	fts(session UNINDEXED, event UNINDEXED, text)
//	    tokenize = 'unicode61 remove_diacritics 0'
//
// one row per event: the session's and the event's ids (16-byte blobs,
// the ids sessionstore gave the same events) and the event's text as the
// store's search reads it (internal/search.RecordText: the record's
// string values, object keys left out, each followed by a newline). unicode61 splits text into runs of letters and digits and folds
// case, as the store's search does; remove_diacritics 0 keeps accents as
// the store does. detail=full (the default) keeps token positions, which
// phrase queries need.
type ftsIndex struct {
	db    *sql.DB
	query *sql.Stmt
}

const ftsSchema = `CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(session UNINDEXED, event UNINDEXED, text, tokenize = 'unicode61 remove_diacritics 0')`

// ftsSnippet is the snippet the peer returns with each hit: up to 16
// tokens of the text around the match, the match in brackets.
const ftsSnippet = `snippet(fts, 2, '[', ']', '…', 16)`

// openFTSBuild opens (creating) search.db under dir for building:
// synchronous=NORMAL, since the build is not what is compared.
func openFTSBuild(dir string) (*ftsIndex, error) {
	dsn := fmt.Sprintf("file:%s?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)", filepath.Join(dir, "search.db"))
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(ftsSchema); err != nil {
		db.Close()
		return nil, err
	}
	return &ftsIndex{db: db}, nil
}

// openFTSRead opens search.db read-only (mode=ro, query_only), as the
// read workloads open SQLite, and prepares the query: the rows matching,
// in FTS5's bm25 rank order (best first) when ranked, else in rowid order
// (the order the events were added), at most limit of them, each with its
// snippet and rank.
func openFTSRead(dir string, ranked bool) (*ftsIndex, error) {
	dsn := fmt.Sprintf("file:%s?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)", filepath.Join(dir, "search.db"))
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	order := ""
	if ranked {
		order = " ORDER BY rank"
	}
	q, err := db.Prepare(`SELECT session, event, ` + ftsSnippet + `, rank FROM fts WHERE fts MATCH ?` + order + ` LIMIT ?`)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &ftsIndex{db: db, query: q}, nil
}

func (f *ftsIndex) Close() error {
	var err error
	if f.query != nil {
		err = f.query.Close()
	}
	return errors.Join(err, f.db.Close())
}

// ftsRow is one event to add.
type ftsRow struct {
	rowid          int64
	session, event uuid.UUID
	text           string
}

// add inserts rows in one transaction.
func (f *ftsIndex) add(ctx context.Context, rows []ftsRow) error {
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	ins, err := tx.PrepareContext(ctx, `INSERT INTO fts(rowid, session, event, text) VALUES(?, ?, ?, ?)`)
	if err != nil {
		return errors.Join(err, tx.Rollback())
	}
	for _, r := range rows {
		if _, err := ins.ExecContext(ctx, r.rowid, r.session[:], r.event[:], r.text); err != nil {
			return errors.Join(err, ins.Close(), tx.Rollback())
		}
	}
	if err := ins.Close(); err != nil {
		return errors.Join(err, tx.Rollback())
	}
	return tx.Commit()
}

// optimize merges the index's segments into one (FTS5's 'optimize'
// command), the state a careful user leaves a bulk-loaded index in, then
// checkpoints the WAL into the database file.
func (f *ftsIndex) optimize(ctx context.Context) error {
	if _, err := f.db.ExecContext(ctx, `INSERT INTO fts(fts) VALUES('optimize')`); err != nil {
		return err
	}
	_, err := f.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
	return err
}

// ftsSizes are the bytes of the FTS5 table's parts (the dbstat virtual
// table: pages of each b-tree): the inverted index (fts_data, fts_idx),
// the text as stored (fts_content), and the rest (fts_docsize,
// fts_config, the schema).
type ftsSizes struct {
	index, content, other int64
}

func (f *ftsIndex) sizes(ctx context.Context) (ftsSizes, error) {
	var s ftsSizes
	rows, err := f.db.QueryContext(ctx, `SELECT name, SUM(pgsize) FROM dbstat GROUP BY name`)
	if err != nil {
		return s, err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name string
			n    int64
		)
		if err := rows.Scan(&name, &n); err != nil {
			return s, err
		}
		switch {
		case name == "fts_data" || name == "fts_idx" || strings.HasPrefix(name, "sqlite_autoindex_fts_idx"):
			s.index += n
		case name == "fts_content":
			s.content += n
		default:
			s.other += n
		}
	}
	return s, rows.Err()
}

// searchHit is one hit of either side, as the workload checks it.
type searchHit struct {
	session, event uuid.UUID
	snippet        string
	rank           float64
}

// search runs the prepared query and returns its hits.
func (f *ftsIndex) search(ctx context.Context, match string, limit int) ([]searchHit, error) {
	rows, err := f.query.QueryContext(ctx, match, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []searchHit
	for rows.Next() {
		var (
			s, e []byte
			h    searchHit
		)
		if err := rows.Scan(&s, &e, &h.snippet, &h.rank); err != nil {
			return nil, err
		}
		if len(s) != 16 || len(e) != 16 {
			return nil, fmt.Errorf("fts: a row's ids have %d and %d bytes", len(s), len(e))
		}
		h.session, h.event = uuid.UUID(s), uuid.UUID(e)
		out = append(out, h)
	}
	return out, rows.Err()
}

// text returns the text of the row of an event (by its rowid).
func (f *ftsIndex) text(ctx context.Context, rowid int64) (string, error) {
	var t string
	err := f.db.QueryRowContext(ctx, `SELECT text FROM fts WHERE rowid = ?`, rowid).Scan(&t)
	return t, err
}
