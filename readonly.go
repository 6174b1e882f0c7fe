package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/journal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Read-only stores
//
// A store opened with Options.ReadOnly reads sessions that a writer in
// another process may be appending to. It takes no lock and writes
// nothing: opening a session runs the analysis half of reconciliation
// (see recovery.go) in memory and never its repairs, or, for a clean
// format 2 session, defers it until a call needs the index (lazy.go). What it sees is a
// consistent prefix of the log: every record is checked by its CRC, a torn
// or half-written tail of the newest chunk is left out (it is either the
// writer's append in progress or what the writer's next open cuts), and an
// index line is used only when its chunk holds the record.
//
// A reader sees a session as it was when it last looked. Each call first
// compares the session's Revision with the one it last loaded and reloads
// the session when it changed, so a call sees every event whose Append
// returned before the call started. It may also see an event whose Append
// has not returned yet: through a writer's journal (journal.go) only once
// it is durable there; from a session syncing its own chunk
// (Options.JournalSize negative) perhaps before its sync ended, so that a
// crash could still lose it, which a reader cannot tell from the file.
// After a power loss, the records a dead writer's journal holds and the
// chunks lack are laid over the chunks (journal.Overlay). A refresh reads only
// what was written after the newest event the reader holds (readTail); when
// the files do not simply extend that, it reads the session again, as
// opening does.

// Revision identifies the state of a session's event log cheaply: the
// newest chunk file's number, form and size. Every append changes it (the
// chunk's data grows, or a new chunk starts), and so does a Close that
// seals the active chunk (its form), so a caller that polls can
// compare revisions instead of loading the session. Computing it lists the
// chunks directory, stats one file and, for a plain chunk, reads a few
// bytes to find where its data ends (about 25 one-byte reads: a binary
// search for its free space); it takes no lock and reads no record.
type Revision struct {
	Chunk  uint32 // number of the newest chunk
	Sealed bool   // it is a sealed (compressed) file
	Size   int64  // the bytes of its data (a plain chunk's free space excluded)
}

// String formats the revision as "<chunk>.<size>", with "z" after the
// chunk number of a sealed one.
func (r Revision) String() string {
	if r.Sealed {
		return fmt.Sprintf("%dz.%d", r.Chunk, r.Size)
	}
	return fmt.Sprintf("%d.%d", r.Chunk, r.Size)
}

// Revision returns the session's current revision. It works the same in a
// writing and a read-only store; a follower (Options.ReadOnly with a
// Remote) first reads what the session's log gained (follow.go).
//
// Errors: ErrNotFound, ErrClosed.
func (s *Store) Revision(ctx context.Context, session uuid.UUID) (Revision, error) {
	if s.opts.ReadOnly && s.opts.Remote != nil {
		// A follower: its cache first holds what the log holds
		// (follow.go).
		if err := s.useHandle(ctx, session, s.reg.acquireLazy, func(*openSession) error { return nil }); err != nil {
			return Revision{}, err
		}
	}
	if err := s.begin(ctx); err != nil {
		return Revision{}, err
	}
	defer s.end()
	dir := s.sessionDir(session)
	if _, err := s.opts.fs.Stat(filepath.Join(dir, metaFile)); err != nil {
		if noSession(s.opts.fs, dir, err) {
			return Revision{}, fmt.Errorf("%w: session %s", ErrNotFound, session)
		}
		return Revision{}, err
	}
	rev, err := revisionOf(s.opts.fs, dir)
	if err != nil || rev == (Revision{}) {
		// Deleted between the stat and the listing: the directory
		// went away under it (and a listing of no directory is empty).
		if _, serr := s.opts.fs.Stat(filepath.Join(dir, metaFile)); serr != nil && noSession(s.opts.fs, dir, serr) {
			return Revision{}, fmt.Errorf("%w: session %s", ErrNotFound, session)
		}
	}
	return rev, err
}

// revisionOf computes the revision of the session in dir.
func revisionOf(fsys vfs.FS, dir string) (Revision, error) {
	chunkDir := filepath.Join(dir, chunksDir)
	for {
		chunks, err := listChunks(fsys, chunkDir)
		if err != nil || len(chunks) == 0 {
			return Revision{}, err
		}
		n := chunks[len(chunks)-1]
		path := filepath.Join(chunkDir, chunkName(n))
		size, err := plainDataEnd(fsys, path)
		sealed := false
		if errors.Is(err, os.ErrNotExist) {
			// Sealed, or sealed between the listing and the stat.
			var info fs.FileInfo
			if info, err = fsys.Stat(path + sealedExt); err == nil {
				size = info.Size()
			}
			sealed = true
		}
		if errors.Is(err, os.ErrNotExist) {
			continue // the listing is stale: list again
		}
		if err != nil {
			return Revision{}, err
		}
		return Revision{Chunk: n, Sealed: sealed, Size: size}, nil
	}
}

