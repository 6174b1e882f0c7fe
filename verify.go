package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// maxVerifyProblems bounds the problems a VerifyReport lists.
const maxVerifyProblems = 16

// VerifyReport is what Verify found in a session.
type VerifyReport struct {
	Session     uuid.UUID
	Chunks      int       // chunk files
	ChunkBytes  int64     // their size on disk (compressed, or with the active chunk's preallocated free space)
	RecordBytes int64     // the bytes of the valid records' lines, uncompressed, free space excluded
	Records     int       // valid records in the chunks
	Indexed     int       // index entries: valid index.jsonl lines of plain chunks, and those embedded in sealed chunks
	Blobs       int       // distinct blobs referenced, each read and its digest checked
	SplitBlobs  int       // of Blobs, those split: their long strings stored apart (blob.go, "String blobs")
	Strings     int       // distinct string blobs the split ones name, each read and its digest checked
	Head        uuid.UUID // the newest valid record: what HEAD should name
	HeadOnDisk  uuid.UUID // what the HEAD file names (uuid.Nil if absent)

	// Problems lists corruption, in the order found (at most 16; Truncated
	// is set when there were more). Each names the file and offset.
	Problems  []*CorruptionError
	Truncated bool

	// Repairs says what opening the session for writing would change: the
	// normal leftovers of a crash (torn tail, lagging index, stale HEAD,
	// temporary files), and the cut of a Lost end of the log. Empty when
	// the session is clean, or corrupt beyond repair.
	Repairs []string

	// Lost, when set, is the one kind of damage that Repairs mend (it is
	// also in Problems): acknowledged events at the end of the log whose
	// records are damaged bytes, or a HEAD naming an event the log does
	// not hold. Their records are gone; the repair cuts what is left of
	// them (kept aside) so that the session takes appends again.
	Lost *CorruptionError
}

// OK reports whether Verify found no corruption. A session that is OK may
// still list Repairs, which the next open for writing carries out.
func (r *VerifyReport) OK() bool { return len(r.Problems) == 0 }

// Repairable reports whether the next open for writing (or Repair) leaves
// the session without problems: it has none, or its only one is Lost.
func (r *VerifyReport) Repairable() bool {
	return len(r.Problems) == 0 || (r.Lost != nil && len(r.Problems) == 1 && r.Problems[0] == r.Lost)
}

// damaged adds err to the problems if it is a *CorruptionError (a file
// the store refuses: see refusal), and reports whether it was.
func (r *VerifyReport) damaged(err error) bool {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		r.problem(ce)
		return true
	}
	return false
}

func (r *VerifyReport) problem(err *CorruptionError) {
	if len(r.Problems) >= maxVerifyProblems {
		r.Truncated = true
		return
	}
	for _, p := range r.Problems {
		if p.Path == err.Path && p.Offset == err.Offset {
			return // the same place, found by two checks
		}
	}
	r.Problems = append(r.Problems, err)
}

// Verify checks a session without changing anything: every record's
// checksum and encoding, every parent link and parent location, the
// agreement of every index line with its record, HEAD, the lanes file
// (whole, naming only events the log holds), and the digest of every blob
// a record refers to (the structure checks run first and open no blob). It takes no lock,
// so it works on a session this or another Store or process is writing
// (whose newest record may then show as a torn tail being written): it
// reads HEAD before the chunks, stops using index.jsonl where the writer
// has moved on, and checks again, a few times at most, when it found a
// problem while the session changed. It reads the whole session: its cost
// is proportional to the session's size. If this Store has the session
// open, Verify first waits for any chunk being sealed in the background
// and writes the index lines the session holds (they are written in
// batches), so that neither shows as a repair to make.
//
// Corruption is reported in the VerifyReport, not as an error. Errors:
// ErrNotFound, ErrUnsupportedFormat, ErrClosed, context errors, and I/O
// errors that stopped the check.
func (s *Store) Verify(ctx context.Context, session uuid.UUID) (*VerifyReport, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	if h := s.reg.lookup(session); h != nil {
		h.mu.Lock()
		if h.usable() == nil {
			h.chunks.AwaitSealing()
			h.writeIndex() // the lines it holds: Verify reads the files
		}
		h.mu.Unlock()
	}
	// A problem seen while the log changed may be a writer's work in
	// progress, so look again.
	const attempts = 5
	dir := s.sessionDir(session)
	for attempt := 1; ; attempt++ {
		before, _ := revisionOf(s.opts.fs, dir)
		r, err := s.verify(ctx, session)
		if (err == nil && r.OK()) || attempt == attempts {
			return r, err
		}
		if after, _ := revisionOf(s.opts.fs, dir); after == before && err == nil {
			return r, nil
		}
	}
}

