package sessionstore

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/seal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Re-encryption: every record of an encrypted session sealed again under
// a new data key, for a data key believed leaked. It runs the rewrite
// protocol of Upgrade (upgrade.go) with one step before and one after:
//
//	 0. the key record gains a new generation (a new data key, wrapped),
//	    replaced atomically: from then on appends seal under it, and
//	    reads open both
//	 1-3. as the rewrite protocol: index.jsonl removed; each chunk whose
//	    lines hold an envelope of an older generation rewritten, each
//	    envelope sealed again under the new one (a record stored as a
//	    blob: its new envelope stored first as a blob of its own, synced,
//	    and the line names its digest); index.jsonl written
//	 4. the key record keeps the new generation only, replaced atomically
//
// An envelope sealed again holds the same body (the record, compressed as
// it was) under the same framing, so it has the same length, and so has
// its line: every event keeps its place, and the locations that lines,
// index entries and forks' prefixes hold stay true. A crash before step 4
// leaves the key record with both generations, so that each chunk opens
// in its old bytes or its new ones; the next Reencrypt finds the new
// generation there and goes on with it. After step 4 the blobs that held
// the old envelopes are no longer named by any line: Reencrypt collects
// them (GC) before it returns; a crash before that leaves them to the
// next GC.

// ErrNotEncrypted is returned by Reencrypt for a session that is not
// encrypted.
var ErrNotEncrypted = errors.New("sessionstore: session is not encrypted")

// Reencrypt seals every record of an encrypted session again under a new
// data key, for a data key believed leaked: the session's key record gains
// a new generation, every chunk and blob of the session is rewritten under
// it, and the older data keys leave the key record, so that from then on
// no copy of the session made before (a backup, an older file's sectors)
// opens with the key record as it is. The events keep their ids, parents,
// places in their chunks and records; a record stored as a blob gets a
// new digest (Event.Digest: Resolve of an event read before reads the
// event again); nothing else of the session is rewritten (session.json,
// HEAD, lanes). A fork's prefix stays sealed
// under its parent's key (Reencrypt the parent for it); a fork of this
// session reads its prefix under the new key.
//
// Durability: when Reencrypt returns nil, the rewritten chunks, blobs and
// index.jsonl, and the key record holding the new data key only, are
// durable, and the blobs of the old envelopes are removed. A crash
// during the call leaves a session that opens whole, with the same
// events, under a key record that holds the old data key and the new one;
// calling Reencrypt again completes it (see the protocol above) under
// the same new key.
//
// Concurrency: as Upgrade. The session is closed in this Store and its
// lock held until the rewrite ends: this Store's calls on it wait, writers
// in another process get ErrLocked. A reader in another Store that read
// the key record before the new generation was added and reads a
// rewritten chunk fails that call with a *CorruptionError (a record that
// does not open under its key is never returned); its next call reads the
// key record again, and a read-only Store that holds the session's index
// reads the session again when the key record changed (readonly.go).
//
// Errors: ErrReadOnly; ErrInvalidOptions without Options.Keys;
// ErrRemoteUnsupported with Options.Remote; ErrNotEncrypted; ErrNotFound; ErrLocked; ErrClosed; a *KeyError when the
// provider does not unwrap or wrap the session's keys; the
// *CorruptionError of a damaged session, which is left as it is; an I/O
// error, after which the session is whole, as after a crash.
func (s *Store) Reencrypt(ctx context.Context, session uuid.UUID) error {
	if err := s.reencrypt(ctx, session); err != nil {
		return fmt.Errorf("sessionstore: re-encrypt session %s: %w", session, err)
	}
	// The blobs of the old envelopes: named by no line any more.
	if _, err := s.GC(ctx, session); err != nil {
		return fmt.Errorf("sessionstore: re-encrypt session %s: collect the old blobs: %w", session, err)
	}
	return nil
}

func (s *Store) reencrypt(ctx context.Context, session uuid.UUID) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	switch {
	case s.opts.ReadOnly:
		return ErrReadOnly
	case s.opts.Keys == nil:
		return fmt.Errorf("%w: Reencrypt needs Options.Keys", ErrInvalidOptions)
	case s.opts.Remote != nil:
		return fmt.Errorf("%w: Reencrypt (docs/encryption.md)", ErrRemoteUnsupported)
	}
	if _, err := s.opts.fs.Stat(filepath.Join(s.sessionDir(session), workspaceMarker)); err == nil {
		return fmt.Errorf("%w: session %s", ErrWorkspaceReencrypt, session) // and again under the lock (rewriteSession)
	}
	return s.rewriteSession(ctx, session, rewriteJob{reseal: true})
}

// resealer is the state of step 0 to 4 for one session, under its lock.
type resealer struct {
	s    *Store
	id   uuid.UUID
	path string      // of the key record
	rec  seal.Record // as on disk
	key  *sessionKey // its keys: every generation, the newest current
}

