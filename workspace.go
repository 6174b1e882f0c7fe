package sessionstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/workspace"
)

// Workspaces
//
// A coding agent changes files; a session can record them, so that the
// files go back with the conversation. A workspace snapshot is an event
// on the session's path: a custom event (KindCustom) whose record is a
// manifest,
//
//	{"sessionstore":"snapshot","files":[{"path":"a/b.go","mode":420,
//	  "size":12,"digest":"sha256:<hex>","mtime":<ns>}, ...]}
//
// listing files by path, permission bits, size and the SHA-256 of their
// content. The contents are blobs of the session (blob.go):
// content-addressed, compressed, verified on every read, written once
// however many snapshots, branches or lanes name them, uploaded once
// with Options.Remote and sealed under the session's key in an encrypted
// session (then "blob" names the sealed blob, whose digest is not the
// content's). A manifest is a delta against the workspace as of its
// parent event: the files added or changed, and those removed
// ("deleted":true); one with "full":true lists every file, and the
// first snapshot on a path is full, as is one whose deltas since the
// last full one would list more entries than the tree holds (so that
// the deltas cost no more than the tree, and Files reads a bounded
// chain). The workspace as of any event (Files) is the newest full
// manifest on the path from the root to the event, then the deltas
// after it, in order: any branch, lane or fork (a fork sees its
// parent's snapshots up to the fork point, and its own after).
//
// Durability: a snapshot's new contents are durable blobs before its
// manifest event is appended, and the event is durable when the call
// returns, as for Append; a crash between leaves blobs no event names,
// which GC removes. GC keeps every blob a manifest of the session names
// (it reads the manifests), and a fork's unchanged files stay in its
// parent's blobs, which the parent keeps while any event names them.
//
// The record's first member, "sessionstore", is reserved: Append refuses
// an application's custom record that starts with it (ErrInvalidEvent).
// The events are found through their previews (Node.Preview, which
// begins with the record's text), so Files reads no other record.
//
// Limits: a file larger than SnapshotOptions.MaxFileSize (default
// Options.MaxRecordSize) is an error naming it, as is a name that is not
// valid UTF-8 (a manifest could not restore it); symbolic links,
// devices, sockets and pipes are skipped and reported, never followed,
// and Restore never makes one. A session holding snapshots cannot be
// Reencrypted (ErrWorkspaceReencrypt): the contents are sealed under the
// key generation of their snapshot, and the manifests, which are
// immutable records, name them by that sealing. A session's first
// snapshot writes the file WORKSPACE in its directory, durably, before it
// stores any content; Reencrypt checks for it before it starts and again
// under the session's lock (rewriteSession).

// FileEntry is a file of a workspace, as a manifest lists it.
type FileEntry struct {
	Path    string      `json:"path"`   // relative, slash-separated, clean
	Mode    fs.FileMode `json:"mode"`   // permission bits
	Size    int64       `json:"size"`   // bytes of content
	Digest  string      `json:"digest"` // "sha256:<hex>" of the content
	ModTime int64       `json:"mtime,omitempty"`
	// Blob and BlobSize name the stored blob when it is not the content
	// itself (an encrypted session: the sealed content).
	Blob     string `json:"blob,omitempty"`
	BlobSize int64  `json:"blob_size,omitempty"`
	// Deleted marks, in a delta, a file removed since the parent's
	// workspace; Files never returns one.
	Deleted bool `json:"deleted,omitempty"`
}

// Workspace is the set of files as of an event.
type Workspace struct {
	At       uuid.UUID   // the event
	Snapshot uuid.UUID   // the newest snapshot on the path to At; uuid.Nil for none
	Files    []FileEntry // sorted by Path
	// Ignore and GitIgnore are the rules the newest snapshot was taken
	// with (SnapshotOptions; none for RecordFiles): Restore's default.
	Ignore    []string
	GitIgnore bool
}

// File returns the file at path p, and whether the workspace has it.
func (w Workspace) File(p string) (FileEntry, bool) {
	i, ok := slices.BinarySearchFunc(w.Files, p, func(f FileEntry, p string) int { return strings.Compare(f.Path, p) })
	if !ok {
		return FileEntry{}, false
	}
	return w.Files[i], true
}

// snapshotRecord is a manifest event's record.
type snapshotRecord struct {
	Tag   string `json:"sessionstore"` // snapshotTag
	Full  bool   `json:"full,omitempty"`
	Depth int    `json:"depth,omitempty"` // deltas since the last full manifest, this one included
	Since int    `json:"since,omitempty"` // entries of those deltas
	Label string `json:"label,omitempty"`
	// The rules SnapshotDir read the directory with: Restore's default.
	Ignore    []string    `json:"ignore,omitempty"`
	GitIgnore bool        `json:"gitignore,omitempty"`
	Files     []FileEntry `json:"files"`
}

const (
	snapshotTag = "snapshot"
	stateTag    = "state"
	// maxDepth is the most deltas after a full manifest: the one after
	// them is full again, whatever its size.
	maxDepth = 1000
)