// verify is Verify without the begin/end bracket.
func (s *Store) verify(ctx context.Context, session uuid.UUID) (*VerifyReport, error) {
	fsys := s.opts.fs
	dir := s.sessionDir(session)
	meta, _, err := readMeta(fsys, dir, session)
	if err != nil {
		var ce *CorruptionError
		if !errors.As(err, &ce) {
			return nil, err
		}
		r := &VerifyReport{Session: session}
		r.problem(ce)
		return r, nil
	}
	r := &VerifyReport{Session: session}

	// The checks reconciliation makes, and the repairs it would do.
	// Analyzed as a reader does: the files may change while they are read.
	pre, err := verifyPrefix(&s.opts, dir, meta) // a fork's prefix (fork.go)
	if err != nil {
		return nil, err
	}
	var outside func(uuid.UUID) bool
	if pre != nil {
		outside = pre.has
	}
	if ov := journal.Overlay(fsys, s.dir, dir); ov != nil {
		fsys = ov // a dead writer's records still only in its journal (journal.go)
	}
	plan, err := analyze(fsys, dir, true, outside)
	if err != nil {
		return nil, err
	}
	r.HeadOnDisk = plan.headOnDisk
	if plan.corrupt != nil {
		r.problem(plan.corrupt)
	} else {
		if plan.lostErr != nil {
			r.problem(plan.lostErr) // damage, though an open for writing repairs it
			r.Lost = plan.lostErr
		}
		r.Repairs = plan.repairs()
	}

	// Every index line, as far as it decodes, by chunk.
	indexPath := filepath.Join(dir, indexName)
	lines := map[uint32]*indexRun{}
	if _, err := index.Read(fsys, indexPath, func(e *entry, off int64) error {
		run := lines[e.Loc.Chunk]
		if run == nil {
			run = &indexRun{path: indexPath}
			lines[e.Loc.Chunk] = run
		}
		run.entries = append(run.entries, *e)
		run.offsets = append(run.offsets, off)
		return nil
	}); err != nil && !r.damaged(refusal(err)) {
		return nil, err
	}

	// Every record of every chunk, against its index entries (embedded in
	// a sealed chunk, in index.jsonl for a plain one) and the tree.
	chunkDir := filepath.Join(dir, chunksDir)
	forms, _, err := chunkForms(fsys, chunkDir)
	if err != nil && !r.damaged(err) {
		return nil, err
	}
	chunks := slices.Sorted(maps.Keys(forms))
	r.Chunks = len(chunks)
	check := &chunkCheck{report: r, seen: make(map[uuid.UUID]location), lost: make(map[uuid.UUID]bool)}
	if pre != nil {
		for id := range pre.pos {
			check.seen[id] = location{} // a fork's first event names no parent location
		}
	}
	for _, id := range plan.lost {
		check.lost[id] = true // reported once, as r.Lost
	}
	for ci, n := range chunks {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if n != uint32(ci) {
			r.problem(&CorruptionError{Path: filepath.Join(chunkDir, chunkName(uint32(ci))), Offset: 0, Err: errors.New("chunk file is missing")})
		}
		want := lines[n]
		delete(lines, n)
		if forms[n].sealed {
			es, offs, err := sealedIndex(fsys, chunkDir, n)
			if err != nil && !errors.As(err, new(*CorruptionError)) {
				return nil, err
			}
			if err != nil {
				r.problem(err.(*CorruptionError))
			}
			want = &indexRun{path: filepath.Join(chunkDir, chunkName(n)+sealedExt), entries: es, offsets: offs}
		}
		if want == nil {
			want = &indexRun{}
		}
		r.Indexed += len(want.entries)
		size, k, err := verifyChunk(fsys, chunkDir, n, ci == len(chunks)-1, want, check)
		if err != nil {
			return nil, err
		}
		r.ChunkBytes += size
		for k < len(want.entries) && check.lost[want.entries[k].ID] {
			k++ // the loss is reported as one problem, Lost
		}
		if k < len(want.entries) {
			r.problem(&CorruptionError{Path: want.path, Offset: want.offsets[k], Err: fmt.Errorf("%d index entries name records chunk %d does not hold", len(want.entries)-k, n)})
		}
	}
	for _, n := range slices.Sorted(maps.Keys(lines)) {
		run := lines[n]
		r.Indexed += len(run.entries)
		r.problem(&CorruptionError{Path: run.path, Offset: run.offsets[0], Err: fmt.Errorf("%d index entries name chunk %d, which does not exist", len(run.entries), n)})
	}
	checked, strs := map[[32]byte]bool{}, map[[32]byte]bool{}
	for _, b := range check.blobs {
		if checked[b.Digest] {
			continue
		}
		checked[b.Digest] = true
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := readBlob(fsys, dir, b.Digest, b.Size); err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				return nil, err
			}
			r.problem(ce)
		} else if refs, err := blob.FileRefs(fsys, dir, b.Digest); err == nil && len(refs) > 0 {
			r.SplitBlobs++
			for _, s := range refs {
				if !strs[s.Digest] {
					strs[s.Digest] = true
					r.Strings++
				}
			}
		}
		r.Blobs++
	}
	if err := verifyLanes(fsys, dir, check.seen, r); err != nil {
		return nil, err
	}
	verifyLayout(fsys, dir, r)
	return r, nil
}

