package claude

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const fixture = "testdata/projects/-tmp-demo"

var fixtureMain = filepath.Join(fixture, "11111111-1111-4111-8111-111111111111.jsonl")

// sharedData returns the directory of the shared Claude Code transcripts:
// $SESSIONSTORE_SHARED_DATA, shared/data in a directory above this one, or
// /work/shared/data. Without it the test is skipped, or fails under CI.
func sharedData(tb testing.TB) string {
	tb.Helper()
	cands := []string{os.Getenv("SESSIONSTORE_SHARED_DATA")}
	if wd, err := os.Getwd(); err == nil {
		for dir := wd; ; dir = filepath.Dir(dir) {
			cands = append(cands, filepath.Join(dir, "shared", "data"))
			if filepath.Dir(dir) == dir {
				break
			}
		}
	}
	cands = append(cands, "/work/shared/data")
	for _, c := range cands {
		if c == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(c, "claude-code")); err == nil && fi.IsDir() {
			return filepath.Join(c, "claude-code")
		}
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("shared data missing: set SESSIONSTORE_SHARED_DATA to the shared/data directory")
	}
	tb.Skip("no shared data (shared/data above the repository, $SESSIONSTORE_SHARED_DATA or /work/shared/data)")
	return ""
}

func openStore(t testing.TB) *sessionstore.Store {
	t.Helper()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// transcripts lists the .jsonl files under dir.
func transcripts(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".jsonl") {
			out = append(out, p)
		}
		return err
	}))
	return out
}

// ---- The reference: Claude Code's context, from the raw lines ----

// item is one step of a context, as the test compares it: the id the
// event must have (uuid.Nil: not checked) and what it says.
type item struct {
	ID   uuid.UUID
	Text string
}

type rawLine struct {
	m    map[string]any
	line int
}

func str(m map[string]any, k string) string { s, _ := m[k].(string); return s }

// rawRecords reads path's lines that carry a uuid, as generic JSON, with
// their line numbers; unparsable lines are left out.
func rawRecords(t testing.TB, path string) []rawLine {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	var out []rawLine
	n := 0
	for sc.Scan() {
		n++
		var m map[string]any
		if json.Unmarshal(sc.Bytes(), &m) != nil || str(m, "uuid") == "" {
			continue
		}
		out = append(out, rawLine{m, n})
	}
	require.NoError(t, sc.Err())
	return out
}

// referenceContext is what Claude Code rebuilds on resuming the records
// recs: from the newest record that no other names as its parent, the
// walk of parentUuid links to the root, stopping at a compact boundary,
// with each response whole (withRuns); then each record in order as the
// items it contributes.
func referenceContext(t testing.TB, recs []rawLine) []item {
	byID := map[string]rawLine{}
	hasChild := map[string]bool{}
	for _, r := range recs {
		byID[str(r.m, "uuid")] = r
		hasChild[str(r.m, "parentUuid")] = true
		if str(r.m, "subtype") == "compact_boundary" {
			hasChild[str(r.m, "logicalParentUuid")] = true
		}
	}
	var newest rawLine
	var at time.Time
	for _, r := range recs {
		if hasChild[str(r.m, "uuid")] {
			continue
		}
		ts, err := time.Parse(time.RFC3339Nano, str(r.m, "timestamp"))
		require.NoError(t, err)
		if newest.m == nil || !ts.Before(at) {
			newest, at = r, ts
		}
	}
	var walk []rawLine
	for r, ok := newest, newest.m != nil; ok; r, ok = byID[str(r.m, "parentUuid")] {
		walk = append([]rawLine{r}, walk...)
		if str(r.m, "subtype") == "compact_boundary" {
			break
		}
	}
	walk = withRuns(recs, walk)
	var out []item
	for i, r := range walk {
		u := str(r.m, "uuid")
		ts, _ := time.Parse(time.RFC3339Nano, str(r.m, "timestamp"))
		id := func(n int) uuid.UUID {
			if n == 0 {
				return importer.ID("claude:"+u, ts)
			}
			return importer.ID(fmt.Sprintf("claude:%s#%d", u, n), ts)
		}
		msg, _ := r.m["message"].(map[string]any)
		switch typ := str(r.m, "type"); {
		case str(r.m, "subtype") == "compact_boundary":
			summary := ""
			if i+1 < len(walk) && walk[i+1].m["isCompactSummary"] == true {
				summary = plainText(walk[i+1].m["message"].(map[string]any)["content"])
			}
			out = append(out, item{id(0), "compaction: " + summary})
		case typ == "user" && r.m["isCompactSummary"] == true && i > 0 && str(walk[i-1].m, "subtype") == "compact_boundary":
			// Its text is the compaction's.
		case typ == "user":
			out = append(out, userItems(msg["content"], id)...)
		case typ == "assistant":
			out = append(out, assistantItems(msg, id)...)
		default:
			out = append(out, item{id(0), "custom: " + typ})
		}
	}
	return out
}

