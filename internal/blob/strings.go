package blob

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// String blobs
//
// A record that holds a JSON string of at least a threshold's bytes (its
// form between the quotes, escapes as they are) may be stored split
// (PutSplit): each such string as a blob of its own, named by the
// SHA-256 of its bytes (a "string blob", a blob like any other), and the
// record as a "split blob" under the record's digest, whose file is
//
//	a zstd skippable frame (magic 0x184D2A5E, then its payload's length
//	as 4 bytes little-endian) holding the string table:
//	  "SSTR", version 1,
//	  the count of strings (uvarint),
//	  for each string, in order: where it goes in the skeleton (uvarint,
//	  from the previous string's place), its length (uvarint), its
//	  SHA-256 (32 bytes),
//	  the CRC-32C (Castagnoli) of the bytes above, 4 bytes little-endian;
//	then one zstd frame of the skeleton: the record with those strings'
//	bytes taken out (their quotes stay).
//
// A reader puts each string back at its place and checks the whole
// record against the record's digest, so a split record reads back byte
// for byte as the record appended. The same string in many records (a
// screenshot sent again with every request) is stored once. A zstd
// decoder that knows nothing of the table skips it and returns the
// skeleton. Split blobs are written only in sessions of format 3 and
// later (the store's session.json).
//
// Durability: PutSplit makes every string blob durable, then the split
// blob: a split blob on disk names only strings that are there. GC
// (Sweep) keeps the strings of every split blob it keeps.

// Ref is one string of a split record: its place in the skeleton, its
// length, and its SHA-256.
type Ref struct {
	At     int64 // offset in the skeleton where the string's bytes go
	Size   int64
	Digest [32]byte
}

// MinString is the shortest string Strings splits out: a string table
// entry costs some 40 bytes, and a blob file more.
const MinString = 64

