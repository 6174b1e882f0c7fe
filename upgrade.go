package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// Rewriting a session's chunks: Upgrade (format 1 lines to format 2) and
// ConvertCompression (sealed chunks to the other compression mode) share
// one protocol, run with the session's lock held and the session closed
// in this Store, on files a clean analysis (recovery.go) vouches for:
//
//	 1. remove index.jsonl and sync the session directory
//	    (derived: reconciliation rebuilds it from the chunks)
//	 2. for each chunk, oldest first, that changes:
//	      its new bytes are written under a temporary name and synced,
//	      renamed over the old file of the same form, the chunks
//	      directory synced; when the form changes (plain <-> sealed),
//	      the new form is durable before the old one is removed
//	 3. write index.jsonl (the lines of the plain chunks), atomically
//	 4. Upgrade only: replace session.json with format 3, atomically
//
// Every crash state is a whole, valid session holding the same events:
//
//   - A chunk is replaced by one rename, so each chunk file holds its old
//     bytes or its new ones, whole. When both forms of a chunk exist
//     after a crash, their logical bytes are the same (a conversion
//     changes the form only), and reconciliation keeps the sealed one.
//   - Upgrade keeps every event in the chunk it was in and in the same
//     order, and rewrites the chunks oldest first, so a "parent_loc" in a
//     rewritten chunk names a line in a rewritten chunk: its own or an
//     older one, never one whose offsets are still the old ones. Lines
//     without "parent_loc" (format 1) and lines with it may sit in one
//     session: the line codec reads both in every format.
//   - Until step 4 session.json says format 1: the session opens with its
//     index (never lazily, which would trust "parent_loc" of all lines),
//     rebuilt from the chunks since step 1, and appends in format 1. Only
//     when every chunk is in format 2 does session.json say format 3.
//     Format 3 changes no line (it allows split blobs, which only appends
//     write), so a format 2 session's upgrade rewrites no chunk: it
//     rebuilds index.jsonl and replaces session.json.
//   - HEAD names an event id, which no rewrite changes; blobs are not
//     touched (a record keeps its digest).
//
// A second run after a crash finds the chunks already rewritten holding
// the bytes it would write and leaves them alone, and finishes the rest.

// upgradeTemp (internal/layout's RewriteTemp) is the suffix of a plain
// chunk's temporary file while it is being rewritten; reconciliation
// ignores such names and the next rewrite removes them.

// rewriteJob says what rewriteSession changes.
type rewriteJob struct {
	upgrade bool // rewrite format 1 lines as format 2, and say format 3 (Upgrade)
	// convert: change each chunk's form to the root mode compress says
	// (ConvertCompression): every chunk but the newest sealed when
	// compressing, none otherwise. Without it every chunk keeps its form.
	convert  bool
	compress bool
	// reseal: seal every record again under a new data key (Reencrypt:
	// reencrypt.go), each chunk in its form.
	reseal bool
}

