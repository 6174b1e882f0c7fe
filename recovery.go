package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// Reconciliation brings a session's derived files in line with its chunks
// when the session is opened for writing, and loads the in-memory index.
// The chunks are the source of truth; the index and HEAD are derived from
// them. It runs in two phases: analyze reads everything and decides, without
// writing; apply carries out the repairs. Verify runs the first phase only.
//
//  1. Read the valid prefix of index.jsonl. Index lines are never synced,
//     so after a power loss the file may end in a torn line or even hold a
//     hole of zeros before later lines (blocks persist out of order): the
//     index is cut at its first invalid line and the rest is rebuilt.
//     Every kept entry must name a known parent, be new, and tile the
//     chunks (each record starts where the previous one ended, or at offset
//     0 of the next chunk); a violation is corruption.
//  2. Check that the chunk files are numbered without gaps and that the
//     last kept entry matches the record at its location.
//  3. Scan the chunks from the end of that record (so the work is
//     proportional to the unindexed tail) and index every complete, valid
//     record found. A tail of the newest chunk that holds no valid record
//     (a torn write) is copied to "<chunk>.broken-<offset>" and cut off;
//     so is one that index lines name, when its bytes are damaged
//     (checkLast: acknowledged events lost, reported by Verify and
//     readers). An invalid record followed by a valid one, or any invalid
//     data in a sealed chunk, is corruption.
//  4. Drop the temporary file of an interrupted session.json replace (the
//     old file is whole), finish or discard an interrupted HEAD replace, and
//     rewrite HEAD if it is missing or older than the newest event. HEAD is
//     a checkpoint of the log: one that does not decode or names an event
//     the log does not hold is kept aside in "HEAD.broken" and rewritten.
//
// Every repair is synced before the session is used, and each step is
// idempotent, so a crash during reconciliation is recovered by the next one.
//
// Corruption is never repaired: the session opens damaged, with the valid
// prefix (every event before the first bad one) readable, and refuses
// writes. Nothing on disk is changed.

// recoveryPlan is what analyze found.
type recoveryPlan struct {
	corrupt *CorruptionError // first corruption found; nil if none

	indexSize   int64 // size of index.jsonl
	indexEnd    int64 // end of its valid prefix
	indexBad    int64 // offset of its first invalid line, or -1
	indexBadErr error
	firstNew    int // x.entries[firstNew:] are in the chunks but not in the index

	indexed    int // entries taken from index.jsonl
	staleLines int // index.jsonl lines of sealed chunks, which embed them

	chunks []uint32 // chunk numbers, ascending
	sealed []bool   // sealed[n]: chunk n is (also) a sealed file
	// The embedded index of each sealed chunk, or why it could not be read.
	sealedEntries [][]entry
	sealedErrs    []error
	sealedAt      []int    // where readSealed decoded a chunk's entries in the array of x.entries, or -1
	unsealed      []uint32 // chunks with both a plain and a sealed file
	sealTemps     []string // temporary files of interrupted sealings
	newestSealed  bool     // the newest chunk is sealed (compressed)
	activeSize    int64    // end of valid data in the newest chunk
	tornPath      string   // newest chunk, when it has a torn tail to cut at activeSize
	tornSize      int64    // its size before cutting
	tornErr       error
	tornKeep      string // where the cut bytes are kept (keepName)

	metaTemp   bool      // session.json.tmp exists
	headTemp   bool      // HEAD.tmp exists
	headFinish bool      // HEAD.tmp names a known event: rename it into place
	headOnDisk uuid.UUID // what HEAD holds (after a finished temp); uuid.Nil if absent or bad
	headBad    error     // HEAD does not decode, or names an event the log does not hold: keep it aside, rebuild it
	headKeep   string    // where (keepName)

	// Events index lines name whose records, ending the newest chunk, are
	// damaged with no valid record after them: lost, cut with the torn
	// tail (checkLast). lostErr says so; the index is rewritten whole.
	lost         []uuid.UUID
	lostErr      *CorruptionError
	rewriteIndex bool

	// index is what the analysis read: every event of the log, or its
	// valid prefix when it found corruption.
	index memIndex
}

// head is the newest event the analysis found, uuid.Nil if none.
func (p *recoveryPlan) head() uuid.UUID {
	if e, ok := p.index.Last(); ok {
		return e.ID
	}
	return uuid.Nil
}

