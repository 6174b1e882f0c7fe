package sessionstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/eventline"
)

// Usage totals
//
// Messages carry the tokens a provider reported for them (Message.Usage).
// The store adds them up per session, per branch and per subagent tree
// (Store.Usage); docs/usage.md gives the design. In short:
//
//   - A session's totals cover its own events, every branch, each event
//     once, in log order. They are recorded in session.json
//     (Meta.Usage: RecordedUsage) together with their watermark, the
//     number of events they cover and the id of the last one, so that
//     List (and the catalogue, and the inspector's ls) has them without
//     reading a chunk.
//   - An open writer keeps the totals in memory while they are known
//     exactly (openSession.usage): from session.json's record when its
//     watermark is the session's last event at the open, then adding each
//     event as it is published (durable). The usage of a record is read
//     where the append prepares it (pendingOf), before the session's mutex,
//     so the commit only adds numbers. Flush and Close write them to
//     session.json when they moved.
//   - After a crash (or in a store older than the totals) the watermark
//     lags the log: Store.Usage folds in the events after it, reading only
//     the message records among them through the index, and a writer
//     records the result at its next Flush or Close. A watermark the log
//     does not hold (events lost to damage) is ignored and every event
//     is read again. Totals are derived data: a crash can leave them
//     behind the log, never ahead of it nor counting an event twice.

// UsageKind says what Store.Usage adds up.
type UsageKind uint8

// The scopes of Store.Usage.
const (
	// UsageSession: every event of the session itself, on every branch,
	// each once (a fork's inherited prefix is its parent's, not counted).
	UsageSession UsageKind = iota + 1
	// UsageBranch: the events from the root to UsageScope.Leaf (uuid.Nil:
	// the end of the active path, as Load), past compactions (the turns a
	// compaction summarized were paid for), a fork's prefix included.
	UsageBranch
	// UsageTree: the session's own totals and those of every subagent
	// session below it (Meta.ParentSession, at any depth), each once.
	UsageTree
)

// UsageScope selects what Store.Usage adds up: a Kind, and for
// UsageBranch the leaf of the branch (uuid.Nil for the active path).
type UsageScope struct {
	Kind UsageKind
	Leaf uuid.UUID
}

// Price is what a model's tokens cost, per million tokens, in whatever
// currency the caller uses (Options.Prices).
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cache_read"`
	CacheWrite float64 `json:"cache_write"`
}

// ModelUsage is the token totals of one model: the messages that
// reported usage and the sums of what they reported.
type ModelUsage struct {
	Model    string `json:"model"`
	Messages int64  `json:"messages"`
	Usage
}

// RecordedUsage is a session's totals as session.json records them
// (Meta.Usage): the totals of the first Events events of the session's
// log, the last of them Through (uuid.Nil when Events is 0), by model,
// sorted by model name. The store writes it (Flush, Close); Create, Fork
// and UpdateMeta ignore what a caller puts there. It may lag the log
// after a crash (see Store.Usage, which is always exact); it never
// counts an event the log does not hold.
type RecordedUsage struct {
	Events  int64        `json:"events"`
	Through uuid.UUID    `json:"through,omitzero"`
	Models  []ModelUsage `json:"models,omitempty"`
}

// UsageTotals is what Store.Usage returns.
type UsageTotals struct {
	// Usage is the sum over every model.
	Usage
	// Messages counts the message events that reported usage.
	Messages int64
	// ByModel is the totals by model, sorted by model name. A message
	// without Model counts under its session's Meta.Model.
	ByModel []ModelUsage
	// Cost is the sum over the models Options.Prices names of each
	// model's tokens times its price per million tokens; 0 without
	// prices.
	Cost float64
	// Unpriced names the models, sorted, that reported tokens and have no
	// price in Options.Prices: their tokens are in the totals, not in
	// Cost. With no Options.Prices at all, every model is unpriced.
	Unpriced []string
}

// ErrInvalidScope is returned by Store.Usage for a UsageScope it does not
// know.
var ErrInvalidScope = errors.New("sessionstore: invalid usage scope")

// Totals is u as UsageTotals, a message without a model counted under
// model (the session's Meta.Model), priced with prices (nil: no cost).
func (u *RecordedUsage) Totals(model string, prices map[string]Price) UsageTotals {
	var t usageTally
	if u != nil {
		for _, m := range u.Models {
			t.addModel(m)
		}
	}
	return t.totals(model, prices)
}

