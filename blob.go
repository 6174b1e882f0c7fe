package sessionstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Blobs
//
// A record whose compact JSON is larger than Options.BlobThreshold is not
// written into its chunk line. It is compressed with zstd and written once
// to
//
//	blobs/sha256/<first 2 hex digits>/<remaining 62 hex digits>.zst
//
// named by the SHA-256 of the record's bytes; the chunk line keeps
// "digest":"sha256:<hex>", the record's size and "record":null, and so does
// the index line. The same record appended twice, on any branch, is stored
// once. Every read decompresses the blob and checks its digest: a mismatch
// is a *CorruptionError naming the blob file.
//
// Durability: the blob is written to a temporary file and renamed into
// place; then the file and its directory are synced side by side (on
// journaling file systems the two syncs share one journal commit), and
// only after both the event that refers to it is written, so an
// acknowledged event never refers to a blob a crash can lose. A crash
// before both syncs end can leave the blob's name with incomplete
// content: no event refers to it, GC removes it, and an append of the
// same record finds it does not verify and writes it again (a blob that
// exists is reused only after its content is checked and synced).

// blobEncoder and blobDecoder are shared: EncodeAll and DecodeAll are safe
// for concurrent use. The decoder checks each frame's content checksum and
// bounds what it allocates by the largest record.
var (
	blobEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	blobDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRecordSizeLimit))
)

const blobExt = ".zst"

// blobPath is where the blob with digest d lives under a session directory.
func blobPath(dir string, d [32]byte) string {
	h := hex.EncodeToString(d[:])
	return filepath.Join(dir, blobsDir, "sha256", h[:2], h[2:]+blobExt)
}

// putBlob stores rec as a blob under dir (a session directory) and returns
// its digest. When it returns nil the blob and its directory entry are
// durable. An existing blob with the same digest is reused.
func putBlob(fsys vfs.FS, dir string, rec []byte, filePerm, dirPerm os.FileMode) ([32]byte, error) {
	d := sha256.Sum256(rec)
	path := blobPath(dir, d)
	sub := filepath.Dir(path)
	if _, err := fsys.Stat(path); err == nil {
		// Written before, perhaps by an append a crash interrupted before
		// the blob was durable: reuse it only if its content verifies,
		// then make sure the file and its name are durable.
		if _, err := readBlob(fsys, dir, d, int64(len(rec))); err == nil {
			f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
			if err != nil {
				return d, err
			}
			return d, syncBoth(fsys, f, sub)
		}
	}
	if err := mkdirDurable(fsys, sub, filepath.Join(dir, blobsDir), dirPerm); err != nil {
		return d, err
	}
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, filePerm)
	if err != nil {
		return d, err
	}
	if _, err := f.Write(blobEncoder.EncodeAll(rec, nil)); err != nil {
		f.Close()
		return d, err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		f.Close()
		return d, err
	}
	return d, syncBoth(fsys, f, sub)
}

// syncBoth syncs f and the directory dir concurrently, then closes f.
func syncBoth(fsys vfs.FS, f vfs.File, dir string) error {
	dirErr := make(chan error, 1)
	go func() { dirErr <- fsys.SyncDir(dir) }()
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if derr := <-dirErr; err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("%w: %w", err, errUnsynced)
	}
	return nil
}

// mkdirDurable creates dir and any missing parents up to (not including)
// root, syncing each parent whose entries changed.
func mkdirDurable(fsys vfs.FS, dir, root string, perm os.FileMode) error {
	if _, err := fsys.Stat(dir); err == nil {
		return nil
	}
	var missing []string
	for d := dir; d != root && d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := fsys.Stat(d); err == nil {
			break
		}
		missing = append(missing, d)
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range missing {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return fmt.Errorf("%w: %w", err, errUnsynced)
		}
	}
	return nil
}

// readBlob reads, decompresses and verifies the blob with digest d.
func readBlob(fsys vfs.FS, dir string, d [32]byte, size int64) ([]byte, error) {
	path := blobPath(dir, d)
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, corruptf(path, 0, "blob is missing")
	}
	if err != nil {
		return nil, err
	}
	rec, err := blobDecoder.DecodeAll(b, make([]byte, 0, size))
	if err != nil {
		return nil, corruptf(path, 0, "decompress blob: %w", err)
	}
	if sha256.Sum256(rec) != d || int64(len(rec)) != size {
		return nil, corruptf(path, 0, "blob content does not match its digest sha256:%x (%d bytes)", d, size)
	}
	return rec, nil
}

