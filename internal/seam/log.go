package seam

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/layout"
)

// Format is the version of the log's objects.
const Format = 1

// Kinds of log objects.
const (
	KindCreate  = "create"
	KindOpen    = "open"
	KindRelease = "release"
	KindDelete  = "delete"
	KindData    = "data"
	KindSeal    = "seal"
	KindMeta    = "meta"
	KindLanes   = "lanes"
	// KindDead is a tombstone: what a data object of a sealed chunk is
	// replaced by once no reader needs it (Tombstone). Its number stays
	// taken, so that no Create of it succeeds again.
	KindDead = "dead"
	// KindVoid fills a number a Store taking the session found free (a
	// Create of the previous holder in flight, or one that never landed)
	// or may find taken by such a Create: it holds nothing, and its
	// number stays taken, so that the previous holder's Create of it
	// fails (LogWriter.FillLocked).
	KindVoid = "void"
)

// Window is how many data objects a holder has in flight at most, unless
// its LogWriter says otherwise: it issues the Create of object k only
// once every object before k-Window is stored (LogWriter.PutData). A
// marker records the lease's (Header.Window), so that a reader knows how
// far past a free number the holder's own objects can lie while the
// number's Create is still in flight, and a Store taking the session how
// many numbers after its marker to fill.
const Window = 4

// MaxWindow bounds a writer's window, and the window a reader takes from
// a marker (a larger one is read as this).
const MaxWindow = 64

// Tombstone is the bytes a dead data object is replaced by: the same for
// every object of every session, a header of kind "dead" without a
// payload (132 bytes). Builds that predate it skip it as an object
// of a kind they do not know.
func Tombstone() []byte {
	b, err := EncodeObject(&Header{Kind: KindDead}, nil)
	if err != nil {
		panic(err) // a fixed header always encodes
	}
	return b
}

// IsMarker reports whether kind is a marker's: create, open, release or
// delete.
func IsMarker(kind string) bool {
	return kind == KindCreate || kind == KindOpen || kind == KindRelease || kind == KindDelete
}

// Header is the first line of a log object.
type Header struct {
	V     int       `json:"v"`
	Kind  string    `json:"kind"`
	Lease uuid.UUID `json:"lease"`          // the lease (one open of the session) that wrote it
	Store uuid.UUID `json:"store"`          // the Store that held the lease
	Chunk uint32    `json:"chunk,omitzero"` // data, seal
	Off   int64     `json:"off,omitzero"`   // data: where the payload goes in the chunk
	Len   int       `json:"len"`            // payload bytes
	CRC   uint32    `json:"crc"`            // CRC-32C of the payload
	Key   string    `json:"key,omitzero"`   // seal: the sealed chunk's object
	Size  int64     `json:"size,omitzero"`  // seal: the chunk's plain size
	Exits []Exit    `json:"exits,omitzero"` // seal: where paths leave the chunk (a hint, see Exit)
	State *State    `json:"state,omitzero"` // markers: the log's state before them
	// Window is, in a create or open marker, the most data objects its
	// lease has in flight (the Window of the build that wrote it); 0 for
	// builds before it, which had one.
	//
	// A marker carries forward the largest window of the leases before
	// it whose Creates may still be in flight (its own, or the one it
	// took the session from), so that a Store taking the session fills
	// enough numbers after its marker even after a lease of a smaller
	// window: a create, open or release marker records it.
	Window int `json:"window,omitzero"`
	// Fills is, in an open marker, how many numbers after it the Store
	// that wrote it filled with voids, or found taken by another lease's
	// late data (FillLocked): a reader skips another lease's object
	// there, and stops at one past them.
	Fills int `json:"fills,omitzero"`
	// Acked is the newest object its lease had stored with every one
	// before it when it issued this one's Create (for an object but a
	// data object, the one before it): a number at most Acked that a
	// reader finds free is damage, not a Create in flight.
	Acked uint64 `json:"acked,omitzero"`
	// Local is, in a create or open marker, that its lease acknowledges
	// data after the local sync, before the object store has it (the
	// root's DurableLocal): the lease's directory may hold acknowledged
	// bytes past the log, which the next open there by the same Store
	// stores (the root's reconcileLocal keeps them).
	Local bool `json:"local,omitzero"`
}

