package recovery

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/parallel"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// Plan is what Analyze found.
type Plan struct {
	// Corrupt is the first damage found (see the package comment for its
	// types); nil if none.
	Corrupt error

	IndexSize   int64 // size of index.jsonl
	IndexEnd    int64 // end of its valid prefix
	IndexBad    int64 // offset of its first invalid line, or -1
	IndexBadErr error
	FirstNew    int // Index.Entries[FirstNew:] are in the chunks but not in the index

	Indexed    int // entries taken from index.jsonl
	StaleLines int // index.jsonl lines of sealed chunks, which embed them

	Chunks []uint32 // chunk numbers, ascending
	Sealed []bool   // Sealed[n]: chunk n is (also) a sealed file
	// The embedded index of each sealed chunk, or why it could not be read.
	sealedEntries [][]eventline.Entry
	sealedErrs    []error
	sealedAt      []int    // where readSealed decoded a chunk's entries in the array of Index.Entries, or -1
	Unsealed      []uint32 // chunks with both a plain and a sealed file
	SealTemps     []string // temporary files of interrupted sealings
	NewestSealed  bool     // the newest chunk is sealed (compressed)
	ActiveSize    int64    // end of valid data in the newest chunk
	TornPath      string   // newest chunk, when it has a torn tail to cut at ActiveSize
	TornSize      int64    // its size before cutting
	TornErr       error
	TornKeep      string // where the cut bytes are kept (keepName)

	MetaTemp   bool      // session.json.tmp exists
	HeadTemp   bool      // HEAD.tmp exists
	HeadFinish bool      // HEAD.tmp names a known event: rename it into place
	HeadOnDisk uuid.UUID // what HEAD holds (after a finished temp); uuid.Nil if absent or bad
	HeadBad    error     // HEAD does not decode, or names an event the log does not hold: keep it aside, rebuild it
	HeadKeep   string    // where (keepName)

	// Events index lines name whose records, ending the newest chunk, are
	// damaged with no valid record after them: lost, cut with the torn
	// tail (checkLast). LostErr says so; the index is rewritten whole.
	Lost         []uuid.UUID
	LostErr      *corrupt.Error
	RewriteIndex bool

	// Index is what the analysis read: every event of the log, or its
	// valid prefix when it found corruption.
	Index index.Mem
}

// Head is the newest event the analysis found, uuid.Nil if none.
func (p *Plan) Head() uuid.UUID {
	if e, ok := p.Index.Last(); ok {
		return e.ID
	}
	return uuid.Nil
}

// Damage is the first corruption Analyze found, or the loss of
// acknowledged events at the end of the log (Lost), which a writer
// repairs but a reader and Verify report; nil if neither.
func (p *Plan) Damage() error {
	if p.Corrupt != nil {
		return p.Corrupt
	}
	if p.LostErr != nil {
		return p.LostErr
	}
	return nil
}

// IsDamage reports whether err is damage as the layers below report it:
// a *corrupt.Error, a sealed file's *zchunk.FormatError, or the file
// system's refusal of a path (vfs.ErrFileType, vfs.ErrTooLarge).
func IsDamage(err error) bool {
	return errors.As(err, new(*corrupt.Error)) || errors.As(err, new(*zchunk.FormatError)) ||
		errors.Is(err, vfs.ErrFileType) || errors.Is(err, vfs.ErrTooLarge)
}

