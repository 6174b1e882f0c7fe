package seam

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// TestBlobObjects: a blob stored as an object is fetched back into a
// session directory, verified and durable; a bad object under the digest
// is replaced by the next put, and is refused as damage naming its key
// by a fetch.
func TestBlobObjects(t *testing.T) {
	ctx := context.Background()
	obj, id := newMemObjects(), uuid.New()
	rec := []byte("a record stored as a blob, a record stored as a blob")
	d := sha256.Sum256(rec)
	stored := blob.Encode(rec, nil)
	size := int64(len(rec))

	m := vfs.NewMemFS()
	require.NoError(t, durable.MkdirAll(m, "/s/"+layout.BlobsDir, 0o700))
	err := FetchBlob(ctx, obj, m, id, "/s", d, size, 0o600, 0o700)
	var ce *corrupt.Error
	require.ErrorAs(t, err, &ce, "missing from the object store")
	assert.Equal(t, BlobKey(id, d), ce.Path)

	require.NoError(t, obj.Put(ctx, BlobKey(id, d), []byte("damaged")))
	err = FetchBlob(ctx, obj, m, id, "/s", d, size, 0o600, 0o700)
	require.ErrorAs(t, err, &ce, "a damaged object")
	assert.Equal(t, BlobKey(id, d), ce.Path)
	assert.True(t, blob.Missing(m, "/s", d), "nothing written")

	require.NoError(t, PutBlobObject(ctx, obj, id, d, stored, size, nil), "replaces the bad object")
	require.NoError(t, PutBlobObject(ctx, obj, id, d, stored, size, nil), "reuses the good one")
	require.NoError(t, FetchBlob(ctx, obj, m, id, "/s", d, size, 0o600, 0o700))
	got, err := blob.Read(m.CrashClone(vfs.KeepSynced, 0), "/s", d, size)
	require.NoError(t, err)
	assert.Equal(t, rec, got)
}

// TestDownloadSealed: a sealed chunk downloads under its name, durable;
// one whose size differs from the log's, or that is missing, is damage
// naming its key and leaves nothing under the name.
func TestDownloadSealed(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	src := vfs.NewMemFS()
	records := []byte("{\"r\":1}\n{\"r\":2}\n")
	require.NoError(t, zchunk.Write(src, "/c.zst", records, []byte("{}\n"), 0o600))
	b, err := vfs.ReadFile(src, "/c.zst")
	require.NoError(t, err)
	require.NoError(t, obj.Put(ctx, "sealed", b))

	m := vfs.NewMemFS()
	require.NoError(t, durable.MkdirAll(m, "/s/chunks", 0o700))
	path := filepath.Join("/s/chunks", layout.ChunkName(1)+layout.SealedExt)
	for name, s := range map[string]Sealed{
		"other size": {Chunk: 1, Key: "sealed", Size: int64(len(records)) + 1},
		"missing":    {Chunk: 1, Key: "absent", Size: int64(len(records))},
	} {
		_, err := DownloadSealed(ctx, obj, m, path, s, 0o600)
		var ce *corrupt.Error
		if assert.ErrorAs(t, err, &ce, name) {
			assert.Equal(t, s.Key, ce.Path, name)
		}
		_, err = m.Stat(path)
		assert.Error(t, err, "nothing under the name")
	}

	n, err := DownloadSealed(ctx, obj, m, path, Sealed{Chunk: 1, Key: "sealed", Size: int64(len(records))}, 0o600)
	require.NoError(t, err)
	assert.Equal(t, int64(len(b)), n)
	zr, err := zchunk.Open(m.CrashClone(vfs.KeepSynced, 0), path)
	require.NoError(t, err, "durable under its name")
	defer zr.Close()
	assert.Equal(t, int64(len(records)), zr.Size())
}
