package claude

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
)

// File is what Read finds in one transcript.
type File struct {
	Path string
	// Sessions are the file's sessions: for a session's own transcript,
	// the session, then one subagent session per sidechain it holds; for
	// a subagent's transcript (agent-*.jsonl), that subagent. A file
	// with no conversation record (only summaries or snapshots) has none.
	Sessions []*importer.Session
	Lines    int // non-empty lines
	// Skipped counts the lines that are not events: those without a
	// uuid (file-history-snapshot, queue-operation, permission-mode,
	// last-prompt, summary, ...) and the malformed ones.
	Skipped int
	// Summaries maps the leafUuid of each summary line to its text.
	Summaries map[string]string
	// Errors are the file's malformed lines, each a *importer.LineError.
	Errors []error
	// Notes tell of lines read in a way a reader may not expect, though
	// nothing is lost: a compact boundary whose conversation before it
	// is not in the file.
	Notes []importer.Note

	// History counts the file-history-snapshot lines and the backups
	// they name (see "File history" in the package doc), as far as
	// reading tells: Import adds what recording them does.
	History HistoryStats

	infos       []*sessionInfo // beside Sessions, what Import links them with
	historyErrs []error        // the file-history lines and paths refused, for an import given the file history
	bytes       int64          // the bytes read, for importer.Report
}

// sessionInfo is what Import needs of a session beyond its events.
type sessionInfo struct {
	claudeID string               // the sessionId of its records
	agentID  string               // a subagent's id; "" for a session's own transcript
	leaves   map[string]uuid.UUID // record uuid -> the record's last event
	order    map[string]int       // record uuid -> its event's index, for summaries
	calls    map[string]uuid.UUID // tool_use id -> its tool call event
	agents   map[string]string    // agentId -> the tool_use id whose result names it
	prompts  map[string]string    // a Task/Agent tool_use's prompt -> its tool_use id
	prompt   string               // a subagent's first user text
	spawned  string               // a sidechain's: record uuid of the main-session record it grew from
	history  *sessionHistory      // its file-history lines (history.go)
}

// Read parses the transcript at path without writing anything. Malformed
// lines are reported in File.Errors (each a *importer.LineError with the
// path and line number) and the rest is read; the error is for a file
// that cannot be read.
//
// A subagent transcript's session comes without its parent: its
// Meta.ParentSession is set by Import, which reads the parent's transcript
// first. The sidechains inside a session's own transcript are linked to it
// (ParentSession and SpawnedBy) by Read itself.
//
// A line longer than importer.MaxLineSize is reported (wrapping
// importer.ErrLineTooLong) and left out without being held in memory. A
// file that looks like another tool's (importer.Sniff of its first line)
// is read no further: the error is an *importer.FormatError.
func Read(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readFile(path, f)
}

// validUTF8 is s with each byte sequence that is not UTF-8 replaced by
// U+FFFD: a file name may be any bytes, and session metadata holds
// UTF-8 only (what came from JSON is UTF-8 already).
func validUTF8(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// isAgentFile reports whether path is a subagent's transcript.
func isAgentFile(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "agent-")
}

// group is one session of a file being built.
type group struct {
	recs []*record // in file order
}

// parseFile reads the transcript data as the file at path.
func parseFile(path string, data []byte) *File {
	f, _ := readFile(path, bytes.NewReader(data)) // a reader of bytes fails no read, nor would the first line
	if f == nil {
		f = &File{Path: path, Summaries: map[string]string{}}
	}
	return f
}