// eventUsage is the usage one event reports: a message's model and Usage.
type eventUsage struct {
	model string
	u     Usage
}

// usageOf is the usage a record of kind reports: only a message whose
// record has a member named "usage" (exactly so, as json.Marshal of a
// Message writes it) has some; nil else. It reads the "model" and
// "usage" members as decoding the record as a Message does (a repeated
// member decoded into what the ones before it set, null leaving a model
// as it was and clearing the usage; a record whose model or usage does
// not decode reports none), but decodes only their values
// (messageMembers): the rest of the record, its content, is skipped, not
// decoded (a long answer's decode cost several times the append's own
// CPU). A record without the text "usage" in quotes is not walked at
// all. Members spelled otherwise, which encoding/json's case-insensitive
// Decode also reads ("Usage", escapes), are not counted. A negative count
// counts as 0 (no total goes negative).
func usageOf(kind Kind, rec []byte) *eventUsage {
	if kind != KindMessage || !bytes.Contains(rec, []byte(`"usage"`)) {
		return nil
	}
	var (
		model string
		u     *Usage
	)
	ok := messageMembers(rec, func(key, val []byte) bool {
		switch string(key) {
		case "usage":
			return json.Unmarshal(val, &u) == nil
		case "model":
			return json.Unmarshal(val, &model) == nil
		}
		return true
	})
	if !ok || u == nil {
		return nil
	}
	return &eventUsage{model: model, u: Usage{InputTokens: max(u.InputTokens, 0), OutputTokens: max(u.OutputTokens, 0),
		CacheReadTokens: max(u.CacheReadTokens, 0), CacheWriteTokens: max(u.CacheWriteTokens, 0)}}
}

