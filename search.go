package sessionstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/search"
)

// DefaultSearchLimit is the number of hits Search yields at most for a
// zero Query.Limit.
const DefaultSearchLimit = 20

// MaxSearchLimit bounds SearchQuery.Limit: Search keeps that many hits
// while it ranks them.
const MaxSearchLimit = 10000

// ErrInvalidSearch reports a SearchQuery that Search refuses: no word to
// search for (empty, or only punctuation), a text longer than
// search.MaxQueryBytes (4 KiB), more than 16 words and phrases, a phrase
// of more than 32 words, an unbalanced double quote, text that is not
// UTF-8, a negative or too large Limit, or an unknown kind or role. It is
// returned before anything is read.
var ErrInvalidSearch = errors.New("sessionstore: invalid search")

// SearchQuery selects the events Search finds.
type SearchQuery struct {
	// Query selects the sessions searched, as for ListPage (ParentSession,
	// WorkingDir, Labels, Since, Until); its Limit is the most hits Search
	// yields (0: DefaultSearchLimit; at most MaxSearchLimit).
	Query
	// Text is words and "exact phrases" in double quotes; an event
	// matches when its record's text holds every one of them (see
	// docs/search.md: whole words, case-insensitive, a phrase's words
	// consecutive).
	Text string
	// Kinds and Roles select events of these kinds and roles; empty
	// selects all.
	Kinds []Kind
	Roles []Role
}

// Hit is an event Search found.
type Hit struct {
	Session uuid.UUID
	Event   uuid.UUID
	Kind    Kind
	Role    Role
	Time    time.Time
	// Snippet is a short excerpt of the record's text around the first
	// match, whitespace runs as one space, "…" where it is cut.
	Snippet string
	// Rank is higher for a better hit; it depends on the event's record
	// alone (docs/search.md). Hits are yielded best first, then newest
	// first.
	Rank float64
}

// Search yields the events of the sessions q.Query selects whose record
// text matches q.Text (docs/search.md), best first, at most q.Limit
// (DefaultSearchLimit for 0) of them. A session's own events are
// searched, every branch: a fork's prefix is found in its parent. An
// event becomes findable when its append returns.
//
// Search writes nothing but the search index, a derived file of the
// store (docs/search.md), and only in a writable Store; it does not change
// any session. A session that is damaged is searched in its valid prefix.
//
// Errors: ErrInvalidSearch for q refused (yielded first, before any
// reading); ErrClosed, the context's error, or the listing's error
// (List), yielded once, ending the iteration.
func (s *Store) Search(ctx context.Context, q SearchQuery) iter.Seq2[Hit, error] {
	return func(yield func(Hit, error) bool) {
		p, err := parseSearch(q)
		if err != nil {
			yield(Hit{}, err)
			return
		}
		hits, err := s.searchIndexed(ctx, q, p)
		if err != nil {
			yield(Hit{}, err)
			return
		}
		for _, h := range hits {
			if !yield(h, nil) {
				return
			}
		}
	}
}

// searchPlan is a parsed SearchQuery.
type searchPlan struct {
	terms  []search.Term
	tokens []string // the terms' distinct tokens
	limit  int
	kinds  map[Kind]bool
	roles  map[Role]bool
}

func parseSearch(q SearchQuery) (*searchPlan, error) {
	if q.Limit < 0 || q.Limit > MaxSearchLimit {
		return nil, fmt.Errorf("%w: Limit %d is not in [0, %d]", ErrInvalidSearch, q.Limit, MaxSearchLimit)
	}
	terms, err := search.Parse(q.Text)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidSearch, err)
	}
	p := &searchPlan{terms: terms, tokens: search.QueryTokens(terms), limit: cmp.Or(q.Limit, DefaultSearchLimit)}
	for _, k := range q.Kinds {
		if !validKind(k) {
			return nil, fmt.Errorf("%w: unknown kind %q", ErrInvalidSearch, k)
		}
		if p.kinds == nil {
			p.kinds = map[Kind]bool{}
		}
		p.kinds[k] = true
	}
	for _, r := range q.Roles {
		if !validRole(r) {
			return nil, fmt.Errorf("%w: unknown role %q", ErrInvalidSearch, r)
		}
		if p.roles == nil {
			p.roles = map[Role]bool{}
		}
		p.roles[r] = true
	}
	return p, nil
}

func validKind(k Kind) bool {
	switch k {
	case KindMessage, KindToolCall, KindToolResult, KindCompaction, KindBranchSummary, KindCustom:
		return true
	}
	return false
}

