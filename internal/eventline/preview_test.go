package eventline

import (
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPreviewOf(t *testing.T) {
	long := strings.Repeat("é", 60) // 120 bytes: the cut falls inside a rune
	cases := []struct {
		name string
		kind KindCode
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
			p := PreviewOf(tc.kind, []byte(tc.rec))
			assert.Equal(t, tc.want, p.String())
			checkPreview(t, p.String())
		})
	}
}

// checkPreview checks the promises of a preview.
func checkPreview(t testing.TB, s string) {
	t.Helper()
	assert.LessOrEqual(t, len(s), PreviewMax)
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
		p := PreviewOf(KindCode(k%uint8(kindEnd)), rec)
		checkPreview(t, p.String())
		e := Entry{Header: Header{ID: uuid.New(), Kind: 1}, Size: 1, Preview: p, Loc: Location{Length: 1}}
		line := AppendIndex(nil, &e)
		got, err := DecodeIndex(line[:len(line)-1])
		require.NoError(t, err)
		assert.Equal(t, e, got)
	})
}

func TestPreviewIndexLine(t *testing.T) {
	e := Entry{Header: Header{ID: uuid.New(), Kind: 1, Role: 1}, Size: 9, Loc: Location{Chunk: 2, Offset: 10, Length: 300}}
	t.Run("without a preview, as older builds wrote", func(t *testing.T) {
		line := AppendIndex(nil, &e)
		assert.NotContains(t, string(line), "preview")
		got, err := DecodeIndex(line[:len(line)-1])
		require.NoError(t, err)
		assert.Equal(t, e, got)
		assert.Empty(t, got.Preview.String())
	})
	e.Preview = PreviewOf(1, []byte(`{"content":"quote \" backslash \\ é"}`))
	line := AppendIndex(nil, &e)
	t.Run("with a preview", func(t *testing.T) {
		assert.Contains(t, string(line), `,"preview":"quote \" backslash \\ é","location":`)
		var v map[string]any
		require.NoError(t, json.Unmarshal(line, &v), "the line is JSON")
		assert.Equal(t, `quote " backslash \ é`, v["preview"])
		got, err := DecodeIndex(line[:len(line)-1])
		require.NoError(t, err)
		assert.Equal(t, e, got)
		assert.Equal(t, `quote " backslash \ é`, got.Preview.String())
	})
	body := string(line[:len(line)-18]) + "}"
	bad := map[string]string{
		"empty preview":     strings.Replace(body, `"preview":"quote`, `"preview":"`+`","x":"`, 1),
		"escaped newline":   strings.Replace(body, `quote`, `quote\n`, 1),
		"unicode escape":    strings.Replace(body, `quote`, `\u0071uote`, 1),
		"raw control byte":  strings.Replace(body, `quote`, "quo\x01te", 1),
		"invalid UTF-8":     strings.Replace(body, `quote`, "quo\xffte", 1),
		"too long":          strings.Replace(body, `quote`, strings.Repeat("q", PreviewMax), 1),
		"unterminated":      body[:strings.Index(body, `quote`)+3],
		"after location":    strings.Replace(strings.Replace(body, `,"preview":"quote \" backslash \\ é"`, "", 1), `}}`, `},"preview":"x"}`, 1),
		"before the digest": strings.Replace(body, `,"size":9`, `,"preview":"x","size":9`, 1),
	}
	for name, obj := range bad {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, body, obj)
			sealed := jsonl.Seal(nil, []byte(obj))
			_, err := DecodeIndex(sealed[:len(sealed)-1])
			assert.Error(t, err)
		})
	}
}

