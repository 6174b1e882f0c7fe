package blob

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// MaxRecordSize is the largest record a blob holds: the format's limit
// (internal/eventline).
const MaxRecordSize = eventline.MaxRecordSize

// encoder and decoder are shared: EncodeAll and DecodeAll are safe for
// concurrent use. The decoder checks each frame's content checksum and
// bounds what it allocates by the largest record.
//
// The encoder runs at SpeedDefault (about zstd level 3) and entropy codes
// the literals of a block in which it finds too few matches to pay
// (WithAllLitEntropyCompression), which SpeedDefault alone stores raw:
// base64 image data, which matches do not shorten, is stored at about 0.75
// of its size (as with the zstd command line) rather than 0.91 to 1.00,
// for 2.5 to 4 times the encoding time of such blocks, a few milliseconds
// per megabyte (BenchmarkBlobEncodeClaudeCode in the root package). Text,
// whose blocks have matches, is encoded as before, to the same bytes at
// the same speed.
//
// A blob is one standard zstd frame, with its content checksum, of blocks
// of at most 128 KiB of the record. The encoder writes a block compressed
// only when that is shorter than the block, and raw (the record's bytes as
// they are) otherwise, so a blob is never larger than its record by more
// than the frame's own overhead: the frame header (6 to 10 bytes for a
// record under 4 GiB: magic number, frame header descriptor, window
// descriptor for a record of up to 1 KiB or over 8 MiB, content size), 3
// bytes of block header per 128 KiB and the 4-byte checksum. That is 37
// bytes for a 1 MiB record (TestBlobIncompressible); nothing else is
// added, and a decoder of any version reads the frame.
var (
	encoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithAllLitEntropyCompression(true), zstd.WithEncoderConcurrency(1))
	decoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(MaxRecordSize))
)

// Encode returns rec as a blob file's content: one zstd frame (see
// above), appended to dst.
func Encode(rec, dst []byte) []byte { return encoder.EncodeAll(rec, dst) }

// Put stores rec, whose SHA-256 is d, as a blob under dir (a session
// directory, whose blobs/ directory exists and is durable, as made with
// the session). When it returns nil the blob and its directory entry are
// durable. An existing blob with the same digest is reused once its
// content verifies. Puts of one session may run at once, of the same blob
// too: each writes its own temporary file, and the renames replace a name
// with the same content.
//
// Durability: the file's data, its name in the prefix directory, and, the
// first time known sees that directory, the prefix directory's name in
// blobs/sha256 and that one's in blobs/ are synced at once: they are
// independent, and no line names the blob before all end. Another Put
// may have made the prefix directory and not synced its parent yet, which
// is why each first use in a Dirs syncs the parents, whoever made them.
func Put(fsys vfs.FS, dir string, d [32]byte, rec []byte, filePerm, dirPerm os.FileMode, known *Dirs) error {
	return putOne(fsys, dir, d, rec, nil, filePerm, dirPerm, known)
}

// PutSplit stores rec, whose SHA-256 is d, split (see "String blobs"):
// each string of refs (Strings of rec) as a string blob, and rec's
// skeleton with the string table as the split blob d. The puts run at
// once; when PutSplit returns nil every one of them is durable, as Put
// says, so a line naming d, written after, never outlives a string. A
// crash before leaves at most blobs no line names (GC removes them), and
// a split blob whose strings are not all there, which Put and PutSplit
// write again (it does not verify) and no read returns. With refs empty
// it is Put.
func PutSplit(fsys vfs.FS, dir string, d [32]byte, rec []byte, refs []Ref, filePerm, dirPerm os.FileMode, known *Dirs) error {
	if len(refs) == 0 {
		return Put(fsys, dir, d, rec, filePerm, dirPerm, known)
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs error
		seen = map[[32]byte]bool{}
	)
	run := func(f func() error) {
		wg.Go(func() {
			if err := f(); err != nil {
				mu.Lock()
				errs = errors.Join(errs, err)
				mu.Unlock()
			}
		})
	}
	var taken int64
	for _, r := range refs {
		at := r.At + taken
		taken += r.Size
		if seen[r.Digest] {
			continue
		}
		seen[r.Digest] = true
		str := rec[at : at+r.Size]
		run(func() error { return putOne(fsys, dir, r.Digest, str, nil, filePerm, dirPerm, known) })
	}
	run(func() error { return putOne(fsys, dir, d, rec, refs, filePerm, dirPerm, known) })
	wg.Wait()
	return errs
}