// verifyLayout adds to r what stands where the session directory dir
// keeps a file or directory that Verify reads no other way, when it is
// not one (a link, a FIFO, a file of the other type): LOCK, a regular
// file, and blobs/ and blobs/sha256/, directories. A writer refuses each
// as it comes to use it (see refusal); this says so first.
func verifyLayout(fsys vfs.FS, dir string, r *VerifyReport) {
	for _, f := range []struct {
		name string
		dir  bool
	}{{lockName, false}, {blobsDir, true}, {filepath.Join(blobsDir, "sha256"), true}} {
		path := filepath.Join(dir, f.name)
		info, err := fsys.Stat(path) // the link itself, below the root
		if err != nil {
			r.damaged(err)
			continue
		}
		if m := info.Mode(); f.dir && !m.IsDir() || !f.dir && !m.IsRegular() {
			r.problem(&CorruptionError{Path: path, Err: vfs.TypeError(m, f.dir)})
		}
	}
}

// indexRun is the index entries of one chunk, where they were read and
// the offset of each there.
type indexRun struct {
	path    string
	entries []entry
	offsets []int64
}

// chunkCheck carries what verifyChunk needs across chunks.
type chunkCheck struct {
	report *VerifyReport
	seen   map[uuid.UUID]location // the events so far, and where each is
	lost   map[uuid.UUID]bool     // events of the Lost end of the log
	blobs  []payload              // blob references of the valid records
}

