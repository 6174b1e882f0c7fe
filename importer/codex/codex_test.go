package codex

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// codexHistory replays a rollout's raw lines the way Codex rebuilds its
// history on resume: response items are recorded in order (system
// messages are not part of the history); a compaction replaces the
// history with its replacement history, or, without one, with the user
// messages of the history (not Codex's own context messages, not earlier
// summaries), the newest within 20,000 tokens of four bytes, then the
// summary as a user message; a rollback drops the last num_turns user
// turns. It returns the history rendered with renderItem and the newest
// compaction's message ("" without one).
func codexHistory(t *testing.T, path string) ([]string, string, bool) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var history []map[string]any
	summaries := map[string]bool{}
	lastSummary, compacted := "", false
	userText := func(it map[string]any) (string, bool) {
		if it["type"] != "message" || it["role"] != "user" {
			return "", false
		}
		text := itemText(it["content"])
		lower := strings.ToLower(strings.TrimSpace(text))
		for _, p := range []string{"<environment_context>", "<user_instructions>", "<turn_aborted>", "# agents.md instructions", "<user_shell_command>"} {
			if strings.HasPrefix(lower, p) {
				return "", false
			}
		}
		return text, !summaries[text]
	}
	for _, raw := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(raw), &l) != nil {
			continue
		}
		typ, _ := l["type"].(string)
		payload, _ := l["payload"].(map[string]any)
		if payload == nil { // the legacy bare form
			if _, ok := l["record_type"]; ok || typ == "" {
				continue
			}
			typ, payload = "response_item", l
		}
		switch typ {
		case "response_item":
			if payload["role"] != "system" {
				history = append(history, payload)
			}
		case "compacted":
			msg, _ := payload["message"].(string)
			summaries[msg] = true
			lastSummary, compacted = msg, true
			if rh, ok := payload["replacement_history"].([]any); ok {
				history = history[:0]
				for _, it := range rh {
					history = append(history, it.(map[string]any))
				}
				continue
			}
			var users []string
			budget := 20000
			for i := len(history) - 1; i >= 0 && budget > 0; i-- {
				text, ok := userText(history[i])
				if !ok {
					continue
				}
				tokens := (len(text) + 3) / 4
				if tokens > budget {
					users = append([]string{text[:budget*4]}, users...)
					break
				}
				users = append([]string{text}, users...)
				budget -= tokens
			}
			if msg == "" {
				msg = "(no summary available)"
			}
			summaries[msg] = true
			history = history[:0]
			for _, u := range append(users, msg) {
				history = append(history, map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": u}}})
			}
		case "event_msg":
			if payload["type"] != "thread_rolled_back" {
				continue
			}
			n := int(payload["num_turns"].(float64))
			var turns []int
			for i, it := range history {
				if _, ok := userText(it); ok {
					turns = append(turns, i)
				}
			}
			if n <= 0 || len(turns) == 0 {
				continue
			}
			cut := turns[0]
			if n < len(turns) {
				cut = turns[len(turns)-n]
			}
			history = history[:cut]
		}
	}
	var out []string
	for _, it := range history {
		out = append(out, renderItem(it))
	}
	return out, lastSummary, compacted
}

func itemText(content any) string {
	items, _ := content.([]any)
	var parts []string
	for _, c := range items {
		m := c.(map[string]any)
		switch m["type"] {
		case "input_text", "output_text", "summary_text", "reasoning_text":
			parts = append(parts, m["text"].(string))
		}
	}
	return strings.Join(parts, "\n")
}

func canon(t *testing.T, raw json.RawMessage) string {
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	b, _ := json.Marshal(v)
	return string(b)
}

