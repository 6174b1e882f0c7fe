package sessionstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The catalogue is a derived copy of every session's metadata at the store
// root, so that List reads one file instead of every session.json, and
// ListRecent reads only the newest part of it. session.json stays the one
// source of truth: the catalogue is rebuilt from the session.json files
// when it is missing, damaged or stale, and a reader that cannot trust it
// (for one session or for all) reads session.json instead.
//
// # Files
//
//   - catalogue.jsonl, the snapshot: a header line (its generation and the
//     sessions directory's stamp when it was written), then one line per
//     session sorted by id: the metadata and the stamp (modification time
//     and size) session.json had when the line was written, or, for a
//     session.json that could not be read, the id and stamp alone.
//   - catalogue.log, the log: a header line (the snapshot's generation),
//     then records appended since the snapshot was written: pending (a
//     session.json of this id is about to change) and commit (it changed:
//     the new metadata and stamp). Every record also carries the sessions
//     directory's stamp after the writer's change.
//   - catalogue.lock, the lock file writers take (vfs.FS.Lock) around each
//     append and rewrite; readers take no lock.
//
// Every line is a CRC-32C framed JSON object (internal/jsonl) with its
// members in a fixed order, so that decoding is positional (catParser);
// a string that needs escapes falls back to encoding/json.
//
// # The protocol
//
// A writer, holding the session's lock, changes session.json so:
//
//  1. under catalogue.lock, append a pending record for the id (Create
//     first makes the session directory, under the lock, so the record's
//     directory stamp includes it), then sync the log, under the lock or
//     after releasing it;
//  2. once that sync returned, replace session.json durably
//     (durable.ReplaceFile);
//  3. under catalogue.lock, append a commit record with the new metadata
//     and session.json's new stamp, without a sync.
//
// A pending record another writer reads before its sync returned may be
// lost to a crash, and with it nothing: its session.json is not written
// yet. A rewrite keeps such a record, synced, and a later sync of the log
// covers it too.
//
// A reader folds the log over the snapshot: a commit replaces the id's
// entry and closes every pending record of the id before it; an id with a
// pending record and no later commit is read from session.json, which a
// crash at any point leaves whole, old or new (or missing: a Create that
// did not finish is not a session). The commit carries the metadata, not
// the pending record, so that a commit is true by itself: the pending
// record of a Create that lost a race (ErrExists, ErrLocked) never wrote
// session.json and is closed by the winner's commit, or stays open and
// costs its readers one read. A lost commit (unsynced) costs the same.
// Bytes after the last whole line, or bad lines with no good line after
// them, are an unsynced tail and are ignored: ignoring a commit only sends
// readers to session.json, and a pending record whose sync did not return
// guarded no write. A bad line followed by good ones is damage. For the
// same reason a later append may sync the log again after a failed sync
// (which the store never does for its own data): what such a sync may
// have lost is at most unsynced commits and the failed pending record,
// whose write never started.
//
// Delete (delete.go) follows step 1 alone: under catalogue.lock it moves
// the session directory aside, then appends a synced pending record,
// stamped with the sessions directory as it is after the move, and no
// commit follows. Readers of that id go to session.json, find none, and
// leave the session out (as for a Create that did not finish); ListRecent
// keeps its fast path, since the stamp is current. A rewrite drops the
// pending records and entries of ids whose directory is gone. A crash
// between the move and the record leaves the directory stamp behind:
// ListRecent answers as List does, and the next writer rewrites.
//
// A writer rewrites the catalogue (the snapshot, then a new log of the
// open pending records, each by durable.ReplaceFile, a new generation)
// when the log passes catalogueMaxLog records (fold: the log's commits
// folded into the snapshot), when it is missing or damaged, or when the
// sessions directory's stamp is not the one the catalogue last recorded
// (rebuild: the snapshot made again from the session.json files). A log of another generation than the snapshot
// (a crash between the two renames) is damage.
//
// # What is detected
//
// Each session's entry is trusted only while session.json's stamp
// (modification time and size, what vfs.FS.Stat gives) is the recorded
// one: List stats every session.json, ListRecent those it returns, and a
// mismatch reads the file. List also lists the sessions directory, so it
// sees directories added or removed by hand. ListRecent instead compares
// the directory's stamp with the last recorded one and, on a mismatch,
// answers as List does. Not detected: a session.json edited by hand to
// the same size within one tick of the file system's clock (or one whose
// modification time is set back), and, for ListRecent, a directory added
// or removed by hand within the tick of the catalogue's last change, or a
// session.json dropped by hand into an existing directory that had none.
// The snapshot and the log are covered by their CRCs; a damaged one is
// rebuilt by a writer and read around by a read-only store, which writes
// nothing and scans the session.json files as List did before the
// catalogue.
const (
	catalogueName     = "catalogue.jsonl"
	catalogueLogName  = "catalogue.log"
	catalogueLockName = "catalogue.lock"
	// catalogueFormat 2 added the lineage members (forked_from,
	// parent_session, spawned_by, depth); a catalogue of format 1 is
	// unusable to this build and rebuilt from the session.json files.
	catalogueFormat = 2
	// catalogueMaxLog is how many records the log holds before a writer
	// folds it into a new snapshot: ListRecent reads the whole log.
	catalogueMaxLog = 256
)

// errCatalogue says the catalogue cannot be used as it is (damaged, of
// another generation, or unknown format); callers fall back to the
// session.json files.
var errCatalogue = errors.New("sessionstore: catalogue unusable")

// stamp is what the file system says of a file that changes when it is
// written: its modification time and size.
type stamp struct{ mtime, size int64 }

func stampOf(info fs.FileInfo) stamp { return stamp{info.ModTime().UnixNano(), info.Size()} }

func statStamp(fsys vfs.FS, path string) (stamp, error) {
	info, err := fsys.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	return stampOf(info), nil
}

// Record kinds, the "k" member of every line.
const (
	kindHeader     = 'h' // snapshot and log Header: generation, directory stamp
	kindEntry      = 'e' // snapshot: a session's metadata and session.json's stamp
	kindUnreadable = 'u' // snapshot: a session.json that could not be read, and its stamp
	kindPending    = 'p' // log: the id's session.json is about to change
	kindCommit     = 'c' // log: it changed; the new metadata and stamp
)

// catRecord is one line of the catalogue.
type catRecord struct {
	kind byte
	dir  stamp     // the sessions directory's stamp (header, log records)
	gen  int64     // header
	id   uuid.UUID // all but header
	file stamp     // session.json's stamp (entry, unreadable, commit)
	meta Meta      // entry, commit
}

func hasMeta(kind byte) bool { return kind == kindEntry || kind == kindCommit }

