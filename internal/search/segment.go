package search

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
)

// ErrDamaged reports an index file that does not decode: its checksum,
// a count or length beyond the file, a reference out of range, a session
// that does not continue where the files before left it. The caller
// rebuilds the index.
var ErrDamaged = errors.New("search index damaged")

// segMagic begins every segment file.
const segMagic = "SSX2"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// segSession is a session's record in a segment: its events [From, Next)
// are the segment's documents naming it.
type segSession struct {
	id        [16]byte
	from      uint64
	next      uint64
	last      [16]byte
	updatedAt int64
}

// Segment is a decoded segment file, before it joins an Index.
type Segment struct {
	Seq, Base uint64
	sessions  []segSession
	docs      []DocInfo // Session: an index in sessions
	terms     []string
	posts     [][]uint32 // per term: doc, tf pairs, docs local
}

// encodeSegment encodes the documents docs (global numbers, ascending) of
// x, with the session records recs, as segment seq with base.
func (x *Index) encodeSegment(seq, base uint64, slots []uint32, from []uint64, docs []uint32) []byte {
	b := []byte(segMagic)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, base)
	ref := make(map[uint32]uint64, len(slots))
	b = binary.AppendUvarint(b, uint64(len(slots)))
	for i, sl := range slots {
		s := &x.Sessions[sl]
		ref[sl] = uint64(i)
		b = append(b, s.ID[:]...)
		b = binary.AppendUvarint(b, from[i])
		b = binary.AppendUvarint(b, s.Next)
		b = append(b, s.Last[:]...)
		b = binary.AppendVarint(b, s.UpdatedAt)
	}
	// A document's local number is its index in docs (ascending): found
	// by a binary search, not a map of every document.
	local := func(d uint32) (uint32, bool) {
		i, ok := slices.BinarySearch(docs, d)
		return uint32(i), ok
	}
	b = binary.AppendUvarint(b, uint64(len(docs)))
	var prev int64
	for _, d := range docs {
		di := &x.Docs[d]
		b = binary.AppendUvarint(b, ref[di.Session])
		b = append(b, di.Event[:]...)
		b = append(b, di.Kind, di.Role)
		b = binary.AppendVarint(b, di.Time-prev)
		prev = di.Time
		b = binary.AppendUvarint(b, uint64(di.Len))
	}
	lo, hi := uint32(0), uint32(0)
	if len(docs) > 0 {
		lo, hi = docs[0], docs[len(docs)-1]
	}
	// The terms with a posting in docs, sorted; each one's postings are
	// counted, then encoded, straight from the index's lists (no copy).
	// A full write (docs every live document from lo on) counts and
	// encodes without looking each document up.
	dense := len(docs) > 0 && int(hi-lo)+1 == len(docs)
	type tp struct {
		term string
		ps   []uint32 // the index's list itself, not a copy
		from int      // the first pair of its postings at lo or after
		n    int      // its postings in docs
	}
	var terms []tp
	for t, ps := range x.post {
		j := lowerPair(ps, lo)
		n := 0
		for k := j; k < len(ps) && ps[k] <= hi; k += 2 {
			if dense {
				n++
			} else if _, ok := local(ps[k]); ok {
				n++
			}
		}
		if n > 0 {
			terms = append(terms, tp{t, ps, j, n})
		}
	}
	slices.SortFunc(terms, func(a, b tp) int { return strings.Compare(a.term, b.term) })
	b = binary.AppendUvarint(b, uint64(len(terms)))
	prevTerm := ""
	for _, t := range terms {
		shared := 0
		for shared < len(prevTerm) && shared < len(t.term) && prevTerm[shared] == t.term[shared] {
			shared++
		}
		b = binary.AppendUvarint(b, uint64(shared))
		b = binary.AppendUvarint(b, uint64(len(t.term)-shared))
		b = append(b, t.term[shared:]...)
		b = binary.AppendUvarint(b, uint64(t.n))
		last := uint32(0)
		for k := t.from; k < len(t.ps) && t.ps[k] <= hi; k += 2 {
			var l uint32
			if dense {
				l = t.ps[k] - lo
			} else {
				var ok bool
				if l, ok = local(t.ps[k]); !ok {
					continue
				}
			}
			// the doc's delta, shifted, its low bit set when tf is not 1
			// (then tf-2 follows): most postings are one byte
			d := uint64(l-last) << 1
			last = l
			if t.ps[k+1] == 1 {
				b = binary.AppendUvarint(b, d)
			} else {
				b = binary.AppendUvarint(b, d|1)
				b = binary.AppendUvarint(b, uint64(t.ps[k+1])-2)
			}
		}
		prevTerm = t.term
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// lowerPair is the first even index of pairs whose doc is at least lo.
func lowerPair(ps []uint32, lo uint32) int {
	i, j := 0, len(ps)/2
	for i < j {
		h := int(uint(i+j) >> 1)
		if ps[2*h] < lo {
			i = h + 1
		} else {
			j = h
		}
	}
	return 2 * i
}

// segReader decodes a segment's bytes, refusing any count beyond them.
type segReader struct {
	b   []byte
	off int
	err error
}

func (r *segReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s at offset %d", ErrDamaged, what, r.off)
	}
}

func (r *segReader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b[r.off:])
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.off += n
	return v
}

func (r *segReader) varint(what string) int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b[r.off:])
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.off += n
	return v
}

func (r *segReader) bytes(n uint64, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)-r.off) {
		r.fail(what)
		return nil
	}
	v := r.b[r.off : r.off+int(n)]
	r.off += int(n)
	return v
}

