// Package deltalog is the file format of a session's durable delta
// stream: the fragments of output (Store.Publish) that lead to a settled
// event, written as they come and made durable in groups, and the markers
// of the events that settled them.
//
// # Files
//
// A stream is a directory of segment files named by a generation number
// (SegmentName: twenty digits and ".deltas"), written in increasing
// order. A writer (Open) never writes to a segment it did not create: it
// starts a new one, so a segment a dead writer left (torn, or with a
// garbage tail after a power cut) is only ever read. Each segment starts
// with the 8-byte Magic, then holds records:
//
//	u32 little-endian payload length (1..MaxRecord)
//	u32 little-endian CRC-32C of the payload
//	payload: a type byte, then
//	  'd' (TypeDelta): three uvarint-length-prefixed strings: kind, call id, data
//	  's' (TypeSettled): the 16 bytes of the id of an event now durable in the
//	      session's log, which supersedes every delta before the marker
//
// # Durability
//
// Writer.Delta and Writer.Settled write their record to the file at once
// (one write system call, no sync), so a process that dies loses nothing
// they returned for: the bytes are in the page cache, visible to every
// process. A sync (fdatasync) follows within SyncInterval of the first
// unsynced record, or as soon as SyncBytes are unsynced, in the
// background: a power loss loses at most the records of the last
// SyncInterval (plus a sync in flight), and leaves the segment cut, torn
// or with a garbage tail past its last synced record. Scan stops at the
// first record that is incomplete or invalid; readers take what comes
// before as the segment's content.
//
// # What readers get
//
// Scan reads a segment in bounded windows (never more than MaxRecord plus
// a header at once, never the rest of a huge file) and reports an
// incomplete record at the end as the end of the data (Result.Torn), and
// a complete but invalid one (bad length, bad checksum, bad payload,
// wrong magic) as a *corrupt.Error at its offset. It reads nothing past
// the first bad record and never waits.
//
// The package reads and writes files through internal/vfs only.
package deltalog