// appendCatRecord appends r's framed line to dst. The members are, in
// order: k, dir, then gen (header) or id and file, then the metadata
// (entry, commit): created_at, updated_at, name, working_dir, model,
// labels (keys sorted), and then, each only when not zero (a zero one is
// never written, so that a line has one encoding): forked_from (session
// and event ids), parent_session, spawned_by, depth.
func appendCatRecord(dst []byte, r catRecord) []byte {
	start := len(dst)
	dst = append(dst, `{"k":"`...)
	dst = append(dst, r.kind)
	dst = append(dst, `","dir":[`...)
	dst = strconv.AppendInt(dst, r.dir.mtime, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, r.dir.size, 10)
	dst = append(dst, ']')
	if r.kind == kindHeader {
		dst = append(dst, `,"v":`...)
		dst = strconv.AppendInt(dst, catalogueFormat, 10)
		dst = append(dst, `,"gen":`...)
		dst = strconv.AppendInt(dst, r.gen, 10)
		dst = append(dst, '}')
		return jsonl.SealTail(dst, start)
	}
	dst = append(dst, `,"id":"`...)
	dst = canonical.AppendUUID(dst, r.id)
	dst = append(dst, `","file":[`...)
	dst = strconv.AppendInt(dst, r.file.mtime, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, r.file.size, 10)
	dst = append(dst, ']')
	if hasMeta(r.kind) {
		m := r.meta
		dst = append(dst, `,"created_at":"`...)
		dst = m.CreatedAt.AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, `","updated_at":"`...)
		dst = m.UpdatedAt.AppendFormat(dst, time.RFC3339Nano)
		dst = append(dst, `","name":`...)
		dst = appendCatString(dst, m.Name)
		dst = append(dst, `,"working_dir":`...)
		dst = appendCatString(dst, m.WorkingDir)
		dst = append(dst, `,"model":`...)
		dst = appendCatString(dst, m.Model)
		dst = append(dst, `,"labels":{`...)
		keys := make([]string, 0, len(m.Labels))
		for k := range m.Labels {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendCatString(dst, k)
			dst = append(dst, ':')
			dst = appendCatString(dst, m.Labels[k])
		}
		dst = append(dst, '}')
		dst = appendCatLineage(dst, m)
	}
	dst = append(dst, '}')
	return jsonl.SealTail(dst, start)
}

// appendCatString appends s as a JSON string: as it is when nothing in it
// needs an escape, else through encoding/json.
func appendCatString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == '"' || c == '\\' {
			b, _ := json.Marshal(s) // a string always encodes
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// catParser decodes a line's members in the order appendCatRecord writes
// them. The first mismatch sets bad; later calls do nothing.
type catParser struct {
	b   []byte
	i   int
	bad bool
}

func (p *catParser) lit(s string) {
	if p.bad || len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		p.bad = true
		return
	}
	p.i += len(s)
}

func (p *catParser) peek(c byte) bool { return !p.bad && p.i < len(p.b) && p.b[p.i] == c }

func (p *catParser) int() int64 {
	if p.bad {
		return 0
	}
	neg := p.i < len(p.b) && p.b[p.i] == '-'
	if neg {
		p.i++
	}
	start := p.i
	var v uint64
	for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
		v = v*10 + uint64(p.b[p.i]-'0')
		p.i++
	}
	// At most 19 digits (no uint64 overflow), within int64, and no
	// leading zeros or "-0": the one form strconv writes.
	if n := p.i - start; n == 0 || n > 19 || v > math.MaxInt64 || n > 1 && p.b[start] == '0' || neg && v == 0 {
		p.bad = true
		return 0
	}
	if neg {
		return -int64(v)
	}
	return int64(v)
}

func (p *catParser) stamp() stamp {
	p.lit("[")
	a := p.int()
	p.lit(",")
	b := p.int()
	p.lit("]")
	return stamp{a, b}
}

// raw returns the bytes of a JSON string without escapes, and whether it
// had any (then str decodes it with encoding/json).
func (p *catParser) rawString() ([]byte, bool) {
	p.lit(`"`)
	if p.bad {
		return nil, false
	}
	start := p.i
	escaped := false
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case '"':
			p.i++
			return p.b[start : p.i-1], escaped
		case '\\':
			escaped = true
			p.i++
		}
		p.i++
	}
	p.bad = true
	return nil, false
}

func (p *catParser) str() string {
	start := p.i
	raw, escaped := p.rawString()
	if p.bad {
		return ""
	}
	if !escaped {
		return string(raw)
	}
	var s string
	if err := json.Unmarshal(p.b[start:p.i], &s); err != nil {
		p.bad = true
	}
	return s
}

func (p *catParser) time() time.Time {
	raw, escaped := p.rawString()
	if p.bad || escaped {
		p.bad = true
		return time.Time{}
	}
	if t, ok := parseUTC(raw); ok {
		return t
	}
	t, err := time.Parse(time.RFC3339Nano, string(raw))
	if err != nil {
		p.bad = true
	}
	return t
}

