package sessionstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Compaction
//
// A compaction is an event (KindCompaction) holding a structured summary
// of the history before it. Load walks from the end of the active path
// (HEAD, or a pending Branch selection) towards the root and stops
// at the newest compaction on the path; the context it returns is the
// compaction, then the events kept verbatim (from FirstKept to the
// compaction's parent, when FirstKept is set and on the path), then every
// event after the compaction. Every original event stays on disk:
// FullPath walks past the boundaries.

// ErrHeadMoved is returned by Compact when the active path no longer ends
// at the event the summary was made from: another event landed while the
// summarizer ran, or a Branch or a lane switch chose another parent for
// the next event. Nothing is written.
var ErrHeadMoved = errors.New("sessionstore: HEAD moved since the summary was made")

// Summary is what a compaction keeps of the history it replaces. A vague
// paragraph loses what is expensive or dangerous to rediscover, so the
// summary has a field for each kind of fact; Text holds the rest.
type Summary struct {
	Goals        []string `json:"goals,omitempty"`
	Constraints  []string `json:"constraints,omitempty"`
	Decisions    []string `json:"decisions,omitempty"`
	FilesChanged []string `json:"files_changed,omitempty"`
	Unresolved   []string `json:"unresolved,omitempty"`
	Facts        []string `json:"facts,omitempty"` // identifiers, paths, numbers worth keeping exactly
	Text         string   `json:"text,omitempty"`
}

// Compaction asks Compact to record a summary.
type Compaction struct {
	Summary      Summary
	TokensBefore int64     // tokens of the context the summary replaces, as the harness counted them
	FirstKept    uuid.UUID // optional: an ancestor of Head kept verbatim after the summary
	// Head is the last event of the context the summary was made from:
	// the last event Load returned. Compact refuses the summary when the
	// active path no longer ends there.
	Head uuid.UUID
}

// CompactionRecord is the record of a KindCompaction event.
type CompactionRecord struct {
	Summary      Summary   `json:"summary"`
	TokensBefore int64     `json:"tokens_before,omitempty"`
	FirstKept    uuid.UUID `json:"first_kept,omitzero"` // absent when nothing is kept verbatim
	Summarized   uuid.UUID `json:"summarized"`          // the HEAD the summary was made from
}

// Compaction decodes the record of a KindCompaction event.
func (e Event) Compaction() (CompactionRecord, error) {
	var c CompactionRecord
	return c, e.decodeKind(KindCompaction, &c)
}

// Compact appends a compaction event as the next event, a child of the
// end of the active path (the path Load returns: HEAD, or a pending Branch
// selection or lane switch), which must still be c.Head, and returns it;
// it becomes HEAD and the start of the context Load returns. c.FirstKept,
// if set, must be c.Head or one of its ancestors. The usual call
// summarizes what Load returned and sets c.Head to its last event.
//
// Durability: as Append; the check of the path's end and the append happen
// under the session's lock, so no other append can land in between.
//
// Errors: ErrHeadMoved (nothing written); ErrInvalidEvent for an unset
// c.Head (also in a session without events: there is nothing to compact),
// or a FirstKept that is not on the path to c.Head; as Append.
func (s *Store) Compact(ctx context.Context, session uuid.UUID, c Compaction) (Event, error) {
	ev := NewEvent(KindCompaction, RoleNone, CompactionRecord{Summary: c.Summary, TokensBefore: c.TokensBefore, FirstKept: c.FirstKept, Summarized: c.Head})
	return s.appendOne(ctx, session, ev, func(h *openSession) error {
		if c.Head == uuid.Nil {
			return invalidEventf("Compaction.Head is not set: set it to the last event of the context the summary was made from (the last event Load returned), so that Compact refuses a summary an append has overtaken")
		}
		leaf := h.tip()
		if h.pending != uuid.Nil {
			leaf = h.pending
		}
		if leaf != c.Head {
			return fmt.Errorf("%w: the summary was made at %s, the active path ends at %s", ErrHeadMoved, c.Head, leaf)
		}
		if c.FirstKept != uuid.Nil && !h.onPath(c.FirstKept, c.Head) {
			return invalidEventf("FirstKept %s is not on the path to %s", c.FirstKept, c.Head)
		}
		return nil
	})
}