// reservedMark is how every record of the store's own begins: Append
// refuses it in an application's custom record.
const reservedMark = `{"sessionstore":`

// recordMark is how the compact text of a record of the store's own tag
// begins (and so its preview).
func recordMark(tag string) string { return `{"sessionstore":"` + tag + `"` }

// ErrWorkspaceReencrypt is returned by Reencrypt for a session holding
// workspace snapshots (see Workspaces).
var ErrWorkspaceReencrypt = errors.New("sessionstore: a session holding workspace snapshots cannot be reencrypted")

// digestString is the "sha256:<hex>" form of d.
func digestString(d [32]byte) string { return "sha256:" + hex.EncodeToString(d[:]) }

// blobOf returns the digest and size of the blob holding f's content.
func (f *FileEntry) blobOf() (string, int64) {
	if f.Blob != "" {
		return f.Blob, f.BlobSize
	}
	return f.Digest, f.Size
}

// check reports what is wrong with an entry read from a manifest.
func (f *FileEntry) check() error {
	if err := workspace.CheckPath(f.Path); err != nil {
		return err
	}
	if f.Deleted {
		return nil
	}
	if f.Size < 0 || f.Size > maxRecordSizeLimit || f.BlobSize < 0 || f.BlobSize > maxRecordSizeLimit {
		return fmt.Errorf("file %q: size out of range", f.Path)
	}
	if _, err := parseDigest(f.Digest); err != nil {
		return fmt.Errorf("file %q: %w", f.Path, err)
	}
	if f.Blob != "" {
		if _, err := parseDigest(f.Blob); err != nil {
			return fmt.Errorf("file %q: %w", f.Path, err)
		}
	}
	if f.Mode&^fs.ModePerm != 0 {
		return fmt.Errorf("file %q: mode %o is not permission bits", f.Path, uint32(f.Mode))
	}
	return nil
}

// markedEvents returns the end of the path (at, or the next parent for
// uuid.Nil) and the ids of the custom events on the path from the root to
// it whose preview starts with the tag's mark or is empty (a preview
// that could not be kept), newest first.
func (s *Store) markedEvents(ctx context.Context, session, at uuid.UUID, tag string) (uuid.UUID, []uuid.UUID, error) {
	if at == uuid.Nil {
		p, _, err := s.NextParent(ctx, session)
		if err != nil {
			return uuid.Nil, nil, err
		}
		at = p
	}
	if at == uuid.Nil {
		return uuid.Nil, nil, nil
	}
	nodes, err := s.Tree(ctx, session)
	if err != nil {
		return uuid.Nil, nil, err
	}
	byID := make(map[uuid.UUID]int, len(nodes))
	for i := range nodes {
		byID[nodes[i].ID] = i
	}
	if _, ok := byID[at]; !ok && !s.opts.ReadOnly {
		// The next parent (or an event just named by one) may be an
		// append still in flight, which Tree lists once it is durable:
		// wait for it, then look again.
		if err := s.Flush(ctx, session); err != nil {
			return uuid.Nil, nil, err
		}
		if nodes, err = s.Tree(ctx, session); err != nil {
			return uuid.Nil, nil, err
		}
		for i := range nodes {
			byID[nodes[i].ID] = i
		}
	}
	mark := recordMark(tag)
	var ids []uuid.UUID
	i, ok := byID[at]
	if !ok {
		return uuid.Nil, nil, fmt.Errorf("%w: event %s in session %s", ErrNotFound, at, session)
	}
	for steps := 0; ; steps++ {
		if steps > len(nodes) {
			return uuid.Nil, nil, corruptf(s.sessionDir(session), 0, "the parents of event %s form a cycle", at)
		}
		n := &nodes[i]
		if n.Kind == KindCustom && (n.Preview == "" || strings.HasPrefix(n.Preview, mark)) {
			ids = append(ids, n.ID)
		}
		if n.ParentID == uuid.Nil {
			break
		}
		if i, ok = byID[n.ParentID]; !ok {
			return uuid.Nil, nil, corruptf(s.sessionDir(session), 0, "event %s: parent %s is not in the session", n.ID, n.ParentID)
		}
	}
	return at, ids, nil
}

// markedRecord reads the record of event id and reports whether it is
// the store's record of tag.
func (s *Store) markedRecord(ctx context.Context, session, id uuid.UUID, tag string) ([]byte, bool, error) {
	ev, err := s.Event(ctx, session, id)
	if err == nil && ev.Record == nil && ev.Digest != "" {
		ev, err = s.Resolve(ctx, session, ev)
	}
	if err != nil {
		return nil, false, err
	}
	if !bytes.HasPrefix(ev.Record, []byte(recordMark(tag))) {
		return nil, false, nil
	}
	return ev.Record, true, nil
}

