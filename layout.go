package sessionstore

import "github.com/sessionstore/sessionstore/internal/layout"

// The names of the store root's and a session directory's files
// (internal/layout), under the names the package's engine has used for
// them.
const (
	rootConfigName  = layout.RootConfig
	sessionsDir     = layout.SessionsDir
	trashDir        = layout.TrashDir
	forkCacheDir    = layout.ForkCacheDir
	holderFile      = layout.HolderFile
	metaFile        = layout.MetaFile
	indexName       = layout.IndexFile
	chunksDir       = layout.ChunksDir
	blobsDir        = layout.BlobsDir
	lockName        = layout.LockFile
	lanesFile       = layout.LanesFile
	remoteStateFile = layout.RemoteState
	chunkExt        = layout.ChunkExt
	sealedExt       = layout.SealedExt
	blobExt         = layout.BlobExt
	upgradeTemp     = layout.RewriteTemp
)

// chunkName is the name of plain chunk n's file.
func chunkName(n uint32) string { return layout.ChunkName(n) }

// parseChunkName returns the number of a chunk file name, plain or sealed,
// or false for any other name (temporary or broken-tail files).
func parseChunkName(name string) (uint32, bool) {
	n, _, ok := layout.ParseChunkName(name)
	return n, ok
}

// blobPath is where the blob with digest d lives under a session directory.
func blobPath(dir string, d [32]byte) string { return layout.BlobPath(dir, d) }
