package sessionstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore/internal/canonical"
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
//
// Concurrency: an append writes its blobs without holding the session's
// mutex (writeBlobs), so other appends, reads and GC go on meanwhile. It
// counts their digests in the session's writingBlobs first, and GC keeps
// those blobs and their temporary files. Each write has its own temporary
// file ("<name>.<n>.tmp"), so appends that store the same record at once
// do not collide; their renames replace a name with the same content.

// blobEncoder and blobDecoder are shared: EncodeAll and DecodeAll are safe
// for concurrent use. The decoder checks each frame's content checksum and
// bounds what it allocates by the largest record.
//
// The encoder runs at SpeedDefault (about zstd level 3) and entropy codes
// the literals of a block in which it finds too few matches to pay
// (WithAllLitEntropyCompression), which SpeedDefault alone stores raw:
// base64 image data, which matches do not shorten, is stored at about 0.75
// of its size (as with the zstd command line) rather than 0.91 to 1.00,
// for 2.5 to 4 times the encoding time of such blocks, a few milliseconds
// per megabyte (BenchmarkBlobEncodeClaudeCode). Text, whose blocks have
// matches, is encoded as before, to the same bytes at the same speed.
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
	blobEncoder, _ = zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithAllLitEntropyCompression(true), zstd.WithEncoderConcurrency(1))
	blobDecoder, _ = zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxRecordSizeLimit))
)

// putBlob stores rec, whose SHA-256 is d, as a blob under dir (a session
// directory). When it returns nil the blob and its directory entry are
// durable. An existing blob with the same digest is reused. Appends to one
// session may put blobs at once, the same one too: each writes its own
// temporary file (blobTemp), and the renames replace a name with the same
// content.
//
// Durability: the file's data, its name in the prefix directory, and, the
// first time known sees that directory, the prefix directory's name in
// blobs/sha256 and that one's in blobs/ are synced at once: they are
// independent, and no line names the blob before all end. Another append
// may have made the prefix directory and not synced its parent yet, which
// is why each first use in a process syncs the parents, whoever made them.
func putBlob(fsys vfs.FS, dir string, d [32]byte, rec []byte, filePerm, dirPerm os.FileMode, known *blobDirs) error {
	path := blobPath(dir, d)
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
		// Written before, perhaps by an append a crash interrupted before
		// the blob was durable: reuse it only if its content verifies,
		// then make sure the file and its name are durable.
		if _, err := readBlob(fsys, dir, d, int64(len(rec))); err == nil {
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
	tmp := blobTemp(path)
	f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, filePerm)
	if err != nil {
		return err
	}
	if _, err := f.Write(blobEncoder.EncodeAll(rec, nil)); err != nil {
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

// blobDirs is the set of a session's blob prefix directories whose names,
// and their parents', are known durable in this process.
type blobDirs struct {
	mu   sync.Mutex
	dirs map[string]bool
}

func (b *blobDirs) has(dir string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dirs[dir]
}

func (b *blobDirs) add(dir string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dirs == nil {
		b.dirs = map[string]bool{}
	}
	b.dirs[dir] = true
}

// blobTemps numbers the temporary files of blobs, so that two appends
// writing the same blob at once do not share one. Another process cannot
// write the session's blobs meanwhile: it holds the session's lock.
var blobTemps atomic.Uint64

// blobTemp returns a new temporary name for the blob file path:
// "<name>.<n>.tmp".
func blobTemp(path string) string {
	return path + "." + strconv.FormatUint(blobTemps.Add(1), 10) + ".tmp"
}

// blobTempName parses the digest out of the name of a blob's temporary
// file (see blobTemp) in directory sub.
func blobTempName(sub, name string) ([32]byte, bool) {
	rest, ok := strings.CutSuffix(name, ".tmp")
	if i := strings.LastIndexByte(rest, '.'); ok && i > 0 {
		if _, err := strconv.ParseUint(rest[i+1:], 10, 64); err == nil {
			return blobName(sub, rest[:i])
		}
	}
	return [32]byte{}, false
}

// syncAll syncs f and the directories dirs concurrently, then closes f.
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
		return fmt.Errorf("%w: %w", err, errUnsynced)
	}
	return nil
}

// readBlob reads, decompresses and verifies the blob with digest d.
func readBlob(fsys vfs.FS, dir string, d [32]byte, size int64) ([]byte, error) {
	return readBlobWith(fsys, dir, d, size, nil)
}

// readBlobWith is readBlob reading the compressed file into *scratch,
// which it keeps (grown) for the caller's next read: Load reads many blobs
// on each of a few goroutines, and fresh memory is what a new process
// pays most for.
func readBlobWith(fsys vfs.FS, dir string, d [32]byte, size int64, scratch *[]byte) ([]byte, error) {
	path := blobPath(dir, d)
	if size < 0 || size > maxRecordSizeLimit {
		return nil, corruptf(path, 0, "blob record size %d out of range", size)
	}
	var buf []byte
	if scratch != nil {
		buf = *scratch
	}
	b, err := readFile(fsys, path, buf, maxBlobFile(size))
	if scratch != nil && cap(b) > cap(buf) {
		*scratch = b[:0]
	}
	if errors.Is(err, os.ErrNotExist) {
		return nil, corruptf(path, 0, "blob is missing")
	}
	if err != nil {
		return nil, err
	}
	return decodeBlob(path, b, d, size)
}