const (
	skippableMagic = 0x184D2A5E // a zstd skippable frame (0x184D2A50 to 5F)
	tableIdent     = "SSTR"
	tableVersion   = 1
	// maxTable bounds a string table's payload: a record of MaxRecordSize
	// holds at most MaxRecordSize/MinString strings of MinString bytes,
	// each taking at most 10+10+32 bytes.
	maxTable = 5 + 10 + MaxRecordSize/MinString*(10+10+32) + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Strings returns the JSON strings of rec (a record: JSON text) of at
// least min bytes between their quotes, each with its SHA-256, in order;
// At is the offset of the string's first byte in the skeleton that
// Skeleton makes of rec (its offset in rec less the bytes of the strings
// before it). min below MinString is MinString. It scans rec once, with
// no recursion; bytes that are not JSON are scanned as they come (a
// record reaching the store is valid JSON).
func Strings(rec []byte, min int) []Ref {
	min = max(min, MinString)
	if len(rec) < min+2 {
		return nil
	}
	var refs []Ref
	var taken int64
	for i := 0; i < len(rec); i++ {
		if rec[i] != '"' {
			continue
		}
		start := i + 1
		j := start
		for j < len(rec) && rec[j] != '"' {
			if rec[j] == '\\' {
				j++
			}
			j++
		}
		if j > len(rec) {
			j = len(rec)
		}
		if n := j - start; n >= min {
			refs = append(refs, Ref{At: int64(start) - taken, Size: int64(n), Digest: sha256.Sum256(rec[start:j])})
			taken += int64(n)
		}
		i = j
	}
	return refs
}

// Skeleton returns rec with the strings of refs (from Strings of rec)
// taken out, appended to dst.
func Skeleton(dst, rec []byte, refs []Ref) []byte {
	var from, taken int64
	for _, r := range refs {
		at := r.At + taken // in rec
		dst = append(dst, rec[from:at]...)
		from = at + r.Size
		taken += r.Size
	}
	return append(dst, rec[from:]...)
}

// appendTable appends the skippable frame of refs' string table to dst.
func appendTable(dst []byte, refs []Ref) []byte {
	payload := append([]byte(tableIdent), tableVersion)
	payload = binary.AppendUvarint(payload, uint64(len(refs)))
	var prev int64
	for _, r := range refs {
		payload = binary.AppendUvarint(payload, uint64(r.At-prev))
		payload = binary.AppendUvarint(payload, uint64(r.Size))
		payload = append(payload, r.Digest[:]...)
		prev = r.At
	}
	payload = binary.LittleEndian.AppendUint32(payload, crc32.Checksum(payload, castagnoli))
	dst = binary.LittleEndian.AppendUint32(dst, skippableMagic)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// EncodeSplit returns the split blob file of rec, whose strings refs
// (Strings) are stored apart, appended to dst.
func EncodeSplit(rec []byte, refs []Ref, dst []byte) []byte {
	dst = appendTable(dst, refs)
	return Encode(Skeleton(nil, rec, refs), dst)
}

// errNotSplit is parseTable's answer for a file without a string table.
var errNotSplit = errors.New("not a split blob")

// IsSplit reports whether the stored blob b (or its first 4 bytes) is a
// split blob: it starts with a skippable frame.
func IsSplit(b []byte) bool {
	return len(b) >= 4 && binary.LittleEndian.Uint32(b) == skippableMagic
}

// parseTable reads the string table at the start of the stored blob b,
// of a record of size bytes, and returns the strings and the bytes
// after the table (the skeleton's frame). A blob without one is
// errNotSplit; a damaged table, or one whose strings do not fit the
// record, is an error saying why (the caller names the file). With size
// negative the record's size is not known, and only the table's own
// bounds are checked.
func parseTable(b []byte, size int64) ([]Ref, []byte, error) {
	if !IsSplit(b) {
		return nil, b, errNotSplit
	}
	if len(b) < 8 {
		return nil, nil, errors.New("string table cut short")
	}
	n := int64(binary.LittleEndian.Uint32(b[4:]))
	if n > maxTable || n < int64(len(tableIdent))+1+1+4 {
		return nil, nil, fmt.Errorf("string table of %d bytes out of range", n)
	}
	if int64(len(b)-8) < n {
		return nil, nil, fmt.Errorf("string table of %d bytes cut short at %d", n, len(b)-8)
	}
	payload, rest := b[8:8+n], b[8+n:]
	body := payload[:len(payload)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(payload[len(payload)-4:]) {
		return nil, nil, errors.New("string table checksum mismatch")
	}
	if string(body[:len(tableIdent)]) != tableIdent || body[len(tableIdent)] != tableVersion {
		return nil, nil, fmt.Errorf("string table of unknown kind %q version %d", body[:len(tableIdent)], body[len(tableIdent)])
	}
	p := body[len(tableIdent)+1:]
	count, k := binary.Uvarint(p)
	if k <= 0 || count > uint64(len(p))/(1+1+32) {
		return nil, nil, errors.New("string table count out of range")
	}
	p = p[k:]
	refs := make([]Ref, 0, count)
	var at, total int64
	for range count {
		delta, k1 := binary.Uvarint(p)
		if k1 <= 0 {
			return nil, nil, errors.New("string table entry cut short")
		}
		sz, k2 := binary.Uvarint(p[k1:])
		if k2 <= 0 || len(p[k1+k2:]) < 32 {
			return nil, nil, errors.New("string table entry cut short")
		}
		if delta > MaxRecordSize || sz < MinString || sz > MaxRecordSize {
			return nil, nil, errors.New("string table entry out of range")
		}
		at += int64(delta)
		total += int64(sz)
		if at > MaxRecordSize || total > MaxRecordSize {
			return nil, nil, errors.New("string table entry out of range")
		}
		var d [32]byte
		copy(d[:], p[k1+k2:])
		refs = append(refs, Ref{At: at, Size: int64(sz), Digest: d})
		p = p[k1+k2+32:]
	}
	if len(p) != 0 {
		return nil, nil, errors.New("string table has bytes after its entries")
	}
	if size >= 0 {
		skel := size - total
		if skel < 0 || at > skel {
			return nil, nil, fmt.Errorf("string table's %d bytes of strings do not fit a record of %d bytes", total, size)
		}
	}
	return refs, rest, nil
}

// Refs returns the string table of the stored blob b (nil for a blob
// that is not split), or why it cannot be read.
func Refs(b []byte) ([]Ref, error) {
	refs, _, err := parseTable(b, -1)
	if errors.Is(err, errNotSplit) {
		return nil, nil
	}
	return refs, err
}

// FileRefs reads the string table of blob d's file under session
// directory dir, reading only the table: nil for a blob that is not
// split. A damaged table is a *corrupt.Error naming the file.
func FileRefs(fsys vfs.FS, dir string, d [32]byte) ([]Ref, error) {
	path := layout.BlobPath(dir, d)
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return TableRefs(path, func(off, n int64) ([]byte, error) {
		b := make([]byte, n)
		k, err := f.ReadAt(b, off)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		return b[:k], err
	})
}

// TableRefs reads the string table of the stored blob named name (a file
// or an object key) through read, which returns up to n bytes from off
// (fewer at the end), reading only the table: nil for a blob that is not
// split (or too short to be). A damaged table is a *corrupt.Error naming
// name; read's error is returned as it is.
func TableRefs(name string, read func(off, n int64) ([]byte, error)) ([]Ref, error) {
	head, err := read(0, 8)
	if err != nil {
		return nil, err
	}
	if len(head) < 8 || !IsSplit(head) {
		return nil, nil // too short to be split: a read reports what it is
	}
	n := int64(binary.LittleEndian.Uint32(head[4:]))
	if n > maxTable {
		return nil, corrupt.Errorf(name, 4, "string table of %d bytes out of range", n)
	}
	b, err := read(0, 8+n)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) < 8+n {
		return nil, corrupt.Errorf(name, 0, "string table: %d of its %d bytes", len(b), 8+n)
	}
	refs, err := Refs(b)
	if err != nil {
		return nil, corrupt.Errorf(name, 0, "%v", err)
	}
	return refs, nil
}

// StringSource returns the bytes of a split record's string r, verified
// against r's digest and size: the session's string blob (Read), or, for
// a remote session, one fetched first.
type StringSource func(r Ref) ([]byte, error)

// decodeSplit decodes the split blob b (its string table parsed: refs,
// then the skeleton's frame skel) of a record of size bytes with digest
// d, read from path, taking its strings from src, and verifies the
// record. Every refusal of the blob itself is a *corrupt.Error naming
// path; a string's is src's (naming the string blob).
func decodeSplit(path string, refs []Ref, skel []byte, d [32]byte, size int64, src StringSource) ([]byte, error) {
	if src == nil {
		return nil, corrupt.Errorf(path, 0, "a split blob, read without its strings")
	}
	var total int64
	for _, r := range refs {
		total += r.Size
	}
	skelSize := size - total
	s, err := decodeFrame(path, skel, skelSize)
	if err != nil {
		return nil, err
	}
	if int64(len(s)) != skelSize {
		return nil, corrupt.Errorf(path, 0, "split blob's skeleton holds %d bytes, its table says %d", len(s), skelSize)
	}
	rec := make([]byte, 0, size)
	var from int64
	for _, r := range refs {
		rec = append(rec, s[from:r.At]...)
		str, err := src(r)
		if err != nil {
			return nil, err
		}
		if int64(len(str)) != r.Size {
			return nil, corrupt.Errorf(path, 0, "string sha256:%x holds %d bytes, the table says %d", r.Digest, len(str), r.Size)
		}
		rec = append(rec, str...)
		from = r.At
	}
	rec = append(rec, s[from:]...)
	if sha256.Sum256(rec) != d || int64(len(rec)) != size {
		return nil, corrupt.Errorf(path, 0, "split blob's record does not match its digest sha256:%x (%d bytes)", d, size)
	}
	return rec, nil
}

// LocalStrings is the StringSource of the string blobs under session
// directory dir.
func LocalStrings(fsys vfs.FS, dir string) StringSource {
	return func(r Ref) ([]byte, error) { return Read(fsys, dir, r.Digest, r.Size) }
}

// Incomplete reports whether the blob d under session directory dir is
// absent, or split with a string absent: what a restored session's
// reader fetches. A damaged table is not incomplete (Read reports it).
func Incomplete(fsys vfs.FS, dir string, d [32]byte) bool {
	if Missing(fsys, dir, d) {
		return true
	}
	refs, err := FileRefs(fsys, dir, d)
	if err != nil {
		return false
	}
	for _, r := range refs {
		if Missing(fsys, dir, r.Digest) {
			return true
		}
	}
	return false
}