// verifyChunk checks every record of one chunk, continuing the count of
// valid records in r.Records, and returns the chunk's size and how many of
// the chunk's index entries it went through: the caller reports the rest
// as naming records the chunk does not hold.
//
// Index entries are matched to records by offset, not by position, so an
// invalid record in the middle of a chunk is one problem (plus one for the
// entry naming it), not a disagreement for every entry after it.
func verifyChunk(fsys vfs.FS, dir string, n uint32, newest bool, want *indexRun, c *chunkCheck) (int64, int, error) {
	r := c.report
	f, size, path, err := openChunk(fsys, dir, n)
	if err != nil {
		var ce *CorruptionError
		if errors.As(err, &ce) {
			r.problem(ce)
			return 0, 0, nil
		}
		return 0, 0, err
	}
	defer f.Close()
	if strings.HasSuffix(path, sealedExt) {
		newest = false // a sealed chunk never has a torn tail
	}
	k := 0 // the next index entry to match
	// skipTo reports the entries naming offsets before off, where the walk
	// found no valid record.
	skipTo := func(off int64) {
		for k < len(want.entries) && want.entries[k].Loc.Offset < off && c.lost[want.entries[k].ID] {
			k++ // the loss is reported as one problem, Lost
		}
		from := k
		for k < len(want.entries) && want.entries[k].Loc.Offset < off {
			k++
		}
		if k == from {
			return
		}
		first, last := want.entries[from], want.entries[k-1]
		err := fmt.Errorf("index entry %s names offset %d of chunk %d, where no valid record starts", first.ID, first.Loc.Offset, n)
		if k-from > 1 {
			err = fmt.Errorf("index entry %s and the %d after it name offsets %d to %d of chunk %d, where no valid record starts", first.ID, k-from-1, first.Loc.Offset, last.Loc.Offset, n)
		}
		r.problem(&CorruptionError{Path: want.path, Offset: want.offsets[from], Err: err})
	}
	w, err := walkRecords(f, n, 0, size, newest, func(hdr header, pl payload, loc location) error {
		e := eventline.NewEntry(hdr, pl, loc)
		if hdr.ParentID != uuid.Nil {
			at, ok := c.seen[hdr.ParentID]
			switch {
			case !ok:
				r.problem(&CorruptionError{Path: path, Offset: loc.Offset, Err: fmt.Errorf("event %s names unknown parent %s", hdr.ID, hdr.ParentID)})
			case pl.ParentAt.Length != 0 && pl.ParentAt != at:
				r.problem(&CorruptionError{Path: path, Offset: loc.Offset, Err: fmt.Errorf("event %s names its parent at chunk %d offset %d length %d; it is at chunk %d offset %d length %d", hdr.ID, pl.ParentAt.Chunk, pl.ParentAt.Offset, pl.ParentAt.Length, at.Chunk, at.Offset, at.Length)})
			}
		}
		if _, dup := c.seen[hdr.ID]; dup {
			r.problem(&CorruptionError{Path: path, Offset: loc.Offset, Err: fmt.Errorf("duplicate event id %s", hdr.ID)})
		}
		c.seen[hdr.ID] = loc
		skipTo(loc.Offset)
		if k < len(want.entries) && want.entries[k].Loc.Offset == loc.Offset {
			if !want.entries[k].SameRecord(&e) {
				r.problem(&CorruptionError{Path: want.path, Offset: want.offsets[k], Err: fmt.Errorf("index entry %s disagrees with record %s at %s offset %d", want.entries[k].ID, hdr.ID, path, loc.Offset)})
			}
			k++
		}
		if pl.Blob {
			c.blobs = append(c.blobs, payload{Blob: true, Digest: pl.Digest, Size: pl.Size})
		}
		r.Records++
		r.RecordBytes += int64(loc.Length)
		r.Head = hdr.ID
		return nil
	}, func(bad, next int64, err error) error {
		r.problem(&CorruptionError{Path: path, Offset: bad, Err: fmt.Errorf("invalid record followed by a valid one at offset %d: %w", next, err)})
		return nil // go on: report every problem
	})
	if err != nil {
		var ce *CorruptionError
		if errors.As(err, &ce) {
			r.problem(ce)
			return 0, k, nil
		}
		return 0, k, err
	}
	if w.Bad >= 0 && !newest {
		r.problem(&CorruptionError{Path: path, Offset: w.Bad, Err: fmt.Errorf("invalid data in a sealed chunk: %w", w.BadErr)})
	}
	// A bad tail of the newest chunk is a torn write: analyze lists it as a
	// repair unless an index entry names it, which the check above and the
	// count check in Verify report.
	// The bytes the file takes: the open plain file's size (a writer may
	// have sealed and removed it since), or the sealed file's, which never
	// goes away.
	var info fs.FileInfo
	if pf, ok := f.(vfs.File); ok {
		info, err = pf.Stat()
	} else {
		info, err = fsys.Stat(path)
	}
	if err != nil {
		return 0, k, err
	}
	return info.Size(), k, nil
}
