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
)

// PrunePolicy selects the sessions Prune removes. The filters (Labels,
// WorkingDir) choose the sessions the policy applies to; of those, the
// KeepNewest newest are kept, and of the rest, those last updated before
// Before are removed (all of the rest when Before is zero). A policy must
// set Before or KeepNewest: one with neither is refused, rather than
// removing every session it matches.
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
	// DryRun reports what Prune would remove and removes nothing.
	DryRun bool
}

// PruneItem is a session Prune removed (or would remove), or skipped.
type PruneItem struct {
	Meta  Meta
	Bytes int64 // the bytes of its files, when Prune chose it
	// Err, for a skipped session, says why: ErrHasForks for a session
	// that a session Prune keeps forks, or Delete's error (ErrLocked for
	// a session another writer holds).
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
// that a session Prune keeps forks (Meta.ForkedFrom) is skipped with
// ErrHasForks, not an error of the whole Prune; a fork that Prune also
// removes is removed first, and when that fork is skipped (ErrLocked,
// say), so is the session it forks, with ErrHasForks. Prune also empties the trash of what earlier
// deletes left (that space is not counted in Bytes).
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
		if err := s.deleteSession(ctx, it.Meta.ID); err != nil {
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

// prunePlan chooses what Prune removes from metas (List's answer): the
// sessions the policy selects, less those a kept session forks, ordered
// so that a fork comes before the session it forks.
func (s *Store) prunePlan(metas []Meta, forks map[uuid.UUID][]uuid.UUID, p PrunePolicy) PruneResult {
	var match []Meta
	for _, m := range metas {
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
	for i, m := range match {
		if i < p.KeepNewest {
			continue
		}
		if !p.Before.IsZero() && !m.UpdatedAt.Before(p.Before) {
			continue
		}
		chosen[m.ID] = m
	}
	// A session stays if a session that stays forks it; that may keep
	// its own parent, so until nothing changes.
	var res PruneResult
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