// TestSealedPreviewIndexLine: a sealed Preview travels through an index
// line as base64 in "sealed_preview", has no text, and a damaged or
// overlong value is refused.
func TestSealedPreviewIndexLine(t *testing.T) {
	raw := []byte("\x00\x00\x00\x01 sealed bytes \xff\xfe\\\"")
	pv, ok := SealedPreview(raw)
	require.True(t, ok)
	assert.True(t, pv.Sealed())
	assert.Empty(t, pv.String(), "a sealed preview has no text")
	assert.Equal(t, raw, pv.SealedBytes())
	e := Entry{Header: Header{ID: uuid.New(), Kind: 1, Role: 1}, Size: 9, Preview: pv, Loc: Location{Chunk: 2, Offset: 10, Length: 300}}
	line := AppendIndex(nil, &e)
	var v map[string]any
	require.NoError(t, json.Unmarshal(line, &v), "the line is JSON")
	assert.Equal(t, base64.StdEncoding.EncodeToString(raw), v["sealed_preview"])
	assert.NotContains(t, v, "preview")
	got, err := DecodeIndex(line[:len(line)-1])
	require.NoError(t, err)
	assert.Equal(t, e, got)

	full, ok := SealedPreview(make([]byte, PreviewMax))
	require.True(t, ok)
	e.Preview = full
	fullLine := AppendIndex(nil, &e)
	got, err = DecodeIndex(fullLine[:len(fullLine)-1])
	require.NoError(t, err, "the longest sealed preview reads back")
	assert.Equal(t, full, got.Preview)
	_, ok = SealedPreview(make([]byte, PreviewMax+1))
	assert.False(t, ok)
	_, ok = SealedPreview(nil)
	assert.False(t, ok)
	none := SealedNone()
	assert.True(t, none.Sealed())
	assert.Empty(t, none.String())
	e.Preview = none
	noneLine := AppendIndex(nil, &e)
	assert.NotContains(t, string(noneLine), "preview", "a sealed preview without text has no member")

	b64 := base64.StdEncoding.EncodeToString(raw)
	body := string(line[:len(line)-18]) + "}"
	bad := map[string]string{
		"empty":        strings.Replace(body, b64, "", 1),
		"not base64":   strings.Replace(body, b64, "!!!!", 1),
		"unpadded":     strings.Replace(body, b64, strings.TrimRight(b64, "="), 1),
		"too long":     strings.Replace(body, b64, base64.StdEncoding.EncodeToString(make([]byte, PreviewMax+1)), 1),
		"unterminated": body[:strings.Index(body, b64)+4],
		"both members": strings.Replace(body, `,"sealed_preview"`, `,"preview":"x","sealed_preview"`, 1),
		"a CR inside":  strings.Replace(body, b64, b64[:4]+"\r"+b64[4:], 1),
		"a LF inside":  strings.Replace(body, b64, b64[:4]+"\n"+b64[4:], 1),
	}
	for name, obj := range bad {
		t.Run(name, func(t *testing.T) {
			require.NotEqual(t, body, obj)
			sealed := jsonl.Seal(nil, []byte(obj))
			_, err := DecodeIndex(sealed[:len(sealed)-1])
			assert.Error(t, err)
		})
	}
}

// TestPreviewCut: a preview cut to n bytes ends at a rune boundary,
// without a trailing space; a shorter one and a sealed one are kept.
func TestPreviewCut(t *testing.T) {
	var w previewBuilder
	w.text([]byte("ab cd\u00e9f  gh"))
	p := w.p
	require.Equal(t, "ab cd\u00e9f gh", p.String())
	for _, c := range []struct {
		n    int
		want string
	}{
		{100, "ab cd\u00e9f gh"}, {11, "ab cd\u00e9f gh"}, {10, "ab cd\u00e9f g"}, {9, "ab cd\u00e9f"}, {8, "ab cd\u00e9f"},
		{7, "ab cd\u00e9"}, {6, "ab cd"}, {5, "ab cd"}, {3, "ab"}, {2, "ab"}, {0, ""},
	} {
		got := p.Cut(c.n)
		assert.Equal(t, c.want, got.String(), "cut to %d", c.n)
		assert.LessOrEqual(t, len(got.String()), c.n)
		assert.True(t, utf8.ValidString(got.String()))
	}
	sp, ok := SealedPreview([]byte("0123456789"))
	require.True(t, ok)
	assert.Equal(t, sp, sp.Cut(3))
}