// repairs describes what apply would change, for logs and Verify.
func (p *recoveryPlan) repairs() []string {
	x := &p.index
	var out []string
	if p.tornPath != "" {
		out = append(out, fmt.Sprintf("cut the torn tail of %s at offset %d (%d bytes, kept in %s): %v", p.tornPath, p.activeSize, p.tornSize-p.activeSize, p.tornKeep, p.tornErr))
	}
	if len(p.lost) > 0 {
		out = append(out, fmt.Sprintf("drop the %d index lines of events whose records are damaged (the first %s) and rewrite %s", len(p.lost), p.lost[0], indexName))
	}
	if p.indexBad >= 0 {
		out = append(out, fmt.Sprintf("cut %s at offset %d, its first invalid line: %v", indexName, p.indexEnd, p.indexBadErr))
	}
	if p.staleLines > 0 {
		out = append(out, fmt.Sprintf("drop %d lines of sealed chunks from %s, which the chunks embed", p.staleLines, indexName))
	}
	if n := len(p.plainEntries(x.Entries[p.firstNew:])); n > 0 {
		out = append(out, fmt.Sprintf("add %d index entries rebuilt from the chunks", n))
	}
	for _, name := range p.sealTemps {
		out = append(out, "remove "+name+" left by an interrupted sealing")
	}
	for _, n := range p.unsealed {
		out = append(out, fmt.Sprintf("remove %s, already sealed in %s%s", chunkName(n), chunkName(n), sealedExt))
	}
	if p.metaTemp {
		out = append(out, "remove "+metaFile+".tmp left by an interrupted metadata update")
	}
	switch {
	case p.headFinish:
		out = append(out, "finish the interrupted HEAD update")
	case p.headTemp:
		out = append(out, "remove "+headfile.Temp+", which names no known event")
	}
	head := p.head()
	switch {
	case p.headBad != nil && head == uuid.Nil:
		out = append(out, fmt.Sprintf("keep %s aside in %s and remove it, the session has no events: %v", headfile.Name, filepath.Base(p.headKeep), p.headBad))
	case p.headBad != nil:
		out = append(out, fmt.Sprintf("keep %s aside in %s and set HEAD to %s, the newest event: %v", headfile.Name, filepath.Base(p.headKeep), head, p.headBad))
	case head != uuid.Nil && head != p.headOnDisk:
		was := "missing"
		if p.headOnDisk != uuid.Nil {
			was = "was " + p.headOnDisk.String()
		}
		out = append(out, fmt.Sprintf("set HEAD to %s (%s)", head, was))
	}
	return out
}

