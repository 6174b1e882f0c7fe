package eventline

import (
	"strconv"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/jsonl"
)

// Entry is one index line and the in-memory form of an event without its
// record: enough to walk the tree, render a timeline and find the record.
// It holds no pointers, so a session's index costs the garbage collector
// nothing to scan.
type Entry struct {
	Header
	Size    int64 // bytes of the record's compact JSON
	Blob    bool  // the record is stored in blobs/
	Preview Preview
	Digest  [32]byte // its SHA-256, for a blob
	Loc     Location
}

// NewEntry builds the index Entry of a record at loc, with the Preview of
// an inline record (p.Record); a blob's is empty (see preview.go).
func NewEntry(h Header, p Payload, loc Location) Entry {
	var pv Preview
	if !p.Blob {
		pv = PreviewOf(h.Kind, p.Record)
	}
	return EntryOf(h, p, loc, pv)
}

// EntryOf builds the index Entry of a record at loc with its Preview.
func EntryOf(h Header, p Payload, loc Location, pv Preview) Entry {
	return Entry{Header: h, Size: p.Size, Blob: p.Blob, Digest: p.Digest, Loc: loc, Preview: pv}
}

// SameRecord reports whether two entries describe the same record at the
// same place. The Preview is left out: an Entry rebuilt from its chunk
// line has none for a blob, nor has an index line written before previews.
func (e *Entry) SameRecord(o *Entry) bool {
	a, b := *e, *o
	a.Preview, b.Preview = Preview{}, Preview{}
	return a == b
}

// AppendIndex appends the framed index line of e to dst. The member
// order is part of the format. "preview" (see preview.go), after "digest",
// is written only when the Preview is not empty; index lines written
// before previews existed have none, and read with an empty one. A sealed
// Preview is written as "sealed_preview" in its place.
func AppendIndex(dst []byte, e *Entry) []byte {
	start := len(dst)
	obj := appendHeader(dst, &e.Header)
	obj = append(obj, `,"size":`...)
	obj = strconv.AppendInt(obj, e.Size, 10)
	if e.Blob {
		obj = append(obj, `,"digest":"`...)
		obj = canonical.AppendDigest(obj, e.Digest)
		obj = append(obj, '"')
	}
	obj = appendPreviewMember(obj, &e.Preview)
	obj = append(obj, `,"location":{"chunk":`...)
	obj = strconv.AppendUint(obj, uint64(e.Loc.Chunk), 10)
	obj = append(obj, `,"offset":`...)
	obj = strconv.AppendInt(obj, e.Loc.Offset, 10)
	obj = append(obj, `,"length":`...)
	obj = strconv.AppendUint(obj, uint64(e.Loc.Length), 10)
	obj = append(obj, "}}"...)
	return jsonl.SealTail(obj, start)
}

// DecodeIndex decodes one index line (without its newline) after
// checking its frame. The layout must be exactly the one AppendIndex
// writes.
func DecodeIndex(line []byte) (Entry, error) {
	if err := jsonl.Verify(line); err != nil {
		return Entry{}, err
	}
	p := lineParser{b: line}
	e := Entry{Header: p.header()}
	p.lit(`,"size":`)
	e.Size = p.int(MaxRecordSize)
	if p.maybe(`,"digest":"`) {
		e.Blob = true
		e.Digest = p.digest()
		p.lit(`"`)
	}
	if p.maybe(`,"preview":"`) {
		e.Preview = p.previewValue()
	} else if p.maybe(`,"sealed_preview":"`) {
		e.Preview = p.sealedPreviewValue()
	}
	p.lit(`,"location":{"chunk":`)
	e.Loc.Chunk = uint32(p.int(1<<31 - 1))
	p.lit(`,"offset":`)
	e.Loc.Offset = p.int(1 << 62)
	p.lit(`,"length":`)
	e.Loc.Length = uint32(p.int(MaxChunkLine + 1))
	p.lit(`}`)
	if p.err == nil && p.pos != recordEnd(line) {
		p.fail("unexpected data after location")
	}
	if p.err == nil && e.Loc.Length == 0 {
		p.fail("zero record length")
	}
	if lineMax := int64(MaxLineOverhead) + inlineSize(e); p.err == nil && int64(e.Loc.Length) > lineMax+1 {
		// Its chunk line holds the record (inline) and a bounded rest: a
		// longer one is no line of this Entry, and is not read.
		p.fail("record line of %d bytes for a record of %d", e.Loc.Length, e.Size)
	}
	if p.err != nil {
		return Entry{}, p.err
	}
	return e, nil
}

// inlineSize is the size of the record an entry's chunk line holds: its
// record's for an inline one, none for a blob's.
func inlineSize(e Entry) int64 {
	if e.Blob {
		return 0
	}
	return e.Size
}