// newGeneration runs step 0: it reads the session's key record and, unless
// an earlier, interrupted Reencrypt added one, adds a new generation to
// it, durably.
func (s *Store) newGeneration(ctx context.Context, id uuid.UUID) (*resealer, error) {
	path := s.keyPath(id)
	if _, err := s.opts.fs.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := s.moveKeyOutOfSession(id); err != nil { // left there by a Delete cut short
			return nil, err
		}
	}
	rec, err := seal.ReadRecord(s.opts.fs, path, id)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &KeyError{Session: id, Err: fmt.Errorf("%w: no key record (%s)", ErrKeyUnavailable, path)}
	}
	if err != nil {
		return nil, damage(err)
	}
	if len(rec.Keys) == 1 {
		_, w, err := s.newDataKey(ctx, id, rec.Current().Gen+1)
		if err != nil {
			return nil, err
		}
		rec.Keys = append(rec.Keys, w)
		s.forgetKey(id)
		if err := seal.WriteRecord(s.opts.fs, filepath.Dir(path), filepath.Base(path), rec, 0o600); err != nil {
			return nil, fmt.Errorf("key record %s: %w", path, err)
		}
	}
	k, err := s.unwrapRecord(ctx, id, rec)
	if err != nil {
		return nil, err
	}
	return &resealer{s: s, id: id, path: path, rec: rec, key: k}, nil
}

// finish runs step 4: the key record keeps the newest generation only.
func (r *resealer) finish() error {
	r.s.forgetKey(r.id)
	if len(r.rec.Keys) == 1 {
		return nil
	}
	r.rec.Keys = r.rec.Keys[len(r.rec.Keys)-1:]
	if err := seal.WriteRecord(r.s.opts.fs, filepath.Dir(r.path), filepath.Base(r.path), r.rec, 0o600); err != nil {
		return fmt.Errorf("key record %s: %w", r.path, err)
	}
	return nil
}

// reseal returns env sealed under the current generation, and false when
// it already was.
func (r *resealer) reseal(env []byte) ([]byte, bool, error) {
	gen, body, err := r.key.openBody(env)
	if err != nil {
		return nil, false, err
	}
	if gen == r.key.cur {
		return env, false, nil
	}
	out := r.key.sealBody(body)
	if len(out) != len(env) {
		return nil, false, fmt.Errorf("%w: sealed again, %d bytes instead of %d", errEnvelope, len(out), len(env))
	}
	return out, true, nil
}

// resealPreview returns pv, the preview of event id, sealed under the
// current generation: as it is when it already is (or is not sealed),
// none when it does not open (it could not be shown either).
func (r *resealer) resealPreview(id uuid.UUID, pv eventline.Preview) eventline.Preview {
	raw := pv.SealedBytes()
	if len(raw) < 4 || binary.BigEndian.Uint32(raw) == r.key.cur {
		return pv
	}
	text, ok := r.key.openPreview(id, &pv)
	if !ok {
		return eventline.Preview{}
	}
	return r.key.sealPreviewText(id, text)
}

// chunk returns old, the logical bytes of one chunk of the session in dir
// whose records es describe, with every envelope sealed under the current
// generation, and its entries (a blob's new digest); a record stored as a
// blob gets its new blob, synced, first. Every line keeps its length.
func (r *resealer) chunk(fsys vfs.FS, dir string, old []byte, es []entry, path string, perm, dirPerm os.FileMode) ([]byte, []entry, error) {
	data := make([]byte, 0, len(old))
	out := make([]entry, len(es))
	var dirs blob.Dirs // the blob directories known synced
	for i, e := range es {
		line := old[e.Loc.Offset : e.Loc.End()-1] // without its newline
		h, pl, err := eventline.ReadEvent(line)
		if err != nil {
			return nil, nil, corruptf(path, e.Loc.Offset, "%w", err)
		}
		if h != e.Header {
			return nil, nil, corruptf(path, e.Loc.Offset, "record %s does not match its index entry %s", h.ID, e.ID)
		}
		ne := e
		ne.Preview = r.resealPreview(e.ID, e.Preview)
		if pl.Blob {
			env, err := blob.Read(fsys, dir, pl.Digest, pl.Size)
			if err != nil {
				return nil, nil, damage(err)
			}
			next, changed, err := r.reseal(env)
			if err != nil {
				return nil, nil, corruptf(blobPath(dir, pl.Digest), 0, "event %s: %w", h.ID, err)
			}
			if changed {
				pl.Digest = sha256.Sum256(next)
				if err := blob.Put(fsys, dir, pl.Digest, next, perm, dirPerm, &dirs); err != nil {
					return nil, nil, err
				}
				ne.Digest = pl.Digest
			}
		} else {
			if pl.Record, _, err = r.reseal(pl.Record); err != nil {
				return nil, nil, corruptf(path, e.Loc.Offset, "event %s: %w", h.ID, err)
			}
		}
		start := int64(len(data))
		data = eventline.AppendEvent(data, &h, pl)
		if int64(len(data))-start != int64(e.Loc.Length) {
			return nil, nil, corruptf(path, e.Loc.Offset, "event %s: its line sealed again is %d bytes, not %d", h.ID, int64(len(data))-start, e.Loc.Length)
		}
		out[i] = ne
	}
	return data, out, nil
}
