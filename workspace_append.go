package sessionstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
)

// appendProduced appends the one event produce returns, a child of
// parent (ErrConflict, nothing appended, if the next parent is another by
// then), after the blobs produce stores through put: each a content,
// sealed under the session's key in an encrypted session, stored as a
// blob of the session (durable when put returns) and kept from GC until
// the event is published or the append fails. put returns the blob's
// digest ("sha256:<hex>") and size. produce runs without the session's
// mutex, so appends, reads and GC go on meanwhile; it may call put from
// many goroutines. An Event with no Kind from produce appends nothing.
// The event appended is stored in *out.
func (s *Store) appendProduced(ctx context.Context, session, parent uuid.UUID, produce func(put func([]byte) (string, int64, error)) (Event, error), out *Event) error {
	key, err := s.ownKey(ctx, session)
	if err != nil {
		return err
	}
	if err := s.materialize(ctx, session); err != nil {
		return err
	}
	h, err := s.reg.acquire(ctx, session, nil)
	if err != nil {
		return err
	}
	if err := h.writable(); err != nil {
		s.reg.release(h)
		return err
	}
	if err := s.markWorkspace(h); err != nil {
		s.reg.release(h)
		return err
	}
	var protected [][32]byte
	unprotect := func() { // with h.mu held
		for _, d := range protected {
			if h.writingBlobs[d]--; h.writingBlobs[d] <= 0 {
				delete(h.writingBlobs, d)
			}
		}
	}
	h.mu.Unlock()
	put := func(content []byte) (string, int64, error) {
		rec := content
		if key != nil {
			rec = key.sealRecord(content)
		}
		d := sha256.Sum256(rec)
		h.mu.Lock()
		if h.writingBlobs == nil {
			h.writingBlobs = map[[32]byte]int{}
		}
		h.writingBlobs[d]++
		protected = append(protected, d)
		h.mu.Unlock()
		if err := h.files.putBlob(d, rec, nil); err != nil {
			return "", 0, fmt.Errorf("sessionstore: write workspace blob: %w", err)
		}
		return digestString(d), int64(len(rec)), nil
	}
	ev, err := produce(put)
	h.mu.Lock()
	if err != nil || ev.Kind == "" {
		unprotect()
		s.reg.release(h)
		return err
	}
	rec, err := prepareRecord(ev, s.opts.MaxRecordSize)
	if err != nil {
		unprotect()
		s.reg.release(h)
		return err
	}
	if key != nil {
		// The contents are sealed under key's current generation; a
		// Reencrypt cannot have run since (the marker refuses it), but
		// say so rather than commit contents no key could open.
		if cur, err := s.heldKey(ctx, h); err != nil || cur == nil || cur.cur != key.cur {
			unprotect()
			s.reg.release(h)
			return fmt.Errorf("%w: session %s: its key changed during the snapshot; nothing was appended", ErrConflict, session)
		}
	}
	batch := []pendingEvent{s.pendingOf(ev, rec, key)}
	opts := AppendOptions{ExpectParent: parent, ExpectRoot: parent == uuid.Nil}
	check := func(h *openSession) error {
		if err := h.writable(); err != nil {
			return err
		}
		return checkParent(h, opts)
	}
	g, evs, err := h.queue(ctx, batch, uuid.Nil, check)
	if err != nil {
		unprotect()
		s.reg.release(h)
		return err
	}
	err = h.commit(g) // returns with h.mu released
	h.mu.Lock()
	unprotect()
	s.reg.release(h)
	if err != nil {
		return err
	}
	*out = evs[0]
	return nil
}

// manifestBlobs adds to referenced the blobs the workspace manifests of
// h's own events name (GC keeps them), with h.mu held. It reads the
// record of each custom event whose preview starts with a manifest's
// mark, or has none. A manifest it cannot read is an error: GC then
// removes nothing.
func (s *Store) manifestBlobs(ctx context.Context, h *openSession, referenced map[[32]byte]bool) error {
	key, kerr := s.heldKey(ctx, h)
	v := previewsOf(key, kerr)
	mark := []byte(recordMark(snapshotTag))
	var r *chunkReader
	defer func() {
		if r != nil {
			r.close()
		}
	}()
	var text []byte
	for i := range h.Entries {
		e := &h.Entries[i]
		if e.Kind != eventline.KindCustom {
			continue
		}
		text = v.appendText(text[:0], e)
		if len(text) > 0 && !bytes.HasPrefix(text, mark) {
			continue
		}
		if r == nil {
			r = h.files.chunkReader()
		}
		ev, err := readEntry(r, e)
		if err != nil {
			return err
		}
		rec := ev.Record
		if rec == nil && e.Blob {
			if rec, err = readBlob(s.opts.fs, h.dir, e.Digest, e.Size); err != nil {
				if again, ferr := s.fetchMissingBlob(ctx, h.dir, e.Digest, e.Size); again {
					rec, err = readBlob(s.opts.fs, h.dir, e.Digest, e.Size)
				} else if ferr != nil {
					err = ferr
				}
			}
			if err != nil {
				return err
			}
		}
		if key != nil && rec != nil {
			if rec, err = key.openRecord(rec); err != nil {
				return corruptf(h.dir, 0, "event %s: %w", e.ID, err)
			}
		} else if kerr != nil {
			return kerr
		}
		if !bytes.HasPrefix(rec, mark) {
			continue
		}
		m, err := decodeManifest(rec)
		if err != nil {
			return corruptf(h.dir, 0, "event %s: workspace manifest: %w", e.ID, err)
		}
		for _, f := range m.Files {
			if f.Deleted {
				continue
			}
			ds, _ := f.blobOf()
			if d, err := parseDigest(ds); err == nil {
				referenced[d] = true
			}
		}
	}
	return nil
}

// workspaceMarker is the file that marks a session whose events may name
// workspace contents, written (durably) before its first snapshot stores
// any: Reencrypt, which would make sealed contents unreadable, refuses a
// session that has it (rewriteSession checks it under the session's
// lock, so a snapshot that began before cannot slip past).
const workspaceMarker = "WORKSPACE"

// markWorkspace writes h's workspace marker if it has none, with h.mu
// held.
func (s *Store) markWorkspace(h *openSession) error {
	if _, ok := s.marked.Load(h.id); ok {
		return nil
	}
	if _, err := s.opts.fs.Stat(filepath.Join(h.dir, workspaceMarker)); err != nil {
		if err := durable.ReplaceFile(s.opts.fs, h.dir, workspaceMarker, []byte("workspace snapshots\n"), s.opts.FileMode); err != nil {
			return fmt.Errorf("sessionstore: mark session %s as holding a workspace: %w", h.id, err)
		}
	}
	s.marked.Store(h.id, true)
	return nil
}