// MaxInFlight returns the window of the lease a create or open marker h
// started: 1 for markers of builds before windows.
func (h *Header) MaxInFlight() uint64 { return uint64(min(max(h.Window, 1), MaxWindow)) }

// State is what the log holds, as of some object.
type State struct {
	Sealed []Sealed   `json:"sealed"`
	Live   []Piece    `json:"live"`           // data objects of chunks not sealed, in log order
	Dead   []SeqRange `json:"dead"`           // data objects of sealed chunks, not deleted yet
	Lanes  []byte     `json:"lanes,omitzero"` // the lanes file, nil for none
	// Keep are numbers compaction never frees: around each marker of a
	// Store that took the session from a holder that did not release,
	// the numbers that holder's Creates may still take (KeepRange).
	Keep []SeqRange `json:"keep,omitzero"`
	// Compacted is the number below which the last compaction deleted
	// what it could (Compact): the next one is due CompactEvery numbers
	// later. CompactFrom is where it starts: below it, every object is
	// kept for good (Keep) or gone; from it on, a data object the state
	// names may die later and be deleted then.
	Compacted   uint64 `json:"compacted,omitzero"`
	CompactFrom uint64 `json:"compact_from,omitzero"`
}

// Sealed is a sealed chunk's object.
type Sealed struct {
	Chunk uint32 `json:"chunk"`
	Key   string `json:"key"`
	Size  int64  `json:"size"`           // plain size
	Exits []Exit `json:"exits,omitzero"` // the seal record's (a hint, see Exit)
}

// Piece is a data object: Len bytes of Chunk at Off.
type Piece struct {
	Seq   uint64 `json:"seq"`
	Chunk uint32 `json:"chunk"`
	Off   int64  `json:"off"`
	Len   int    `json:"len"`
}

// Clone returns a copy of st that shares no memory with it.
func (st *State) Clone() *State {
	return &State{Sealed: slices.Clone(st.Sealed), Live: slices.Clone(st.Live), Dead: slices.Clone(st.Dead), Lanes: slices.Clone(st.Lanes),
		Keep: slices.Clone(st.Keep), Compacted: st.Compacted, CompactFrom: st.CompactFrom}
}

// SealedChunk returns chunk c's sealed object, if the state has one.
func (st *State) SealedChunk(c uint32) (Sealed, bool) {
	for _, s := range st.Sealed {
		if s.Chunk == c {
			return s, true
		}
	}
	return Sealed{}, false
}

// Apply adds object seq, with header h, to the state: a data object is
// live; a seal record makes its chunk sealed (once) and that chunk's data
// objects dead.
func (st *State) Apply(seq uint64, h *Header) {
	switch h.Kind {
	case KindData:
		st.Live = append(st.Live, Piece{Seq: seq, Chunk: h.Chunk, Off: h.Off, Len: h.Len})
	case KindSeal:
		if _, ok := st.SealedChunk(h.Chunk); ok {
			return
		}
		st.Sealed = append(st.Sealed, Sealed{Chunk: h.Chunk, Key: h.Key, Size: h.Size, Exits: h.Exits})
		live := st.Live[:0]
		for _, p := range st.Live {
			if p.Chunk == h.Chunk {
				st.Dead = AddSeq(st.Dead, p.Seq)
			} else {
				live = append(live, p)
			}
		}
		st.Live = live
	}
}

// SeqRange is the log objects From to To; in State.Dead, unneeded since
// At (Unix milliseconds, the sealing writer's clock), so that any later
// holder deletes them once the lease time passed, however briefly each
// holds the session.
type SeqRange struct {
	From uint64 `json:"from"`
	To   uint64 `json:"to"`
	At   int64  `json:"at,omitzero"`
}