// analyze reads a session's files into x.entries and x.byID and decides the
// repairs, writing nothing. Corruption is reported in the plan, with h
// holding the valid prefix; the error is for I/O failures only. outside,
// nil but for a fork, accepts the parents its prefix holds (fork.go).
func analyze(fsys vfs.FS, dir string, readOnly bool, outside func(uuid.UUID) bool) (*recoveryPlan, error) {
	p := &recoveryPlan{indexBad: -1}
	x := &p.index
	x.Outside = outside
	indexPath := filepath.Join(dir, indexName)
	chunkDir := filepath.Join(dir, chunksDir)

	// HEAD first: it names only durable events, so the chunks read after
	// it hold its event even if a writer replaces it meanwhile.
	headPath := filepath.Join(dir, headfile.Name)
	head, headExists, headErr := readHeadFile(fsys, headPath)
	tmp, tmpExists, tmpErr := readHeadFile(fsys, filepath.Join(dir, headfile.Temp))
	_, err := fsys.Stat(filepath.Join(dir, metaFile+".tmp"))
	p.metaTemp = err == nil

	forms, temps, err := chunkForms(fsys, chunkDir)
	if err != nil {
		// chunks/ is not a directory (a link, a file: see refusal).
		return p, p.fail(err)
	}
	p.sealTemps = temps
	for n, f := range forms {
		p.chunks = append(p.chunks, n)
		if f.plain && f.sealed {
			// Sealing was interrupted after the compressed file became
			// durable: the plain copy goes.
			p.unsealed = append(p.unsealed, n)
		}
	}
	slices.Sort(p.chunks)
	slices.Sort(p.unsealed)
	p.sealed = make([]bool, len(p.chunks))
	for i, n := range p.chunks {
		// A sealed file wins over a plain copy, which apply removes.
		if n == uint32(i) {
			p.sealed[i] = forms[n].sealed
		}
	}
	if len(p.chunks) > 0 {
		p.newestSealed = forms[p.chunks[len(p.chunks)-1]].sealed
	}
	// missing is the first chunk number absent from the directory: no
	// record may be at or past it.
	missing := uint32(len(p.chunks))
	for i, n := range p.chunks {
		if n != uint32(i) {
			missing = uint32(i)
			break
		}
	}

	// Size the index structures from the embedded indexes and the index
	// file, so a large session is loaded without regrowing them; from the
	// index file's size only up to index.MaxPresize entries, since a file's
	// size is no promise of its lines (a sparse file claims gigabytes), and
	// more grow as they come.
	extra := 16
	if info, err := fsys.Stat(indexPath); err == nil {
		extra += int(min(info.Size()/eventline.MinIndexLine, index.MaxPresize))
	}
	p.readSealed(fsys, x, chunkDir, missing, extra)

	// The entries, in log order: those of a sealed chunk from its embedded
	// index, those of a plain chunk from index.jsonl (whose lines for
	// sealed chunks are stale and skipped), then whatever both lack,
	// rebuilt from the chunks.
	next := uint32(0) // chunks before next have their entries in h
	addSealed := func(upto uint32) error {
		for ; next < upto && next < missing; next++ {
			if p.sealed[next] {
				if err := p.addSealed(x, chunkDir, next); err != nil {
					return err
				}
			}
		}
		return nil
	}
	add := func(e *entry, off int64) error {
		if c := e.Loc.Chunk; c < missing && p.sealed[c] {
			p.staleLines++
			return nil
		}
		if err := addSealed(e.Loc.Chunk); err != nil {
			return err
		}
		if len(x.Entries) == 0 {
			if e.Loc.Chunk != 0 || e.Loc.Offset != 0 {
				return corruptf(indexPath, off, "first entry is at chunk %d offset %d, not at the start of chunk 0", e.Loc.Chunk, e.Loc.Offset)
			}
		} else if prev := &x.Entries[len(x.Entries)-1]; !(e.Loc.Chunk == prev.Loc.Chunk && e.Loc.Offset == prev.Loc.End()) && !(e.Loc.Chunk == prev.Loc.Chunk+1 && e.Loc.Offset == 0) {
			return corruptf(indexPath, off, "entry %s at chunk %d offset %d does not follow the previous record", e.ID, e.Loc.Chunk, e.Loc.Offset)
		}
		if err := x.Add(e); err != nil {
			return corruptf(indexPath, off, "%w", err)
		}
		p.indexed++
		return nil
	}
	scan, err := index.Read(fsys, indexPath, func(e *entry, off int64) error {
		if !readOnly {
			return add(e, off)
		}
		// A reader races the writer: the index may name chunks created
		// after the listing, or be rewritten while it is read. Its lines
		// only save scanning, so the reader stops at the first line it
		// cannot use and scans the chunks from there.
		if e.Loc.Chunk >= missing {
			return errIndexEnd
		}
		err := add(e, off)
		var ce *CorruptionError
		if errors.As(err, &ce) && ce.Path == indexPath {
			return errIndexEnd
		}
		return err
	})
	if errors.Is(err, errIndexEnd) {
		err = nil
	}
	if err != nil {
		return p, p.fail(refusal(err)) // a link, a FIFO: damage
	}
	p.indexSize, p.indexEnd, p.indexBad, p.indexBadErr = scan.Size, scan.End, scan.Bad, scan.BadErr
	if missing < uint32(len(p.chunks)) || (len(x.Entries) > 0 && x.Entries[len(x.Entries)-1].Loc.Chunk >= missing) {
		x.Truncate(func(e *entry) bool { return e.Loc.Chunk >= missing })
		if err := addSealed(missing); err != nil {
			return p, p.fail(err)
		}
		return p, p.fail(corruptf(filepath.Join(chunkDir, chunkName(missing)), 0, "chunk file is missing"))
	}

	start := location{}
	if len(x.Entries) > 0 {
		r := newChunkReader(fsys, chunkDir)
		err := p.checkLast(x, r, chunkDir)
		r.close()
		if err != nil {
			return nil, err
		}
		if p.corrupt != nil {
			return p, nil
		}
		if len(x.Entries) > 0 {
			last := &x.Entries[len(x.Entries)-1]
			start = location{Chunk: last.Loc.Chunk, Offset: last.Loc.End()}
		}
	}

	p.firstNew = len(x.Entries)
	for _, n := range p.chunks {
		if n < start.Chunk || (n < next && p.sealed[n]) {
			continue
		}
		var err error
		if p.sealed[n] {
			next = n + 1
			err = p.addSealed(x, chunkDir, n)
		} else {
			off := int64(0)
			if n == start.Chunk {
				off = start.Offset
			}
			err = p.scanChunk(fsys, x, chunkDir, n, off, n == p.chunks[len(p.chunks)-1])
		}
		if err != nil {
			if perr := p.fail(err); perr != nil {
				return nil, perr
			}
			return p, nil
		}
	}

	// A HEAD or HEAD.tmp that is not a regular file (a link, a FIFO: see
	// refusal) is no checkpoint a writer may move aside or replace: the
	// session is damaged, its events all readable.
	for _, err := range []error{tmpErr, headErr} {
		if errors.Is(err, vfs.ErrFileType) {
			return p, p.fail(err)
		}
	}
	if tmpExists {
		p.headTemp = true
		_, known := x.ByID[tmp]
		p.headFinish = tmpErr == nil && known
	}
	if p.headFinish {
		p.headOnDisk = tmp
		return p, nil
	}
	// HEAD is a checkpoint of the log: one that does not decode, or names
	// an event the log does not hold, is rebuilt from the log, its bytes
	// kept aside. HEAD is written only for durable events, so one naming
	// an event the log lacks means the log lost acknowledged events (its
	// end damaged or cut, with index lines that named them lost too in a
	// power cut, since they are not synced), unless HEAD itself is
	// damaged: which, no file tells, so it is reported as a loss (p.lostErr)
	// as well as repaired.
	var ce *CorruptionError
	switch {
	case errors.As(headErr, &ce):
		p.headBad = headErr
	case headErr != nil:
		return nil, headErr
	default:
		p.headOnDisk = head
		if _, known := x.ByID[head]; headExists && !known {
			p.headBad = corruptf(headPath, 0, "HEAD names event %s, which the log does not hold", head)
			if p.lostErr == nil {
				p.lostErr = &CorruptionError{Path: headPath, Err: fmt.Errorf("HEAD names event %s, which the log does not hold: acknowledged events were lost, or HEAD is damaged", head)}
			}
		}
	}
	if p.headBad != nil {
		p.headKeep = keepName(fsys, filepath.Join(dir, headfile.Broken))
	}
	return p, nil
}