// readFile reads the transcript r, the file at path.
func readFile(path string, in io.Reader) (*File, error) {
	f := &File{Path: path, Summaries: map[string]string{}}
	// The lines are read in order, then parsed several at a time (the
	// JSON decoding is most of a read's work), then taken in order.
	type srcLine struct {
		b   []byte
		n   int
		err error // ErrLineTooLong: not parsed
		r   *record
	}
	var src []srcLine
	lr := importer.NewLineReader(in, path, 0)
	for {
		b, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, importer.ErrLineTooLong) {
			src = append(src, srcLine{err: err})
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("claude: read %s: %w", path, err)
		}
		if len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		if len(src) == 0 {
			if err := importer.WrongFormat(path, importer.FormatClaude, bytes.TrimSpace(b)); err != nil {
				return nil, err
			}
		}
		src = append(src, srcLine{b: bytes.Clone(b), n: n})
	}
	parseLines(len(src), func(i int) {
		if l := &src[i]; l.err == nil {
			l.r, l.err = parseLine(l.b)
			if l.err != nil {
				l.err = importer.Malformed(path, l.n, "%v", l.err)
			}
		}
	})
	var recs []*record
	var lineNo []int
	var hist []srcHistory
	for i := range src {
		l := &src[i]
		f.Lines++
		if l.err != nil {
			f.Skipped++
			f.Errors = append(f.Errors, l.err)
			continue
		}
		r := l.r
		if r.UUID == "" {
			f.Skipped++
			if r.Type == "summary" && r.LeafUUID != "" {
				f.Summaries[r.LeafUUID] = r.Summary
			}
			if r.Type == historyType {
				hist = append(hist, srcHistory{line: l.n, r: r})
			}
			continue
		}
		recs = append(recs, r)
		lineNo = append(lineNo, l.n)
	}
	src = nil
	f.bytes = lr.Stats().Bytes
	// A compact boundary that is the file's last record has its summary
	// line still to come (Claude Code writes the two one after the other):
	// it waits for the file to grow, as an event that is stored cannot take
	// the summary later.
	if k := len(recs) - 1; k >= 0 && recs[k].Type == "system" && recs[k].Subtype == "compact_boundary" && !named(recs[:k], recs[k].UUID) {
		recs, lineNo = recs[:k], lineNo[:k]
		f.Skipped++
	}

	// Split into sessions: a subagent's file is one; in a session's own
	// file, each tree of sidechain records is a subagent of its own.
	agent := isAgentFile(path)
	byUUID := make(map[string]int, len(recs))
	for i, r := range recs {
		if _, dup := byUUID[r.UUID]; !dup {
			byUUID[r.UUID] = i
		}
	}
	groupOf := make([]int, len(recs))
	groups := []*group{{}}
	spawned := []string{""}
	for i, r := range recs {
		g := 0
		if !agent && r.IsSidechain {
			p := -1
			if r.ParentUUID != nil {
				if j, ok := byUUID[*r.ParentUUID]; ok && j < i {
					p = j
				}
			}
			if p >= 0 && recs[p].IsSidechain {
				g = groupOf[p]
			} else {
				g = len(groups)
				groups = append(groups, &group{})
				from := ""
				if p >= 0 {
					from = recs[p].UUID
				}
				spawned = append(spawned, from)
			}
		}
		groupOf[i] = g
		groups[g].recs = append(groups[g].recs, r)
	}
	lines := make(map[*record]int, len(recs))
	for i, r := range recs {
		lines[r] = lineNo[i]
	}
	for gi, g := range groups {
		if len(g.recs) == 0 {
			continue
		}
		s, info := buildSession(f, g.recs, lines, byUUID, agent || gi > 0)
		info.spawned = spawned[gi]
		f.Sessions = append(f.Sessions, s)
		f.infos = append(f.infos, info)
	}
	// Link the sidechains of a session's own file to it.
	if !agent && len(f.Sessions) > 0 && f.infos[0].agentID == "" {
		main, mi := f.Sessions[0], f.infos[0]
		for i := 1; i < len(f.Sessions); i++ {
			s, info := f.Sessions[i], f.infos[i]
			s.Meta.ParentSession = main.Meta.ID
			s.Meta.SpawnedBy = spawnedBy(mi, info)
			if s.Meta.SpawnedBy == uuid.Nil {
				s.Meta.SpawnedBy = mi.leaves[info.spawned]
			}
		}
	}
	planHistory(f, hist)
	if agent {
		readAgentMeta(f)
	}
	for i, s := range f.Sessions {
		s.Meta.Name = nameOf(f.Summaries, f.infos[i])
		if s.Meta.Name == "" {
			s.Meta.Name = s.Meta.Labels["claude_agent_description"]
		}
	}
	return f, nil
}

