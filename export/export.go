// Package export writes a stored session out of the store: as JSON lines,
// for another program or an archive (JSONL, read back by Reader), or as a
// Markdown transcript for people (Markdown).
//
// Both read the session through a *sessionstore.Store (a read-only one is
// enough, and is safe beside a writer) and write as they go, through a
// buffer: the output is never built in memory, and the first failed write
// stops the export and is returned. Records are read a path at a time
// with Store.FullPath, which holds one path's records in memory and reads
// them in sequence (reading events one by one costs a decompressed frame
// each on a closed session); each event is written once, and a tree with
// b branches off a path of depth d reads about b*d records more than it
// writes. A tree export holds the last path it read until its events'
// turns come, and of the paths read before it at most 32 MiB of records;
// past that it drops those whose turn is furthest and reads them again at
// their turn (a session of lanes appended in turn reads its paths again,
// about once per 32 MiB), so memory stays near one path's records however
// many branches the session has.
//
// Markdown's transcript is described at Markdown; it is for reading, and
// no reader of it is offered.
//
// # The JSONL format, version 1
//
// The output is UTF-8 text (but for the bytes of a record that are not:
// the store keeps a record's bytes as given, and the export writes them as
// they are), one JSON object per line, each line ending in "\n". The first line is the header (Header):
//
//	{"format":"sessionstore-export","version":1,"scope":"tree","blobs":"inline","session":{...},"head":"<id>","lanes":[...],"events":3}
//
// Its members:
//
//   - "format" is always "sessionstore-export"; "version" is 1. A reader
//     refuses another format or a version it does not know.
//   - "scope" says which events follow: "tree" (every event of the session,
//     every branch), "path" (the active path, from the root to the event
//     the next append extends, Store.NextParent: HEAD, or the tip of a
//     lane switched to and not appended to yet; the whole history past
//     compactions, as Store.FullPath returns it) or "context"
//     (what Store.Load returns: the newest compaction on the path, the
//     events it keeps verbatim, then everything after it).
//   - "blobs" is "inline" (every record is in its line) or "files" (records
//     stored as blobs are files beside the export, see below).
//   - "session" is the session's sessionstore.Meta, in its encoding/json form.
//   - "head" is the session's HEAD (null for a session without events);
//     "lanes", present only when the session has named lanes besides the
//     implicit one, lists them sorted by name (Lane), a lane without a
//     tip with "tip":null.
//   - "events" is the number of event lines that follow, so that a reader
//     tells a whole export from a cut one.
//
// Then come the events, one a line, each the encoding/json form of
// sessionstore.Event but for a root's parent: "id", "parent_id" (null for
// a root),
// "branch_from" (only on an event that starts a branch), "kind", "role"
// (absent for none), "timestamp" (RFC 3339, UTC), "record" (the record's
// JSON), "digest" (only for a record stored as a blob: "sha256:<hex>" of the
// record's bytes) and "size" (the record's length in bytes). With scope "tree"
// they come in append order, so every parent before its children; with
// "path", oldest first; with "context", in Load's order.
//
//	{"id":"01a039f0-0000-7000-8000-9e3779b10001","parent_id":null,"kind":"message","role":"user","timestamp":"2026-08-25T17:00:01Z","record":{"content":"The build fails. Fix it."},"size":38}
//	{"id":"01a039f0-0000-7000-8000-538453d70007","parent_id":"01a039f0-0000-7000-8000-b54cda260006","kind":"tool_result","role":"tool","timestamp":"2026-08-25T17:00:07Z","record":null,"digest":"sha256:eff396349f5bfca836179e1bf78da02e9ebe58a104bc36303663a3c3404d4e09","size":1024}
//
// The second line is a record stored as a blob, exported with BlobDir.
// Members are never removed or renamed within a version; Reader, of
// version 1, refuses members it does not know.
//
// Exports written before null stood for "no event" name the nil uuid
// ("00000000-0000-0000-0000-000000000000") in "parent_id", "head" and
// "tip" instead; Reader reads either as uuid.Nil, and so does every
// earlier Reader of version 1 (encoding/json leaves a uuid.UUID zero for
// a JSON null), so the version is unchanged.
//
// Records stored as blobs are written in one of two ways. Inline (the
// default), the record is in its line and "digest" and "size" stay, so a
// reader can check it. With Options.BlobDir, each blob is written once as the
// file <BlobDir>/sha256-<hex> holding the record's bytes (the file's SHA-256
// is <hex>), and its line holds "record":null with "digest" and "size".
// An existing file whose content matches its name is kept as it is, so that
// exports of several sessions may share one directory.
//
// # Workspace snapshots
//
// A workspace snapshot (sessionstore's Workspaces: Store.SnapshotDir,
// Store.RecordFiles) is a custom event whose record is its manifest,
// {"sessionstore":"snapshot",...}, listing files by path, mode, size and
// the digest of their content ("sha256:<hex>"); the contents are blobs
// of the session, not records. An export carries them in the
// manifest's event line, in a "files" member after "size": one element
// per distinct content the manifest lists (a removed file has none), in
// the order of its files,
//
//	{"id":"...","parent_id":"...","kind":"custom","timestamp":"...","record":{"sessionstore":"snapshot","full":true,"files":[{"path":"main.go","mode":420,"size":13,"digest":"sha256:<hex>"}]},"size":118,"files":[{"digest":"sha256:<hex>","size":13,"data":"cGFja2FnZSBtYWluCg=="}]}
//
// With blobs inline, "data" is the content in base64 (standard, padded).
// With blobs as files (Options.BlobDir) an element has no "data": the
// content is the file <BlobDir>/sha256-<hex>, as a record's blob is
// (written once, kept when the directory holds it already; a content
// and a record of the same bytes are one file). ReadContent reads either.
//
// A snapshot's line carries every content its manifest names, so that
// it is whole by itself: a consumer needs no other line to have the
// files the snapshot wrote. A full manifest (the first of a path, and
// one every so often after it, see Workspaces) carries the whole
// workspace again; inline, that costs about what the deltas before it
// did, while BlobDir stores each content once however many snapshots
// name it. An export holds one content in memory at a time, but Reader
// holds a line whole, and reads lines of at most MaxLine: an inline
// snapshot of more than about 750 MiB of contents is for BlobDir.
//
// The manifest is exported as the store holds it (in an encrypted
// session, "blob" and "blob_size" name the sealed blobs in the store;
// the contents exported are the plain ones, named by "digest"). A
// consumer that recreates the snapshots in another store reads each
// manifest with ParseManifest and records it with Store.RecordFiles,
// which gives the event a new id: a delta's files are written (their
// contents from the line) or removed, a full manifest's written and
// every other file of the workspace as of its parent removed. With
// scope "context", the snapshots before the compaction are not exported,
// so a delta's base may not be in the export.
//
// Options.OmitFiles leaves the contents out: a snapshot's line is then
// as exports wrote it before they carried contents, without "files", and
// Reader.Contents returns nil for it. The version is still 1, as the
// lines of a session without snapshots are unchanged; a Reader of version
// 1 from before "files" refuses a line that has it (a member it does not
// know), so that it never takes such an export for whole.
//
// # Durability
//
// JSONL and Markdown flush their buffer before they return; making w durable
// is the caller's matter. Each blob file is written to a temporary file in
// BlobDir, synced and renamed to its name, and BlobDir is synced before JSONL
// returns, so every blob file a returned export names is durable when it
// returns nil; a crash leaves at most a temporary file (".sha256-*"), never a
// blob file with the wrong content.
package export

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// FormatName is the "format" member of an export's header line.
const FormatName = "sessionstore-export"