// checkLast checks that the record of the last entry taken from the
// indexes is in its chunk as the entry says, so the scan for records the
// index lacks can start after it. When the records of the newest chunk's
// last entries are damaged and no valid record follows them, the log ends
// in a torn tail although index lines name it: those acknowledged events
// are lost (a disk or another program damaged synced data), and the tail
// is cut like any torn tail, their entries dropped (p.lost). Any other
// mismatch is corruption.
func (p *recoveryPlan) checkLast(x *memIndex, r *chunkReader, chunkDir string) error {
	newest := p.chunks[len(p.chunks)-1]
	var firstBad error
	k := len(x.Entries)
	for k > 0 {
		e := &x.Entries[k-1]
		_, err := readEntry(r, e)
		if err == nil {
			break
		}
		var ce *CorruptionError
		if !errors.As(err, &ce) {
			return err
		}
		// Only damaged bytes (not a whole line with a valid checksum that
		// is invalid, or that the entry disagrees with) at the end of the
		// plain newest chunk are a lost tail.
		if e.Loc.Chunk != newest || p.newestSealed || !r.damagedAt(e.Loc) {
			x.TruncateTo(k - 1)
			return p.fail(err)
		}
		firstBad = err
		k--
	}
	if firstBad == nil {
		return nil
	}
	lost := x.Entries[k:]
	for _, e := range lost {
		p.lost = append(p.lost, e.ID)
	}
	first := lost[0]
	var ce *CorruptionError
	errors.As(firstBad, &ce)
	p.lostErr = &CorruptionError{Path: ce.Path, Offset: first.Loc.Offset, Err: fmt.Errorf("%d acknowledged events lost: the index names %s (and %d after it) at the end of the newest chunk, whose record is damaged: %w",
		len(lost), first.ID, len(lost)-1, ce.Err)}
	p.rewriteIndex = true
	x.TruncateTo(k)
	return nil
}

