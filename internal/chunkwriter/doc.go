// Package chunkwriter appends framed records to the active (newest)
// chunk of one open session and seals full chunks in the background. It
// speaks locations, index entries and bytes: what a record holds, and
// when it must be durable, is its caller's (the root package's open
// session and group commit); where the bytes go and how they are made
// durable is the Files and Chunk the caller passes in (internal/seam's
// local files, or the root package's remote ones).
//
// Protocol of one append: the record is queued in memory (Enqueue, which
// returns its location), and the session's group commit takes the queue
// (TakeQueue), writes it with one Chunk.WriteAt at the end of the data,
// then syncs the chunk (Chunk.Sync, fdatasync), sharing both between the
// records queued since the last sync, or has a journal make them durable
// and writes them into the chunk unsynced (MarkUnsynced). A new chunk is
// created and its existence made durable (Files.CreateChunk) before the
// first record is written to it, so a durable record never sits in a
// file whose name a crash could lose.
//
// Free space: a Chunk may preallocate zeros past the end of its data
// (internal/seam's Chunk grows it in steps, so that most fdatasyncs need
// no journal commit for a new file size). Records hold no zero byte, so
// zeros running to the end of a plain chunk are free space, not a torn
// write; Trim cuts them off when the chunk is closed or full (Rotate),
// unless records are queued.
//
// What is durable when a call returns nil:
//
//   - Enqueue, TakeQueue, GiveBack, CutBack, DropQueue: nothing; they
//     change memory only.
//   - WriteAt: nothing (the bytes are written, not synced); a failed
//     WriteAt leaves the chunk's data ending where it began, or wraps
//     durable.ErrUnsynced when even the cut back failed (the chunk's state
//     is unknown, and the caller stops writing).
//   - OpenActive: nothing (it opens an existing chunk).
//   - Rotate, Checkpoint and Close: every byte written into the active
//     chunk unsynced (MarkUnsynced) is synced first, so the chunk holds
//     its records durably by itself before it is closed or sealed. A
//     failed sync in Rotate wraps durable.ErrUnsynced and leaves the chunk
//     open; Close closes it either way. Rotate then starts the next
//     chunk (Files.CreateChunk): it exists, empty, and a crash keeps its
//     name.
//   - Sealing (after Rotate, when compressing, once the appends pause for
//     Config.SealIdle or SealBacklog full chunks wait; AwaitSealing starts
//     it at once and waits for it; SealActive seals the active chunk at
//     once, with the caller waiting): the full chunk's records,
//     compressed, with their index lines
//     embedded, durable under the sealed name before the plain chunk is
//     removed (Files.SealChunk). Sealing saves space and nothing depends
//     on it: a failure is logged, the plain chunk stays and the next
//     rotation retries it.
//
// What a crash leaves: in the active chunk, its synced records whole,
// then any part of the bytes written since the last sync (a torn tail),
// then the preallocated free space, zeros, possibly with holes of
// sectors that never reached the disk; internal/chunk's Walk tells these
// from damage, and internal/recovery cuts them off. Of a chunk being
// sealed, the plain file, the sealed file, or both, whole, and perhaps a
// temporary file of the interrupted sealing, which recovery removes.
//
// Concurrency: a Writer belongs to one session and is used with the
// session's mutex (Config.Mu) held. The sealing goroutine takes that
// mutex too, and releases it while it compresses; AwaitSealing releases
// it while it waits. Config.Embed and Config.Resealed are called with the
// mutex held.
package chunkwriter
