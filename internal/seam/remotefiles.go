package seam

import (
	"context"
	"errors"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// PutBlobObject stores stored, the blob file of digest d holding a record
// of size bytes, as session id's immutable blob object, before a line
// naming it is written: durable in the object store when it returns nil.
// An object already there is reused once it verifies (blob.DecodeWith,
// a split blob's strings read from src, the local ones); a bad one is
// replaced. A split blob's strings go first (the caller's), so that its
// object never names a string the object store lacks. A failed call
// wraps ErrRemote.
func PutBlobObject(ctx context.Context, obj Objects, id uuid.UUID, d [32]byte, stored []byte, size int64, src blob.StringSource) error {
	key := BlobKey(id, d)
	err := obj.Create(ctx, key, stored)
	if errors.Is(err, ErrObjectExists) {
		old, gerr := obj.Get(ctx, key, 0, -1)
		if gerr != nil {
			return RemoteErr("get", key, gerr)
		}
		if _, verr := blob.DecodeWith(key, old, d, size, src); verr == nil {
			return nil
		}
		// A bad object under the digest: replace it.
		err = obj.Put(ctx, key, stored)
	}
	if err != nil {
		return RemoteErr("create", key, err)
	}
	return nil
}

// FetchBlob downloads blob d of session id, of a record of size bytes,
// into its directory dir, verified by its digest first, and replaces the
// local file atomically: whole and durable when it returns nil. A split
// blob's strings missing from dir are fetched first, each so (a string
// is never split itself: one level). A missing or damaged object is a
// *corrupt.Error naming its key; a failed call wraps ErrRemote.
func FetchBlob(ctx context.Context, obj Objects, fsys vfs.FS, id uuid.UUID, dir string, d [32]byte, size int64, perm, dirPerm os.FileMode) error {
	return fetchBlob(ctx, obj, fsys, id, dir, d, size, perm, dirPerm, true)
}

func fetchBlob(ctx context.Context, obj Objects, fsys vfs.FS, id uuid.UUID, dir string, d [32]byte, size int64, perm, dirPerm os.FileMode, split bool) error {
	key := BlobKey(id, d)
	b, err := obj.Get(ctx, key, 0, -1)
	if errors.Is(err, ErrObjectNotFound) {
		return corrupt.Errorf(key, 0, "blob is missing from the object store")
	}
	if err != nil {
		return RemoteErr("get", key, err)
	}
	var src blob.StringSource
	if split && blob.IsSplit(b) {
		refs, err := blob.Refs(b)
		if err != nil {
			return corrupt.Errorf(key, 0, "split blob: %v", err)
		}
		for _, r := range refs {
			if !blob.Missing(fsys, dir, r.Digest) {
				continue
			}
			if err := fetchBlob(ctx, obj, fsys, id, dir, r.Digest, r.Size, perm, dirPerm, false); err != nil {
				return err
			}
		}
		src = blob.LocalStrings(fsys, dir)
	}
	if _, err := blob.DecodeWith(key, b, d, size, src); err != nil {
		return err
	}
	path := layout.BlobPath(dir, d)
	if err := durable.MkdirAll(fsys, filepath.Dir(path), dirPerm); err != nil {
		return err
	}
	// Reads of several records that share a string fetch it at once:
	// each writes a temporary file of its own, and the renames replace
	// the name with the same bytes.
	return durable.ReplaceFileAs(fsys, filepath.Dir(path), filepath.Base(path), blob.TempFor(d), b, perm)
}

// DownloadSealed fetches sealed chunk s into path (a chunk's local
// sealed name), checked before it takes its name. It returns the bytes
// downloaded. The chunk is synced before it takes its name, and the name
// after: after a crash a sealed chunk is whole under its name or not
// there, and its bytes are never on the disk without a name (a leftover
// "<path>"+layout.DownloadTemp is the caller's to remove). A missing object, or one that
// is not a sealed chunk of s.Size plain bytes (checkSealed: its structure;
// each block is checked when first read), is a *corrupt.Error naming its
// key; a failed call wraps ErrRemote.
func DownloadSealed(ctx context.Context, obj Objects, fsys vfs.FS, path string, s Sealed, perm os.FileMode) (int64, error) {
	b, err := obj.Get(ctx, s.Key, 0, -1)
	if errors.Is(err, ErrObjectNotFound) {
		return 0, corrupt.Errorf(s.Key, 0, "sealed chunk %d is missing from the object store", s.Chunk)
	}
	if err != nil {
		return 0, RemoteErr("get", s.Key, err)
	}
	tmp := path + layout.DownloadTemp
	if err := writeTemp(fsys, tmp, b, perm); err != nil {
		return 0, err
	}
	if err := checkSealed(fsys, tmp, s); err != nil {
		_ = durable.RemoveFile(fsys, tmp)
		return 0, err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return 0, err
	}
	return int64(len(b)), fsys.SyncDir(filepath.Dir(path))
}

// checkSealed checks the structure of the sealed chunk at path, which
// must hold s.Size plain bytes: its footer, its frame table (under its
// CRC) and the tiling of its frames and blocks (zchunk.Open). It does not
// decompress the blocks: each is checked (its CRC-32C in the table, its
// zstd content checksum) when a read first needs it, so a block is
// verified once, by the read that uses it, and a restore that reads the
// active path decompresses the path's blocks and no others. A damaged
// block found then is a *zchunk.FormatError naming the local file and
// the block's offset (the root package reports it under the object's key
// and downloads the chunk again).
func checkSealed(fsys vfs.FS, path string, s Sealed) error {
	zr, err := zchunk.Open(fsys, path)
	if err != nil {
		return corrupt.Errorf(s.Key, 0, "sealed chunk: %v", err) // the object is damaged, not the temporary file
	}
	defer zr.Close()
	if zr.Size() != s.Size {
		return corrupt.Errorf(s.Key, 0, "sealed chunk holds %d bytes, the log says %d", zr.Size(), s.Size)
	}
	return nil
}

// writeTemp writes b to a new file at path and syncs it.
func writeTemp(fsys vfs.FS, path string, b []byte, perm os.FileMode) error {
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