// named reports whether a record of recs names u as its parent.
func named(recs []*record, u string) bool {
	for _, r := range recs {
		if r.ParentUUID != nil && *r.ParentUUID == u {
			return true
		}
	}
	return false
}

func hasKey(m map[string]int, k string) bool {
	_, ok := m[k]
	return ok
}

// spawnedBy finds the tool call event of parent that started the subagent
// sub: the call whose result names the subagent's agentId, or a Task (or
// Agent) call whose prompt is the subagent's first message. uuid.Nil if
// there is none.
func spawnedBy(parent, sub *sessionInfo) uuid.UUID {
	if sub.agentID != "" {
		if id, ok := parent.agents[sub.agentID]; ok {
			return parent.calls[id]
		}
	}
	if sub.prompt != "" {
		if id, ok := parent.prompts[sub.prompt]; ok {
			return parent.calls[id]
		}
	}
	return uuid.Nil
}

// nameOf is the summary whose leaf is the newest of the session's records
// that a summary names (of two at one event, the smaller uuid's), or "".
// It looks up the session's records, not every summary: an import names
// each of its sessions from the summaries of all its files.
func nameOf(summaries map[string]string, info *sessionInfo) string {
	best, bestLeaf, name := -1, "", ""
	for leaf, i := range info.order {
		if text, ok := summaries[leaf]; ok && (i > best || i == best && leaf < bestLeaf) {
			best, bestLeaf, name = i, leaf, text
		}
	}
	return name
}

// maxAgentMeta bounds the <agent>.meta.json read: it holds two short
// strings.
const maxAgentMeta = 1 << 20

// readAgentMeta reads the <agent>.meta.json beside a subagent's transcript,
// if there is one and it is a regular file of at most maxAgentMeta bytes:
// its agent type and description.
func readAgentMeta(f *File) {
	path := strings.TrimSuffix(f.Path, ".jsonl") + ".meta.json"
	if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxAgentMeta {
		return
	}
	mf, err := os.Open(path)
	if err != nil {
		return
	}
	defer mf.Close()
	data, err := io.ReadAll(io.LimitReader(mf, maxAgentMeta+1))
	if err != nil || len(data) > maxAgentMeta {
		return
	}
	var m struct {
		AgentType   string `json:"agentType"`
		Description string `json:"description"`
	}
	if json.Unmarshal(data, &m) != nil {
		return
	}
	for i := range f.Sessions {
		labels := f.Sessions[i].Meta.Labels
		if m.AgentType != "" {
			labels["claude_agent_type"] = m.AgentType
		}
		if m.Description != "" {
			labels["claude_agent_description"] = m.Description
		}
	}
}

