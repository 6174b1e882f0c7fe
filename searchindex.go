package sessionstore

import (
	"cmp"
	"context"
	"errors"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/catalogue"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/search"
)

// searchDir is the search index's directory at the store root
// (internal/search: segment files, search.lock). It is derived: removing
// it loses nothing.
const searchDir = "search"

// dirtySessions are the sessions appended to since the search index last
// caught up with them: publish (commit.go) notes each session whose
// events became durable, one map insert a commit group, and Search takes
// the set. It is the only thing an append does for the index.
type dirtySessions struct {
	mu sync.Mutex
	m  map[uuid.UUID]struct{}
}

func (d *dirtySessions) note(id uuid.UUID) {
	if d == nil {
		return
	}
	d.mu.Lock()
	if d.m == nil {
		d.m = map[uuid.UUID]struct{}{}
	}
	d.m[id] = struct{}{}
	d.mu.Unlock()
}

func (d *dirtySessions) take() map[uuid.UUID]struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.m
	d.m = nil
	return m
}

// searchIndex is the Store's search index: loaded from its files on the
// first Search, caught up with the sessions a Search selects, saved by
// that Search. mu serializes Searches' use of it.
type searchIndex struct {
	mu      sync.Mutex
	x       *search.Index
	checked map[uuid.UUID]bool // sessions compared with their log since the Store opened

	// The last listing, and the catalogue's version it was read at (and
	// still was after): while the catalogue is at that version no
	// session changed, and a Search answers from it without List.
	listedAt   catalogue.Version
	listing    []Meta
	unreadable []uuid.UUID
}

// list is List for Search: the sessions and those unreadable, reused
// while the catalogue's version is the one they were read at.
func (s *Store) listForSearch(ctx context.Context, si *searchIndex) ([]Meta, []uuid.UUID, error) {
	v, ok := s.cat.Version()
	ok = ok && s.opts.Remote == nil
	if ok && si.listing != nil && v == si.listedAt {
		return si.listing, si.unreadable, nil
	}
	si.listing, si.unreadable = nil, nil
	metas, err := s.List(ctx)
	var bad []uuid.UUID
	var le *ListError
	if errors.As(err, &le) {
		for _, u := range le.Unreadable {
			bad = append(bad, u.ID)
		}
	} else if err != nil {
		return nil, nil, err
	}
	if v2, ok2 := s.cat.Version(); ok && ok2 && v2 == v {
		si.listedAt, si.listing, si.unreadable = v, metas, bad
		if si.listing == nil {
			si.listing = []Meta{}
		}
	}
	return metas, bad, nil
}

// searchFiles is where the index is kept: with a Remote or read-only, in
// memory only.
func (s *Store) searchFiles() search.Files {
	return search.Files{FS: s.opts.fs, Dir: filepath.Join(s.dir, searchDir), Perm: s.opts.FileMode, DirPerm: s.opts.DirMode,
		ReadOnly: s.opts.ReadOnly || s.opts.Remote != nil}
}

