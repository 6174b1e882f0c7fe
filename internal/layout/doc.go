// Package layout names the files of a store root and of a session
// directory. The names are part of the format: a build reads the
// directories another build wrote by them, so none of them may change.
//
//	<root>/
//	  sessionstore.json           how the root stores its chunks (RootConfig)
//	  holder.id                   the root's id as a holder of remote leases
//	  sessions/<id>/              one directory a session (SessionDir)
//	    LOCK                      the writer's lock
//	    session.json              the metadata
//	    HEAD                      the active branch's tip (internal/headfile)
//	    index.jsonl               derived: index lines of the plain chunks
//	    lanes.json                named branches
//	    remote.json               the log object the files match (remote mode)
//	    chunks/000000.jsonl       the log, in numbered chunks (ChunkName)
//	    chunks/000001.jsonl.zst   a sealed chunk (internal/zchunk)
//	    blobs/sha256/ab/cdef….zst a blob, by its digest (BlobPath)
//	  trash/                      sessions being deleted
//	  forkcache/                  copies of remote sessions forks read
//
// The catalogue's files at the root and the journal's directory are
// named by the packages that write them.
//
// The package holds names and pure functions of them: it reads and
// writes nothing, so a crash leaves nothing of it.
package layout
