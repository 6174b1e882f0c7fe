package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
)

// The format constants are part of the on-disk format: never change them.
const (
	// slotSize is the size of each of the two header slots, at offsets 0
	// and slotSize.
	slotSize = 4096
	// recordsStart is where the record area begins.
	recordsStart = 2 * slotSize
	// frameHeader is the fixed part of a record frame.
	frameHeader = 32
	// bodyFixed is the fixed part of a record body: op, path length, offset.
	bodyFixed = 1 + 2 + 8
	// align is the alignment of every frame: its length is padded with
	// zeros to a multiple of it.
	align = 8
	// version is the format version this package writes and reads.
	version = 1
	// MaxPath is the longest path (or Forget prefix) a record holds.
	MaxPath = 4096
)

// magic starts every valid header slot.
var magic = [8]byte{'s', 's', 'j', 'o', 'u', 'r', 'n', 'l'}

// The sizes a journal file may have.
const (
	// DefaultSize is the size of a journal file when Options.Size is 0.
	DefaultSize = 64 << 20
	// MinSize is the smallest journal file Create makes: a quarter of it
	// is the largest group a session commits through the journal (a
	// larger one syncs its chunk itself), so a small journal only
	// checkpoints and bypasses more often.
	MinSize = 256 << 10
	// MaxSize is the largest journal file Create makes and Read reads:
	// the bound of every read of the format.
	MaxSize = 1 << 30
	// minTestSize is the smallest size tests may ask for (Options.small).
	minTestSize = recordsStart + 4096
)

// Op is what a record does.
type Op uint8

// The ops of a record. Their values are part of the format.
const (
	// OpWrite writes Data at Offset of the existing regular file Path.
	OpWrite Op = 1
	// OpForget makes every earlier record (smaller LSN) whose Path starts
	// with this record's Path obsolete: the caller has made those files
	// durable itself (or removed them). An empty Path forgets everything.
	OpForget Op = 2
)