// Analyze reads a session's files into p.Index and decides the repairs,
// writing nothing. Corruption is reported in the plan (Corrupt), with
// p.Index holding the valid prefix; the error is for I/O failures only.
// readOnly says that a writer may change the files meanwhile: the
// analysis then stops using index.jsonl at its first line it cannot use.
// outside, nil but for a fork, accepts the parents its prefix holds.
func Analyze(fsys vfs.FS, dir string, readOnly bool, outside func(uuid.UUID) bool) (*Plan, error) {
	p := &Plan{IndexBad: -1}
	x := &p.Index
	x.Outside = outside
	indexPath := filepath.Join(dir, layout.IndexFile)
	chunkDir := filepath.Join(dir, layout.ChunksDir)

	// HEAD first: it names only durable events, so the chunks read after
	// it hold its event even if a writer replaces it meanwhile.
	headPath := filepath.Join(dir, headfile.Name)
	head, headExists, headErr := headfile.Read(fsys, headPath)
	tmp, tmpExists, tmpErr := headfile.Read(fsys, filepath.Join(dir, headfile.Temp))
	_, err := fsys.Stat(filepath.Join(dir, layout.MetaFile+".tmp"))
	p.MetaTemp = err == nil

	forms, temps, err := chunk.Forms(fsys, chunkDir)
	if err != nil {
		// chunks/ is not a directory (a link, a file: a refusal).
		return p, p.fail(err)
	}
	p.SealTemps = temps
	for n, f := range forms {
		p.Chunks = append(p.Chunks, n)
		if f.Plain && f.Sealed {
			// Sealing was interrupted after the compressed file became
			// durable: the plain copy goes.
			p.Unsealed = append(p.Unsealed, n)
		}
	}
	slices.Sort(p.Chunks)
	slices.Sort(p.Unsealed)
	p.Sealed = make([]bool, len(p.Chunks))
	for i, n := range p.Chunks {
		// A sealed file wins over a plain copy, which Apply removes.
		if n == uint32(i) {
			p.Sealed[i] = forms[n].Sealed
		}
	}
	if len(p.Chunks) > 0 {
		p.NewestSealed = forms[p.Chunks[len(p.Chunks)-1]].Sealed
	}
	// missing is the first chunk number absent from the directory: no
	// record may be at or past it.
	missing := uint32(len(p.Chunks))
	for i, n := range p.Chunks {
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
	next := uint32(0) // chunks before next have their entries in x
	addSealed := func(upto uint32) error {
		for ; next < upto && next < missing; next++ {
			if p.Sealed[next] {
				if err := p.addSealed(x, chunkDir, next); err != nil {
					return err
				}
			}
		}
		return nil
	}
	add := func(e *eventline.Entry, off int64) error {
		if c := e.Loc.Chunk; c < missing && p.Sealed[c] {
			p.StaleLines++
			return nil
		}
		if err := addSealed(e.Loc.Chunk); err != nil {
			return err
		}
		if len(x.Entries) == 0 {
			if e.Loc.Chunk != 0 || e.Loc.Offset != 0 {
				return corrupt.Errorf(indexPath, off, "first entry is at chunk %d offset %d, not at the start of chunk 0", e.Loc.Chunk, e.Loc.Offset)
			}
		} else if prev := &x.Entries[len(x.Entries)-1]; !(e.Loc.Chunk == prev.Loc.Chunk && e.Loc.Offset == prev.Loc.End()) && !(e.Loc.Chunk == prev.Loc.Chunk+1 && e.Loc.Offset == 0) {
			return corrupt.Errorf(indexPath, off, "entry %s at chunk %d offset %d does not follow the previous record", e.ID, e.Loc.Chunk, e.Loc.Offset)
		}
		if err := x.Add(e); err != nil {
			return corrupt.Errorf(indexPath, off, "%w", err)
		}
		p.Indexed++
		return nil
	}
	scan, err := index.Read(fsys, indexPath, func(e *eventline.Entry, off int64) error {
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
		var ce *corrupt.Error
		if errors.As(err, &ce) && ce.Path == indexPath {
			return errIndexEnd
		}
		return err
	})
	if errors.Is(err, errIndexEnd) {
		err = nil
	}
	if err != nil {
		return p, p.fail(err) // a link, a FIFO: damage
	}
	p.IndexSize, p.IndexEnd, p.IndexBad, p.IndexBadErr = scan.Size, scan.End, scan.Bad, scan.BadErr
	if missing < uint32(len(p.Chunks)) || (len(x.Entries) > 0 && x.Entries[len(x.Entries)-1].Loc.Chunk >= missing) {
		x.Truncate(func(e *eventline.Entry) bool { return e.Loc.Chunk >= missing })
		if err := addSealed(missing); err != nil {
			return p, p.fail(err)
		}
		return p, p.fail(corrupt.Errorf(filepath.Join(chunkDir, layout.ChunkName(missing)), 0, "chunk file is missing"))
	}

	start := eventline.Location{}
	if len(x.Entries) > 0 {
		r := chunk.NewReader(fsys, chunkDir)
		err := p.checkLast(x, r)
		r.Close()
		if err != nil {
			return nil, err
		}
		if p.Corrupt != nil {
			return p, nil
		}
		if len(x.Entries) > 0 {
			last := &x.Entries[len(x.Entries)-1]
			start = eventline.Location{Chunk: last.Loc.Chunk, Offset: last.Loc.End()}
		}
	}

	p.FirstNew = len(x.Entries)
	for _, n := range p.Chunks {
		if n < start.Chunk || (n < next && p.Sealed[n]) {
			continue
		}
		var err error
		if p.Sealed[n] {
			next = n + 1
			err = p.addSealed(x, chunkDir, n)
		} else {
			off := int64(0)
			if n == start.Chunk {
				off = start.Offset
			}
			err = p.ScanChunk(fsys, x, chunkDir, n, off, n == p.Chunks[len(p.Chunks)-1])
		}
		if err != nil {
			if perr := p.fail(err); perr != nil {
				return nil, perr
			}
			return p, nil
		}
	}

	// A HEAD or HEAD.tmp that is not a regular file (a link, a FIFO: a
	// refusal) is no checkpoint a writer may move aside or replace: the
	// session is damaged, its events all readable.
	for _, err := range []error{tmpErr, headErr} {
		if errors.Is(err, vfs.ErrFileType) {
			return p, p.fail(err)
		}
	}
	if tmpExists {
		p.HeadTemp = true
		_, known := x.ByID[tmp]
		p.HeadFinish = tmpErr == nil && known
	}
	if p.HeadFinish {
		p.HeadOnDisk = tmp
		return p, nil
	}
	// HEAD is a checkpoint of the log: one that does not decode, or names
	// an event the log does not hold, is rebuilt from the log, its bytes
	// kept aside. HEAD is written only for durable events, so one naming
	// an event the log lacks means the log lost acknowledged events (its
	// end damaged or cut, with index lines that named them lost too in a
	// power cut, since they are not synced), unless HEAD itself is
	// damaged: which, no file tells, so it is reported as a loss
	// (p.LostErr) as well as repaired.
	switch {
	case IsDamage(headErr):
		p.HeadBad = headErr
	case headErr != nil:
		return nil, headErr
	default:
		p.HeadOnDisk = head
		if _, known := x.ByID[head]; headExists && !known {
			p.HeadBad = corrupt.Errorf(headPath, 0, "HEAD names event %s, which the log does not hold", head)
			if p.LostErr == nil {
				p.LostErr = &corrupt.Error{Path: headPath, Err: fmt.Errorf("HEAD names event %s, which the log does not hold: acknowledged events were lost, or HEAD is damaged", head)}
			}
		}
	}
	if p.HeadBad != nil {
		p.HeadKeep = keepName(fsys, filepath.Join(dir, headfile.Broken))
	}
	return p, nil
}

// checkLast checks that the record of the last entry taken from the
// indexes is in its chunk as the entry says, so the scan for records the
// index lacks can start after it. When the records of the newest chunk's
// last entries are damaged and no valid record follows them, the log ends
// in a torn tail although index lines name it: those acknowledged events
// are lost (a disk or another program damaged synced data), and the tail
// is cut like any torn tail, their entries dropped (p.Lost). Any other
// mismatch is corruption.
func (p *Plan) checkLast(x *index.Mem, r *chunk.Reader) error {
	newest := p.Chunks[len(p.Chunks)-1]
	var firstBad error
	k := len(x.Entries)
	for k > 0 {
		e := &x.Entries[k-1]
		err := checkRecord(r, e)
		if err == nil {
			break
		}
		if !IsDamage(err) {
			return err
		}
		// Only damaged bytes (not a whole line with a valid checksum that
		// is invalid, or that the entry disagrees with) at the end of the
		// plain newest chunk are a lost tail.
		if e.Loc.Chunk != newest || p.NewestSealed || !r.DamagedAt(e.Loc) {
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
		p.Lost = append(p.Lost, e.ID)
	}
	first := lost[0]
	path, cause := r.Path(first.Loc.Chunk), firstBad
	if ce := (*corrupt.Error)(nil); errors.As(firstBad, &ce) {
		path, cause = ce.Path, ce.Err
	}
	p.LostErr = &corrupt.Error{Path: path, Offset: first.Loc.Offset, Err: fmt.Errorf("%d acknowledged events lost: the index names %s (and %d after it) at the end of the newest chunk, whose record is damaged: %w",
		len(lost), first.ID, len(lost)-1, cause)}
	p.RewriteIndex = true
	x.TruncateTo(k)
	return nil
}

// checkRecord reads the record of e and checks it against e: a record
// that is not the one e describes is a *corrupt.Error.
func checkRecord(r *chunk.Reader, e *eventline.Entry) error {
	h, pl, err := r.Read(e.Loc)
	if err != nil {
		return err
	}
	if h != e.Header || pl.Size != e.Size || pl.Blob != e.Blob || pl.Digest != e.Digest {
		return corrupt.Errorf(r.Path(e.Loc.Chunk), e.Loc.Offset, "record %s does not match its index entry %s", h.ID, e.ID)
	}
	return nil
}

// readSealed reads the embedded indexes of the sealed chunks before
// missing, in parallel, into p.sealedEntries and p.sealedErrs, and makes
// x.Entries and x.ByID with room for their entries plus extra.
//
// The sealed chunks that start the log (0, 1, ... up to the first plain or
// missing one) are decoded straight into the array of x.Entries, each in a
// region sized by index.Sealed.Bound and laid out in chunk order, so that
// addSealed moves them down into place instead of copying them from
// another slice (p.sealedAt). This is sound because nothing is added to
// x.Entries before them: every other entry is in a later chunk, and add
// first adds the sealed chunks before its own. Opening a large session so
// touches the memory of one array of entries, not two.
func (p *Plan) readSealed(fsys vfs.FS, x *index.Mem, dir string, missing uint32, extra int) {
	p.sealedEntries = make([][]eventline.Entry, missing)
	p.sealedErrs = make([]error, missing)
	p.sealedAt = make([]int, missing)
	metas := make([]*index.Sealed, missing)
	var sealed []uint32
	for n := range missing {
		if p.Sealed[n] {
			sealed = append(sealed, n)
		}
	}
	bufs := make([]zchunk.MetaBuffer, runtime.GOMAXPROCS(0)) // one per worker
	each := func(f func(n uint32, b *zchunk.MetaBuffer)) {
		parallel.ForEach(len(sealed), len(bufs), func(w, i int) { f(sealed[i], &bufs[w]) })
	}
	each(func(n uint32, _ *zchunk.MetaBuffer) {
		metas[n], p.sealedErrs[n] = index.OpenSealed(fsys, filepath.Join(dir, layout.SealedName(n)), n)
	})
	total := 0
	regions := make([][]eventline.Entry, missing)
	for n := range missing {
		p.sealedAt[n] = -1
		if metas[n] != nil {
			total += metas[n].Bound()
		}
	}
	x.Entries = make([]eventline.Entry, 0, total+extra)
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
		if p.sealedErrs[n] = m.Read(b); p.sealedErrs[n] == nil {
			es, _, err := m.Decode(regions[n], false)
			p.sealedEntries[n], p.sealedErrs[n] = es, err
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

// addSealed adds the entries embedded in sealed chunk n to x.
func (p *Plan) addSealed(x *index.Mem, dir string, n uint32) error {
	es, err := p.sealedEntries[n], p.sealedErrs[n]
	p.sealedEntries[n] = nil
	if err != nil {
		return err
	}
	if len(x.Entries) > 0 && x.Entries[len(x.Entries)-1].Loc.Chunk >= n {
		return corrupt.Errorf(filepath.Join(dir, layout.SealedName(n)), 0, "sealed chunk %d follows records indexed in chunk %d", n, x.Entries[len(x.Entries)-1].Loc.Chunk)
	}
	k, all := len(x.Entries), x.Entries[:cap(x.Entries)]
	if at := p.sealedAt[n]; at >= k && len(es) > 0 && &all[at] == &es[0] {
		// Decoded into the array of x.Entries, at or after its end.
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
		return corrupt.Errorf(filepath.Join(dir, layout.SealedName(n)), 0, "embedded index: %w", err)
	}
	return nil
}

// PlainEntries returns the entries of es in chunks that are not sealed:
// what index.jsonl holds.
func (p *Plan) PlainEntries(es []eventline.Entry) []eventline.Entry {
	var out []eventline.Entry
	for i := range es {
		if c := es[i].Loc.Chunk; int(c) >= len(p.Sealed) || !p.Sealed[c] {
			out = append(out, es[i])
		}
	}
	return out
}

// fail records err in the plan if it is damage (and returns nil), or
// returns it.
func (p *Plan) fail(err error) error {
	if IsDamage(err) {
		if p.Corrupt == nil {
			p.Corrupt = err
		}
		return nil
	}
	return err
}

// ScanChunk indexes the records of chunk n of dir from off, adding them
// to x, and records in p where valid data ends and any torn tail to cut;
// newest says the chunk is the newest, whose plain file may end in a torn
// write. Damage is returned as the package comment says.
func (p *Plan) ScanChunk(fsys vfs.FS, x *index.Mem, dir string, n uint32, off int64, newest bool) error {
	f, size, path, err := chunk.Open(fsys, dir, n)
	if err != nil {
		return err
	}
	defer f.Close()
	sealed := strings.HasSuffix(path, layout.SealedExt)
	w, err := chunk.Walk(f, n, off, size, newest && !sealed, func(hdr eventline.Header, pl eventline.Payload, loc eventline.Location) error {
		e := eventline.NewEntry(hdr, pl, loc)
		if err := x.Add(&e); err != nil {
			return corrupt.Errorf(path, loc.Offset, "%w", err)
		}
		return nil
	}, func(bad, next int64, err error) error {
		return corrupt.Errorf(path, bad, "invalid record followed by a valid one at offset %d: %w", next, err)
	})
	if err != nil {
		return err
	}
	if newest {
		p.ActiveSize = w.End
	}
	if w.Bad < 0 {
		return nil
	}
	if !newest || sealed {
		return corrupt.Errorf(path, w.Bad, "invalid data in a sealed chunk: %w", w.BadErr)
	}
	p.ActiveSize = w.Bad
	p.TornPath, p.TornSize, p.TornErr = path, w.Size, w.BadErr
	p.TornKeep = keepName(fsys, layout.BrokenTail(path, w.Bad))
	return nil
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