// damage is the first corruption analyze found, or the loss of
// acknowledged events at the end of the log (p.lost), which a writer
// repairs but a reader and Verify report.
func (p *recoveryPlan) damage() *CorruptionError {
	if p.corrupt != nil {
		return p.corrupt
	}
	return p.lostErr
}

// readSealed reads the embedded indexes of the sealed chunks before
// missing, in parallel, into p.sealedEntries and p.sealedErrs, and makes
// x.entries and x.byID with room for their entries plus extra.
//
// The sealed chunks that start the log (0, 1, ... up to the first plain or
// missing one) are decoded straight into the array of x.entries, each in a
// region sized by sealedMeta.bound and laid out in chunk order, so that
// addSealed moves them down into place instead of copying them from
// another slice (p.sealedAt). This is sound because nothing is added to
// x.entries before them: every other entry is in a later chunk, and add
// first adds the sealed chunks before its own. Opening a large session so
// touches the memory of one array of entries, not two.
func (p *recoveryPlan) readSealed(fsys vfs.FS, x *memIndex, dir string, missing uint32, extra int) {
	p.sealedEntries = make([][]entry, missing)
	p.sealedErrs = make([]error, missing)
	p.sealedAt = make([]int, missing)
	metas := make([]*sealedMeta, missing)
	var sealed []uint32
	for n := range missing {
		if p.sealed[n] {
			sealed = append(sealed, n)
		}
	}
	bufs := make([]zchunk.MetaBuffer, runtime.GOMAXPROCS(0)) // one per worker
	each := func(f func(n uint32, b *zchunk.MetaBuffer)) {
		forEach(len(sealed), len(bufs), func(w, i int) { f(sealed[i], &bufs[w]) })
	}
	each(func(n uint32, _ *zchunk.MetaBuffer) { metas[n], p.sealedErrs[n] = openSealedMeta(fsys, dir, n) })
	total := 0
	regions := make([][]entry, missing)
	for n := range missing {
		p.sealedAt[n] = -1
		if metas[n] != nil {
			total += metas[n].Bound()
		}
	}
	x.Entries = make([]entry, 0, total+extra)
	for n, at := uint32(0), 0; n < missing && metas[n] != nil; n++ {
		b := metas[n].Bound()
		regions[n], p.sealedAt[n] = x.Entries[at:at:at+b], at
		at += b
	}
	each(func(n uint32, b *zchunk.MetaBuffer) {
		m := metas[n]
		if m == nil {
			return
		}
		defer m.Close()
		if p.sealedErrs[n] = sealedErr(m.Read(b)); p.sealedErrs[n] == nil {
			es, _, err := m.Decode(regions[n], false)
			p.sealedEntries[n], p.sealedErrs[n] = es, sealedErr(err)
		}
	})
	total = extra
	for n, es := range p.sealedEntries {
		total += len(es)
		if p.sealedAt[n] >= 0 && (len(es) == 0 || &es[0] != &regions[n][:1][0]) {
			// Decoded elsewhere (more lines than the bound): it would
			// overwrite the regions after it, so those leave the array.
			for m := uint32(n) + 1; m < missing && p.sealedAt[m] >= 0; m++ {
				p.sealedEntries[m], p.sealedAt[m] = slices.Clone(p.sealedEntries[m]), -1
			}
			p.sealedAt[n] = -1
		}
	}
	x.ByID = make(map[uuid.UUID]int32, total)
}

// errIndexEnd stops a read-only analysis's use of index.jsonl.
var errIndexEnd = errors.New("end of the usable index")

