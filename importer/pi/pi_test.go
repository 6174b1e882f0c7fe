package pi

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

// piContext rebuilds, from the raw lines of a Pi session file, the
// messages Pi sends to the model, the way Pi does it: migrate a version 1
// file to a chain (firstKeptEntryIndex indexing the entries with the
// header at 0), take the last entry as the leaf, walk to the root, and if
// a compaction is on the path emit its summary, the messages from
// firstKeptEntryId up to the newest compaction, then the messages after
// it. Each message is rendered as a string compared with render below.
func piContext(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var all []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil {
			all = append(all, m)
		}
	}
	require.NotEmpty(t, all)
	require.Equal(t, "session", all[0]["type"])
	if _, ok := all[0]["version"]; !ok { // version 1: give ids, chain them
		prev := any(nil)
		for i, e := range all[1:] {
			e["id"] = fmt.Sprintf("v1-%d", i)
			e["parentId"] = prev
			prev = e["id"]
			if k, ok := e["firstKeptEntryIndex"].(float64); ok {
				if target := all[int(k)]; target["type"] != "session" {
					e["firstKeptEntryId"] = target["id"]
				}
			}
		}
	}
	entries := all[1:]
	byID := map[string]map[string]any{}
	for _, e := range entries {
		byID[e["id"].(string)] = e
	}
	var path_ []map[string]any
	for cur := entries[len(entries)-1]; cur != nil; {
		path_ = append([]map[string]any{cur}, path_...)
		p, _ := cur["parentId"].(string)
		cur = byID[p]
	}
	compaction := -1
	for i, e := range path_ {
		if e["type"] == "compaction" {
			compaction = i
		}
	}
	var out []string
	emit := func(e map[string]any) {
		switch e["type"] {
		case "message":
			out = append(out, renderPiMessage(e["message"].(map[string]any))...)
		case "custom_message":
			out = append(out, "user: "+piText(e["content"]))
		case "branch_summary":
			if s, _ := e["summary"].(string); s != "" {
				out = append(out, "branch summary: "+s)
			}
		}
	}
	if compaction < 0 {
		for _, e := range path_ {
			emit(e)
		}
		return out
	}
	c := path_[compaction]
	out = append(out, "compaction: "+c["summary"].(string))
	kept := false
	for _, e := range path_[:compaction] {
		if e["id"] == c["firstKeptEntryId"] {
			kept = true
		}
		if kept {
			emit(e)
		}
	}
	for _, e := range path_[compaction+1:] {
		emit(e)
	}
	return out
}

func piText(content any) string {
	switch c := content.(type) {
	case string:
		return c
	case []any:
		var parts []string
		for _, b := range c {
			if m := b.(map[string]any); m["type"] == "text" {
				parts = append(parts, m["text"].(string))
			}
		}
		return strings.Join(parts, "\n")
	}
	return ""
}

func renderPiMessage(m map[string]any) []string {
	switch m["role"] {
	case "user":
		return []string{"user: " + piText(m["content"])}
	case "toolResult":
		return []string{fmt.Sprintf("result %s: %s", m["toolCallId"], piText(m["content"]))}
	case "assistant":
		var text, thinking []string
		var calls []string
		for _, b := range m["content"].([]any) {
			bl := b.(map[string]any)
			switch bl["type"] {
			case "text":
				text = append(text, bl["text"].(string))
			case "thinking":
				thinking = append(thinking, bl["thinking"].(string))
			case "toolCall":
				args, _ := json.Marshal(bl["arguments"])
				calls = append(calls, fmt.Sprintf("call %s %s %s", bl["id"], bl["name"], args))
			}
		}
		return append([]string{fmt.Sprintf("assistant: %s [thinking: %s]", strings.Join(text, "\n"), strings.Join(thinking, "\n"))}, calls...)
	}
	return []string{"other: " + fmt.Sprint(m["role"])}
}

