package deltalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"strconv"
	"strings"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Magic opens every segment file.
const Magic = "SSDELTA1"

// MaxRecord is the largest payload of a record: a delta larger than this
// (less its framing) is refused by the writer, and a length above it in a
// file is damage.
const MaxRecord = 1 << 20

// headerLen is the size of a record's length and checksum.
const headerLen = 8

// Record types.
const (
	TypeDelta   byte = 'd'
	TypeSettled byte = 's'
)

// Ext is the extension of a segment file.
const Ext = ".deltas"

// ErrTooLarge is returned by the writer for a delta whose record would
// exceed MaxRecord.
var ErrTooLarge = errors.New("delta record too large")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// SegmentName is the file name of segment gen.
func SegmentName(gen uint64) string { return fmt.Sprintf("%020d%s", gen, Ext) }

// ParseSegmentName returns the generation of a segment file name, or
// false for any other name.
func ParseSegmentName(name string) (uint64, bool) {
	digits, ok := strings.CutSuffix(name, Ext)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	gen, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || SegmentName(gen) != name {
		return 0, false
	}
	return gen, true
}

// Record is one decoded record.
type Record struct {
	Type   byte
	Event  [16]byte // TypeSettled: the event's id
	Kind   string   // TypeDelta
	CallID string   // TypeDelta
	Data   string   // TypeDelta
	Off    int64    // offset of the record in its file
	End    int64    // offset just past it
}

// AppendDelta appends the framed record of a delta to b.
func AppendDelta(b []byte, kind, callID, data string) ([]byte, error) {
	n := 1 + uvarintLen(len(kind)) + len(kind) + uvarintLen(len(callID)) + len(callID) + uvarintLen(len(data)) + len(data)
	if n > MaxRecord {
		return b, fmt.Errorf("%w: %d bytes, at most %d", ErrTooLarge, n, MaxRecord)
	}
	start := len(b)
	b = append(b, make([]byte, headerLen)...)
	b = append(b, TypeDelta)
	for _, s := range []string{kind, callID, data} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	seal(b[start:])
	return b, nil
}

// AppendSettled appends the framed record of a settled marker to b.
func AppendSettled(b []byte, id [16]byte) []byte {
	start := len(b)
	b = append(b, make([]byte, headerLen)...)
	b = append(b, TypeSettled)
	b = append(b, id[:]...)
	seal(b[start:])
	return b
}

