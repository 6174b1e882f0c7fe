package main

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/google/uuid"
)

// Event is what every peer stores: id, parent id, session id (implicit in
// the session's file, bucket or column), time, kind, role and the payload
// (the record, compact JSON).
type Event struct {
	ID, ParentID uuid.UUID // assigned by the store; ParentID is uuid.Nil for a root
	Kind, Role   string
	Time         time.Time // assigned by the store
	Payload      json.RawMessage
}

// Node is the payload-free view of an event, for a timeline.
type Node struct {
	ID, ParentID uuid.UUID
	Kind, Role   string
	Time         time.Time
	Size         int64 // bytes of the payload
}

// SessionInfo is what a session list shows.
type SessionInfo struct {
	ID        uuid.UUID
	Name      string
	CreatedAt time.Time
}

// Store is the one interface every peer implements. All methods are safe
// for concurrent use. Append and AppendBatch are durable when they return
// nil, to the degree the peer's label says (sqlite-normal is not
// power-loss safe).
type Store interface {
	// Create makes a new, empty session, durable (to the degree the
	// peer's label says) when it returns nil.
	Create(ctx context.Context, name string) (uuid.UUID, error)
	// Append adds ev as a child of the session's HEAD (its newest event),
	// or of the event chosen by Branch, and makes it HEAD.
	Append(ctx context.Context, session uuid.UUID, ev Event) (uuid.UUID, error)
	// AppendBatch appends evs, each the parent of the next, with one
	// durability barrier (one transaction, one write + sync).
	AppendBatch(ctx context.Context, session uuid.UUID, evs []Event) ([]uuid.UUID, error)
	// Branch makes the next Append a child of from; HEAD does not move
	// until then.
	Branch(ctx context.Context, session, from uuid.UUID) error
	// Load returns the active path, root to HEAD, with payloads, found by
	// following parent ids from HEAD.
	Load(ctx context.Context, session uuid.UUID) ([]Event, error)
	// Tree returns every event of the session without payloads, in
	// append order.
	Tree(ctx context.Context, session uuid.UUID) ([]Node, error)
	// List returns every session.
	List(ctx context.Context) ([]SessionInfo, error)
	// ListRecent returns the n newest sessions (by id: UUIDv7, so in
	// creation order), newest first.
	ListRecent(ctx context.Context, n int) ([]SessionInfo, error)
	// Close releases everything; the store is reopened with Peer.Open.
	Close() error
}

// writePreparer is implemented by a store that takes setup before a
// write workload (appends or creates), which the workload does after Open
// and before the timed region: the raw floor preallocates the bytes the
// writes will take; bbolt switches to db.Batch when there are several
// writers.
type writePreparer interface {
	PrepareWrites(writers int, bytes int64) error
}

// errUnsupported is returned by the raw peers for everything but appends.
var errUnsupported = errors.New("not supported by this peer")

// Peer is a store implementation under test.
type Peer struct {
	Name  string // command-line and child-process name
	Label string // column header
	// Open opens (creating it if needed) the store rooted at dir.
	Open func(dir string) (Store, error)
	// OpenRead opens an existing store read-only, doing no setup and no
	// write: what the read workloads time (fresh-process open + load and
	// tree, open + list). Nil for a peer that does not read.
	OpenRead func(dir string) (Store, error)
	// Writes: the peer takes part in the append workloads.
	Writes bool
	// Reads: the peer takes part in the load, list, tree and disk
	// workloads (sqlite-normal shares sqlite-full's file format and read
	// path, the raw peers have no read path).
	Reads bool
	// Only, when set, names the only workloads the peer takes part in
	// (sessionstore-enc: the rows of encryption's cost).
	Only []string
}

// allPeers lists the peers in the order they alternate within a
// repetition and appear in the tables. The first is the subject.
func allPeers() []Peer {
	return []Peer{
		{Name: "sessionstore", Label: "sessionstore", Open: openSessionstore(0), OpenRead: openSessionstoreRead, Writes: true, Reads: true},
		{Name: "sessionstore-enc", Label: "sessionstore, encrypted (Options.Keys)", Open: openSessionstoreEnc, OpenRead: openSessionstoreEncRead, Writes: true, Reads: true,
			Only: []string{"append300", "tool64k", "openload"}},
		{Name: "sessionstore-searched", Label: "sessionstore, searched every 50 ms while appending", Open: openSessionstoreSearched, Writes: true,
			Only: []string{"append300", "tool64k"}},
		{Name: "raw", Label: "raw floor (preallocated, group commit)", Open: openRawFloor, Writes: true},
		{Name: "raw-grow", Label: "raw, growing file (extra, not the floor)", Open: openRawGrow, Writes: true},
		{Name: "sqlite-full", Label: "SQLite WAL FULL", Open: openSQLite("FULL"), OpenRead: openSQLiteRead, Writes: true, Reads: true},
		{Name: "sqlite-normal", Label: "SQLite WAL NORMAL (not power-loss safe)", Open: openSQLite("NORMAL"), Writes: true},
		{Name: "bbolt", Label: "bbolt", Open: openBolt, OpenRead: openBoltRead, Writes: true, Reads: true},
		{Name: "jsonl", Label: "naive JSONL", Open: openJSONL, OpenRead: openJSONLRead, Writes: true, Reads: true},
		// git is no Store: the workspace workload runs the git binary
		// (workspace.go).
		{Name: gitPeerName, Label: "git", Only: []string{"workspace"}},
		// SQLite FTS5 is no Store: the search workload indexes text in it
		// (searchfts.go).
		{Name: ftsPeerName, Label: "SQLite FTS5", Only: []string{"search"}},
	}
}

// sessionstore64k is sessionstore with 64 KiB chunks, for the disk
// workload: small chunks seal (compress) early, as the bulk of a long
// session is.
var sessionstore64k = Peer{Name: "sessionstore-64k", Label: "sessionstore, 64 KiB chunks", Open: openSessionstore(64 << 10), OpenRead: openSessionstoreRead, Reads: true}

// peerByName finds a peer, including the disk-only variant.
func peerByName(name string) (Peer, bool) {
	for _, p := range append(allPeers(), sessionstore64k) {
		if p.Name == name {
			return p, true
		}
	}
	return Peer{}, false
}

// appendOne appends ev alone through a peer's batch append and returns
// its id.
func appendOne(appendBatch func(uuid.UUID, []Event) ([]uuid.UUID, error), session uuid.UUID, ev Event) (uuid.UUID, error) {
	ids, err := appendBatch(session, []Event{ev})
	if err != nil {
		return uuid.Nil, err
	}
	return ids[0], nil
}
