package seal

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"slices"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// RecordFormat is the format of the key records this package writes.
const RecordFormat = 1

// Limits of a key record.
const (
	MaxRecordSize = 8 << 10 // bytes of the file, its newline included
	MaxKeys       = 8       // data keys in one record
	MaxKeyIDLen   = 200     // bytes of a key-encryption key's id
	MaxWrappedLen = 512     // bytes of a wrapped data key
)

// Record is a session's key record: its data keys, each wrapped under a
// key-encryption key. The newest generation seals new pieces; older ones
// still open what they sealed until a re-encryption has rewritten it.
type Record struct {
	Session uuid.UUID
	Keys    []WrappedKey // by generation, oldest first
}

// WrappedKey is one data key of a record.
type WrappedKey struct {
	Gen     uint32 // 1 for a session's first key, one more for each new one
	KeyID   string // the key-encryption key it is wrapped under
	Wrapped []byte // the data key, as the KeyProvider wrapped it
}

// Current returns the newest key of r.
func (r Record) Current() WrappedKey { return r.Keys[len(r.Keys)-1] }

// Key returns the key of generation gen, and false if r has none.
func (r Record) Key(gen uint32) (WrappedKey, bool) {
	i := slices.IndexFunc(r.Keys, func(k WrappedKey) bool { return k.Gen == gen })
	if i < 0 {
		return WrappedKey{}, false
	}
	return r.Keys[i], true
}

// The JSON forms, fields in their canonical order.
type jsonRecord struct {
	Format    int       `json:"format"`
	Session   string    `json:"session"`
	Algorithm string    `json:"algorithm"`
	Keys      []jsonKey `json:"keys"`
	CRC       string    `json:"crc,omitempty"`
}

type jsonKey struct {
	Gen     uint32 `json:"gen"`
	KEK     string `json:"kek"`
	Wrapped string `json:"wrapped"`
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Check reports what makes r unfit for a record, nil if nothing.
func (r Record) Check() error {
	if len(r.Keys) == 0 || len(r.Keys) > MaxKeys {
		return fmt.Errorf("%d keys, not 1 to %d", len(r.Keys), MaxKeys)
	}
	for i, k := range r.Keys {
		if k.Gen == 0 || (i > 0 && k.Gen <= r.Keys[i-1].Gen) {
			return fmt.Errorf("generations must rise from 1: key %d has %d", i, k.Gen)
		}
		if err := CheckKeyID(k.KeyID); err != nil {
			return err
		}
		if len(k.Wrapped) == 0 || len(k.Wrapped) > MaxWrappedLen {
			return fmt.Errorf("a wrapped key of %d bytes, not 1 to %d", len(k.Wrapped), MaxWrappedLen)
		}
	}
	return nil
}

// CheckKeyID reports a key-encryption key id a record cannot hold: empty,
// longer than MaxKeyIDLen, or with a byte that is not printable ASCII or
// is one of " \ < > & (so that its JSON form is itself).
func CheckKeyID(id string) error {
	if id == "" || len(id) > MaxKeyIDLen {
		return fmt.Errorf("a key id of %d bytes, not 1 to %d", len(id), MaxKeyIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x21 || c > 0x7e || bytes.IndexByte([]byte(`"\<>&`), c) >= 0 {
			return fmt.Errorf("key id %q: byte %d is not printable ASCII other than \" \\ < > &", id, i)
		}
	}
	return nil
}

// EncodeRecord returns the file form of r: one line of canonical JSON
// ending with the CRC-32C (Castagnoli) of the object before its crc
// member, and a newline.
func EncodeRecord(r Record) ([]byte, error) {
	if err := r.Check(); err != nil {
		return nil, fmt.Errorf("seal: key record of session %s: %w", r.Session, err)
	}
	j := jsonRecord{Format: RecordFormat, Session: r.Session.String(), Algorithm: Algorithm}
	for _, k := range r.Keys {
		j.Keys = append(j.Keys, jsonKey{Gen: k.Gen, KEK: k.KeyID, Wrapped: base64.StdEncoding.EncodeToString(k.Wrapped)})
	}
	body, err := json.Marshal(j)
	if err != nil {
		return nil, err
	}
	out := body[:len(body)-1]
	out = fmt.Appendf(out, `,"crc":"%08x"}`+"\n", crc32.Checksum(body, crcTable))
	return out, nil
}

// DecodeRecord parses the file form b of session's key record, read
// from path (for errors). Anything but the exact form EncodeRecord
// writes, for that session, is a *corrupt.Error.
func DecodeRecord(path string, session uuid.UUID, b []byte) (Record, error) {
	bad := func(format string, args ...any) (Record, error) {
		return Record{}, corrupt.Errorf(path, 0, "key record: "+format, args...)
	}
	if len(b) > MaxRecordSize {
		return bad("%d bytes, more than %d", len(b), MaxRecordSize)
	}
	line, ok := bytes.CutSuffix(b, []byte("\n"))
	if !ok || bytes.IndexByte(line, '\n') >= 0 {
		return bad("not one line ending with a newline")
	}
	var j jsonRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return bad("%v", err)
	}
	if dec.More() {
		return bad("bytes after the object")
	}
	if j.Format != RecordFormat {
		return bad("format %d, not %d", j.Format, RecordFormat)
	}
	if j.Algorithm != Algorithm {
		return bad("algorithm %q, not %q", j.Algorithm, Algorithm)
	}
	id, err := uuid.Parse(j.Session)
	if err != nil || id.String() != j.Session {
		return bad("session %q is not an id in canonical form", j.Session)
	}
	if id != session {
		return bad("the record of session %s, not %s", id, session)
	}
	r := Record{Session: id}
	for _, k := range j.Keys {
		w, err := base64.StdEncoding.Strict().DecodeString(k.Wrapped)
		if err != nil {
			return bad("key %d: wrapped: %v", k.Gen, err)
		}
		r.Keys = append(r.Keys, WrappedKey{Gen: k.Gen, KeyID: k.KEK, Wrapped: w})
	}
	want, err := EncodeRecord(r)
	if err != nil {
		return bad("%v", errors.Unwrap(err))
	}
	if !bytes.Equal(want, b) {
		// Same fields, other bytes: a wrong CRC, or a form other than
		// the canonical one (spacing, escapes, member order).
		return bad("not the canonical form of its fields, or its crc does not match")
	}
	return r, nil
}

// ReadRecord reads and decodes the key record at path, never more than
// MaxRecordSize+1 bytes of it (a longer one is damage). A missing file is an error matching
// fs.ErrNotExist.
func ReadRecord(fsys vfs.FS, path string, session uuid.UUID) (Record, error) {
	b, err := vfs.ReadFileLimit(fsys, path, MaxRecordSize)
	if errors.Is(err, vfs.ErrTooLarge) {
		return Record{}, corrupt.Errorf(path, 0, "key record: more than %d bytes", MaxRecordSize)
	}
	if err != nil {
		return Record{}, err
	}
	return DecodeRecord(path, session, b)
}

// WriteRecord replaces the key record name in dir with r, atomically and
// durably (internal/durable.ReplaceFile).
func WriteRecord(fsys vfs.FS, dir, name string, r Record, perm os.FileMode) error {
	b, err := EncodeRecord(r)
	if err != nil {
		return err
	}
	return durable.ReplaceFile(fsys, dir, name, b, perm)
}
