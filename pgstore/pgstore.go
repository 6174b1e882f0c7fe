// Package pgstore keeps the sessions of a sessionstore Store in PostgreSQL:
// a sessionstore.ObjectStore over one table, for the harnesses that
// already keep their state in Postgres rather than in an object store.
//
//	pool, err := pgxpool.New(ctx, "postgres://...")
//	obj, err := pgstore.New(ctx, pool, nil)
//	s, err := sessionstore.Open(dir, &sessionstore.Options{Remote: obj})
//
// Every object is a row (key, data, modified) of the table, which New
// creates if it is absent. A Create is an INSERT that does nothing on a
// conflict of the primary key, so of any number of concurrent Creates of
// one key exactly one inserts its row, as the Store's fencing needs (see
// sessionstore.ObjectStore). A commit group of the Store is one such
// INSERT of its log object: no object store request per append.
//
// With Options.Bulk set, the sealed chunks and blobs (the objects for
// which sessionstore.IsBulkKey holds: written once, possibly large, read
// by ranges) go to that ObjectStore instead (an S3 bucket through the
// module github.com/sessionstore/sessionstore/remote, say), and every
// other object, the log among them, stays in Postgres.
//
// # Durability
//
// A Create or Put returns nil once PostgreSQL committed the row: durable
// on the server by its settings (synchronous_commit on, the default, is
// what the Store's contract assumes; with it off, a server crash can lose
// rows the Store was told are stored). Any transaction isolation works:
// under REPEATABLE READ or SERIALIZABLE a Create that loses a race fails
// with a serialization error, which the binding runs again until it sees
// the winner's row (ErrObjectExists). A call whose connection broke may
// have committed or not, as a request to an object store whose answer was
// lost: the Store treats its outcome as unknown (sessionstore.ErrRemote).
//
// # Limits
//
// A row's data is a bytea: at most MaxObjectSize (1 GiB less 1 MiB). A
// larger object is refused with ErrTooLarge before anything is sent; set Options.Bulk to keep
// large blobs elsewhere. The modification times are the server's clock
// (clock_timestamp()); with Options.Bulk, the Store compares the bulk
// store's times with the server's to age unreferenced objects, so the
// two clocks must agree to well within Options.LeaseTime.
package pgstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/sessionstore/sessionstore"
)

// DefaultTable is the table New uses when Options.Table is empty.
const DefaultTable = "sessionstore_objects"

// MaxObjectSize is the largest object a row takes: PostgreSQL's limit of
// a bytea value (1 GiB - 1) less 1 MiB, kept for the key and the rest of
// the protocol message that carries the value (pgx refuses a message
// past the limit).
const MaxObjectSize = 1<<30 - 1 - 1<<20

// ErrTooLarge is returned by Create and Put for data longer than
// MaxObjectSize.
var ErrTooLarge = errors.New("pgstore: object larger than a PostgreSQL bytea value can be")

// Options configures New. The zero value keeps every object in the table
// DefaultTable.
type Options struct {
	// Table is the table the objects are kept in: a name, or
	// schema.name, each of letters, digits and underscores. New creates
	// it when it is absent. Several Stores may share one table; Stores
	// meant to be apart use different tables (or databases).
	Table string
	// Bulk, when set, keeps the objects for which sessionstore.IsBulkKey
	// holds (sealed chunks, blobs), and Postgres the rest. It may be set
	// on a table that already holds such objects: Get and Stat look in
	// the table for a key the bulk store lacks, listings hold both, and
	// Delete removes a bulk key from both.
	Bulk sessionstore.ObjectStore
}

