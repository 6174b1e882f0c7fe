package sessionstore

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/eventline"
)

// Node is the payload-free view of an event, for timeline rendering: it is
// built from the in-memory index and costs no record read.
type Node struct {
	ID, ParentID, BranchFrom uuid.UUID
	Kind                     Kind
	Role                     Role
	Time                     time.Time
	Size                     int64 // bytes of the record's compact JSON
	// Preview is a short text of the record for a timeline: the first
	// characters of a message's content (else its reasoning, else its
	// first tool call), a tool call's name and the start of its
	// arguments, a tool result's output after "error:" when IsError, a
	// summary's text (else its first goal), a custom record's text. At
	// most 80 bytes, cut at a rune boundary, valid UTF-8, whitespace
	// runs as one space. It is made once, when the event's index entry
	// is built, and kept with it, so Tree reads no record for it. Empty
	// for an event whose index line was written before previews existed,
	// and for a blob record whose entry was rebuilt from its chunk line
	// (internal/eventline/preview.go). In an encrypted session it is
	// sealed in the index and opened with the session's key, its text cut
	// to 48 bytes; empty for a Store without the key, and for a blob
	// record whose entry was rebuilt from its chunk line. An encrypted
	// session's inline record whose entry was rebuilt so gets its preview
	// again from the record, read once per open session (fillPreviews:
	// the one case in which Tree, TreeSeq and Children read records;
	// docs/encryption.md).
	Preview string
}

// Tree returns every event of the session without records, in the order
// they were appended (parents before children). For a fork (Fork) that
// is the prefix path, from the parent's root to the fork point, then the
// fork's own events: the parent's other branches are not the fork's. It
// reads no record; in a session opened without its index (see Opening in
// the package doc) it first loads the index, which reads the sealed
// chunks' embedded indexes and the newest chunk's unindexed tail.
//
// Errors: ErrNotFound, ErrLocked, ErrClosed; *CorruptionError for a damaged
// session, with the nodes of its valid prefix.
func (s *Store) Tree(ctx context.Context, session uuid.UUID) ([]Node, error) {
	prefix, err := s.prefixNodes(ctx, session) // a fork's prefix path first (fork.go)
	if err != nil {
		return nil, err
	}
	var out []Node
	err = s.withHandle(ctx, session, func(h *openSession) error {
		out = make([]Node, len(prefix), len(prefix)+len(h.Entries))
		copy(out, prefix)
		out = nodes(out, h.Entries, s.ownPreviews(ctx, h, h.Entries))
		return nil
	})
	return out, err
}

// ownPreviews returns how the previews of h's entries es (a range of
// h.Entries) are shown (previews), with h.mu held: under its key when its
// metadata says it is encrypted, after fillPreviews.
func (s *Store) ownPreviews(ctx context.Context, h *openSession, es []entry) previews {
	if !h.meta.Encrypted {
		return previews{}
	}
	key, err := s.heldKey(ctx, h)
	if key != nil {
		h.fillPreviews(key, es)
	}
	return previewsOf(key, err)
}

// fillPreviews gives the entries es of h, an encrypted session, the
// sealed previews they lost with their index lines, with h.mu held. An
// entry rebuilt from its chunk line has none (the line holds the
// envelope): those of the records past index.jsonl's end, which lags the
// chunk by up to index.HoldLines records, when another Store or process
// reads the session (a read-only Store's tail, a reopen after a crash, a
// remote restore on another machine), and every one after a recovery
// rebuilt index.jsonl. Their records are read and opened under key, once
// per open session and entry: an entry without text, or whose record
// does not read or open (Load reports that), gets eventline.SealedNone.
// A blob's is left empty, as in a plain session (it would read the
// blob). The previews made go to disk with the entries when their chunk
// is sealed (its embedded index), not into index.jsonl's written lines.
func (h *openSession) fillPreviews(key *sessionKey, es []entry) {
	var r *chunkReader
	for i := range es {
		e := &es[i]
		if e.Blob || e.Preview.Sealed() {
			continue
		}
		if r == nil {
			r = h.files.chunkReader()
			defer r.close()
		}
		e.Preview = key.sealPreview(e.ID, recordPreview(r, key, e))
	}
}

// recordPreview returns the preview of e's record, read with r and
// opened under key: none when it does not read or open (Load reports
// that).
func recordPreview(r *chunkReader, key *sessionKey, e *entry) eventline.Preview {
	ev, err := readEntry(r, e)
	if err != nil || ev.Record == nil {
		return eventline.Preview{}
	}
	rec, err := key.openRecord(ev.Record)
	if err != nil {
		return eventline.Preview{}
	}
	return eventline.PreviewOf(e.Kind, rec)
}

// Children returns the direct children of an event, in append order,
// without records; uuid.Nil as id returns the roots. In a fork, the
// events of its prefix path count as the fork's (see Tree). It reads no
// record, and loads the index as Tree does.
//
// Errors: ErrNotFound when id is not in the session; ErrLocked; ErrClosed;
// *CorruptionError as Tree.
func (s *Store) Children(ctx context.Context, session, id uuid.UUID) ([]Node, error) {
	prefix, err := s.prefixNodes(ctx, session) // a fork's prefix path (fork.go)
	if err != nil {
		return nil, err
	}
	var out []Node
	err = s.withHandle(ctx, session, func(h *openSession) error {
		if id != uuid.Nil && !h.inPrefix(id) {
			if _, err := h.lookup(id); err != nil {
				return err
			}
		}
		out = []Node{}
		for _, n := range prefix {
			if n.ParentID == id {
				out = append(out, n)
			}
		}
		v := s.ownPreviews(ctx, h, h.Entries)
		for i := range h.Entries {
			if h.Entries[i].ParentID == id {
				out = append(out, nodeOf(&h.Entries[i], v))
			}
		}
		return nil
	})
	return out, err
}
