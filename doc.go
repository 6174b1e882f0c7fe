// Package sessionstore stores the sessions of AI agent harnesses as durable,
// navigable event timelines.
//
// # Data model
//
// A session is a tree of append-only events. Every event has a UUIDv7 id, a
// parent_id (the nil UUID for a root) and, when it deliberately starts an
// alternate path, branch_from (equal to its parent: set when the parent
// already has a child, so that the event starts a path beside it; an event
// that goes on from a leaf starts none). HEAD names the newest event of the
// active branch. Choosing an older event is two-phase: [Store.Branch]
// records a pending parent in memory, and HEAD moves only when
// [Store.Append] writes the next event. Because nothing but Append moves
// HEAD, HEAD is always the newest event in log order.
//
// The active path is the walk to the root from the event the next Append
// extends ([Store.NextParent]): HEAD, or the pending parent when there is
// one. [Store.Load] returns it, so that a harness that loads the context,
// asks its model and appends the answer attaches the answer where its
// model saw the context end, also right after a Branch or a lane switch.
// [Store.Head] keeps naming HEAD until that append.
//
// Lanes are named branches that survive a restart ([Store.CreateLane],
// [Store.MoveLane], [Store.DeleteLane], [Store.SwitchLane], [Store.Lanes]):
// appends move the active lane, whose tip is the end of the active path,
// and a switch or a move of the active lane is a durable pending parent:
// Load returns the lane's path at once, and after Close or a crash, until
// the next Append moves HEAD onto the lane. A session without lanes has
// one implicit, active lane, [DefaultLane] (lanes.go).
//
// Compaction is an event too: [Store.Compact] records a structured
// [Summary] as a KindCompaction event, and [Store.Load] stops at the newest
// compaction on the path (returning it, the events it keeps verbatim from
// its FirstKept, and everything after it) while every original event stays
// on disk for [Store.FullPath]. [Store.CompactWith] drives a harness's
// [Summarizer] and writes nothing unless it succeeds; [ShouldCompact] is the
// trigger policy; [Store.AppendBranchSummary] records what an abandoned
// branch achieved as the first event of the new one.
//
// A session can carry its workspace: [Store.SnapshotDir] and
// [Store.RecordFiles] record files as manifest events on the path, their
// contents as blobs; [Store.Files], [Store.Diff] and [Store.Restore] give
// the files as of any event, on any branch, lane or fork; [Store.State]
// is a small key-value state changed by deltas on the path
// ([Store.AppendState]). See workspace.go and docs/workspace.md.
//
// A fork ([Store.Fork]) is a session whose history up to an event of
// another session (Meta.ForkedFrom) is that session's, referenced and not
// copied: its first event names that event as its parent, and reads of
// the fork follow the path on into the parent's files, read-only and
// without the parent's lock (fork.go). A fork may be forked in turn.
//
// # Directory layout
//
//	<root>/sessionstore.json  the root's format and compression mode
//	<root>/catalogue.jsonl    derived: every session's metadata, by id
//	<root>/catalogue.log      derived: changes since catalogue.jsonl
//	<root>/catalogue.lock     flock'ed by a writer changing the two
//	<root>/forkcache/<id>/    with Options.Remote only: lease-free copies
//	                          of sessions forks' prefixes are read from
//	<root>/forks.lock         flock'ed by Fork and Delete (forklock.go)
//	<root>/journal/<owner>.wal  the journal a writing Store's sessions
//	                          share (journal.go, internal/journal):
//	                          preallocated, a ring of commit groups
//	<root>/journal/<owner>.lock  flock'ed by that Store while it lives
//	<root>/journal/<owner>.replay  flock'ed by a process replaying the
//	                          journal of a dead owner
//	<root>/forks/<parent>/<fork>  an empty marker per fork Fork made
//	                          (forklock.go); removed with the parent
//	<root>/keys/<session-id>.json  an encrypted session's wrapped data
//	                          key (encrypt.go); key.json in its directory
//	                          while it is in the trash
//	<root>/trash/<session-id>.<deleted>.<purge-after>.<nonce>/  a deleted
//	                          session the trash keeps whole (trash.go)
//	<root>/trash/<session-id>.<nonce>/  a session being removed for good
//	                          (what a crash leaves, Open removes)
//	<root>/search/seg-<n>.six  derived: the search index's segments
//	                          (searchindex.go, internal/search)
//	<root>/search/search.lock  flock'ed by a Store writing a segment
//	<root>/sessions/<session-id>/
//	  session.json        metadata (name, working dir, model, times, format)
//	  HEAD                id of the newest event, a checkpoint (see below)
//	  HEAD.broken         a bad HEAD that recovery replaced, kept aside
//	  lanes.json          the lanes, once a lane call made one: the active
//	                      lane and the others' tips, one CRC-framed line
//	  WORKSPACE           written once, before the session's first
//	                      workspace snapshot stores a content: Reencrypt
//	                      refuses a session that has it (workspace.go)
//	  LOCK                flock'ed by the one writer of the session
//	  JOURNAL             the owner id of the journal that may hold records
//	                      its chunks lack durably (journal.go); none once
//	                      the session closed
//	  index.jsonl         one line per event of the plain chunks: where its
//	                      record is (a sealed chunk embeds its own lines)
//	  chunks/000000.jsonl one framed record per line, in append order; the
//	                      active chunk may end in free space (zero bytes)
//	  chunks/000001.jsonl ... a new chunk starts when the active one would
//	                      exceed Options.ChunkSize
//	  chunks/000000.jsonl.zst a full (sealed) chunk, compressed with random
//	                      access (Options.Compression, default zstd)
//	  chunks/000001.jsonl.broken-<offset>  the bytes recovery cut from the
//	                      end of a chunk at that offset, kept aside
//	  blobs/sha256/ab/<62 hex>.zst  records over Options.BlobThreshold,
//	                      zstd-compressed, named by the SHA-256 of the record
//	  stream/<20 digits>.deltas  with Options.DurableDeltas: the deltas
//	                      Publish wrote, CRC-framed, and the settled markers
//	                      of commits (stream_durable.go, internal/deltalog)
//
// Files are created 0600 and directories 0700 unless Options say otherwise.
//
// # Line formats
//
// Chunk and index lines are framed JSON objects: the last member is "crc",
// the CRC-32C (Castagnoli) of every byte of the line before the `,"crc":"`
// that introduces it, as eight lower-case hex digits, and the line ends
// with a newline. A framed line is still plain JSON; the checksum lets a
// reader tell a complete record from a damaged one, which a trailing
// newline alone cannot prove (a file's size can reach the disk before its
// data). A chunk line, here of an event that starts a branch:
//
//	{"id":"01a039f0-fd62-7000-8000-000000000005","parent_id":"01a039f0-e5f2-7000-8000-000000000001","branch_from":"01a039f0-e5f2-7000-8000-000000000001","kind":"message","role":"user","timestamp":"2026-08-25T17:21:31.454897183Z","parent_loc":[0,0,229],"record":{"content":"Try approach B instead."},"crc":"aa157a72"}
//
// "parent_loc" is where the parent's line is: its chunk number, the byte
// offset of the line in the chunk file and the line's length including
// its newline (format 2; absent on a root event). Its index line (size is
// the record's length in bytes; location is where the line itself is, in
// the same terms):
//
//	{"id":"01a039f0-fd62-7000-8000-000000000005","parent_id":"01a039f0-e5f2-7000-8000-000000000001","branch_from":"01a039f0-e5f2-7000-8000-000000000001","kind":"message","role":"user","timestamp":"2026-08-25T17:21:31.454897183Z","size":37,"preview":"Try approach B instead.","location":{"chunk":1,"offset":328,"length":313},"crc":"d3e074d1"}
//
// "preview" is [Node.Preview]: up to 80 bytes of the record's text (a
// message's content, a tool call's name, a tool result's output, a
// summary's text), made once when the entry is built, so that Tree reads
// no record (internal/eventline/preview.go). It is absent when empty, and
// from the index lines of builds before it, whose nodes keep an empty
// preview until their index is rebuilt from the chunk lines; a blob's
// entry rebuilt from its chunk line has none (its line holds only the
// digest). An encrypted session's index line holds "sealed_preview"
// instead: the base64 of the preview sealed under the session's key
// (encrypt.go), at most 80 bytes. Chunk lines do not carry it. A build
// older than the member
// takes an index line that has it for a bad line: index.jsonl it rebuilds
// from the chunks, but a sealed chunk's embedded index it reports as
// damage.
//
// A record larger than Options.BlobThreshold (1 MiB by default) is stored
// once in blobs/ and its chunk and index lines carry its digest and size
// instead, with "record":null in the chunk line:
//
//	{...,"timestamp":"2026-08-25T17:21:35.954897183Z","parent_loc":[2,0,261],"digest":"sha256:083a949e415d0282726b47dca5033620b2eafd8fa6e77cc035c0ec357414ed82","size":25032,"record":null,"crc":"…"}
//
// A record holding a JSON string of Options.StringThreshold bytes or more
// (128 KiB by default: a base64 screenshot) is stored as a blob whatever
// its size, split (format 3): each such string is a blob of its own,
// named by the SHA-256 of its bytes as they stand between the quotes, and
// the record's blob holds the rest with a table of where the strings go
// (blob.go, "String blobs"). The chunk and index lines are as for any
// blob; reading puts the strings back and checks the whole record's
// digest, so Load returns the record byte for byte, and the same
// screenshot sent again in every later request is stored once.
//
// Store.Event and Store.Tree never open a blob; Store.Load resolves the
// events it returns and Store.Resolve one event, each verifying the digest.
// Store.LoadSeq, Store.FullPathSeq and Store.TreeSeq are the streaming
// forms of Load, FullPath and Tree: the path is resolved from the index
// when the loop starts, and the records are read a bounded batch at a
// time as it goes on, with no lock held across the loop body (seq.go).
// A blob is durable (file and directory synced, the two syncs side by
// side) before the event that refers to it is written; the append writes
// it without holding the session's mutex, so other appends to the session
// do not wait for its compression and syncs. Store.GC removes blobs no
// event refers to. An existing blob is reused only after its
// content verifies, so one whose content a crash lost is written again.
//
// These lines are taken from testdata/golden, which a test regenerates and
// compares byte for byte.
//
// Part of the format, never to change within a format version: the member
// names above and their order; "branch_from" (present only on an event
// that starts a branch) and "role" (absent for RoleNone) sit where the
// example shows them; ids in canonical lower-case 8-4-4-4-12 form, the
// root's parent as the nil UUID; timestamps in RFC 3339 UTC with
// nanoseconds; the record as compact JSON; integers in plain decimal; the
// crc framing; chunk names as six or more decimal digits plus ".jsonl".
// HEAD is the canonical id and a newline (37 bytes). session.json is an
// indented JSON object holding "format" (the format version) and the
// fields of [Meta], then "crc", the CRC-32C of every byte of the file
// before the `,` that introduces it (the metadata is held nowhere else; a
// session.json without it, written before it was added, is read
// unchecked, and older builds ignore it); a store refuses a version it
// does not know with ErrUnsupportedFormat, and so it does for a
// sessionstore.json of a format other than 1.
//
// The catalogue (internal/catalogue) is a derived copy of every session.json, so
// that [Store.List] reads one file and [Store.ListRecent] the newest part
// of it. Its lines are framed as chunk lines are, with members in a fixed
// order: "k" (the kind), "dir" (the sessions directory's modification
// time in Unix nanoseconds and size), then "v" and "gen" (a header), or
// "id" and "file" (session.json's time and size) followed, for an entry
// or a commit, by "created_at", "updated_at", "name", "working_dir",
// "model" and "labels" (keys sorted), each always present, and then the
// lineage, each member only when not zero: "forked_from" (session and
// event ids), "parent_session", "spawned_by", "depth":
//
//	{"k":"h","dir":[1796155150197809645,4096],"v":2,"gen":1,"crc":"…"}
//	{"k":"e","dir":[0,0],"id":"01a02f3f-a89d-7d25-b4ac-ac89a183258d","file":[1796155150217898712,301],"created_at":"2026-08-25T17:21:23.954897183Z","updated_at":"2026-08-25T17:21:35.954897183Z","name":"golden","working_dir":"/workspace","model":"model-name","labels":{"team":"core"},"crc":"…"}
//
// catalogue.jsonl is a header and one entry ("e") per session sorted by
// id ("u" for a session.json that could not be read); catalogue.log is a
// header of the same generation, then pending ("p") and commit ("c")
// records. A writer appends a synced pending record before it replaces a
// session.json and a commit after (internal/catalogue says why this is enough,
// and what changes made by hand are and are not noticed). The catalogue
// is never the only copy: a missing, damaged or stale one is rebuilt from
// the session.json files by a writer and read around by a read-only
// store, and a session.json whose time or size is not the recorded one is
// read. Its format is 2 (format 1 had no lineage members; this build
// rebuilds such a catalogue from the session.json files), independent of
// the sessions' format.
//
// [Store.ListPage] and [Store.Sessions] list the sessions a [Query]
// selects (parent session, working directory, labels, creation time),
// newest first, a page at a time, from the catalogue's newest end or from
// a cursor's place in it (list.go). A subagent's session names its
// parent, the event that spawned it and its depth (subagent.go), and
// Options.DeferCreate makes Create write nothing until the session's
// first write (defer.go).
//
// Format versions: 1, the first; 2 adds "parent_loc" to every chunk line
// of an event with a parent; 3 adds split blobs. New sessions are format
// 3. This build reads all three and appends to an older session in its
// own format (format 1: no "parent_loc"; formats 1 and 2: no split
// blob), so that the builds before still read it; a format 1 session
// always opens with its index (see Opening). testdata/format1 and
// testdata/format2 hold such sessions, opened and appended to by tests.
// Store.Upgrade moves a session to format 3: it rewrites a format 1
// session's chunks (upgrade.go, which also draws the rewrite's crash-safe
// order) and only session.json of a format 2 one; ConvertCompression
// converts a root's chunks to the other compression mode the same way.
//
// # Compressed chunks
//
// When the active chunk is full it is sealed: written again as
// "<chunk>.jsonl.zst" in the format of internal/zchunk (independent zstd
// frames of at most 256 KiB of lines, each with its content checksum and a
// CRC-32C of its compressed bytes, then a frame table and a footer), made
// durable under its final name, and only then is the plain file removed.
// Sealing runs in a background goroutine of the session while appends fill
// the next chunk (a full 8 MiB chunk takes on the order of 100-200 ms to
// compress and write, which appends used to wait for), and it starts once
// the appends pause for 50 ms (internal/chunkwriter's DefaultSealIdle): a
// burst of appends, such as a harness's tool results between two model
// calls, does not share the disk and the cores with it (64 KiB tool
// results 1.16x faster, p99 0.6x, in bench/). Under appends without such a
// pause it starts anyway once four full chunks wait (SealBacklog), so at
// most four full chunks stay plain. Close, closing an idle session, Flush
// and Verify start it at once and wait for it. Its records are durable in
// the plain file throughout, so sealing changes nothing a crash can lose.
// Index locations keep addressing the plain (logical) offsets, which the
// frame table maps to frames, so reading one event decompresses at most
// one bounded frame. Reading is layout-blind: plain and compressed chunks
// load identically, and a chunk whose sealing failed stays plain until the
// next rotation retries it.
//
// Closing a session (Store.Close, or the registry closing an idle one to
// make room) also seals its active chunk when that holds at least 16 KiB
// (or a quarter of Options.ChunkSize, if less): a closed session is cold,
// and most sessions never fill a chunk. The sealing is the same, in the
// same order (sealed file durable, plain file removed, index.jsonl
// rewritten without its lines), done before Close returns; a failure is
// logged and leaves the chunk plain. The next append starts a new chunk.
// A smaller chunk stays plain, so that a session closed after every few
// appends does not leave a chunk per visit; the next visit appends to it,
// and its Close seals it once it has grown past the bound (loading the
// index first when the session appended without it, since the sealed file
// embeds the whole chunk's index). On the shared real transcripts this
// takes a closed session from about 1.06x the bytes of its JSONL to 0.29x.
//
// The sealed file also embeds the index lines of its records, in the
// format above, compressed as one more checked frame (the zchunk metadata
// section); index.jsonl is then rewritten to hold only the lines of chunks
// still plain: the active one, and any full chunk not sealed yet (through a
// temporary file, synced and renamed over it: rewritten in place, a crash
// could keep the new lines and lose the truncation, the old lines after
// them). On the
// recorded transcript in testdata the index lines are a sixth of the
// session's plain size and compress about six times, so this keeps the
// index from dominating the bytes on disk. Loading a session's index reads
// the embedded index of each sealed chunk and the lines of index.jsonl,
// skipping any line whose chunk is sealed (a crash can leave such stale lines between
// sealing and the rewrite; reconciliation drops them). The embedded lines
// must tile the chunk from offset 0 to its end; if they do not, the sealed
// file is corrupt. A root
// records its mode in sessionstore.json and refuses to open in the other
// one (ErrCompressionMismatch). Damage to a compressed file's frames or
// table is reported with that file's path and the offset of the damaged
// frame or table; a bad record inside a chunk, plain or compressed, with
// the plain chunk name and the record's logical offset.
//
// # Durability contract
//
// When [Store.Append] returns nil, the event is on stable storage and
// survives a process crash or power loss. An Append that returned an error
// is not acknowledged: after a crash its event is absent, or present whole
// if its bytes reached the disk; never half-formed.
//
// Steady-state Append costs one fdatasync, shared: once the Store holds
// two sessions open, the record goes to the Store's journal
// (journal/<owner>.wal, see journal.go), which commits the records of
// every session the Store writes at that moment with one write and one
// fdatasync; once that sync has ended, the record is written at
// the end of the active chunk's data, without a sync, and the Append
// returns. Readers (another process's read-only Store included) find an
// event in the chunk only once it is durable in the journal. The chunk is
// synced at a checkpoint: when the session starts a new chunk, on Flush,
// when the session closes (then a Forget of its records is committed, so
// the journal never writes them again), and when the journal's ring is
// half full. After a crash, the next writer of the session replays the
// records its JOURNAL file names into the chunks before it reads them
// (in the same boot, where the page cache kept the chunks, it only syncs
// them); a read-only Store lays them over the chunks. With
// Options.JournalSize negative, or with a Remote, each session's commit
// writes its active chunk and syncs it instead, and so does a commit of
// 32 KiB or more (a large tool result), which the journal would write
// twice, into the journal and then the chunk, and every commit of a Store
// that has held one session open at a time (alone, a session syncing its
// own chunk is faster, and no journal file is made). Appends to one session
// from several goroutines share writes and syncs besides (group commit,
// see commit.go): each still returns only once a sync that started after
// its record was written has ended, and readers see an event only from
// then on. [Store.AppendBatch] writes several records with one write and
// one sync; a crash keeps all of them or none (through the journal, one
// record), or a prefix of them (a session syncing its own chunk). The active chunk is
// preallocated: zeros are written past its data in steps of 64-256 KiB,
// so that most syncs write data only, with no new file size to commit
// (1.3-1.5x more durable appends per second in this package's benchmarks
// on ext4); the free space is cut off when the session is closed or the
// chunk fills. A commit through the journal, whose sync is the journal's,
// leaves less than 4 KiB of zeros after the data instead: there they would
// save no sync anything and only take disk space in every open session. A commit of 32 KiB or more that does not fit the free space
// extends the file by itself instead: zeros written ahead reach the disk
// in the next sync, doubling what a large record's sync writes. The
// directory is
// synced only when a new chunk file is created, before any record is
// written to it. The index line is added after the sync and not synced
// itself: an open session holds its index lines in memory and writes
// them in batches (one write per 64 lines, or per 128 KiB of records they
// describe, and at a new chunk, Flush, Close and Verify), so index.jsonl
// lags the chunk by up to that many acknowledged events, which readers
// find in the chunk past the index's end, as after a crash. The HEAD file
// is not touched. This is safe because both are derived from the chunks:
//
//   - The chunks hold every record in append order, each record naming its
//     parent; the index holds nothing the chunks lack but the records'
//     positions, which a scan recovers.
//   - An index line is written only after its record is durable, so the
//     index can lag the chunks (while a writer holds lines, or after a
//     crash) but never lead them.
//     Reconciliation scans the chunks from the end of the last valid index
//     line, so its cost follows the unindexed tail, not the session. A
//     sealed chunk's embedded lines are written with it, before it
//     replaces the plain file, so they are complete whenever it exists.
//   - HEAD is the newest event in log order, since only Append moves it.
//     The HEAD file is a checkpoint, replaced atomically (temporary file,
//     sync, rename, directory sync) when the session is closed or
//     reconciled; reconciliation rewrites it when it is missing or older
//     than the log, and finishes a rename a crash interrupted.
//
// Replacing HEAD on every Append would cost more than the fdatasync itself
// on common file systems (ext4 flushes a file renamed over another), and
// the four syncs of a fully eager protocol would cost four times as much.
//
// The lanes file is replaced atomically (the same protocol) by every lane
// call that changes a lane, and is durable when the call returns; it names
// only events already durable, and is not written by appends (the active
// lane's tip is HEAD).
//
// Metadata is replaced atomically and synced by [Store.Create] and
// [Store.UpdateMeta], each between the catalogue's synced pending record
// and its unsynced commit; a crash between them leaves readers reading
// that session.json. UpdatedAt also follows the newest event, written when
// the session is closed or flushed; until then [Store.Meta] and the
// listings of the Store that appends report it from memory, and after a
// crash the next writer's open finds it (Prune judges by the files).
//
// # Checksums
//
// Every chunk and index line carries its own CRC-32C rather than one commit
// record per batch: a record is the unit the store reads (Event, Load), so
// each read verifies exactly the bytes it returns; a torn or damaged line is
// pinned to its own offset; and the framing keeps every line plain JSON.
// CRC-32C catches every single-byte change (every burst up to 32 bits) in a
// record; the fixed-shape suffix and the newline catch changes to the frame
// itself. A test flips every byte of every file of a committed session,
// four ways each, and checks that Verify and a read of every event both
// detect every change to a chunk or a blob (but for a bit of a blob's
// zstd frame header that the decoder ignores, which leaves the record its
// digest names); that a change to index.jsonl or HEAD is reported or
// repaired by the next open with nothing lost; that a change to
// session.json is reported or leaves the metadata as it was; and that no
// change to sessionstore.json switches the compression mode, nor any
// change to the catalogue what List and ListRecent return.
// Reads of indexed records (Load, Event) check the checksum and the header
// but do not parse the record as JSON again: it was validated when it was
// appended, and a chunk line that no index covered is validated by the
// reconciliation scan that indexes it. Verify validates every record, so
// a line rewritten by another tool with a matching checksum around an
// invalid record is still reported.
//
// # Files the store does not own, and the limits of its formats
//
// Every path under the root is the store's, and holds a regular file or a
// directory where the layout above puts one, or nothing. A symbolic link
// (a session directory, chunks/, a chunk, HEAD or any other element), a
// FIFO, a socket or a device there is never followed, opened for reading
// or writing, or waited on (internal/vfs: files are opened with
// O_NOFOLLOW, O_NONBLOCK and O_NOCTTY and their type checked on the
// descriptor opened; below the root, paths are resolved following no
// link, by openat2 with RESOLVE_NO_SYMLINKS on Linux). A call that meets
// one returns a [*CorruptionError] naming it, and [Store.Verify] reports
// it: so a writer never truncates, appends to or replaces a file outside
// the store, and no call blocks on a FIFO. A writer makes no repair
// through such a path either: a link where HEAD or a chunk belongs makes
// the session damaged (it refuses writes, its events stay readable),
// where a merely bad HEAD is moved aside and rebuilt. The catalogue,
// derived, is rebuilt by a writer that cannot read it, as when it is
// damaged. The root itself, and the path to it, may be links.
//
// No file is read past what its format allows, so that a file of any
// size (a sparse one of gigabytes, a few kilobytes on disk) costs a reader
// no more memory than a valid one could:
//
//	HEAD                   37 bytes
//	session.json           1 MiB (Create and UpdateMeta refuse metadata
//	                       that would not fit, with ErrInvalidMeta)
//	lanes.json             1 MiB (MaxLanes lanes of MaxLaneName bytes fit)
//	sessionstore.json      4 KiB
//	an index line          1 KiB
//	a chunk line           1 GiB + 4 KiB (a record of the largest
//	                       Options.MaxRecordSize and the rest of its line)
//	a catalogue line       1 MiB + 4 KiB (one session's metadata)
//	catalogue.log          512 MiB (a writer folds it at 256 records)
//	a blob                 its record's size, from the line naming it,
//	                       with zstd's framing
//	a sealed chunk         its embedded index by one index line per
//	                       record its logical size can hold; its blocks,
//	                       frame table and meta frame as internal/zchunk
//	                       bounds them
//
// A file past its limit is a [*CorruptionError] at the limit's offset,
// found from its size, unread; a line past its limit is a bad line, not
// read whole. Files with no limit of their own (a chunk, the index, the
// catalogue's snapshot, a torn tail kept aside) are read a block or a
// line at a time, with nothing sized from the file's size alone.
//
// # Opening
//
// Loading a session's index costs in proportion to the whole session
// (100,000 index lines for 100,000 events), while resuming a session, the
// commonest reason to open it, needs only the active path. So a session of
// format 2 opened for writing first checks, without reading the index,
// that its files need no repair: every chunk there once with no temporary
// file left by a sealing or a replace, and either the newest chunk plain,
// the last line of index.jsonl valid, naming HEAD and matching the last
// record, and nothing but free space after that record; or the newest
// chunk sealed, index.jsonl empty, and the sealed chunk's last record
// (read from its last frame) HEAD, as a Close that sealed the active
// chunk leaves it. If so it opens without its
// index (0.17 ms for a 100,000-event session in a warm process, the open
// and close of BenchmarkOpenLoad/open), and Store.Load, Store.FullPath from HEAD and
// Store.Head are served from HEAD's entry: Load walks from HEAD to the
// root (or to the newest compaction and the events it keeps) through each
// line's "parent_loc", checking every line's checksum and that it holds
// the event its child names, and reads only the chunk files, about the
// bytes of the path's lines (a run of adjacent lines is read in one go,
// and the read that reaches the start of a run may take some bytes before
// it). Appends need no index either: the first one opens the newest chunk
// and index.jsonl at their ends, and the session keeps a partial index
// from HEAD on, which Load walks from; Flush and InterruptedToolCalls
// (through Load) need no index either. Every other call, a Branch
// selection restored after the session was closed to make room, and the
// append that starts a new chunk (whose sealed file embeds the chunk's
// whole index) first load the index and reconcile it exactly as the
// normal open below, as does Load when the path reaches a line without
// "parent_loc" or a compaction whose record is a blob. The files an
// append writes, and what a crash can lose, do not depend on whether the
// index is loaded. Otherwise the session opens normally. Verify checks that every
// "parent_loc" names the parent's line. A read-only store opens a session
// the same way when its log is clean, with HEAD taken from the log (it
// repairs nothing, so it ignores the HEAD file): the last index line, or
// the newest valid record after it, found by the rules reconciliation cuts
// a torn tail by (an append in progress, or index lines a crash lost), so
// that beside a writer a reader loads the active path in about the time a
// writer does. An invalid record followed by a valid one there makes it
// load the index, whose analysis tells damage from a write in progress and
// reports damage.
//
// What the lazy open defers: damage to index lines before the last one,
// or to the embedded index of a sealed chunk, is reported by the first call
// that loads the index rather than by the first call on the session, so
// appends made before that call are accepted (they chain onto the intact
// HEAD and are durable, but a session found damaged then reads as its
// valid prefix, which ends before the damage); and stale index lines left
// by a crash during sealing stay until then. A damaged line on the active
// path is reported by Load either way. While the index is partial, the
// check that a new event's id is not in the session yet covers the events
// from the opening HEAD on; ids are UUIDv7, so an older one cannot recur.
//
// # Reconciliation
//
// A session is opened for writing (locked and reconciled) the first time a
// Store needs its timeline (deferred, as described under Opening, for a
// clean format 2 session until a call needs its index). Zero bytes running
// to the end of a plain chunk are free space, not damage: records hold no
// zero byte. Reconciliation
// cuts a torn tail of the newest chunk (bytes after the last complete
// record, or trailing records that fail their checksum with no valid
// record after them, and that no index line names; or, since the sectors
// of an unsynced write reach the disk in any order, an invalid line
// holding zeros that run from its start or a 512-byte boundary to a
// 512-byte boundary, a hole, and everything after it, valid records
// included: none of them was acknowledged), keeping the cut bytes in
// "<chunk>.broken-<offset>" (a disk that zeroed a whole sector of the
// newest chunk's synced data would pass for such a hole: its records are
// in that file and the cut is logged); rebuilds
// missing or torn index lines from the chunks, reading only the unindexed
// tail; removes the temporary files of interrupted replaces, finishing an
// interrupted HEAD replace whose event is durable; and restores HEAD. HEAD
// is a checkpoint of the log, so a HEAD file that is not an id, or names
// an event the log does not hold, is rebuilt from the log too, its bytes
// kept in "HEAD.broken". Each repair is synced, and reconciliation is
// idempotent, so a crash during it is recovered by the next one.
//
// One repair follows damage rather than a crash: when the records at the
// end of the newest chunk are damaged bytes (cut short, or failing their
// checksum) with no valid record after them although index lines name
// them, acknowledged events were lost (a disk or another program changed
// synced data). Their bytes are cut and kept like a torn tail, the index
// is rewritten without them and HEAD rebuilt, so the session takes appends
// again; the loss is logged as an error, and [Store.Verify] and a
// read-only store report it as corruption until a writer has repaired it.
//
// Anything else is corruption and is never skipped in silence: a complete
// record that is invalid (a whole line whose checksum matches but whose
// content does not decode), an invalid record followed by a valid one,
// invalid data in a sealed chunk, a missing chunk file, a duplicate id or
// unknown parent, an index entry that disagrees with its chunk. The
// session then opens damaged: nothing is repaired or truncated, writes
// return the [*CorruptionError] (naming the file and offset), Load and
// Tree return what the valid prefix (every event before the first bad
// one) holds together with that error, and Event reads any event of the
// valid prefix without error: damage after an event never makes reading
// it fail. Events after the damage are not read (the valid prefix ends
// there; their parents may be the damaged ones): Event reports them with
// the damage, and Verify checks them.
//
// [Store.Verify] runs the same analysis without writing or locking, checks
// every record, parent link and index line, and reports the problems found
// and the repairs an open would make. [Store.Repair] makes those repairs
// at once and says what it did.
//
// After a crash a turn may be cut short in two ways, and
// [Store.RepairInterruptedToolCalls] has a closer for each, so the history
// a model sees is balanced. A tool call whose KindToolCall event is
// durable but whose result is not is answered with a synthetic result
// marked [OutcomeUnknown], telling the model to retry only idempotent work
// and to verify side effects ([Store.InterruptedToolCalls] lists them). A
// call an assistant message announced ([Message.ToolCalls]) whose
// KindToolCall event never became durable was never started (a harness
// records a call before it runs the tool) and is answered with
// [OutcomeNotStarted], telling the model the tool did not run
// ([Store.NotStartedToolCalls] lists them).
//
// # Crash testing
//
// All file I/O goes through an internal filesystem seam. Its in-memory
// implementation keeps, per file, the data and the last synced data, and
// per directory the entries, the last synced entries and the log of the
// creates, renames and removes since, and produces the filesystem a power
// loss would leave (only synced state; every byte written, under the
// synced names; a random prefix of unsynced data; unsynced data as zeros
// or garbage; each 512-byte sector of unsynced data, and each unsynced
// directory change, kept or lost independently, since a directory change
// can reach the disk before the data of its file, or without an earlier
// change). The tests lose power at every mutating operation of a mixed
// workload under each of these modes (about 9,000 states in the full run,
// which .ci/run makes with SESSIONSTORE_CRASH_STATES=all; go test alone
// checks a sample spread over the workload) and at every operation of an
// atomic replace, of a sealing and of a rewrite of index.jsonl under many
// seeds of the last mode (the last also with its truncation lost and its
// writes kept, a reordering the in-memory file system does not make
// itself), inject EIO and ENOSPC into every write, sync, rename and create, and
// SIGKILL a real writing process hundreds of times; after each, every
// acknowledged event must be there, whole, and Verify must be clean.
// The catalogue's tests lose power at every operation of a run of
// Creates, UpdateMetas and closes, and inject faults into each; after
// each, List and ListRecent must say what the session.json files say. The
// README's Tests section lists the variables.
//
// # Object storage
//
// With [Options.Remote] set, the object store (S3, GCS, Azure Blob, an
// S3-compatible server, through the module
// github.com/sessionstore/sessionstore/remote, or any [ObjectStore]) is
// the system of record and the Store's directory is its cache. Nothing
// changes for a Store without one. The protocol is in remote.go; what it
// promises:
//
//   - When Append returns nil, its events are durable in the local chunk
//     (fdatasync) and in the object store: each commit group is one
//     immutable log object, sessions/<id>/log/<n>, created create-only.
//     The local sync and the Create run side by side, so an append costs
//     the slower of the two; concurrent appends still share one group,
//     hence one object. With [Options.RemoteDurability] set to
//     [DurableLocal], Append returns after the local sync, the Create
//     issued and following within Options.RemoteTimeout (at most
//     Options.RemoteWindow groups acknowledged and not yet stored). The
//     loss window that buys: those groups are lost if the machine's disk
//     is, or if another Store takes the session over first (this one
//     wrote nothing for LeaseTime); a crash or a failed Create alone
//     loses nothing, since the next open in the same directory stores
//     them before it writes anything else. The rest of this section is
//     about the default, DurableRemote.
//   - A crash of the process, or the loss of the machine and its disk,
//     loses no acknowledged event: another Store, on another machine with
//     an empty directory, opens the session from the log, with every
//     acknowledged event in order and HEAD the newest of them. It reads
//     the newest marker (which holds the log's state) and the objects
//     after it, downloads a sealed chunk only when a read reaches it (a
//     Load or LoadSeq of the active path reads the chunks the path
//     crosses, downloaded side by side ahead of the read from the exit
//     tables their seal records carry), and a
//     blob when a read needs it, each checked by its CRCs or digest (a
//     sealed chunk's structure when downloaded, each of its blocks by the
//     read that first needs it); a bad object is a *CorruptionError whose
//     Path is the object's key, and a local copy found damaged is
//     downloaded again by the session's next open.
//   - One writer per session, fenced without clocks: log objects are
//     numbered, a Store taking a session fills the numbers its holder
//     left free, and each number can be created once, so a
//     writer that lost the session (paused, partitioned, slow past the
//     lease) fails its next Create and stops with ErrFenced, having
//     acknowledged nothing the new holder does not have. No acknowledged
//     event is ever lost or forked by two writers.
//   - Delete (and Prune) work on object storage too (remote_delete.go):
//     refused with ErrLocked while another Store holds an unexpired
//     lease, they create the next log object as a delete marker, the
//     commit point after which every open on any Store returns
//     ErrNotFound and a zombie writer fails with ErrFenced; then the
//     metadata copies, blobs, sealed chunks and probe go, and every older
//     log object is overwritten by the marker (its number stays taken, so
//     the id cannot be created again: ErrExists).
//   - Encrypted sessions ([Options.Keys], encrypt_remote.go): every object
//     holds records sealed; the key record is the object keys/<id>.json,
//     created before the session's log and destroyed right before a
//     Delete's marker (every version of it with an [ObjectVersionDeleter]);
//     no root keeps it on disk; Rewrap replaces it only with a
//     conditional write ([ObjectReplacer]).
//   - Handoff: Close, CloseSession (a worker done with a session for now)
//     or the Store making room writes a release marker;
//     the next open, anywhere, takes the session at once. A session
//     another Store holds is refused with ErrLocked, or waited for with
//     Options.WaitForLock: until it is released, or until its holder has
//     neither written a log object nor renewed its lease for
//     Options.LeaseTime on the object store's clock, when the open takes
//     it over. An open session renews its lease while idle (a LIST and a
//     PUT of 36 bytes every LeaseTime/3, none while it writes), so only a
//     holder that stopped (crashed, cut off, paused past the lease) is
//     taken over; its next write returns ErrFenced. A root that reopens
//     after its process died takes its own sessions back at once (its
//     holder.id names the leases it took, and the session's lock file
//     keeps other processes of the machine out meanwhile).
//   - A failed remote call (unreachable, 5xx, refused, over
//     Options.RemoteTimeout) fails the appends of its commit group with
//     ErrRemote and acknowledges nothing. The object's state is then
//     unknown, so the session stops writing and the Store forgets it; the
//     next call opens it again from the log, which decides: the failed
//     group's events are kept if their object was stored, cut if not
//     (the local bytes are cut to what the log holds). Opens, Loads and
//     List take the caller's context; the calls of the commit pipeline and
//     of sealing, which serve many callers, are bounded by RemoteTimeout.
//   - Sealed chunks and blobs are immutable objects created before any log
//     object refers to them (a seal record names the sealed object); once
//     a seal record covers a chunk, its data objects are replaced by
//     tombstones (small fixed objects) after LeaseTime, never before.
//     Log objects below the newest marker that no reader needs (old
//     markers, tombstones, voids) are deleted by compaction, in the
//     background of an open, every 64 numbers, so that a session's
//     object count stays bounded however many handoffs it sees; the
//     numbers that still fence a zombie stay taken for good, and a taker
//     that stalled checks its marker is the newest (remote.go, "Numbers
//     freed by compaction"). A log object the object store lost is a
//     *CorruptionError naming its key.
//   - Metadata: each session.json is a log object (so a fenced writer
//     cannot write one) and a copy, meta/<id>/<n>, from which List, ListRecent
//     and Meta read; the newest number wins, so no concurrent change is
//     lost.
//   - Lanes: each lanes.json is a log object, and the state of every
//     later marker carries it, so a Store restoring the session gets the
//     lanes of the newest acknowledged change.
//   - Followers: a Store opened with Options.ReadOnly and a Remote reads
//     the sessions other Stores write, from its own directory (a cache),
//     writing nothing to the object store (follow.go): each call sees
//     every event appended before it, by any Store; its subscriptions
//     (Subscribe, SubscribeFrom) poll the log every
//     Options.FollowInterval.
//   - GC (GCWith, GCStore) also removes, under the session's lease, the
//     blob objects no event names and the sealed chunk objects no seal
//     record names, once older than LeaseTime; GCOptions.DryRun reports
//     them without removing anything (gc_remote.go, with the one window
//     a lease cannot close: a pause longer than LeaseTime).
//
// What a remote does not cover yet: ConvertCompression (refused: see its
// doc comment).
//
// # Lifecycle
//
// What each call of a session's life leaves on disk when it returns nil,
// and after a crash during it (each call's doc comment has the details):
//
//   - [Store.Create]: session.json, durable, with chunks/ and blobs/ (with
//     Options.DeferCreate: nothing, until the session's first write, which
//     makes them first). A crash leaves no session or a whole empty one.
//   - [Store.Fork]: the fork's session.json naming the parent and the
//     event (Meta.ForkedFrom); nothing of the parent is read for writing,
//     locked or copied. A crash leaves no fork or a whole one.
//   - Lane calls: lanes.json replaced atomically, naming only durable
//     events; a crash leaves the old lanes or the new.
//   - [Store.Delete]: the session directory moved into trash/ under one
//     rename, both directories synced, and kept there whole for
//     Options.TrashFor ([Store.Undelete] renames it back, both directories
//     synced; [Store.Purge] and the end of the period rename it to a
//     removal name, synced, then remove it); a crash leaves the
//     session whole or gone, and a writable Open removes what is on its
//     way out. With
//     Options.Remote, a delete marker created as the log's next object
//     comes first: after it the session is gone for every Store.
//     [Store.Prune] deletes so, one session at a time, exactly the sessions
//     its dry run lists for the same state; [Store.GCStore] is GC of every
//     session, beside appends, plus the trash.
//   - [Store.Upgrade] and [ConvertCompression]: each chunk rewritten to a
//     temporary file, synced and renamed over the old one, session.json
//     (or sessionstore.json) last; a crash leaves a session that opens with
//     the same events, old or new form, and a second call finishes.
//   - Appends with caller ids or an expected parent ([Store.AppendWith]):
//     as any append; a refused one writes nothing.
//
// # Concurrency
//
// A Store is safe for concurrent use by any number of goroutines. Appends
// to one session are serialized (each takes the newest event at its turn as
// its parent) and group-committed: they share writes and fdatasyncs, and
// each returns once its own event is durable (commit.go). A failed write
// fails every append whose record it carried, or that was queued behind
// it, and the session goes on, with a Branch selection those appends used
// pending again; a failed sync stops the session's writes
// (ErrSessionFailed) until the store is reopened, also when the store closes
// the session to make room and opens it again, and the session then shows
// the events acknowledged before the failure, not the ones the failed sync
// carried. Appends to different sessions
// run in parallel. A Store keeps at most Options.MaxOpenSessions sessions
// open, closing the least recently used idle one (as Close would) when it
// needs room; a pending Branch selection survives that.
//
// An append may carry ids the caller chose ([Event.ID], a UUIDv7) as
// idempotency keys, and [Store.AppendWith] may state the parent it
// expects: a retry of an append already stored with the same content
// returns the stored events and writes nothing, other content is
// [ErrConflict], and so is an expected parent that is no longer the next
// one (retry.go). Both are checked under the session's lock against the
// published events and those still in flight, on local files and with
// Options.Remote alike, so that a harness retrying after a timeout, a
// crash or a handoff to another Store gets one copy of each event. With
// AppendOptions.KeepTime an append stores the times its events carry
// instead of the time of the append: the importers (package importer)
// write another tool's history with its own timestamps and with ids
// derived from it, so importing again adds nothing.
//
// Across processes, one writer per session: the LOCK file is held with
// flock(2), which the kernel releases if the process dies, and a second
// writer gets ErrLocked at once, or waits for the lock until its context
// ends with Options.WaitForLock. A store opened with Options.ReadOnly
// reads beside a writer in another process without a lock and without
// writing anything (readonly.go); [Store.Revision] tells a poller cheaply
// whether anything changed. [Store.Meta] reads only session.json, and
// [Store.List] the catalogue and the session.json files it cannot vouch
// for; neither takes a lock. Writers of different sessions, in any
// processes, take the catalogue's lock file only to append a record (or
// rewrite the catalogue), never while holding it across a session's lock.
//
// [Store.Subscribe] delivers a session's events to subscribers once they
// are durable, and [Store.Publish] fans out live, non-durable deltas (hub.go).
// [Store.SubscribeFrom] first replays the events after a given one, so a
// consumer that records the last event it processed resumes where it
// stopped (stream.go); on a follower, both hear every Store's appends.
// Neither ever waits for a slow subscriber: its bounded queue drops updates
// and tells it how many it missed. With Options.DurableDeltas, Publish
// also writes each delta to the session's stream (stream_durable.go,
// internal/deltalog), synced within DeltaSyncInterval, so that
// [Store.PartialOutput] finds an interrupted answer after a crash, and
// [Store.Tail] follows a session from a cursor in any process on the
// machine: committed events and durable deltas in one order (tail.go).
//
// [Store.Search] finds events by the words and phrases of their records
// across the sessions a Query selects, through a derived index caught up
// at each Search (search.go, searchindex.go, internal/search,
// docs/search.md); [Store.Usage] adds up the token usage of a session, a
// branch or a subagent tree, kept with the session's metadata
// (usage.go, docs/usage.md).
package sessionstore
