package catalogue

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Stamp is what the file system says of a file that changes when it is
// written: its modification time (Unix nanoseconds) and size.
type Stamp struct{ MTime, Size int64 }

// StampOf is the stamp of the file info describes.
func StampOf(info fs.FileInfo) Stamp { return Stamp{info.ModTime().UnixNano(), info.Size()} }

func statStamp(fsys vfs.FS, path string) (Stamp, error) {
	info, err := fsys.Stat(path)
	if err != nil {
		return Stamp{}, err
	}
	return StampOf(info), nil
}

// Record kinds, the "k" member of every line.
const (
	KindHeader     = 'h' // snapshot and log Header: generation, directory stamp
	KindEntry      = 'e' // snapshot: a session's metadata and session.json's stamp
	KindUnreadable = 'u' // snapshot: a session.json that could not be read, and its stamp
	KindPending    = 'p' // log: the id's session.json is about to change
	KindCommit     = 'c' // log: it changed; the new metadata and stamp
)

// Record is one line of the catalogue: which members it has depends on
// its Kind.
type Record struct {
	Kind byte      // one of the Kind constants
	Dir  Stamp     // the sessions directory's stamp (header, log records)
	Gen  int64     // header
	ID   uuid.UUID // all but header
	File Stamp     // session.json's stamp (entry, unreadable, commit)
	Meta Meta      // entry, commit
}

func hasMeta(kind byte) bool { return kind == KindEntry || kind == KindCommit }

// AppendRecord appends r's framed line to dst. The members are, in
// order: k, dir, then gen (header) or id and file, then the metadata
// (entry, commit): created_at, updated_at, name, working_dir, model,
// labels (keys sorted), and then, each only when not zero (a zero one is
// never written, so that a line has one encoding): forked_from (session
// and event ids), parent_session, spawned_by, depth, encrypted, usage
// (the recorded token totals: events, through, then one array a model).
func AppendRecord(dst []byte, r Record) []byte {
	start := len(dst)
	dst = append(dst, `{"k":"`...)
	dst = append(dst, r.Kind)
	dst = append(dst, `","dir":[`...)
	dst = strconv.AppendInt(dst, r.Dir.MTime, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, r.Dir.Size, 10)
	dst = append(dst, ']')
	if r.Kind == KindHeader {
		dst = append(dst, `,"v":`...)
		dst = strconv.AppendInt(dst, format, 10)
		dst = append(dst, `,"gen":`...)
		dst = strconv.AppendInt(dst, r.Gen, 10)
		dst = append(dst, '}')
		return jsonl.SealTail(dst, start)
	}
	dst = append(dst, `,"id":"`...)
	dst = canonical.AppendUUID(dst, r.ID)
	dst = append(dst, `","file":[`...)
	dst = strconv.AppendInt(dst, r.File.MTime, 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, r.File.Size, 10)
	dst = append(dst, ']')
	if hasMeta(r.Kind) {
		m := r.Meta
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

// catParser decodes a line's members in the order AppendRecord writes
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

func (p *catParser) stamp() Stamp {
	p.lit("[")
	a := p.int()
	p.lit(",")
	b := p.int()
	p.lit("]")
	return Stamp{a, b}
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

// DecodeRecord decodes one line (without its newline), checking its
// frame and CRC and that it is the one encoding AppendRecord gives its
// record. Anything else (another format's header included) is an error.
// A record with metadata has its Meta.ID set to its id, and maps and
// pointers of its own.
func DecodeRecord(line []byte) (Record, error) {
	if err := jsonl.Verify(line); err != nil {
		return Record{}, err
	}
	p := catParser{b: line[:len(line)-jsonl.SuffixLen]}
	var r Record
	p.lit(`{"k":"`)
	if p.bad || p.i >= len(p.b) {
		return r, ErrUnusable
	}
	r.Kind = p.b[p.i]
	p.i++
	p.lit(`","dir":`)
	r.Dir = p.stamp()
	switch r.Kind {
	case KindHeader:
		p.lit(`,"v":`)
		if v := p.int(); v != format {
			p.bad = true
		}
		p.lit(`,"gen":`)
		r.Gen = p.int()
	case KindEntry, KindUnreadable, KindPending, KindCommit:
		p.lit(`,"id":"`)
		if p.bad || len(p.b)-p.i < 36 {
			return r, ErrUnusable
		}
		id, err := uuid.ParseBytes(p.b[p.i : p.i+36])
		var canon [36]byte
		if err != nil || !bytes.Equal(canonical.AppendUUID(canon[:0], id), p.b[p.i:p.i+36]) {
			return r, ErrUnusable // only the canonical form: one line, one encoding
		}
		r.ID = id
		p.i += 36
		p.lit(`","file":`)
		r.File = p.stamp()
		if hasMeta(r.Kind) {
			m := &r.Meta
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
		return r, ErrUnusable
	}
	if p.bad || p.i != len(p.b) {
		return r, ErrUnusable
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
	if m.Encrypted {
		dst = append(dst, `,"encrypted":true`...)
	}
	if u := m.Usage; u != nil {
		// [events,"through",[["model",messages,input,output,cache read,cache write],...]]
		dst = append(dst, `,"usage":[`...)
		dst = strconv.AppendInt(dst, u.Events, 10)
		dst = append(dst, `,"`...)
		dst = canonical.AppendUUID(dst, u.Through)
		dst = append(dst, `",[`...)
		for i, mu := range u.Models {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, '[')
			dst = appendCatString(dst, mu.Model)
			for _, n := range [...]int64{mu.Messages, mu.Input, mu.Output, mu.CacheRead, mu.CacheWrite} {
				dst = append(dst, ',')
				dst = strconv.AppendInt(dst, n, 10)
			}
			dst = append(dst, ']')
		}
		dst = append(dst, `]]`...)
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
	m.Encrypted = p.member(`,"encrypted":true`)
	if p.member(`,"usage":[`) {
		u := &Usage{Events: p.int()}
		p.lit(",")
		u.Through = p.uuid()
		p.lit(",[")
		for !p.bad && !p.peek(']') {
			if len(u.Models) > 0 {
				p.lit(",")
			}
			p.lit("[")
			mu := ModelUsage{Model: p.str()}
			for _, n := range [...]*int64{&mu.Messages, &mu.Input, &mu.Output, &mu.CacheRead, &mu.CacheWrite} {
				p.lit(",")
				*n = p.int()
			}
			p.lit("]")
			u.Models = append(u.Models, mu)
		}
		p.lit("]]")
		m.Usage = u
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

// Lines calls fn for each whole line of b (without its newline) and
// returns the offset after the last one.
func Lines(b []byte, fn func(line []byte) bool) int {
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