// onPath reports whether id is leaf or one of its ancestors.
func (h *openSession) onPath(id, leaf uuid.UUID) bool {
	for cur := leaf; cur != uuid.Nil; {
		if cur == id {
			return true
		}
		parent, ok := h.parentOf(cur) // own index, or a fork's prefix (fork.go)
		if !ok {
			return false
		}
		cur = parent
	}
	return false
}

// keptTail returns the entries kept verbatim by the compaction c: from its
// FirstKept to its parent, oldest first, or none when FirstKept is unset or
// not on the path. It reads the compaction's record and walks the index.
func (h *openSession) keptTail(r *chunkReader, c *entry, key *sessionKey) ([]entry, error) {
	ev, err := readEntry(r, c)
	if err != nil {
		return nil, err
	}
	if c.Blob {
		if ev.Record, err = h.files.readBlob(c.Digest, c.Size); err != nil {
			return nil, err
		}
	}
	if key != nil {
		if ev.Record, err = key.openRecord(ev.Record); err != nil {
			return nil, corruptf(h.dir, 0, "compaction %s: %w", ev.ID, err)
		}
	}
	rec, err := ev.Compaction()
	if err != nil {
		// A compaction appended by hand with another record keeps nothing.
		return nil, nil
	}
	if rec.FirstKept == uuid.Nil {
		return nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var kept []entry
	for cur := c.ParentID; cur != uuid.Nil; {
		i, ok := h.ByID[cur]
		if !ok {
			return nil, nil
		}
		kept = append(kept, h.Entries[i])
		if cur == rec.FirstKept {
			for l, r := 0, len(kept)-1; l < r; l, r = l+1, r-1 {
				kept[l], kept[r] = kept[r], kept[l]
			}
			return kept, nil
		}
		cur = h.Entries[i].ParentID
	}
	return nil, nil // FirstKept is not on the path
}

// DefaultCompactThreshold is the share of the context window at which
// ShouldCompact says to compact.
const DefaultCompactThreshold = 0.8

// ShouldCompact reports whether a context of usedTokens in a model window
// of contextWindow tokens has reached threshold (a fraction; 0 means
// DefaultCompactThreshold). It is a pure function of its arguments.
func ShouldCompact(usedTokens, contextWindow int64, threshold float64) bool {
	if threshold <= 0 {
		threshold = DefaultCompactThreshold
	}
	if contextWindow <= 0 {
		return false
	}
	return float64(usedTokens) >= threshold*float64(contextWindow)
}

// Summarizer turns events into a summary; a harness implements it by
// calling its model.
type Summarizer interface {
	Summarize(ctx context.Context, events []Event) (Summary, error)
}

// CompactOptions tune CompactWith.
type CompactOptions struct {
	// KeepTokens is the budget of recent events kept verbatim after the
	// summary (0 keeps none).
	KeepTokens int64
	// Tokens estimates an event's tokens; nil uses a quarter of its
	// record's bytes.
	Tokens func(Event) int64
}

func estimateTokens(ev Event) int64 { return int64(len(ev.Record)+3) / 4 }

// CompactWith summarizes the session's current context and records the
// compaction: it loads the context (which starts at the previous
// compaction, if any), keeps the most recent events within
// opts.KeepTokens verbatim (fewer where needed: the kept tail holds the
// call of every tool result it holds, the assistant message that
// announced every tool call event it holds, with the reply's provider
// state, and no compaction, nor the events a previous compaction kept), asks sum to summarize the rest, and calls
// Compact. If the summarizer fails or ctx is cancelled, nothing is written
// and a retry is safe; if HEAD moved meanwhile, Compact returns
// ErrHeadMoved.
func (s *Store) CompactWith(ctx context.Context, session uuid.UUID, sum Summarizer, opts CompactOptions) (Event, error) {
	if s.opts.ReadOnly {
		return Event{}, ErrReadOnly // before asking the summarizer for a summary nobody could store
	}
	tokens := opts.Tokens
	if tokens == nil {
		tokens = estimateTokens
	}
	path, err := s.Load(ctx, session)
	if err != nil {
		return Event{}, err
	}
	head := uuid.Nil
	if len(path) > 0 {
		head = path[len(path)-1].ID
	}
	var total int64
	for _, ev := range path {
		total += tokens(ev)
	}
	cut := keptStart(path, opts.KeepTokens, tokens)
	summary, err := sum.Summarize(ctx, path[:cut])
	if err != nil {
		return Event{}, fmt.Errorf("sessionstore: summarize: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return Event{}, err
	}
	c := Compaction{Summary: summary, TokensBefore: total, Head: head}
	if cut < len(path) {
		c.FirstKept = path[cut].ID
	}
	return s.Compact(ctx, session, c)
}

// keptStart returns the index of the first event kept verbatim: the
// longest suffix of path within budget that holds the call of every tool
// result it holds, the assistant message that announced every tool call
// event it holds (that message holds the reply's text and its provider
// state), and holds neither a compaction nor the events a leading
// compaction kept.
func keptStart(path []Event, budget int64, tokens func(Event) int64) int {
	cut, used := len(path), int64(0)
	for cut > 0 {
		t := tokens(path[cut-1])
		if used+t > budget {
			break
		}
		used += t
		cut--
	}
	// A context that starts at a compaction goes on with the events it
	// kept, which come before it in the tree: a kept tail starting among
	// them would run through the compaction. Start after them, at the
	// compaction's first child.
	if len(path) > 0 && path[0].Kind == KindCompaction {
		first := 1
		for first < len(path) && path[first].ParentID != path[0].ID {
			first++
		}
		cut = max(cut, first)
	}
	// The kept tail is made of original events, never a compaction.
	for i := cut; i < len(path); i++ {
		if path[i].Kind == KindCompaction {
			cut = i + 1
		}
	}
	// A kept tool result needs its call (parallel calls come before their
	// results), and a kept tool call event the assistant message that
	// announced it (see below): move past the newest result or call
	// event that lacks it, until none is left. A result whose record does
	// not decode has no call.
	callIDs := make([]string, len(path)-cut) // of the calls and results from cut on
	for i := cut; i < len(path); i++ {
		switch path[i].Kind {
		case KindToolCall:
			if c, err := path[i].ToolCall(); err == nil {
				callIDs[i-cut] = c.CallID
			}
		case KindToolResult:
			if r, err := path[i].ToolResult(); err == nil {
				callIDs[i-cut] = r.CallID
			}
		}
	}
	// A kept tool call event needs the assistant message that announced
	// its call, when one did: the nearest message before it, an assistant
	// one whose ToolCalls hold the call's id.
	prevMsg := make([]int, len(path)) // index of the nearest message before each event, or -1
	last := -1
	for i, ev := range path {
		prevMsg[i] = last
		if ev.Kind == KindMessage {
			last = i
		}
	}
	announced := map[int]map[string]bool{} // message index -> the call ids it announced
	announcer := func(i int, id string) int {
		j := prevMsg[i]
		if j < 0 || path[j].Role != RoleAssistant || id == "" {
			return -1
		}
		ids, ok := announced[j]
		if !ok {
			ids = map[string]bool{}
			if m, err := path[j].Message(); err == nil {
				for _, c := range m.ToolCalls {
					ids[c.CallID] = true
				}
			}
			announced[j] = ids
		}
		if !ids[id] {
			return -1
		}
		return j
	}
	for start := cut; ; {
		orphan := -1
		calls := map[string]bool{}
		for i := cut; i < len(path); i++ {
			switch id := callIDs[i-start]; path[i].Kind {
			case KindToolCall:
				calls[id] = true
				if j := announcer(i, id); j >= 0 && j < cut {
					orphan = i
				}
			case KindToolResult:
				if id == "" || !calls[id] {
					orphan = i
				}
			}
		}
		if orphan < 0 {
			return cut
		}
		cut = orphan + 1
	}
}

// BranchSummaryRecord is the record of a KindBranchSummary event: what the
// work a branch switch left behind achieved, so that it does not vanish
// from the model's view.
type BranchSummaryRecord struct {
	Summary       Summary   `json:"summary"`
	AbandonedHead uuid.UUID `json:"abandoned_head"` // the HEAD the switch left
}

// BranchSummary decodes the record of a KindBranchSummary event.
func (e Event) BranchSummary() (BranchSummaryRecord, error) {
	var b BranchSummaryRecord
	return b, e.decodeKind(KindBranchSummary, &b)
}

// Abandoned returns the events a switch to from would leave behind, to be
// summarized: from HEAD back to the newest common ancestor of HEAD and from
// (excluded), oldest first, with records. When from is an ancestor of HEAD
// these are the events after from; when from is HEAD, none.
//
// Errors: ErrNotFound when from is not in the session; as Load.
func (s *Store) Abandoned(ctx context.Context, session, from uuid.UUID) ([]Event, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	h, err := s.reg.acquire(ctx, session, nil)
	if err != nil {
		return nil, err
	}
	if _, err := h.lookup(from); err != nil {
		s.reg.release(h)
		return nil, err
	}
	ancestors := map[uuid.UUID]bool{}
	for cur := from; cur != uuid.Nil; cur = h.Entries[h.ByID[cur]].ParentID {
		ancestors[cur] = true
	}
	var path []entry
	for cur := h.head(); cur != uuid.Nil && !ancestors[cur]; {
		e := h.Entries[h.ByID[cur]]
		path = append(path, e)
		cur = e.ParentID
	}
	s.reg.release(h)
	for l, r := 0, len(path)-1; l < r; l, r = l+1, r-1 {
		path[l], path[r] = path[r], path[l]
	}
	r := h.files.chunkReader()
	defer r.close()
	out, err := s.readEntries(ctx, h.dir, r, path)
	if len(out) > 0 {
		if oerr := s.unsealEvents(ctx, session, out); oerr != nil {
			return nil, oerr
		}
	}
	return out, err
}

// AppendBranchSummary switches to from and appends a branch summary as the
// first event of the new branch: a child of from with BranchFrom set, which
// becomes HEAD, so Load includes it like any event. rec.AbandonedHead
// defaults to the HEAD being left.
//
// Durability and errors: as Branch followed by Append.
func (s *Store) AppendBranchSummary(ctx context.Context, session, from uuid.UUID, rec BranchSummaryRecord) (Event, error) {
	if err := s.begin(ctx); err != nil {
		return Event{}, err
	}
	defer s.end()
	h, err := s.reg.acquire(ctx, session, nil)
	if err != nil {
		return Event{}, err
	}
	if _, err := h.lookup(from); err != nil {
		s.reg.release(h)
		return Event{}, err
	}
	if rec.AbandonedHead == uuid.Nil {
		rec.AbandonedHead = h.tip()
	}
	ev := NewEvent(KindBranchSummary, RoleNone, rec)
	data, err := prepareRecord(ev, s.opts.MaxRecordSize)
	if err != nil {
		s.reg.release(h)
		return Event{}, err
	}
	key, err := s.heldKey(ctx, h)
	if err != nil {
		s.reg.release(h)
		return Event{}, err
	}
	batch := []pendingEvent{s.pendingOf(ev, data, key)}
	g, out, err := h.queue(ctx, batch, from, nil)
	if err != nil {
		s.reg.release(h)
		return Event{}, err
	}
	err = h.commit(g)
	s.reg.releaseUnlocked(h)
	if err != nil {
		return Event{}, err
	}
	return out[0], nil
}