// render is the string of a loaded event in piContext's terms; custom
// events (entries Pi does not send to the model) render as "".
func render(t *testing.T, ev sessionstore.Event) string {
	t.Helper()
	switch ev.Kind {
	case sessionstore.KindMessage:
		m, err := ev.Message()
		require.NoError(t, err)
		if ev.Role == sessionstore.RoleAssistant {
			return fmt.Sprintf("assistant: %s [thinking: %s]", m.Content, m.Reasoning)
		}
		return string(ev.Role) + ": " + m.Content
	case sessionstore.KindToolCall:
		c, err := ev.ToolCall()
		require.NoError(t, err)
		var args any
		require.NoError(t, json.Unmarshal(c.Arguments, &args))
		canon, _ := json.Marshal(args)
		return fmt.Sprintf("call %s %s %s", c.CallID, c.Name, canon)
	case sessionstore.KindToolResult:
		r, err := ev.ToolResult()
		require.NoError(t, err)
		return fmt.Sprintf("result %s: %s", r.CallID, r.Output)
	case sessionstore.KindCompaction:
		c, err := ev.Compaction()
		require.NoError(t, err)
		return "compaction: " + c.Summary.Text
	case sessionstore.KindBranchSummary:
		b, err := ev.BranchSummary()
		require.NoError(t, err)
		return "branch summary: " + b.Summary.Text
	}
	return ""
}

func openStore(t testing.TB) *sessionstore.Store {
	t.Helper()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

func TestLoadIsPisContext(t *testing.T) {
	for _, name := range []string{"tree", "compaction", "v1"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			st, err := sessionstore.Open(dir, nil)
			require.NoError(t, err)
			path := filepath.Join("testdata", name+".jsonl")
			rep, err := Import(ctx, st, []string{path}, nil)
			require.NoError(t, err)
			require.Empty(t, rep.Errors)
			require.Equal(t, 1, rep.Sessions)
			s, _, err := Read(path)
			require.NoError(t, err)

			events, err := st.Load(ctx, s.Meta.ID)
			require.NoError(t, err)
			var got []string
			for _, ev := range events {
				if r := render(t, ev); r != "" {
					got = append(got, r)
				}
			}
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

			want := piContext(t, path)
			require.NotEmpty(t, want)
			assert.Equal(t, want, got)
		})
	}
}

func TestCompactionKeepsFirstKept(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	path := filepath.Join("testdata", "compaction.jsonl")
	_, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	s, _, err := Read(path)
	require.NoError(t, err)
	id := func(entry string) uuid.UUID {
		for _, ev := range s.Events {
			if ev.ID == importer.ID("pi:5b1e9c2a-0000-4000-8000-00000000aa02:"+entry, ev.Time) {
				return ev.ID
			}
		}
		t.Fatalf("no event for entry %s", entry)
		return uuid.Nil
	}
	events, err := st.Load(ctx, s.Meta.ID)
	require.NoError(t, err)
	require.NotEmpty(t, events)
	c, err := events[0].Compaction()
	require.NoError(t, err, "Load starts at the newest compaction")
	assert.Equal(t, id("c000000c"), events[0].ID)
	assert.Equal(t, id("c000000a"), c.FirstKept)
	assert.Equal(t, id("c000000b"), c.Summarized)
	assert.Equal(t, int64(88000), c.TokensBefore)
	first, err := st.Event(ctx, s.Meta.ID, id("c0000007"))
	require.NoError(t, err)
	fc, err := first.Compaction()
	require.NoError(t, err)
	assert.Equal(t, []string{"health.go"}, fc.Summary.FilesChanged, "the details' modified files")
	assert.Equal(t, id("c000000a"), events[1].ID, "the kept entries follow the compaction")

	full, err := st.FullPath(ctx, s.Meta.ID, uuid.Nil)
	require.NoError(t, err)
	assert.Len(t, full, 16, "every entry stays on the path") // the header, 14 entries, one with a tool call
}