// searchIndexed is Search through the index: the selected sessions caught
// up (catchUp), the candidates holding every token ranked from their
// postings, then read in rank order and checked against the query's terms
// (phrases) until limit hits.
func (s *Store) searchIndexed(ctx context.Context, q SearchQuery, p *searchPlan) ([]Hit, error) {
	si := s.search
	si.mu.Lock()
	defer si.mu.Unlock()
	if si.x == nil {
		x, damaged, err := search.Load(s.searchFiles())
		if err != nil {
			return nil, err
		}
		if damaged {
			s.opts.Logger.Warn("sessionstore: search index damaged; rebuilding it", "dir", filepath.Join(s.dir, searchDir))
		}
		x.Compact()
		si.x, si.checked = x, map[uuid.UUID]bool{}
	}
	x := si.x
	docs0 := len(x.Docs)
	dirty := s.opts.searchDirty.take()
	lq := q.Query
	lq.Limit = 0
	selected := map[uint32]uuid.UUID{} // live slot -> session
	listedAll := lq.ParentSession == uuid.Nil && lq.WorkingDir == "" && len(lq.Labels) == 0 && lq.Since.IsZero() && lq.Until.IsZero()
	listed := map[uuid.UUID]bool{}
	metas, unreadable, err := s.listForSearch(ctx, si) // one read of the catalogue at most: cheaper than pages of Sessions
	if err != nil {
		s.redirty(dirty)
		return nil, err
	}
	for _, id := range unreadable {
		listed[id] = true // unreadable now, not gone
	}
	for _, m := range metas {
		if !lq.Matches(m) {
			continue
		}
		listed[m.ID] = true
		_, isDirty := dirty[m.ID]
		delete(dirty, m.ID)
		slot, ok := x.Slot(m.ID)
		if !ok || isDirty || !si.checked[m.ID] || x.Sessions[slot].UpdatedAt != m.UpdatedAt.UnixNano() {
			var err error
			if slot, err = s.catchUp(ctx, x, m); err != nil {
				if ctx.Err() != nil || errors.Is(err, ErrClosed) {
					s.opts.searchDirty.note(m.ID)
					s.redirty(dirty)
					return nil, err
				}
				s.opts.searchDirty.note(m.ID) // not caught up: try again next time
			} else {
				si.checked[m.ID] = true
			}
		}
		selected[slot] = m.ID
	}
	s.redirty(dirty) // sessions not selected stay to catch up
	if len(x.Docs)-docs0 > docs0/2 {
		x.Compact() // built (or grown by half) by this catch-up: its spare room dropped
	}
	if listedAll { // sessions deleted since they were indexed: forgotten
		var gone [][16]byte
		x.Live(func(id [16]byte) {
			if !listed[id] {
				gone = append(gone, id)
			}
		})
		for _, id := range gone {
			x.Forget(id)
		}
	}
	if err := x.Save(s.searchFiles()); err != nil {
		s.opts.Logger.Warn("sessionstore: search index not saved", "err", err)
	}

	// The candidates, ranked from their postings, in a heap: a query
	// takes them best first until limit hits, so it orders only what it
	// takes, not every candidate of a common word.
	cands := &candHeap{x: x, selected: selected}
	for _, c := range x.Candidates(p.tokens) {
		d := &x.Docs[c.Doc]
		if _, ok := selected[d.Session]; !ok {
			continue
		}
		if !p.selects(Kind(eventline.KindCode(d.Kind).String()), Role(eventline.RoleCode(d.Role).String())) {
			continue
		}
		tf := func(tok string) int {
			i := slices.Index(p.tokens, tok)
			return int(c.TF[i])
		}
		cands.c = append(cands.c, cand{rank: search.Rank(tf, int(d.Len), p.tokens), time: d.Time, doc: c.Doc})
	}
	cands.init()
	var hits []Hit
	var buf []byte
	for cands.len() > 0 && len(hits) < p.limit {
		// the next window of candidates, read a session at a time, the
		// sessions at once
		n := min(cands.len(), max(p.limit-len(hits), 16))
		win := make([]Hit, n)
		for i := range win {
			c := cands.pop()
			d := &x.Docs[c.doc]
			win[i] = Hit{Session: selected[d.Session], Event: d.Event, Kind: Kind(eventline.KindCode(d.Kind).String()),
				Role: Role(eventline.RoleCode(d.Role).String()), Time: time.Unix(0, d.Time).UTC(), Rank: c.rank}
		}
		read := map[uuid.UUID]map[uuid.UUID]*Event{}
		var sessions []uuid.UUID
		for _, c := range win {
			if read[c.Session] == nil {
				read[c.Session] = map[uuid.UUID]*Event{}
				sessions = append(sessions, c.Session)
			}
			read[c.Session][c.Event] = nil
		}
		errs := make([]error, len(sessions))
		forEach(len(sessions), min(len(sessions), runtime.GOMAXPROCS(0)), func(_, i int) {
			want := read[sessions[i]]
			if err := s.readEvents(ctx, sessions[i], want, s.reg.acquireKnown); err == nil && allRead(want) {
				return
			}
			for id := range want {
				want[id] = nil
			}
			errs[i] = s.readEvents(ctx, sessions[i], want, s.reg.acquire)
		})
		for _, err := range errs {
			if err != nil && (ctx.Err() != nil || errors.Is(err, ErrClosed)) {
				return nil, err
			}
		}
		for _, c := range win {
			ev := read[c.Session][c.Event]
			if ev == nil || len(hits) >= p.limit {
				continue // gone since it was indexed (deleted, cut by a repair)
			}
			// The index holds the words: the record is read for its
			// phrases and snippet, its rank the one its postings gave.
			buf = search.RecordText(buf[:0], ev.Record)
			text := string(buf)
			if at, ok := search.FindFirst(text, p.terms); ok {
				c.Snippet = search.SnippetAt(text, at)
				hits = append(hits, c)
			}
		}
	}
	return hits, nil
}

// cand is a candidate document and its rank, 24 bytes: what a query
// orders.
type cand struct {
	rank float64
	time int64 // Unix nanoseconds
	doc  uint32
}

// candHeap holds candidates in a binary heap whose top is the first in
// hitOrder: best rank, then newest, then by session and event id.
type candHeap struct {
	c        []cand
	x        *search.Index
	selected map[uint32]uuid.UUID
}

// before is hitOrder on candidates.
func (h *candHeap) before(a, b cand) bool {
	if a.rank != b.rank {
		return a.rank > b.rank
	}
	if a.time != b.time {
		return a.time > b.time
	}
	da, db := &h.x.Docs[a.doc], &h.x.Docs[b.doc]
	sa, sb := h.selected[da.Session], h.selected[db.Session]
	if c := slices.Compare(sa[:], sb[:]); c != 0 {
		return c < 0
	}
	return slices.Compare(da.Event[:], db.Event[:]) < 0
}