// maxBlobFile is the largest blob file a record of size bytes is stored
// in: the record, raw at worst, in zstd blocks of up to 128 KiB with 3
// bytes of header each, with the frame's header and checksum (see above),
// and room to spare for another encoder's choices. A larger file is
// damage, refused unread.
func maxBlobFile(size int64) int64 { return size + size>>10 + 1<<10 }

// decodeBlob decompresses and verifies the stored blob b, whose digest
// is d and record size is size, read from path (a file or an object key).
// A frame whose header names another size is refused before anything is
// decompressed: the index's size bounds the memory a blob costs.
func decodeBlob(path string, b []byte, d [32]byte, size int64) ([]byte, error) {
	if size < 0 || size > maxRecordSizeLimit {
		return nil, corruptf(path, 0, "blob record size %d out of range", size)
	}
	var h zstd.Header
	if err := h.Decode(b); err == nil && h.HasFCS && h.FrameContentSize != uint64(size) {
		return nil, corruptf(path, 0, "blob frame holds %d bytes, its event says %d", h.FrameContentSize, size)
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
	hexPart, ok := strings.CutPrefix(s, canonical.DigestPrefix)
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
// Errors: ErrNotFound when the store has no such session; *CorruptionError
// for a missing blob or one whose content does not match its digest;
// ErrInvalidEvent for a malformed Digest or a Size out of range; ErrClosed.
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
	if ev.Size < 0 || ev.Size > maxRecordSizeLimit {
		return Event{}, invalidEventf("blob record size %d out of range [0, %d]", ev.Size, maxRecordSizeLimit)
	}
	dir := s.sessionDir(session)
	if _, err := s.opts.fs.Stat(filepath.Join(dir, metaFile)); err != nil {
		if noSession(s.opts.fs, dir, err) {
			return Event{}, fmt.Errorf("%w: session %s", ErrNotFound, session)
		}
		return Event{}, err
	}
	rec, err := readBlob(s.opts.fs, dir, d, ev.Size)
	if err != nil {
		if fetched, ferr := s.fetchMissingBlob(ctx, dir, d, ev.Size); fetched {
			rec, err = readBlob(s.opts.fs, dir, d, ev.Size)
		} else if ferr != nil {
			err = ferr
		}
	}
	if err != nil {
		if frec, found := s.forkBlob(ctx, session, d, ev.Size); found { // a fork's prefix event (fork.go)
			rec, err = frec, nil
		}
	}
	if err != nil {
		return Event{}, err
	}
	ev.Record = rec
	return ev, nil
}

// GCReport says what GC removed.
type GCReport struct {
	Kept    int   // blobs an event or a kept-aside file refers to
	Removed int   // unreferenced blobs and temporary files removed
	Bytes   int64 // their size on disk
}

// GC removes the blobs of a session that no event refers to (left by a
// crash between writing a blob and appending its event) and temporary blob
// files. It never removes a blob that an event refers to, including the
// events of appends still in progress (written, or about to be, and not
// yet durable), nor the temporary file of a blob an append is writing,
// nor a blob that bytes a repair kept aside may name: the records cut
// from the end of the log into "<chunk>.broken-<offset>" (acknowledged
// events among them, when their records were damaged), the temporary
// files of those, and HEAD.broken (every file of the session and chunks
// directories whose name holds ".broken"). Those bytes may be torn or
// damaged, so GC does not decode them as records: it keeps every blob
// whose digest appears in them ("sha256:" and 64 lower-case hex digits,
// the form of chunk lines), and where such a digest is cut short (by the
// end of the bytes or damage), every blob whose digest starts with the
// digits there. A digest that damage turned into another is not found.
// Removals are made durable (directories synced) before it returns.
//
// GC keeps every blob the session's index names. It does not read every
// record: a session damaged where only Verify looks (a bad record inside
// an indexed chunk, a bad blob) is collected like an intact one, so run
// Verify first where that matters (the inspector's gc does).
//
// Errors: ErrNotFound, ErrLocked, ErrSessionFailed, *CorruptionError for a
// session its open finds damaged (GC then removes nothing), ErrClosed.
func (s *Store) GC(ctx context.Context, session uuid.UUID) (GCReport, error) {
	var rep GCReport
	err := s.withHandle(ctx, session, func(h *openSession) error {
		if err := h.writable(); err != nil {
			return err
		}
		referenced := map[[32]byte]bool{}
		for i := range h.Entries {
			if h.Entries[i].Blob {
				referenced[h.Entries[i].Digest] = true
			}
		}
		for i := range h.pipe.inflight {
			if e := &h.pipe.inflight[i].entry; e.Blob {
				referenced[e.Digest] = true
			}
		}
		for d := range h.writingBlobs {
			referenced[d] = true
		}
		fsys := s.opts.fs
		partial, err := keptAsideBlobs(fsys, h.dir, referenced)
		if err != nil {
			return err
		}
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
				if d, ok := blobName(sub, name); ok && (referenced[d] || keptAsidePrefix(d, partial)) {
					rep.Kept++
					continue
				}
				if d, ok := blobTempName(sub, name); ok && h.writingBlobs[d] > 0 {
					continue // being written by an append in progress
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
					h.becomeFailed(err)
					return err
				}
			}
		}
		return nil
	})
	return rep, err
}

