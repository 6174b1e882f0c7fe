// Package recovery brings a session's derived files in line with its
// chunks, in two phases: Analyze reads the session directory and decides,
// writing nothing, and returns a Plan (the events found, in an index.Mem,
// the damage, the repairs to make); Apply carries out a Plan's repairs.
// A writer's open runs both; a reader, Verify and a failed session
// loading its index run Analyze alone.
//
// The chunks are the source of truth; index.jsonl and HEAD are derived
// from them.
//
//  1. Read the valid prefix of index.jsonl. Index lines are never synced,
//     so after a power loss the file may end in a torn line or even hold a
//     hole of zeros before later lines (blocks persist out of order): the
//     index is cut at its first invalid line and the rest is rebuilt.
//     Every kept entry must name a known parent, be new, and tile the
//     chunks (each record starts where the previous one ended, or at offset
//     0 of the next chunk); a violation is corruption.
//  2. Check that the chunk files are numbered without gaps and that the
//     last kept entry matches the record at its location.
//  3. Scan the chunks from the end of that record (so the work is
//     proportional to the unindexed tail) and index every complete, valid
//     record found. A tail of the newest chunk that holds no valid record
//     (a torn write) is copied to "<chunk>.broken-<offset>" and cut off;
//     so is one that index lines name, when its bytes are damaged
//     (checkLast: acknowledged events lost, reported by Plan.LostErr). An
//     invalid record followed by a valid one, or any invalid data in a
//     sealed chunk, is corruption.
//  4. Drop the temporary file of an interrupted session.json replace (the
//     old file is whole), finish or discard an interrupted HEAD replace, and
//     rewrite HEAD if it is missing or older than the newest event. HEAD is
//     a checkpoint of the log: one that does not decode or names an event
//     the log does not hold is kept aside in "HEAD.broken" and rewritten.
//
// Tip is the quick check beside Analyze: it reads the end of index.jsonl
// and of the newest chunk only, and finds HEAD's entry when the files
// need no repair, so that a session can open without its index (the root
// package's lazy open); anything else it leaves to Analyze. SealedTip
// finds the last record of a sealed newest chunk.
//
// On return, Apply has synced every repair, each before the next, and
// each step is idempotent: a crash at any point leaves files from which
// the next Analyze plans the rest. The bytes a repair cuts are kept aside
// first, under a durable name that replaces no earlier one.
//
// Corruption is never repaired: the Plan reports it (Corrupt), with the
// valid prefix (every event before the first bad one) in its index, and
// Apply is not to be called. Damage comes up as the error the layer below
// reported it with: a *corrupt.Error, internal/zchunk's *FormatError, or
// the file system's refusal of a path (vfs.ErrFileType, vfs.ErrTooLarge),
// which the root package turns into its *CorruptionError. The error
// Analyze returns is for I/O failures only.
package recovery