// Store is a sessionstore.ObjectStore (and ObjectListerAfter) in a
// PostgreSQL table. It is safe for concurrent use.
type Store struct {
	db    *pgxpool.Pool
	table string // quoted
	bulk  sessionstore.ObjectStore

	// The statements, with the table named.
	create, put, get, getAll, stat, del string
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// New returns the Store over db's table (Options.Table, or DefaultTable),
// creating the table if it is absent. The pool stays the caller's to
// close, after the Stores that use it.
func New(ctx context.Context, db *pgxpool.Pool, opts *Options) (*Store, error) {
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	parts := strings.Split(o.Table, ".")
	if len(parts) > 2 {
		return nil, fmt.Errorf("pgstore: table %q: at most a schema and a name", o.Table)
	}
	for _, p := range parts {
		if !identRE.MatchString(p) {
			return nil, fmt.Errorf("pgstore: table %q: %q is not a name of letters, digits and underscores", o.Table, p)
		}
	}
	t := pgx.Identifier(parts).Sanitize()
	s := &Store{
		db: db, table: t, bulk: o.Bulk,
		create: `INSERT INTO ` + t + ` (key, data, modified) VALUES ($1, $2, clock_timestamp()) ON CONFLICT (key) DO NOTHING`,
		put: `INSERT INTO ` + t + ` (key, data, modified) VALUES ($1, $2, clock_timestamp())
			ON CONFLICT (key) DO UPDATE SET data = excluded.data, modified = excluded.modified`,
		get:    `SELECT substring(data FROM $2 FOR $3), octet_length(data) FROM ` + t + ` WHERE key = $1`,
		getAll: `SELECT substring(data FROM $2), octet_length(data) FROM ` + t + ` WHERE key = $1`,
		stat:   `SELECT octet_length(data), modified FROM ` + t + ` WHERE key = $1`,
		del:    `DELETE FROM ` + t + ` WHERE key = $1`,
	}
	if err := s.createTable(ctx, o.Table); err != nil {
		return nil, err
	}
	return s, nil
}

// createTable creates the table if it is absent. Keys are bytea, so that
// their order is byte order whatever the database's collation, as the
// Store's listings need. The data is kept uncompressed (STORAGE
// EXTERNAL): the Store compresses its chunks itself, and a ranged read of
// an uncompressed value reads only the pages it needs. Two processes that
// create the table at once may see PostgreSQL refuse one of them (a
// unique violation in its catalogue, or the table's row type found to
// exist): it looks again.
func (s *Store) createTable(ctx context.Context, name string) error {
	for attempt := 0; ; attempt++ {
		var exists bool
		if err := s.db.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, s.table).Scan(&exists); err != nil {
			return fmt.Errorf("pgstore: table %s: %w", name, err)
		}
		if exists {
			return nil
		}
		err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
				key bytea PRIMARY KEY,
				data bytea NOT NULL,
				modified timestamptz NOT NULL
			)`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `ALTER TABLE `+s.table+` ALTER COLUMN data SET STORAGE EXTERNAL`)
			return err
		})
		var pe *pgconn.PgError
		if err == nil || (attempt < 3 && errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P07" || pe.Code == "42710")) {
			continue
		}
		return fmt.Errorf("pgstore: create table %s: %w", name, err)
	}
}

// bulkFor reports whether key's object is kept in Options.Bulk.
func (s *Store) bulkFor(key string) bool {
	return s.bulk != nil && sessionstore.IsBulkKey(key)
}

// Create inserts key's row if the table has none, else returns an error
// matching sessionstore.ErrObjectExists: of concurrent Creates of one key,
// exactly one inserts (the primary key's uniqueness).
func (s *Store) Create(ctx context.Context, key string, data []byte) error {
	if s.bulkFor(key) {
		return s.bulk.Create(ctx, key, data)
	}
	if len(data) > MaxObjectSize {
		return fmt.Errorf("pgstore: create %s: %d bytes: %w", key, len(data), ErrTooLarge)
	}
	var tag pgconn.CommandTag
	err := s.retry(ctx, false, func() (err error) {
		tag, err = s.db.Exec(ctx, s.create, []byte(key), nonNil(data))
		return err
	})
	if err != nil {
		return fmt.Errorf("pgstore: create %s: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("pgstore: create %s: %w", key, sessionstore.ErrObjectExists)
	}
	return nil
}

// Put inserts or replaces key's row.
func (s *Store) Put(ctx context.Context, key string, data []byte) error {
	if s.bulkFor(key) {
		return s.bulk.Put(ctx, key, data)
	}
	if len(data) > MaxObjectSize {
		return fmt.Errorf("pgstore: put %s: %d bytes: %w", key, len(data), ErrTooLarge)
	}
	if err := s.retry(ctx, false, func() error {
		_, err := s.db.Exec(ctx, s.put, []byte(key), nonNil(data))
		return err
	}); err != nil {
		return fmt.Errorf("pgstore: put %s: %w", key, err)
	}
	return nil
}

// retry runs call, and again when it failed in a way that makes running
// it again safe, while ctx lasts:
//
//   - a serialization failure or deadlock (40001, 40P01, up to 10 runs):
//     PostgreSQL rolled the statement back, so it wrote nothing. Under
//     REPEATABLE READ or SERIALIZABLE (a default_transaction_isolation of
//     the server, database or role), an INSERT ... ON CONFLICT that loses
//     a race to another inserts fails so, rather than doing nothing; run
//     again, it sees the winner's row and a Create returns
//     ErrObjectExists, as fencing needs.
//   - a connection that broke (a restarted server, a network that dropped
//     the pooled connection), once: a read whatever it sent, a write only
//     when pgx says nothing of it reached the server
//     (pgconn.SafeToRetry). A write whose connection broke after sending
//     is never repeated: its outcome is unknown, and the Store settles it
//     by what the table holds.
func (s *Store) retry(ctx context.Context, read bool, call func() error) error {
	err := call()
	var pe *pgconn.PgError
	for n := 1; n < 10 && errors.As(err, &pe) && (pe.Code == "40001" || pe.Code == "40P01") && ctx.Err() == nil; n++ {
		err = call()
	}
	if err == nil || ctx.Err() != nil {
		return err
	}
	if errors.As(err, &pe) || errors.Is(err, pgx.ErrNoRows) {
		return err // the server answered
	}
	if pgconn.SafeToRetry(err) || (read && !pgconn.Timeout(err)) {
		return call()
	}
	return err
}

// nonNil gives a nil slice as an empty one: nil would be SQL's NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Get returns length bytes of key's object from offset, or all of it from
// offset when length is negative; fewer when the object ends first, and
// none when offset is at or past its end. An absent key returns an error
// matching sessionstore.ErrObjectNotFound. Only the asked bytes cross the
// connection.
func (s *Store) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if s.bulkFor(key) {
		b, err := s.bulk.Get(ctx, key, offset, length)
		if !errors.Is(err, sessionstore.ErrObjectNotFound) {
			return b, err
		}
		// Stored before Options.Bulk was set: in the table.
	}
	if offset < 0 {
		return nil, fmt.Errorf("pgstore: get %s: negative offset %d", key, offset)
	}
	// substring counts from 1, in int4: an offset past any value's end
	// reads nothing (the row's existence still checked).
	from := min(offset, MaxObjectSize) + 1
	var (
		data []byte
		size int64
		err  error
	)
	err = s.retry(ctx, true, func() error {
		if length < 0 {
			return s.db.QueryRow(ctx, s.getAll, []byte(key), from).Scan(&data, &size)
		}
		return s.db.QueryRow(ctx, s.get, []byte(key), from, min(length, MaxObjectSize)).Scan(&data, &size)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgstore: get %s: %w", key, sessionstore.ErrObjectNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("pgstore: get %s: %w", key, err)
	}
	return nonNil(data), nil
}

// Stat returns key's size and the server's time of its last write, or an
// error matching sessionstore.ErrObjectNotFound.
func (s *Store) Stat(ctx context.Context, key string) (sessionstore.ObjectInfo, error) {
	if s.bulkFor(key) {
		info, err := s.bulk.Stat(ctx, key)
		if !errors.Is(err, sessionstore.ErrObjectNotFound) {
			return info, err
		}
		// Stored before Options.Bulk was set: in the table.
	}
	info := sessionstore.ObjectInfo{Key: key}
	err := s.retry(ctx, true, func() error {
		return s.db.QueryRow(ctx, s.stat, []byte(key)).Scan(&info.Size, &info.ModTime)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return sessionstore.ObjectInfo{}, fmt.Errorf("pgstore: stat %s: %w", key, sessionstore.ErrObjectNotFound)
	}
	if err != nil {
		return sessionstore.ObjectInfo{}, fmt.Errorf("pgstore: stat %s: %w", key, err)
	}
	return info, nil
}

// Delete removes key's row; an absent row is not an error. A bulk key is
// deleted from the bulk store and from the table (which holds it if it was
// stored before Options.Bulk was set). A Delete whose connection broke
// after sending is not repeated: a second run could remove an object
// created again in between.
func (s *Store) Delete(ctx context.Context, key string) error {
	if s.bulkFor(key) {
		if err := s.bulk.Delete(ctx, key); err != nil {
			return err
		}
	}
	if err := s.retry(ctx, false, func() error {
		_, err := s.db.Exec(ctx, s.del, []byte(key))
		return err
	}); err != nil {
		return fmt.Errorf("pgstore: delete %s: %w", key, err)
	}
	return nil
}

// List returns the objects whose keys start with prefix, in byte order:
// all of them when limit <= 0, else the first limit. It reads the primary
// key's index from prefix on, and stops at the prefix's end.
func (s *Store) List(ctx context.Context, prefix string, limit int) ([]sessionstore.ObjectInfo, error) {
	own, err := s.list(ctx, prefix, prefix, false, limit)
	if err != nil || s.bulk == nil || !sessionstore.BulkKeysUnder(prefix) {
		return own, err
	}
	bulk, err := s.bulk.List(ctx, prefix, limit)
	if err != nil {
		return nil, err
	}
	return merge(own, bulk, limit), nil
}

// ListAfter returns the first limit objects whose keys start with prefix
// and sort after after, in byte order, with one query. With Options.Bulk
// and a prefix that bulk keys may start with, the bulk store must list
// from a key on too, else the answer is errors.ErrUnsupported.
func (s *Store) ListAfter(ctx context.Context, prefix, after string, limit int) ([]sessionstore.ObjectInfo, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("pgstore: list %s after %s: limit %d, want > 0", prefix, after, limit)
	}
	var la sessionstore.ObjectListerAfter
	if s.bulk != nil && sessionstore.BulkKeysUnder(prefix) {
		var ok bool
		if la, ok = s.bulk.(sessionstore.ObjectListerAfter); !ok {
			return nil, fmt.Errorf("pgstore: list %s after %s: the bulk store cannot: %w", prefix, after, errors.ErrUnsupported)
		}
	}
	start, excl := prefix, false
	if after >= prefix {
		start, excl = after, true
	}
	own, err := s.list(ctx, prefix, start, excl, limit)
	if err != nil || la == nil {
		return own, err
	}
	bulk, err := la.ListAfter(ctx, prefix, after, limit)
	if err != nil {
		return nil, err
	}
	return merge(own, bulk, limit), nil
}

// list reads the rows from start on (after it when excl) while their keys
// start with prefix, at most limit of them when limit > 0.
func (s *Store) list(ctx context.Context, prefix, start string, excl bool, limit int) ([]sessionstore.ObjectInfo, error) {
	op := ">="
	if excl {
		op = ">"
	}
	q := `SELECT key, octet_length(data), modified FROM ` + s.table + ` WHERE key ` + op + ` $1`
	args := []any{[]byte(start)}
	if end, ok := prefixEnd(prefix); ok {
		q += ` AND key < $2`
		args = append(args, end)
	}
	q += ` ORDER BY key`
	if limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, limit)
	}
	var out []sessionstore.ObjectInfo
	err := s.retry(ctx, true, func() error {
		out = nil
		rows, err := s.db.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				key  []byte
				info sessionstore.ObjectInfo
			)
			if err := rows.Scan(&key, &info.Size, &info.ModTime); err != nil {
				return err
			}
			info.Key = string(key)
			out = append(out, info)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("pgstore: list %s: %w", prefix, err)
	}
	return out, nil
}

// prefixEnd returns the least byte string greater than every string that
// starts with prefix, or false when there is none (prefix is empty or all
// 0xff bytes).
func prefixEnd(prefix string) ([]byte, bool) {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < math.MaxUint8 {
			end[i]++
			return end[:i+1], true
		}
	}
	return nil, false
}

// merge returns the objects of a (the table's) and b (the bulk store's),
// each in key order, in key order, the first limit when limit > 0. A key
// in both (a bulk object stored in the table before Options.Bulk was set,
// and again since) is listed once, as the bulk store has it, which is
// what Get and Stat read.
func merge(a, b []sessionstore.ObjectInfo, limit int) []sessionstore.ObjectInfo {
	out := slices.Concat(b, a)
	slices.SortStableFunc(out, func(x, y sessionstore.ObjectInfo) int { return cmp.Compare(x.Key, y.Key) })
	out = slices.CompactFunc(out, func(x, y sessionstore.ObjectInfo) bool { return x.Key == y.Key })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out
}

// Drop deletes the table and every object in it: for tests and for
// removing a deployment; the Stores using it must be closed.
func (s *Store) Drop(ctx context.Context) error {
	if _, err := s.db.Exec(ctx, `DROP TABLE IF EXISTS `+s.table); err != nil {
		return fmt.Errorf("pgstore: drop %s: %w", s.table, err)
	}
	return nil
}

var (
	_ sessionstore.ObjectStore       = (*Store)(nil)
	_ sessionstore.ObjectListerAfter = (*Store)(nil)
)