// messageMembers calls fn with the name (between its quotes, as written)
// and the value of each member of the JSON object rec, in order, until fn
// returns false; it reports whether rec is an object and fn never
// returned false. It skips values without decoding them: a string to its
// closing quote (bytes.IndexByte, and the backslashes before a quote),
// an array or object by its brackets, without recursion. rec is a
// record the store checked as JSON when it was appended; bytes that are
// not JSON end the walk (false) without a read past rec.
func messageMembers(rec []byte, fn func(key, val []byte) bool) bool {
	i := skipSpace(rec, 0)
	if i >= len(rec) || rec[i] != '{' {
		return false
	}
	i = skipSpace(rec, i+1)
	if i < len(rec) && rec[i] == '}' {
		return true
	}
	for {
		if i >= len(rec) || rec[i] != '"' {
			return false
		}
		end := skipString(rec, i)
		if end < 0 {
			return false
		}
		key := rec[i+1 : end-1]
		i = skipSpace(rec, end)
		if i >= len(rec) || rec[i] != ':' {
			return false
		}
		i = skipSpace(rec, i+1)
		end = skipValue(rec, i)
		if end < 0 || !fn(key, rec[i:end]) {
			return false
		}
		i = skipSpace(rec, end)
		switch {
		case i < len(rec) && rec[i] == ',':
			i = skipSpace(rec, i+1)
		case i < len(rec) && rec[i] == '}':
			return true
		default:
			return false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the end of the string that starts with the quote at
// b[i] (just past its closing quote), or -1.
func skipString(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		q := j + k
		n := 0 // the backslashes just before the quote: an odd number escapes it
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// skipValue returns the end of the value that starts at b[i], or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	// A number, true, false or null: up to what ends a value.
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// satAdd is a+b for counts that are not negative, math.MaxInt64 where the
// sum would not fit: totals past what an int64 holds stay there.
func satAdd(a, b int64) int64 {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

// usageTally is token totals by model as they are added up.
type usageTally struct {
	models map[string]ModelUsage
}

func (t *usageTally) add(e *eventUsage) {
	if e == nil {
		return
	}
	t.addModel(ModelUsage{Model: e.model, Messages: 1, Usage: e.u})
}

func (t *usageTally) addModel(m ModelUsage) {
	if t.models == nil {
		t.models = make(map[string]ModelUsage)
	}
	cur := t.models[m.Model]
	cur.Model = m.Model
	cur.Messages = satAdd(cur.Messages, m.Messages)
	cur.Usage = addUsage(cur.Usage, m.Usage)
	t.models[m.Model] = cur
}

// addUsage is a+b, each count saturating (satAdd).
func addUsage(a, b Usage) Usage {
	return Usage{InputTokens: satAdd(a.InputTokens, b.InputTokens), OutputTokens: satAdd(a.OutputTokens, b.OutputTokens),
		CacheReadTokens: satAdd(a.CacheReadTokens, b.CacheReadTokens), CacheWriteTokens: satAdd(a.CacheWriteTokens, b.CacheWriteTokens)}
}

func (t *usageTally) merge(o usageTally) {
	for _, m := range o.models {
		t.addModel(m)
	}
}

// sorted is the tally's models sorted by name, with model "" named
// unnamed when unnamed is not "".
func (t *usageTally) sorted(unnamed string) []ModelUsage {
	var n usageTally
	for _, m := range t.models {
		if m.Model == "" {
			m.Model = unnamed
		}
		n.addModel(m)
	}
	out := slices.Collect(maps.Values(n.models))
	slices.SortFunc(out, func(a, b ModelUsage) int {
		switch {
		case a.Model < b.Model:
			return -1
		case a.Model > b.Model:
			return 1
		}
		return 0
	})
	return out
}

// totals is the tally as UsageTotals (see Totals).
func (t *usageTally) totals(model string, prices map[string]Price) UsageTotals {
	var out UsageTotals
	out.ByModel = t.sorted(model)
	for _, m := range out.ByModel {
		out.Messages = satAdd(out.Messages, m.Messages)
		out.Usage = addUsage(out.Usage, m.Usage)
		if m.Usage == (Usage{}) {
			continue
		}
		p, ok := prices[m.Model]
		if !ok {
			out.Unpriced = append(out.Unpriced, m.Model)
			continue
		}
		out.Cost += (float64(m.InputTokens)*p.Input + float64(m.OutputTokens)*p.Output +
			float64(m.CacheReadTokens)*p.CacheRead + float64(m.CacheWriteTokens)*p.CacheWrite) / 1e6
	}
	return out
}

// valid reports whether u can be totals the store wrote: a watermark of
// no events (uuid.Nil, no models) or of a positive number of them, and
// counts that are not negative. decodeMeta drops any other (Meta.Usage
// nil: Usage then reads the log), so that a damaged or hostile
// session.json cannot make a total negative nor count events twice.
func (u *RecordedUsage) valid() bool {
	switch {
	case u.Events < 0, (u.Events == 0) != (u.Through == uuid.Nil), u.Events == 0 && len(u.Models) > 0:
		return false
	}
	for _, m := range u.Models {
		if m.Messages < 0 || m.InputTokens < 0 || m.OutputTokens < 0 || m.CacheReadTokens < 0 || m.CacheWriteTokens < 0 {
			return false
		}
	}
	return true
}

// tallyOf is the tally of a recorded usage (nil: none).
func tallyOf(u *RecordedUsage) usageTally {
	var t usageTally
	if u != nil {
		for _, m := range u.Models {
			t.addModel(m)
		}
	}
	return t
}

// sessionUsage is an open session's totals while they are known exactly:
// the tally of the first events events of its log, the last of them
// through. The session's mutex guards it.
type sessionUsage struct {
	known   bool
	events  int64
	through uuid.UUID
	tally   usageTally
	// unfit is the watermark of totals a write of session.json left out
	// (they did not fit: writeMeta); recordedUsage does not offer them
	// again, so that a Flush or Close with nothing new writes nothing.
	unfit struct {
		events  int64
		through uuid.UUID
	}
}

// initUsage starts the session's totals at an open whose log ends with
// event last (uuid.Nil: empty), with h.mu held: known when session.json's
// record covers exactly that log, else left for Store.Usage to fold. A
// session that kept its totals known up to last (a lazy writer loading
// its index) keeps them. A read-only session never knows them: another
// writer may append behind it.
func (h *openSession) initUsage(last uuid.UUID) {
	if h.opts.ReadOnly {
		return
	}
	if h.usage.known && h.usage.through == last {
		return
	}
	rec := h.meta.Usage
	switch {
	case rec == nil && last == uuid.Nil:
		h.usage = sessionUsage{known: true}
	case rec != nil && rec.Through == last && (last == uuid.Nil) == (rec.Events == 0):
		h.usage = sessionUsage{known: true, events: rec.Events, through: rec.Through, tally: tallyOf(rec)}
	default:
		h.usage = sessionUsage{}
	}
}

// addUsage adds published records to the known totals, with h.mu held.
func (h *openSession) addUsage(rs []inflightRecord) {
	if !h.usage.known {
		return
	}
	for i := range rs {
		h.usage.tally.add(rs[i].use)
		h.usage.events++
		h.usage.through = rs[i].entry.ID
	}
}

// recordedUsage returns the totals to write to session.json when they are
// known and differ from what it records, with h.mu held.
func (h *openSession) recordedUsage() (*RecordedUsage, bool) {
	u := &h.usage
	if !u.known {
		return nil, false
	}
	if cur := h.meta.Usage; cur == nil && u.events == 0 || cur != nil && cur.Events == u.events && cur.Through == u.through {
		return nil, false
	}
	if h.meta.Usage == nil && u.unfit.events == u.events && u.unfit.through == u.through {
		return nil, false // left out of session.json already
	}
	return &RecordedUsage{Events: u.events, Through: u.through, Models: u.tally.sorted("")}, true
}

// Usage adds up the tokens the messages of a session report (Message.Usage)
// over scope: the session's own events (UsageSession), a branch
// (UsageBranch) or the session with its subagents (UsageTree); see
// UsageKind. The totals are exact: they count every durable event in the
// scope once, also after a crash or a re-import (an import writes an
// event that is already there never again), and equal the sum of the
// usage of the events Load, FullPath or Tree return for the same scope.
// Cost applies Options.Prices (see UsageTotals).
//
// UsageSession reads no record of a session whose recorded totals
// (session.json, see RecordedUsage) are current, which a session closed
// or flushed by a writer is: an open writer keeps them in memory. Else it
// reads the message records after the recorded watermark (all of them in
// a store older than the totals), and a writer records the result in
// session.json at its next Flush or Close. UsageBranch reads the message
// records on the branch. UsageTree lists the sessions (the catalogue)
// and adds each subagent session's UsageSession.
//
// Usage writes nothing itself. Errors: ErrNotFound (also for a Leaf not
// in the session), ErrInvalidScope, ErrLocked, ErrClosed,
// *CorruptionError for a damaged session (the totals then are not
// returned).
func (s *Store) Usage(ctx context.Context, session uuid.UUID, scope UsageScope) (UsageTotals, error) {
	var (
		t     usageTally
		model string
		err   error
	)
	switch scope.Kind {
	case UsageSession:
		t, model, err = s.sessionUsage(ctx, session)
	case UsageBranch:
		t, model, err = s.branchUsage(ctx, session, scope.Leaf)
	case UsageTree:
		return s.treeUsage(ctx, session)
	default:
		return UsageTotals{}, fmt.Errorf("%w: kind %d", ErrInvalidScope, scope.Kind)
	}
	if err != nil {
		return UsageTotals{}, err
	}
	return t.totals(model, s.opts.Prices), nil
}

// sessionUsage is UsageSession's tally, with the session's Meta.Model.
// Messages without a model stay under "".
func (s *Store) sessionUsage(ctx context.Context, session uuid.UUID) (usageTally, string, error) {
	if err := s.begin(ctx); err != nil {
		return usageTally{}, "", err
	}
	defer s.end()
	h, err := s.reg.acquireLazy(ctx, session, nil)
	if err != nil {
		return usageTally{}, "", err
	}
	if h.usage.known {
		t := usageTally{models: maps.Clone(h.usage.tally.models)}
		model := h.meta.Model
		s.reg.release(h)
		return t, model, nil
	}
	if err := h.materialize(); err != nil {
		s.reg.release(h)
		return usageTally{}, "", err
	}
	if err := h.damage(); err != nil {
		s.reg.release(h)
		return usageTally{}, "", err
	}
	if h.usage.known { // the load found them (a lazy writer's)
		t := usageTally{models: maps.Clone(h.usage.tally.models)}
		model := h.meta.Model
		s.reg.release(h)
		return t, model, nil
	}
	// The recorded totals, and the events after their watermark; all
	// events if the log does not hold it.
	rec, model := h.meta.Usage, h.meta.Model
	base, from := tallyOf(rec), 0
	if rec != nil && rec.Events > 0 {
		if i, ok := h.ByID[rec.Through]; ok && int64(i)+1 == rec.Events {
			from = int(i) + 1
		} else {
			base = usageTally{}
		}
	}
	n := len(h.Entries)
	var last uuid.UUID
	if n > 0 {
		last = h.Entries[n-1].ID
	}
	var msgs []entry
	for i := from; i < n; i++ {
		if h.Entries[i].Kind == eventline.KindMessage {
			msgs = append(msgs, h.Entries[i])
		}
	}
	s.reg.release(h)
	t := base // records are read without the lock, as Load's (they never move), and opened by readRun
	if len(msgs) > 0 {
		evs, err := s.readRun(ctx, h, nil, -1, msgs)
		if err != nil {
			return usageTally{}, "", err
		}
		for i := range evs {
			t.add(usageOf(evs[i].Kind, evs[i].Record))
		}
	}
	// A writer whose log has not grown since keeps them, and records them
	// at its next Flush or Close.
	h.mu.Lock()
	if !h.usage.known && !h.opts.ReadOnly && h.state == stateIndexed && !h.Partial && len(h.Entries) == n && (n == 0 || h.Entries[n-1].ID == last) {
		h.usage = sessionUsage{known: true, events: int64(n), through: last, tally: usageTally{models: maps.Clone(t.models)}}
	}
	h.mu.Unlock()
	return t, model, nil
}

// branchUsage is UsageBranch's tally: the message records on the path to
// leaf (the active path's end for uuid.Nil), past compactions.
func (s *Store) branchUsage(ctx context.Context, session, leaf uuid.UUID) (usageTally, string, error) {
	if err := s.begin(ctx); err != nil {
		return usageTally{}, "", err
	}
	defer s.end()
	h, err := s.reg.acquire(ctx, session, nil)
	if err != nil {
		return usageTally{}, "", err
	}
	model := h.meta.Model
	p, err := s.resolvePath(h, nil, leaf, leaf == uuid.Nil, false) // releases h
	if err != nil {
		return usageTally{}, "", err
	}
	if p.damaged != nil {
		return usageTally{}, "", p.damaged
	}
	var t usageTally
	for _, run := range p.runs {
		var msgs []entry
		for i := range run.entries {
			if run.entries[i].Kind == eventline.KindMessage {
				msgs = append(msgs, run.entries[i])
			}
		}
		if len(msgs) == 0 {
			continue
		}
		evs, err := s.readRun(ctx, p.h, p.pre, run.seg, msgs)
		if err != nil {
			return usageTally{}, "", err
		}
		for i := range evs {
			t.add(usageOf(evs[i].Kind, evs[i].Record))
		}
	}
	return t, model, nil
}

// treeUsage is UsageTree: the session's totals and those of every session
// below it by Meta.ParentSession, found in one listing (the catalogue),
// walked breadth first with a set of the sessions seen (no recursion, and
// a cycle a damaged session.json could make ends). Each session's
// messages without a model count under its own Meta.Model.
func (s *Store) treeUsage(ctx context.Context, session uuid.UUID) (UsageTotals, error) {
	metas, err := s.List(ctx)
	var listErr *ListError
	if err != nil && !errors.As(err, &listErr) {
		return UsageTotals{}, err
	}
	children := make(map[uuid.UUID][]uuid.UUID)
	for _, m := range metas {
		if m.ParentSession != uuid.Nil {
			children[m.ParentSession] = append(children[m.ParentSession], m.ID)
		}
	}
	var total usageTally
	seen := map[uuid.UUID]bool{session: true}
	queue := []uuid.UUID{session}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		t, model, err := s.sessionUsage(ctx, id)
		if err != nil {
			if id != session && errors.Is(err, ErrNotFound) {
				continue // deleted since the listing
			}
			return UsageTotals{}, fmt.Errorf("sessionstore: usage of session %s: %w", id, err)
		}
		var named usageTally
		for _, m := range t.sorted(model) {
			named.addModel(m)
		}
		total.merge(named)
		for _, c := range children[id] {
			if !seen[c] {
				seen[c] = true
				queue = append(queue, c)
			}
		}
	}
	return total.totals("", s.opts.Prices), nil
}
