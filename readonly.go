package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Read-only stores
//
// A store opened with Options.ReadOnly reads sessions that a writer in
// another process may be appending to. It takes no lock and writes
// nothing: opening a session runs the analysis half of reconciliation
// (see recovery.go) in memory and never its repairs. What it sees is a
// consistent prefix of the log: every record is checked by its CRC, a torn
// or half-written tail of the newest chunk is left out (it is either the
// writer's append in progress or what the writer's next open cuts), and an
// index line is used only when its chunk holds the record.
//
// A reader sees a session as it was when it last looked. Each call first
// compares the session's Revision with the one it last loaded and reloads
// the session when it changed, so a call sees every event whose Append
// returned before the call started. It may also see an event whose Append
// has written the record but not yet synced it: a crash could still lose
// that one, which a reader cannot tell from the file. Reloading reads the
// whole index and the unindexed tail, as opening does: its cost follows
// the session's size, not what changed.

// Revision identifies the state of a session's event log cheaply: the
// newest chunk file's number, form and size. Every append changes it (the
// chunk grows, or a new chunk starts), so a caller that polls can compare
// revisions instead of loading the session. Computing it lists the chunks
// directory and stats one file; it takes no lock and reads no record.
type Revision struct {
	Chunk  uint32 // number of the newest chunk
	Sealed bool   // it is a sealed (compressed) file
	Size   int64  // its size in bytes
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
// writing and a read-only store.
//
// Errors: ErrNotFound, ErrClosed.
func (s *Store) Revision(ctx context.Context, session uuid.UUID) (Revision, error) {
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
	return revisionOf(s.opts.fs, dir)
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
		info, err := fsys.Stat(path)
		sealed := false
		if errors.Is(err, os.ErrNotExist) {
			// Sealed, or sealed between the listing and the stat.
			info, err = fsys.Stat(path + sealedExt)
			sealed = true
		}
		if errors.Is(err, os.ErrNotExist) {
			continue // the listing is stale: list again
		}
		if err != nil {
			return Revision{}, err
		}
		return Revision{Chunk: n, Sealed: sealed, Size: info.Size()}, nil
	}
}

// openReadOnly opens a session for a read-only store, with h.mu held.
func (s *Store) openReadOnly(h *handle) error {
	m, err := readMeta(s.opts.fs, h.dir, h.id)
	if err != nil {
		return err
	}
	h.meta = m
	h.readOnly = true
	return s.reload(h)
}

// refresh reloads a read-only session if its revision changed.
func (s *Store) refresh(h *handle) error {
	rev, err := revisionOf(s.opts.fs, h.dir)
	if err != nil {
		return err
	}
	if rev == h.revision {
		return nil
	}
	return s.reload(h)
}

// reload analyzes a read-only session's files into h. The analysis sees
// a consistent prefix even while a writer appends; when it reports damage
// or fails, it is repeated (a few times at most), so that a reader does
// not take a writer's work in progress for damage.
func (s *Store) reload(h *handle) error {
	const attempts = 5
	for attempt := 1; ; attempt++ {
		before, err := revisionOf(s.opts.fs, h.dir)
		if err != nil {
			return err
		}
		fresh := &handle{id: h.id, dir: h.dir, readOnly: true}
		p, err := analyze(s.opts.fs, fresh)
		if err != nil || p.corrupt != nil {
			after, rerr := revisionOf(s.opts.fs, h.dir)
			if rerr != nil {
				return rerr
			}
			// Damage seen while the log changed may be the writer's work
			// in progress, and a listing taken while the writer sealed a
			// chunk may lack it under both names: look again.
			if attempt < attempts && (after != before || p == nil || p.corrupt != nil) {
				continue
			}
			if err != nil {
				return err
			}
		}
		// The revision from before the analysis: if the log grew during
		// it, the next call sees a change and reloads.
		h.entries, h.byID, h.revision = fresh.entries, fresh.byID, before
		h.damaged = nil
		if p.corrupt != nil {
			h.damaged = p.corrupt
		}
		return nil
	}
}