func TestImportMetaHeadAndReimport(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	path := filepath.Join("testdata", "tree.jsonl")
	var progress []importer.Report
	rep, err := Import(ctx, st, []string{path}, &importer.Options{Progress: func(r importer.Report) { progress = append(progress, r) }})
	require.NoError(t, err)
	require.Empty(t, rep.Errors)
	assert.Equal(t, 1, rep.Files)
	assert.Equal(t, 16, rep.Lines)
	assert.Equal(t, 1, rep.Created)
	assert.Equal(t, 18, rep.Added, "the header, 15 entries and 2 tool calls")
	require.Len(t, progress, 1)
	assert.Equal(t, 18, progress[0].Added)

	created := time.Date(2025, 6, 1, 10, 0, 0, 0, time.UTC)
	sid := importer.ID("pi:5b1e9c2a-0000-4000-8000-00000000aa01", created)
	meta, err := st.Meta(ctx, sid)
	require.NoError(t, err)
	abs, err := filepath.Abs(path)
	require.NoError(t, err)
	assert.True(t, created.Equal(meta.CreatedAt))
	assert.Equal(t, "/home/dev/project", meta.WorkingDir)
	assert.Equal(t, "gpt-5", meta.Model, "the newest model named")
	assert.Equal(t, "Rewrite a.go", meta.Name)
	assert.Equal(t, map[string]string{"source": "pi", "source_path": abs, "source_id": "5b1e9c2a-0000-4000-8000-00000000aa01"}, meta.Labels)

	head, err := st.Head(ctx, sid)
	require.NoError(t, err)
	last := time.Date(2025, 6, 1, 10, 0, 13, 0, time.UTC)
	assert.Equal(t, importer.ID("pi:5b1e9c2a-0000-4000-8000-00000000aa01:e000000f", last), head, "HEAD is Pi's leaf, the last entry")

	// The abandoned branch is kept, and the summary names its head.
	nodes, err := st.Tree(ctx, sid)
	require.NoError(t, err)
	assert.Len(t, nodes, 18)
	events, err := st.Load(ctx, sid)
	require.NoError(t, err)
	var summary *sessionstore.BranchSummaryRecord
	for _, ev := range events {
		if ev.Kind == sessionstore.KindBranchSummary {
			b, err := ev.BranchSummary()
			require.NoError(t, err)
			summary = &b
		}
	}
	require.NotNil(t, summary)
	assert.Equal(t, importer.ID("pi:5b1e9c2a-0000-4000-8000-00000000aa01:e0000009", time.Date(2025, 6, 1, 10, 0, 8, 0, time.UTC)), summary.AbandonedHead)

	// Again: nothing added.
	rep, err = Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Added)
	assert.Equal(t, 0, rep.Created)
	assert.Equal(t, 18, rep.Existing)
}