// renderItem renders a Codex history item.
func renderItem(it map[string]any) string {
	switch it["type"] {
	case "message":
		if r := it["role"]; r == "user" || r == "assistant" {
			return fmt.Sprintf("%s: %s", r, itemText(it["content"]))
		}
		return fmt.Sprintf("item message %s: %s", it["role"], itemText(it["content"]))
	case "reasoning":
		text := itemText(it["summary"])
		if text == "" {
			text = itemText(it["content"])
		}
		return "reasoning: " + text
	case "function_call":
		var args any
		_ = json.Unmarshal([]byte(it["arguments"].(string)), &args)
		b, _ := json.Marshal(args)
		return fmt.Sprintf("call %s %s %s", it["call_id"], it["name"], b)
	case "custom_tool_call":
		b, _ := json.Marshal(it["input"])
		return fmt.Sprintf("call %s %s %s", it["call_id"], it["name"], b)
	case "local_shell_call":
		b, _ := json.Marshal(it["action"])
		return fmt.Sprintf("call %s local_shell %s", it["call_id"], b)
	case "function_call_output", "custom_tool_call_output":
		switch o := it["output"].(type) {
		case string:
			return fmt.Sprintf("result %s: %s", it["call_id"], o)
		case []any:
			return fmt.Sprintf("result %s: %s", it["call_id"], itemText(o))
		case map[string]any:
			return fmt.Sprintf("result %s: %s error=%v", it["call_id"], o["content"], o["success"] == false)
		}
	}
	return fmt.Sprintf("item %s", it["type"])
}

// render renders a loaded event as renderItem renders the item it came
// from; "" for the events that are no history item (the session_meta
// root, rollback markers).
func render(t *testing.T, ev sessionstore.Event) string {
	t.Helper()
	switch ev.Kind {
	case sessionstore.KindMessage:
		m, err := ev.Message()
		require.NoError(t, err)
		if ev.Role == sessionstore.RoleAssistant && m.Content == "" && m.Reasoning != "" {
			return "reasoning: " + m.Reasoning
		}
		return fmt.Sprintf("%s: %s", ev.Role, m.Content)
	case sessionstore.KindToolCall:
		c, err := ev.ToolCall()
		require.NoError(t, err)
		return fmt.Sprintf("call %s %s %s", c.CallID, c.Name, canon(t, c.Arguments))
	case sessionstore.KindToolResult:
		r, err := ev.ToolResult()
		require.NoError(t, err)
		if r.IsError {
			return fmt.Sprintf("result %s: %s error=true", r.CallID, r.Output)
		}
		return fmt.Sprintf("result %s: %s", r.CallID, r.Output)
	case sessionstore.KindCustom:
		var it map[string]any
		require.NoError(t, json.Unmarshal(ev.Record, &it))
		if it["type"] == "session_meta" || it["type"] == "thread_rolled_back" {
			return ""
		}
		return renderItem(it)
	}
	return "event " + string(ev.Kind)
}

func openStore(t testing.TB) *sessionstore.Store {
	t.Helper()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

func TestLoadIsCodexResumeHistory(t *testing.T) {
	for _, name := range []string{"basic", "compacted", "legacy-compacted", "rollback", "legacy"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			st, err := sessionstore.Open(dir, nil)
			require.NoError(t, err)
			path := filepath.Join("testdata", name+".jsonl")
			rep, err := Import(ctx, st, []string{path}, nil)
			require.NoError(t, err)
			require.Empty(t, rep.Errors)
			s, _, err := Read(path)
			require.NoError(t, err)
			events, err := st.Load(ctx, s.Meta.ID)
			require.NoError(t, err)

			// A new process loads without the index (the parent locations of
			// the lines): the same context.
			require.NoError(t, st.Close())
			st, err = sessionstore.Open(dir, nil)
			require.NoError(t, err)
			defer st.Close()
			again, err := st.Load(ctx, s.Meta.ID)
			require.NoError(t, err)
			require.Equal(t, len(events), len(again))
			for i := range events {
				assert.Equal(t, events[i].ID, again[i].ID)
			}

			want, summary, compacted := codexHistory(t, path)
			require.NotEmpty(t, want)
			if compacted {
				require.NotEmpty(t, events)
				c, err := events[0].Compaction()
				require.NoError(t, err, "Load starts at the newest compaction")
				assert.Equal(t, summary, c.Summary.Text)
				events = events[1:]
			}
			var got []string
			for _, ev := range events {
				if r := render(t, ev); r != "" {
					got = append(got, r)
				}
			}
			assert.Equal(t, want, got)
		})
	}
}

