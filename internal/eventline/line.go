package eventline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/jsonl"
)

// Location addresses one framed record: the chunk number, the byte offset
// of the line in the chunk file and the line's length including its newline.
type Location struct {
	Chunk  uint32
	Offset int64
	Length uint32
}

// End is the offset just past the line.
func (l Location) End() int64 { return l.Offset + int64(l.Length) }

// TimeLayout is the on-disk timestamp format: RFC 3339 in UTC with
// nanoseconds, trailing zeros trimmed.
const TimeLayout = time.RFC3339Nano

// Header is what every line format says of an event besides its record, in
// a compact, pointer-free form (the in-memory index holds one per event).
type Header struct {
	ID, ParentID, BranchFrom uuid.UUID
	Time                     int64 // Unix nanoseconds
	Kind                     KindCode
	Role                     RoleCode
}

// appendHeader writes the members every line starts with, from "{" to the
// timestamp's closing quote. The member order is part of the format.
func appendHeader(dst []byte, h *Header) []byte {
	dst = append(dst, `{"id":"`...)
	dst = canonical.AppendUUID(dst, h.ID)
	dst = append(dst, `","parent_id":"`...)
	dst = canonical.AppendUUID(dst, h.ParentID)
	dst = append(dst, '"')
	if h.BranchFrom != uuid.Nil {
		dst = append(dst, `,"branch_from":"`...)
		dst = canonical.AppendUUID(dst, h.BranchFrom)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"kind":"`...)
	dst = append(dst, h.Kind.String()...)
	dst = append(dst, '"')
	if h.Role != 0 {
		dst = append(dst, `,"role":"`...)
		dst = append(dst, h.Role.String()...)
		dst = append(dst, '"')
	}
	dst = append(dst, `,"timestamp":"`...)
	dst = time.Unix(0, h.Time).UTC().AppendFormat(dst, TimeLayout)
	return append(dst, '"')
}

// Payload is how a chunk line holds its record: inline, or as a blob
// reference (digest and size, with "record":null).
type Payload struct {
	Record []byte // compact JSON; nil for a blob
	Blob   bool
	Digest [32]byte // SHA-256 of the record, for a blob
	Size   int64    // length of the record's compact JSON
	// ParentAt is where the parent's line is (format 2; zero Length when
	// the line names none): Load follows these from HEAD without the index.
	ParentAt Location
}

// Inline returns the Payload of a record stored in the chunk line.
func Inline(rec []byte) Payload { return Payload{Record: rec, Size: int64(len(rec))} }

// AppendEvent appends the framed chunk line of an event to dst. The
// member order is part of the format:
//
//	{header...,"record":<json>,"crc":"…"}                              inline
//	{header...,"digest":"sha256:<hex>","size":<n>,"record":null,"crc":"…"}  blob
//
// In format 2 the line of an event with a parent also holds, after the
// header, the location of the parent's line: its chunk, offset and length,
// as in the index (`,"parent_loc":[3,81920,412]`).
func AppendEvent(dst []byte, h *Header, p Payload) []byte {
	start := len(dst)
	obj := appendHeader(dst, h)
	if p.ParentAt.Length != 0 {
		obj = append(obj, `,"parent_loc":[`...)
		obj = strconv.AppendUint(obj, uint64(p.ParentAt.Chunk), 10)
		obj = append(obj, ',')
		obj = strconv.AppendInt(obj, p.ParentAt.Offset, 10)
		obj = append(obj, ',')
		obj = strconv.AppendUint(obj, uint64(p.ParentAt.Length), 10)
		obj = append(obj, ']')
	}
	if p.Blob {
		obj = append(obj, `,"digest":"`...)
		obj = canonical.AppendDigest(obj, p.Digest)
		obj = append(obj, `","size":`...)
		obj = strconv.AppendInt(obj, p.Size, 10)
		obj = append(obj, `,"record":null}`...)
	} else {
		obj = append(obj, `,"record":`...)
		obj = append(obj, p.Record...)
		obj = append(obj, '}')
	}
	return jsonl.SealTail(obj, start)
}

// lineParser reads a line in the exact layout the store writes. Decoding is
// positional: members must come in format order with no whitespace, so a
// line is accepted only in its canonical form. The first error sticks.
type lineParser struct {
	b   []byte
	pos int
	err error
}

func (p *lineParser) fail(format string, args ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("at byte %d: %s", p.pos, fmt.Sprintf(format, args...))
	}
}

// lit consumes s or fails.
func (p *lineParser) lit(s string) {
	if p.err != nil {
		return
	}
	if !bytes.HasPrefix(p.b[p.pos:], []byte(s)) {
		p.fail("expected %q", s)
		return
	}
	p.pos += len(s)
}

// maybe consumes s if it comes next.
func (p *lineParser) maybe(s string) bool {
	if p.err != nil || !bytes.HasPrefix(p.b[p.pos:], []byte(s)) {
		return false
	}
	p.pos += len(s)
	return true
}

// uuid consumes a canonical lower-case uuid.
func (p *lineParser) uuid() uuid.UUID {
	if p.err != nil {
		return uuid.Nil
	}
	if len(p.b)-p.pos < 36 {
		p.fail("truncated uuid")
		return uuid.Nil
	}
	id, err := canonical.ParseUUID(p.b[p.pos : p.pos+36])
	if err != nil {
		p.fail("%v", err)
		return uuid.Nil
	}
	p.pos += 36
	return id
}