// addSealed adds the entries embedded in sealed chunk n to h.
func (p *recoveryPlan) addSealed(x *memIndex, dir string, n uint32) error {
	es, err := p.sealedEntries[n], p.sealedErrs[n]
	p.sealedEntries[n] = nil
	if err != nil {
		return err
	}
	if len(x.Entries) > 0 && x.Entries[len(x.Entries)-1].Loc.Chunk >= n {
		return corruptf(filepath.Join(dir, chunkName(n)+sealedExt), 0, "sealed chunk %d follows records indexed in chunk %d", n, x.Entries[len(x.Entries)-1].Loc.Chunk)
	}
	k, all := len(x.Entries), x.Entries[:cap(x.Entries)]
	if at := p.sealedAt[n]; at >= k && len(es) > 0 && &all[at] == &es[0] {
		// Decoded into the array of x.entries, at or after its end.
		copy(all[k:], es)
		x.Entries = all[:k+len(es)]
		err = x.Adopt(len(es))
	} else {
		for i := range es {
			if err = x.Add(&es[i]); err != nil {
				break
			}
		}
	}
	if err != nil {
		return corruptf(filepath.Join(dir, chunkName(n)+sealedExt), 0, "embedded index: %w", err)
	}
	return nil
}

// plainEntries returns the entries of es in chunks that are not sealed:
// what index.jsonl holds.
func (p *recoveryPlan) plainEntries(es []entry) []entry {
	var out []entry
	for i := range es {
		if c := es[i].Loc.Chunk; int(c) >= len(p.sealed) || !p.sealed[c] {
			out = append(out, es[i])
		}
	}
	return out
}

// fail records err in the plan if it is corruption (and returns nil), or
// returns it.
func (p *recoveryPlan) fail(err error) error {
	var ce *CorruptionError
	if errors.As(err, &ce) {
		if p.corrupt == nil {
			p.corrupt = ce
		}
		return nil
	}
	return err
}

// scanChunk indexes the records of one chunk from off, adding them to h,
// and records where valid data ends and any torn tail to cut.
func (p *recoveryPlan) scanChunk(fsys vfs.FS, x *memIndex, dir string, n uint32, off int64, newest bool) error {
	f, size, path, err := openChunk(fsys, dir, n)
	if err != nil {
		return err
	}
	defer f.Close()
	sealed := strings.HasSuffix(path, sealedExt)
	w, err := walkRecords(f, n, off, size, newest && !sealed, func(hdr header, pl payload, loc location) error {
		if err := x.Add(ptr(eventline.NewEntry(hdr, pl, loc))); err != nil {
			return corruptf(path, loc.Offset, "%w", err)
		}
		return nil
	}, func(bad, next int64, err error) error {
		return corruptf(path, bad, "invalid record followed by a valid one at offset %d: %w", next, err)
	})
	if err != nil {
		return err
	}
	if newest {
		p.activeSize = w.End
	}
	if w.Bad < 0 {
		return nil
	}
	if !newest || sealed {
		return corruptf(path, w.Bad, "invalid data in a sealed chunk: %w", w.BadErr)
	}
	p.activeSize = w.Bad
	p.tornPath, p.tornSize, p.tornErr = path, w.Size, w.BadErr
	p.tornKeep = keepName(fsys, layout.BrokenTail(path, w.Bad))
	return nil
}

