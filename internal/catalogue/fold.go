package catalogue

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Compact folds the log into a new snapshot now, under the lock, as a
// writer does once the log holds MaxLog records (fold). When it returns
// nil the new snapshot and log are durable (each replaced by
// durable.ReplaceFile, the snapshot first); a crash between the two
// leaves a snapshot of a newer generation than the log, which readers
// take for an unusable catalogue and the next writer rewrites.
func (c *Catalogue) Compact() error {
	lk, err := c.lock()
	if err != nil {
		return err
	}
	err = c.fold()
	if cerr := lk.Close(); err == nil {
		err = cerr
	}
	return err
}

// fold rewrites the catalogue with the lock held, folding the log into
// the snapshot once it is long (withLog), as rebuild does without a scan
// but without decoding the snapshot: its entry lines are checked (frame,
// id order) and copied as they are, but for the ids the log commits,
// whose new lines take their place, and the ids whose session directory
// is gone (dropDeleted); the new log holds the open pending records,
// under a new generation. A catalogue it cannot fold so (unusable, of two
// generations, with a line that does not check) is rebuilt with a scan.
func (c *Catalogue) fold() error {
	c.known = nil
	l, err := readCatLog(c.fsys, c.root)
	if err != nil || l.tail {
		_, err := c.rebuild()
		return err
	}
	f, err := c.fsys.OpenFile(filepath.Join(c.root, Name), os.O_RDONLY, 0)
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
	logb := AppendRecord(nil, Record{Kind: KindHeader, Dir: dirStamp, Gen: l.Gen + 1})
	for id := range pending {
		logb = AppendRecord(logb, Record{Kind: KindPending, Dir: dirStamp, ID: id})
	}
	if err := durable.ReplaceFile(c.fsys, c.root, Name, snap, c.fileMode); err != nil {
		return err
	}
	return durable.ReplaceFile(c.fsys, c.root, LogName, logb, c.fileMode)
}

// foldSnapshot returns the snapshot r holds (of about size bytes) with
// the commits of l folded in, under l's next generation and dir's stamp:
// the snapshot's entry lines in id order, each replaced by the line of
// the commit of its id if l has one, and left out if gone names it, with
// the lines of the other commits in their places. ok is false when the
// snapshot is not one to fold: of another generation than l, not in id
// order, or with a line that does not check (its frame, its kind, its
// id), or past the last whole line.
func foldSnapshot(r io.Reader, size int64, l *catLog, gone map[uuid.UUID]bool, dir Stamp) (snap []byte, ok bool, err error) {
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
	snap = AppendRecord(snap, Record{Kind: KindHeader, Dir: dir, Gen: l.Gen + 1})
	addCommits := func(below *uuid.UUID) {
		for len(commits) > 0 && (below == nil || bytes.Compare(commits[0][:], below[:]) < 0) {
			e := l.committed[commits[0]]
			snap = AppendRecord(snap, Record{Kind: KindEntry, ID: commits[0], File: e.File, Meta: e.Meta})
			commits = commits[1:]
		}
	}
	first := true
	var prev uuid.UUID
	sc := jsonl.NewScannerSize(r, 0, size, MaxLine)
	sc.StopAtMalformed()
	for sc.Next() {
		if sc.Malformed() != nil {
			return nil, false, nil
		}
		line := sc.Line()
		if first {
			h, err := DecodeRecord(line)
			if err != nil || h.Kind != KindHeader || h.Gen != l.Gen {
				return nil, false, nil
			}
			first = false
			continue
		}
		kind, id, ok := catLineID(line)
		if !ok || kind != KindEntry && kind != KindUnreadable || prev != uuid.Nil && bytes.Compare(prev[:], id[:]) >= 0 {
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
