package catalogue

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Entry is what the catalogue holds of one session.
type Entry struct {
	File       Stamp // session.json's stamp when the entry was recorded
	Meta       Meta
	Unreadable bool // session.json could not be read: no Meta
}

// catLog is the log folded: the commits since the snapshot, the ids with
// an open pending record, and where the log stands.
type catLog struct {
	Gen       int64
	head      Stamp // the header's directory stamp
	Dir       Stamp // of the newest record (the header's if none)
	committed map[uuid.UUID]Entry
	pending   map[uuid.UUID]bool
	records   int
	size      int64 // the end of its last good line
	tail      bool  // an unsynced tail follows size (a writer rewrites)
}

// add folds record r, a pending record or a commit, into the log.
func (l *catLog) add(r Record) {
	if r.Kind == KindPending {
		l.pending[r.ID] = true
	} else {
		delete(l.pending, r.ID)
		l.committed[r.ID] = Entry{File: r.File, Meta: r.Meta}
	}
	l.Dir = r.Dir
	l.records++
}

// MaxLine bounds a catalogue line without its newline: a session's
// metadata, whose strings session.json holds escaped the same way in at
// most maxMetaSize bytes, and a few hundred bytes of ids, stamps and
// member names (the store's TestMetaSizeLimit checks that the line of
// its largest metadata fits). A longer line is damage, not read whole.
const MaxLine = maxMetaSize + 4<<10

// maxMetaSize is the largest session.json the store writes or reads, a
// bound of its format.
const maxMetaSize = 1 << 20

// maxCatLog bounds the log: a writer folds it into the snapshot at
// MaxLog records, and only failed foldings let it grow past.
// A larger log is unusable, as a damaged one is, and is not read.
const maxCatLog = 2 * MaxLog * (MaxLine + 1)

// readCatLog reads and folds the log.
func readCatLog(fsys vfs.FS, dir string) (*catLog, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, LogName), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > maxCatLog {
		return nil, ErrUnusable
	}
	return scanCatLog(f, info.Size())
}

func parseCatLog(b []byte) (*catLog, error) {
	return scanCatLog(bytes.NewReader(b), int64(len(b)))
}