// withRuns is walk with each response whole: Claude Code writes a
// response's parallel tool calls one line each, and each result the child
// of its own call's line, so the walk misses some; its context has every
// line of the response (one message.id) and every line holding a result
// of its calls, each in file order among the walk's records.
func withRuns(recs, walk []rawLine) []rawLine {
	msgID := func(r rawLine) string {
		if str(r.m, "type") != "assistant" {
			return ""
		}
		m, _ := r.m["message"].(map[string]any)
		return str(m, "id")
	}
	runOf := map[string][]rawLine{} // message.id -> its lines and its results' lines
	callOf := map[string]string{}   // tool_use id -> message.id
	for _, r := range recs {
		if id := msgID(r); id != "" {
			runOf[id] = append(runOf[id], r)
			m, _ := r.m["message"].(map[string]any)
			blocks, _ := m["content"].([]any)
			for _, b := range blocks {
				if bm, _ := b.(map[string]any); str(bm, "type") == "tool_use" {
					callOf[str(bm, "id")] = id
				}
			}
		}
	}
	for _, r := range recs {
		if str(r.m, "type") != "user" {
			continue
		}
		m, _ := r.m["message"].(map[string]any)
		blocks, _ := m["content"].([]any)
		for _, b := range blocks {
			if bm, _ := b.(map[string]any); str(bm, "type") == "tool_result" && callOf[str(bm, "tool_use_id")] != "" {
				id := callOf[str(bm, "tool_use_id")]
				runOf[id] = append(runOf[id], r)
				break
			}
		}
	}
	onWalk := map[int]bool{}
	for _, r := range walk {
		onWalk[r.line] = true
	}
	var extra []rawLine // the responses' lines the walk misses
	for _, r := range walk {
		for _, x := range runOf[msgID(r)] {
			if !onWalk[x.line] {
				onWalk[x.line] = true
				extra = append(extra, x)
			}
		}
	}
	slices.SortFunc(extra, func(a, b rawLine) int { return a.line - b.line })
	out := make([]rawLine, 0, len(walk)+len(extra))
	for len(walk) > 0 || len(extra) > 0 {
		if len(extra) > 0 && (len(walk) == 0 || extra[0].line < walk[0].line) {
			out, extra = append(out, extra[0]), extra[1:]
		} else {
			out, walk = append(out, walk[0]), walk[1:]
		}
	}
	return out
}

func blockText(b map[string]any) string {
	if str(b, "type") == "text" {
		return str(b, "text")
	}
	if src, ok := b["source"].(map[string]any); ok && str(src, "media_type") != "" {
		return "[" + str(b, "type") + ": " + str(src, "media_type") + "]"
	}
	return "[" + str(b, "type") + "]"
}

func plainText(c any) string {
	if s, ok := c.(string); ok {
		return s
	}
	var parts []string
	for _, b := range c.([]any) {
		if bm := b.(map[string]any); str(bm, "type") == "text" {
			parts = append(parts, str(bm, "text"))
		}
	}
	return strings.Join(parts, "\n")
}

func userItems(c any, id func(int) uuid.UUID) []item {
	if s, ok := c.(string); ok {
		return []item{{id(0), "user: " + s}}
	}
	var out []item
	var text []string
	flush := func() {
		if text != nil {
			out = append(out, item{id(len(out)), "user: " + strings.Join(text, "\n")})
			text = nil
		}
	}
	for _, b := range c.([]any) {
		bm := b.(map[string]any)
		if str(bm, "type") != "tool_result" {
			text = append(text, blockText(bm))
			continue
		}
		flush()
		output := ""
		switch rc := bm["content"].(type) {
		case string:
			output = rc
		case []any:
			var parts []string
			for _, x := range rc {
				parts = append(parts, blockText(x.(map[string]any)))
			}
			output = strings.Join(parts, "\n")
		}
		out = append(out, item{id(len(out)), fmt.Sprintf("result %s error=%v: %s", str(bm, "tool_use_id"), bm["is_error"] == true, output)})
	}
	flush()
	if len(out) == 0 {
		out = append(out, item{id(0), "user: "})
	}
	return out
}

