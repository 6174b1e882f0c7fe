// Package journal is the write-ahead journal a writing process shares
// among all the files it writes: concurrent commits share one write and
// one fdatasync of one preallocated file, whatever the number of files
// (sessions) they touch, and the files themselves are written without a
// sync and made durable later, at a checkpoint.
//
// It imports only the standard library, internal/vfs, internal/layout
// (the names of a session's directory: its JOURNAL marker, the sessions
// directory) and internal/durable (SyncFile); every byte goes through a
// vfs.FS, so tests inject faults and power loss (vfs.MemFS).
//
// # Files
//
// Under a root, in the directory Dir ("journal"), one journal per Writer:
//
//	journal/<owner>.wal   the journal, preallocated (zeros written and
//	                      synced at creation: a commit's fdatasync
//	                      commits no file size)
//	journal/<owner>.lock  locked by the Writer for its life; the
//	                      operating system drops the lock when the
//	                      process dies, so Alive tells a reader whether
//	                      the owner still runs
//
// The owner is a random 128-bit id in lower-case hex, chosen by Create.
// Which journal may hold un-checkpointed records for a session's files is
// recorded in the session's directory, in its JOURNAL marker (see below):
// the caller writes it, with WriteMarker, at the right time.
//
// # Format
//
// All integers are little-endian. These constants are part of the format
// and must never change: the slot size (4096), the record area's start
// (8192), the frame header (32 bytes), the alignment (8), the op values,
// the magic and version.
//
//	offset 0     header slot 0 (4096 bytes)
//	offset 4096  header slot 1 (4096 bytes)
//	offset 8192  record area, a ring, up to the file's size
//
// A header slot (written whole, the two alternately; the valid one with
// the greater seq wins; a slot that fails its checksum is what a torn
// header write leaves, and is ignored):
//
//	  0   8  magic "ssjournl"
//	  8   4  version (1)
//	 12   4  salt: random per file, seeds every record's CRC-32C
//	 16  16  owner id
//	 32   8  seq
//	 40   8  file size (fixed at creation; a file of another size is corrupt)
//	 48   8  start offset: where the first record to replay is (or, if it
//	         wrapped, the start of the record area)
//	 56   8  start lsn: the lsn of that record
//	 64      zeros
//	4092  4  CRC-32C (Castagnoli) of bytes 0..4092
//
// A record frame, at an offset that is a multiple of 8:
//
//	 0   4  hcrc: CRC-32C, seeded with the salt, of bytes 4..32
//	 4   4  dcrc: CRC-32C, seeded with the salt, of the body
//	 8   8  lsn: log sequence number, +1 per record, from 1
//	16   8  first: the lsn of the first record of the record's commit group
//	24   4  count: the records in that group (first .. first+count-1)
//	28   4  len: the body's length
//	32 len  body: op uint8 | path length uint16 | path | offset int64 | data
//	        then zeros up to a multiple of 8 (checked)
//
// Ops: OpWrite (data at offset of the existing regular file path, relative
// to the root, slash-separated, checked: not absolute, no empty, "." or
// ".." element, no backslash or NUL, at most MaxPath bytes) and OpForget
// (path is a prefix, possibly empty: every record of smaller lsn whose
// path starts with it is obsolete). Bounds: len <= the file's size; every
// read of the format is bounded by MaxSize (Read reads the whole file,
// whose size the header fixes).
//
// # Commit
//
// Writer.Commit encodes its records (and their data checksums) in the
// caller's goroutine and queues them. The first caller to find no group
// under way leads: it takes the queue (up to MaxCommit bytes), numbers
// the records, writes them with one pwrite and syncs the file; then it
// wakes the group's callers and hands the lead to the oldest caller
// queued meanwhile. So N concurrent callers share about one write and one
// fdatasync per group instead of N. Each caller then applies its records
// (writes them into their files, without a sync) and returns.
//
// When Commit returns nil its records are durable: after a crash at any
// later point, Read returns them (unless an OpForget made them obsolete,
// or a checkpoint has made their files durable first). A commit's records
// are in one group, and a group is replayed whole or not at all, so a
// replay never shows part of a Commit. A failed write, sync or
// checkpoint fails the Writer for good (ErrFailed): the state on disk is
// unknown and an fsync is never retried; the journal file stays for a
// replay. A failed apply fails only its Commit (ErrApply): its records
// are durable in the journal and the caller, which did not acknowledge
// them, cuts them out of its file, syncs it and forgets them.
//
// # Ring and checkpoint
//
// A group that does not fit before the file's end is written at the start
// of the record area; nothing marks the jump: a reader that does not find
// the next lsn where the last group ended looks at the start of the
// record area. Space is taken from the ring only where the durable
// header's start allows (the ring never overwrites a record a replay from
// the durable header needs). When more than half the record area is in
// use, a background checkpoint takes T, the end of the newest group that
// it and every group before it are applied (their Commits' applies have
// returned), syncs every file the records before T wrote (SyncFiles;
// paths an OpForget covered are left out), then writes the header slot
// not in use with start T and syncs it. Only then may the ring reuse the
// space before T. Commits go on meanwhile; a group that finds no room
// waits for the checkpoint. Close waits for the commits under way, runs a
// last checkpoint, and removes the journal file and then the lock file,
// without a sync: a journal a crash brings back replays nothing.
//
// # Crashes and Read
//
// A crash can leave: the last group written in part (it was not
// acknowledged: only a group whose sync returned is), a header slot
// written in part (the other one is valid and names an older start whose
// records are all still there, since the ring reuses nothing before a
// new header is durable), and the applied file data unsynced (the
// journal holds it).
//
// Read picks the header, then reads groups from its start: the lsns
// follow one another, a group's first record is where the last group
// ended (or at the start of the record area), its records are contiguous
// and whole. The first group that is not there whole ends the log. Then
// the whole record area is scanned for a valid record of a later group
// (first > the missing lsn): a later group is written only after the
// one before it is synced, so finding one means a durable group is
// damaged, and Read returns a *CorruptionError{Path, Offset} (offset of
// the damaged group). If there is none, the missing group is a torn tail:
// dropped whole, and not an error (Log.Torn says where). Damage to the
// last durable group cannot be told from a torn write, as in any log: it
// is cut as a torn tail. Stale records of earlier laps have smaller lsns
// and never continue the log; records of another file fail the salted
// checksums. The walk and the scan are loops over a bounded area, with
// no recursion.
//
// Replay (another process, once the owner is dead) holds a Claim, reads
// the log and writes the records under a path prefix into their files (a
// missing file is skipped: it was removed after its content became
// durable elsewhere), and syncs each file it wrote. Replaying twice
// writes the same bytes again.
//
// A Claim (Take) is a replayer's hold: first the replay lock
// (<owner>.replay), which replayers wait for in turn and the owner never
// takes, then the owner's lock. So a held owner's lock under a held replay
// lock is the owner's own (ErrOwnerAlive: its files hold what it
// committed), never another replayer's, which a replayer must not take
// for a live owner and skip.
//
// The header records the boot the writer ran in (vfs.FS.BootID, hashed):
// a reader in the same boot knows that every record the owner
// acknowledged reached its file's page cache, dead owner or not, and a
// reader in another boot that the machine went down with it (ReadBoot
// reads only the header).
//
// # The JOURNAL marker
//
// A session directory's JOURNAL file (layout.JournalMarker, MarkerSize
// bytes) names the journal that may hold records of the session's files
// not yet durable in them: an owner id and a newline, or 32 dashes and a
// newline for none. A missing file names none. ReadMarker reads it; a
// file shorter than MarkerSize is one a crash interrupted while
// WriteMarker created it, and names none (no record depends on it: see
// below); any other content, a larger file or one that is not a regular
// file is a *CorruptionError.
//
// When WriteMarker returns nil the marker is durable: an existing file is
// written in place (33 bytes at offset 0: one sector, never torn) and
// synced; a new one is created, written and synced, and then its
// directory is synced. A crash before it returns leaves the old marker or
// the new one, or, for a new file, none, an empty one or a short one.
//
// # Taking a session over
//
// A process that takes a session's writer lock calls TakeOver before it
// reads or changes the session's files. When the marker names the
// journal of a dead owner (one whose lock no process holds) whose file
// still exists, TakeOver holds its Claim, makes the session's records in
// it durable in their files, then makes the marker name none (WriteMarker),
// and only then returns: so a session whose writer died opens with every
// record it acknowledged, and a dead journal is never applied over a file
// written since (the marker names none by then). Making the records
// durable depends on the boot: in another boot than the owner's (the
// machine went down with it) they are written into their files and
// synced (Log.Apply); in the owner's boot (only its process died) the
// files already hold every record it acknowledged, which it wrote before
// acknowledging, and are only synced, so that a record durable in the
// journal whose Commit had not returned stays out, as a reader beside the
// owner saw the session. A marker that names a live owner, or a journal
// whose file is gone (closed by its owner, or replayed and removed), is
// left; a damaged marker names any journal: every dead owner's journal
// under the root but the caller's is applied, then the marker names none.
// A journal that cannot be read is a *CorruptionError and the marker
// keeps naming it. DeadLogs keeps the last dead journal read, so that
// taking over the many sessions of one dead writer reads its journal
// once.
//
// Recover is the same for every dead owner's journal under the root, once
// a writing process starts committing through a journal of its own: each
// session whose marker still names the journal is applied and its marker
// made to name none, and then the journal is removed (Claim.Remove, with
// a directory sync). A journal it cannot claim is left; one it cannot read
// is left and logged.
//
// A crash in the middle of either leaves the journal in place and each
// marker naming it (or naming none, once that session was done), with
// some of the records written into their files: the next TakeOver or
// Recover applies them again, which writes the same bytes at the same
// offsets.
//
// # The read overlay
//
// A process that only reads changes nothing: Overlay returns the file
// system with the records of the journal a session's marker names laid
// over the session's files, as ReadAt reads them (a record's bytes where
// the file has none: past its end, or zeros; a byte the file holds that
// is not zero is the file's newer content), so that a reader sees what a
// dead writer acknowledged and a crash left only in the journal. There is
// none when the journal was written in this boot (its files' page cache
// holds every record it acknowledged), is gone, or cannot be read (a live
// owner's files hold what it acknowledged; a writer taking over reports
// damage).
//
// # What the caller must keep
//
//   - Write a file's bytes covered by a record only in Commit's apply, or
//     after Commit returned: never before the record is durable, so that
//     no reader sees data a crash can take back.
//   - apply writes every OpWrite record of its Commit into its file; it
//     must not call Commit. A checkpoint waits for it.
//   - The target files of OpWrite records exist (durably: created and
//     their directory synced) before their first record is committed.
//   - Before a file with un-checkpointed records is replaced, rewritten
//     in place, truncated or removed, sync it and commit an OpForget that
//     covers it (Forget); a replay would otherwise write old bytes into
//     the new file.
//   - Record which journal may hold a file's records (WriteMarker)
//     durably before the first Commit for it, and replay a dead owner's
//     journal for that file, and clear the marker (TakeOver), before
//     writing the file again: the records of a dead journal must not be
//     applied twice across a rewrite.
//   - Read and Replay only the journal of a dead owner (Alive, or hold
//     its lock: Replay does): a live owner's journal changes under the
//     reader, and its files already hold what it committed.
//
// # Concurrency
//
// Commit, Forget and Stats may be called from any number of goroutines;
// Close waits for the calls under way and refuses later ones
// (ErrClosed). The Writer's state is guarded by one mutex, but for two
// counters a Commit lowers after its apply without it (the Commits under
// way, and each group's applies not returned): it takes the mutex only to
// wake the waiters when one reaches zero. A caller woken with its group
// done reads its result without the mutex either. So a group's callers
// do not queue on the mutex after its sync. The write and the sync of a
// group, the applies and a checkpoint's syncs run outside it.
//
// # Changes from the first design
//
//   - No epoch field: the salt (per file) and the lsn sequence tell
//     records of another file and of earlier laps apart.
//   - Each record carries its commit group (first lsn and count), and
//     groups are replayed whole: a torn multi-record group can leave a
//     later record of the same group intact (sectors reach the disk in
//     any order), which a per-record rule would either report as
//     corruption or replay in part. Only a record of a later group
//     proves that a missing group was durable.
//   - No wrap marker: a marker would be a second write per wrapping group,
//     and lsn continuity makes the jump unambiguous.
//   - A frame header with its own checksum lets the scan for later
//     groups test each 8-byte offset with a fixed-size check, so it is
//     linear in the file's size whatever lengths damaged bytes claim.
//   - A failed apply fails its Commit only (ErrApply), not the writer:
//     its records are durable here and in part in their file, and the
//     caller, which did not acknowledge them, cuts them out of the file,
//     syncs it and forgets them; one session's write error does not stop
//     every session sharing the journal.
//   - Replayers take a replay lock before the owner's (Claim), so that
//     one never takes another replayer for a live owner.
//   - The header records the writer's boot (bytes 64..80).
//   - A checkpoint covers only groups whose applies have returned. The
//     draft synced the files of every durable record, but a caller writes
//     a file after its record is durable, so a checkpoint could sync a
//     file before the write reached it and then free the record: a crash
//     lost an acknowledged write (TestCrashAtEveryOperation fails so).
package journal