// scanCatLog folds the log that r holds, of about size bytes, reading it
// a line at a time: a line longer than MaxLine is a bad line.
func scanCatLog(r io.Reader, size int64) (*catLog, error) {
	l := &catLog{committed: map[uuid.UUID]Entry{}, pending: map[uuid.UUID]bool{}}
	first, bad := true, false
	var end int64
	sc := jsonl.NewScannerSize(r, 0, size, MaxLine)
	for sc.Next() {
		rec, err := decodeCatLine(sc)
		if bad {
			if err == nil {
				// A bad line is an unsynced tail only if no good line
				// follows.
				return nil, ErrUnusable
			}
			continue
		}
		switch {
		case err != nil:
			bad = true
			continue
		case first:
			if rec.Kind != KindHeader {
				return nil, ErrUnusable
			}
			l.Gen, l.head, l.Dir, first = rec.Gen, rec.Dir, rec.Dir, false
			end = sc.End()
			continue
		}
		if rec.Kind != KindPending && rec.Kind != KindCommit {
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
		return nil, ErrUnusable // no Header: not even the rewrite that made it finished
	}
	l.size = end
	l.tail = sc.End() > end
	return l, nil
}

// decodeCatLine decodes the scanner's current line.
func decodeCatLine(sc *jsonl.Scanner) (Record, error) {
	if err := sc.Malformed(); err != nil {
		return Record{}, err
	}
	return DecodeRecord(sc.Line())
}

// catSnapshot is the snapshot read whole: its header and entries in id
// order.
type catSnapshot struct {
	Gen     int64
	Dir     Stamp
	ids     []uuid.UUID
	entries []Entry
}

func readCatSnapshot(fsys vfs.FS, dir string) (*catSnapshot, error) {
	f, err := fsys.OpenFile(filepath.Join(dir, Name), os.O_RDONLY, 0)
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
// MaxLine is one. Its entries are kept as they come (the file's size
// sets room for few of them: it is no promise of its lines).
func scanCatSnapshot(r io.Reader, size int64) (*catSnapshot, error) {
	s := &catSnapshot{}
	n := min(size/256, 1<<10)
	s.ids, s.entries = make([]uuid.UUID, 0, n), make([]Entry, 0, n)
	first := true
	sc := jsonl.NewScannerSize(r, 0, size, MaxLine)
	sc.StopAtMalformed() // its first bad line ends it: read no further
	for sc.Next() {
		rec, err := decodeCatLine(sc)
		switch {
		case err != nil:
			return nil, ErrUnusable
		case first:
			if rec.Kind != KindHeader {
				return nil, ErrUnusable
			}
			s.Gen, s.Dir, first = rec.Gen, rec.Dir, false
		case rec.Kind != KindEntry && rec.Kind != KindUnreadable,
			len(s.ids) > 0 && bytesLess(rec.ID[:], s.ids[len(s.ids)-1][:]) || len(s.ids) > 0 && rec.ID == s.ids[len(s.ids)-1]:
			return nil, ErrUnusable
		default:
			s.ids = append(s.ids, rec.ID)
			s.entries = append(s.entries, Entry{File: rec.File, Meta: rec.Meta, Unreadable: rec.Kind == KindUnreadable})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if first || sc.End() != sc.Offset() {
		return nil, ErrUnusable // written by durable.ReplaceFile: whole or damaged
	}
	return s, nil
}

// State is the snapshot with the log folded over it: what the
// catalogue says of every session, as it was read. It holds memory
// only; its methods only read it, and may run at once.
type State struct {
	snap *catSnapshot
	log  *catLog
}

// Load reads the snapshot and the log of the store root dir; an error
// (ErrUnusable, or a missing file) means the catalogue cannot be used. It
// writes nothing and takes no lock.
func Load(fsys vfs.FS, dir string) (*State, error) {
	snap, err := readCatSnapshot(fsys, dir)
	if err != nil {
		return nil, err
	}
	l, err := readCatLog(fsys, dir)
	if err != nil {
		return nil, err
	}
	if l.Gen != snap.Gen {
		return nil, ErrUnusable
	}
	return &State{snap: snap, log: l}, nil
}

// Lookup returns what the catalogue says of session id: its entry (ok
// false if none), and whether the entry may be used without reading
// session.json if its stamp matches (no open pending record, not
// unreadable; Entry.Fresh). hint is where the snapshot may hold id
// (Hints), or -1 for none.
func (st *State) Lookup(id uuid.UUID, hint int) (e Entry, ok, usable bool) {
	if st.log.pending[id] {
		return Entry{}, false, false
	}
	if e, ok := st.log.committed[id]; ok {
		return e, true, true
	}
	i := hint
	if i < 0 || i >= len(st.snap.ids) || st.snap.ids[i] != id {
		var found bool
		i, found = slices.BinarySearchFunc(st.snap.ids, id, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		if !found {
			return Entry{}, false, false
		}
	}
	e = st.snap.entries[i]
	return e, true, !e.Unreadable
}

// Fresh reports whether session.json in the session directory sdir still
// has the stamp e recorded: then e.Meta is what it holds, else (changed,
// gone, or not to be stat'ed) the caller reads session.json. Not seen: a
// session.json rewritten by hand to the same size within one tick of the
// file system's clock, or with its modification time set back.
func (e Entry) Fresh(fsys vfs.FS, sdir string) bool {
	if st, err := statStamp(fsys, filepath.Join(sdir, layout.MetaFile)); err == nil && st == e.File {
		return true
	}
	return false
}

// InSnapshot reports whether the snapshot has an entry for id, whatever
// the log says.
func (st *State) InSnapshot(id uuid.UUID) bool {
	_, ok := st.snapEntry(id)
	return ok
}

// Pending reports whether the log holds a pending record of id with no
// commit after it: a session.json being written.
func (st *State) Pending(id uuid.UUID) bool { return st.log.pending[id] }

// PendingLen is the number of ids Pending reports.
func (st *State) PendingLen() int { return len(st.log.pending) }

// snapEntry is the snapshot's entry for id, whatever the log says.
func (st *State) snapEntry(id uuid.UUID) (Entry, bool) {
	i, found := slices.BinarySearchFunc(st.snap.ids, id, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	if !found {
		return Entry{}, false
	}
	return st.snap.entries[i], true
}

// Hints returns, for each of ids (in id order), where the snapshot has
// it or would: a start for Lookup's search.
func (st *State) Hints(ids []uuid.UUID) []int {
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

// Current reports whether the sessions directory's stamp is the one st
// last recorded: then no session directory was added or removed since,
// except by hand within one tick of the file system's clock (see "What
// is detected"), and st names every session there is. Call it after
// reading st, so that a change made meanwhile is seen. It is one stat.
func (c *Catalogue) Current(st *State) bool {
	d, err := statStamp(c.fsys, c.sessions())
	return err == nil && st.log.current(d)
}

// current reports whether the log, read whole, may stand for every
// session while the sessions directory's stamp is d: d is the stamp of
// its newest record, and no tail was ignored. An ignored tail is what a
// crash leaves of unsynced commits, and nothing else if the disk is
// sound; but a damaged byte that joins the last lines into one bad line
// makes a synced pending record and its commit look the same, and the
// entry before them would be taken for current. So until a writer
// rewrites the log, a listing checks every session.json's stamp.
func (l *catLog) current(d Stamp) bool { return !l.tail && d == l.Dir }

// Each hands fn every session st names, in id order: the snapshot's
// entries with the log folded over them, then (merged in order) the
// ids only the log names. usable is Lookup's: false for an id with an
// open pending record (a session.json being written, or a session being
// deleted) or an unreadable one, which the caller reads from
// session.json.
func (st *State) Each(fn func(id uuid.UUID, e Entry, usable bool)) {
	var extra []uuid.UUID // ids of the log the snapshot lacks
	for id := range st.log.committed {
		if _, ok := st.snapEntry(id); !ok {
			extra = append(extra, id)
		}
	}
	for id := range st.log.pending {
		if _, dup := st.log.committed[id]; !dup {
			if _, ok := st.snapEntry(id); !ok {
				extra = append(extra, id)
			}
		}
	}
	slices.SortFunc(extra, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
	one := func(id uuid.UUID, snap Entry, inSnap bool) {
		switch e, ok := st.log.committed[id]; {
		case st.log.pending[id]:
			fn(id, Entry{}, false)
		case ok:
			fn(id, e, true)
		case inSnap:
			fn(id, snap, !snap.Unreadable)
		}
	}
	j := 0
	for i, id := range st.snap.ids {
		for j < len(extra) && bytesLess(extra[j][:], id[:]) {
			one(extra[j], Entry{}, false)
			j++
		}
		one(id, st.snap.entries[i], true)
	}
	for ; j < len(extra); j++ {
		one(extra[j], Entry{}, false)
	}
}

// Len is about how many sessions Each hands over: the snapshot's entries
// and the log's ids (some of them the same), for sizing.
func (st *State) Len() int {
	return len(st.snap.ids) + len(st.log.committed) + len(st.log.pending)
}

// Version is the stamps (modification time and size) of the catalogue's
// snapshot and log and of the sessions directory: a reader that answered
// from the catalogue at one Version may answer again without reading it
// while the Version is the same. Every change a Store makes appends to
// the log (which grows) or replaces the snapshot and the log (new files,
// new times); what a Version can miss is a replacement of both by ones
// of the same sizes within one tick of the file system's clock.
type Version struct{ snap, log, dir Stamp }

// Version returns the catalogue's Version: three stats. ok is false when
// one of the three cannot be stat'ed (then nothing may be assumed).
func (c *Catalogue) Version() (v Version, ok bool) {
	var err error
	if v.snap, err = statStamp(c.fsys, filepath.Join(c.root, Name)); err != nil {
		return Version{}, false
	}
	if v.log, err = statStamp(c.fsys, filepath.Join(c.root, LogName)); err != nil {
		return Version{}, false
	}
	if v.dir, err = statStamp(c.fsys, c.sessions()); err != nil {
		return Version{}, false
	}
	return v, true
}