// Version is the version of the JSONL format this package writes and reads.
const Version = 1

// Scope selects the events an export holds.
type Scope string

// The scopes.
const (
	// Tree is every event of the session, every branch, in append order.
	// The default of JSONL.
	Tree Scope = "tree"
	// ActivePath is the active path, oldest first: from the root to the
	// event the next append extends (Store.NextParent: HEAD, or the tip
	// of a lane switched to and not appended to yet), with the whole
	// history past compactions (Store.FullPath). Context is its end. The
	// default of Markdown.
	ActivePath Scope = "path"
	// Context is the context a model sees (Store.Load): the newest
	// compaction on the active path, the events it keeps, and the rest.
	Context Scope = "context"
)

// Blob modes, the header's "blobs" member.
const (
	BlobsInline = "inline" // records stored as blobs are in their lines
	BlobsFiles  = "files"  // they are files in a directory beside the export
)

// Options tune an export. The zero value exports JSONL of the whole tree
// with blobs inline, and Markdown of the active path with long tool outputs
// cut.
type Options struct {
	// Scope selects the events; "" is Tree for JSONL and ActivePath for
	// Markdown (which refuses Tree: a transcript is one path).
	Scope Scope
	// BlobDir, for JSONL: write each record stored as a blob to
	// <BlobDir>/sha256-<hex> instead of into its line. The directory is
	// created (0700) if it does not exist. Markdown ignores it.
	BlobDir string
	// OmitFiles, for JSONL: leave out the contents of workspace
	// snapshots (see the package doc); their manifests are exported all
	// the same, as the custom events they are.
	OmitFiles bool
	// Full, for Markdown: write every tool output whole.
	Full bool
	// MaxOutput, for Markdown without Full: the bytes of a tool output
	// shown before it is cut (0: DefaultMaxOutput).
	MaxOutput int
}

