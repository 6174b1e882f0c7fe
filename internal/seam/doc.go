// Package seam is where the durable bytes of an open session leave the
// process: the files of a session kept in its directory (Local, and the
// active chunk appends go to, Chunk), and the format and keys of the log
// of a session kept in an object store. The engine above decides what is
// written, in which order, and when a fact must be durable; the seam
// decides only where the bytes go and how they are made durable there.
// It speaks bytes, chunk numbers and offsets, digests and ids: session.json
// and the lanes file are bytes to it, a sealed chunk's embedded index is
// the lines its caller encoded, and damage is a *corrupt.Error
// (internal/corrupt) or the file system's refusal, which the root package
// turns into its *CorruptionError.
//
// What each call promises when it returns nil (local files):
//
//   - Chunk.WriteAt writes a commit group's bytes at the end of the
//     chunk's data, first growing the preallocated free space (zeros,
//     which readers skip); Chunk.Sync (fdatasync) makes every byte
//     written durable. Before Sync a crash keeps any part of them; the
//     caller acknowledges nothing until Sync returns. A failed WriteAt
//     leaves the data ending where it began (the file cut back), or, when
//     the cut fails too, wraps durable.ErrUnsynced.
//   - Chunk.Reserve and Chunk.Fill split WriteAt for a caller whose
//     journal makes the bytes durable: Reserve grows the file first, Fill
//     writes the bytes, without a sync, once the journal holds them.
//   - CreateChunk: chunk n exists, empty, and a crash keeps its name.
//   - SealChunk: the chunk's records, compressed, with their index lines
//     embedded, durable under the sealed name before the plain chunk is
//     removed; a crash leaves one or both, whole.
//   - PutBlob: the record, addressed by its SHA-256, durable with its name
//     before the caller writes a line naming it (internal/blob).
//   - PutMeta, PutHead, PutLanes: the file replaced atomically, the old or
//     the new content whole after a crash, the new one durable on return.
//
// A failed sync is never retried: after one, the state of what it was to
// make durable is unknown (durable.ErrUnsynced), and the caller stops
// writing the session until its files are reconciled again.
//
// A session kept in an object store (the root package's remote mode) is
// a log of numbered, immutable objects under LogPrefix, each a Header
// line and a payload (EncodeObject, DecodeObject): commit groups' bytes,
// seal records, session.json, the lanes file, and markers (create, open,
// release, delete) that carry the log's whole State before them. This
// package holds that format, the State (Apply, and the ranges of data
// objects sealing made unneeded: SeqRange), the object keys, the errors
// of the mode, the object store's interface (Objects), the log's fenced
// writer and its reader (LogWriter: PutLocked, PutData with up to
// Window data objects in flight acknowledged in log order, FillGaps and
// FillLocked for a Store taking the session; ReadView, what an open
// reads; StoreClock, the object store's clock), and the transfers of whole files: a blob stored
// as an object (PutBlobObject) and fetched back verified (FetchBlob), a
// sealed chunk downloaded and checked before it takes its name
// (DownloadSealed); what goes into the log, and when, is the root
// package's.
// Durable remotely means: the object's Create returned nil, after the
// object store answered. Fencing rests on Create alone: of any number of
// Creates of one key, exactly one succeeds. A writer creates object n+1
// after its own n (or, with data objects in flight, issues it before n
// is stored but acknowledges it only after), so a second writer that took the session (after the
// lease time on the object store's clock) makes the first one's next
// Create fail with ErrObjectExists: the first is fenced (ErrFenced) and
// acknowledges nothing more. With data objects in flight, the second
// writer first fills the numbers the first left free, and those after
// its marker the first's Creates may still take, with voids (the root
// package's remote.go, "Several Creates in flight", states the rules). A partitioned writer cannot acknowledge
// anything: its Create does not return nil; a Create whose answer is lost
// leaves the object's state unknown (ErrRemote), settled by the next open
// reading the log. A decoded object is checked by its CRC-32C: damage is
// a *corrupt.Error naming the key, another version a *VersionError.
//
// A second writer of local files: the seam takes no lock. The caller holds the session's
// lock file before it builds a Local for writing, so no other process
// writes the same session's files; within the process, the chunk calls
// come from the session's one commit pipeline, and only the blob calls
// (safe for concurrent use) run beside them.
package seam