// markedRecords reads the records of the events ids of the session and
// returns those of the store's records of tag, nil for the others: the
// session's own events through one chunk reader, in the order of their
// places in the chunks (a sealed chunk's block decompressed once for all
// the records in it), a fork prefix's through Event.
func (s *Store) markedRecords(ctx context.Context, session uuid.UUID, ids []uuid.UUID, tag string) ([][]byte, error) {
	out := make([][]byte, len(ids))
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	h, err := s.reg.acquire(ctx, session, nil)
	if err != nil {
		return nil, err
	}
	type at struct {
		i int
		e entry
	}
	var own []at
	var others []int
	for i, id := range ids {
		if e, err := h.lookup(id); err == nil {
			own = append(own, at{i, *e})
		} else {
			others = append(others, i)
		}
	}
	s.reg.release(h)
	slices.SortFunc(own, func(a, b at) int {
		if a.e.Loc.Chunk != b.e.Loc.Chunk {
			return int(a.e.Loc.Chunk) - int(b.e.Loc.Chunk)
		}
		return int(a.e.Loc.Offset - b.e.Loc.Offset)
	})
	evs := make([]Event, 0, len(own))
	if len(own) > 0 {
		r := h.files.chunkReader()
		for k := range own {
			ev, err := readEntry(r, &own[k].e)
			if err != nil {
				r.close()
				return nil, err
			}
			evs = append(evs, ev)
		}
		r.close()
		if err := s.unsealEvents(ctx, session, evs); err != nil {
			return nil, err
		}
	}
	mark := []byte(recordMark(tag))
	for k, ev := range evs {
		if ev.Record == nil && ev.Digest != "" {
			if ev, err = s.Resolve(ctx, session, ev); err != nil {
				return nil, err
			}
		}
		if bytes.HasPrefix(ev.Record, mark) {
			out[own[k].i] = ev.Record
		}
	}
	for _, i := range others {
		rec, ok, err := s.markedRecord(ctx, session, ids[i], tag)
		if err != nil {
			return nil, err
		}
		if ok {
			out[i] = rec
		}
	}
	return out, nil
}

// manifestRun is how many candidate manifests files reads at once, newest
// first, until it meets a full one.
const manifestRun = 64

// decodeManifest decodes and checks a manifest record.
func decodeManifest(rec []byte) (*snapshotRecord, error) {
	m, err := unmarshalManifest(rec)
	if err != nil {
		return nil, err
	}
	if m.Tag != snapshotTag {
		return nil, fmt.Errorf("tag %q", m.Tag)
	}
	switch {
	case m.Full && (m.Depth != 0 || m.Since != 0):
		return nil, fmt.Errorf("a full manifest with depth %d and since %d", m.Depth, m.Since)
	case !m.Full && (m.Depth < 1 || m.Depth > maxDepth+1 || m.Since < 0):
		return nil, fmt.Errorf("a delta with depth %d and since %d", m.Depth, m.Since)
	}
	for i := range m.Files {
		if i > 0 && m.Files[i-1].Path >= m.Files[i].Path {
			return nil, fmt.Errorf("files not in strictly increasing order of path at %q", m.Files[i].Path)
		}
		if err := m.Files[i].check(); err != nil {
			return nil, err
		}
		if m.Full && m.Files[i].Deleted {
			return nil, fmt.Errorf("file %q: deleted in a full manifest", m.Files[i].Path)
		}
	}
	return &m, nil
}

// chain is where a workspace stands in its manifests: what the next
// delta adds to.
type chain struct {
	depth, since int
}

// Files returns the workspace as of event at of the session: the files
// the snapshots on the path from the root to at name, at as they were
// after the newest of them (see Workspaces). at uuid.Nil is the end of
// the active path (NextParent). A path without snapshots has no files.
// It reads the manifests on the path, not the contents (ReadFile).
//
// Errors: ErrNotFound for a session or event the store does not have;
// *CorruptionError for a manifest that does not decode; as Event.
func (s *Store) Files(ctx context.Context, session, at uuid.UUID) (Workspace, error) {
	ws, _, err := s.files(ctx, session, at)
	return ws, err
}

