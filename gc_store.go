package sessionstore

import (
	"context"
	"errors"

	"github.com/google/uuid"
)

// Store-wide blob collection.
//
// Blobs live in their session's directory (blob.go), and no session
// refers to another's blobs: a fork reads its parent's events, with their
// blobs, from the parent's files, and the parent's GC keeps every blob its
// own index names. So collecting the whole store is collecting each
// session, each under its own handle exactly as GC does (beside appends
// in flight, which count their blobs in writingBlobs first), plus
// emptying the trash of what deletes left behind.

// StoreGCReport says what GCStore removed.
type StoreGCReport struct {
	GCReport               // summed over the sessions collected
	Sessions   int         // sessions collected
	TrashBytes int64       // bytes removed from the trash (what deletes left)
	Skipped    []GCSkipped // sessions not collected, and why
}

// GCSkipped is a session GCStore did not collect.
type GCSkipped struct {
	ID  uuid.UUID
	Err error // GC's error: ErrLocked, a *CorruptionError, ...
}

// GCStore runs GC on every session List returns, one after another, and
// removes what deletes left in the trash. It is safe beside appends in
// flight, in this Store (each session is collected under its handle, as
// GC is) and in others: a session another writer holds is skipped with
// ErrLocked, as is one GC refuses for any other reason (a damaged one, a
// failed one), and the others are still collected. Sessions it opens
// stay open, subject to Options.MaxOpenSessions, as after any call.
//
// Durability: as GC, for each session: its removals are durable (the
// directories synced) before GCStore moves on; a crash loses none of the
// blobs that an event refers to.
//
// With Options.Remote, each session's objects are collected as GC
// collects them (gc_remote.go), under its lease: a session another Store
// holds is skipped with ErrLocked. The trash holds local cache
// directories only: a deleted session's objects went when its Delete
// returned nil (a Delete that returned an error after its delete marker
// leaves objects that only a retried Delete of that id removes; GCStore
// does not look for them).
//
// Errors: ErrReadOnly; ErrClosed; a context error (the report then holds
// what was collected so far); List's error other than a *ListError.
func (s *Store) GCStore(ctx context.Context) (StoreGCReport, error) {
	return s.GCStoreWith(ctx, GCOptions{})
}

// GCStoreWith is GCStore with options; with DryRun it removes nothing,
// the trash included, and reports what it would remove.
//
// Errors: as GCStore.
func (s *Store) GCStoreWith(ctx context.Context, opts GCOptions) (StoreGCReport, error) {
	var rep StoreGCReport
	if s.opts.ReadOnly {
		return rep, ErrReadOnly
	}
	metas, err := s.List(ctx)
	var le *ListError
	if err != nil && !errors.As(err, &le) {
		return rep, err
	}
	for _, m := range metas {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		r, err := s.GCWith(ctx, m.ID, opts)
		switch {
		case errors.Is(err, ErrClosed), ctx.Err() != nil:
			return rep, err
		case errors.Is(err, ErrNotFound):
			continue // deleted meanwhile
		case err != nil:
			rep.Skipped = append(rep.Skipped, GCSkipped{ID: m.ID, Err: err})
			continue
		}
		rep.Sessions++
		rep.Kept += r.Kept
		rep.Removed += r.Removed
		rep.Bytes += r.Bytes
		rep.Objects += r.Objects
		rep.ObjectBytes += r.ObjectBytes
		rep.LogObjects += r.LogObjects
		rep.LogBytes += r.LogBytes
	}
	if opts.DryRun {
		return rep, nil // the trash: what Deletes left, removed only for real
	}
	if err := s.begin(ctx); err != nil {
		return rep, err
	}
	defer s.end()
	rep.TrashBytes = s.purgeTrash()
	return rep, nil
}