// DefaultMaxOutput is the bytes of a tool output Markdown shows by default.
const DefaultMaxOutput = 4096

// Stats say what an export wrote.
type Stats struct {
	Events       int   // events written
	Bytes        int64 // bytes written to w
	Blobs        int   // events whose record is stored as a blob
	BlobFiles    int   // blob files written to BlobDir (not there already)
	BlobBytes    int64 // bytes of those files
	BlobsPresent int   // blob files found in BlobDir already, verified, and kept
	// FileContents counts the workspace contents the snapshot events'
	// lines carry or name (the same content in two snapshots counts
	// twice; in BlobDir it is one file, counted in BlobFiles or
	// BlobsPresent), and FileBytes their bytes.
	FileContents int
	FileBytes    int64
}

// Header is the first line of a JSONL export.
type Header struct {
	Format  string            `json:"format"`
	Version int               `json:"version"`
	Scope   Scope             `json:"scope"`
	Blobs   string            `json:"blobs"`
	Session sessionstore.Meta `json:"session"`
	Head    uuid.UUID         `json:"head"` // uuid.Nil for none: null in the line
	Lanes   []Lane            `json:"lanes,omitempty"`
	Events  int               `json:"events"`
}

// Lane is a named branch of the session, as the header lists it.
type Lane struct {
	Name   string    `json:"name"`
	Tip    uuid.UUID `json:"tip"` // uuid.Nil for none: null in the line
	Active bool      `json:"active,omitempty"`
	SetAt  time.Time `json:"set_at,omitzero"`
}

// headerLine is Header as the export's first line: a nil Head, and a
// lane's nil Tip, as null.
type headerLine struct {
	Format  string            `json:"format"`
	Version int               `json:"version"`
	Scope   Scope             `json:"scope"`
	Blobs   string            `json:"blobs"`
	Session sessionstore.Meta `json:"session"`
	Head    *uuid.UUID        `json:"head"`
	Lanes   []laneLine        `json:"lanes,omitempty"`
	Events  int               `json:"events"`
}

// laneLine is Lane in the header line: a nil Tip as null.
type laneLine struct {
	Name   string     `json:"name"`
	Tip    *uuid.UUID `json:"tip"`
	Active bool       `json:"active,omitempty"`
	SetAt  time.Time  `json:"set_at,omitzero"`
}

func newHeaderLine(h Header) headerLine {
	out := headerLine{Format: h.Format, Version: h.Version, Scope: h.Scope, Blobs: h.Blobs, Session: h.Session, Head: idOrNull(h.Head), Events: h.Events}
	for _, l := range h.Lanes {
		out.Lanes = append(out.Lanes, laneLine{Name: l.Name, Tip: idOrNull(l.Tip), Active: l.Active, SetAt: l.SetAt})
	}
	return out
}

// eventLine is sessionstore.Event as an event line: its encoding/json
// form, members in the same order, but for a root's parent_id, null
// rather than the nil uuid.
type eventLine struct {
	ID         uuid.UUID         `json:"id"`
	ParentID   *uuid.UUID        `json:"parent_id"`
	BranchFrom uuid.UUID         `json:"branch_from,omitzero"`
	Kind       sessionstore.Kind `json:"kind"`
	Role       sessionstore.Role `json:"role,omitempty"`
	Time       time.Time         `json:"timestamp"`
	Record     json.RawMessage   `json:"record"`
	Digest     string            `json:"digest,omitempty"`
	Size       int64             `json:"size"`
}