func (o Op) String() string {
	switch o {
	case OpWrite:
		return "write"
	case OpForget:
		return "forget"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sum is the CRC-32C of b seeded with the file's salt, so that no record
// of another journal file validates in this one.
func sum(salt uint32, b []byte) uint32 { return crc32.Update(salt, castagnoli, b) }

// header is the content of a header slot.
//
//	off  size  field
//	  0     8  magic "ssjournl"
//	  8     4  version (1)
//	 12     4  salt: seeds every record's CRC-32C
//	 16    16  owner id
//	 32     8  seq: the slot with the greater seq wins
//	 40     8  size: the file's size, fixed at creation
//	 48     8  start offset: where replay starts (or, if no record fits
//	           there, recordsStart)
//	 56     8  start lsn: the lsn of the first record to replay
//	 64    16  boot: the first 16 bytes of the SHA-256 of the writer's
//	           boot id (vfs.FS.BootID) at creation, zeros if unknown
//	 80  4012  zeros
//	4092    4  CRC-32C (unseeded) of bytes 0..4092
type header struct {
	salt     uint32
	owner    [16]byte
	seq      uint64
	size     int64
	startOff int64
	startLSN uint64
	boot     [16]byte
}

func (h *header) encode() []byte {
	b := make([]byte, slotSize)
	copy(b, magic[:])
	le := binary.LittleEndian
	le.PutUint32(b[8:], version)
	le.PutUint32(b[12:], h.salt)
	copy(b[16:32], h.owner[:])
	le.PutUint64(b[32:], h.seq)
	le.PutUint64(b[40:], uint64(h.size))
	le.PutUint64(b[48:], uint64(h.startOff))
	le.PutUint64(b[56:], h.startLSN)
	copy(b[64:80], h.boot[:])
	le.PutUint32(b[slotSize-4:], crc32.Checksum(b[:slotSize-4], castagnoli))
	return b
}

// Causes of a *CorruptionError (the Err it wraps).
var (
	// ErrNoHeader: neither header slot is valid.
	ErrNoHeader = errors.New("journal: no valid header")
	// ErrBadRecord: a record frame is damaged (checksum, bounds, fields).
	ErrBadRecord = errors.New("journal: damaged record")
	// ErrLostRecord: the log ends at a record that is not there or
	// damaged, and a record of a later commit group follows elsewhere
	// in the file: a group that was durable is damaged.
	ErrLostRecord = errors.New("journal: damaged record before a later durable one")
)

// ErrUnsupportedVersion reports a header slot of a format version this
// package does not read.
var ErrUnsupportedVersion = errors.New("journal: unsupported format version")

// decodeHeader decodes a slot; a damaged slot is an error wrapping
// ErrNoHeader (what a torn header write leaves).
func decodeHeader(b []byte) (header, error) {
	var h header
	if len(b) < slotSize {
		return h, fmt.Errorf("%w: slot of %d bytes", ErrNoHeader, len(b))
	}
	b = b[:slotSize]
	le := binary.LittleEndian
	if crc32.Checksum(b[:slotSize-4], castagnoli) != le.Uint32(b[slotSize-4:]) {
		return h, fmt.Errorf("%w: slot checksum mismatch", ErrNoHeader)
	}
	if [8]byte(b[:8]) != magic {
		return h, fmt.Errorf("%w: bad magic", ErrNoHeader)
	}
	if v := le.Uint32(b[8:]); v != version {
		return h, fmt.Errorf("%w: %d", ErrUnsupportedVersion, v)
	}
	h.salt = le.Uint32(b[12:])
	copy(h.owner[:], b[16:32])
	h.seq = le.Uint64(b[32:])
	size, start := le.Uint64(b[40:]), le.Uint64(b[48:])
	h.startLSN = le.Uint64(b[56:])
	copy(h.boot[:], b[64:80])
	switch {
	case size < minTestSize || size > MaxSize || size%align != 0:
		return h, fmt.Errorf("%w: file size %d out of bounds", ErrNoHeader, size)
	case start < recordsStart || start >= size || start%align != 0:
		return h, fmt.Errorf("%w: start offset %d out of bounds", ErrNoHeader, start)
	case h.startLSN == 0:
		return h, fmt.Errorf("%w: start lsn 0", ErrNoHeader)
	}
	h.size, h.startOff = int64(size), int64(start)
	return h, nil
}

// BootHash is what a header records of the boot id id: the first 16
// bytes of its SHA-256, zeros for an unknown ("") one.
func BootHash(id string) [16]byte {
	var h [16]byte
	if id != "" {
		s := sha256.Sum256([]byte(id))
		copy(h[:], s[:16])
	}
	return h
}

// Record is one change a commit makes durable.
type Record struct {
	Op     Op
	Path   string // slash-separated, relative to the root (see checkPath)
	Offset int64  // OpWrite: where Data goes in Path
	Data   []byte // OpWrite: the bytes
}

// Entry is a record read back, with its log sequence number.
type Entry struct {
	LSN uint64
	At  int64 // offset of its frame in the journal file
	Record
}

// frame is a decoded record frame.
//
//	off  size  field
//	  0     4  hcrc: CRC-32C seeded with the salt of bytes 4..32
//	  4     4  dcrc: CRC-32C seeded with the salt of the body
//	  8     8  lsn
//	 16     8  first: lsn of the first record of the record's commit group
//	 24     4  count: records in the group (first .. first+count-1)
//	 28     4  len: body length
//	 32   len  body: op uint8 | path length uint16 | path | offset int64 | data
//	           zeros up to a multiple of 8
type frame struct {
	lsn, first uint64
	count      uint32
	size       int64 // whole frame with padding
	rec        Record
}

// frameSize is the length of the frame of a record with a path of p
// bytes and d bytes of data, padding included.
func frameSize(p, d int) int64 {
	n := int64(frameHeader + bodyFixed + p + d)
	return (n + align - 1) &^ (align - 1)
}

// ErrInvalidRecord reports a record Commit refuses: an unknown op, a bad
// path, a negative offset.
var ErrInvalidRecord = errors.New("journal: invalid record")

// checkPath checks a record's path: slash-separated, relative, with no
// empty, "." or ".." element and no NUL or backslash, at most MaxPath
// bytes. A Forget prefix may be empty and may end with a slash.
func checkPath(p string, prefix bool) error {
	if len(p) > MaxPath {
		return fmt.Errorf("%w: path of %d bytes, at most %d", ErrInvalidRecord, len(p), MaxPath)
	}
	if prefix {
		if p == "" {
			return nil
		}
		p = strings.TrimSuffix(p, "/")
	}
	if p == "" {
		return fmt.Errorf("%w: empty path", ErrInvalidRecord)
	}
	if strings.ContainsAny(p, "\x00\\") {
		return fmt.Errorf("%w: path %q holds a NUL or a backslash", ErrInvalidRecord, p)
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return fmt.Errorf("%w: path %q is not a clean relative path", ErrInvalidRecord, p)
		}
	}
	return nil
}

// checkRecord checks a record before it is encoded.
func checkRecord(r *Record) error {
	switch r.Op {
	case OpWrite:
		if r.Offset < 0 || r.Offset > MaxOffset-int64(len(r.Data)) {
			return fmt.Errorf("%w: offset %d of %d bytes", ErrInvalidRecord, r.Offset, len(r.Data))
		}
		return checkPath(r.Path, false)
	case OpForget:
		if r.Offset != 0 || len(r.Data) != 0 {
			return fmt.Errorf("%w: a forget record holds no offset or data", ErrInvalidRecord)
		}
		return checkPath(r.Path, true)
	}
	return fmt.Errorf("%w: op %d", ErrInvalidRecord, r.Op)
}

// MaxOffset bounds the end of a write record's data in its file.
const MaxOffset = 1 << 62

// appendFrame appends the frame of r (checked) to b, with its lsn, first
// and count fields and its hcrc left for sealFrame.
func appendFrame(b []byte, salt uint32, r *Record) []byte {
	start := len(b)
	size := frameSize(len(r.Path), len(r.Data))
	b = append(b, make([]byte, size)...)
	f := b[start:]
	body := f[frameHeader : frameHeader+bodyFixed+len(r.Path)+len(r.Data)]
	le := binary.LittleEndian
	body[0] = byte(r.Op)
	le.PutUint16(body[1:], uint16(len(r.Path)))
	copy(body[3:], r.Path)
	le.PutUint64(body[3+len(r.Path):], uint64(r.Offset))
	copy(body[bodyFixed+len(r.Path):], r.Data)
	le.PutUint32(f[4:], sum(salt, body))
	le.PutUint32(f[28:], uint32(len(body)))
	return b
}

// sealFrame sets the lsn, group and hcrc of the frame at the start of f
// and returns its size.
func sealFrame(f []byte, salt uint32, lsn, first uint64, count uint32) int64 {
	le := binary.LittleEndian
	le.PutUint64(f[8:], lsn)
	le.PutUint64(f[16:], first)
	le.PutUint32(f[24:], count)
	le.PutUint32(f[0:], sum(salt, f[4:frameHeader]))
	n := int64(frameHeader) + int64(le.Uint32(f[28:]))
	return (n + align - 1) &^ (align - 1)
}

// peekFrame checks the fixed header of the frame at the start of b,
// without its body: the cheap test of the scan for later records. It
// returns the frame's lsn, first and count and its size, or false.
func peekFrame(b []byte, salt uint32) (lsn, first uint64, count uint32, size int64, ok bool) {
	if len(b) < frameHeader {
		return 0, 0, 0, 0, false
	}
	le := binary.LittleEndian
	lsn, first, count = le.Uint64(b[8:]), le.Uint64(b[16:]), le.Uint32(b[24:])
	n := int64(le.Uint32(b[28:]))
	if count == 0 || lsn < first || lsn-first >= uint64(count) || n < bodyFixed {
		return 0, 0, 0, 0, false
	}
	size = (int64(frameHeader) + n + align - 1) &^ (align - 1)
	if size > int64(len(b)) || le.Uint32(b[0:]) != sum(salt, b[4:frameHeader]) {
		return 0, 0, 0, 0, false
	}
	return lsn, first, count, size, true
}

// decodeFrame decodes the frame at the start of b (the bytes up to the
// end of the file), which must be whole and valid: its checksums, its
// bounds, its op and path. The returned record's Path and Data alias b.
func decodeFrame(b []byte, salt uint32) (frame, error) {
	var fr frame
	lsn, first, count, size, ok := peekFrame(b, salt)
	if !ok {
		return fr, fmt.Errorf("%w: bad frame header", ErrBadRecord)
	}
	le := binary.LittleEndian
	n := int(le.Uint32(b[28:]))
	body := b[frameHeader : frameHeader+n]
	if le.Uint32(b[4:]) != sum(salt, body) {
		return fr, fmt.Errorf("%w: body checksum mismatch", ErrBadRecord)
	}
	for _, c := range b[frameHeader+n : size] {
		if c != 0 {
			return fr, fmt.Errorf("%w: nonzero padding", ErrBadRecord)
		}
	}
	pl := int(le.Uint16(body[1:]))
	if bodyFixed+pl > n {
		return fr, fmt.Errorf("%w: path of %d bytes in a body of %d", ErrBadRecord, pl, n)
	}
	r := Record{
		Op:     Op(body[0]),
		Path:   string(body[3 : 3+pl]),
		Offset: int64(le.Uint64(body[3+pl:])),
		Data:   body[bodyFixed+pl : n : n],
	}
	if err := checkRecord(&r); err != nil {
		return fr, fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	return frame{lsn: lsn, first: first, count: count, size: size, rec: r}, nil
}

// crc32Checksum is the unseeded CRC-32C of a header slot.
func crc32Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