// Upgrade moves a session of an older format to format 3. A format 1
// session (written before chunk lines held their parent's location, see
// the package doc) is rewritten, so that it opens without its index and
// Load follows the lines' parent locations; a format 2 session keeps its
// chunks, and from then on stores a record's long strings apart
// (Options.StringThreshold), which builds that read format 2 at most do
// not read.
// The events stay as they were: the same ids, parents, branch points,
// times, kinds, roles and records, every branch, in the same chunks in the
// same order; records stored as blobs keep their digests and files. Each
// chunk keeps its form: a sealed chunk is sealed again (compressed, with
// its new index lines embedded) and a plain one stays plain. Upgrade of a
// format 3 session returns nil and writes nothing (with Options.Remote, no
// metadata: see below).
//
// Durability: when Upgrade returns nil, the rewritten chunks, index.jsonl
// and session.json (format 3) are durable, and the next open finds
// nothing to repair. A crash during the call leaves a session that opens
// whole, with the same events: still in its old format (some chunks
// already rewritten, index.jsonl rebuilt by the next open), or format 3; calling
// Upgrade again completes it (see the protocol above). Old bytes are
// replaced only by renames of new files already synced, so no state holds
// a partly written chunk.
//
// Concurrency: Upgrade first closes the session in this Store (waiting
// for the calls using it, as CloseSession does) and then holds its lock
// until it returns: meanwhile this Store's calls on the session wait for
// it to end (as they wait for a Delete), and writers in another process
// get ErrLocked (or wait, with Options.WaitForLock). A Load or
// Event of this Store that was already reading the session's records
// when Upgrade started may fail with a *CorruptionError (a record looked
// up at its old place is checked, never returned wrong); run it again.
//
// With Options.Remote: a remote session is of format 2 (made by an
// earlier build) or 3, so Upgrade rewrites no chunk and neither closes the
// session nor holds it apart: it opens the session as any call does
// (taking it from the object store, which writes an open marker, even
// for a format 3 session) and, for format 2, writes its session.json in
// format 3 under the session's mutex as UpdateMeta writes metadata:
// durable in the object store when it returns nil; a crash before leaves
// it in format 2, whole. Builds that read format 2 at most do not read
// the session after it.
//
// Errors: ErrNotFound; ErrLocked; ErrReadOnly; ErrClosed; the
// *CorruptionError of a damaged session, which is left as it is;
// ErrSessionFailed for a session whose writes stopped in this Store;
// ErrFenced or ErrRemote with Options.Remote; an I/O error, after which
// the session is whole, as after a crash.
func (s *Store) Upgrade(ctx context.Context, session uuid.UUID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	switch {
	case s.opts.ReadOnly:
		return ErrReadOnly
	case s.opts.Remote != nil:
		if err := s.upgradeRemote(ctx, session); err != nil {
			return fmt.Errorf("sessionstore: upgrade session %s: %w", session, err)
		}
		return nil
	}
	if err := s.rewriteSession(ctx, session, rewriteJob{upgrade: true}); err != nil {
		return fmt.Errorf("sessionstore: upgrade session %s: %w", session, err)
	}
	return nil
}

// ConvertCompression converts the store rooted at dir to the compression
// mode opts.Compression (CompressionZstd for ""): every session's full
// chunks are sealed compressed (CompressionZstd) or left as plain JSONL
// (CompressionNone), exactly as a root created in that mode stores them,
// and sessionstore.json records the new mode last. opts is what the
// store will be opened with afterwards; its Compression is the mode to
// convert to. The lines and events do not change (a session keeps its
// format; see Upgrade). On a root already in that mode it converts the
// chunks still in the other one, if any (sealed by a Store that had the
// root open in its old mode while a conversion ran), and changes nothing
// else.
//
// No Store may have the root open meanwhile: ConvertCompression opens it
// itself (in its old mode) and takes each session's lock in turn, so a
// session in use elsewhere fails it with ErrLocked. Until it returns, the
// root opens in its old mode only (ErrCompressionMismatch for the new);
// reading handles both kinds of chunks, so a store opened so reads every
// session whole, whatever was converted.
//
// Durability: when ConvertCompression returns nil, every converted chunk
// and sessionstore.json are durable. A crash, or an error, leaves every
// session whole with its events (each one converted or not, each chunk in
// one form or the other, see the protocol above) and the root in its old
// mode; calling ConvertCompression again finishes the conversion.
//
// Errors: ErrInvalidOptions; ErrReadOnly; ErrRemoteUnsupported with
// opts.Remote (below); ErrNoStore when dir holds no store; ErrLocked; the
// *CorruptionError of a damaged session (then sessionstore.json keeps the
// old mode); an I/O error.
//
// Not with Options.Remote, a decision: the object store is the system of
// record of a remote root, and the directory its cache. A remote root in
// CompressionZstd uploads every full chunk sealed, and restores download
// them so; its local chunks are copies, and making them plain would be
// undone by the next restore. One in CompressionNone never seals, so its
// sessions live in the log's data objects, each restored from them: to
// move such a root to zstd, each session would have to be taken, its full
// chunks sealed, uploaded and recorded in its log by the lease's holder,
// as a Store in zstd does when a chunk fills; that is not built.
func ConvertCompression(ctx context.Context, dir string, opts *Options) error {
	o, err := opts.withDefaults()
	if err != nil {
		return err
	}
	switch {
	case o.ReadOnly:
		return ErrReadOnly
	case o.Remote != nil:
		return fmt.Errorf("%w: ConvertCompression", ErrRemoteUnsupported)
	}
	dir = filepath.Clean(dir)
	from, err := readRootCompression(o.fs, dir)
	if err != nil {
		return err
	}
	old := o
	old.Compression = from
	s, err := Open(dir, &old)
	if err != nil {
		return err
	}
	defer s.Close()
	ids, err := sessionIDs(o.fs, filepath.Join(dir, sessionsDir))
	if err != nil {
		return fmt.Errorf("sessionstore: convert compression: %w", err)
	}
	job := rewriteJob{convert: true, compress: o.Compression == CompressionZstd}
	for _, id := range ids {
		if err := s.begin(ctx); err != nil {
			return err
		}
		err := s.rewriteSession(ctx, id, job)
		s.end()
		if errors.Is(err, ErrNotFound) {
			continue // a directory without session.json: no session
		}
		if err != nil {
			return fmt.Errorf("sessionstore: convert session %s to compression %q: %w", id, o.Compression, err)
		}
	}
	if err := s.Close(); err != nil {
		return err
	}
	if from == o.Compression {
		return nil
	}
	b, err := json.Marshal(rootConfig{Format: rootFormat, Compression: o.Compression})
	if err != nil {
		return err
	}
	if err := durable.ReplaceFile(o.fs, dir, rootConfigName, append(b, '\n'), o.FileMode); err != nil {
		return fmt.Errorf("sessionstore: write %s: %w", filepath.Join(dir, rootConfigName), err)
	}
	return nil
}