// keptAsideBlobs adds to referenced the digests that the kept-aside files
// of session directory dir name (see GC), and returns the digits of those
// cut short.
func keptAsideBlobs(fsys vfs.FS, dir string, referenced map[[32]byte]bool) (partial []string, err error) {
	for _, d := range []string{dir, filepath.Join(dir, chunksDir)} {
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
			if err := keptAsideFile(fsys, filepath.Join(d, name), referenced, &partial); err != nil {
				return nil, err
			}
		}
	}
	return partial, nil
}

// keptAsideFile scans the kept-aside file at path for blob digests
// (keptAsideDigests) a block at a time: a kept tail may be of any size.
func keptAsideFile(fsys vfs.FS, path string, full map[[32]byte]bool, partial *[]string) error {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return refusal(err)
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

// keptAsideDigests scans kept-aside bytes b for blob digests: each
// "sha256:" followed by 64 lower-case hex digits goes into full, and the
// digits after one followed by fewer (1 to 63) into partial.
func keptAsideDigests(b []byte, full map[[32]byte]bool, partial *[]string) {
	keptAsideFrom(b, len(b), full, partial)
}

// keptAsideFrom is keptAsideDigests for the digests whose "sha256:"
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

// keptAsidePrefix reports whether digest d starts with one of the digits
// in partial.
func keptAsidePrefix(d [32]byte, partial []string) bool {
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

// blobReads reads blob records on up to one goroutine per CPU, started as
// reads are added, while its caller goes on: Load's walk and its blob reads
// overlap. Each goroutine reuses one buffer for the compressed files.
type blobReads struct {
	s       *Store
	dir     string
	ctx     context.Context
	cancel  context.CancelFunc
	jobs    chan *blobRead
	wg      sync.WaitGroup
	workers int
	done    []*blobRead // every read added, in the order added
	ended   bool
}

// blobRead is one blob record to read, for the event at step.
type blobRead struct {
	step int
	e    entry
	rec  []byte
	err  error
}

func (s *Store) startBlobReads(ctx context.Context, dir string) *blobReads {
	b := &blobReads{s: s, dir: dir, jobs: make(chan *blobRead, 1024)}
	b.ctx, b.cancel = context.WithCancel(ctx)
	return b
}

// add queues the read of e's record for the event at step.
func (b *blobReads) add(step int, e entry) {
	if b.workers < runtime.GOMAXPROCS(0) {
		b.workers++
		b.wg.Go(func() {
			var scratch []byte
			for j := range b.jobs {
				if j.err = b.ctx.Err(); j.err == nil {
					j.rec, j.err = readBlobWith(b.s.opts.fs, b.dir, j.e.Digest, j.e.Size, &scratch)
					if j.err != nil {
						if fetched, ferr := b.s.fetchMissingBlob(b.ctx, b.dir, j.e.Digest, j.e.Size); fetched {
							j.rec, j.err = readBlobWith(b.s.opts.fs, b.dir, j.e.Digest, j.e.Size, &scratch)
						} else if ferr != nil {
							j.err = ferr
						}
					}
				}
			}
		})
	}
	j := &blobRead{step: step, e: e}
	b.done = append(b.done, j)
	b.jobs <- j
}

// wait waits for the reads and puts each record into out at the place
// place gives its step, skipping a read place refuses. The error is that
// of the failed read placed first in out.
func (b *blobReads) wait(out []Event, place func(step int) (int, bool)) error {
	b.stop()
	var first error
	firstAt := -1
	for _, r := range b.done {
		i, ok := place(r.step)
		if !ok {
			continue
		}
		out[i].Record = r.rec
		if r.err != nil && (firstAt < 0 || i < firstAt) {
			first, firstAt = r.err, i
		}
	}
	return first
}

// stop waits for the reads added. It may be called again.
func (b *blobReads) stop() {
	if !b.ended {
		b.ended = true
		close(b.jobs)
		b.wg.Wait()
	}
	b.cancel()
}

// abandon skips the reads not started yet and waits for the others, for a
// caller that will not use them.
func (b *blobReads) abandon() {
	b.cancel()
	b.stop()
}