// putOne is Put, of a split blob when refs is not empty.
func putOne(fsys vfs.FS, dir string, d [32]byte, rec []byte, refs []Ref, filePerm, dirPerm os.FileMode, known *Dirs) error {
	path := layout.BlobPath(dir, d)
	sub := filepath.Dir(path)
	dirs := []string{sub}
	if !known.has(sub) {
		dirs = append(dirs, filepath.Dir(sub), filepath.Dir(filepath.Dir(sub)))
	}
	synced := func(f vfs.File) error {
		if err := syncAll(fsys, f, dirs...); err != nil {
			return err
		}
		known.add(sub)
		return nil
	}
	if _, err := fsys.Stat(path); err == nil {
		// Written before, perhaps by a Put a crash interrupted before the
		// blob was durable: reuse it only if its content verifies, then
		// make sure the file and its name are durable.
		if _, err := Read(fsys, dir, d, int64(len(rec))); err == nil {
			f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
			if err != nil {
				return err
			}
			return synced(f)
		}
	}
	if err := fsys.MkdirAll(sub, dirPerm); err != nil {
		return err
	}
	tmp := temp(path)
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, filePerm)
	if err != nil {
		return err
	}
	var enc []byte
	if len(refs) > 0 {
		enc = EncodeSplit(rec, refs, nil)
	} else {
		enc = Encode(rec, nil)
	}
	if _, err := f.Write(enc); err != nil {
		f.Close()
		_ = fsys.Remove(tmp)
		return err
	}
	if err := fsys.Rename(tmp, path); err != nil {
		f.Close()
		_ = fsys.Remove(tmp)
		return err
	}
	return synced(f)
}

// Dirs is the set of a session's blob prefix directories whose names,
// and their parents', are known durable in this process. Its zero value
// is empty and ready; it is safe for concurrent use.
type Dirs struct {
	mu   sync.Mutex
	dirs map[string]bool
}

func (b *Dirs) has(dir string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dirs[dir]
}

func (b *Dirs) add(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dirs == nil {
		b.dirs = map[string]bool{}
	}
	b.dirs[dir] = true
}

// temps numbers the temporary files of blobs, so that two Puts writing
// the same blob at once do not share one. Another process cannot write
// the session's blobs meanwhile: it holds the session's lock.
var temps atomic.Uint64

// temp returns a new temporary name for the blob file path:
// "<name>.<n>.tmp".
func temp(path string) string {
	return path + "." + strconv.FormatUint(temps.Add(1), 10) + ".tmp"
}

// TempFor returns a new temporary name, in its prefix directory, for
// the file of blob d ("<name>.<n>.tmp", which GC knows): for a writer of
// a blob file's stored bytes (a fetch from an object store), so that two
// writers of one blob at once do not share a temporary file.
func TempFor(d [32]byte) string {
	return filepath.Base(temp(layout.BlobPath("", d)))
}

// TempName parses the digest out of the name of a blob's temporary file
// ("<name>.<n>.tmp", as Put writes) in prefix directory sub.
func TempName(sub, name string) ([32]byte, bool) {
	rest, ok := strings.CutSuffix(name, ".tmp")
	if i := strings.LastIndexByte(rest, '.'); ok && i > 0 {
		if _, err := strconv.ParseUint(rest[i+1:], 10, 64); err == nil {
			return Name(sub, rest[:i])
		}
	}
	return [32]byte{}, false
}

// Name parses the digest out of a blob's prefix directory and file name;
// false for any other name.
func Name(sub, name string) ([32]byte, bool) {
	var d [32]byte
	h, ok := strings.CutSuffix(name, layout.BlobExt)
	if !ok || len(sub) != 2 || len(h) != 62 {
		return d, false
	}
	if _, err := hex.Decode(d[:], []byte(sub+h)); err != nil {
		return d, false
	}
	return d, layout.BlobPath("", d) == filepath.Join(layout.BlobsDir, "sha256", sub, name)
}

// syncAll syncs f and the directories dirs concurrently, then closes f.
// A failure wraps durable.ErrUnsynced.
func syncAll(fsys vfs.FS, f vfs.File, dirs ...string) error {
	dirErrs := make(chan error, len(dirs))
	for _, d := range dirs {
		go func() { dirErrs <- fsys.SyncDir(d) }()
	}
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	for range dirs {
		if derr := <-dirErrs; err == nil {
			err = derr
		}
	}
	if err != nil {
		return fmt.Errorf("%w: %w", err, durable.ErrUnsynced)
	}
	return nil
}