func newEventLine(ev sessionstore.Event) eventLine {
	return eventLine{ID: ev.ID, ParentID: idOrNull(ev.ParentID), BranchFrom: ev.BranchFrom, Kind: ev.Kind, Role: ev.Role, Time: ev.Time, Record: ev.Record, Digest: ev.Digest, Size: ev.Size}
}

// idOrNull is id, or nil (JSON null) for uuid.Nil: no event.
func idOrNull(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

// Errors of an export.
var (
	// ErrScope is returned for a Scope the function does not take.
	ErrScope = errors.New("export: unsupported scope")
	// ErrBlobFile is returned when a blob cannot be written to BlobDir.
	ErrBlobFile = errors.New("export: cannot write a blob file")
)

// countWriter counts the bytes written through it and keeps the first
// error, so that a failed write is seen at once.
type countWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	c.err = err
	return n, err
}

// output is the buffered writer of an export.
type output struct {
	cw *countWriter
	bw *bufio.Writer
}

func newOutput(w io.Writer) *output {
	cw := &countWriter{w: w}
	return &output{cw: cw, bw: bufio.NewWriterSize(cw, 64<<10)}
}

// err is the first write error, if any.
func (o *output) err() error { return o.cw.err }

func (o *output) flush() error {
	if err := o.bw.Flush(); err != nil {
		return fmt.Errorf("export: write: %w", err)
	}
	return nil
}

// writeErr wraps a write error.
func writeErr(err error) error { return fmt.Errorf("export: write: %w", err) }

// plan is what an export reads: the session, its HEAD and the ids of the
// events in output order (for Context, the events themselves).
type plan struct {
	meta  sessionstore.Meta
	scope Scope
	head  uuid.UUID // the session's HEAD, for the header
	// leaf is the end of the active path (Store.NextParent: HEAD, or the
	// tip of a lane switched to and not appended to yet), where
	// ActivePath ends.
	leaf   uuid.UUID
	nodes  []sessionstore.Node // the tree, append order
	ids    []uuid.UUID         // events to write, in order (Tree, ActivePath)
	loaded []sessionstore.Event
	lanes  []Lane // with wantLanes, for the header
}

// makePlan reads what scope needs, and with wantLanes the session's lanes.
// HEAD, the active path's end and the lanes are read before the tree, so
// the tree holds them, and every lane's tip, even while a writer appends.
func makePlan(ctx context.Context, st *sessionstore.Store, session uuid.UUID, scope Scope, needTree, wantLanes bool) (*plan, error) {
	meta, err := st.Meta(ctx, session)
	if err != nil {
		return nil, fmt.Errorf("export: session %s: %w", session, err)
	}
	p := &plan{meta: meta, scope: scope}
	if err := p.readActive(ctx, st, session); err != nil {
		return nil, err
	}
	if wantLanes {
		if p.lanes, err = lanesOf(ctx, st, session, p.head); err != nil {
			return nil, err
		}
	}
	if scope == Context && !needTree {
		return p, nil
	}
	if p.nodes, err = st.Tree(ctx, session); err != nil {
		return nil, fmt.Errorf("export: session %s: tree: %w", session, err)
	}
	switch scope {
	case Tree:
		p.ids = make([]uuid.UUID, len(p.nodes))
		for i, n := range p.nodes {
			p.ids[i] = n.ID
		}
	case ActivePath:
		if p.ids, err = pathTo(p.nodes, p.leaf); err != nil {
			return nil, fmt.Errorf("export: session %s: %w", session, err)
		}
	}
	return p, nil
}

// maxActiveReads bounds the tries of readActive.
const maxActiveReads = 8