// parseDigest parses "sha256:<hex>".
func parseDigest(s string) ([32]byte, error) {
	var d [32]byte
	hexPart, ok := strings.CutPrefix(s, digestPrefix)
	if !ok || len(hexPart) != 64 {
		return d, fmt.Errorf("%w: digest %q is not sha256:<64 hex digits>", ErrInvalidEvent, s)
	}
	if _, err := hex.Decode(d[:], []byte(hexPart)); err != nil {
		return d, fmt.Errorf("%w: digest %q: %v", ErrInvalidEvent, s, err)
	}
	return d, nil
}

// Resolve returns ev with its record read from its blob and verified. An
// event whose record is inline (Digest empty) or already resolved is
// returned as it is.
//
// Errors: *CorruptionError for a missing blob or one whose content does not
// match its digest; ErrInvalidEvent for a malformed Digest; ErrClosed.
func (s *Store) Resolve(ctx context.Context, session uuid.UUID, ev Event) (Event, error) {
	if ev.Digest == "" || ev.Record != nil {
		return ev, nil
	}
	if err := s.begin(ctx); err != nil {
		return Event{}, err
	}
	defer s.end()
	d, err := parseDigest(ev.Digest)
	if err != nil {
		return Event{}, err
	}
	rec, err := readBlob(s.opts.fs, s.sessionDir(session), d, ev.Size)
	if err != nil {
		return Event{}, err
	}
	ev.Record = rec
	return ev, nil
}

// GCReport says what GC removed.
type GCReport struct {
	Kept    int   // blobs an event refers to
	Removed int   // unreferenced blobs and temporary files removed
	Bytes   int64 // their size on disk
}

// GC removes the blobs of a session that no event refers to (left by a
// crash between writing a blob and appending its event) and temporary blob
// files. It holds the session's mutex while it runs, so no blob is written
// under it, and never removes a blob that an event refers to, including the
// events of appends still in progress (written, or about to be, and not
// yet durable). Removals are made durable (directories synced) before it
// returns.
//
// Errors: ErrNotFound, ErrLocked, ErrSessionFailed, *CorruptionError for a
// damaged session (GC then removes nothing), ErrClosed.
func (s *Store) GC(ctx context.Context, session uuid.UUID) (GCReport, error) {
	var rep GCReport
	err := s.withHandle(ctx, session, func(h *handle) error {
		if err := h.writable(); err != nil {
			return err
		}
		referenced := map[[32]byte]bool{}
		for i := range h.entries {
			if h.entries[i].Blob {
				referenced[h.entries[i].Digest] = true
			}
		}
		for i := range h.inflight {
			if e := &h.inflight[i].entry; e.Blob {
				referenced[e.Digest] = true
			}
		}
		for d := range h.writingBlobs {
			referenced[d] = true
		}
		fsys := s.opts.fs
		root := filepath.Join(h.dir, blobsDir, "sha256")
		subs, err := fsys.ReadDir(root)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, sub := range subs {
			if err := ctx.Err(); err != nil {
				return err
			}
			names, err := fsys.ReadDir(filepath.Join(root, sub))
			if err != nil {
				return err
			}
			removed := false
			for _, name := range names {
				path := filepath.Join(root, sub, name)
				if d, ok := blobName(sub, name); ok && referenced[d] {
					rep.Kept++
					continue
				}
				if info, err := fsys.Stat(path); err == nil {
					rep.Bytes += info.Size()
				}
				if err := fsys.Remove(path); err != nil {
					return err
				}
				rep.Removed++
				removed = true
			}
			if removed {
				if err := fsys.SyncDir(filepath.Join(root, sub)); err != nil {
					h.failed = err
					return err
				}
			}
		}
		return nil
	})
	return rep, err
}

// blobName parses the digest out of a blob's directory and file name.
func blobName(sub, name string) ([32]byte, bool) {
	var d [32]byte
	h, ok := strings.CutSuffix(name, blobExt)
	if !ok || len(sub) != 2 || len(h) != 62 {
		return d, false
	}
	if _, err := hex.Decode(d[:], []byte(sub+h)); err != nil {
		return d, false
	}
	return d, blobPath("", d) == filepath.Join(blobsDir, "sha256", sub, name)
}