// count reads a count of items of at least min bytes each, refusing one
// the rest of the file cannot hold.
func (r *segReader) count(min int, what string) int {
	n := r.uvarint(what)
	if r.err == nil && n > uint64((len(r.b)-r.off)/min) {
		r.fail(what + " beyond the file")
		return 0
	}
	return int(n)
}

// DecodeSegment decodes a segment file's bytes: ErrDamaged for bytes
// that are not one whole segment.
func DecodeSegment(b []byte) (*Segment, error) {
	if len(b) < len(segMagic)+4 || string(b[:len(segMagic)]) != segMagic {
		return nil, fmt.Errorf("%w: not a segment", ErrDamaged)
	}
	body := b[:len(b)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(b[len(b)-4:]) {
		return nil, fmt.Errorf("%w: checksum", ErrDamaged)
	}
	r := &segReader{b: body, off: len(segMagic)}
	s := &Segment{}
	s.Seq = r.uvarint("seq")
	s.Base = r.uvarint("base")
	ns := r.count(34, "sessions")
	s.sessions = make([]segSession, ns)
	for i := range ns {
		ss := &s.sessions[i]
		copy(ss.id[:], r.bytes(16, "session id"))
		ss.from = r.uvarint("from")
		ss.next = r.uvarint("next")
		copy(ss.last[:], r.bytes(16, "last"))
		ss.updatedAt = r.varint("updated")
		if r.err == nil && ss.next < ss.from {
			r.fail("session range")
		}
	}
	nd := r.count(21, "docs")
	s.docs = make([]DocInfo, nd)
	per := make([]uint64, ns)
	var t int64
	for i := range nd {
		d := &s.docs[i]
		ref := r.uvarint("doc session")
		if r.err == nil && ref >= uint64(ns) {
			r.fail("doc session")
		}
		if r.err != nil {
			return nil, r.err
		}
		d.Session = uint32(ref)
		per[ref]++
		copy(d.Event[:], r.bytes(16, "event"))
		kr := r.bytes(2, "kind")
		if kr != nil {
			d.Kind, d.Role = kr[0], kr[1]
		}
		t += r.varint("time")
		d.Time = t
		n := r.uvarint("len")
		if n > 1<<31 {
			r.fail("len")
		}
		d.Len = uint32(n)
	}
	for i := range ns {
		if r.err == nil && per[i] != s.sessions[i].next-s.sessions[i].from {
			r.fail("session document count")
		}
	}
	nt := r.count(4, "terms")
	prev := ""
	for range nt {
		shared := r.uvarint("shared")
		if r.err == nil && shared > uint64(len(prev)) {
			r.fail("term prefix")
		}
		suf := r.bytes(r.uvarint("suffix"), "term")
		if r.err != nil {
			return nil, r.err
		}
		term := prev[:shared] + string(suf)
		if term <= prev && len(s.terms) > 0 || len(term) == 0 || len(term) > 4*MaxTokenBytes {
			r.fail("term order")
			return nil, r.err
		}
		np := r.count(1, "postings")
		ps := make([]uint32, 0, 2*np)
		doc := uint64(0)
		for k := range np {
			v := r.uvarint("doc")
			delta := v >> 1
			if k > 0 && delta == 0 {
				r.fail("doc order")
			}
			doc += delta
			tf := uint64(1)
			if v&1 == 1 {
				tf = r.uvarint("tf") + 2
			}
			if r.err == nil && (doc >= uint64(nd) || tf == 0 || tf > 1<<31) {
				r.fail("posting")
			}
			if r.err != nil {
				return nil, r.err
			}
			ps = append(ps, uint32(doc), uint32(tf))
		}
		s.terms = append(s.terms, term)
		s.posts = append(s.posts, ps)
		prev = term
	}
	if r.err == nil && r.off != len(body) {
		r.fail("bytes after the terms")
	}
	if r.err != nil {
		return nil, r.err
	}
	return s, nil
}

// apply adds the segment to x: ErrDamaged if a session does not continue
// where x has it.
func (x *Index) apply(s *Segment) error {
	slot := make([]uint32, len(s.sessions))
	for i, ss := range s.sessions {
		if ss.from == 0 {
			slot[i] = x.NewSlot(ss.id, false)
		} else {
			sl, ok := x.current[ss.id]
			if !ok || x.Sessions[sl].Next != ss.from {
				return fmt.Errorf("%w: segment %d: a session does not continue the files before it", ErrDamaged, s.Seq)
			}
			slot[i] = sl
		}
	}
	base := uint32(len(x.Docs))
	for _, d := range s.docs {
		d.Session = slot[d.Session]
		x.Docs = append(x.Docs, d)
	}
	for i, t := range s.terms {
		add := s.posts[i] // the segment's own, of its exact length: kept as it is
		if base != 0 {
			for k := 0; k < len(add); k += 2 {
				add[k] += base
			}
		}
		if ps, ok := x.post[t]; ok {
			x.post[t] = append(ps, add...)
		} else {
			x.post[t] = add
		}
	}
	for i, ss := range s.sessions {
		se := &x.Sessions[slot[i]]
		se.Next, se.Last, se.UpdatedAt = ss.next, ss.last, ss.updatedAt
		x.savedNext[slot[i]] = ss.next
	}
	x.saved = len(x.Docs)
	x.segments = append(x.segments, s.Seq)
	x.generation = max(x.generation, s.Seq+1)
	return nil
}