// applyRepairs carries out the repairs of plan p (see the top of this
// file) in the session directory dir, each synced before the next, and
// returns the size of index.jsonl after them. It changes files only; a
// crash at any point leaves files the next analysis plans the rest of the
// repairs from.
func applyRepairs(fsys vfs.FS, dir string, p *recoveryPlan, perm os.FileMode) (int64, error) {
	chunkDir := filepath.Join(dir, chunksDir)
	indexPath := filepath.Join(dir, indexName)
	x := &p.index
	if p.tornPath != "" {
		if err := cutTail(fsys, p.tornPath, p.activeSize, p.tornKeep, perm); err != nil {
			return 0, err
		}
	}
	// Records found after the last index line in the newest chunk may
	// never have been synced: a writer that died before its fdatasync, or
	// whose fdatasync failed, left them in the page cache. Sync the chunk
	// before an index line or HEAD names them durably (a torn tail's cut
	// synced it already).
	if n := len(p.chunks); n > 0 && !p.newestSealed && p.tornPath == "" {
		newest := p.chunks[n-1]
		for _, e := range x.Entries[p.firstNew:] {
			if e.Loc.Chunk == newest {
				if err := syncFile(fsys, filepath.Join(chunkDir, chunkName(newest))); err != nil {
					return 0, err
				}
				break
			}
		}
	}
	indexEnd, added := p.indexEnd, p.plainEntries(x.Entries[p.firstNew:])
	if p.staleLines > 0 || p.rewriteIndex {
		indexEnd, added = 0, p.plainEntries(x.Entries)
	}
	indexSize := indexEnd
	if p.indexBad >= 0 || len(added) > 0 || p.indexSize != indexEnd {
		var err error
		if indexSize, err = rewriteIndexTail(fsys, indexPath, indexEnd, added, perm); err != nil {
			return 0, err
		}
	}
	if p.metaTemp {
		if err := removeIfExists(fsys, filepath.Join(dir, metaFile+".tmp")); err != nil {
			return 0, err
		}
	}
	for _, n := range p.unsealed {
		if err := removeIfExists(fsys, filepath.Join(chunkDir, chunkName(n))); err != nil {
			return 0, err
		}
	}
	for _, name := range p.sealTemps {
		if err := removeIfExists(fsys, filepath.Join(chunkDir, name)); err != nil {
			return 0, err
		}
	}

	headPath := filepath.Join(dir, headfile.Name)
	tmpPath := filepath.Join(dir, headfile.Temp)
	if p.headFinish {
		if err := fsys.Rename(tmpPath, headPath); err != nil {
			return 0, err
		}
		if err := fsys.SyncDir(dir); err != nil {
			return 0, err
		}
	} else if p.headTemp {
		if err := removeIfExists(fsys, tmpPath); err != nil {
			return 0, err
		}
	}
	head := p.head()
	if p.headBad != nil {
		// Keep the bad checkpoint aside before a new one is written: moved
		// under its kept name, whatever its size (a sparse file of
		// gigabytes is never read), the move synced, so that a crash in
		// between finds the same bad HEAD, which the next analysis keeps
		// aside again, or none, which it rebuilds.
		if err := fsys.Rename(headPath, p.headKeep); err != nil {
			return 0, err
		}
		if err := fsys.SyncDir(filepath.Dir(p.headKeep)); err != nil {
			return 0, err
		}
	}
	if head != uuid.Nil && (head != p.headOnDisk || p.headBad != nil) {
		if err := writeHead(fsys, dir, head, perm); err != nil {
			return 0, err
		}
	}
	return indexSize, nil
}