// maxRootConfig is the largest sessionstore.json read: its one line is
// tens of bytes.
const maxRootConfig = 4 << 10

// readRootCompression returns the compression mode sessionstore.json of
// the root dir records.
func readRootCompression(fsys vfs.FS, dir string) (string, error) {
	path := filepath.Join(dir, rootConfigName)
	b, err := readFile(fsys, path, nil, maxRootConfig)
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%w at %s (no %s)", ErrNoStore, dir, rootConfigName)
	}
	if err != nil {
		return "", fmt.Errorf("sessionstore: read %s: %w", path, err)
	}
	var cfg rootConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		return "", corruptf(path, 0, "%w", err)
	}
	if cfg.Format != rootFormat {
		return "", fmt.Errorf("%w: %s has format %d, this build reads %d", ErrUnsupportedFormat, path, cfg.Format, rootFormat)
	}
	switch cfg.Compression {
	case CompressionZstd, CompressionNone:
	default:
		return "", corruptf(path, 0, "unknown compression mode %q", cfg.Compression)
	}
	return cfg.Compression, nil
}

// upgradeRemote is Upgrade with Options.Remote. A remote session is of
// format 2 (made by a build before format 3) or 3: format 2 lines already
// name their parents' locations, so the chunks stay as they are, in the
// object store and here, and only session.json says format 3, written as
// any metadata change of a session this Store holds (the log's meta
// record, then its copy for List): from the next append on, long strings
// are stored apart. Durable in the object store when it returns nil. A
// format 1 session cannot be remote; one would be refused
// (ErrRemoteUnsupported) rather than rewritten.
func (s *Store) upgradeRemote(ctx context.Context, session uuid.UUID) error {
	return s.useHandle(ctx, session, s.reg.acquireLazy, func(h *openSession) error {
		if err := h.writable(); err != nil {
			return err
		}
		switch {
		case h.format >= formatVersion:
			return nil
		case h.format < 2:
			return fmt.Errorf("%w: Upgrade of a format %d session", ErrRemoteUnsupported, h.format)
		}
		old := h.format
		h.format = formatVersion
		if err := h.writeMeta(h.meta); err != nil {
			h.format = old
			return err
		}
		return nil
	})
}