// Missing reports whether the blob file with digest d is absent under
// session directory dir.
func Missing(fsys vfs.FS, dir string, d [32]byte) bool {
	_, err := fsys.Stat(layout.BlobPath(dir, d))
	return errors.Is(err, os.ErrNotExist)
}

// Read reads, decompresses and verifies the blob with digest d, of a
// record of size bytes, under session directory dir. A missing or damaged
// blob is a *corrupt.Error naming its file.
func Read(fsys vfs.FS, dir string, d [32]byte, size int64) ([]byte, error) {
	return ReadWith(fsys, dir, d, size, nil)
}

// ReadWith is Read reading the compressed file into *scratch, which it
// keeps (grown) for the caller's next read: a reader of many blobs on a
// few goroutines allocates little.
func ReadWith(fsys vfs.FS, dir string, d [32]byte, size int64, scratch *[]byte) ([]byte, error) {
	return ReadFrom(fsys, dir, d, size, scratch, LocalStrings(fsys, dir))
}

// ReadFrom is ReadWith taking a split blob's strings from src.
func ReadFrom(fsys vfs.FS, dir string, d [32]byte, size int64, scratch *[]byte, src StringSource) ([]byte, error) {
	path := layout.BlobPath(dir, d)
	if size < 0 || size > MaxRecordSize {
		return nil, corrupt.Errorf(path, 0, "blob record size %d out of range", size)
	}
	var buf []byte
	if scratch != nil {
		buf = *scratch
	}
	b, err := vfs.ReadFileInto(fsys, path, buf, MaxFile(size))
	if scratch != nil && cap(b) > cap(buf) {
		*scratch = b[:0]
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, corrupt.Errorf(path, 0, "blob is missing")
	}
	if err != nil {
		return nil, err
	}
	return DecodeWith(path, b, d, size, src)
}

// MaxFile is the largest blob file a record of size bytes is stored in:
// the record, raw at worst, in zstd blocks of up to 128 KiB with 3 bytes
// of header each, with the frame's header and checksum (see encoder), and
// room to spare for another encoder's choices; for a split blob, also
// the string table of as many strings as fit the record. A larger file
// is damage, refused unread.
func MaxFile(size int64) int64 { return size + size>>10 + 1<<10 + tableFor(size) }

// tableFor is the largest string table of a record of size bytes: as
// many strings of MinString bytes as it holds.
func tableFor(size int64) int64 { return 8 + 5 + 10 + 4 + size/MinString*(10+10+32) }

// Decode decompresses and verifies the stored blob b, whose digest is d
// and record size is size, read from path (a file or an object key). A
// frame whose header names another size is refused before anything is
// decompressed: the caller's size bounds the memory a blob costs. Every
// refusal is a *corrupt.Error naming path.
// A split blob (see "String blobs") is refused: its strings are
// elsewhere (DecodeWith).
func Decode(path string, b []byte, d [32]byte, size int64) ([]byte, error) {
	return DecodeWith(path, b, d, size, nil)
}

// DecodeWith is Decode reading a split blob's strings from src.
func DecodeWith(path string, b []byte, d [32]byte, size int64, src StringSource) ([]byte, error) {
	if size < 0 || size > MaxRecordSize {
		return nil, corrupt.Errorf(path, 0, "blob record size %d out of range", size)
	}
	if IsSplit(b) {
		refs, skel, err := parseTable(b, size)
		if err != nil {
			return nil, corrupt.Errorf(path, 0, "split blob: %v", err)
		}
		return decodeSplit(path, refs, skel, d, size, src)
	}
	rec, err := decodeFrame(path, b, size)
	if err != nil {
		return nil, err
	}
	if sha256.Sum256(rec) != d || int64(len(rec)) != size {
		return nil, corrupt.Errorf(path, 0, "blob content does not match its digest sha256:%x (%d bytes)", d, size)
	}
	return rec, nil
}

// decodeFrame decompresses the zstd frame b of size bytes, read from
// path, refusing a frame whose header names another size before
// decompressing anything.
func decodeFrame(path string, b []byte, size int64) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(b); err == nil && h.HasFCS && h.FrameContentSize != uint64(size) {
		return nil, corrupt.Errorf(path, 0, "blob frame holds %d bytes, its event says %d", h.FrameContentSize, size)
	}
	rec, err := decoder.DecodeAll(b, make([]byte, 0, size))
	if err != nil {
		return nil, corrupt.Errorf(path, 0, "decompress blob: %w", err)
	}
	return rec, nil
}