// writeSynced writes data to a new file at path, which must not exist
// (a kept-aside file is never replaced), and syncs it and its directory.
// It is durable.ReplaceFile's atomic write (a temporary file synced, then
// renamed): a new file's entry can reach the disk before its data, and
// path, the name the bytes are promised under, must hold them whole or
// not exist. A crash before the rename leaves only the temporary file,
// which the next attempt rewrites (keepName gives it the same path while
// path does not exist). The bytes of a file's tail are copied a block at
// a time, so that their size (a sparse file may claim gigabytes) costs no
// memory.
func writeSynced[B keptBytes](fsys vfs.FS, path string, data B, perm os.FileMode) error {
	if _, err := fsys.Stat(path); err == nil {
		return &os.PathError{Op: "keep", Path: path, Err: os.ErrExist}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	tmp := path + ".tmp"
	w, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	switch d := any(data).(type) {
	case []byte:
		_, err = w.Write(d)
	case tailBytes:
		err = d.copyTo(w)
	}
	if err != nil {
		w.Close()
		return err
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

// keptBytes is what writeSynced keeps: bytes in memory, or a file's tail.
type keptBytes interface{ []byte | tailBytes }

// tailBytes is the bytes of f from off to end, less the zero bytes that
// end them (free space): what a cut keeps aside.
type tailBytes struct {
	f        vfs.File
	off, end int64
}

// copyTo writes the bytes to w from its start, a block at a time; a block
// of zeros is not written (w reads zeros there), and w ends with the last
// byte that is not zero.
func (t tailBytes) copyTo(w vfs.File) error {
	buf := make([]byte, min(t.end-t.off, 1<<20))
	var data int64 // end of the last byte not zero, from off
	for at := t.off; at < t.end; {
		n, err := t.f.ReadAt(buf[:min(int64(len(buf)), t.end-at)], at)
		if z := zeroTail(buf[:n]); z < n {
			data = at - t.off + int64(n-z)
			if _, werr := w.WriteAt(buf[:n], at-t.off); werr != nil {
				return werr
			}
		}
		at += int64(n)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	return w.Truncate(data)
}

// Repair opens a session for writing and reconciles it at once, carrying
// out the repairs Verify lists (VerifyReport.Repairs) that a writer would
// otherwise make when a call first needs the session's index, and returns
// them, in the words Verify uses: nil when the files needed none. Repairs
// this Store made earlier, when another call opened the session, are
// returned by the first Repair after them.
//
// When Repair returns, every repair is durable. The bytes it cuts are
// kept: a torn tail in a "<chunk>.broken-<offset>" file beside the chunk,
// a bad HEAD in HEAD.broken. It cannot repair corruption (a damaged record
// followed by valid ones, a missing chunk): it returns the
// *CorruptionError and changes nothing. Like the open it runs, it checks
// the files a writer's open checks (the indexes, the chunks after the last
// index line, the record of that line, HEAD), not every record: Verify
// reads the whole session, and finds damage Repair does not look for.
//
// Errors: ErrReadOnly, ErrNotFound, ErrLocked, *CorruptionError, ErrClosed.
func (s *Store) Repair(ctx context.Context, session uuid.UUID) ([]string, error) {
	if s.opts.ReadOnly {
		return nil, ErrReadOnly
	}
	var done []string
	err := s.withHandle(ctx, session, func(h *openSession) error {
		done, h.repaired = h.repaired, nil
		return nil
	})
	return done, err
}

// errRepairFailed marks an error of reconcile after it may have begun to
// change the session's files: its repairs are half made (each step is
// safe to redo, but the files are no longer what the analysis saw), so
// the session must not go on as the analysis left it. A lazily opened
// session is closed (materialize), and the next call opens it again from
// its files, analyzing them as they are.
var errRepairFailed = errors.New("sessionstore: repair failed")

// cutTail keeps the bytes of path from off aside in the new file keep
// (synced, with its directory), then truncates path at off and syncs it.
func cutTail(fsys vfs.FS, path string, off int64, keep string, perm os.FileMode) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	tail := tailBytes{f: f, off: off, end: info.Size()}
	if err := writeSynced(fsys, keep, tail, perm); err != nil {
		return err
	}
	if err := f.Truncate(off); err != nil {
		return err
	}
	return f.Sync()
}

// keepName returns base, or the first of base.1, base.2, ... that does
// not exist: a file to keep bytes aside in that replaces no earlier one
// (an earlier cut at the same offset may hold the only copy of lost
// events). A crash after keeping and before cutting makes the next
// reconciliation keep the same bytes again, under the next name.
func keepName(fsys vfs.FS, base string) string {
	name := base
	for i := 1; ; i++ {
		if _, err := fsys.Stat(name); errors.Is(err, os.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s.%d", base, i)
	}
}

// syncFile makes the data of the file at path durable.
func syncFile(fsys vfs.FS, path string) error {
	f, err := fsys.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// rewriteIndexTail cuts the index at end, appends the lines of added,
// syncs the file and returns its new size. When the file holds nothing
// past end, the lines are appended in place. Otherwise its first end
// bytes and the new lines replace it (durable.ReplaceFile: a temporary file
// synced, renamed over it, the directory synced), as reset does and for
// its reason: cut in place, a crash before the sync could leave the new
// lines followed by the bytes the truncation was to drop, which may be
// whole lines naming records already named (a sealed chunk's, or those
// of the lines the rewrite drops).
func rewriteIndexTail(fsys vfs.FS, path string, end int64, added []entry, perm os.FileMode) (int64, error) {
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, perm)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	var buf []byte
	if info.Size() > end {
		buf = make([]byte, end, end+int64(len(added))*index.TypicalLine)
		if _, err := f.ReadAt(buf, 0); err != nil {
			return 0, err
		}
	}
	for i := range added {
		buf = eventline.AppendIndex(buf, &added[i])
	}
	if info.Size() > end {
		return int64(len(buf)), durable.ReplaceFile(fsys, filepath.Dir(path), filepath.Base(path), buf, perm)
	}
	if _, err := f.WriteAt(buf, end); err != nil {
		return 0, err
	}
	return end + int64(len(buf)), f.Sync()
}

// removeIfExists removes a file and syncs its directory, doing nothing when
// the file is absent.
func removeIfExists(fsys vfs.FS, path string) error {
	err := fsys.Remove(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return fsys.SyncDir(filepath.Dir(path))
}

func ptr[T any](v T) *T { return &v }