// parseUTC parses the form time.RFC3339Nano gives a UTC time,
// 2006-01-02T15:04:05.999999999Z, to the same time.Time time.Parse
// returns; ok is false for anything else (time.Parse decides).
func parseUTC(b []byte) (time.Time, bool) {
	if len(b) < 20 || b[len(b)-1] != 'Z' || b[4] != '-' || b[7] != '-' || b[10] != 'T' || b[13] != ':' || b[16] != ':' {
		return time.Time{}, false
	}
	num := func(s []byte) (int, bool) {
		v := 0
		for _, c := range s {
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	year, ok1 := num(b[0:4])
	month, ok2 := num(b[5:7])
	day, ok3 := num(b[8:10])
	hour, ok4 := num(b[11:13])
	minute, ok5 := num(b[14:16])
	sec, ok6 := num(b[17:19])
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	nsec := 0
	if frac := b[19 : len(b)-1]; len(frac) > 0 {
		// A dot and 1 to 9 digits, the last not 0 (RFC3339Nano trims them).
		if len(frac) < 2 || len(frac) > 10 || frac[0] != '.' || frac[len(frac)-1] == '0' {
			return time.Time{}, false
		}
		v, ok := num(frac[1:])
		if !ok {
			return time.Time{}, false
		}
		for range 10 - len(frac) {
			v *= 10
		}
		nsec = v
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, time.UTC)
	if t.Day() != day {
		return time.Time{}, false // past the month's end
	}
	return t, true
}

// decodeCatRecord decodes one line (without its newline), checking its
// frame and CRC.
func decodeCatRecord(line []byte) (catRecord, error) {
	if err := jsonl.Verify(line); err != nil {
		return catRecord{}, err
	}
	p := catParser{b: line[:len(line)-jsonl.SuffixLen]}
	var r catRecord
	p.lit(`{"k":"`)
	if p.bad || p.i >= len(p.b) {
		return r, errCatalogue
	}
	r.kind = p.b[p.i]
	p.i++
	p.lit(`","dir":`)
	r.dir = p.stamp()
	switch r.kind {
	case kindHeader:
		p.lit(`,"v":`)
		if v := p.int(); v != catalogueFormat {
			p.bad = true
		}
		p.lit(`,"gen":`)
		r.gen = p.int()
	case kindEntry, kindUnreadable, kindPending, kindCommit:
		p.lit(`,"id":"`)
		if p.bad || len(p.b)-p.i < 36 {
			return r, errCatalogue
		}
		id, err := uuid.ParseBytes(p.b[p.i : p.i+36])
		var canon [36]byte
		if err != nil || !bytes.Equal(canonical.AppendUUID(canon[:0], id), p.b[p.i:p.i+36]) {
			return r, errCatalogue // only the canonical form: one line, one encoding
		}
		r.id = id
		p.i += 36
		p.lit(`","file":`)
		r.file = p.stamp()
		if hasMeta(r.kind) {
			m := &r.meta
			m.ID = id
			p.lit(`,"created_at":`)
			m.CreatedAt = p.time()
			p.lit(`,"updated_at":`)
			m.UpdatedAt = p.time()
			p.lit(`,"name":`)
			m.Name = p.str()
			p.lit(`,"working_dir":`)
			m.WorkingDir = p.str()
			p.lit(`,"model":`)
			m.Model = p.str()
			p.lit(`,"labels":{`)
			for !p.bad && !p.peek('}') {
				if len(m.Labels) > 0 {
					p.lit(",")
				}
				k := p.str()
				p.lit(":")
				v := p.str()
				if m.Labels == nil {
					m.Labels = map[string]string{}
				}
				m.Labels[k] = v
			}
			p.lit("}")
			p.lineage(m)
		}
	default:
		return r, errCatalogue
	}
	if p.bad || p.i != len(p.b) {
		return r, errCatalogue
	}
	return r, nil
}

// appendCatLineage appends m's lineage members that are not zero, in
// their fixed order.
func appendCatLineage(dst []byte, m Meta) []byte {
	if f := m.ForkedFrom; f != nil {
		dst = append(dst, `,"forked_from":["`...)
		dst = canonical.AppendUUID(dst, f.Session)
		dst = append(dst, `","`...)
		dst = canonical.AppendUUID(dst, f.Event)
		dst = append(dst, `"]`...)
	}
	if m.ParentSession != uuid.Nil {
		dst = append(dst, `,"parent_session":"`...)
		dst = canonical.AppendUUID(dst, m.ParentSession)
		dst = append(dst, '"')
	}
	if m.SpawnedBy != uuid.Nil {
		dst = append(dst, `,"spawned_by":"`...)
		dst = canonical.AppendUUID(dst, m.SpawnedBy)
		dst = append(dst, '"')
	}
	if m.Depth != 0 {
		dst = append(dst, `,"depth":`...)
		dst = strconv.AppendInt(dst, int64(m.Depth), 10)
	}
	return dst
}

// lineage decodes the members appendCatLineage writes: each present only
// when not zero, in its order.
func (p *catParser) lineage(m *Meta) {
	if p.member(`,"forked_from":[`) {
		var f ForkPoint
		f.Session = p.uuid()
		p.lit(",")
		f.Event = p.uuid()
		p.lit("]")
		m.ForkedFrom = &f
	}
	if p.member(`,"parent_session":`) {
		if m.ParentSession = p.uuid(); m.ParentSession == uuid.Nil {
			p.bad = true
		}
	}
	if p.member(`,"spawned_by":`) {
		if m.SpawnedBy = p.uuid(); m.SpawnedBy == uuid.Nil {
			p.bad = true
		}
	}
	if p.member(`,"depth":`) {
		d := p.int()
		if d == 0 || d < math.MinInt32 || d > math.MaxInt32 {
			p.bad = true
		}
		m.Depth = int(d)
	}
}

// member reports whether the optional member that name introduces comes
// next, and if so consumes its name.
func (p *catParser) member(name string) bool {
	if p.bad || len(p.b)-p.i < len(name) || string(p.b[p.i:p.i+len(name)]) != name {
		return false
	}
	p.i += len(name)
	return true
}

// uuid decodes a quoted id in its canonical form.
func (p *catParser) uuid() uuid.UUID {
	p.lit(`"`)
	if p.bad || len(p.b)-p.i < 37 || p.b[p.i+36] != '"' {
		p.bad = true
		return uuid.UUID{}
	}
	id, err := uuid.ParseBytes(p.b[p.i : p.i+36])
	var canon [36]byte
	if err != nil || !bytes.Equal(canonical.AppendUUID(canon[:0], id), p.b[p.i:p.i+36]) {
		p.bad = true
		return uuid.UUID{}
	}
	p.i += 37
	return id
}

// catLines calls fn for each whole line of b (without its newline) and
// returns the offset after the last one.
func catLines(b []byte, fn func(line []byte) bool) int {
	off := 0
	for off < len(b) {
		n := bytes.IndexByte(b[off:], '\n')
		if n < 0 {
			break
		}
		if !fn(b[off : off+n]) {
			break
		}
		off += n + 1
	}
	return off
}

// catEntry is what the catalogue holds of one session.
type catEntry struct {
	file       stamp
	meta       Meta
	unreadable bool
}

// catLog is the log folded: the commits since the snapshot, the ids with
// an open pending record, and where the log stands.
type catLog struct {
	gen       int64
	head      stamp // the header's directory stamp
	dir       stamp // of the newest record (the header's if none)
	committed map[uuid.UUID]catEntry
	pending   map[uuid.UUID]bool
	records   int
	size      int64 // the end of its last good line
	tail      bool  // an unsynced tail follows size (a writer rewrites)
}

// add folds record r, a pending record or a commit, into the log.
func (l *catLog) add(r catRecord) {
	if r.kind == kindPending {
		l.pending[r.id] = true
	} else {
		delete(l.pending, r.id)
		l.committed[r.id] = catEntry{file: r.file, meta: r.meta}
	}
	l.dir = r.dir
	l.records++
}

// maxCatLine bounds a catalogue line without its newline: a session's
// metadata, whose strings session.json holds escaped the same way in at
// most maxMetaSize bytes, and a few hundred bytes of ids, stamps and
// member names (TestCatalogueLineLimit). A longer line is damage, not
// read whole.
const maxCatLine = maxMetaSize + 4<<10

// maxCatLog bounds the log: a writer folds it into the snapshot at
// catalogueMaxLog records, and only failed foldings let it grow past.
// A larger log is unusable, as a damaged one is, and is not read.
const maxCatLog = 2 * catalogueMaxLog * (maxCatLine + 1)

// readCatLog reads and folds the log.
func readCatLog(fsys vfs.FS, dir string) (*catLog, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, catalogueLogName), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > maxCatLog {
		return nil, errCatalogue
	}
	return scanCatLog(f, info.Size())
}

func parseCatLog(b []byte) (*catLog, error) {
	return scanCatLog(bytes.NewReader(b), int64(len(b)))
}

// scanCatLog folds the log that r holds, of about size bytes, reading it
// a line at a time: a line longer than maxCatLine is a bad line.
func scanCatLog(r io.Reader, size int64) (*catLog, error) {
	l := &catLog{committed: map[uuid.UUID]catEntry{}, pending: map[uuid.UUID]bool{}}
	first, bad := true, false
	var end int64
	sc := jsonl.NewScannerSize(r, 0, size, maxCatLine)
	for sc.Next() {
		rec, err := decodeCatLine(sc)
		if bad {
			if err == nil {
				// A bad line is an unsynced tail only if no good line
				// follows.
				return nil, errCatalogue
			}
			continue
		}
		switch {
		case err != nil:
			bad = true
			continue
		case first:
			if rec.kind != kindHeader {
				return nil, errCatalogue
			}
			l.gen, l.head, l.dir, first = rec.gen, rec.dir, rec.dir, false
			end = sc.End()
			continue
		}
		if rec.kind != kindPending && rec.kind != kindCommit {
			bad = true
			continue
		}
		l.add(rec)
		end = sc.End()
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if first {
		return nil, errCatalogue // no Header: not even the rewrite that made it finished
	}
	l.size = end
	l.tail = sc.End() > end
	return l, nil
}

// decodeCatLine decodes the scanner's current line.
func decodeCatLine(sc *jsonl.Scanner) (catRecord, error) {
	if err := sc.Malformed(); err != nil {
		return catRecord{}, err
	}
	return decodeCatRecord(sc.Line())
}

// catSnapshot is the snapshot read whole: its header and entries in id
// order.
type catSnapshot struct {
	gen     int64
	dir     stamp
	ids     []uuid.UUID
	entries []catEntry
}

func readCatSnapshot(fsys vfs.FS, dir string) (*catSnapshot, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, catalogueName), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return scanCatSnapshot(f, info.Size())
}

// scanCatSnapshot reads the snapshot that r holds, of about size bytes, a
// line at a time, stopping at the first bad one: a line longer than
// maxCatLine is one. Its entries are kept as they come (the file's size
// sets room for few of them: it is no promise of its lines).
func scanCatSnapshot(r io.Reader, size int64) (*catSnapshot, error) {
	s := &catSnapshot{}
	n := min(size/256, 1<<10)
	s.ids, s.entries = make([]uuid.UUID, 0, n), make([]catEntry, 0, n)
	first := true
	sc := jsonl.NewScannerSize(r, 0, size, maxCatLine)
	sc.StopAtMalformed() // its first bad line ends it: read no further
	for sc.Next() {
		rec, err := decodeCatLine(sc)
		switch {
		case err != nil:
			return nil, errCatalogue
		case first:
			if rec.kind != kindHeader {
				return nil, errCatalogue
			}
			s.gen, s.dir, first = rec.gen, rec.dir, false
		case rec.kind != kindEntry && rec.kind != kindUnreadable,
			len(s.ids) > 0 && bytesLess(rec.id[:], s.ids[len(s.ids)-1][:]) || len(s.ids) > 0 && rec.id == s.ids[len(s.ids)-1]:
			return nil, errCatalogue
		default:
			s.ids = append(s.ids, rec.id)
			s.entries = append(s.entries, catEntry{file: rec.file, meta: rec.meta, unreadable: rec.kind == kindUnreadable})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if first || sc.End() != sc.Offset() {
		return nil, errCatalogue // written by durable.ReplaceFile: whole or damaged
	}
	return s, nil
}

// catState is the snapshot with the log folded over it: what the
// catalogue says of every session.
type catState struct {
	snap *catSnapshot
	log  *catLog
}

// loadCatState reads the snapshot and the log; an error (errCatalogue,
// or a missing file) means the catalogue cannot be used.
func loadCatState(fsys vfs.FS, dir string) (*catState, error) {
	snap, err := readCatSnapshot(fsys, dir)
	if err != nil {
		return nil, err
	}
	l, err := readCatLog(fsys, dir)
	if err != nil {
		return nil, err
	}
	if l.gen != snap.gen {
		return nil, errCatalogue
	}
	return &catState{snap: snap, log: l}, nil
}

// lookup returns what the catalogue says of id: its entry (ok false if
// none), and whether the entry may be used without reading session.json
// if its stamp matches (no open pending record, not unreadable).
func (st *catState) lookup(id uuid.UUID, hint int) (catEntry, bool, bool) {
	if st.log.pending[id] {
		return catEntry{}, false, false
	}
	if e, ok := st.log.committed[id]; ok {
		return e, true, true
	}
	i := hint
	if i < 0 || i >= len(st.snap.ids) || st.snap.ids[i] != id {
		var found bool
		i, found = slices.BinarySearchFunc(st.snap.ids, id, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		if !found {
			return catEntry{}, false, false
		}
	}
	e := st.snap.entries[i]
	return e, true, !e.unreadable
}

// resolveMeta returns a session's metadata from the catalogue's entry e
// when session.json's stamp is still the recorded one, else from
// session.json. buf is a reading buffer, returned for reuse.
func resolveMeta(fsys vfs.FS, sdir string, id uuid.UUID, e catEntry, usable bool, buf []byte) (Meta, []byte, error) {
	if usable {
		if st, err := statStamp(fsys, filepath.Join(sdir, metaFile)); err == nil && st == e.file {
			return e.meta, buf, nil // decoded for this call: the caller's own
		}
	}
	m, _, buf, err := readMetaInto(fsys, sdir, id, buf)
	return m, buf, err
}

// catalogue is a Store's access to its catalogue files: reading them, and
// for a writable store the protocol's steps and rewrites. mu orders the
// Store's own writers before they take the lock file.
//
// The Store's appends to the log run in batches (withLog): an append that
// arrives while a batch holds the lock joins the next batch, which takes
// the lock once, checks the log once, writes every record of its appends
// in one write and, after releasing the lock, syncs once for all of them
// if any asked for a sync. A record is written, and synced, only after
// its own step ran (Create's mkdir, Delete's move), so each still follows
// its change as the protocol says; batching only shares the lock, the
// write and the sync.
type catalogue struct {
	mu   sync.Mutex
	fsys vfs.FS
	dir  string // the store's root
	opts *Options

	batchMu sync.Mutex // guards next
	next    *catBatch  // the batch appends join, not yet started; nil if none

	logSync durable.Coalescer // the syncs of the log after batches (withLog)

	// known is the log as this Store's last batch left it, guarded by mu:
	// current checks that the file still ends as it did instead of
	// reading it again. nil when unknown (before the first batch, after
	// a rewrite).
	known *knownLog
}

// knownLog is the log as a batch left it: folded, and its last line
// (with its newline), which ends the file at log.size.
type knownLog struct {
	log  *catLog
	last []byte
}

// header returns the log's header line, with its newline.
func (l *catLog) header() []byte {
	return appendCatRecord(nil, catRecord{kind: kindHeader, dir: l.head, gen: l.gen})
}

// catBatch is appends to the log that run together (withLog). done is
// closed when the batch has run, each append's err set.
type catBatch struct {
	appends []*catAppend
	done    chan struct{}
}

// catAppend is one append of a batch: rec as withLog takes it, and its
// outcome.
type catAppend struct {
	rec func(l *catLog) (catRecord, bool, error)
	err error
}

func (c *catalogue) sessions() string { return filepath.Join(c.dir, sessionsDir) }

// lock takes the catalogue's lock file, waiting for another holder (a
// writer holds it for an append, or a rewrite).
func (c *catalogue) lock() (io.Closer, error) {
	c.mu.Lock()
	for {
		lk, err := c.fsys.Lock(filepath.Join(c.dir, catalogueLockName), c.opts.FileMode)
		if err == nil {
			return unlockBoth{lk, &c.mu}, nil
		}
		if !errors.Is(err, vfs.ErrLocked) {
			c.mu.Unlock()
			return nil, err
		}
		time.Sleep(time.Millisecond)
	}
}

type unlockBoth struct {
	lk io.Closer
	mu *sync.Mutex
}

func (u unlockBoth) Close() error {
	err := u.lk.Close()
	u.mu.Unlock()
	return err
}

// willWrite is step 1 of the protocol for session id: with the lock held,
// it brings the catalogue up to date if it is not (rebuild), runs
// change (Create's mkdir; may be nil, and may say that no write follows),
// and appends a synced pending record with the sessions directory's stamp
// after it.
func (c *catalogue) willWrite(id uuid.UUID, change func() (skip bool, err error)) error {
	return c.withLog(func(l *catLog) (catRecord, bool, error) {
		if change != nil {
			skip, err := change()
			if err != nil || skip {
				return catRecord{}, false, err
			}
		}
		return catRecord{kind: kindPending, id: id}, true, nil
	})
}

// wrote is step 3: m is now durable in session.json. After an error the
// pending record stays open, which sends readers to session.json; the
// caller stops writing as after any failed write.
func (c *catalogue) wrote(m Meta) error {
	// The caller holds the session's lock: no one changes session.json
	// before the record is written.
	st, err := statStamp(c.fsys, filepath.Join(c.sessions(), m.ID.String(), metaFile))
	if err != nil {
		return err
	}
	r := catRecord{kind: kindCommit, id: m.ID, file: st, meta: m.clone()}
	return c.withLog(func(l *catLog) (catRecord, bool, error) { return r, false, nil })
}

// withLog runs one append under the lock: it reads the log, rewrites the
// catalogue first if it is unusable, has an unsynced tail or the sessions
// directory changed behind it, then appends the record rec returns
// (stamped with the directory's stamp after rec ran) and folds the log
// into a new snapshot once it is long; then, if sync, it syncs the log.
// An error of rec is returned and nothing appended for it.
//
// Appends of the Store's goroutines are batched: the first append to find
// no batch waiting starts one and leads it; the appends that arrive until
// it gets the lock (while the batch before holds it) join it. The leader
// runs every rec of its batch in arrival order, under one lock and
// against one read of the log, and writes their records in one write,
// stamped with the directory's stamp after the last rec. It syncs after
// releasing the lock, so that the next batch writes meanwhile: one sync
// of the log serves every batch written before it began (logSync). When
// withLog returns nil its record is written, and durable if sync; a
// failed write fails every append of the batch that had a record, a
// failed sync those that asked for one.
func (c *catalogue) withLog(rec func(l *catLog) (catRecord, bool, error)) error {
	a := &catAppend{rec: rec}
	c.batchMu.Lock()
	b := c.next
	lead := b == nil
	if lead {
		b = &catBatch{done: make(chan struct{})}
		c.next = b
	}
	b.appends = append(b.appends, a)
	c.batchMu.Unlock()
	if !lead {
		<-b.done
		return a.err
	}
	defer close(b.done)
	lk, err := c.lock() // waits for the batch before this one
	c.batchMu.Lock()
	c.next = nil // appends from now on make the next batch
	appends := b.appends
	c.batchMu.Unlock()
	if err != nil {
		for _, a := range appends {
			a.err = err
		}
		return err
	}
	synced := c.runBatch(appends)
	lk.Close()
	if len(synced) > 0 {
		// The records are written: a later batch's sync, or a rewrite
		// (which syncs the pending records it keeps), may make them
		// durable first, and no sync of this one can lose them.
		if err := c.logSync.Do(c.syncLog); err != nil {
			for _, a := range synced {
				a.err = err
			}
		}
	}
	return a.err
}

// runBatch runs a batch's appends with the lock held (withLog), setting
// the err of each that failed, and returns those whose record is written
// and must be synced.
func (c *catalogue) runBatch(appends []*catAppend) (synced []*catAppend) {
	fail := func(as []*catAppend, err error) {
		for _, a := range as {
			a.err = err
		}
	}
	l, f, err := c.current()
	if err != nil {
		fail(appends, err)
		return nil
	}
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	var recs []catRecord
	var written []*catAppend // the appends with a record, in order
	commit := false
	for _, a := range appends {
		r, sync, err := a.rec(l)
		if err != nil || r.kind == 0 {
			a.err = err
			continue
		}
		recs, written = append(recs, r), append(written, a)
		if sync {
			synced = append(synced, a)
		}
		commit = commit || r.kind == kindCommit
	}
	if len(recs) == 0 {
		return synced
	}
	dir, err := statStamp(c.fsys, c.sessions())
	if err != nil {
		fail(written, err)
		return nil
	}
	var buf []byte
	for _, r := range recs {
		r.dir = dir
		buf = appendCatRecord(buf, r)
	}
	_, err = f.WriteAt(buf, l.size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	f = nil
	if err != nil {
		fail(written, err)
		return nil
	}
	for _, r := range recs {
		r.dir = dir
		l.add(r)
	}
	l.size += int64(len(buf))
	c.known = &knownLog{log: l, last: buf[bytes.LastIndexByte(buf[:len(buf)-1], '\n')+1:]}
	if commit && l.records >= catalogueMaxLog {
		if err := c.fold(); err != nil && c.opts.Logger != nil {
			c.opts.Logger.Warn("sessionstore: catalogue compaction", "err", err)
		}
	}
	return synced
}

// syncLog syncs the log, for logSync: whatever file the name holds then
// holds every record written before it (a rewrite keeps the open pending
// records, synced), so that syncing it makes them durable.
func (c *catalogue) syncLog() error {
	f, err := c.fsys.OpenFile(filepath.Join(c.dir, catalogueLogName), os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// current returns the log with the lock held, rewriting the catalogue
// first when it cannot be appended to as it is, and the log file opened
// for writing, for the caller to close. The log this Store's last batch
// left is taken as it is when the file still starts with its header line
// (every rewrite, by any writer, writes a new generation's) and ends with
// that batch's last line at the same size, and the sessions directory's
// stamp is still its last record's; else the log is read again. (The
// snapshot is not checked then: a writer that died between its rewrite's
// two renames leaves a snapshot of a newer generation than the log,
// which readers take for an unusable catalogue until the next full read
// or fold, here or by another writer, rewrites it.)
func (c *catalogue) current() (*catLog, vfs.File, error) {
	path := filepath.Join(c.dir, catalogueLogName)
	if k := c.known; k != nil {
		c.known = nil
		f, err := c.fsys.OpenFile(path, os.O_RDWR, 0)
		if err == nil {
			if c.unchanged(f, k) {
				return k.log, f, nil
			}
			f.Close()
		}
	}
	l, err := c.readCurrent()
	if err != nil {
		return nil, nil, err
	}
	f, err := c.fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	return l, f, nil
}

// readCurrent is current reading the log.
func (c *catalogue) readCurrent() (*catLog, error) {
	l, err := readCatLog(c.fsys, c.dir)
	if err == nil && !l.tail {
		var snapGen int64
		snapGen, _, err = readCatHeader(c.fsys, c.dir)
		if err == nil && snapGen == l.gen {
			if d, err := statStamp(c.fsys, c.sessions()); err == nil && d == l.dir {
				return l, nil
			}
		}
	}
	if _, err := c.rebuild(); err != nil {
		return nil, err
	}
	return readCatLog(c.fsys, c.dir)
}

// unchanged reports whether the log file f is as k says the last batch
// left it (current), with the sessions directory's stamp its last
// record's.
func (c *catalogue) unchanged(f vfs.File, k *knownLog) bool {
	info, err := f.Stat()
	if err != nil || info.Size() != k.log.size {
		return false
	}
	head := k.log.header()
	buf := make([]byte, max(len(head), len(k.last)))
	if _, err := f.ReadAt(buf[:len(head)], 0); err != nil || !bytes.Equal(buf[:len(head)], head) {
		return false
	}
	if _, err := f.ReadAt(buf[:len(k.last)], k.log.size-int64(len(k.last))); err != nil || !bytes.Equal(buf[:len(k.last)], k.last) {
		return false
	}
	d, err := statStamp(c.fsys, c.sessions())
	return err == nil && d == k.log.dir
}

// readCatHeader reads the snapshot's header line alone.
func readCatHeader(fsys vfs.FS, dir string) (int64, stamp, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, catalogueName), os.O_RDONLY, 0)
	if err != nil {
		return 0, stamp{}, err
	}
	defer f.Close()
	return readCatHeaderFrom(f)
}

func readCatHeaderFrom(f vfs.File) (int64, stamp, error) {
	buf := make([]byte, 256)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, stamp{}, err
	}
	i := bytes.IndexByte(buf[:n], '\n')
	if i < 0 {
		return 0, stamp{}, errCatalogue
	}
	r, err := decodeCatRecord(buf[:i])
	if err != nil || r.kind != kindHeader {
		return 0, stamp{}, errCatalogue
	}
	return r.gen, r.dir, nil
}

// rebuild rewrites the catalogue with the lock held: the snapshot, then a
// log holding the open pending records, under a new generation. It lists
// the sessions directory: entries of directories gone are dropped, and
// sessions the catalogue does not know (all of them when it is unusable),
// or whose session.json's stamp is not the recorded one, are read from
// session.json. It returns the new state. (The log's compaction folds it
// without the scan: fold.)
func (c *catalogue) rebuild() (*catState, error) {
	c.known = nil
	old, err := loadCatState(c.fsys, c.dir)
	if err != nil {
		old = nil
		// Keep the open pending records of a log that is still readable:
		// writers of other processes may be between their steps 1 and 3.
		if l, lerr := readCatLog(c.fsys, c.dir); lerr == nil {
			old = &catState{snap: &catSnapshot{}, log: l}
			old.log.committed = map[uuid.UUID]catEntry{}
		}
	}
	dirStamp, err := statStamp(c.fsys, c.sessions())
	if err != nil {
		return nil, err
	}
	var gen int64
	if g, _, err := readCatHeader(c.fsys, c.dir); err == nil {
		gen = g
	}
	if old != nil {
		gen = max(gen, old.log.gen)
	}
	gen++

	pending := map[uuid.UUID]bool{}
	ids, err := sessionIDs(c.fsys, c.sessions())
	if err != nil {
		return nil, err
	}
	entries := make([]catEntry, len(ids))
	known := make([]bool, len(ids))
	for i, id := range ids {
		if old == nil {
			continue
		}
		if old.log.pending[id] {
			pending[id] = true
		}
		if e, ok, _ := old.lookup(id, -1); ok {
			entries[i], known[i] = e, true
		} else if e, ok := old.snapEntry(id); ok {
			entries[i], known[i] = e, true
		}
	}
	found := make([]bool, len(ids))
	workers := min(runtime.GOMAXPROCS(0), (len(ids)+listBatch-1)/listBatch)
	bufs := make([][]byte, max(workers, 1))
	forEach(len(ids), workers, func(w, i int) {
		sdir := filepath.Join(c.sessions(), ids[i].String())
		st, serr := statStamp(c.fsys, filepath.Join(sdir, metaFile))
		if known[i] && serr == nil && st == entries[i].file {
			found[i] = true // as recorded; else read again, changed behind the catalogue
			return
		}
		m, _, buf, err := readMetaInto(c.fsys, sdir, ids[i], bufs[w])
		bufs[w] = buf
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil || serr != nil:
			entries[i], found[i] = catEntry{file: st, unreadable: true}, true
		default:
			entries[i], found[i] = catEntry{file: st, meta: m}, true
		}
	})
	n := 0
	for i := range ids {
		if found[i] {
			ids[n], entries[n] = ids[i], entries[i]
			n++
		}
	}
	ids, entries = ids[:n], entries[:n]

	snap := appendCatRecord(make([]byte, 0, 256*(len(ids)+1)), catRecord{kind: kindHeader, dir: dirStamp, gen: gen})
	for i, id := range ids {
		r := catRecord{kind: kindEntry, id: id, file: entries[i].file, meta: entries[i].meta}
		if entries[i].unreadable {
			r.kind, r.meta = kindUnreadable, Meta{}
		}
		snap = appendCatRecord(snap, r)
	}
	logb := appendCatRecord(nil, catRecord{kind: kindHeader, dir: dirStamp, gen: gen})
	for id := range pending {
		logb = appendCatRecord(logb, catRecord{kind: kindPending, dir: dirStamp, id: id})
	}
	if err := durable.ReplaceFile(c.fsys, c.dir, catalogueName, snap, c.opts.FileMode); err != nil {
		return nil, err
	}
	if err := durable.ReplaceFile(c.fsys, c.dir, catalogueLogName, logb, c.opts.FileMode); err != nil {
		return nil, err
	}
	l := &catLog{gen: gen, head: dirStamp, dir: dirStamp, committed: map[uuid.UUID]catEntry{}, pending: pending, size: int64(len(logb))}
	return &catState{snap: &catSnapshot{gen: gen, dir: dirStamp, ids: ids, entries: entries}, log: l}, nil
}

// fold rewrites the catalogue with the lock held, folding the log into
// the snapshot once it is long (withLog), as rebuild does without a scan
// but without decoding the snapshot: its entry lines are checked (frame,
// id order) and copied as they are, but for the ids the log commits,
// whose new lines take their place, and the ids whose session directory
// is gone (dropDeleted); the new log holds the open pending records,
// under a new generation. A catalogue it cannot fold so (unusable, of two
// generations, with a line that does not check) is rebuilt with a scan.
func (c *catalogue) fold() error {
	c.known = nil
	l, err := readCatLog(c.fsys, c.dir)
	if err != nil || l.tail {
		_, err := c.rebuild()
		return err
	}
	f, err := c.fsys.OpenFile(filepath.Join(c.dir, catalogueName), os.O_RDONLY, 0)
	if err != nil {
		_, err := c.rebuild()
		return err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	pending := maps.Clone(l.pending)
	gone := dropDeleted(c.fsys, c.sessions(), pending)
	dirStamp, err := statStamp(c.fsys, c.sessions())
	if err != nil {
		f.Close()
		return err
	}
	snap, ok, err := foldSnapshot(f, info.Size(), l, gone, dirStamp)
	f.Close()
	switch {
	case err != nil:
		return err
	case !ok:
		_, err := c.rebuild()
		return err
	}
	logb := appendCatRecord(nil, catRecord{kind: kindHeader, dir: dirStamp, gen: l.gen + 1})
	for id := range pending {
		logb = appendCatRecord(logb, catRecord{kind: kindPending, dir: dirStamp, id: id})
	}
	if err := durable.ReplaceFile(c.fsys, c.dir, catalogueName, snap, c.opts.FileMode); err != nil {
		return err
	}
	return durable.ReplaceFile(c.fsys, c.dir, catalogueLogName, logb, c.opts.FileMode)
}

// foldSnapshot returns the snapshot r holds (of about size bytes) with
// the commits of l folded in, under l's next generation and dir's stamp:
// the snapshot's entry lines in id order, each replaced by the line of
// the commit of its id if l has one, and left out if gone names it, with
// the lines of the other commits in their places. ok is false when the
// snapshot is not one to fold: of another generation than l, not in id
// order, or with a line that does not check (its frame, its kind, its
// id), or past the last whole line.
func foldSnapshot(r io.Reader, size int64, l *catLog, gone map[uuid.UUID]bool, dir stamp) (snap []byte, ok bool, err error) {
	commits := make([]uuid.UUID, 0, len(l.committed))
	for id := range l.committed {
		if !gone[id] {
			commits = append(commits, id)
		}
	}
	slices.SortFunc(commits, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	// Room for the lines the file's size promises, within reason: a
	// damaged snapshot may say it is far larger than the lines it holds.
	snap = make([]byte, 0, min(size, 64<<20)+int64(len(commits))*512)
	snap = appendCatRecord(snap, catRecord{kind: kindHeader, dir: dir, gen: l.gen + 1})
	addCommits := func(below *uuid.UUID) {
		for len(commits) > 0 && (below == nil || bytes.Compare(commits[0][:], below[:]) < 0) {
			e := l.committed[commits[0]]
			snap = appendCatRecord(snap, catRecord{kind: kindEntry, id: commits[0], file: e.file, meta: e.meta})
			commits = commits[1:]
		}
	}
	first := true
	var prev uuid.UUID
	sc := jsonl.NewScannerSize(r, 0, size, maxCatLine)
	sc.StopAtMalformed()
	for sc.Next() {
		if sc.Malformed() != nil {
			return nil, false, nil
		}
		line := sc.Line()
		if first {
			h, err := decodeCatRecord(line)
			if err != nil || h.kind != kindHeader || h.gen != l.gen {
				return nil, false, nil
			}
			first = false
			continue
		}
		kind, id, ok := catLineID(line)
		if !ok || kind != kindEntry && kind != kindUnreadable || prev != uuid.Nil && bytes.Compare(prev[:], id[:]) >= 0 {
			return nil, false, nil
		}
		prev = id
		addCommits(&id)
		if len(commits) > 0 && commits[0] == id {
			continue // its commit's line comes in its place
		}
		if !gone[id] {
			snap = append(append(snap, line...), '\n')
		}
	}
	if err := sc.Err(); err != nil {
		return nil, false, err
	}
	if first || sc.End() != sc.Offset() {
		return nil, false, nil // no header, or bytes past the last whole line
	}
	addCommits(nil)
	return snap, true, nil
}

// catLineID checks a catalogue line's frame and returns its kind and id,
// without decoding the rest of it: enough to copy a snapshot's entry line
// as it is.
func catLineID(line []byte) (kind byte, id uuid.UUID, ok bool) {
	if jsonl.Verify(line) != nil {
		return 0, uuid.Nil, false
	}
	p := catParser{b: line}
	p.lit(`{"k":"`)
	if p.bad || p.i >= len(p.b) {
		return 0, uuid.Nil, false
	}
	kind = p.b[p.i]
	p.i++
	p.lit(`","dir":`)
	p.stamp()
	p.lit(`,"id":`)
	id = p.uuid()
	return kind, id, !p.bad
}

// snapEntry is the snapshot's entry for id, whatever the log says.
func (st *catState) snapEntry(id uuid.UUID) (catEntry, bool) {
	i, found := slices.BinarySearchFunc(st.snap.ids, id, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	if !found {
		return catEntry{}, false
	}
	return st.snap.entries[i], true
}

// state returns the catalogue for a reader: as it is on disk if usable,
// else (a writable store) rewritten from the session.json files, else nil:
// the caller reads session.json files.
func (c *catalogue) state() *catState {
	st, err := loadCatState(c.fsys, c.dir)
	if err == nil || c.opts.ReadOnly {
		return st
	}
	lk, err := c.lock()
	if err != nil {
		return nil
	}
	defer lk.Close()
	if st, err := loadCatState(c.fsys, c.dir); err == nil {
		return st // another writer rewrote it meanwhile
	}
	st, err = c.rebuild()
	if err != nil {
		return nil
	}
	return st
}

// sessionIDs lists the session directories under root in id order.
func sessionIDs(fsys vfs.FS, root string) ([]uuid.UUID, error) {
	names, err := fsys.ReadDir(root)
	if err != nil {
		return nil, err
	}
	ids := make([]uuid.UUID, 0, len(names))
	var canon [36]byte
	for _, name := range names {
		if len(name) != 36 {
			continue
		}
		id, err := uuid.Parse(name)
		if err != nil || string(canonical.AppendUUID(canon[:0], id)) != name {
			continue // not a session directory
		}
		ids = append(ids, id)
	}
	// Names sorted (ReadDir sorts them) are ids sorted: lower-case hex
	// sorts as the bytes it encodes.
	if !slices.IsSortedFunc(ids, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }) {
		sort.Slice(ids, func(i, j int) bool { return bytesLess(ids[i][:], ids[j][:]) })
	}
	return ids, nil
}

// openBackwards opens the catalogue for reading backwards, as recent and
// page do: the snapshot (for the caller to close) and its size, the log,
// and the ids the log names that below accepts (all, for nil), newest
// first: they override the snapshot. ok is false when the catalogue
// cannot answer: unusable, or the sessions directory's stamp is not the
// one recorded.
func (c *catalogue) openBackwards(below func(uuid.UUID) bool) (f vfs.File, size int64, l *catLog, logIDs []uuid.UUID, ok bool) {
	f, err := c.fsys.OpenFile(filepath.Join(c.dir, catalogueName), os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, nil, nil, false
	}
	gen, _, err := readCatHeaderFrom(f)
	if err == nil {
		l, err = readCatLog(c.fsys, c.dir)
	}
	if err == nil && l.gen != gen {
		err = errCatalogue
	}
	if err == nil {
		if d, serr := statStamp(c.fsys, c.sessions()); serr != nil || d != l.dir {
			err = errCatalogue
		}
	}
	var info fs.FileInfo
	if err == nil {
		info, err = f.Stat()
	}
	if err != nil {
		f.Close()
		return nil, 0, nil, nil, false
	}
	for id := range l.committed {
		if below == nil || below(id) {
			logIDs = append(logIDs, id)
		}
	}
	for id := range l.pending {
		if _, dup := l.committed[id]; !dup && (below == nil || below(id)) {
			logIDs = append(logIDs, id)
		}
	}
	sort.Slice(logIDs, func(i, j int) bool { return bytesLess(logIDs[j][:], logIDs[i][:]) })
	return f, info.Size(), l, logIDs, true
}

// recent returns up to n sessions, newest first, from the catalogue
// without reading the whole snapshot: the log, then the snapshot's lines
// backwards from its end. ok is false when the catalogue cannot answer
// (unusable, or the sessions directory's stamp is not the one recorded):
// the caller lists all sessions instead.
func (c *catalogue) recent(n int) (metas []Meta, bad []UnreadableSession, ok bool) {
	f, size, l, logIDs, ok := c.openBackwards(nil)
	if !ok {
		return nil, nil, false
	}
	defer f.Close()
	inLog := func(id uuid.UUID) bool {
		_, committed := l.committed[id]
		return committed || l.pending[id]
	}

	tail := catTail{f: f, end: size}
	root := c.sessions()
	var buf []byte
	add := func(id uuid.UUID, e catEntry, usable bool) {
		sdir := filepath.Join(root, id.String())
		m, b, err := resolveMeta(c.fsys, sdir, id, e, usable, buf)
		buf = b
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			bad = append(bad, UnreadableSession{ID: id, Path: filepath.Join(sdir, metaFile), Err: err})
		default:
			metas = append(metas, m)
		}
	}
	if err := mergeBackwards(&tail, l, logIDs, inLog, func() bool { return len(metas) < n }, add); err != nil {
		return nil, nil, false
	}
	return metas, bad, true
}

// mergeBackwards hands add the sessions of the log's logIDs (newest
// first) and of the snapshot's lines read backwards from tail, merged
// newest first, while more says to go on: a log entry (usable if
// committed and not pending since) in place of the snapshot's line of
// its id, which skip passes over. It returns the error of a line read.
func mergeBackwards(tail *catTail, l *catLog, logIDs []uuid.UUID, skip func(uuid.UUID) bool, more func() bool, add func(id uuid.UUID, e catEntry, usable bool)) error {
	snapRec, snapOK, err := tail.prev(skip)
	if err != nil {
		return err
	}
	li := 0
	for more() && (snapOK || li < len(logIDs)) {
		if li < len(logIDs) && (!snapOK || bytesLess(snapRec.id[:], logIDs[li][:])) {
			id := logIDs[li]
			li++
			e, committed := l.committed[id]
			add(id, e, committed && !l.pending[id])
			continue
		}
		add(snapRec.id, catEntry{file: snapRec.file, meta: snapRec.meta}, snapRec.kind == kindEntry)
		if snapRec, snapOK, err = tail.prev(skip); err != nil {
			return err
		}
	}
	return nil
}

// catTail reads a snapshot's entry lines backwards from end.
type catTail struct {
	f     vfs.File
	end   int64  // the offset buf starts at
	buf   []byte // whole lines not yet returned, and before them a part line
	lines [][]byte
	done  bool

	decoded int // lines decoded, for the listing's cost (list.go)
}

// prev returns the entry before those returned, skipping ids skip says
// the log overrides; ok is false at the header.
func (t *catTail) prev(skip func(uuid.UUID) bool) (catRecord, bool, error) {
	for {
		for len(t.lines) > 0 {
			line := t.lines[len(t.lines)-1]
			t.lines = t.lines[:len(t.lines)-1]
			t.decoded++
			r, err := decodeCatRecord(line)
			if err != nil {
				return r, false, err
			}
			switch r.kind {
			case kindHeader:
				t.done = true
				return r, false, nil
			case kindEntry, kindUnreadable:
			default:
				return r, false, errCatalogue
			}
			if !skip(r.id) {
				return r, true, nil
			}
		}
		if t.done || t.end == 0 && len(t.buf) == 0 {
			return catRecord{}, false, nil
		}
		if t.end == 0 {
			// What is left is the first line.
			t.lines = append(t.lines, bytes.TrimSuffix(t.buf, []byte{'\n'}))
			t.buf = nil
			continue
		}
		const block = 32 << 10
		start := max(t.end-block, 0)
		chunk := make([]byte, t.end-start, int(t.end-start)+len(t.buf))
		if _, err := t.f.ReadAt(chunk, start); err != nil && !errors.Is(err, io.EOF) {
			return catRecord{}, false, err
		}
		chunk = append(chunk, t.buf...)
		t.end = start
		// Whole lines are those after the first newline (or all, at 0).
		body := chunk
		if start > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				if len(chunk) > maxCatLine+1 {
					return catRecord{}, false, errCatalogue // no line is that long
				}
				t.buf = chunk
				continue
			}
			t.buf, body = chunk[:i+1], chunk[i+1:]
		} else {
			t.buf = nil
		}
		catLines(body, func(line []byte) bool {
			t.lines = append(t.lines, line)
			return true
		})
		if len(body) > 0 && body[len(body)-1] != '\n' {
			return catRecord{}, false, errCatalogue // the snapshot ends with a newline
		}
	}
}

// hints returns, for each of ids (in id order), where the snapshot has
// it or would: a start for lookup's search.
func (st *catState) hints(ids []uuid.UUID) []int {
	hints := make([]int, len(ids))
	j := 0
	for i, id := range ids {
		for j < len(st.snap.ids) && bytesLess(st.snap.ids[j][:], id[:]) {
			j++
		}
		hints[i] = j
	}
	return hints
}

// meta returns session id's metadata as the catalogue has it if
// session.json is unchanged, else as session.json has it; buf is a
// reading buffer, returned for reuse.
func (st *catState) meta(fsys vfs.FS, root string, id uuid.UUID, hint int, buf []byte) (Meta, []byte, error) {
	e, _, usable := st.lookup(id, hint)
	return resolveMeta(fsys, filepath.Join(root, id.String()), id, e, usable, buf)
}

// dropDeleted removes from pending, and returns, the ids of pending whose
// session directory is gone: sessions Delete removed (a Create's pending
// record follows its directory's creation). It stats only the pending
// ids.
func dropDeleted(fsys vfs.FS, root string, pending map[uuid.UUID]bool) (gone map[uuid.UUID]bool) {
	gone = map[uuid.UUID]bool{}
	for id := range pending {
		if _, err := fsys.Stat(filepath.Join(root, id.String())); errors.Is(err, fs.ErrNotExist) {
			gone[id] = true
			delete(pending, id)
		}
	}
	return gone
}
