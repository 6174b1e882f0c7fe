// Package index is a session's index: in memory (Mem) and in its file,
// index.jsonl (File, Read).
//
// Mem holds a session's entries in log order, each found by id, checked
// as a tree as they are added (every parent known, every id new). It holds
// memory only: a crash takes it whole, and it is rebuilt from index.jsonl,
// the sealed chunks' embedded indexes and the chunk lines. It is not safe
// for concurrent use: the open session's mutex guards it. On return Add
// and Adopt have added every entry they accepted; on an error the entries
// end before the one refused (the valid prefix), and the ids map names
// exactly the entries held.
//
// index.jsonl is derived: its lines (internal/eventline's index lines)
// are written after the records they describe are durable, in batches (a
// File holds up to HoldLines lines, or lines for HoldBytes of records,
// before one write: so the file lags the chunks meanwhile), and are not
// synced but by Sync, so a crash can leave any prefix of the lines
// written, a torn last line, or, during Reset, the old file or the new
// one whole (Reset replaces it atomically, internal/durable); never old
// lines after new ones. Read returns the valid prefix and where it ends;
// the callers above rebuild the rest from the chunks. After a failed
// write a File writes nothing more, so that the file keeps a valid prefix
// and never a gap. A refusal of the file system (a link, a FIFO where the
// file belongs) is returned as the file system reports it; the root
// package's file system turns it into damage.
package index