// buildSession maps the records of one session to events. sub says it is
// a subagent's.
func buildSession(f *File, recs []*record, lines map[*record]int, inFile map[string]int, sub bool) (*importer.Session, *sessionInfo) {
	info := &sessionInfo{
		leaves:  make(map[string]uuid.UUID, len(recs)),
		order:   make(map[string]int, len(recs)),
		calls:   map[string]uuid.UUID{},
		agents:  map[string]string{},
		prompts: map[string]string{},
	}
	first := recs[0]
	info.claudeID = first.SessionID
	if info.claudeID == "" {
		info.claudeID = validUTF8(strings.TrimSuffix(filepath.Base(f.Path), ".jsonl"))
	}
	if sub {
		info.agentID = first.AgentID
		if info.agentID == "" && isAgentFile(f.Path) {
			info.agentID = validUTF8(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f.Path), "agent-"), ".jsonl"))
		}
		if info.agentID == "" {
			info.agentID = "sidechain-" + first.UUID
		}
	}
	s := &importer.Session{Path: f.Path, Events: make([]sessionstore.Event, 0, len(recs))} // a record is one event or more
	key := "claude:" + info.claudeID
	if sub {
		key += "/agent-" + info.agentID
	}
	s.Meta = sessionstore.Meta{
		ID:        importer.ID(key, first.time),
		CreatedAt: first.time,
		Labels:    map[string]string{"source": "claude-code", "source_path": validUTF8(f.Path), "claude_session_id": info.claudeID},
	}
	if sub {
		s.Meta.Labels["claude_agent_id"] = info.agentID
	}

	known := make(map[string]*record, len(recs))
	for _, r := range recs {
		if known[r.UUID] == nil {
			known[r.UUID] = r
		}
	}
	b := &builder{f: f, s: s, info: info, lines: lines, known: known, inFile: inFile, pending: map[string][]*record{}, done: map[string]bool{}, runOf: map[string]string{}, tip: map[string]uuid.UUID{}}
	for _, r := range recs {
		if r.Cwd != "" && s.Meta.WorkingDir == "" {
			s.Meta.WorkingDir = r.Cwd
		}
		if r.GitBranch != "" {
			s.Meta.Labels["git_branch"] = r.GitBranch
		}
		if r.Version != "" {
			s.Meta.Labels["claude_version"] = r.Version
		}
		if r.msg != nil && r.Type == "assistant" && r.msg.Model != "" && r.msg.Model != "<synthetic>" {
			s.Meta.Model = r.msg.Model
		}
		if sub && info.prompt == "" && r.Type == "user" && r.msg != nil && r.msg.text != "" {
			info.prompt = r.msg.text
		}
		b.place(r)
	}
	b.breakCycles()
	s.Head = newestLeaf(s.Events)
	return s, info
}

// builder turns records into events, parents before children.
type builder struct {
	f       *File
	s       *importer.Session
	info    *sessionInfo
	lines   map[*record]int
	known   map[string]*record   // the session's records by uuid (the first of a repeated one)
	inFile  map[string]int       // uuids of the file's records
	pending map[string][]*record // records waiting for their parent, by its uuid
	ready   [][]*record          // released records still to add, a list per released parent (see place)
	done    map[string]bool      // uuids of the records emitted
	prev    uuid.UUID            // the last event emitted
	compact map[uuid.UUID]int    // compaction events waiting for their summary, by id: their index
	// A response's run: its lines and the lines of its tool results,
	// chained in file order (see runParent).
	runOf   map[string]string    // record uuid -> the message.id of the run it is in
	tip     map[string]uuid.UUID // message.id -> the last event of its run
	joining string               // the run of the record being emitted
}

// place adds r, then the records that waited for it, and the records
// that waited for those, depth first, in the order each waited: a record
// and every record below it before its next sibling. The walk keeps its
// own stack (ready) instead of recursing, so that a chain of any length
// written children first (each line naming the next as its parent) is
// placed in memory proportional to the chain, never in goroutine stack.
func (b *builder) place(r *record) {
	b.add(r)
	b.drain()
}

// drain adds the released records still to place.
func (b *builder) drain() {
	for len(b.ready) > 0 {
		top := &b.ready[len(b.ready)-1]
		if len(*top) == 0 {
			b.ready = b.ready[:len(b.ready)-1]
			continue
		}
		c := (*top)[0]
		*top = (*top)[1:]
		if !c.placed { // a record that broke a cycle waits for its parent still (breakCycles)
			b.add(c)
		}
	}
}

