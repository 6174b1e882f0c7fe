package sessionstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// A subagent's session names its parent (Meta.ParentSession), the
// parent's event that spawned it (Meta.SpawnedBy) and its delegation
// depth (Meta.Depth). The rules, which checkMeta enforces on every
// session.json this build writes:
//
//   - Depth is 0 for a top-level session (no ParentSession) and at least
//     1 for a subagent: Depth > 0 exactly when ParentSession is set;
//   - SpawnedBy is set only with ParentSession (a subagent may have been
//     spawned outside any recorded event, so it may be unset);
//   - a session is not its own parent.
//
// Create also checks the parent: it must exist (on disk, in the object
// store with Options.Remote, or deferred in this Store), and a Depth
// left 0 is set to the parent's Depth + 1; a Depth given must be that
// number. Create does not check that SpawnedBy is an event of the parent
// (that would load the parent's index, perhaps locked by another
// writer). The lineage is fixed at Create: UpdateMeta cannot change it.

// checkLineage checks the lineage rules above, with ErrInvalidMeta.
func checkLineage(m Meta) error {
	switch {
	case m.Depth < 0:
		return fmt.Errorf("%w: Depth %d is negative", ErrInvalidMeta, m.Depth)
	case m.ParentSession == uuid.Nil && m.SpawnedBy != uuid.Nil:
		return fmt.Errorf("%w: SpawnedBy is set without ParentSession", ErrInvalidMeta)
	case m.ParentSession == uuid.Nil && m.Depth != 0:
		return fmt.Errorf("%w: Depth %d without ParentSession (a top-level session has depth 0)", ErrInvalidMeta, m.Depth)
	case m.ParentSession != uuid.Nil && m.Depth == 0:
		return fmt.Errorf("%w: a subagent (ParentSession set) has Depth 1 or more", ErrInvalidMeta)
	case m.ParentSession != uuid.Nil && m.ParentSession == m.ID:
		return fmt.Errorf("%w: session %s names itself as its parent", ErrInvalidMeta, m.ID)
	}
	return nil
}

// sameLineage reports whether a and b have the same lineage.
func sameLineage(a, b Meta) bool {
	sameFork := (a.ForkedFrom == nil) == (b.ForkedFrom == nil) && (a.ForkedFrom == nil || *a.ForkedFrom == *b.ForkedFrom)
	return sameFork && a.ParentSession == b.ParentSession && a.SpawnedBy == b.SpawnedBy && a.Depth == b.Depth
}

// resolveLineage completes a new subagent's meta for Create, inside a call
// Close waits for: it reads the parent's metadata (ErrNotFound, wrapped,
// if there is no such session) and sets a zero Depth to one more than the
// parent's, or refuses a Depth given that is not (ErrInvalidMeta).
// Metadata without ParentSession is left for checkLineage.
func (s *Store) resolveLineage(ctx context.Context, m *Meta) error {
	if m.ParentSession == uuid.Nil || m.ParentSession == m.ID {
		return nil
	}
	parent, err := s.parentMeta(ctx, m.ParentSession)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: parent session %s of session %s", ErrNotFound, m.ParentSession, m.ID)
	} else if err != nil {
		return fmt.Errorf("sessionstore: parent session %s: %w", m.ParentSession, err)
	}
	switch want := parent.Depth + 1; {
	case m.Depth == 0:
		m.Depth = want
	case m.Depth != want:
		return fmt.Errorf("%w: Depth %d, but parent session %s has depth %d", ErrInvalidMeta, m.Depth, m.ParentSession, parent.Depth)
	}
	return nil
}

// parentMeta is Meta for resolveLineage: a session deferred in this Store
// counts, as the first write of its subagent makes the parent's files
// first (materialize, defer.go).
func (s *Store) parentMeta(ctx context.Context, id uuid.UUID) (Meta, error) {
	if m, ok := s.deferred.meta(id); ok {
		return m, nil
	}
	if s.opts.Remote != nil {
		return s.metaRemote(ctx, id)
	}
	m, _, err := readMeta(s.opts.fs, s.sessionDir(id), id)
	return m, err
}
