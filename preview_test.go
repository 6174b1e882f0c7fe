package sessionstore

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

func codeOf(t testing.TB, k Kind) kindCode {
	c, ok := kindCodeOf([]byte(k))
	require.True(t, ok, k)
	return c
}

func TestPreviewOf(t *testing.T) {
	long := strings.Repeat("é", 60) // 120 bytes: the cut falls inside a rune
	cases := []struct {
		name string
		kind Kind
		rec  string
		want string
	}{
		{"message content", KindMessage, `{"content":"Hello, world"}`, "Hello, world"},
		{"whitespace collapsed", KindMessage, `{"content":"  a \n\n\t b  \u2003c  "}`, "a b c"},
		{"escapes decoded", KindMessage, `{"content":"say \"hi\" \\ caf\u00e9 \ud83d\ude00"}`, `say "hi" \ café 😀`},
		{"lone surrogate", KindMessage, `{"content":"a\ud800b"}`, "a\uFFFDb"},
		{"control characters are spaces", KindMessage, `{"content":"a\u0001\u0007b"}`, "a b"},
		{"cut at a rune boundary", KindMessage, `{"content":"` + long + `"}`, strings.Repeat("é", 40)},
		{"reasoning when content is empty", KindMessage, `{"content":"","reasoning":"think first"}`, "think first"},
		{"reasoning when content is blank", KindMessage, `{"content":"  ","reasoning":"r"}`, "r"},
		{"a message's first tool call", KindMessage, `{"content":"","tool_calls":[{"call_id":"c","name":"read_file","arguments":{"path":"a.go"}},{"name":"x"}]}`, `read_file {"path":"a.go"}`},
		{"members in another order", KindMessage, `{"model":"m","usage":{"input_tokens":3},"content":"late"}`, "late"},
		{"spaced JSON", KindMessage, `{ "content" : "spaced" }`, "spaced"},
		{"escaped key", KindMessage, `{"cont\u0065nt":"escaped key"}`, "escaped key"},
		{"empty message", KindMessage, `{"content":""}`, ""},
		{"tool call", KindToolCall, `{"call_id":"c1","name":"bash","arguments":{"cmd":"ls -la"}}`, `bash {"cmd":"ls -la"}`},
		{"tool call without arguments", KindToolCall, `{"call_id":"c1","name":"ls"}`, "ls"},
		{"tool call with empty arguments", KindToolCall, `{"call_id":"c1","name":"ls","arguments":{}}`, "ls"},
		{"tool call, string arguments", KindToolCall, `{"name":"echo","arguments":"hi there"}`, "echo hi there"},
		{"tool result", KindToolResult, `{"call_id":"c1","output":"ok\nPASS"}`, "ok PASS"},
		{"tool error", KindToolResult, `{"call_id":"c1","output":"no such file","is_error":true}`, "error: no such file"},
		{"compaction text", KindCompaction, `{"summary":{"goals":["g"],"text":"the summary"},"summarized":"x"}`, "the summary"},
		{"compaction first goal", KindCompaction, `{"summary":{"goals":["fix the bug","then"]},"summarized":"x"}`, "fix the bug"},
		{"branch summary", KindBranchSummary, `{"summary":{"text":"tried A"},"abandoned_head":"x"}`, "tried A"},
		{"empty compaction", KindCompaction, `{"summary":{},"summarized":"x"}`, ""},
		{"custom object", KindCustom, `{"type":"model_change","model":"m"}`, `{"type":"model_change","model":"m"}`},
		{"custom string", KindCustom, `"just text"`, "just text"},
		{"custom null", KindCustom, `null`, "null"},
		{"message that is not an object", KindMessage, `"a string message"`, "a string message"},
		{"malformed", KindMessage, `{"content":"unterminated`, ""},
		{"truncated object", KindToolResult, `{"output":`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := previewOf(codeOf(t, tc.kind), []byte(tc.rec))
			assert.Equal(t, tc.want, p.String())
			checkPreview(t, p.String())
		})
	}
}

// checkPreview checks the promises of a preview.
func checkPreview(t testing.TB, s string) {
	t.Helper()
	assert.LessOrEqual(t, len(s), previewMax)
	assert.True(t, utf8.ValidString(s), "%q is valid UTF-8", s)
	assert.Equal(t, strings.TrimSpace(s), s, "no leading or trailing space")
	assert.NotContains(t, s, "  ")
	for _, r := range s {
		assert.False(t, r < 0x20 || r == 0x7f, "%q holds a control character", s)
	}
}

