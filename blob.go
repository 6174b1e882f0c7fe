package sessionstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Blobs
//
// The blob files, their writing, reading, names and removal, are
// internal/blob; here are Resolve and GC, which know the events and the
// open session.
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
// String blobs (format 3): a record holding a JSON string of at least
// Options.StringThreshold bytes (between its quotes, escapes as they
// are) is stored as a blob whatever its size, split: each such string is
// a blob of its own under the SHA-256 of its bytes, and the record's blob
// (under the record's digest, as any blob) starts with a table of where
// each string goes, then holds the rest of the record (internal/blob,
// "String blobs"). The chunk and index lines do not change. A read puts
// the strings back and checks the whole record's digest, so Resolve and
// Load return the record byte for byte; a missing or damaged string is a
// *CorruptionError naming the string's blob file. The same string in
// many records (a screenshot sent again with every request) is stored
// once. The strings are written beside the record's blob, each durable
// before the line is written; GC keeps the strings of every blob it
// keeps; the remote mode puts each string's object before the split
// blob's, and a restore fetches a string with the first blob that needs
// it. Sessions of formats 1 and 2 store no string apart (a build that
// reads them would take a split blob for damage) until Upgrade.
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
// counts their digests, and their strings', in the session's
// writingBlobs first, and GC keeps those blobs and their temporary files. Each write has its own temporary
// file ("<name>.<n>.tmp"), so appends that store the same record at once
// do not collide; their renames replace a name with the same content.

// readBlob reads, decompresses and verifies the blob with digest d
// (internal/blob), its damage a *CorruptionError naming the blob file.
func readBlob(fsys vfs.FS, dir string, d [32]byte, size int64) ([]byte, error) {
	rec, err := blob.Read(fsys, dir, d, size)
	return rec, damage(err)
}

// readBlobWith is readBlob reading the compressed file into *scratch,
// which it keeps (grown) for the caller's next read: Load reads many blobs
// on each of a few goroutines, and fresh memory is what a new process
// pays most for.
func readBlobWith(fsys vfs.FS, dir string, d [32]byte, size int64, scratch *[]byte) ([]byte, error) {
	rec, err := blob.ReadWith(fsys, dir, d, size, scratch)
	return rec, damage(err)
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
// An event of an encrypted session read before a Reencrypt names the
// blob of its old envelope, which the Reencrypt removed: Resolve then
// reads the event again by its id and resolves the blob its line names
// now.
//
// Errors: ErrNotFound when the store has no such session; *CorruptionError
// for a missing blob or one whose content does not match its digest;
// ErrInvalidEvent for a malformed Digest or a Size out of range; ErrClosed.
func (s *Store) Resolve(ctx context.Context, session uuid.UUID, ev Event) (Event, error) {
	out, err := s.resolve(ctx, session, ev)
	var ce *CorruptionError
	if err == nil || ev.ID == uuid.Nil || !errors.As(err, &ce) {
		return out, err
	}
	// Sealed again since (reencrypt.go): the same event, a new digest.
	cur, cerr := s.Event(ctx, session, ev.ID)
	if cerr != nil || cur.Digest == ev.Digest || cur.Size != ev.Size {
		return out, err
	}
	return s.resolve(ctx, session, cur)
}

func (s *Store) resolve(ctx context.Context, session uuid.UUID, ev Event) (Event, error) {
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
		if again, ferr := s.fetchMissingBlob(ctx, dir, d, ev.Size); again {
			rec, err = readBlob(s.opts.fs, dir, d, ev.Size)
		} else if ferr != nil {
			err = ferr
		}
	}
	holder := session
	if err != nil {
		if frec, from, found := s.forkBlob(ctx, session, d, ev.Size); found { // a fork's prefix event (fork.go)
			rec, err, holder = frec, nil, from
		}
	}
	if err != nil {
		return Event{}, err
	}
	ev.Record = rec
	evs := []Event{ev}
	if err := s.unsealEvents(ctx, holder, evs); err != nil { // under the key of the session that holds it
		return Event{}, err
	}
	return evs[0], nil
}

// GCReport says what GC removed (with GCOptions.DryRun: would remove).
type GCReport struct {
	Kept    int   // blobs an event or a kept-aside file refers to
	Removed int   // unreferenced blobs and temporary files removed
	Bytes   int64 // their size on disk
	// With Options.Remote, the objects removed from the object store
	// (gc_remote.go): unreferenced blobs and sealed chunks no seal
	// record names, and their bytes.
	Objects     int
	ObjectBytes int64
	// With Options.Remote, the log objects compaction removed (below the
	// marker of GC's own lease; remote.go, "Numbers freed by
	// compaction"), and their bytes.
	LogObjects int
	LogBytes   int64
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
	return s.GCWith(ctx, session, GCOptions{})
}

// GCOptions tunes GCWith.
type GCOptions struct {
	// DryRun removes nothing: the report says what GC would remove, as
	// the session is when it runs.
	DryRun bool
}

// GCWith is GC with options: GC's rules, and with Options.Remote the
// object store's as well (gc_remote.go).
//
// Errors: as GC; with a remote, ErrRemote for a failed call (the report
// holds what was removed before it), ErrFenced when another Store took
// the session over (nothing more is removed).
func (s *Store) GCWith(ctx context.Context, session uuid.UUID, opts GCOptions) (GCReport, error) {
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
		fl := h.pipe.Inflight()
		for i := range fl {
			if e := &fl[i].entry; e.Blob {
				referenced[e.Digest] = true
			}
		}
		for d := range h.writingBlobs {
			referenced[d] = true
		}
		if err := s.manifestBlobs(ctx, h, referenced); err != nil { // workspace contents (workspace.go)
			return err
		}
		fsys := s.opts.fs
		partial, err := blob.KeptAside(fsys, h.dir, referenced)
		if err != nil {
			return damage(err)
		}
		r, err := blob.Sweep(ctx, fsys, h.dir, func(d [32]byte) bool {
			return referenced[d] || blob.KeptAsidePrefix(d, partial)
		}, func(d [32]byte) bool {
			return h.writingBlobs[d] > 0 // being written by an append in progress
		}, opts.DryRun)
		rep = GCReport{Kept: r.Kept, Removed: r.Removed, Bytes: r.Bytes}
		if errors.Is(err, errUnsynced) {
			h.becomeFailed(err)
		}
		if err != nil {
			return err
		}
		if rf, ok := h.files.(*remoteFiles); ok {
			rep.Objects, rep.ObjectBytes, err = rf.sweep(ctx, referenced, opts.DryRun)
			if err == nil {
				rep.LogObjects, rep.LogBytes, err = rf.compactNow(ctx, opts.DryRun)
			}
		}
		return err
	})
	return rep, err
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
						if again, ferr := b.s.fetchMissingBlob(b.ctx, b.dir, j.e.Digest, j.e.Size); again {
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