func assistantItems(msg map[string]any, id func(int) uuid.UUID) []item {
	var text, thinking, calls []string
	var callItems []item
	if s, ok := msg["content"].(string); ok {
		text = []string{s}
	}
	blocks, _ := msg["content"].([]any)
	for _, b := range blocks {
		bm := b.(map[string]any)
		switch str(bm, "type") {
		case "text":
			text = append(text, str(bm, "text"))
		case "thinking":
			thinking = append(thinking, str(bm, "thinking"))
		case "tool_use":
			args, _ := json.Marshal(bm["input"])
			if bm["input"] == nil {
				args = nil
			}
			call := fmt.Sprintf("%s %s %s", str(bm, "id"), str(bm, "name"), canon(args))
			calls = append(calls, call)
			callItems = append(callItems, item{id(1 + len(callItems)), "call " + call})
		}
	}
	head := item{id(0), fmt.Sprintf("assistant [%s] %q reasoning=%q calls=%v", str(msg, "model"), strings.Join(text, "\n\n"), strings.Join(thinking, "\n\n"), calls)}
	return append([]item{head}, callItems...)
}

// canon is JSON in a form that compares: decoded and encoded again.
func canon(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// loadedContext is the context Load gives, as items.
func loadedContext(t testing.TB, evs []sessionstore.Event) []item {
	t.Helper()
	var out []item
	for _, ev := range evs {
		var text string
		switch ev.Kind {
		case sessionstore.KindMessage:
			m, err := ev.Message()
			require.NoError(t, err)
			if ev.Role == sessionstore.RoleUser {
				text = "user: " + m.Content
				break
			}
			var calls []string
			for _, c := range m.ToolCalls {
				calls = append(calls, fmt.Sprintf("%s %s %s", c.CallID, c.Name, canon(c.Arguments)))
			}
			text = fmt.Sprintf("assistant [%s] %q reasoning=%q calls=%v", m.Model, m.Content, m.Reasoning, calls)
		case sessionstore.KindToolCall:
			c, err := ev.ToolCall()
			require.NoError(t, err)
			text = fmt.Sprintf("call %s %s %s", c.CallID, c.Name, canon(c.Arguments))
		case sessionstore.KindToolResult:
			r, err := ev.ToolResult()
			require.NoError(t, err)
			text = fmt.Sprintf("result %s error=%v: %s", r.CallID, r.IsError, r.Output)
		case sessionstore.KindCompaction:
			c, err := ev.Compaction()
			require.NoError(t, err)
			text = "compaction: " + c.Summary.Text
		case sessionstore.KindCustom:
			var m map[string]any
			require.NoError(t, ev.Decode(&m))
			text = "custom: " + str(m, "type")
		default:
			text = "unexpected kind " + string(ev.Kind)
		}
		out = append(out, item{ev.ID, text})
	}
	return out
}

// sessionsByPath maps each source file to its imported sessions' metas.
func sessionsByPath(t testing.TB, st *sessionstore.Store) map[string][]sessionstore.Meta {
	t.Helper()
	metas, err := st.List(context.Background())
	require.NoError(t, err)
	out := map[string][]sessionstore.Meta{}
	for _, m := range metas {
		out[m.Labels["source_path"]] = append(out[m.Labels["source_path"]], m)
	}
	return out
}

// checkContexts compares, for each transcript, Load of its session with
// the reference context of its records (a session's own records, without
// sidechains, or a subagent file's records).
func checkContexts(t *testing.T, st *sessionstore.Store, files []string) int {
	ctx := context.Background()
	byPath := sessionsByPath(t, st)
	checked := 0
	for _, path := range files {
		var recs []rawLine
		agent := strings.HasPrefix(filepath.Base(path), "agent-")
		for _, r := range rawRecords(t, path) {
			if agent || r.m["isSidechain"] != true {
				recs = append(recs, r)
			}
		}
		var meta *sessionstore.Meta
		for _, m := range byPath[filepath.Clean(path)] {
			if agent == (m.Labels["claude_agent_id"] != "") {
				meta = &m
			}
		}
		if len(recs) == 0 {
			assert.Nil(t, meta, "%s holds no conversation: no session", path)
			continue
		}
		require.NotNil(t, meta, "no session imported from %s", path)
		evs, err := st.Load(ctx, meta.ID)
		require.NoError(t, err)
		want := referenceContext(t, recs)
		got := loadedContext(t, evs)
		require.Equal(t, len(want), len(got), "%s: context length", path)
		for i := range want {
			if !assert.Equal(t, want[i], got[i], "%s: event %d of the context", path, i) {
				break
			}
		}
		checked++
	}
	return checked
}

func TestRealDataContextAndReimport(t *testing.T) {
	dir := sharedData(t)
	ctx := context.Background()
	st := openStore(t)
	files := transcripts(t, dir)
	require.Len(t, files, 82)

	progress := 0
	rep, err := Import(ctx, st, []string{dir}, &importer.Options{Progress: func(importer.Report) { progress++ }})
	require.NoError(t, err)
	assert.Empty(t, rep.Errors, "the shared transcripts are well formed")
	assert.Equal(t, 82, rep.Files)
	assert.Equal(t, rep.Sessions, progress, "progress after each session")
	assert.Equal(t, rep.Sessions, rep.Created)
	assert.Positive(t, rep.Added)

	checked := checkContexts(t, st, files)
	assert.Equal(t, 80, checked, "every file with a conversation (two hold only a summary or snapshots)")

	// Subagents name their parent when its transcript is there.
	metas, err := st.List(ctx)
	require.NoError(t, err)
	linked, spawned := 0, 0
	for _, m := range metas {
		if m.ParentSession != uuid.Nil {
			linked++
			parent, err := st.Meta(ctx, m.ParentSession)
			require.NoError(t, err)
			assert.Equal(t, m.Labels["claude_session_id"], parent.Labels["claude_session_id"])
		}
		if m.SpawnedBy != uuid.Nil {
			spawned++
			ev, err := st.Event(ctx, m.ParentSession, m.SpawnedBy)
			require.NoError(t, err, "SpawnedBy is an event of the parent")
			assert.Equal(t, sessionstore.KindToolCall, ev.Kind)
		}
	}
	assert.Equal(t, 17, linked, "the subagents whose session's transcript is in the set")
	assert.Equal(t, 9, spawned, "every subagent started by a Task or Agent call finds it")

	// Importing again adds nothing.
	again, err := Import(ctx, st, []string{dir}, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, again.Added)
	assert.Equal(t, 0, again.Created)
	assert.Equal(t, rep.Added, again.Existing)
	assert.Equal(t, rep.Sessions, again.Sessions)
}

func TestFixture(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rep, err := Import(ctx, st, []string{fixture}, nil)
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Files)
	assert.Equal(t, 3, rep.Sessions, "the session, its sidechain, its subagent file")

	// The broken line and the record that names it are reported, with
	// the file and line; the rest is imported.
	require.Len(t, rep.Errors, 2)
	var lines []int
	for _, e := range rep.Errors {
		var le *importer.LineError
		require.True(t, errors.As(e, &le), "%v", e)
		assert.ErrorIs(t, e, importer.ErrMalformed)
		assert.Equal(t, fixtureMain, le.Path)
		lines = append(lines, le.Line)
	}
	assert.Equal(t, []int{8, 9}, lines)
	assert.Contains(t, rep.Errors[1].Error(), "names parent u6, which is not in the file")

	require.Equal(t, 2, checkContexts(t, st, transcripts(t, fixture)))

	byPath := sessionsByPath(t, st)
	var main, side sessionstore.Meta
	for _, m := range byPath[fixtureMain] {
		if m.Labels["claude_agent_id"] == "" {
			main = m
		} else {
			side = m
		}
	}
	assert.Equal(t, "Demo session", main.Name, "the summary line names the session of its leaf")
	assert.Equal(t, "/tmp/demo", main.WorkingDir)
	assert.Equal(t, "claude-demo-1", main.Model)
	assert.Equal(t, map[string]string{"source": "claude-code", "source_path": fixtureMain, "git_branch": "main", "claude_session_id": "11111111-1111-4111-8111-111111111111", "claude_version": "2.0.1"}, main.Labels)
	assert.Equal(t, importer.ID("claude:11111111-1111-4111-8111-111111111111", time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)), main.ID)

	call := importer.ID("claude:u14#1", time.Date(2026, 1, 5, 10, 0, 13, 0, time.UTC)) // the Task call
	assert.Equal(t, main.ID, side.ParentSession, "a sidechain in the file is a subagent")
	assert.Equal(t, call, side.SpawnedBy, "found by its prompt")
	sideEvs, err := st.Load(ctx, side.ID)
	require.NoError(t, err)
	assert.Equal(t, []item{
		{importer.ID("claude:u18", time.Date(2026, 1, 5, 10, 0, 14, 0, time.UTC)), "user: Find big files"},
		{importer.ID("claude:u19", time.Date(2026, 1, 5, 10, 0, 15, 0, time.UTC)), `assistant [claude-demo-1] "None found." reasoning="" calls=[]`},
	}, loadedContext(t, sideEvs))
	subPath := filepath.Join(fixture, "11111111-1111-4111-8111-111111111111", "subagents", "agent-abc123.jsonl")
	require.Len(t, byPath[subPath], 1)
	sub := byPath[subPath][0]
	assert.Equal(t, main.ID, sub.ParentSession)
	assert.Equal(t, call, sub.SpawnedBy, "found by the agentId of the call's result")
	assert.Equal(t, 1, sub.Depth)
	assert.Equal(t, "Big files", sub.Name, "the .meta.json description")
	assert.Equal(t, "general-purpose", sub.Labels["claude_agent_type"])

	// The whole tree is kept: FullPath walks past the compaction, and the
	// abandoned branch (u7, u8) is there.
	full, err := st.FullPath(ctx, main.ID, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, "user: List the files", loadedContext(t, full[:1])[0].Text)
	nodes, err := st.Tree(ctx, main.ID)
	require.NoError(t, err)
	ids := map[uuid.UUID]bool{}
	for _, n := range nodes {
		ids[n.ID] = true
	}
	assert.True(t, ids[importer.ID("claude:u8", time.Date(2026, 1, 5, 10, 0, 7, 0, time.UTC))], "the other branch's leaf")
	u7, err := st.Event(ctx, main.ID, importer.ID("claude:u7", time.Date(2026, 1, 5, 10, 0, 6, 0, time.UTC)))
	require.NoError(t, err)
	assert.Equal(t, importer.ID("claude:u5", time.Date(2026, 1, 5, 10, 0, 4, 0, time.UTC)), u7.ParentID, "the child of the broken line joins the record before it")
	assert.False(t, ids[importer.ID("claude:u12", time.Date(2026, 1, 5, 10, 0, 11, 0, time.UTC))], "the compact summary is the compaction's")

	// Reimport adds nothing, and reports the same lines.
	again, err := Import(ctx, st, []string{fixture}, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, again.Added)
	assert.Equal(t, rep.Added, again.Existing)
	assert.Len(t, again.Errors, 2)
}