// add emits r, or holds it until its parent is emitted. The records
// that waited for r are left to place.
func (b *builder) add(r *record) {
	if b.done[r.UUID] {
		b.f.Errors = append(b.f.Errors, importer.Malformed(b.f.Path, b.lines[r], "%s record %s repeats a uuid; left out", r.Type, r.UUID))
		b.f.Skipped++
		return
	}
	p := ""
	switch {
	case r.Type == "system" && r.Subtype == "compact_boundary":
		p = r.LogicalParentUUID
		if p == "" {
			b.emit(r, b.prev) // a boundary with no logical parent follows the record before it
			return
		}
	case r.ParentUUID != nil:
		p = *r.ParentUUID
	}
	switch {
	case p == "":
		if len(b.s.Events) > 0 {
			b.f.Errors = append(b.f.Errors, importer.Malformed(b.f.Path, b.lines[r], "%s record %s is a second root; attached to the record before it", r.Type, r.UUID))
			b.emit(r, b.prev)
			return
		}
		b.emit(r, uuid.Nil)
	case r.Type == "system" && r.Subtype == "compact_boundary" && !hasKey(b.inFile, p):
		// The conversation it compacted is in an earlier transcript, or
		// was cut from this one: Claude Code's context starts at the
		// boundary all the same, and so does Load's.
		what := "it follows the record before it"
		if b.prev == uuid.Nil {
			what = "it is the root"
		}
		b.f.Notes = append(b.f.Notes, importer.Note{Path: b.f.Path, Line: b.lines[r], Text: fmt.Sprintf("compact boundary %s compacts a conversation not in the file (its logicalParentUuid %s is in an earlier transcript, or was cut from this one); the context starts at the boundary, as Claude Code's does: %s", r.UUID, p, what)})
		b.emit(r, b.prev)
	case b.info.leaves[p] != uuid.Nil:
		parent, run := b.runParent(r, p)
		b.joining = run
		b.emit(r, parent)
	case b.known[p] != nil && !b.done[p]:
		b.pending[p] = append(b.pending[p], r) // its parent comes later in the file
	case len(b.s.Events) == 0 && hasKey(b.inFile, p):
		b.emit(r, uuid.Nil) // a sidechain's first record, the child of a record of the main session
	default:
		b.dangling(r, p)
		b.emit(r, b.prev)
	}
}

// runParent is the parent of r, whose parent record p is emitted, and the
// run r joins. Claude Code writes a response with parallel tool calls as
// one line per tool_use block, each the child of the one before, and each
// result as the child of its own call's line; the walk of parentUuid links
// from the leaf then passes through only some of the calls and results,
// while the context Claude Code sends holds them all (a tool_use without
// its tool_result is refused). So the lines of a response (one
// message.id) and the lines of its results are chained in file order: a
// record that joins the run of its parent is the child of the run's last
// event.
func (b *builder) runParent(r *record, p string) (uuid.UUID, string) {
	run := b.runOf[p]
	switch {
	case r.Type == "assistant" && r.msg != nil && r.msg.ID != "":
		if run == r.msg.ID {
			return b.tip[run], run
		}
		return b.info.leaves[p], r.msg.ID // the first line of its response
	case run != "" && r.Type == "user" && r.msg != nil && hasToolResult(r.msg):
		return b.tip[run], run
	}
	return b.info.leaves[p], ""
}

// hasToolResult reports whether m holds a tool_result block.
func hasToolResult(m *message) bool {
	for _, bl := range m.blocks {
		if bl.Type == "tool_result" {
			return true
		}
	}
	return false
}

// dangling reports r, whose parent p is not a record of the session.
func (b *builder) dangling(r *record, p string) {
	what := "is attached to the record before it"
	if b.prev == uuid.Nil {
		what = "is the root"
	}
	b.f.Errors = append(b.f.Errors, importer.Malformed(b.f.Path, b.lines[r], "%s record %s names parent %s, which is not in the file; it %s", r.Type, r.UUID, p, what))
}