func (s *Store) files(ctx context.Context, session, at uuid.UUID) (Workspace, chain, error) {
	at, ids, err := s.markedEvents(ctx, session, at, snapshotTag)
	if err != nil {
		return Workspace{}, chain{}, err
	}
	ws := Workspace{At: at}
	var ms []*snapshotRecord
	var from *workspaceState // a state the cache has, older than ms
	// The candidates up to the first the cache has.
	for i, id := range ids {
		if st := s.workspaces.get(session, id); st != nil {
			from, ids = st, ids[:i+1]
			break
		}
	}
runs:
	for len(ids) > 0 {
		run := ids[:min(len(ids), manifestRun)]
		ids = ids[len(run):]
		last := len(run)
		if from != nil && len(ids) == 0 {
			last-- // the cached one: its state, not its manifest
		}
		recs, err := s.markedRecords(ctx, session, run[:last], snapshotTag)
		if err != nil {
			return Workspace{}, chain{}, err
		}
		for i, rec := range recs {
			if rec == nil {
				continue
			}
			m, err := decodeManifest(rec)
			if err != nil {
				return Workspace{}, chain{}, corruptf(s.sessionDir(session), 0, "event %s: workspace manifest: %w", run[i], err)
			}
			if ws.Snapshot == uuid.Nil {
				ws.Snapshot = run[i]
			}
			ms = append(ms, m)
			if m.Full {
				from = nil // an older cached state is not needed
				break runs
			}
		}
		if from != nil && len(ids) == 0 && ws.Snapshot == uuid.Nil {
			ws.Snapshot = run[last]
		}
	}
	if len(ms) == 0 && from == nil {
		return ws, chain{}, nil
	}
	if from == nil && !ms[len(ms)-1].Full {
		return Workspace{}, chain{}, corruptf(s.sessionDir(session), 0, "workspace manifests of the path to %s: the oldest is a delta", at)
	}
	if len(ms) == 0 { // the newest snapshot's state is cached
		ws.Files = slices.Clone(from.files)
		ws.Ignore, ws.GitIgnore = slices.Clone(from.ignore), from.gitIgnore
		return ws, from.ch, nil
	}
	var files []FileEntry
	if from != nil {
		files = from.files
	}
	deltas := ms
	if last := ms[len(ms)-1]; last.Full {
		files, deltas = last.Files, ms[:len(ms)-1]
	}
	files = applyDelta(files, mergeDeltas(deltas))
	ch := chain{depth: ms[0].Depth, since: ms[0].Since}
	s.workspaces.put(session, ws.Snapshot, &workspaceState{files: files, ch: ch, ignore: ms[0].Ignore, gitIgnore: ms[0].GitIgnore})
	ws.Files = slices.Clone(files)
	ws.Ignore, ws.GitIgnore = slices.Clone(ms[0].Ignore), ms[0].GitIgnore
	return ws, ch, nil
}

// mergeDeltas merges deltas, newest first, into one sorted delta: for
// each path, its newest entry. One merge into the tree after it costs the
// tree once, not once per delta.
func mergeDeltas(ms []*snapshotRecord) []FileEntry {
	switch len(ms) {
	case 0:
		return nil
	case 1:
		return ms[0].Files
	}
	n := 0
	for _, m := range ms {
		n += len(m.Files)
	}
	newest := make(map[string]int, n) // path -> index in out
	out := make([]FileEntry, 0, n)
	for _, m := range ms {
		for _, f := range m.Files {
			if _, ok := newest[f.Path]; !ok {
				newest[f.Path] = len(out)
				out = append(out, f)
			}
		}
	}
	slices.SortFunc(out, func(a, b FileEntry) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// applyDelta returns the sorted files with the sorted delta applied, in
// new memory: one merge, proportional to both.
func applyDelta(files, delta []FileEntry) []FileEntry {
	out := make([]FileEntry, 0, len(files)+len(delta))
	i := 0
	for _, d := range delta {
		for i < len(files) && files[i].Path < d.Path {
			out = append(out, files[i])
			i++
		}
		if i < len(files) && files[i].Path == d.Path {
			i++
		}
		if !d.Deleted {
			out = append(out, d)
		}
	}
	return append(out, files[i:]...)
}

// workspaceState is a computed workspace: its files, sorted and never
// changed once cached, and its place in the manifests.
type workspaceState struct {
	files     []FileEntry
	ch        chain
	ignore    []string
	gitIgnore bool
}

// workspaceCache keeps the last few workspaces computed, by session and
// snapshot event: a snapshot's workspace never changes, so the next
// SnapshotDir or Files along the same path starts from it instead of
// decoding the manifests again.
type workspaceCache struct {
	mu    sync.Mutex
	items []workspaceItem // newest last
}

type workspaceItem struct {
	session, snapshot uuid.UUID
	st                *workspaceState
}

// workspaceCacheSize is how many workspaces the cache keeps.
const workspaceCacheSize = 4

func (c *workspaceCache) get(session, snapshot uuid.UUID) *workspaceState {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, it := range c.items {
		if it.session == session && it.snapshot == snapshot {
			return it.st
		}
	}
	return nil
}

func (c *workspaceCache) put(session, snapshot uuid.UUID, st *workspaceState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = slices.DeleteFunc(c.items, func(it workspaceItem) bool { return it.session == session && it.snapshot == snapshot })
	if len(c.items) >= workspaceCacheSize {
		c.items = c.items[1:]
	}
	c.items = append(c.items, workspaceItem{session, snapshot, st})
}

// forget drops the session's workspaces (its deletion).
func (c *workspaceCache) forget(session uuid.UUID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.items = slices.DeleteFunc(c.items, func(it workspaceItem) bool { return it.session == session })
}

// ReadFile returns the content of a file of a workspace of the session
// (a FileEntry from Files), verified against its digest. For a fork, a
// file its parent stored is read from the parent.
//
// Errors: ErrInvalidEvent for an entry whose digest or size is
// malformed; *CorruptionError for a missing or damaged blob, or content
// that does not match the digest; ErrNotFound for a session the store
// does not have.
func (s *Store) ReadFile(ctx context.Context, session uuid.UUID, f FileEntry) ([]byte, error) {
	if err := f.check(); err != nil || f.Deleted {
		if err == nil {
			err = errors.New("a deleted entry has no content")
		}
		return nil, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
	}
	d, size := f.blobOf()
	ev, err := s.resolve(ctx, session, Event{Digest: d, Size: size})
	if err != nil {
		return nil, err
	}
	if int64(len(ev.Record)) != f.Size || digestString(sha256.Sum256(ev.Record)) != f.Digest {
		return nil, corruptf(s.sessionDir(session), 0, "workspace file %q: content does not match %s", f.Path, f.Digest)
	}
	return ev.Record, nil
}

// ChangeOp is what a FileChange did to its path.
type ChangeOp string

// The changes a Diff lists.
const (
	FileAdded    ChangeOp = "added"
	FileModified ChangeOp = "modified" // content or mode
	FileDeleted  ChangeOp = "deleted"
)

// FileChange is a path whose file differs between two workspaces.
type FileChange struct {
	Path     string
	Op       ChangeOp
	From, To FileEntry // the file before and after; zero where it is absent
}

// Diff returns the files that differ between the workspaces as of the
// events from and to of the session (Files), sorted by path: added,
// modified (content or mode) or deleted going from from to to.
//
// Errors: as Files.
func (s *Store) Diff(ctx context.Context, session, from, to uuid.UUID) ([]FileChange, error) {
	a, err := s.Files(ctx, session, from)
	if err != nil {
		return nil, err
	}
	b, err := s.Files(ctx, session, to)
	if err != nil {
		return nil, err
	}
	return diffFiles(a.Files, b.Files), nil
}

// diffFiles compares two sorted file lists.
func diffFiles(a, b []FileEntry) []FileChange {
	var out []FileChange
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].Path < b[j].Path):
			out = append(out, FileChange{Path: a[i].Path, Op: FileDeleted, From: a[i]})
			i++
		case i == len(a) || b[j].Path < a[i].Path:
			out = append(out, FileChange{Path: b[j].Path, Op: FileAdded, To: b[j]})
			j++
		default:
			if a[i].Digest != b[j].Digest || a[i].Mode != b[j].Mode {
				out = append(out, FileChange{Path: a[i].Path, Op: FileModified, From: a[i], To: b[j]})
			}
			i++
			j++
		}
	}
	return out
}

