package blob

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Report says what Sweep found and removed.
type Report struct {
	Kept    int   // blobs kept
	Removed int   // blobs and temporary files removed
	Bytes   int64 // their size on disk
}

// Sweep removes the files of session directory dir's blob store that
// are neither a blob keep reports true for, nor a string of such a blob
// (see "String blobs"), nor the temporary file of a blob busy reports
// true for (one a Put may be writing), and returns what it kept and
// removed. Other files in the prefix directories go too. It reads the
// string table of every kept split blob first, and removes nothing if
// one cannot be read (a *corrupt.Error naming it). It stops at ctx's end
// or the first failure, having removed what it removed; the directory
// it was in is then not synced. Every prefix directory it removed a file
// from is synced before it goes on, so the removals are durable when it
// returns nil; a failed sync wraps durable.ErrUnsynced. A session
// without blobs is an empty report. With dry, it removes nothing and
// reports what it would remove.
func Sweep(ctx context.Context, fsys vfs.FS, dir string, keep, busy func(d [32]byte) bool, dry bool) (Report, error) {
	var rep Report
	root := filepath.Join(dir, layout.BlobsDir, "sha256")
	subs, err := fsys.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, err
	}
	// First the blobs kept, and the strings of the split ones among them.
	names := make([][]string, len(subs))
	strs := map[[32]byte]bool{}
	for i, sub := range subs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		if names[i], err = fsys.ReadDir(filepath.Join(root, sub)); err != nil {
			return rep, err
		}
		for _, name := range names[i] {
			if d, ok := Name(sub, name); ok && keep(d) {
				refs, err := FileRefs(fsys, dir, d)
				if err != nil && !errors.Is(err, os.ErrNotExist) {
					return rep, err
				}
				for _, r := range refs {
					strs[r.Digest] = true
				}
			}
		}
	}
	for i, sub := range subs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		removed := false
		for _, name := range names[i] {
			path := filepath.Join(root, sub, name)
			if d, ok := Name(sub, name); ok && (keep(d) || strs[d]) {
				rep.Kept++
				continue
			}
			if d, ok := TempName(sub, name); ok && busy(d) {
				continue // being written by a Put in progress
			}
			if info, err := fsys.Stat(path); err == nil {
				rep.Bytes += info.Size()
			}
			if dry {
				rep.Removed++
				continue
			}
			if err := fsys.Remove(path); err != nil {
				return rep, err
			}
			rep.Removed++
			removed = true
		}
		if removed {
			if err := fsys.SyncDir(filepath.Join(root, sub)); err != nil {
				return rep, fmt.Errorf("%w: %w", err, durable.ErrUnsynced)
			}
		}
	}
	return rep, nil
}

// KeptAside adds to full the digests that the kept-aside files of
// session directory dir name, and returns the digits of those cut short
// (KeptAsideDigests). The kept-aside files are those of the session and
// chunks directories whose name holds ".broken": bytes a repair cut from
// a log or HEAD, which may be torn or damaged, so they are scanned for
// digests rather than decoded. It reads and changes nothing else.
func KeptAside(fsys vfs.FS, dir string, full map[[32]byte]bool) (partial []string, err error) {
	for _, d := range []string{dir, filepath.Join(dir, layout.ChunksDir)} {
		names, err := fsys.ReadDir(d)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if !strings.Contains(name, ".broken") {
				continue
			}
			if err := keptAsideFile(fsys, filepath.Join(d, name), full, &partial); err != nil {
				return nil, err
			}
		}
	}
	return partial, nil
}

// keptAsideFile scans the kept-aside file at path for blob digests
// (KeptAsideDigests) a block at a time: a kept tail may be of any size.
func keptAsideFile(fsys vfs.FS, path string, full map[[32]byte]bool, partial *[]string) error {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	const span = len(canonical.DigestPrefix) + 64 // a digest, whole
	buf := make([]byte, 0, 1<<20+span)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf[len(buf):cap(buf)], off)
		buf, off = buf[:len(buf)+n], off+int64(n)
		eof := errors.Is(err, io.EOF)
		if err != nil && !eof {
			return err
		}
		if eof {
			keptAsideFrom(buf, len(buf), full, partial)
			return nil
		}
		// The digests that start where the next block cannot end them.
		end := max(len(buf)-span+1, 0)
		keptAsideFrom(buf, end, full, partial)
		buf = buf[:copy(buf, buf[end:])]
	}
}

// KeptAsideDigests scans kept-aside bytes b for blob digests: each
// "sha256:" followed by 64 lower-case hex digits goes into full (the
// form of chunk lines), and the digits after one followed by fewer (1 to
// 63: cut short by the end of the bytes or by damage) into partial. A
// digest that damage turned into another is not found.
func KeptAsideDigests(b []byte, full map[[32]byte]bool, partial *[]string) {
	keptAsideFrom(b, len(b), full, partial)
}

// keptAsideFrom is KeptAsideDigests for the digests whose "sha256:"
// starts before b[end].
func keptAsideFrom(b []byte, end int, full map[[32]byte]bool, partial *[]string) {
	at := 0
	for {
		i := bytes.Index(b[at:], []byte(canonical.DigestPrefix))
		if i < 0 || at+i >= end {
			return
		}
		at += i + len(canonical.DigestPrefix)
		n := 0
		for n < 64 && at+n < len(b) && (b[at+n] >= '0' && b[at+n] <= '9' || b[at+n] >= 'a' && b[at+n] <= 'f') {
			n++
		}
		var d [32]byte
		switch {
		case n == 64:
			hex.Decode(d[:], b[at:at+n])
			full[d] = true
		case n > 0:
			*partial = append(*partial, string(b[at:at+n]))
		}
		at += n
	}
}

// KeptAsidePrefix reports whether digest d starts with one of the digits
// in partial.
func KeptAsidePrefix(d [32]byte, partial []string) bool {
	if len(partial) == 0 {
		return false
	}
	h := hex.EncodeToString(d[:])
	for _, p := range partial {
		if strings.HasPrefix(h, p) {
			return true
		}
	}
	return false
}