// FuzzPreviewOf: any record, of any kind, gives a preview that keeps the
// promises (and never panics), and the preview survives an index line.
func FuzzPreviewOf(f *testing.F) {
	f.Add(uint8(1), []byte(`{"content":"hello  world"}`))
	f.Add(uint8(2), []byte(`{"name":"x","arguments":{"a":[1,{"b":"}"}]}}`))
	f.Add(uint8(3), []byte(`{"output":"\"\\","is_error":true}`))
	f.Add(uint8(4), []byte(`{"summary":{"goals":["\ud83d\ude00"]}}`))
	f.Add(uint8(6), []byte("\"\xff\xfe\""))
	f.Add(uint8(1), []byte(`{"content":"\u`))
	f.Fuzz(func(t *testing.T, k uint8, rec []byte) {
		p := previewOf(kindCode(k%uint8(len(kinds))), rec)
		checkPreview(t, p.String())
		e := entry{header: header{ID: uuid.New(), Kind: 1}, Size: 1, Preview: p, Loc: location{Length: 1}}
		line := encodeIndexLine(nil, &e)
		got, err := decodeIndexLine(line[:len(line)-1])
		require.NoError(t, err)
		assert.Equal(t, e, got)
	})
}

func TestPreviewIndexLine(t *testing.T) {
	e := entry{header: header{ID: uuid.New(), Kind: 1, Role: 1}, Size: 9, Loc: location{Chunk: 2, Offset: 10, Length: 300}}
	t.Run("without a preview, as older builds wrote", func(t *testing.T) {
		line := encodeIndexLine(nil, &e)
		assert.NotContains(t, string(line), "preview")
		got, err := decodeIndexLine(line[:len(line)-1])
		require.NoError(t, err)
		assert.Equal(t, e, got)
		assert.Empty(t, got.node().Preview)
	})
	e.Preview = previewOf(1, []byte(`{"content":"quote \" backslash \\ é"}`))
	line := encodeIndexLine(nil, &e)
	t.Run("with a preview", func(t *testing.T) {
		assert.Contains(t, string(line), `,"preview":"quote \" backslash \\ é","location":`)
		var v map[string]any
		require.NoError(t, json.Unmarshal(line, &v), "the line is JSON")
		assert.Equal(t, `quote " backslash \ é`, v["preview"])
		got, err := decodeIndexLine(line[:len(line)-1])
		require.NoError(t, err)
		assert.Equal(t, e, got)
		assert.Equal(t, `quote " backslash \ é`, got.node().Preview)
	})
	body := string(line[:len(line)-18]) + "}"
	bad := map[string]string{
		"empty preview":     strings.Replace(body, `"preview":"quote`, `"preview":"`+`","x":"`, 1),
		"escaped newline":   strings.Replace(body, `quote`, `quote\n`, 1),
		"unicode escape":    strings.Replace(body, `quote`, `\u0071uote`, 1),
		"raw control byte":  strings.Replace(body, `quote`, "quo\x01te", 1),
		"invalid UTF-8":     strings.Replace(body, `quote`, "quo\xffte", 1),
		"too long":          strings.Replace(body, `quote`, strings.Repeat("q", previewMax), 1),
		"unterminated":      body[:strings.Index(body, `quote`)+3],
		"after location":    strings.Replace(strings.Replace(body, `,"preview":"quote \" backslash \\ é"`, "", 1), `}}`, `},"preview":"x"}`, 1),
		"before the digest": strings.Replace(body, `,"size":9`, `,"preview":"x","size":9`, 1),
	}
	for name, obj := range bad {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, body, obj)
			sealed := jsonl.Seal(nil, []byte(obj))
			_, err := decodeIndexLine(sealed[:len(sealed)-1])
			assert.Error(t, err)
		})
	}
}