func TestReadFixture(t *testing.T) {
	f, err := Read(fixtureMain)
	require.NoError(t, err)
	assert.Equal(t, 22, f.Lines)
	assert.Equal(t, 4, f.Skipped, "summary, snapshot, queue operation, the broken line")
	require.Len(t, f.Sessions, 2)
	s := f.Sessions[0]
	assert.Equal(t, importer.ID("claude:u17", time.Date(2026, 1, 5, 10, 0, 22, 0, time.UTC)), s.Head, "the newest leaf")
	// One event per line, a tool call after its message: u1, u2, u3, u4
	// + call, u5, u7, u8, u9, u10, u11 (compaction), u13, u14 + call, u15,
	// u16, u17.
	assert.Len(t, s.Events, 17)
	_, err = Read(filepath.Join(fixture, "missing.jsonl"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// A transcript that grows (Claude Code appends as it goes) imports its
// new lines only.
func TestGrowingTranscript(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	data, err := os.ReadFile(fixtureMain)
	require.NoError(t, err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	path := filepath.Join(t.TempDir(), "11111111-1111-4111-8111-111111111111.jsonl")
	require.NoError(t, os.WriteFile(path, bytes.Join(lines[:12], nil), 0o600))
	first, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, data, 0o600))
	second, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Equal(t, first.Added, second.Existing)
	assert.Positive(t, second.Added)
	byPath := sessionsByPath(t, st)
	require.Len(t, byPath[filepath.Clean(path)], 2, "the session and, new, its sidechain")
	assert.Equal(t, 1, checkContexts(t, st, []string{path}))
}

func TestImportMissingPath(t *testing.T) {
	st := openStore(t)
	_, err := Import(context.Background(), st, []string{filepath.Join(t.TempDir(), "nope")}, nil)
	assert.ErrorIs(t, err, os.ErrNotExist)
	metas, err := st.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, metas, "nothing written")
}

func TestImportCanceled(t *testing.T) {
	st := openStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Import(ctx, st, []string{fixture}, nil)
	assert.ErrorIs(t, err, context.Canceled)
}