// TestChangedSource: a file whose entries got other ids (Pi rewrites a
// version 1 file with new ids when it opens it) cannot continue the
// stored session; the import reports it and goes on.
func TestChangedSource(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	_, err := Import(ctx, st, []string{filepath.Join("testdata", "v1.jsonl")}, nil)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join("testdata", "v1.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var migrated strings.Builder
	migrated.WriteString(strings.Replace(lines[0], `{"type":"session",`, `{"type":"session","version":3,`, 1) + "\n")
	parent := "null"
	for i, l := range lines[1:] {
		id := fmt.Sprintf("%08x", i+1)
		migrated.WriteString(fmt.Sprintf(`{"id":%q,"parentId":%s,`, id, parent) + l[1:] + "\n")
		parent = fmt.Sprintf("%q", id)
	}
	p := filepath.Join(t.TempDir(), "migrated.jsonl")
	require.NoError(t, os.WriteFile(p, []byte(migrated.String()), 0o600))
	rep, err := Import(ctx, st, []string{p, filepath.Join("testdata", "tree.jsonl")}, nil)
	require.NoError(t, err)
	require.Len(t, rep.Errors, 1)
	assert.ErrorIs(t, rep.Errors[0], sessionstore.ErrConflict)
	assert.Equal(t, 1, rep.Sessions, "the next file is imported")
	assert.Equal(t, 18, rep.Added)
}

func TestMalformedLines(t *testing.T) {
	path := filepath.Join("testdata", "malformed.jsonl")
	s, errs, err := Read(path)
	require.NoError(t, err)
	require.Len(t, errs, 2)
	var le *importer.LineError
	require.True(t, errors.As(errs[0], &le))
	assert.Equal(t, path, le.Path)
	assert.Equal(t, 4, le.Line)
	assert.ErrorIs(t, errs[0], importer.ErrMalformed)
	require.True(t, errors.As(errs[1], &le))
	assert.Equal(t, 5, le.Line, "the entry whose parent was on the bad line")
	assert.Contains(t, le.Error(), "attached to the entry before it")

	require.Len(t, s.Events, 5, "the header and every good line are read")
	assert.Equal(t, s.Events[2].ID, s.Events[3].ParentID, "the orphan hangs from the entry before it")

	ctx := context.Background()
	st := openStore(t)
	rep, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Len(t, rep.Errors, 2)
	assert.Equal(t, 5, rep.Added)
	events, err := st.Load(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Len(t, events, 5)
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(text), 0o600))
		return p
	}
	cases := map[string]struct {
		text   string
		fatal  bool
		errs   int
		events int
	}{
		"no header":        {text: `{"type":"message","id":"a","parentId":null,"message":{"role":"user","content":"x"}}` + "\n", fatal: true},
		"empty":            {text: "", fatal: true},
		"header only":      {text: `{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}` + "\n", events: 1},
		"second root":      {text: hdr + entryLine("a", "", "x") + entryLine("b", "", "y") + entryLine("c", "b", "z"), events: 4},
		"repeated id":      {text: hdr + entryLine("a", "", "x") + entryLine("a", "a", "y"), errs: 1, events: 2},
		"entry without id": {text: hdr + entryLine("a", "", "x") + `{"type":"message","parentId":"a","message":{"role":"user","content":"y"}}` + "\n", errs: 1, events: 2},
		"no type":          {text: hdr + entryLine("a", "", "x") + `{"id":"b"}` + "\n", errs: 1, events: 2},
		"no message":       {text: hdr + entryLine("a", "", "x") + `{"type":"message","id":"b","parentId":"a"}` + "\n", errs: 1, events: 3},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, errs, err := Read(write(strings.ReplaceAll(name, " ", "_")+".jsonl", c.text))
			if c.fatal {
				var le *importer.LineError
				require.True(t, errors.As(err, &le), "%v", err)
				assert.ErrorIs(t, err, importer.ErrMalformed)
				return
			}
			require.NoError(t, err)
			assert.Len(t, errs, c.errs)
			for _, e := range errs {
				assert.ErrorIs(t, e, importer.ErrMalformed)
			}
			assert.Len(t, s.Events, c.events)
			checkSession(t, s)
		})
	}
	_, _, err := Read(filepath.Join(dir, "missing.jsonl"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

const hdr = `{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}` + "\n"

func entryLine(id, parent, text string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	return fmt.Sprintf(`{"type":"message","id":%q,"parentId":%s,"timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":%q}}`+"\n", id, p, text)
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
		require.True(t, json.Valid(ev.Record), "record is JSON")
		seen[ev.ID] = true
		parents[ev.ParentID] = true
	}
	require.LessOrEqual(t, roots, 1)
	if s.Head != uuid.Nil {
		require.True(t, seen[s.Head])
		require.False(t, parents[s.Head], "head is a leaf")
	}
}

func TestImportDirectory(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	calls := 0
	rep, err := Import(ctx, st, []string{"testdata"}, &importer.Options{Progress: func(importer.Report) { calls++ }})
	require.NoError(t, err)
	assert.Equal(t, 4, rep.Files)
	assert.Equal(t, 4, rep.Sessions)
	assert.Equal(t, 4, calls, "progress after each session")
	assert.Len(t, rep.Errors, 2, "the malformed file's")
	list, err := st.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 4)

	_, err = Import(ctx, st, []string{filepath.Join("testdata", "nowhere")}, nil)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestGolden pins the events read from tree.jsonl: kinds, roles, the
// parent of each (as an index) and the records.
func TestGolden(t *testing.T) {
	s, errs, err := Read(filepath.Join("testdata", "tree.jsonl"))
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
	golden := filepath.Join("testdata", "tree.golden")
	if *update {
		require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	assert.Equal(t, string(want), buf.String())
}

func FuzzParseLine(f *testing.F) {
	for _, name := range []string{"tree", "compaction", "v1", "malformed"} {
		data, err := os.ReadFile(filepath.Join("testdata", name+".jsonl"))
		require.NoError(f, err)
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			f.Add(sc.Bytes())
		}
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := parseLine(line)
		if err != nil {
			return
		}
		if e.Type == "" {
			t.Fatal("parsed an entry without a type")
		}
		// An entry that parses becomes events whatever it holds.
		s, _, _, err := read(strings.NewReader(hdr+entryLine("a", "", "x")+string(line)+"\n"), "fuzz.jsonl", "fuzz.jsonl")
		if err != nil {
			t.Fatal(err)
		}
		checkSession(t, s)
	})
}

