package catalogue

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// openBackwards opens the catalogue for reading backwards (Backwards):
// the snapshot (for the caller to close) and its size, the log, and the
// ids the log names that below accepts (all, for nil), newest first: they
// override the snapshot. ok is false when the catalogue
// cannot answer: unusable, or the sessions directory's stamp is not the
// one recorded.
func (c *Catalogue) openBackwards(below func(uuid.UUID) bool) (f vfs.File, size int64, l *catLog, logIDs []uuid.UUID, ok bool) {
	f, err := c.fsys.OpenFile(filepath.Join(c.root, Name), os.O_RDONLY, 0)
	if err != nil {
		return nil, 0, nil, nil, false
	}
	gen, _, err := readCatHeaderFrom(f)
	if err == nil {
		l, err = readCatLog(c.fsys, c.root)
	}
	if err == nil && l.Gen != gen {
		err = ErrUnusable
	}
	if err == nil {
		if d, serr := statStamp(c.fsys, c.sessions()); serr != nil || !l.current(d) {
			err = ErrUnusable
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

// mergeBackwards hands add the sessions of the log's logIDs (newest
// first) and of the snapshot's lines read backwards from tail, merged
// newest first, while more says to go on: a log entry (usable if
// committed and not pending since) in place of the snapshot's line of
// its id, which skip passes over. It returns the error of a line read.
func mergeBackwards(tail *catTail, l *catLog, logIDs []uuid.UUID, skip func(uuid.UUID) bool, more func() bool, add func(id uuid.UUID, e Entry, usable bool)) error {
	snapRec, snapOK, err := tail.prev(skip)
	if err != nil {
		return err
	}
	li := 0
	for more() && (snapOK || li < len(logIDs)) {
		if li < len(logIDs) && (!snapOK || bytesLess(snapRec.ID[:], logIDs[li][:])) {
			id := logIDs[li]
			li++
			e, committed := l.committed[id]
			add(id, e, committed && !l.pending[id])
			continue
		}
		add(snapRec.ID, Entry{File: snapRec.File, Meta: snapRec.Meta}, snapRec.Kind == KindEntry)
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

	decoded int // lines decoded, for Backwards' cost
}

// prev returns the entry before those returned, skipping ids skip says
// the log overrides; ok is false at the header.
func (t *catTail) prev(skip func(uuid.UUID) bool) (Record, bool, error) {
	for {
		for len(t.lines) > 0 {
			line := t.lines[len(t.lines)-1]
			t.lines = t.lines[:len(t.lines)-1]
			t.decoded++
			r, err := DecodeRecord(line)
			if err != nil {
				return r, false, err
			}
			switch r.Kind {
			case KindHeader:
				t.done = true
				return r, false, nil
			case KindEntry, KindUnreadable:
			default:
				return r, false, ErrUnusable
			}
			if !skip(r.ID) {
				return r, true, nil
			}
		}
		if t.done || t.end == 0 && len(t.buf) == 0 {
			return Record{}, false, nil
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
			return Record{}, false, err
		}
		chunk = append(chunk, t.buf...)
		t.end = start
		// Whole lines are those after the first newline (or all, at 0).
		body := chunk
		if start > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				if len(chunk) > MaxLine+1 {
					return Record{}, false, ErrUnusable // no line is that long
				}
				t.buf = chunk
				continue
			}
			t.buf, body = chunk[:i+1], chunk[i+1:]
		} else {
			t.buf = nil
		}
		Lines(body, func(line []byte) bool {
			t.lines = append(t.lines, line)
			return true
		})
		if len(body) > 0 && body[len(body)-1] != '\n' {
			return Record{}, false, ErrUnusable // the snapshot ends with a newline
		}
	}
}

// Backwards hands add the sessions the catalogue has with ids below
// before (all, for nil), newest first (UUIDv7 ids sort by creation time),
// while more says to go on, without reading the whole snapshot: the ids
// the log names, merged with the snapshot's entry lines read backwards
// from before's place (a binary search of the snapshot finds it) or from
// its end. add gets each session's entry and whether it may be used
// without reading session.json if its stamp matches (as Lookup's usable):
// an id with an open pending record, or recorded unreadable, comes with
// usable false. decoded is the snapshot lines decoded. ok is false when
// the catalogue cannot answer: unusable, of two generations, damaged on
// the way, the sessions directory's stamp is not the one recorded (a
// session directory added or removed behind the catalogue), or the log
// ends in an ignored tail (Catalogue.Current says why); the caller
// then lists every session, and drops what add was given. Backwards
// writes nothing and takes no lock.
func (c *Catalogue) Backwards(before *uuid.UUID, more func() bool, add func(id uuid.UUID, e Entry, usable bool)) (decoded int, ok bool) {
	var below func(uuid.UUID) bool
	if before != nil {
		below = func(id uuid.UUID) bool { return bytesLess(id[:], before[:]) }
	}
	f, end, l, logIDs, ok := c.openBackwards(below)
	if !ok {
		return 0, false
	}
	defer f.Close()
	skip := func(id uuid.UUID) bool {
		_, committed := l.committed[id]
		return committed || l.pending[id] || below != nil && !below(id)
	}
	if before != nil {
		var err error
		if end, err = catSeek(f, end, *before); err != nil {
			return 0, false
		}
	}
	tail := catTail{f: f, end: end}
	if err := mergeBackwards(&tail, l, logIDs, skip, more, add); err != nil {
		return tail.decoded, false
	}
	return tail.decoded, true
}

// catSeek returns an offset of the snapshot f (of size size) at a line's
// end after which every entry's id is at least before: where a backwards
// read for the ids below before starts. It binary-searches the lines,
// sorted by id, down to a span of a few blocks, reading one small window
// per step; lines between the result and the first id below before are
// skipped by the reader.
func catSeek(f vfs.File, size int64, before uuid.UUID) (int64, error) {
	const window, span = 16 << 10, 64 << 10
	lo, hi := int64(0), size
	buf := make([]byte, window)
	for hi-lo > span {
		mid := lo + (hi-lo)/2
		k, err := f.ReadAt(buf, mid)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		w := buf[:k]
		i := bytes.IndexByte(w, '\n')
		if i < 0 {
			break
		}
		j := bytes.IndexByte(w[i+1:], '\n')
		start := mid + int64(i) + 1 // a line's start, after the header
		if j < 0 || start >= hi {
			break // a line longer than the window: stop narrowing
		}
		r, err := DecodeRecord(w[i+1 : i+1+j])
		if err != nil || r.Kind != KindEntry && r.Kind != KindUnreadable {
			return 0, ErrUnusable
		}
		if bytesLess(r.ID[:], before[:]) {
			lo = start
		} else {
			hi = start
		}
	}
	return hi, nil
}