// AddSeq adds seq, greater than every number in rs, to rs, extending the
// last range only if it has no time yet (the same sealing's).
func AddSeq(rs []SeqRange, seq uint64) []SeqRange {
	if n := len(rs); n > 0 && rs[n-1].To+1 == seq && rs[n-1].At == 0 {
		rs[n-1].To = seq
		return rs
	}
	return append(rs, SeqRange{From: seq, To: seq})
}

// StampDead sets At to now in the ranges of rs that have none.
func StampDead(rs []SeqRange, now time.Time) {
	for i := range rs {
		if rs[i].At == 0 {
			rs[i].At = now.UnixMilli()
		}
	}
}

// DropSeqs returns rs without the numbers of done.
func DropSeqs(rs, done []SeqRange) []SeqRange {
	var out []SeqRange
	for _, r := range rs {
		parts := []SeqRange{r}
		for _, d := range done {
			var next []SeqRange
			for _, p := range parts {
				if d.To < p.From || d.From > p.To {
					next = append(next, p)
					continue
				}
				if p.From < d.From {
					next = append(next, SeqRange{From: p.From, To: d.From - 1, At: p.At})
				}
				if p.To > d.To {
					next = append(next, SeqRange{From: d.To + 1, To: p.To, At: p.At})
				}
			}
			parts = next
		}
		out = append(out, parts...)
	}
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// EncodeObject returns the log object of header h and payload: h's JSON
// line, with its version, the payload's length and CRC-32C set, then the
// payload.
func EncodeObject(h *Header, payload []byte) ([]byte, error) {
	h.V, h.Len, h.CRC = Format, len(payload), crc32.Checksum(payload, castagnoli)
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+1+len(payload))
	out = append(append(append(out, b...), '\n'), payload...)
	return out, nil
}

// VersionError reports a log object of a format version this build does
// not read.
type VersionError struct {
	Key     string
	Version int
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("log object %s has version %d", e.Key, e.Version)
}

// DecodeObject parses the log object b stored at key. A header that does
// not parse, a payload whose length or CRC-32C differs from its header's,
// or a data object without bytes is a *corrupt.Error naming key; another
// version is a *VersionError.
func DecodeObject(key string, b []byte) (*Header, []byte, error) {
	i := bytes.IndexByte(b, '\n')
	if i < 0 {
		return nil, nil, corrupt.Errorf(key, 0, "log object has no header line")
	}
	var h Header
	if err := json.Unmarshal(b[:i], &h); err != nil {
		return nil, nil, corrupt.Errorf(key, 0, "log object Header: %w", err)
	}
	if h.V != Format {
		return nil, nil, &VersionError{Key: key, Version: h.V}
	}
	payload := b[i+1:]
	if len(payload) != h.Len || crc32.Checksum(payload, castagnoli) != h.CRC {
		return nil, nil, corrupt.Errorf(key, int64(i+1), "log object payload does not match its header (%d bytes, want %d, or CRC-32C)", len(payload), h.Len)
	}
	if h.Kind == KindData && (h.Off < 0 || h.Len == 0) {
		return nil, nil, corrupt.Errorf(key, 0, "data object at offset %d with %d bytes", h.Off, h.Len)
	}
	return &h, payload, nil
}

// Object keys. A session's objects are under SessionPrefix: its log
// (LogPrefix), its blobs (BlobKey), its sealed chunks (SealedKey) and the
// probe of the object store's clock (ClockKey); MetaPrefix holds the
// copies of every session's metadata that a listing reads.
func SessionPrefix(id uuid.UUID) string { return "sessions/" + id.String() + "/" }

// LogPrefix is the prefix of session id's log objects.
func LogPrefix(id uuid.UUID) string { return SessionPrefix(id) + "log/" }

// LogKey names log object seq. The number is stored as its distance from
// the largest uint64, in 20 digits, so that the newest objects come first
// in a listing: an open reads the first page only.
func LogKey(id uuid.UUID, seq uint64) string {
	return fmt.Sprintf("%s%020d", LogPrefix(id), math.MaxUint64-seq)
}

