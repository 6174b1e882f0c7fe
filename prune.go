package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/journal"
)

// PrunePolicy selects the sessions Prune removes. The filters (Labels,
// WorkingDir) choose the sessions the policy applies to; of those, the
// KeepNewest newest are kept, and of the rest, those last updated before
// Before are removed (all of the rest when Before is zero). A policy must
// set Before or KeepNewest: one with neither is refused, rather than
// removing every session it matches.
//
// "Last updated" is the session's last write: Meta.UpdatedAt as Meta
// reports it (for a session this Store has open, the time of its newest
// append), and for a session whose newest chunk changed after its
// session.json was written (its writer, in another process or one that
// crashed, has not recorded its appends yet), the time of the newest
// event its files hold, if later. A session written to a moment ago is
// never older than Before.
type PrunePolicy struct {
	// Before, if not zero, removes only sessions whose Meta.UpdatedAt is
	// before it.
	Before time.Time
	// KeepNewest, if positive, keeps the KeepNewest matching sessions
	// updated most recently (by Meta.UpdatedAt, then by id), whatever
	// their age.
	KeepNewest int
	// Labels, if not empty, applies the policy only to sessions that have
	// every one of these labels with these values.
	Labels map[string]string
	// WorkingDir, if not empty, applies the policy only to sessions whose
	// Meta.WorkingDir is exactly it.
	WorkingDir string
	// KeepRecent keeps, whatever the rest of the policy says, the
	// sessions written within KeepRecent before now (by their last write,
	// as Before judges it) and those this Store has open or opened within
	// it; Prune reports them in Skipped with ErrRecentlyUsed. Zero selects
	// DefaultKeepRecent; a negative duration keeps none for being recent
	// (a session another writer holds is still skipped, with ErrLocked).
	KeepRecent time.Duration
	// DryRun reports what Prune would remove and removes nothing.
	DryRun bool
}

// PinLabel is the label that pins a session: Prune never removes a
// session that has it, whatever its value (Meta.Pinned). Delete and
// Purge remove pinned sessions as any other: a pin guards against
// policies, not against a deliberate delete.
const PinLabel = "sessionstore.pinned"

// Pinned says whether the session is pinned (it has the label PinLabel):
// Prune never removes it.
func (m Meta) Pinned() bool {
	_, ok := m.Labels[PinLabel]
	return ok
}

// Pin pins session id (pinned true) or unpins it, by adding or removing
// the label PinLabel through UpdateMeta, and returns its metadata as
// UpdateMeta does.
func (s *Store) Pin(ctx context.Context, id uuid.UUID, pinned bool) (Meta, error) {
	return s.UpdateMeta(ctx, id, func(m *Meta) {
		if !pinned {
			delete(m.Labels, PinLabel)
			return
		}
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		if _, ok := m.Labels[PinLabel]; !ok {
			m.Labels[PinLabel] = "true"
		}
	})
}

// PruneItem is a session Prune removed (or would remove), or skipped.
type PruneItem struct {
	Meta  Meta
	Bytes int64 // the bytes of its files, when Prune chose it
	// Err, for a skipped session, says why: ErrHasForks for a session
	// that a session Prune keeps forks, ErrConflict for one written to
	// after Prune chose it (checked again under the session's lock, just
	// before its delete), or Delete's error (ErrLocked for a session
	// another writer holds).
	Err error
}

// PruneResult is what Prune removed, or with DryRun would remove.
type PruneResult struct {
	Removed []PruneItem // in the order removed: forks before the sessions they fork
	Skipped []PruneItem // chosen by the policy but kept, and why
	Bytes   int64       // the sum of Removed's Bytes
}