// BenchmarkPreviewOf measures the preview of a 64 KiB tool result, made
// on every append (before the session's mutex) and for every line an
// index rebuild reads: one pass over the record, to the is_error after
// the output.
func BenchmarkPreviewOf(b *testing.B) {
	out := strings.Repeat("ok  \tgithub.com/example/module/pkg\t0.012s\n", 64<<10/40)
	rec, err := json.Marshal(struct {
		CallID  string `json:"call_id"`
		Output  string `json:"output"`
		IsError bool   `json:"is_error"`
	}{"c1", out, true})
	if err != nil {
		b.Fatal(err)
	}
	k := KindToolResult
	b.SetBytes(int64(len(rec)))
	for b.Loop() {
		if p := PreviewOf(k, rec); p.n == 0 {
			b.Fatal("empty preview")
		}
	}
}

// hasPointers reports whether values of t hold a pointer the garbage
// collector would follow.
func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return t.Len() > 0 && hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Pointer, reflect.UnsafePointer, reflect.String, reflect.Slice, reflect.Map,
		reflect.Chan, reflect.Func, reflect.Interface:
		return true
	}
	return false
}

// TestReviewEntryHoldsNoPointers: an index entry, preview included, holds
// no pointer, so the garbage collector does not scan a session's index.
func TestReviewEntryHoldsNoPointers(t *testing.T) {
	assert.False(t, hasPointers(reflect.TypeFor[Entry]()))
	assert.True(t, hasPointers(reflect.TypeFor[struct {
		a int
		s string
	}]()), "the check sees a string")
}

// FuzzReviewPreviewMember: the preview member of an index line is JSON a
// standard decoder reads as the preview's text, and decodeIndexLine reads
// back the entry, for a preview of any text.
func FuzzReviewPreviewMember(f *testing.F) {
	for _, s := range []string{"a", `","location":{"chunk":9`, "\\\"\\", "\u2028\u2029x", "\x7f\u0085\u009f", "\xff\xfe", "é" + strings.Repeat("\u00e9", 50), `\u0000`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var w previewBuilder
		w.text([]byte(s))
		p := w.p
		checkPreview(t, p.String())
		e := Entry{Header: Header{ID: uuid.New(), Kind: 1}, Size: 1, Preview: p, Loc: Location{Length: 1}}
		line := AppendIndex(nil, &e)
		var v struct {
			Preview *string `json:"preview"`
		}
		require.NoError(t, json.Unmarshal(line, &v), "%q", line)
		if p.n == 0 {
			assert.Nil(t, v.Preview, "no member for an empty preview")
		} else {
			require.NotNil(t, v.Preview)
			assert.Equal(t, p.String(), *v.Preview)
		}
		got, err := DecodeIndex(line[:len(line)-1])
		require.NoError(t, err)
		assert.Equal(t, e, got)
	})
}

// TestSealed: the form of an encrypted session's stored record is
// recognized, and has no preview; other strings and objects are not.
func TestSealed(t *testing.T) {
	env := `"` + strings.Repeat("AbC+/09z", 6) + `"`
	for _, c := range []struct {
		rec  string
		want bool
	}{
		{env, true},
		{`"` + strings.Repeat("A", 42) + `=="`, true},
		{`"` + strings.Repeat("A", 40) + `"`, false},             // too short for a sealed record
		{`"` + strings.Repeat("A", 45) + `"`, false},             // not a multiple of 4
		{`"` + strings.Repeat("A", 43) + ` "`, false},            // a space
		{`"` + strings.Repeat("A", 42) + `\n"`, false},           // an escape
		{`{"content":"` + strings.Repeat("A", 48) + `"}`, false}, // an object
		{`"hello world, a custom record's text that is long enough"`, false},
	} {
		assert.Equal(t, c.want, Sealed([]byte(c.rec)), c.rec)
	}
	sealed, plain := PreviewOf(KindCustom, []byte(env)), PreviewOf(KindCustom, []byte(`"plain text"`))
	assert.Empty(t, sealed.String(), "no preview for a sealed record")
	assert.Equal(t, "plain text", plain.String())
}