// ParseLogKey returns the number of the log object key under prefix, or
// false for any other key.
func ParseLogKey(prefix, key string) (uint64, bool) {
	var inv uint64
	rest, ok := cutPrefix(key, prefix)
	if !ok || len(rest) != 20 {
		return 0, false
	}
	for _, c := range rest {
		if c < '0' || c > '9' || inv > (math.MaxUint64-uint64(c-'0'))/10 {
			return 0, false
		}
		inv = inv*10 + uint64(c-'0')
	}
	seq := math.MaxUint64 - inv
	return seq, seq > 0
}

func cutPrefix(s, prefix string) (string, bool) {
	if len(s) < len(prefix) || s[:len(prefix)] != prefix {
		return "", false
	}
	return s[len(prefix):], true
}

// BlobKey names session id's blob with digest d.
func BlobKey(id uuid.UUID, d [32]byte) string {
	return SessionPrefix(id) + "blobs/" + hex.EncodeToString(d[:])
}

// SealedKey names sealed chunk c of session id as the lease lease
// uploaded it.
func SealedKey(id uuid.UUID, c uint32, lease uuid.UUID) string {
	return SessionPrefix(id) + "chunks/" + layout.ChunkName(c) + "." + lease.String() + layout.SealedExt
}

// ClockKey names the probe object whose modification time is the object
// store's clock.
func ClockKey(id uuid.UUID) string { return SessionPrefix(id) + "clock" }

// RenewKey names the object the holder of lease lease puts to renew it
// while idle (LogWriter.Renew): one object per lease, its modification
// time, on the object store's clock, when the holder last renewed. A key
// per lease, so that a renewal arriving late from a holder that lost the
// session never hides the renewals of the lease that took it.
func RenewKey(id, lease uuid.UUID) string {
	return SessionPrefix(id) + "renew/" + lease.String()
}

// MetaPrefix is where a listing finds every session's metadata:
// meta/<id>/<n>, a copy of the meta (or marker) log object n's payload.
const MetaPrefix = "meta/"

// MetaKey names the copy of session id's metadata from log object seq.
func MetaKey(id uuid.UUID, seq uint64) string {
	return fmt.Sprintf("%s%s/%020d", MetaPrefix, id, seq)
}

// KeyPrefix is where an encrypted session's key record lives in the
// object store: keys/<id>.json, outside the session's own prefix, so
// that a delete destroys it first and alone.
const KeyPrefix = "keys/"

// KeyObject names session id's key record.
func KeyObject(id uuid.UUID) string { return KeyPrefix + id.String() + ".json" }

// IsBulkKey reports whether key names a sealed chunk or a blob of a
// session (SealedKey, BlobKey): objects written once, possibly large, and
// read by ranges. Every other key names a small object, and log objects
// are written on every commit.
func IsBulkKey(key string) bool {
	rest, ok := cutPrefix(key, "sessions/")
	if !ok {
		return false
	}
	id, tail, ok := strings.Cut(rest, "/")
	if !ok || len(id) != 36 {
		return false
	}
	return strings.HasPrefix(tail, "chunks/") || strings.HasPrefix(tail, "blobs/")
}

// BulkKeysUnder reports whether some key for which IsBulkKey holds starts
// with prefix: a listing of prefix then needs the bulk objects too.
func BulkKeysUnder(prefix string) bool {
	rest, ok := cutPrefix(prefix, "sessions/")
	if !ok {
		return strings.HasPrefix("sessions/", prefix)
	}
	id, tail, ok := strings.Cut(rest, "/")
	if !ok {
		return len(id) <= 36
	}
	if len(id) != 36 {
		return false
	}
	for _, dir := range []string{"chunks/", "blobs/"} {
		if strings.HasPrefix(tail, dir) || strings.HasPrefix(dir, tail) {
			return true
		}
	}
	return false
}