// Prune removes the sessions policy selects (see PrunePolicy), each as
// Delete removes one, and reports them with the bytes their files held.
// With policy.DryRun it removes nothing and reports what it would remove
// from the sessions as they are: a run without DryRun on the same
// sessions removes exactly those, unless a session is in use by another
// writer (then skipped with ErrLocked) or changes meanwhile. A session
// that a session Prune keeps forks (Meta.ForkedFrom; a fork this Store
// holds deferred, Options.DeferCreate, too) is skipped with
// ErrHasForks, not an error of the whole Prune; a fork that Prune also
// removes is removed first, and when that fork is skipped (ErrLocked,
// say), so is the session it forks, with ErrHasForks. A pinned session
// (Meta.Pinned) is never removed (skipped with ErrPinned), nor, unless
// policy.KeepRecent is negative, one written or opened by this Store
// within it (skipped with ErrRecentlyUsed); the dry run judges them the
// same. What Prune removes goes to the trash as Delete's does (kept for
// Options.TrashFor: Undelete brings it back). Prune also removes the
// trash's expired entries and what earlier deletes left there (that
// space is not counted in Bytes).
//
// Durability: as Delete, for each removed session; a crash during Prune
// leaves each session whole or gone, and those reported removed (when it
// returned) gone.
//
// A dry run also works on a read-only store, and writes nothing.
//
// With Options.Remote, each session goes as Delete removes it from the
// object store, a session another Store holds is skipped with ErrLocked,
// and Bytes counts the local cache's files only (the objects' sizes are
// not read).
//
// Errors: ErrInvalidPolicy; ErrReadOnly (unless DryRun); ErrClosed; a context error (the result then holds what
// was removed so far); or List's error other than a *ListError (sessions
// List cannot read are left alone).
func (s *Store) Prune(ctx context.Context, policy PrunePolicy) (PruneResult, error) {
	var res PruneResult
	if policy.KeepNewest < 0 {
		return res, fmt.Errorf("%w: KeepNewest %d is negative", ErrInvalidPolicy, policy.KeepNewest)
	}
	if policy.KeepRecent == 0 {
		policy.KeepRecent = DefaultKeepRecent
	}
	if policy.Before.IsZero() && policy.KeepNewest == 0 {
		return res, fmt.Errorf("%w: set Before or KeepNewest", ErrInvalidPolicy)
	}
	if err := s.checkDeletable(); err != nil && !(policy.DryRun && errors.Is(err, ErrReadOnly)) {
		return res, err
	}
	forks, metas, err := s.forkIndex(ctx)
	if err != nil {
		return res, err
	}
	if err := s.begin(ctx); err != nil {
		return res, err
	}
	defer s.end()
	if !policy.DryRun {
		s.purgeTrash()
	}
	res = s.prunePlan(metas, forks, policy)
	if policy.DryRun {
		return res, nil
	}
	removed := res.Removed[:0:0]
	res.Bytes = 0
	kept := map[uuid.UUID]bool{} // chosen, but not removed
	for _, it := range res.Removed {
		if err := ctx.Err(); err != nil {
			res.Removed = removed
			return res, err
		}
		// A fork that stays (its delete failed) keeps the session it
		// forks, as in the plan: its prefix is read from that one's files.
		var staying []uuid.UUID
		for _, f := range forks[it.Meta.ID] {
			if kept[f] {
				staying = append(staying, f)
			}
		}
		if len(staying) > 0 {
			kept[it.Meta.ID] = true
			it.Err = forksError(it.Meta.ID, staying)
			res.Skipped = append(res.Skipped, it)
			continue
		}
		if err := s.deleteSession(ctx, it.Meta.ID, s.unchangedSince(ctx, it.Meta), true); err != nil {
			kept[it.Meta.ID] = true
			it.Err = err
			res.Skipped = append(res.Skipped, it)
			continue
		}
		removed = append(removed, it)
		res.Bytes += it.Bytes
	}
	res.Removed = removed
	return res, nil
}

// usedSince says whether session m (its UpdatedAt its last write) was
// written at or after since, or is open in this Store, or was opened by
// it within window before now (on the wall clock: registry.openedAt).
func (s *Store) usedSince(m Meta, since time.Time, window time.Duration) bool {
	if !m.UpdatedAt.Before(since) {
		return true
	}
	t, ok := s.reg.openedAt(m.ID)
	return ok && time.Since(t) <= window
}

// lastWrite returns when session m was last written, as Prune judges it:
// m.UpdatedAt (as List reports it: for a session this Store has open, its
// newest append), or, when the session's newest chunk file changed after
// its session.json (a writer that appended and did not record it: one
// that crashed, or one in another process that has not closed or flushed
// the session yet), the later of that and the time of the newest event
// the session's files hold. What cannot be read is judged by m.UpdatedAt.
func (s *Store) lastWrite(m Meta) time.Time {
	fsys := s.opts.fs
	dir := s.sessionDir(m.ID)
	mi, err := fsys.Stat(filepath.Join(dir, metaFile))
	if err != nil {
		return m.UpdatedAt
	}
	chunks := filepath.Join(dir, chunksDir)
	names, err := fsys.ReadDir(chunks)
	if err != nil {
		return m.UpdatedAt
	}
	// The newest chunk sorts last; its plain and sealed forms (both there
	// while it is sealed) sort together.
	newer := false
	if ov := journal.Overlay(fsys, s.dir, dir); ov != nil {
		// A writer that died (with the machine) left records in its
		// journal that the chunks lack (journal.go): they count too.
		fsys, newer = ov, true
	}
	for _, name := range names[max(len(names)-2, 0):] {
		if ci, err := fsys.Stat(filepath.Join(chunks, name)); err == nil && ci.ModTime().After(mi.ModTime()) {
			newer = true
		}
	}
	if !newer {
		return m.UpdatedAt
	}
	var outside func(uuid.UUID) bool
	if m.ForkedFrom != nil {
		outside = func(uuid.UUID) bool { return true } // the prefix is the parent's
	}
	p, err := analyze(fsys, dir, true, outside)
	if err != nil {
		return m.UpdatedAt
	}
	if e, ok := p.index.Last(); ok {
		if t := time.Unix(0, e.Time).UTC(); t.After(m.UpdatedAt) {
			return t
		}
	}
	return m.UpdatedAt
}