// readActive reads HEAD and, for ActivePath, the active path's end
// (NextParent), for Context, Load's path, as they were at one moment:
// HEAD is read again after them until it has not moved meanwhile, so that
// an append between the reads (after a Branch in the writer, say) does not
// give a path HEAD is not on while no lane switch is pending. Beside a
// writer that appends without pause, after maxActiveReads tries, HEAD is
// taken to be the path's end (the appends go on from it).
func (p *plan) readActive(ctx context.Context, st *sessionstore.Store, session uuid.UUID) error {
	head, err := st.Head(ctx, session)
	if err != nil {
		return fmt.Errorf("export: session %s: HEAD: %w", session, err)
	}
	for range maxActiveReads {
		p.head = head
		switch p.scope {
		case ActivePath:
			if p.leaf, _, err = st.NextParent(ctx, session); err != nil {
				return fmt.Errorf("export: session %s: the active path's end: %w", session, err)
			}
		case Context:
			if p.loaded, err = st.Load(ctx, session); err != nil {
				return fmt.Errorf("export: session %s: load: %w", session, err)
			}
		default:
			return nil
		}
		if head, err = st.Head(ctx, session); err != nil {
			return fmt.Errorf("export: session %s: HEAD: %w", session, err)
		}
		if head == p.head {
			return nil
		}
	}
	switch {
	case p.scope == ActivePath:
		p.head, p.leaf = head, head
	case len(p.loaded) > 0:
		p.head = p.loaded[len(p.loaded)-1].ID
	}
	return nil
}

// pathTo returns the ids from the root to leaf, oldest first.
func pathTo(nodes []sessionstore.Node, leaf uuid.UUID) ([]uuid.UUID, error) {
	if leaf == uuid.Nil {
		return nil, nil
	}
	parent := make(map[uuid.UUID]uuid.UUID, len(nodes))
	for _, n := range nodes {
		parent[n.ID] = n.ParentID
	}
	var rev []uuid.UUID
	for id := leaf; id != uuid.Nil; {
		p, ok := parent[id]
		if !ok {
			return nil, fmt.Errorf("%w: event %s on the path to %s is not in the tree", sessionstore.ErrNotFound, id, leaf)
		}
		if len(rev) > len(nodes) {
			return nil, fmt.Errorf("export: the path to %s loops", leaf)
		}
		rev = append(rev, id)
		id = p
	}
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	return rev, nil
}

// count is the number of events the plan writes.
func (p *plan) count() int {
	if p.loaded != nil {
		return len(p.loaded)
	}
	return len(p.ids)
}