func (h *candHeap) len() int { return len(h.c) }

func (h *candHeap) init() {
	for i := len(h.c)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

func (h *candHeap) pop() cand {
	top := h.c[0]
	last := len(h.c) - 1
	h.c[0] = h.c[last]
	h.c = h.c[:last]
	h.down(0)
	return top
}

func (h *candHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h.c) {
			return
		}
		m := l
		if r := l + 1; r < len(h.c) && h.before(h.c[r], h.c[l]) {
			m = r
		}
		if !h.before(h.c[m], h.c[i]) {
			return
		}
		h.c[i], h.c[m] = h.c[m], h.c[i]
		i = m
	}
}

// readEvents reads the events of session named by want's keys that the
// session holds, records included (blobs read, sealed records opened),
// ordered by their place in the chunks, and sets them in want.
func (s *Store) readEvents(ctx context.Context, session uuid.UUID, want map[uuid.UUID]*Event, get func(context.Context, uuid.UUID, *Meta) (*openSession, error)) error {
	var run []entry
	var hh *openSession
	err := s.useHandle(ctx, session, get, func(h *openSession) error {
		hh = h
		for id := range want {
			if i, ok := h.ByID[id]; ok {
				run = append(run, h.Entries[i])
			}
		}
		return nil
	})
	if hh == nil {
		return err
	}
	slices.SortFunc(run, func(a, b entry) int {
		if a.Loc.Chunk != b.Loc.Chunk {
			return cmp.Compare(a.Loc.Chunk, b.Loc.Chunk)
		}
		return cmp.Compare(a.Loc.Offset, b.Loc.Offset)
	})
	if len(run) == 0 {
		return nil
	}
	evs, err := s.seqBatch(ctx, session, &resolvedPath{h: hh}, -1, run)
	if err != nil {
		return err
	}
	for i := range evs {
		if _, ok := want[evs[i].ID]; ok {
			want[evs[i].ID] = &evs[i]
		}
	}
	return nil
}

// allRead reports whether every event of want was read.
func allRead(want map[uuid.UUID]*Event) bool {
	for _, ev := range want {
		if ev == nil {
			return false
		}
	}
	return true
}

func (s *Store) redirty(d map[uuid.UUID]struct{}) {
	for id := range d {
		s.opts.searchDirty.note(id)
	}
}

// catchUp indexes session m's own events the index lacks and returns its
// slot. If the event the index has last is not at its place in the log
// (a repair cut the log), the session is indexed again from its start.
func (s *Store) catchUp(ctx context.Context, x *search.Index, m Meta) (uint32, error) {
	slot, ok := x.Slot(m.ID)
	if ok { // HEAD is the newest event in log order: the lazy open reads it, not the index
		var head uuid.UUID
		var fork *ForkPoint
		err := s.useHandle(ctx, m.ID, s.reg.acquireLazy, func(h *openSession) error {
			head, fork = h.head(), h.meta.ForkedFrom
			return nil
		})
		se := x.Sessions[slot]
		own := head != uuid.Nil && (fork == nil || head != fork.Event)
		if err == nil && (se.Next > 0 && head == uuid.UUID(se.Last) || se.Next == 0 && !own) {
			x.Sessions[slot].UpdatedAt = m.UpdatedAt.UnixNano()
			return slot, nil
		}
	}
	var from int
	if ok {
		se := x.Sessions[slot]
		from = int(se.Next)
		if from > 0 {
			var same bool
			err := s.withHandle(ctx, m.ID, func(h *openSession) error {
				same = from <= len(h.Entries) && h.Entries[from-1].ID == uuid.UUID(se.Last)
				return nil
			})
			if err != nil && !isDamage(err) {
				return slot, err
			}
			if !same {
				ok = false
			}
		}
	}
	if !ok {
		slot, from = x.NewSlot(m.ID, m.Encrypted), 0
	}
	var buf []byte
	var doc search.Doc // reused: one record's analysis at a time
	_, err := s.ownEvents(ctx, m.ID, from, func(_ int, evs []Event) error {
		for i := range evs {
			ev := &evs[i]
			buf = search.RecordText(buf[:0], ev.Record)
			k, _ := eventline.KindCodeOf([]byte(ev.Kind))
			r, _ := eventline.RoleCodeOf([]byte(ev.Role))
			doc.Reset(string(buf))
			x.Add(slot, search.DocInfo{Event: ev.ID, Kind: uint8(k), Role: uint8(r), Time: ev.Time.UnixNano()}, &doc)
		}
		return nil
	})
	if err != nil && !isDamage(err) {
		return slot, err
	}
	x.Sessions[slot].UpdatedAt = m.UpdatedAt.UnixNano()
	return slot, nil
}