// SnapshotOptions tune SnapshotDir.
type SnapshotOptions struct {
	// Ignore holds rules in the form of .gitignore lines, read against
	// paths from the directory; files they ignore are not recorded.
	// A ".git" directory is never walked. The manifest keeps the rules
	// and GitIgnore, for Restore.
	Ignore []string
	// GitIgnore also reads the .gitignore file of every directory walked.
	GitIgnore bool
	// Label is kept in the manifest, for the caller.
	Label string
	// MaxFiles is the most files the directory may hold (not counting
	// ignored ones); more is an error. Default 1,000,000.
	MaxFiles int
	// MaxFileSize is the largest file recorded; a larger one is an
	// error wrapping ErrRecordTooLarge, naming it (ignore it to go on).
	// Default Options.MaxRecordSize.
	MaxFileSize int64
	// Always appends a manifest even when nothing changed (an empty
	// delta), so that the event marks the point.
	Always bool
}

// SkippedFile is an entry of a directory SnapshotDir did not record.
type SkippedFile struct {
	Path   string
	Reason string
}

// SnapshotResult says what SnapshotDir recorded.
type SnapshotResult struct {
	// Event is the manifest event; the zero Event when nothing changed
	// (and SnapshotOptions.Always is not set).
	Event                    Event
	Added, Modified, Deleted []string
	Skipped                  []SkippedFile
	// Stored is the bytes of content read for new blobs (before
	// compression; blobs the session held already are not written again).
	Stored int64
}

// rules makes the ignore rules of lines.
func rulesOf(lines []string) *workspace.Rules {
	var r workspace.Rules
	r.Add("", strings.Join(lines, "\n"))
	return &r
}

// racy is how close to the scan a file's modification time must be for
// its size and time not to be trusted: a write in the same clock tick as
// the last snapshot's reading leaves both as they were.
const racy = 2 * time.Second