// rewriteSession runs job on session id (the protocol above), inside a
// call that Close waits for.
func (s *Store) rewriteSession(ctx context.Context, id uuid.UUID, job rewriteJob) error {
	fsys, dir := s.opts.fs, s.sessionDir(id)
	// Open it as any call would, to learn its format and whether this
	// Store stopped its writes (a format 1 session is reconciled: it opens
	// with its index). The analysis below, under the lock, finds damage.
	h, err := s.reg.acquireLazy(ctx, id, nil)
	if err != nil {
		return err
	}
	format, werr := h.format, h.writable()
	s.reg.release(h)
	switch {
	case werr != nil:
		return werr
	case job.upgrade && format >= formatVersion:
		return nil
	}
	// Keep this Store's calls away from the session until the rewrite
	// ends, as Delete does: an Append that reopened it between a close and
	// the lock would leave it open and idle, holding the lock the rewrite
	// then waited for without end (with WaitForLock).
	release, err := s.reg.hold(ctx, id)
	if err != nil {
		return err
	}
	defer release(false)
	lk, err := s.reg.lockSession(ctx, filepath.Join(dir, lockName))
	if err != nil {
		return err
	}
	defer lk.Close()
	if job.reseal {
		if _, err := fsys.Stat(filepath.Join(dir, workspaceMarker)); err == nil {
			return fmt.Errorf("%w: session %s", ErrWorkspaceReencrypt, id)
		}
	}
	// A dead writer's journal holds records the chunks may lack: they
	// go into the chunks before the rewrite reads them (journal.go).
	if _, err := takeOver(ctx, fsys, s.dir, dir, s.opts.jr.current(), s.opts.FileMode, s.opts.dead); err != nil {
		return err
	}
	meta, format, err := readMeta(fsys, dir, id)
	if err != nil {
		return err
	}
	if job.upgrade && format >= formatVersion {
		return nil // upgraded meanwhile
	}
	if job.reseal && !meta.Encrypted {
		return ErrNotEncrypted
	}
	pre, err := verifyPrefix(&s.opts, dir, meta) // a fork's prefix (fork.go)
	if err != nil {
		return err
	}
	var outside func(uuid.UUID) bool
	if pre != nil {
		outside = pre.has
	}
	p, err := analyze(fsys, dir, false, outside)
	if err != nil {
		return err
	}
	if p.corrupt != nil {
		return p.corrupt
	}
	if len(p.repairs()) > 0 {
		if _, err := applyRepairs(fsys, dir, p, s.opts.FileMode); err != nil {
			return err
		}
	}
	chunkDir := filepath.Join(dir, chunksDir)
	if err := removeRewriteTemps(fsys, chunkDir); err != nil {
		return err
	}
	var rs *resealer
	if job.reseal {
		if rs, err = s.newGeneration(ctx, id); err != nil {
			return err
		}
	}
	plans, err := planRewrite(fsys, chunkDir, p, job, func(old []byte, es []entry, path string) ([]byte, []entry, error) {
		return rs.chunk(fsys, dir, old, es, path, s.opts.FileMode, s.opts.DirMode)
	})
	if err != nil {
		return err
	}
	if len(plans) == 0 && !job.upgrade {
		if rs != nil {
			return rs.finish() // every record under the new key already
		}
		return nil // every chunk has its form already
	}
	if err := removeIfExists(fsys, filepath.Join(dir, indexName)); err != nil {
		return err
	}
	var plain []entry // the entries of the chunks that end plain, for index.jsonl
	for i, n := range p.chunks {
		cp, ok := plans[n]
		es := index.ChunkEntries(p.index.Entries, n)
		sealed := p.sealed[i]
		if ok {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := cp.apply(fsys, chunkDir, s.opts.FileMode); err != nil {
				return err
			}
			es, sealed = cp.entries, cp.sealed
		}
		if !sealed {
			plain = append(plain, es...)
		}
	}
	if err := durable.ReplaceFile(fsys, dir, indexName, index.AppendLines(nil, plain), s.opts.FileMode); err != nil {
		return err
	}
	if rs != nil {
		return rs.finish()
	}
	if job.upgrade {
		b, err := encodeMeta(meta, formatVersion)
		if err != nil {
			return err
		}
		if err := durable.ReplaceFile(fsys, dir, metaFile, b, s.opts.FileMode); err != nil {
			return err
		}
	}
	return nil
}