func TestRollbackBranches(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	path := filepath.Join("testdata", "rollback.jsonl")
	_, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	s, _, err := Read(path)
	require.NoError(t, err)
	nodes, err := st.Tree(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Len(t, nodes, 10, "the dropped turns stay in the tree")
	var marker *sessionstore.Node
	for i := range nodes {
		if nodes[i].BranchFrom != uuid.Nil {
			marker = &nodes[i]
		}
	}
	require.NotNil(t, marker, "the rollback starts a branch")
	ev, err := st.Event(ctx, s.Meta.ID, marker.ID)
	require.NoError(t, err)
	assert.Equal(t, sessionstore.KindCustom, ev.Kind)
	assert.JSONEq(t, `{"type":"thread_rolled_back","num_turns":2}`, string(ev.Record))
	at := time.Date(2025, 12, 1, 9, 0, 2, 0, time.UTC)
	assert.Equal(t, importer.ID("codex:0199d000-0000-7000-8000-000000000001:3", at), marker.ParentID, "after the first turn")
}

func TestImportMetaAndReimport(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	path := filepath.Join("testdata", "basic.jsonl")
	var progress []importer.Report
	rep, err := Import(ctx, st, []string{path}, &importer.Options{Progress: func(r importer.Report) { progress = append(progress, r) }})
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	assert.Equal(t, 20, rep.Lines)
	assert.Equal(t, 17, rep.Added, "the meta and 16 response items")
	require.Len(t, progress, 1)
	assert.Equal(t, 1, progress[0].Sessions)

	created := time.Date(2025, 10, 29, 0, 59, 38, 308e6, time.UTC)
	sid := importer.ID("codex:0199a2d7-41c4-78b1-b7cc-a45d62a89cd5", created)
	meta, err := st.Meta(ctx, sid)
	require.NoError(t, err)
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	assert.True(t, created.Equal(meta.CreatedAt))
	assert.Equal(t, "/home/dev/app", meta.WorkingDir)
	assert.Equal(t, "gpt-5-codex", meta.Model)
	assert.Equal(t, map[string]string{
		"source": "codex", "source_path": abs, "source_id": "0199a2d7-41c4-78b1-b7cc-a45d62a89cd5",
		"originator": "codex_cli_rs", "cli_version": "0.46.0", "git_branch": "main", "git_commit": "3f2a9c1",
	}, meta.Labels)
	head, err := st.Head(ctx, sid)
	require.NoError(t, err)
	assert.Equal(t, importer.ID("codex:0199a2d7-41c4-78b1-b7cc-a45d62a89cd5:20", time.Date(2025, 10, 29, 0, 59, 48, 0, time.UTC)), head)

	rep, err = Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Added)
	assert.Equal(t, 17, rep.Existing)

	// A rollout that grew: only the new line is added.
	grown := filepath.Join(t.TempDir(), "rollout-grown.jsonl")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	data = append(data, []byte(`{"timestamp":"2025-10-29T01:00:00.000Z","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"Thanks."}]}}`+"\n")...)
	require.NoError(t, os.WriteFile(grown, data, 0o600))
	rep, err = Import(ctx, st, []string{grown}, nil)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Added)
}