// each calls fn with each event of the plan in order, with its record
// (a blob's resolved).
//
// Records are read a path at a time, with Store.FullPath: a path's records
// lie in append order in the chunks, so one walk reads them in sequence,
// while Store.Event reads each one alone, decompressing a frame of a
// sealed chunk for every event (about a hundred times slower on a closed
// session). For ActivePath that is one FullPath to its end. For Tree, the
// first event not read yet names the path to read next: from it, down the
// first child of each event (the branch appended first) to a leaf; the
// events of that path not written yet are kept until their turn, and the
// rest (its prefix, written already) is read again. A tree with b branches
// off a path of depth d reads about b*d records more than it holds.
// The last path read is held whole; what earlier paths left for later is
// bounded (readAhead, pendingBudget).
func (p *plan) each(ctx context.Context, st *sessionstore.Store, session uuid.UUID, fn func(sessionstore.Event) error) error {
	if p.loaded != nil {
		for _, ev := range p.loaded {
			if err := fn(ev); err != nil {
				return err
			}
		}
		return nil
	}
	pos := make(map[uuid.UUID]int, len(p.ids)) // an event's turn
	for i, id := range p.ids {
		pos[id] = i
	}
	var firstChild map[uuid.UUID]uuid.UUID
	if p.scope == Tree {
		firstChild = make(map[uuid.UUID]uuid.UUID, len(p.nodes))
		for _, n := range p.nodes {
			if _, ok := firstChild[n.ParentID]; !ok {
				firstChild[n.ParentID] = n.ID
			}
		}
	}
	// The events of the last path read wait in cur, as FullPath returned
	// them (that path is in memory anyway); those of earlier paths, in
	// ahead, bounded.
	cur := map[uuid.UUID]sessionstore.Event{}
	ahead := newReadAhead(pendingBudget)
	for i, id := range p.ids {
		if err := ctx.Err(); err != nil {
			return err
		}
		ev, ok := cur[id]
		if ok {
			delete(cur, id)
		} else {
			ev, ok = ahead.take(id)
		}
		if !ok {
			leaf := p.leaf
			if p.scope == Tree {
				leaf = id
				for {
					c, ok := firstChild[leaf]
					if !ok {
						break
					}
					leaf = c
				}
			}
			path, err := st.FullPath(ctx, session, leaf)
			if err != nil {
				return fmt.Errorf("export: session %s: path to %s: %w", session, leaf, err)
			}
			for eid, e := range cur {
				ahead.add(e, pos[eid])
			}
			cur = make(map[uuid.UUID]sessionstore.Event, len(path))
			for _, e := range path {
				if e.ID == id {
					ev, ok = e, true
				} else if k, in := pos[e.ID]; in && k > i {
					if _, held := ahead.events[e.ID]; !held {
						cur[e.ID] = e
					}
				}
			}
			if !ok {
				return fmt.Errorf("export: session %s: event %s is not on the path to %s it was read from", session, id, leaf)
			}
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
	return nil
}

// pendingBudget is the bytes of records each keeps read ahead of their
// turn from paths before the last one read (a variable for tests).
var pendingBudget int64 = 32 << 20

// eventOverhead is what an event held costs besides its record's bytes.
const eventOverhead = 256

// readAhead holds events read before their turn, at most budget bytes of
// them: when full, it keeps the events whose turn comes first and drops
// the others, which are read again when their turn comes.
type readAhead struct {
	budget, bytes int64
	events        map[uuid.UUID]sessionstore.Event
	turns         turnHeap // turns of the events held, latest on top
}

func newReadAhead(budget int64) *readAhead {
	return &readAhead{budget: budget, events: map[uuid.UUID]sessionstore.Event{}}
}

func cost(ev sessionstore.Event) int64 { return int64(len(ev.Record)) + eventOverhead }

// add holds ev, whose turn is turn, unless it is held already or the
// budget is taken by events whose turn comes before.
func (r *readAhead) add(ev sessionstore.Event, turn int) {
	if _, ok := r.events[ev.ID]; ok {
		return
	}
	c := cost(ev)
	for r.bytes+c > r.budget && len(r.turns) > 0 && r.turns[0].turn > turn {
		top := heap.Pop(&r.turns).(heldTurn)
		if held, ok := r.events[top.id]; ok {
			r.bytes -= cost(held)
			delete(r.events, top.id)
		}
	}
	if r.bytes+c > r.budget {
		return
	}
	// A copy, so that the event held does not keep the buffer its record
	// was read into (a whole path's, or a chunk's) from being collected.
	ev.Record = bytes.Clone(ev.Record)
	r.events[ev.ID] = ev
	r.bytes += c
	heap.Push(&r.turns, heldTurn{turn: turn, id: ev.ID})
}

// take returns the event id and lets it go, if it is held. Its heap entry
// stays until it comes to the top, where add drops it as an id no longer
// held.
func (r *readAhead) take(id uuid.UUID) (sessionstore.Event, bool) {
	ev, ok := r.events[id]
	if ok {
		delete(r.events, id)
		r.bytes -= cost(ev)
	}
	return ev, ok
}

type heldTurn struct {
	turn int
	id   uuid.UUID
}

// turnHeap is a max-heap of turns.
type turnHeap []heldTurn

func (h turnHeap) Len() int           { return len(h) }
func (h turnHeap) Less(i, j int) bool { return h[i].turn > h[j].turn }
func (h turnHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *turnHeap) Push(x any)        { *h = append(*h, x.(heldTurn)) }
func (h *turnHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func checkScope(scope Scope, def Scope, allowTree bool) (Scope, error) {
	switch scope {
	case "":
		return def, nil
	case ActivePath, Context:
		return scope, nil
	case Tree:
		if allowTree {
			return scope, nil
		}
	}
	return "", fmt.Errorf("%w: %q", ErrScope, scope)
}

// lanesOf returns the session's lanes for the header: none when the
// session has only the implicit lane at HEAD.
func lanesOf(ctx context.Context, st *sessionstore.Store, session, head uuid.UUID) ([]Lane, error) {
	ls, err := st.Lanes(ctx, session)
	if err != nil {
		return nil, fmt.Errorf("export: session %s: lanes: %w", session, err)
	}
	if len(ls) == 1 && ls[0].Name == sessionstore.DefaultLane && ls[0].Active && ls[0].Tip == head {
		return nil, nil
	}
	out := make([]Lane, len(ls))
	for i, l := range ls {
		out[i] = Lane{Name: l.Name, Tip: l.Tip, Active: l.Active, SetAt: l.SetAt.UTC()}
	}
	return out, nil
}

// JSONL writes the session's events to w in the JSONL format of the
// package doc: a header line, then one line per event of opts.Scope (Tree
// when unset). Records stored as blobs are resolved into their lines, or,
// with opts.BlobDir, written there as files and left out of the lines.
// A workspace snapshot's line carries the contents of the files its
// manifest names, the same way (unless opts.OmitFiles).
//
// Errors: sessionstore.ErrNotFound (through errors.Is) for an unknown
// session; ErrScope; the store's errors (a *sessionstore.CorruptionError for
// damaged data); the first error of w, wrapped, after which nothing more is
// written; ErrBlobFile (wrapping the file system's error) for a blob file;
// ErrFormat for a snapshot's manifest that does not decode.
func JSONL(ctx context.Context, w io.Writer, st *sessionstore.Store, session uuid.UUID, opts Options) (stats Stats, err error) {
	scope, err := checkScope(opts.Scope, Tree, true)
	if err != nil {
		return stats, err
	}
	p, err := makePlan(ctx, st, session, scope, false, true)
	if err != nil {
		return stats, err
	}
	var blobs *blobWriter
	mode := BlobsInline
	if opts.BlobDir != "" {
		mode = BlobsFiles
		if blobs, err = newBlobWriter(opts.BlobDir); err != nil {
			return stats, err
		}
	}
	out := newOutput(w)
	defer func() { stats.Bytes = out.cw.n }()
	enc := json.NewEncoder(out.bw)
	enc.SetEscapeHTML(false)
	h := Header{Format: FormatName, Version: Version, Scope: scope, Blobs: mode, Session: p.meta, Head: p.head, Lanes: p.lanes, Events: p.count()}
	if err := enc.Encode(newHeaderLine(h)); err != nil {
		return stats, writeErr(err)
	}
	var line bytes.Buffer // an event line with workspace contents, before them
	lineEnc := json.NewEncoder(&line)
	lineEnc.SetEscapeHTML(false)
	err = p.each(ctx, st, session, func(ev sessionstore.Event) error {
		if p.meta.Encrypted {
			// The store gives the sealed record's size (and a blob's
			// digest); the line holds the record opened.
			if ev.Record == nil && ev.Digest != "" {
				r, err := st.Resolve(ctx, session, ev)
				if err != nil {
					return fmt.Errorf("export: session %s: event %s: %w", session, ev.ID, err)
				}
				ev = r
			}
			if ev.Record != nil {
				ev.Size = int64(len(ev.Record))
				if ev.Digest != "" {
					ev.Digest = digestOf(ev.Record)
				}
			}
		}
		var files []sessionstore.FileEntry
		manifest := false
		if !opts.OmitFiles && ev.Kind == sessionstore.KindCustom && ev.Record == nil && ev.Digest != "" {
			r, err := st.Resolve(ctx, session, ev)
			if err != nil {
				return fmt.Errorf("export: session %s: event %s: %w", session, ev.ID, err)
			}
			ev = r
		}
		if !opts.OmitFiles {
			m, ok, err := ParseManifest(ev)
			if err != nil {
				return fmt.Errorf("export: session %s: %w (Options.OmitFiles exports the session without workspace contents)", session, err)
			}
			manifest, files = ok, contentsOf(m)
		}
		if ev.Digest != "" {
			stats.Blobs++
			if blobs != nil {
				if err := blobs.write(ctx, st, session, ev, &stats); err != nil {
					return err
				}
				ev.Record = nil
			} else if ev.Record == nil {
				r, err := st.Resolve(ctx, session, ev)
				if err != nil {
					return fmt.Errorf("export: session %s: event %s: %w", session, ev.ID, err)
				}
				ev = r
			}
		}
		if !manifest {
			if err := enc.Encode(newEventLine(ev)); err != nil {
				if out.err() != nil {
					return writeErr(out.err())
				}
				return fmt.Errorf("export: event %s: %w", ev.ID, err)
			}
			stats.Events++
			return nil
		}
		// The line, its closing brace left for after "files".
		line.Reset()
		if err := lineEnc.Encode(newEventLine(ev)); err != nil {
			return fmt.Errorf("export: event %s: %w", ev.ID, err)
		}
		if _, err := out.bw.Write(bytes.TrimSuffix(line.Bytes(), []byte("}\n"))); err != nil {
			return writeErr(err)
		}
		if err := writeFiles(ctx, out.bw, st, session, ev, files, blobs, &stats); err != nil {
			return err
		}
		if _, err := out.bw.WriteString("}\n"); err != nil {
			return writeErr(err)
		}
		stats.Events++
		return nil
	})
	if err != nil {
		return stats, err
	}
	if err := out.flush(); err != nil {
		return stats, err
	}
	if blobs != nil {
		if err := blobs.sync(); err != nil {
			return stats, err
		}
	}
	return stats, nil
}

// blobWriter writes blob files into a directory, once each.
type blobWriter struct {
	dir     string
	done    map[string]bool // digests written or verified by this export
	written bool            // a file was renamed into dir: sync it
}

func newBlobWriter(dir string) (*blobWriter, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBlobFile, err)
	}
	return &blobWriter{dir: dir, done: map[string]bool{}}, nil
}

// BlobName returns the file name a blob of digest ("sha256:<hex>") has in
// Options.BlobDir: "sha256-<hex>".
func BlobName(digest string) (string, error) {
	hexs, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexs) != 2*sha256.Size || strings.ToLower(hexs) != hexs {
		return "", fmt.Errorf("%w: malformed digest %q", ErrFormat, digest)
	}
	if _, err := hex.DecodeString(hexs); err != nil {
		return "", fmt.Errorf("%w: malformed digest %q", ErrFormat, digest)
	}
	return "sha256-" + hexs, nil
}