// removeRewriteTemps removes the temporary files an interrupted rewrite
// left in the chunks directory.
func removeRewriteTemps(fsys vfs.FS, chunkDir string) error {
	names, err := fsys.ReadDir(chunkDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, name := range names {
		if base, ok := strings.CutSuffix(name, upgradeTemp); ok {
			if _, ok := parseChunkName(base); ok {
				if err := removeIfExists(fsys, filepath.Join(chunkDir, name)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// chunkRewrite is the new content of one chunk.
type chunkRewrite struct {
	n         uint32
	wasSealed bool
	sealed    bool    // the form it takes
	data      []byte  // its logical bytes
	entries   []entry // the entries of its records, at their new places
}

// planRewrite reads every chunk job changes and returns its new content,
// by chunk number. It writes nothing but, for job.reseal, the new blobs
// reseal writes (the new bytes of a chunk and its entries).
func planRewrite(fsys vfs.FS, chunkDir string, p *recoveryPlan, job rewriteJob, reseal func(old []byte, es []entry, path string) ([]byte, []entry, error)) (map[uint32]*chunkRewrite, error) {
	out := map[uint32]*chunkRewrite{}
	moved := map[uuid.UUID]location{} // where each event's line is after the rewrite
	for i, n := range p.chunks {
		newest := i == len(p.chunks)-1
		cp := &chunkRewrite{n: n, wasSealed: p.sealed[i], sealed: p.sealed[i]}
		if job.convert {
			cp.sealed = job.compress && (!newest || p.sealed[i])
		}
		es := index.ChunkEntries(p.index.Entries, n)
		if !job.upgrade && !job.reseal && cp.sealed == cp.wasSealed {
			continue
		}
		old, err := readChunkData(fsys, chunkDir, n, es)
		if err != nil {
			return nil, err
		}
		cp.data, cp.entries = old, es
		if job.upgrade {
			cp.data, cp.entries, err = reencodeChunk(old, es, moved, filepath.Join(chunkDir, chunkName(n)))
			if err != nil {
				return nil, err
			}
			if string(cp.data) == string(old) && cp.sealed == cp.wasSealed {
				continue // rewritten by an earlier, interrupted run
			}
		}
		if job.reseal {
			cp.data, cp.entries, err = reseal(old, es, filepath.Join(chunkDir, chunkName(n)))
			if err != nil {
				return nil, err
			}
			if string(cp.data) == string(old) {
				continue // under the new key already
			}
		}
		out[n] = cp
	}
	return out, nil
}

// readChunkData reads the logical bytes of chunk n that the entries es,
// which tile it, cover.
func readChunkData(fsys vfs.FS, chunkDir string, n uint32, es []entry) ([]byte, error) {
	if len(es) == 0 {
		return nil, nil
	}
	src, _, path, err := openChunk(fsys, chunkDir, n)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	data := make([]byte, es[len(es)-1].Loc.End())
	if _, err := src.ReadAt(data, 0); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, sealedErr(err))
	}
	return data, nil
}

// reencodeChunk returns old, the bytes of chunk n whose records es
// describe, with every line in format 2: naming where its parent's line
// is after the rewrite (moved, which it extends with this chunk's lines).
func reencodeChunk(old []byte, es []entry, moved map[uuid.UUID]location, path string) ([]byte, []entry, error) {
	data := make([]byte, 0, len(old)+len(es)*24)
	out := make([]entry, len(es))
	for i, e := range es {
		line := old[e.Loc.Offset : e.Loc.End()-1] // without its newline
		h, pl, err := eventline.ReadEvent(line)
		if err != nil {
			return nil, nil, corruptf(path, e.Loc.Offset, "%w", err)
		}
		if h != e.Header {
			return nil, nil, corruptf(path, e.Loc.Offset, "record %s does not match its index entry %s", h.ID, e.ID)
		}
		pl.ParentAt = location{}
		if h.ParentID != uuid.Nil {
			at, ok := moved[h.ParentID]
			if !ok {
				return nil, nil, corruptf(path, e.Loc.Offset, "event %s names parent %s, not found before it", h.ID, h.ParentID)
			}
			pl.ParentAt = at
		}
		start := int64(len(data))
		data = eventline.AppendEvent(data, &h, pl)
		ne := e
		ne.Loc = location{Chunk: e.Loc.Chunk, Offset: start, Length: uint32(int64(len(data)) - start)}
		out[i] = ne
		moved[h.ID] = ne.Loc
	}
	return data, out, nil
}

// apply puts the chunk's new content in place: under its final name only
// once durable, the old form removed only after the new one is durable.
func (cp *chunkRewrite) apply(fsys vfs.FS, chunkDir string, perm os.FileMode) error {
	plainPath := filepath.Join(chunkDir, chunkName(cp.n))
	sealedPath := plainPath + sealedExt
	if cp.sealed {
		lines := index.AppendLines(make([]byte, 0, len(cp.entries)*index.TypicalLine), cp.entries)
		if err := zchunk.WriteBlocks(fsys, sealedPath, cp.data, lines, perm, sealBlockSize); err != nil {
			return err
		}
		if !cp.wasSealed {
			return removeIfExists(fsys, plainPath)
		}
		return nil
	}
	if err := durable.ReplaceFileAs(fsys, chunkDir, chunkName(cp.n), chunkName(cp.n)+upgradeTemp, cp.data, perm); err != nil {
		return err
	}
	if cp.wasSealed {
		return removeIfExists(fsys, sealedPath)
	}
	return nil
}