func FuzzRead(f *testing.F) {
	// Small files, so that the fuzzer's minimizing of each new input
	// stays quick: a tree, a compaction, a version 1 chain.
	f.Add([]byte(hdr + entryLine("a", "", "x") + entryLine("b", "a", "y") + entryLine("c", "a", "z")))
	f.Add([]byte(hdr + entryLine("a", "", "x") + `{"type":"compaction","id":"c","parentId":"a","summary":"s","firstKeptEntryId":"a","tokensBefore":1}` + "\n" + entryLine("d", "c", "w")))
	f.Add([]byte(`{"type":"session","id":"s"}` + "\n" + `{"type":"message","message":{"role":"user","content":"x"}}` + "\n" + `{"type":"compaction","summary":"s","firstKeptEntryIndex":1}` + "\n"))
	f.Add([]byte(hdr + `{"type":"branch_summary","id":"b","parentId":null,"fromId":"b","summary":"s"}` + "\n" + `{"type":"message","id":"m","parentId":"b","message":{"role":"assistant","content":[{"type":"toolCall","id":"1","name":"n","arguments":{}}]}}` + "\n"))
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

// genSession writes a Pi session of n message entries: turns of a user
// message, an assistant message with a tool call and its result, with a
// compaction every 500 entries.
func genSession(tb testing.TB, n int) string {
	tb.Helper()
	var buf bytes.Buffer
	buf.WriteString(`{"type":"session","version":3,"id":"bench","timestamp":"2025-01-01T00:00:00Z","cwd":"/bench"}` + "\n")
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	parent := "null"
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("%08x", i)
		ts := at.Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano)
		var body string
		switch {
		case i%500 == 499:
			body = fmt.Sprintf(`"type":"compaction","summary":"summary %d","firstKeptEntryId":"%08x","tokensBefore":1000`, i, i-10)
		case i%3 == 0:
			body = fmt.Sprintf(`"type":"message","message":{"role":"user","content":"question %d: %s"}`, i, strings.Repeat("word ", 20))
		case i%3 == 1:
			body = fmt.Sprintf(`"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"answer %d"},{"type":"toolCall","id":"call%d","name":"bash","arguments":{"command":"ls -la"}}],"model":"m","usage":{"input":10,"output":5}}`, i, i)
		default:
			body = fmt.Sprintf(`"type":"message","message":{"role":"toolResult","toolCallId":"call%d","content":[{"type":"text","text":"%s"}],"isError":false}`, i-1, strings.Repeat("out ", 30))
		}
		fmt.Fprintf(&buf, `{"id":%q,"parentId":%s,"timestamp":%q,%s}`+"\n", id, parent, ts, body)
		parent = fmt.Sprintf("%q", id)
	}
	path := filepath.Join(tb.TempDir(), "bench.jsonl")
	require.NoError(tb, os.WriteFile(path, buf.Bytes(), 0o600))
	return path
}

func BenchmarkRead(b *testing.B) {
	path := genSession(b, 3000)
	fi, err := os.Stat(path)
	require.NoError(b, err)
	events := 0
	b.ResetTimer()
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
	path := genSession(b, 3000)
	fi, err := os.Stat(path)
	require.NoError(b, err)
	ctx := context.Background()
	events := 0
	b.ResetTimer()
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