// digestOf is the "sha256:<hex>" digest of b.
func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fileMatches reports whether the file at path exists and holds bytes
// whose SHA-256 is want.
func fileMatches(path, want string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return false, err
	}
	return hex.EncodeToString(h.Sum(nil)) == want, nil
}

func (b *blobWriter) write(ctx context.Context, st *sessionstore.Store, session uuid.UUID, ev sessionstore.Event, stats *Stats) error {
	if _, err := BlobName(ev.Digest); err != nil {
		return fmt.Errorf("export: event %s: %w", ev.ID, err)
	}
	return b.put(ev.Digest, func() ([]byte, error) {
		if ev.Record != nil {
			return ev.Record, nil
		}
		r, err := st.Resolve(ctx, session, ev)
		if err != nil {
			return nil, fmt.Errorf("export: session %s: event %s: %w", session, ev.ID, err)
		}
		return r.Record, nil
	}, stats)
}

// put writes the blob of digest ("sha256:<hex>") as <dir>/sha256-<hex>,
// unless this export wrote it already or the file holds it already; read
// returns its bytes, which must match the digest.
func (b *blobWriter) put(digest string, read func() ([]byte, error), stats *Stats) error {
	if b.done[digest] {
		return nil
	}
	name, err := BlobName(digest)
	if err != nil {
		return err
	}
	want := strings.TrimPrefix(name, "sha256-")
	path := filepath.Join(b.dir, name)
	ok, err := fileMatches(path, want)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBlobFile, err)
	}
	if ok {
		b.done[digest] = true
		stats.BlobsPresent++
		return nil
	}
	data, err := read()
	if err != nil {
		return err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != want {
		return fmt.Errorf("export: the bytes read for %s do not match their digest", digest)
	}
	f, err := os.CreateTemp(b.dir, "."+name+".*")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBlobFile, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%w: %s: %w", ErrBlobFile, path, err)
	}
	b.done[digest] = true
	b.written = true
	stats.BlobFiles++
	stats.BlobBytes += int64(len(data))
	return nil
}

// sync makes the renames durable.
func (b *blobWriter) sync() error {
	if !b.written {
		return nil
	}
	d, err := os.Open(b.dir)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBlobFile, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("%w: sync %s: %w", ErrBlobFile, b.dir, err)
	}
	return nil
}