func TestMalformedLine(t *testing.T) {
	path := filepath.Join("testdata", "malformed.jsonl")
	s, errs, err := Read(path)
	require.NoError(t, err)
	require.Len(t, errs, 1)
	var le *importer.LineError
	require.True(t, errors.As(errs[0], &le))
	assert.Equal(t, path, le.Path)
	assert.Equal(t, 3, le.Line)
	assert.ErrorIs(t, errs[0], importer.ErrMalformed)
	assert.Len(t, s.Events, 4, "the meta and the three good items")

	ctx := context.Background()
	st := openStore(t)
	rep, err := Import(ctx, st, []string{"testdata"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 6, rep.Files)
	assert.Equal(t, 6, rep.Sessions)
	require.Len(t, rep.Errors, 1)
	assert.ErrorAs(t, rep.Errors[0], &le)
	assert.Equal(t, 3, le.Line)
}

func TestBadLines(t *testing.T) {
	cases := map[string]struct {
		text   string
		fatal  bool
		errs   int
		events int
	}{
		"empty":            {text: "", fatal: true},
		"only garbage":     {text: "nope\n", fatal: true, errs: 1},
		"no session_meta":  {text: itemLine(`{"type":"message","role":"user","content":[]}`), errs: 1, events: 1},
		"payload array":    {text: meta + `{"timestamp":"2025-01-01T00:00:00Z","type":"response_item","payload":[1]}` + "\n", errs: 1, events: 1},
		"no type":          {text: meta + `{"timestamp":"2025-01-01T00:00:00Z","payload":{}}` + "\n", errs: 1, events: 1},
		"no payload":       {text: meta + `{"timestamp":"2025-01-01T00:00:00Z","type":"compacted"}` + "\n", errs: 1, events: 1},
		"unknown type":     {text: meta + `{"timestamp":"2025-01-01T00:00:00Z","type":"future_thing","payload":{"x":1}}` + "\n", events: 2},
		"bad compacted":    {text: meta + `{"timestamp":"2025-01-01T00:00:00Z","type":"compacted","payload":{"message":3}}` + "\n", errs: 1, events: 1},
		"rollback too far": {text: meta + itemLine(`{"type":"message","role":"user","content":[{"type":"input_text","text":"a"}]}`) + `{"type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":5}}` + "\n", events: 3},
	}
	dir := t.TempDir()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".jsonl")
			require.NoError(t, os.WriteFile(p, []byte(c.text), 0o600))
			s, errs, err := Read(p)
			assert.Len(t, errs, c.errs)
			for _, e := range errs {
				assert.ErrorIs(t, e, importer.ErrMalformed)
			}
			if c.fatal {
				assert.ErrorIs(t, err, importer.ErrMalformed)
				return
			}
			require.NoError(t, err)
			assert.Len(t, s.Events, c.events)
			checkSession(t, s)
		})
	}
	_, _, err := Read(filepath.Join(dir, "missing.jsonl"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

const meta = `{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s1","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}}` + "\n"

func itemLine(payload string) string {
	return `{"timestamp":"2025-01-01T00:00:01Z","type":"response_item","payload":` + payload + "}\n"
}

// checkSession asserts what importer.Write requires of a session.
func checkSession(t *testing.T, s *importer.Session) {
	t.Helper()
	seen := map[uuid.UUID]bool{}
	parents := map[uuid.UUID]bool{}
	roots := 0
	for _, ev := range s.Events {
		require.NotEqual(t, uuid.Nil, ev.ID)
		require.False(t, seen[ev.ID], "repeated id")
		if ev.ParentID == uuid.Nil {
			roots++
		} else {
			require.True(t, seen[ev.ParentID], "parent before child")
		}
		require.True(t, json.Valid(ev.Record), "record is JSON: %s", ev.Record)
		seen[ev.ID] = true
		parents[ev.ParentID] = true
	}
	require.LessOrEqual(t, roots, 1)
	if s.Head != uuid.Nil {
		require.True(t, seen[s.Head])
		require.False(t, parents[s.Head], "head is a leaf")
	}
}

// TestGolden pins the events read from basic.jsonl and compacted.jsonl.
func TestGolden(t *testing.T) {
	for _, name := range []string{"basic", "compacted"} {
		t.Run(name, func(t *testing.T) {
			s, errs, err := Read(filepath.Join("testdata", name+".jsonl"))
			require.NoError(t, err)
			require.Empty(t, errs)
			var buf bytes.Buffer
			index := map[uuid.UUID]int{uuid.Nil: -1}
			for i, ev := range s.Events {
				index[ev.ID] = i
				var rec bytes.Buffer
				require.NoError(t, json.Compact(&rec, ev.Record))
				fmt.Fprintf(&buf, "%d parent=%d %s %s %s %s\n", i, index[ev.ParentID], ev.Time.Format(time.RFC3339Nano), ev.Kind, ev.Role, rec.String())
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), buf.String())
		})
	}
}

func FuzzParseLine(f *testing.F) {
	matches, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	require.NoError(f, err)
	for _, m := range matches {
		data, err := os.ReadFile(m)
		require.NoError(f, err)
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f.Add(bytes.Clone(sc.Bytes()))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		l, err := parseLine(data)
		if err != nil {
			return
		}
		if l.typ == "" || !json.Valid(l.payload) && l.typ != "state" {
			t.Fatalf("parsed a line without a type or payload: %+v", l)
		}
		s, _, _, err := read(strings.NewReader(meta+string(data)+"\n"), "fuzz.jsonl", "fuzz.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		checkSession(t, s)
	})
}

func FuzzRead(f *testing.F) {
	// Small rollouts, so that the fuzzer's minimizing of each new input
	// stays quick: items, both compactions, a rollback, the legacy form.
	user := itemLine(`{"type":"message","role":"user","content":[{"type":"input_text","text":"q"}]}`)
	f.Add([]byte(meta + user + itemLine(`{"type":"function_call","name":"f","arguments":"{}","call_id":"1"}`) + itemLine(`{"type":"function_call_output","call_id":"1","output":"o"}`)))
	f.Add([]byte(meta + user + `{"type":"compacted","payload":{"message":"m"}}` + "\n" + user + `{"type":"compacted","payload":{"message":"n","replacement_history":[{"type":"message","role":"user","content":[]}]}}` + "\n"))
	f.Add([]byte(meta + user + user + `{"type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}` + "\n" + user))
	f.Add([]byte(`{"id":"s","timestamp":"2025-01-01T00:00:00Z"}` + "\n" + `{"record_type":"state"}` + "\n" + `{"type":"message","role":"user","content":[]}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, errs, _, err := read(bytes.NewReader(data), "fuzz.jsonl", "fuzz.jsonl")
		for _, e := range append(errs, err) {
			var le *importer.LineError
			var fe *importer.FormatError
			if e != nil && !errors.As(e, &fe) && (!errors.As(e, &le) || le.Line < 1) {
				t.Fatalf("not a located error: %v", e)
			}
		}
		if err == nil {
			checkSession(t, s)
		}
	})
}

// genRollout writes a rollout of n lines: turns of a user message, a
// reasoning item, a function call and its output and an answer, with a
// compaction every 1000 lines.
func genRollout(tb testing.TB, n int) string {
	tb.Helper()
	var buf bytes.Buffer
	buf.WriteString(`{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"bench","timestamp":"2025-01-01T00:00:00Z","cwd":"/bench"}}` + "\n")
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 1; i < n; i++ {
		ts := at.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano)
		var typ, payload string
		switch {
		case i%1000 == 999:
			typ, payload = "compacted", fmt.Sprintf(`{"message":"summary %d","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"summary %d"}]}]}`, i, i)
		case i%5 == 0:
			typ, payload = "response_item", fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":"question %d: %s"}]}`, i, strings.Repeat("word ", 20))
		case i%5 == 1:
			typ, payload = "response_item", `{"type":"reasoning","summary":[{"type":"summary_text","text":"**Thinking**"}],"encrypted_content":"gAAAA"}`
		case i%5 == 2:
			typ, payload = "response_item", fmt.Sprintf(`{"type":"function_call","name":"shell","arguments":"{\"command\":[\"ls\",\"-la\"]}","call_id":"call_%d"}`, i)
		case i%5 == 3:
			typ, payload = "response_item", fmt.Sprintf(`{"type":"function_call_output","call_id":"call_%d","output":"%s"}`, i-1, strings.Repeat("out ", 30))
		default:
			typ, payload = "response_item", fmt.Sprintf(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":"answer %d"}]}`, i)
		}
		fmt.Fprintf(&buf, `{"timestamp":%q,"type":%q,"payload":%s}`+"\n", ts, typ, payload)
	}
	path := filepath.Join(tb.TempDir(), "rollout-bench.jsonl")
	require.NoError(tb, os.WriteFile(path, buf.Bytes(), 0o600))
	return path
}

func BenchmarkRead(b *testing.B) {
	path := genRollout(b, 3000)
	fi, err := os.Stat(path)
	require.NoError(b, err)
	events := 0
	for b.Loop() {
		s, errs, err := Read(path)
		if err != nil || len(errs) > 0 {
			b.Fatal(err, errs)
		}
		events += len(s.Events)
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(events)/sec, "events/s")
	b.ReportMetric(float64(fi.Size())*float64(b.N)/sec/1e6, "MB/s")
}

func BenchmarkImport(b *testing.B) {
	path := genRollout(b, 3000)
	fi, err := os.Stat(path)
	require.NoError(b, err)
	ctx := context.Background()
	events := 0
	for b.Loop() {
		b.StopTimer()
		st, err := sessionstore.Open(b.TempDir(), nil)
		require.NoError(b, err)
		b.StartTimer()
		rep, err := Import(ctx, st, []string{path}, nil)
		if err != nil || len(rep.Errors) > 0 {
			b.Fatal(err, rep.Errors)
		}
		events += rep.Added
		b.StopTimer()
		st.Close()
		b.StartTimer()
	}
	sec := b.Elapsed().Seconds()
	b.ReportMetric(float64(events)/sec, "events/s")
	b.ReportMetric(float64(fi.Size())*float64(b.N)/sec/1e6, "MB/s")
}