// SnapshotDir records the files of the directory dir as a snapshot event
// appended to the session, as Append would (a child of the next parent;
// see Workspaces). It is incremental: a file whose size, mode and
// modification time match the workspace as of the next parent is taken
// as unchanged without being read (unless modified within two seconds of
// the scan); any other is read and hashed, and its content stored as a
// blob unless the workspace has it already. The manifest lists the
// files added, changed and removed. Files the rules of o ignore, and
// what is not a regular file, are not recorded.
//
// Durability: as Append, the new contents durable before the event.
// If another append moves the next parent meanwhile, ErrConflict and
// nothing is appended (the stored contents stay for GC): call it again.
//
// Errors: as Append; a directory that cannot be read, a name that is not
// valid UTF-8 (wrapping ErrInvalidEvent), a file over MaxFileSize
// (ErrRecordTooLarge), more files than MaxFiles; ErrConflict.
func (s *Store) SnapshotDir(ctx context.Context, session uuid.UUID, dir string, o SnapshotOptions) (SnapshotResult, error) {
	var res SnapshotResult
	if err := s.begin(ctx); err != nil {
		return res, err
	}
	defer s.end()
	if s.opts.ReadOnly {
		return res, ErrReadOnly
	}
	if err := s.outsideStore(dir); err != nil {
		return res, err
	}
	maxSize := o.MaxFileSize
	if maxSize <= 0 || maxSize > int64(s.opts.MaxRecordSize) {
		maxSize = int64(s.opts.MaxRecordSize)
	}
	parent, _, err := s.NextParent(ctx, session)
	if err != nil {
		return res, err
	}
	base, ch, err := s.files(ctx, session, parent)
	if err != nil {
		return res, err
	}
	start := time.Now()
	found, skipped, err := workspace.Scan(ctx, s.opts.hostFS, dir, workspace.ScanOptions{Rules: rulesOf(o.Ignore), GitIgnore: o.GitIgnore, MaxFiles: o.MaxFiles})
	if err != nil {
		if errors.Is(err, workspace.ErrInvalidPath) {
			err = fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
		return res, err
	}
	for _, sk := range skipped {
		res.Skipped = append(res.Skipped, SkippedFile(sk))
	}
	found = slices.DeleteFunc(found, func(f workspace.File) bool { return isTemp(f.Path) })
	for _, f := range found {
		if f.Size > maxSize {
			return res, fmt.Errorf("%w: workspace file %s is %d bytes, more than %d (MaxFileSize)", ErrRecordTooLarge, joinPath(dir, f.Path), f.Size, maxSize)
		}
	}
	if est := manifestSize(found); est > int64(s.opts.MaxRecordSize) {
		return res, fmt.Errorf("%w: %s: a manifest of its %d files would take about %d bytes, more than Options.MaxRecordSize (%d): ignore some", ErrRecordTooLarge, dir, len(found), est, s.opts.MaxRecordSize)
	}
	type change struct {
		entry   FileEntry
		changed bool // content differs from the base's (else only its time or mode)
		gone    bool // removed since the scan
		err     error
	}
	prev := make(map[string]*FileEntry, len(base.Files))
	byDigest := make(map[string]*FileEntry, len(base.Files))
	for i := range base.Files {
		prev[base.Files[i].Path] = &base.Files[i]
		byDigest[base.Files[i].Digest] = &base.Files[i]
	}
	// Which files are to be read: not in the base, or not as it says.
	var toRead []int
	seen := make(map[string]bool, len(found))
	var delta []FileEntry
	for i, f := range found {
		seen[f.Path] = true
		p := prev[f.Path]
		if p != nil && p.Size == f.Size && p.Mode == f.Mode && p.ModTime == f.ModTime && start.Sub(time.Unix(0, f.ModTime)) > racy {
			continue
		}
		toRead = append(toRead, i)
	}
	changes := make([]change, len(toRead))
	err = s.appendProduced(ctx, session, parent, func(put func(content []byte) (string, int64, error)) (Event, error) {
		var stored sync.Map // digest -> blob written by this snapshot (the same content twice)
		var mu sync.Mutex
		forEach(len(toRead), 4*runtime.GOMAXPROCS(0), func(_, k int) {
			f := found[toRead[k]]
			c := &changes[k]
			data, err := s.readWorkspaceFile(dir, f.Path, maxSize)
			if errors.Is(err, fs.ErrNotExist) {
				c.gone = true // removed since the scan: as if the scan had not found it
				return
			}
			if err != nil {
				c.err = err
				return
			}
			mtime := f.ModTime
			if start.Sub(time.Unix(0, mtime)) <= racy {
				// Read within the clock tick of a write: a later write
				// of the same size in that tick would leave size and
				// time as they are, so the next snapshot reads it again.
				mtime = 0
			}
			e := FileEntry{Path: f.Path, Mode: f.Mode, Size: int64(len(data)), Digest: digestString(sha256.Sum256(data)), ModTime: mtime}
			if p := prev[f.Path]; p != nil && p.Digest == e.Digest {
				e.Blob, e.BlobSize = p.Blob, p.BlobSize
				c.entry = e
				return
			}
			c.changed = true
			if same := byDigest[e.Digest]; same != nil {
				e.Blob, e.BlobSize = same.Blob, same.BlobSize
			} else if b, ok := stored.Load(e.Digest); ok {
				bb := b.([2]any)
				e.Blob, e.BlobSize = bb[0].(string), bb[1].(int64)
			} else {
				blobD, blobN, err := put(data)
				if err != nil {
					c.err = err
					return
				}
				if blobD != e.Digest {
					e.Blob, e.BlobSize = blobD, blobN
				}
				stored.Store(e.Digest, [2]any{e.Blob, e.BlobSize})
				mu.Lock()
				res.Stored += e.Size
				mu.Unlock()
			}
			c.entry = e
		})
		for _, c := range changes {
			if c.err != nil {
				return Event{}, c.err
			}
		}
		for k, c := range changes {
			if c.gone {
				seen[found[toRead[k]].Path] = false
				found[toRead[k]].Path = "" // not in the workspace (dropped below)
			}
		}
		found = slices.DeleteFunc(found, func(f workspace.File) bool { return f.Path == "" })
		for _, c := range changes {
			if c.gone {
				continue
			}
			p := prev[c.entry.Path]
			switch {
			case p == nil:
				res.Added = append(res.Added, c.entry.Path)
			case c.changed || p.Mode != c.entry.Mode:
				res.Modified = append(res.Modified, c.entry.Path)
			case p.ModTime == c.entry.ModTime:
				continue // read again, found as it was
			}
			// A new time alone goes into a manifest written for other
			// changes, so that the next snapshot need not read the file.
			delta = append(delta, c.entry)
		}
		for _, f := range base.Files {
			if !seen[f.Path] {
				res.Deleted = append(res.Deleted, f.Path)
				delta = append(delta, FileEntry{Path: f.Path, Deleted: true})
			}
		}
		if len(res.Added)+len(res.Modified)+len(res.Deleted) == 0 && !o.Always {
			return Event{}, nil
		}
		slices.SortFunc(delta, func(a, b FileEntry) int { return strings.Compare(a.Path, b.Path) })
		m := snapshotRecord{Tag: snapshotTag, Label: o.Label, Ignore: o.Ignore, GitIgnore: o.GitIgnore, Files: delta, Depth: ch.depth + 1, Since: ch.since + len(delta)}
		if base.Snapshot == uuid.Nil || m.Since > len(found) || m.Depth > maxDepth {
			m = snapshotRecord{Tag: snapshotTag, Label: o.Label, Ignore: o.Ignore, GitIgnore: o.GitIgnore, Full: true, Files: make([]FileEntry, 0, len(found))}
			next := make(map[string]FileEntry, len(delta))
			for _, d := range delta {
				next[d.Path] = d
			}
			for _, f := range found {
				if d, ok := next[f.Path]; ok {
					m.Files = append(m.Files, d)
				} else {
					m.Files = append(m.Files, *prev[f.Path])
				}
			}
		}
		return manifestEvent(m)
	}, &res.Event)
	return res, err
}

// manifestEvent is the custom event of a manifest.
func manifestEvent(m snapshotRecord) (Event, error) {
	rec, err := json.Marshal(m)
	if err != nil {
		return Event{}, err
	}
	return Event{Kind: KindCustom, Record: rec, reserved: true}, nil
}

// isTemp reports whether p names a temporary file of a Restore
// (workspace.TempName's form: a dot, the name, the mark, 16 hex digits).
func isTemp(p string) bool { return workspace.IsTemp(p) }

// joinPath names a workspace path below dir, for errors.
func joinPath(dir, p string) string { return strings.TrimSuffix(dir, "/") + "/" + p }

// readWorkspaceFile reads the file p below dir, through the store's file
// system confined to dir.
func (s *Store) readWorkspaceFile(dir, p string, limit int64) ([]byte, error) {
	w := workspace.NewWriter(s.opts.hostFS, dir, false)
	b, err := w.ReadFile(p, limit)
	if err != nil {
		return nil, fmt.Errorf("sessionstore: workspace file %s: %w", joinPath(dir, p), err)
	}
	return b, nil
}

// FileWrite is a file RecordFiles records: its content and mode, or its
// removal.
type FileWrite struct {
	Path    string
	Data    []byte
	Mode    fs.FileMode // permission bits; 0 means 0644
	Deleted bool
}

// RecordFiles records single files as a snapshot event appended to the
// session (see Workspaces): the workspace as of the next parent, with
// these files written or removed. A harness records a file's pre-image
// before an edit tool runs and its post-image after.
//
// Errors: as SnapshotDir; ErrInvalidEvent for a path CheckPath refuses
// (absolute, "..", not UTF-8) or a mode that is not permission bits.
func (s *Store) RecordFiles(ctx context.Context, session uuid.UUID, label string, files ...FileWrite) (Event, error) {
	if err := s.begin(ctx); err != nil {
		return Event{}, err
	}
	defer s.end()
	if s.opts.ReadOnly {
		return Event{}, ErrReadOnly
	}
	seen := map[string]bool{}
	for _, f := range files {
		if err := workspace.CheckPath(f.Path); err != nil {
			return Event{}, fmt.Errorf("%w: %w", ErrInvalidEvent, err)
		}
		if f.Mode&^fs.ModePerm != 0 {
			return Event{}, fmt.Errorf("%w: file %q: mode %v is not permission bits", ErrInvalidEvent, f.Path, f.Mode)
		}
		if seen[f.Path] {
			return Event{}, fmt.Errorf("%w: file %q given twice", ErrInvalidEvent, f.Path)
		}
		seen[f.Path] = true
		if int64(len(f.Data)) > int64(s.opts.MaxRecordSize) {
			return Event{}, fmt.Errorf("%w: workspace file %q is %d bytes, more than %d", ErrRecordTooLarge, f.Path, len(f.Data), s.opts.MaxRecordSize)
		}
	}
	parent, _, err := s.NextParent(ctx, session)
	if err != nil {
		return Event{}, err
	}
	base, ch, err := s.files(ctx, session, parent)
	if err != nil {
		return Event{}, err
	}
	var out Event
	err = s.appendProduced(ctx, session, parent, func(put func([]byte) (string, int64, error)) (Event, error) {
		byDigest := map[string]*FileEntry{}
		for i := range base.Files {
			byDigest[base.Files[i].Digest] = &base.Files[i]
		}
		delta := make([]FileEntry, 0, len(files))
		for _, f := range files {
			if f.Deleted {
				delta = append(delta, FileEntry{Path: f.Path, Deleted: true})
				continue
			}
			mode := f.Mode
			if mode == 0 {
				mode = 0o644
			}
			e := FileEntry{Path: f.Path, Mode: mode, Size: int64(len(f.Data)), Digest: digestString(sha256.Sum256(f.Data))}
			if same := byDigest[e.Digest]; same != nil {
				e.Blob, e.BlobSize = same.Blob, same.BlobSize
			} else {
				d, n, err := put(f.Data)
				if err != nil {
					return Event{}, err
				}
				if d != e.Digest {
					e.Blob, e.BlobSize = d, n
				}
				byDigest[e.Digest] = &e
			}
			delta = append(delta, e)
		}
		slices.SortFunc(delta, func(a, b FileEntry) int { return strings.Compare(a.Path, b.Path) })
		if err := fileDirConflict(applyDelta(base.Files, delta)); err != nil {
			return Event{}, err
		}
		m := snapshotRecord{Tag: snapshotTag, Label: label, Ignore: base.Ignore, GitIgnore: base.GitIgnore, Files: delta, Depth: ch.depth + 1, Since: ch.since + len(delta)}
		if base.Snapshot == uuid.Nil || m.Since > len(base.Files)+len(delta) || m.Depth > maxDepth {
			next := map[string]FileEntry{}
			for _, f := range base.Files {
				next[f.Path] = f
			}
			for _, d := range delta {
				if d.Deleted {
					delete(next, d.Path)
				} else {
					next[d.Path] = d
				}
			}
			m = snapshotRecord{Tag: snapshotTag, Label: label, Ignore: base.Ignore, GitIgnore: base.GitIgnore, Full: true, Files: make([]FileEntry, 0, len(next))}
			for _, f := range next {
				m.Files = append(m.Files, f)
			}
			slices.SortFunc(m.Files, func(a, b FileEntry) int { return strings.Compare(a.Path, b.Path) })
		}
		return manifestEvent(m)
	}, &out)
	return out, err
}

// outsideStore refuses a workspace directory that is the store's, inside
// it, or holds it, links resolved on both sides (for a directory not made
// yet, its nearest existing parent's).
func (s *Store) outsideStore(dir string) error {
	abs, err := resolvedWSPath(dir)
	if err != nil {
		return fmt.Errorf("sessionstore: workspace directory %s: %w", dir, err)
	}
	store, err := resolvedWSPath(s.dir)
	if err != nil {
		return err
	}
	if pathWithin(abs, store) || pathWithin(store, abs) {
		return fmt.Errorf("%w: workspace directory %s holds or is inside the store %s", ErrInvalidOptions, dir, s.dir)
	}
	return nil
}

// resolvedWSPath is the absolute path of p with the links of its longest
// existing prefix resolved.
func resolvedWSPath(p string) (string, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	rest := ""
	for cur := abs; ; cur = filepath.Dir(cur) {
		if r, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(r, rest), nil
		}
		if filepath.Dir(cur) == cur {
			return abs, nil
		}
		rest = filepath.Join(filepath.Base(cur), rest)
	}
}

// pathWithin reports whether path p is dir or below it.
func pathWithin(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// manifestSize estimates the bytes of a full manifest of files.
func manifestSize(files []workspace.File) int64 {
	var n int64
	for _, f := range files {
		n += int64(len(f.Path)) + 140 // the members, a digest, the numbers
	}
	return n
}

// fileDirConflict reports a workspace (sorted files) in which a path is
// both a file and a directory of another file's path: no directory can
// hold both.
func fileDirConflict(files []FileEntry) error {
	paths := make(map[string]bool, len(files))
	for _, f := range files {
		paths[f.Path] = true
	}
	for _, f := range files {
		for i := strings.LastIndexByte(f.Path, '/'); i > 0; i = strings.LastIndexByte(f.Path[:i], '/') {
			if paths[f.Path[:i]] {
				return fmt.Errorf("%w: workspace file %q is also the directory of %q", ErrInvalidEvent, f.Path[:i], f.Path)
			}
		}
	}
	return nil
}