// plainDataEnd returns where the data of the plain chunk at path ends:
// the start of the zero bytes that end it (its free space). Records hold
// no zero byte, so a binary search finds it, reading one byte per step.
func plainDataEnd(fsys vfs.FS, path string) (int64, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, refusal(err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	lo, hi := int64(0), info.Size() // the data ends in [lo, hi]
	var b [1]byte
	for lo < hi {
		mid := lo + (hi-lo)/2
		if _, err := f.ReadAt(b[:], mid); err != nil {
			if errors.Is(err, io.EOF) { // cut back meanwhile
				hi = mid
				continue
			}
			return 0, err
		}
		if b[0] == 0 {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

// openReader opens a session for a read-only store, with h.mu held: lazy
// when its log is clean (openLazyReader), else indexed or damaged by the
// analysis (reload).
func (h *openSession) openReader() error {
	h.overlayJournal()
	m, format, err := h.files.readMeta(h.id)
	if err != nil {
		return err
	}
	h.meta, h.format = m, format
	h.keyStamp = h.keyRecordStamp()
	if _, err := h.prefix(); err != nil {
		return err
	}
	h.chunks = h.newChunkWriter()
	if h.openLazyReader() {
		return nil
	}
	return h.reload()
}

// overlayJournal lays the records of the journal the session's JOURNAL
// names over its files for reading (journal.Overlay), or reads the files
// as they are when it names none: the events of a writer that died with
// records only in its journal are there for a reader too.
func (h *openSession) overlayJournal() {
	h.rfs = h.opts.fs
	if ov := journal.Overlay(h.opts.fs, filepath.Dir(filepath.Dir(h.dir)), h.dir); ov != nil {
		h.rfs = ov
	}
	if l, ok := h.files.(*localFiles); ok && l.FS != h.rfs {
		h.files = newLocalFiles(h.rfs, l.Dir, l.Perm, l.DirPerm, l.MaxChunk, l.Log, l.frames)
	}
}

// refresh brings a read-only session up to date with the files if their
// revision changed: a lazy one checks its log again (or is analyzed), an
// indexed one reads the log's new tail (readTail), anything else is
// analyzed again (reload).
func (h *openSession) refresh() error {
	rev, err := revisionOf(h.rfs, h.dir)
	if err != nil || rev != h.revision {
		// A writer may have deleted the session (Delete): it is gone,
		// not empty.
		if _, serr := h.opts.fs.Stat(filepath.Join(h.dir, metaFile)); serr != nil && noSession(h.opts.fs, h.dir, serr) {
			return fmt.Errorf("%w: session %s", ErrNotFound, h.id)
		}
	}
	if err != nil {
		return err
	}
	if h.state == stateIndexed && h.meta.Encrypted {
		// A Reencrypt (reencrypt.go) keeps every line's place but gives
		// blob records new digests, and rewrites the key record: an
		// index read before it names blobs that are gone.
		if ks := h.keyRecordStamp(); ks != h.keyStamp {
			h.keyStamp = ks
			return h.reload()
		}
	}
	if rev == h.revision && h.holdsAll(rev) {
		return nil
	}
	if h.state == stateLazy {
		if h.openLazyReader() {
			return nil
		}
		return h.materialize() // the analysis; h stays lazy if it fails
	}
	if h.state == stateIndexed && h.readTail() {
		h.revision = rev
		return nil
	}
	return h.reload()
}

// keyRecordStamp is what a Stat says of the session's key record in the
// root's keys/ (encrypt.go).
func (h *openSession) keyRecordStamp() keyStamp {
	path := filepath.Join(filepath.Dir(filepath.Dir(h.dir)), keysDir, h.id.String()+".json")
	info, err := h.opts.fs.Stat(path)
	if err != nil {
		return keyStamp{}
	}
	return keyStamp{exists: true, size: info.Size(), mod: info.ModTime().UnixNano()}
}

// holdsAll reports whether a reader's h holds every record of the log at
// rev: its newest record ends where the newest plain chunk's data ends (or
// that chunk is empty or sealed). Bytes after that record, a write in
// progress or a torn tail that the writer's next open cuts, mean that the
// same revision can come back holding other records (the cut, then an
// append of the same length), so an unchanged revision proves nothing.
func (h *openSession) holdsAll(rev Revision) bool {
	if rev.Sealed || rev.Size == 0 {
		return true
	}
	tip, ok := h.lazyHead()
	if !ok {
		if len(h.Entries) == 0 {
			return false
		}
		tip = h.Entries[len(h.Entries)-1]
	}
	return tip.Loc.Chunk == rev.Chunk && tip.Loc.End() == rev.Size
}

// readTail adds to h the events written after the last one it holds,
// reading only the log from there: the rest of that event's chunk, then the
// embedded index of each newer sealed chunk or the records of each newer
// plain one. It reports false, having changed nothing, when the files do
// not simply extend what h holds (the chunk of its last event no longer
// reaches past it, a chunk is missing) or anything fails; reload then
// starts over.
func (h *openSession) readTail() bool {
	if len(h.Entries) == 0 {
		return false
	}
	fsys := h.rfs
	chunkDir := filepath.Join(h.dir, chunksDir)
	forms, _, err := chunkForms(fsys, chunkDir)
	if err != nil {
		return false
	}
	last := h.Entries[len(h.Entries)-1].Loc
	for n := uint32(0); n < uint32(len(forms)); n++ {
		if _, ok := forms[n]; !ok {
			return false
		}
	}
	if int(last.Chunk) >= len(forms) {
		return false
	}
	if f := forms[last.Chunk]; f.plain && !f.sealed {
		info, err := fsys.Stat(filepath.Join(chunkDir, chunkName(last.Chunk)))
		if err != nil || info.Size() < last.End() {
			return false // the record h holds last is gone: start over
		}
	}
	// The record h holds last must still be where h has it: a session
	// deleted and made again under its id has other records there (a
	// plain chunk's free space hides that its data is shorter).
	r := newChunkReader(fsys, chunkDir, nil)
	_, err = readEntry(r, &h.Entries[len(h.Entries)-1])
	r.close()
	if err != nil {
		return false
	}
	keep := len(h.Entries)
	p := &recoveryPlan{indexBad: -1}
	newest := uint32(len(forms)) - 1
	for n := last.Chunk; n <= newest; n++ {
		var err error
		switch {
		case n == last.Chunk:
			err = p.scanChunk(fsys, &h.memIndex, chunkDir, n, last.End(), n == newest)
		case forms[n].sealed:
			var es []entry
			if es, _, err = sealedIndex(fsys, chunkDir, n); err == nil {
				for i := range es {
					if err = h.Add(&es[i]); err != nil {
						break
					}
				}
			}
		default:
			err = p.scanChunk(fsys, &h.memIndex, chunkDir, n, 0, n == newest)
		}
		if err != nil {
			h.TruncateTo(keep)
			return false
		}
	}
	return true
}

// reload analyzes a read-only session's files into h. The analysis sees
// a consistent prefix even while a writer appends; when it reports damage
// or fails, it is repeated (a few times at most), so that a reader does
// not take a writer's work in progress for damage.
func (h *openSession) reload() error {
	const attempts = 5
	h.overlayJournal()
	for attempt := 1; ; attempt++ {
		before, err := revisionOf(h.rfs, h.dir)
		if err != nil {
			return err
		}
		p, err := analyze(h.rfs, h.dir, true, h.outside())
		if err != nil || p.damage() != nil {
			after, rerr := revisionOf(h.rfs, h.dir)
			if rerr != nil {
				return rerr
			}
			// Damage seen while the log changed may be the writer's work
			// in progress, and a listing taken while the writer sealed a
			// chunk may lack it under both names: look again.
			if attempt < attempts && (after != before || p == nil || p.damage() != nil) {
				continue
			}
			if err != nil {
				return err
			}
		}
		// The revision from before the analysis: if the log grew during
		// it, the next call sees a change and reloads.
		h.revision = before
		if d := p.damage(); d != nil {
			h.becomeDamaged(p.index, d) // a writer's open repairs a lost tail; a reader reports it
		} else {
			h.becomeIndexed(p.index)
		}
		return nil
	}
}
