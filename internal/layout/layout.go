package layout

import (
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Names at the store root.
const (
	// RootConfig records how a root stores its chunks.
	RootConfig = "sessionstore.json"
	// SessionsDir holds a directory for each session, named by its id.
	SessionsDir = "sessions"
	// TrashDir holds sessions moved there to be deleted.
	TrashDir = "trash"
	// ForkCacheDir holds the copies of remote sessions that forks'
	// prefixes are read from; derived from the object store.
	ForkCacheDir = "forkcache"
	// HolderFile names the root as the holder of remote sessions' leases.
	HolderFile = "holder.id"
)

// Names in a session directory.
const (
	MetaFile    = "session.json"
	IndexFile   = "index.jsonl"
	ChunksDir   = "chunks"
	BlobsDir    = "blobs"
	LockFile    = "LOCK"
	LanesFile   = "lanes.json"
	RemoteState = "remote.json"
	// JournalMarker names the journal that may hold the session's
	// records not yet synced in its chunks (internal/journal: ReadMarker,
	// WriteMarker).
	JournalMarker = "JOURNAL"
)

// Chunk files are named by a zero-padded decimal sequence number:
// 000000.jsonl, 000001.jsonl, ... (more digits past 999999). A sealed
// chunk stored compressed adds SealedExt: 000000.jsonl.zst.
const (
	ChunkExt  = ".jsonl"
	SealedExt = ".zst"
	// SealTemp ends the temporary file of a sealing under way: the
	// sealed name and this.
	SealTemp = ".tmp"
	// RewriteTemp ends a plain chunk's temporary file while it is being
	// rewritten (an upgrade or a change of compression).
	RewriteTemp = ".rewrite.tmp"
	// DownloadTemp ends the temporary file of a sealed chunk's download
	// under way (a session with a remote): the sealed name and this. Not
	// a sealing's (SealTemp), whose leftovers recovery removes: a
	// download may run beside the session's open.
	DownloadTemp = ".download"
)

// BlobExt ends a blob's file name.
const BlobExt = ".zst"

// SessionDir is the directory of session id under root.
func SessionDir(root string, id uuid.UUID) string {
	return filepath.Join(root, SessionsDir, id.String())
}

// ChunkName is the name of plain chunk n's file.
func ChunkName(n uint32) string { return fmt.Sprintf("%06d%s", n, ChunkExt) }

// SealedName is the name of sealed chunk n's file.
func SealedName(n uint32) string { return ChunkName(n) + SealedExt }

// ParseChunkName returns the number of a chunk file name, plain or
// sealed, and whether it is sealed; ok is false for any other name
// (temporary or broken-tail files, a number not written as ChunkName
// writes it).
func ParseChunkName(name string) (n uint32, sealed, ok bool) {
	plain, sealed := strings.CutSuffix(name, SealedExt)
	digits, ok := strings.CutSuffix(plain, ChunkExt)
	if !ok || len(digits) < 6 || (len(digits) > 6 && digits[0] == '0') {
		return 0, false, false
	}
	v, err := strconv.ParseUint(digits, 10, 31)
	if err != nil || ChunkName(uint32(v)) != plain {
		return 0, false, false
	}
	return uint32(v), sealed, true
}

// ParseSealTemp reports whether name is the temporary file of a sealing
// of a chunk.
func ParseSealTemp(name string) bool {
	base, ok := strings.CutSuffix(name, SealedExt+SealTemp)
	if !ok {
		return false
	}
	_, _, ok = ParseChunkName(base)
	return ok
}

// BrokenTail is where the bytes of a torn tail cut from the chunk file at
// path at offset off are kept aside (before any ".<n>" that keeps an
// earlier copy).
func BrokenTail(path string, off int64) string { return fmt.Sprintf("%s.broken-%d", path, off) }

// BlobPath is where the blob with SHA-256 digest d lives under a session
// directory.
func BlobPath(dir string, d [32]byte) string {
	h := hex.EncodeToString(d[:])
	return filepath.Join(dir, BlobsDir, "sha256", h[:2], h[2:]+BlobExt)
}