// seal fills the header of a framed record whose payload follows it.
func seal(rec []byte) {
	p := rec[headerLen:]
	binary.LittleEndian.PutUint32(rec[0:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(rec[4:8], crc32.Checksum(p, castagnoli))
}

func uvarintLen(n int) int {
	var tmp [binary.MaxVarintLen64]byte
	return binary.PutUvarint(tmp[:], uint64(n))
}

// decode parses a payload whose checksum matched.
func decode(p []byte) (Record, error) {
	var r Record
	r.Type = p[0]
	rest := p[1:]
	switch r.Type {
	case TypeSettled:
		if len(rest) != 16 {
			return r, fmt.Errorf("settled marker of %d bytes, want 16", len(rest))
		}
		copy(r.Event[:], rest)
	case TypeDelta:
		var fields [3]string
		for i := range fields {
			n, k := binary.Uvarint(rest)
			if k <= 0 || n > uint64(len(rest)-k) {
				return r, fmt.Errorf("delta field %d has a bad length", i)
			}
			fields[i] = string(rest[k : k+int(n)])
			rest = rest[k+int(n):]
		}
		if len(rest) != 0 {
			return r, fmt.Errorf("%d bytes after a delta's fields", len(rest))
		}
		r.Kind, r.CallID, r.Data = fields[0], fields[1], fields[2]
	default:
		return r, fmt.Errorf("unknown record type %#x", r.Type)
	}
	return r, nil
}

// Result is what Scan read.
type Result struct {
	// End is the offset just past the last good record (or the magic):
	// where reading resumes.
	End int64
	// Torn is set when bytes follow End that do not make a whole record
	// (a record being written, or one a crash cut).
	Torn bool
}

// window is how much Scan reads at once: at least one whole record.
const window = 64 << 10

// Scan reads the segment at path from offset off (0: from the start, the
// magic included; otherwise the offset of a record) to its end, calling
// fn for each good record in order; an error from fn stops it and is
// returned. Damage (wrong magic, a length of 0 or above MaxRecord, a
// checksum or payload that does not match) stops it with a *corrupt.Error
// at the bad record's offset and Result.End at that offset. An incomplete
// record at the end stops it with no error and Result.Torn set. It holds
// at most MaxRecord+8 bytes of the file in memory at once.
func Scan(fsys vfs.FS, path string, off int64, fn func(Record) error) (Result, error) {
	f, err := fsys.OpenFile(path, 0, 0)
	if err != nil {
		return Result{End: off}, err
	}
	defer f.Close()
	return ScanFile(f, path, off, fn)
}

// ScanFile is Scan on an open file.
func ScanFile(f io.ReaderAt, path string, off int64, fn func(Record) error) (Result, error) {
	if off < 0 {
		return Result{}, corrupt.Errorf(path, off, "negative offset")
	}
	if off == 0 {
		var m [len(Magic)]byte
		n, err := f.ReadAt(m[:], 0)
		if n < len(m) {
			if err != nil && err != io.EOF {
				return Result{}, err
			}
			if string(m[:n]) != Magic[:n] {
				return Result{}, corrupt.Errorf(path, 0, "not a delta segment (bad magic)")
			}
			return Result{End: 0, Torn: n > 0}, nil
		}
		if string(m[:]) != Magic {
			return Result{}, corrupt.Errorf(path, 0, "not a delta segment (bad magic)")
		}
		off = int64(len(Magic))
	} else if off < int64(len(Magic)) {
		return Result{End: off}, corrupt.Errorf(path, off, "offset inside the magic")
	}
	buf := make([]byte, window)
	bufOff, bufLen := off, 0 // buf[:bufLen] holds the file from bufOff
	fill := func(at int64, need int) (int, error) {
		// Make buf hold at least need bytes from at, if the file has them.
		if at >= bufOff && at+int64(need) <= bufOff+int64(bufLen) {
			return need, nil
		}
		size := max(need, window)
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		n, err := f.ReadAt(buf, at)
		if err != nil && err != io.EOF {
			return 0, err
		}
		bufOff, bufLen = at, n
		return min(n, need), nil
	}
	for {
		n, err := fill(off, headerLen)
		if err != nil {
			return Result{End: off}, err
		}
		if n == 0 {
			return Result{End: off}, nil
		}
		if n < headerLen {
			return Result{End: off, Torn: true}, nil
		}
		h := buf[off-bufOff:]
		length := binary.LittleEndian.Uint32(h[0:4])
		sum := binary.LittleEndian.Uint32(h[4:8])
		if length == 0 || length > MaxRecord {
			if length == 0 && allZero(h[:headerLen]) {
				// Zeros where a record belongs: space a crash left
				// (a size that reached the disk before its data).
				return Result{End: off, Torn: true}, nil
			}
			return Result{End: off}, corrupt.Errorf(path, off, "record length %d outside 1..%d", length, MaxRecord)
		}
		total := headerLen + int(length)
		n, err = fill(off, total)
		if err != nil {
			return Result{End: off}, err
		}
		if n < total {
			return Result{End: off, Torn: true}, nil
		}
		rec := buf[off-bufOff : off-bufOff+int64(total)]
		p := rec[headerLen:]
		if crc32.Checksum(p, castagnoli) != sum {
			return Result{End: off}, corrupt.Errorf(path, off, "record checksum mismatch")
		}
		r, err := decode(p)
		if err != nil {
			return Result{End: off}, corrupt.Errorf(path, off, "%v", err)
		}
		r.Off, r.End = off, off+int64(total)
		if err := fn(r); err != nil {
			return Result{End: off}, err
		}
		off = r.End
	}
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
