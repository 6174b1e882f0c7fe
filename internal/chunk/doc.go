// Package chunk reads a session's chunks: the numbered files of
// chunks/ (internal/layout names them), each a run of framed chunk lines
// (internal/eventline, internal/jsonl), plain or sealed into the
// compressed format of internal/zchunk.
//
// Forms and List say which chunks a directory holds and in which files;
// Open opens one for reading by logical offset, its plain file if there
// is one, else its sealed file. A Reader reads records by location through
// a window, keeping the files it opened until Close. Walk decodes the
// records of a chunk in order and tells a torn tail (a write a crash cut
// short, or the free space of a preallocated chunk with holes of sectors
// that never reached the disk: Hole) from damage (an invalid stretch
// followed by a valid record).
//
// ParentWalk reads a path from its newest event to the root by the
// parent location each line names, checking that each line holds the
// event its child names as parent.
//
// The package reads and never writes, so it leaves nothing for a crash
// to damage; what a crash can leave in a chunk is what Walk reads: a
// torn tail, zeros of free space, holes. The writer of chunks is
// internal/chunkwriter, above.
//
// Damage in a chunk comes back as a *corrupt.Error naming the file and
// the offset (a missing chunk file too, at offset 0); damage in a sealed
// file's format as internal/zchunk's *FormatError; a refusal of the file
// system (a link, a FIFO, a file too large) as the file system reports
// it. The root package turns each into its *CorruptionError. Any other
// error is an I/O error, returned as it is.
package chunk