// TestTreePreviews: Tree and Children carry each event's preview, from
// the in-memory index, after a reopen (index.jsonl), after sealing (the
// embedded index), and after the index is rebuilt from the chunks, where
// a blob's preview is empty (preview.go).
func TestTreePreviews(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{BlobThreshold: 200, ChunkSize: 1500}
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	id := meta.ID
	big := strings.Repeat("x", 300)
	evs := []Event{
		UserText("Please   read\nthe file"),
		AssistantMessage(Message{ToolCalls: []ToolCall{{CallID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"main.go"}`)}}}),
		ToolCallEvent(ToolCall{CallID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"main.go"}`)}),
		ToolResultEvent(ToolResult{CallID: "c1", Output: "open main.go: no such file", IsError: true}),
		ToolResultEvent(ToolResult{CallID: "c2", Output: big}), // a blob
		NewEvent(KindCustom, RoleNone, map[string]string{"type": "note"}),
	}
	want := []string{"Please read the file", `read_file {"path":"main.go"}`, `read_file {"path":"main.go"}`, "error: open main.go: no such file", big[:previewMax], `{"type":"note"}`}
	for _, ev := range evs {
		_, err := s.Append(ctx, id, ev)
		require.NoError(t, err)
	}
	head, err := s.Head(ctx, id)
	require.NoError(t, err)
	c, err := s.Compact(ctx, id, Compaction{Head: head, Summary: Summary{Text: "Read   main.go; it is missing."}})
	require.NoError(t, err)
	_, err = s.AppendBranchSummary(ctx, id, c.ParentID, BranchSummaryRecord{Summary: Summary{Goals: []string{"find main.go"}}})
	require.NoError(t, err)
	want = append(want, "Read main.go; it is missing.", "find main.go")

	previews := func(s *Store) []string {
		t.Helper()
		nodes, err := s.Tree(ctx, id)
		require.NoError(t, err)
		out := make([]string, len(nodes))
		for i, n := range nodes {
			out[i] = n.Preview
			if i > 0 {
				kids, err := s.Children(ctx, id, n.ParentID)
				require.NoError(t, err)
				for _, k := range kids {
					if k.ID == n.ID {
						assert.Equal(t, n.Preview, k.Preview, "Children")
					}
				}
			}
		}
		return out
	}
	assert.Equal(t, want, previews(s), "in memory")
	require.NoError(t, s.Close())
	n, err := listChunks(m, sessionPath(id, chunksDir))
	require.NoError(t, err)
	require.Greater(t, len(n), 1, "some chunks are sealed")

	s = openMem(t, m, o)
	assert.Equal(t, want, previews(s), "reopened: index lines")
	require.NoError(t, s.Close())

	// Rebuilt from the chunk lines: no index.jsonl, and sealed chunks'
	// embedded indexes hold the same previews as before.
	require.NoError(t, m.Remove(sessionPath(id, indexName)))
	s = openMem(t, m, o)
	got := previews(s)
	require.NoError(t, s.Close())
	for i := range want {
		if i == 4 && got[i] == "" {
			continue // the blob, if its entry was rebuilt from its line
		}
		assert.Equal(t, want[i], got[i], "rebuilt, event %d", i)
	}
}

func TestForkTreePreviews(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	a, err := s.Append(ctx, id, UserText("in the parent"))
	require.NoError(t, err)
	f, err := s.Fork(ctx, id, a.ID)
	require.NoError(t, err)
	_, err = s.Append(ctx, f.ID, AssistantText("in the fork"))
	require.NoError(t, err)
	nodes, err := s.Tree(ctx, f.ID)
	require.NoError(t, err)
	require.Len(t, nodes, 2)
	assert.Equal(t, "in the parent", nodes[0].Preview)
	assert.Equal(t, "in the fork", nodes[1].Preview)
}

// TestOldIndexWithoutPreviews: a store whose index lines predate previews
// (testdata/format1) opens, and its nodes have empty previews until the
// index is rebuilt from the chunks.
func TestOldIndexWithoutPreviews(t *testing.T) {
	m := memFixture(t, "format1")
	s := openMem(t, m, Options{Compression: CompressionNone})
	nodes, err := s.Tree(context.Background(), goldenSession)
	require.NoError(t, err)
	require.NotEmpty(t, nodes)
	for _, n := range nodes {
		assert.Empty(t, n.Preview)
	}
	require.NoError(t, s.Close())
	require.NoError(t, m.Remove(sessionPath(goldenSession, indexName)))
	s = openMem(t, m, Options{Compression: CompressionNone})
	defer s.Close()
	nodes, err = s.Tree(context.Background(), goldenSession)
	require.NoError(t, err)
	assert.Equal(t, "Try approach A.", nodes[0].Preview, "rebuilt from the chunk lines")
}

// BenchmarkPreviewOf measures the preview of a 64 KiB tool result, made
// on every append (before the session's mutex) and for every line an
// index rebuild reads: one pass over the record, to the is_error after
// the output.
func BenchmarkPreviewOf(b *testing.B) {
	out := strings.Repeat("ok  \tgithub.com/example/module/pkg\t0.012s\n", 64<<10/40)
	rec, err := json.Marshal(ToolResult{CallID: "c1", Output: out, IsError: true})
	if err != nil {
		b.Fatal(err)
	}
	k := codeOf(b, KindToolResult)
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if p := previewOf(k, rec); p.n == 0 {
			b.Fatal("empty preview")
		}
	}
}