// token consumes bytes up to (not including) the next quote.
func (p *lineParser) token() []byte {
	if p.err != nil {
		return nil
	}
	i := bytes.IndexByte(p.b[p.pos:], '"')
	if i < 0 {
		p.fail("unterminated string")
		return nil
	}
	t := p.b[p.pos : p.pos+i]
	p.pos += i
	return t
}

// int consumes a canonical non-negative decimal integer up to max.
func (p *lineParser) int(max int64) int64 {
	if p.err != nil {
		return 0
	}
	start := p.pos
	var n int64
	for p.pos < len(p.b) && p.b[p.pos] >= '0' && p.b[p.pos] <= '9' {
		d := int64(p.b[p.pos] - '0')
		if d > max || n > (max-d)/10 { // n*10+d > max, checked without overflowing
			p.fail("integer %s out of range", p.b[start:p.pos+1])
			return 0
		}
		n = n*10 + d
		p.pos++
	}
	switch {
	case p.pos == start:
		p.fail("expected an integer")
	case p.pos-start > 1 && p.b[start] == '0':
		p.fail("integer with a leading zero")
	}
	return n
}

// Location consumes the three numbers of a Location, comma-separated.
func (p *lineParser) location() Location {
	var l Location
	l.Chunk = uint32(p.int(1<<31 - 1))
	p.lit(`,`)
	l.Offset = p.int(1 << 62)
	p.lit(`,`)
	l.Length = uint32(p.int(1<<32 - 1))
	return l
}

// header consumes the members appendHeader writes.
func (p *lineParser) header() Header {
	var h Header
	p.lit(`{"id":"`)
	h.ID = p.uuid()
	p.lit(`","parent_id":"`)
	h.ParentID = p.uuid()
	p.lit(`"`)
	if p.maybe(`,"branch_from":"`) {
		h.BranchFrom = p.uuid()
		p.lit(`"`)
		if p.err == nil && (h.BranchFrom != h.ParentID || h.BranchFrom == uuid.Nil) {
			p.fail("branch_from differs from parent_id")
		}
	}
	if p.err == nil && h.ID == uuid.Nil {
		p.fail("nil event id")
	}
	p.lit(`,"kind":"`)
	if k := p.token(); p.err == nil {
		var ok bool
		if h.Kind, ok = KindCodeOf(k); !ok {
			p.fail("unknown kind %q", k)
		}
	}
	p.lit(`"`)
	if p.maybe(`,"role":"`) {
		if r := p.token(); p.err == nil {
			var ok bool
			if h.Role, ok = RoleCodeOf(r); !ok || h.Role == 0 {
				p.fail("unknown role %q", r)
			}
		}
		p.lit(`"`)
	}
	p.lit(`,"timestamp":"`)
	if ts := p.token(); p.err == nil {
		t, err := time.Parse(TimeLayout, string(ts))
		if err != nil {
			p.fail("%v", err)
		}
		h.Time = t.UnixNano()
	}
	p.lit(`"`)
	return h
}

// recordEnd is where the record ends in a framed line: the checksum suffix
// `,"crc":"xxxxxxxx"}` follows it.
func recordEnd(line []byte) int { return len(line) - jsonl.SuffixLen }

// DecodeEvent checks and splits a chunk line into its header and its
// Payload, whose record aliases line.
func DecodeEvent(line []byte) (Header, Payload, error) {
	return splitEvent(line, true)
}

// ReadEvent is DecodeEvent for a line the index located, on the
// read path (Load, Event): it checks the frame (CRC-32C) and the header but
// does not validate the record as JSON again. Every record was validated
// when it was appended, and every line of a chunk that was not indexed
// when it was written is decoded in full by the scan that indexes it
// (reconciliation), as Verify does for all; a line whose CRC-32C matches
// is, but for a one in 2^32 chance, the line written.
func ReadEvent(line []byte) (Header, Payload, error) {
	return splitEvent(line, false)
}

func splitEvent(line []byte, validate bool) (Header, Payload, error) {
	if err := jsonl.Verify(line); err != nil {
		return Header{}, Payload{}, err
	}
	p := lineParser{b: line}
	h := p.header()
	var pl Payload
	if p.maybe(`,"parent_loc":[`) {
		pl.ParentAt = p.location()
		p.lit(`]`)
		if p.err == nil && (h.ParentID == uuid.Nil || pl.ParentAt.Length == 0) {
			p.fail("parent_loc without a parent")
		}
	}
	if p.maybe(`,"digest":"`) {
		pl.Blob = true
		pl.Digest = p.digest()
		p.lit(`","size":`)
		pl.Size = p.int(MaxRecordSize)
		p.lit(`,"record":null`)
		if p.err == nil && p.pos != recordEnd(line) {
			p.fail("unexpected data after a blob reference")
		}
	} else {
		p.lit(`,"record":`)
	}
	if p.err != nil {
		return Header{}, Payload{}, p.err
	}
	if !pl.Blob {
		pl.Record = line[p.pos:recordEnd(line)]
		pl.Size = int64(len(pl.Record))
		if validate && !json.Valid(pl.Record) {
			return Header{}, Payload{}, errors.New("record is not valid JSON")
		}
	}
	return h, pl, nil
}

// digest consumes "sha256:" and 64 lower-case hex digits.
func (p *lineParser) digest() [32]byte {
	var d [32]byte
	p.lit(canonical.DigestPrefix)
	if p.err != nil {
		return d
	}
	if len(p.b)-p.pos < canonical.DigestHexLen {
		p.fail("truncated digest")
		return d
	}
	d, err := canonical.ParseDigestHex(p.b[p.pos : p.pos+canonical.DigestHexLen])
	if err != nil {
		p.fail("%v", err)
		return d
	}
	p.pos += canonical.DigestHexLen
	return d
}