// unchangedSince is Prune's last check of a session it chose, planned
// (with its last write as UpdatedAt), run by deleteSession under the
// session's lock: a session written since the plan was made is kept, with
// an error wrapping ErrConflict.
func (s *Store) unchangedSince(ctx context.Context, planned Meta) func() error {
	return func() error {
		var m Meta
		var err error
		if s.opts.Remote != nil {
			m, err = s.metaRemote(ctx, planned.ID)
		} else {
			m, _, err = readMeta(s.opts.fs, s.sessionDir(planned.ID), planned.ID)
		}
		if errors.Is(err, ErrNotFound) {
			return nil // gone meanwhile: the delete finds nothing to do
		}
		if err != nil {
			return err
		}
		if last := s.lastWrite(m); !last.Equal(planned.UpdatedAt) {
			return fmt.Errorf("%w: session %s was written since Prune chose it (last write %s, was %s)",
				ErrConflict, planned.ID, last.Format(time.RFC3339Nano), planned.UpdatedAt.Format(time.RFC3339Nano))
		}
		return nil
	}
}

// prunePlan chooses what Prune removes from metas (List's answer): the
// sessions the policy selects, less those a kept session forks, ordered
// so that a fork comes before the session it forks.
func (s *Store) prunePlan(metas []Meta, forks map[uuid.UUID][]uuid.UUID, p PrunePolicy) PruneResult {
	var match []Meta
	for _, m := range metas {
		m.UpdatedAt = s.lastWrite(m)
		if p.WorkingDir != "" && m.WorkingDir != p.WorkingDir {
			continue
		}
		ok := true
		for k, v := range p.Labels {
			if got, has := m.Labels[k]; !has || got != v {
				ok = false
				break
			}
		}
		if ok {
			match = append(match, m)
		}
	}
	slices.SortFunc(match, func(a, b Meta) int { // newest first
		if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
			return c
		}
		return bytes.Compare(b.ID[:], a.ID[:])
	})
	chosen := map[uuid.UUID]Meta{}
	var skipped []PruneItem // pinned or recent
	now := s.opts.now()
	for i, m := range match {
		if i < p.KeepNewest {
			continue
		}
		if !p.Before.IsZero() && !m.UpdatedAt.Before(p.Before) {
			continue
		}
		switch {
		case m.Pinned():
			skipped = append(skipped, PruneItem{Meta: m, Err: fmt.Errorf("%w: session %s has the label %q", ErrPinned, m.ID, PinLabel)})
			continue
		case p.KeepRecent > 0 && s.usedSince(m, now.Add(-p.KeepRecent), p.KeepRecent):
			skipped = append(skipped, PruneItem{Meta: m, Err: fmt.Errorf("%w: session %s was used within %s (last write %s)",
				ErrRecentlyUsed, m.ID, p.KeepRecent, m.UpdatedAt.Format(time.RFC3339))})
			continue
		}
		chosen[m.ID] = m
	}
	// A session stays if a session that stays forks it; that may keep
	// its own parent, so until nothing changes.
	res := PruneResult{Skipped: skipped}
	for changed := true; changed; {
		changed = false
		for _, id := range slices.SortedFunc(maps.Keys(chosen), func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) }) {
			for _, f := range forks[id] {
				if _, gone := chosen[f]; !gone {
					res.Skipped = append(res.Skipped, PruneItem{Meta: chosen[id], Err: forksError(id, forks[id])})
					delete(chosen, id)
					changed = true
					break
				}
			}
		}
	}
	// Forks first: repeatedly take the chosen sessions no chosen session
	// forks, in id order.
	for len(chosen) > 0 {
		var next []uuid.UUID
		for id := range chosen {
			free := true
			for _, f := range forks[id] {
				if _, pending := chosen[f]; pending {
					free = false
					break
				}
			}
			if free {
				next = append(next, id)
			}
		}
		slices.SortFunc(next, func(a, b uuid.UUID) int { return bytes.Compare(a[:], b[:]) })
		for _, id := range next {
			m := chosen[id]
			delete(chosen, id)
			size, _ := treeSize(s.opts.fs, filepath.Join(s.dir, sessionsDir, id.String()))
			res.Removed = append(res.Removed, PruneItem{Meta: m, Bytes: size})
			res.Bytes += size
		}
		if len(next) == 0 {
			break // a cycle of forks (made by hand): keep them
		}
	}
	for id, m := range chosen {
		res.Skipped = append(res.Skipped, PruneItem{Meta: m, Err: forksError(id, forks[id])})
	}
	return res
}