// emit appends r's events under parent, and releases the records waiting
// for r (see place).
func (b *builder) emit(r *record, parent uuid.UUID) {
	if parent == uuid.Nil && len(b.s.Events) > 0 {
		parent = b.prev // only one root
	}
	b.done[r.UUID] = true
	r.placed = true
	run := b.joining
	b.joining = ""
	var evs []sessionstore.Event
	switch {
	case r.Type == "system" && r.Subtype == "compact_boundary":
		rec := sessionstore.CompactionRecord{Summarized: parent}
		if r.CompactMetadata != nil {
			rec.TokensBefore = r.CompactMetadata.PreTokens
		}
		evs = []sessionstore.Event{sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, rec)}
	case r.Type == "user" && r.msg != nil && r.IsCompactSummary && b.summarize(r, parent):
		return // the summary is the compaction's; r's children follow it
	case r.Type == "user" && r.msg != nil:
		evs = userEvents(r.msg)
		b.noteResults(r)
	case r.Type == "assistant" && r.msg != nil:
		evs = assistantEvents(r.msg)
	default:
		evs = []sessionstore.Event{sessionstore.NewEvent(sessionstore.KindCustom, sessionstore.RoleNone, r.raw)}
	}
	for i := range evs {
		key := "claude:" + r.UUID
		if i > 0 {
			key = fmt.Sprintf("%s#%d", key, i)
		}
		ev := &evs[i]
		ev.ID = importer.ID(key, r.time)
		ev.ParentID = parent
		ev.Time = r.time
		parent = ev.ID
		if ev.Kind == sessionstore.KindToolCall {
			if c, err := ev.ToolCall(); err == nil {
				b.info.calls[c.CallID] = ev.ID
				b.noteTask(c)
			}
		}
		if ev.Kind == sessionstore.KindCompaction {
			if b.compact == nil {
				b.compact = map[uuid.UUID]int{}
			}
			b.compact[ev.ID] = len(b.s.Events)
		}
		b.s.Events = append(b.s.Events, *ev)
	}
	b.info.leaves[r.UUID] = parent
	b.info.order[r.UUID] = len(b.s.Events) - 1
	b.prev = parent
	if run != "" {
		b.runOf[r.UUID] = run
		b.tip[run] = parent
	}
	b.release(r.UUID)
}

// release hands the records that waited for the record uuid to place.
func (b *builder) release(uuid string) {
	if rs := b.pending[uuid]; len(rs) > 0 {
		delete(b.pending, uuid)
		b.ready = append(b.ready, rs)
	}
}

// awaited is the uuid of the record r hangs from: a compact boundary's
// logical parent, every other record's parent.
func awaited(r *record) string {
	if r.Type == "system" && r.Subtype == "compact_boundary" {
		return r.LogicalParentUUID
	}
	if r.ParentUUID != nil {
		return *r.ParentUUID
	}
	return ""
}

// breakCycles places the records still waiting once every record was
// added. Each waits for a record of the session that waits too (else it
// would have been placed), so following the parents from any of them
// reaches a cycle: records that name one another as parents. Taking the
// waiting records in file order, it follows the parents of each to its
// cycle, breaks the cycle at its member that comes first in the file
// (attached to the record before it, and reported), and places it, which
// places the rest of the cycle and every record below it. Each record is
// visited by one walk at most, so the whole takes time linear in the
// records (plus sorting them).
func (b *builder) breakCycles() {
	var waiting []*record
	for _, rs := range b.pending {
		waiting = append(waiting, rs...)
	}
	slices.SortFunc(waiting, func(x, y *record) int { return b.lines[x] - b.lines[y] })
	walk := make(map[*record]int, len(waiting)) // the walk that visited a record, from 1
	for i, r := range waiting {
		if r.placed {
			continue
		}
		cur, cycle := r, false
		for {
			walk[cur] = i + 1
			next := b.known[awaited(cur)]
			if next == nil || next.placed || (walk[next] != 0 && walk[next] != i+1) {
				break // no cycle above cur after all (defensive: see above); break at cur
			}
			if walk[next] == i+1 {
				cur, cycle = next, true
				break
			}
			cur = next
		}
		first, members := cur, 1
		if cycle {
			for m := b.known[awaited(cur)]; m != cur; m = b.known[awaited(m)] {
				members++
				if b.lines[m] < b.lines[first] {
					first = m
				}
			}
		}
		what := "is attached to the record before it"
		if b.prev == uuid.Nil {
			what = "is the root"
		}
		b.f.Errors = append(b.f.Errors, importer.Malformed(b.f.Path, b.lines[first], "%s record %s names parent %s, which is in a cycle of %d records that name one another as parents; the cycle is broken here: the record %s", first.Type, first.UUID, awaited(first), members, what))
		b.joining = ""
		b.emit(first, b.prev)
		b.drain()
	}
}