func validRole(r Role) bool {
	switch r {
	case RoleNone, RoleUser, RoleAssistant, RoleTool:
		return true
	}
	return false
}

// selects reports whether an event of this kind and role passes the
// plan's filters.
func (p *searchPlan) selects(k Kind, r Role) bool {
	return (p.kinds == nil || p.kinds[k]) && (p.roles == nil || p.roles[r])
}

// hitOf matches ev against the plan: its hit, and whether it matches.
func (p *searchPlan) hitOf(session uuid.UUID, ev *Event, buf []byte) (Hit, []byte, bool) {
	if !p.selects(ev.Kind, ev.Role) {
		return Hit{}, buf, false
	}
	buf = search.RecordText(buf[:0], ev.Record)
	d := search.Analyse(string(buf))
	if !d.Match(p.terms) {
		return Hit{}, buf, false
	}
	return Hit{Session: session, Event: ev.ID, Kind: ev.Kind, Role: ev.Role, Time: ev.Time,
		Snippet: d.Snippet(p.terms), Rank: d.Rank(p.tokens)}, buf, true
}

// hitOrder is the order of hits: best rank first, then newest, then by
// session and event id.
func hitOrder(a, b Hit) int {
	if c := cmp.Compare(b.Rank, a.Rank); c != 0 {
		return c
	}
	if c := b.Time.Compare(a.Time); c != 0 {
		return c
	}
	if c := slices.Compare(a.Session[:], b.Session[:]); c != 0 {
		return c
	}
	return slices.Compare(a.Event[:], b.Event[:])
}

// topHits keeps the best limit hits.
type topHits struct {
	limit int
	hits  []Hit
}

func (t *topHits) add(h Hit) {
	t.hits = append(t.hits, h)
	if len(t.hits) >= 2*t.limit+64 {
		t.trim()
	}
}

func (t *topHits) trim() {
	slices.SortFunc(t.hits, hitOrder)
	if len(t.hits) > t.limit {
		t.hits = t.hits[:t.limit]
	}
}

// searchScan is Search by reading every record of the selected sessions.
func (s *Store) searchScan(ctx context.Context, q SearchQuery, p *searchPlan) ([]Hit, error) {
	lq := q.Query
	lq.Limit = 0
	top := &topHits{limit: p.limit}
	var buf []byte
	for m, err := range s.Sessions(ctx, lq) {
		if err != nil {
			var le *ListError
			if errors.As(err, &le) {
				continue // an unreadable session: nothing of it to search
			}
			return nil, err
		}
		_, err := s.ownEvents(ctx, m.ID, 0, func(_ int, evs []Event) error {
			for i := range evs {
				var h Hit
				var ok bool
				if h, buf, ok = p.hitOf(m.ID, &evs[i], buf); ok {
					top.add(h)
				}
			}
			return nil
		})
		if err != nil && (ctx.Err() != nil || errors.Is(err, ErrClosed)) {
			return nil, err
		} // else the session went, is damaged past what was read, or its key is not this Store's: skipped
	}
	top.trim()
	return top.hits, nil
}

// ownEventsBatch is how many events ownEvents reads at a time at most
// (and at most about seqBatchBytes of records: batchEnd).
const ownEventsBatch = 512

// ownEvents calls fn with the session's own events from log position from
// on (a fork's prefix left out), a batch at a time, records read and
// opened (blobs too), each batch with the log position of its first
// event; a batch holds at most about seqBatchBytes of records, so that
// indexing a store keeps one batch's records in memory, not 512 blobs.
// It returns the position after the last event read. No lock is held
// while fn runs. A damaged session's valid prefix is read, then its
// *CorruptionError returned.
func (s *Store) ownEvents(ctx context.Context, session uuid.UUID, from int, fn func(pos int, evs []Event) error) (int, error) {
	var damaged error
	for {
		var run []entry
		var hh *openSession
		err := s.withHandle(ctx, session, func(h *openSession) error {
			hh = h
			if from < len(h.Entries) {
				// at most ownEventsBatch events and about seqBatchBytes
				// of records (blobs too): what a batch holds is bounded
				run = slices.Clone(h.Entries[from:min(from+ownEventsBatch, batchEnd(h.Entries, from))])
			}
			return nil
		})
		if hh == nil {
			return from, err
		}
		if err != nil {
			if !isDamage(err) {
				return from, err
			}
			damaged = err
		}
		if len(run) == 0 {
			return from, damaged
		}
		evs, err := s.seqBatch(ctx, session, &resolvedPath{h: hh}, -1, run)
		if err != nil {
			return from, err
		}
		if err := fn(from, evs); err != nil {
			return from, err
		}
		from += len(run)
	}
}
