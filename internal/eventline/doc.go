// Package eventline is the line formats of a session's files: the framed
// chunk line of an event (Header and Payload; AppendEvent, DecodeEvent,
// ReadEvent), the index line of an event (Entry; AppendIndex,
// DecodeIndex), with the Preview an entry carries, and the Location of a
// line in a session's chunks.
//
// Every line is a JSON object in one canonical layout (members in format
// order, no whitespace, ids and digests in their canonical text form: see
// internal/canonical) framed by internal/jsonl's CRC-32C suffix. A decoder
// accepts exactly that layout, so a line has one encoding, and returns an
// error, never a partial value, for anything else: a bad frame (a torn or
// flipped line), a member out of place, a number out of its range, a
// line or record longer than the format's limits below. Encoding never
// fails: it appends to the caller's buffer.
//
// The package works on bytes in memory: it opens, writes and syncs no
// file, so a crash leaves nothing of its making. What a line holds is
// durable once the caller's write and sync of it return (the chunk
// writer's group commit for chunk lines; index.jsonl is derived and
// rebuilt from them).
//
// It knows nothing of the public API: events are a Header (ids, a time
// in Unix nanoseconds, a kind and role code) and a Payload (the record's
// compact JSON, or its blob's digest and size), which the root package
// turns into its Event and Node.
package eventline

// The format's limits.
const (
	// MaxRecordSize bounds a record's compact JSON, so that a record's
	// length always fits the index's 32-bit fields with room for its
	// framing (Options.MaxRecordSize is at most this).
	MaxRecordSize = 1 << 30

	// MaxLineOverhead bounds what a chunk line holds besides its inline
	// record (without its newline): the header, the parent's location, a
	// digest and size, the frame. They take a few hundred bytes.
	MaxLineOverhead = 4 << 10

	// MaxChunkLine bounds the length of a chunk line without its
	// newline: a record of MaxRecordSize and the rest of its line. A
	// longer line is invalid, and is not read whole.
	MaxChunkLine = MaxRecordSize + MaxLineOverhead

	// MaxIndexLine bounds the length of an index line without its
	// newline: the longest one (three ids, the longest kind, role and
	// timestamp, a size, a digest, a preview of escaped quotes, a
	// location of the largest numbers) is about 700 bytes. A longer line
	// is invalid and is not read whole.
	MaxIndexLine = 1 << 10

	// MinIndexLine is a lower bound on the length of an index line (the
	// shortest possible one is about 230 bytes), for sizing buffers.
	MinIndexLine = 200

	// MinChunkLine is a lower bound on the length of a chunk line (the
	// shortest possible one, a root event with an empty record, is about
	// 200 bytes), for bounding the entries of a chunk by its length.
	MinChunkLine = 128
)