// summarize makes r, a compact summary, the summary of the compaction
// event parent, if parent is one still without its summary. r's uuid then
// names the compaction.
func (b *builder) summarize(r *record, parent uuid.UUID) bool {
	i, ok := b.compact[parent]
	if !ok {
		return false
	}
	delete(b.compact, parent)
	ev := &b.s.Events[i]
	rec, err := ev.Compaction()
	if err != nil {
		return false
	}
	rec.Summary.Text = messageText(r.msg)
	re := sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, rec)
	ev.Record = re.Record
	b.info.leaves[r.UUID] = parent
	b.info.order[r.UUID] = i
	b.prev = parent
	b.release(r.UUID)
	return true
}

// messageText is the text of a user message: its string, or its text
// blocks one per line.
func messageText(m *message) string {
	if m.blocks == nil {
		return m.text
	}
	var parts []string
	for _, bl := range m.blocks {
		if bl.Type == "text" {
			parts = append(parts, bl.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// noteResults records the agentId a tool result of r names (a subagent's
// result), so that the subagent can name the call that spawned it.
func (b *builder) noteResults(r *record) {
	if len(r.ToolUseResult) == 0 || r.ToolUseResult[0] != '{' || !bytes.Contains(r.ToolUseResult, []byte(`"agentId"`)) {
		return // most results are a tool's output, often large: not decoded
	}
	var res struct {
		AgentID string `json:"agentId"`
	}
	if json.Unmarshal(r.ToolUseResult, &res) != nil || res.AgentID == "" {
		return
	}
	for _, bl := range r.msg.blocks {
		if bl.Type == "tool_result" {
			b.info.agents[res.AgentID] = bl.ToolUseID
			return
		}
	}
}

// noteTask records the prompt of a call that starts a subagent.
func (b *builder) noteTask(c sessionstore.ToolCall) {
	if c.Name != "Task" && c.Name != "Agent" {
		return
	}
	var in struct {
		Prompt string `json:"prompt"`
	}
	if json.Unmarshal(c.Arguments, &in) == nil && in.Prompt != "" {
		b.info.prompts[in.Prompt] = c.CallID
	}
}

// newestLeaf is the leaf with the newest time, the later in the slice of
// two with the same time: where Claude Code resumes.
func newestLeaf(evs []sessionstore.Event) uuid.UUID {
	parents := make(map[uuid.UUID]bool, len(evs))
	for _, ev := range evs {
		parents[ev.ParentID] = true
	}
	var head uuid.UUID
	var at time.Time
	for _, ev := range evs {
		if !parents[ev.ID] && (head == uuid.Nil || !ev.Time.Before(at)) {
			head, at = ev.ID, ev.Time
		}
	}
	return head
}

// parseBatch is how many lines a goroutine of parseLines takes at a time.
const parseBatch = 64

// parseLines calls parse(i) for i in [0, n) from up to GOMAXPROCS
// goroutines, each taking parseBatch lines at a time, and returns when
// all calls have.
func parseLines(n int, parse func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+parseBatch-1)/parseBatch)
	if workers <= 1 {
		for i := range n {
			parse(i)
		}
		return
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				start := int(next.Add(parseBatch)) - parseBatch
				if start >= n {
					return
				}
				for i := start; i < min(start+parseBatch, n); i++ {
					parse(i)
				}
			}
		})
	}
	wg.Wait()
}
