package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"math"
	"path/filepath"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/catalogue"
)

// DefaultPageSize is the page size of ListPage for a zero Query.Limit.
const DefaultPageSize = 50

// Query selects sessions for Sessions and ListPage. A zero field selects
// every session; the fields that are set must all match.
type Query struct {
	// ParentSession selects the subagents this session spawned
	// (Meta.ParentSession), not their own subagents.
	ParentSession uuid.UUID
	// WorkingDir selects sessions with exactly this Meta.WorkingDir.
	WorkingDir string
	// Labels selects sessions having every one of these labels with
	// these values (others may have more labels).
	Labels map[string]string
	// Since and Until select sessions created in [Since, Until): Since
	// <= Meta.CreatedAt < Until. A zero time bounds nothing.
	Since, Until time.Time
	// Limit bounds the answer: for Sessions, how many sessions it yields
	// in all (0: all that match); for ListPage, the page size (0:
	// DefaultPageSize). Negative is ErrInvalidQuery.
	Limit int
}

// Matches reports whether m is one of the sessions q selects.
func (q Query) Matches(m Meta) bool {
	switch {
	case q.ParentSession != uuid.Nil && m.ParentSession != q.ParentSession,
		q.WorkingDir != "" && m.WorkingDir != q.WorkingDir,
		!q.Since.IsZero() && m.CreatedAt.Before(q.Since),
		!q.Until.IsZero() && !m.CreatedAt.Before(q.Until):
		return false
	}
	for k, v := range q.Labels {
		if got, ok := m.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// ListPage returns one page of the sessions q selects, newest first (in
// descending order of id: UUIDv7 ids sort by creation time), at most
// q.Limit of them (DefaultPageSize for 0), and the cursor of the next
// page: "" for the first page, and "" back when there is none. It reads
// the catalogue (internal/catalogue) from its newest end, or from the cursor's
// place in it, found by a binary search of the snapshot, and reads the
// session.json files the catalogue cannot vouch for; so a page costs
// about its own sessions, not the store's. It falls back to List (every
// session) when the catalogue is unusable or the sessions directory
// changed behind it. With Options.Remote, whose metadata is in the object
// store, it lists the keys of the metadata copies just below the cursor
// (a few listing requests however many sessions the store holds, with an
// ObjectListerAfter such as the remote binding on S3 or GCS; else the
// keys of all, a request per thousand sessions) and reads the copies of
// the page's sessions only, newest first (and those q rejects on the
// way).
//
// A cursor is the position after the last session of its page: the next
// page holds the selected sessions with smaller ids, as they are when it
// is read. So no session appears on two pages of one walk; a session
// that exists and matches q throughout the walk appears on exactly one;
// sessions created meanwhile with new (UUIDv7) ids sort before the cursor
// and do not appear; one removed, created with an older id, or whose
// metadata changes to match or not meanwhile may or may not. A cursor
// stays valid across Close and Open and in another Store of the root.
//
// The filters are applied to the catalogue's copy of a session's metadata
// when the catalogue has a current entry for it (no write in progress):
// as for List, a session.json changed in place by hand, outside any
// Store, is not seen until the sessions directory changes.
// Sessions deferred by Options.DeferCreate are not stored yet and are not
// listed. ListPage writes nothing but what List may (a writable store
// rebuilds an unusable catalogue).
//
// Errors: ErrInvalidQuery for a negative q.Limit or a cursor ListPage did
// not return; *ListError beside the page, for the unreadable sessions met
// on the page's way (they count as positions for the cursor, not toward
// the page size); otherwise as List (then no page).
func (s *Store) ListPage(ctx context.Context, q Query, cursor string) (page []Meta, next string, err error) {
	if q.Limit < 0 {
		return nil, "", fmt.Errorf("%w: Limit %d is negative", ErrInvalidQuery, q.Limit)
	}
	before, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	n := q.Limit
	if n == 0 {
		n = DefaultPageSize
	}
	n = min(n, math.MaxInt-1) // listPage reads n+1 sessions: one tells a next page
	items, more, _, err := s.listPage(ctx, q, before, n)
	if err != nil {
		return nil, "", err
	}
	var bad []UnreadableSession
	for _, it := range items {
		if it.bad != nil {
			bad = append(bad, *it.bad)
			continue
		}
		page = append(page, it.meta)
	}
	if more {
		next = items[len(items)-1].id().String()
	}
	if len(bad) > 0 {
		slices.SortFunc(bad, func(a, b UnreadableSession) int { return bytes.Compare(a.ID[:], b.ID[:]) })
		return page, next, &ListError{Unreadable: bad}
	}
	return page, next, nil
}

// Sessions yields the sessions q selects, newest first, as ListPage
// returns them: it reads a page of them at a time (so each costs about
// its sessions, not the store's) and holds nothing between pages, so
// stopping the loop stops the reading, and other calls, Close included,
// run between pages. The walk has a cursor's guarantees (ListPage). An
// unreadable session is yielded in its place as its id and a *ListError
// naming it, and the walk goes on; an error that stops the listing (as
// List's) is yielded once, with a zero Meta, and ends it.
//
// Errors: as ListPage.
func (s *Store) Sessions(ctx context.Context, q Query) iter.Seq2[Meta, error] {
	return func(yield func(Meta, error) bool) {
		if q.Limit < 0 {
			yield(Meta{}, fmt.Errorf("%w: Limit %d is negative", ErrInvalidQuery, q.Limit))
			return
		}
		var before *uuid.UUID
		left := q.Limit
		for {
			n := sessionsBatch
			if q.Limit > 0 {
				n = min(n, left)
			}
			items, more, _, err := s.listPage(ctx, q, before, n)
			if err != nil {
				yield(Meta{}, err)
				return
			}
			for _, it := range items {
				if it.bad != nil {
					if !yield(Meta{ID: it.bad.ID}, &ListError{Unreadable: []UnreadableSession{*it.bad}}) {
						return
					}
					continue
				}
				if !yield(it.meta, nil) {
					return
				}
				left--
			}
			if !more || q.Limit > 0 && left <= 0 {
				return
			}
			id := items[len(items)-1].id()
			before = &id
		}
	}
}

// sessionsBatch is how many sessions Sessions reads at a time.
const sessionsBatch = 64

// parseCursor decodes a ListPage cursor: nil for "", the first page.
func parseCursor(cursor string) (*uuid.UUID, error) {
	if cursor == "" {
		return nil, nil
	}
	id, err := uuid.Parse(cursor)
	var canon [36]byte
	if err != nil || string(canonical.AppendUUID(canon[:0], id)) != cursor {
		return nil, fmt.Errorf("%w: cursor %q", ErrInvalidQuery, cursor)
	}
	return &id, nil
}

// listItem is one session of a page: its metadata, or why it could not be
// read.
type listItem struct {
	meta Meta
	bad  *UnreadableSession
}

func (it listItem) id() uuid.UUID {
	if it.bad != nil {
		return it.bad.ID
	}
	return it.meta.ID
}

// listCost is what a page cost: snapshot lines decoded, and
// session.json files read (for the benchmarks).
type listCost struct {
	entries, reads int
	lists          int // listing requests to the object store
}

// listPage returns up to n selected sessions with ids below before (all,
// for nil), newest first, with the unreadable ones met among them, and
// whether more may follow.
func (s *Store) listPage(ctx context.Context, q Query, before *uuid.UUID, n int) ([]listItem, bool, listCost, error) {
	if err := s.begin(ctx); err != nil {
		return nil, false, listCost{}, err
	}
	var items []listItem
	var cost listCost
	ok := false
	if s.opts.Remote == nil { // a remote session's metadata is in the object store
		items, cost, ok = s.cat.page(ctx, q, before, n+1)
	}
	s.end()
	if !ok {
		var err error
		if s.opts.Remote != nil {
			items, cost, err = s.listPageRemote(ctx, q, before, n+1)
		} else {
			items, cost, err = s.listPageAll(ctx, q, before, n+1)
		}
		if err != nil {
			return nil, false, cost, err
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, false, cost, err
	}
	matched, cut := 0, len(items)
	for i, it := range items {
		if it.bad == nil {
			if matched++; matched > n {
				cut = i
				break
			}
		}
	}
	for i := range items[:cut] {
		if items[i].bad == nil {
			if t, ok := s.reg.updatedAt(items[i].meta.ID); ok && t.After(items[i].meta.UpdatedAt) {
				items[i].meta.UpdatedAt = t
			}
		}
	}
	return items[:cut], cut < len(items), cost, nil
}

// listPageAll is listPage from List: every session's metadata.
func (s *Store) listPageAll(ctx context.Context, q Query, before *uuid.UUID, n int) ([]listItem, listCost, error) {
	all, err := s.List(ctx)
	var le *ListError
	if err != nil && !errors.As(err, &le) {
		return nil, listCost{}, err
	}
	cost := listCost{reads: len(all)}
	var items []listItem
	for _, m := range all {
		if (before == nil || bytesLess(m.ID[:], before[:])) && q.Matches(m) {
			items = append(items, listItem{meta: m})
		}
	}
	if le != nil {
		for i := range le.Unreadable {
			if u := le.Unreadable[i]; before == nil || bytesLess(u.ID[:], before[:]) {
				items = append(items, listItem{bad: &u})
			}
		}
	}
	slices.SortFunc(items, func(a, b listItem) int { ai, bi := a.id(), b.id(); return bytes.Compare(bi[:], ai[:]) })
	matched := 0
	for i, it := range items {
		if it.bad == nil {
			if matched++; matched == n {
				return items[:i+1], cost, nil
			}
		}
	}
	return items, cost, nil
}

// page is recent with a query and a cursor: up to n selected sessions
// (and the unreadable ones met) with ids below before (all, for nil),
// newest first (catalogue.Backwards: the log, and the snapshot's lines
// read backwards from before's place). ok is false when the catalogue
// cannot answer (as recent).
func (c *storeCatalogue) page(ctx context.Context, q Query, before *uuid.UUID, n int) (items []listItem, cost listCost, ok bool) {
	var buf []byte
	matched := 0
	add := func(id uuid.UUID, e catalogue.Entry, usable bool) {
		var m Meta
		if usable {
			if m = metaOf(e.Meta); !q.Matches(m) {
				return // as the catalogue has it; see ListPage
			}
		}
		if usable { // the sessions directory is as recorded (Backwards)
			items = append(items, listItem{meta: m})
			matched++
			return
		}
		sdir := filepath.Join(c.sessions, id.String())
		cost.reads++
		m, _, b, err := readMetaInto(c.fsys, sdir, id, buf)
		buf = b
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			items = append(items, listItem{bad: &UnreadableSession{ID: id, Path: filepath.Join(sdir, metaFile), Err: err}})
		case q.Matches(m):
			items = append(items, listItem{meta: m})
			matched++
		}
	}
	canceled := false
	more := func() bool {
		canceled = ctx.Err() != nil
		return matched < n && !canceled
	}
	decoded, ok := c.Backwards(before, more, add)
	switch {
	case !ok:
		return nil, cost, false
	case canceled:
		return nil, cost, true // listPage reports it
	}
	cost.entries = decoded
	return items, cost, true
}
