// Package blob is a session's content-addressed blob store: the files
// under a session directory's blobs/sha256/, each one record, compressed
// with zstd, named by the SHA-256 of the record's bytes
// (internal/layout's BlobPath):
//
//	blobs/sha256/<first 2 hex digits>/<remaining 62 hex digits>.zst
//
// A record may also be stored split (PutSplit, strings.go): its long
// strings each a blob of its own, the record's blob a table of where
// they go and the rest of the record; Read puts them back.
//
// It holds the files' encoding (Encode, EncodeSplit, Decode, DecodeWith),
// the verified write (Put, PutSplit) and read (Read, ReadWith, ReadFrom),
// the strings of a record (Strings, Skeleton) and of a split blob (Refs,
// FileRefs), the names of blobs and of their temporary files (Name,
// TempName, TempFor), and what a collection of unreferenced blobs needs
// (KeptAside, KeptAsidePrefix, Sweep, which keeps the strings of every
// split blob it keeps). Which
// blobs a session refers to, and when a blob may go, is decided above:
// the package never reads an event or an index.
//
// Durable on return: when Put returns nil the blob's content, its name in
// its prefix directory and (the first time a Dirs sees that directory)
// the prefix directory's name and its parent's are synced, so a line that
// names the blob, written after, never outlives it. An existing blob is
// reused only after its content verifies, and is synced again. Sweep
// returns after syncing every directory it removed a file from.
//
// What a crash can leave: a blob's name with incomplete content (a crash
// before Put's syncs end; no line names it yet), temporary files
// ("<name>.<n>.tmp"), and prefix directories whose names are not durable.
// None of them is read as a record: Read verifies every blob, and Put
// writes over a blob that does not verify.
//
// Damage: Read, ReadWith and Decode check the frame's declared size,
// decompress, and compare the record with its digest and size; a missing
// blob, a file larger than its record can be stored in, a frame that does
// not decode or a record that does not match is a *corrupt.Error naming
// the file (or, for Decode, the name it is given: an object's key). A
// refusal of the file system (a link, a FIFO, a file too large) is
// returned as the file system reports it; the root package turns both
// into its *CorruptionError. A failed sync of Put's file or directories
// wraps durable.ErrUnsynced, as does a failed directory sync in Sweep:
// the files' state is then unknown, and the caller stops writing.
//
// Concurrency: Put, Read and Decode are safe for concurrent use, and two
// Puts of the same blob at once each write a temporary file of their own;
// their renames replace a name with the same content. A Dirs has its own
// mutex.
package blob
