package jsoncompact

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// standard is what encoding/json makes of src.
func standard(src []byte) ([]byte, error) {
	var buf bytes.Buffer
	err := json.Compact(&buf, src)
	return buf.Bytes(), err
}

var cases = []string{
	`null`, `true`, `false`, `0`, `-0`, `12`, `-1.5e+10`, `1E5`, `0.25`,
	`""`, `"a"`, `"\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00"`, `"é ☃ \u2028"`,
	`[]`, `{}`, `[ ]`, `{ }`, ` [1, 2 ,3 ] `, "{\n\t\"a\" : [ true , null ],\r\n \"b\":{}}",
	`{"type":"tool_result","content":"line 1\nline 2"}`,
	// Invalid.
	``, ` `, `nul`, `tru`, `01`, `-`, `1.`, `1e`, `1e+`, `.5`, `+1`, `[1,]`, `[,1]`, `{"a"}`, `{"a":}`,
	`{"a":1,}`, `{a:1}`, `{"a":1 "b":2}`, `"abc`, `"\x"`, `"\u12"`, `"\u12g4"`, "\"a\tb\"", "\"\x01\"",
	`[1] [2]`, `1 2`, `[`, `]`, `{`, `}`, `["a":1]`, `{"a",1}`, `nullx`, `[true false]`, "\"\\",
}

func TestAppendMatchesEncodingJSON(t *testing.T) {
	for _, c := range cases {
		want, wantErr := standard([]byte(c))
		got, err := Append([]byte("prefix:"), []byte(c))
		if wantErr != nil {
			assert.Error(t, err, "%q", c)
			assert.Equal(t, wantErr.Error(), err.Error(), "%q: the standard library's message", c)
			assert.Equal(t, "prefix:", string(got), "%q: dst unchanged on error", c)
			continue
		}
		require.NoError(t, err, "%q", c)
		assert.Equal(t, "prefix:"+string(want), string(got), "%q", c)
		_, ferr := appendValue(nil, []byte(c))
		assert.NoError(t, ferr, "%q: the fast path accepts it", c)
	}
}

func TestDepthLimit(t *testing.T) {
	for _, depth := range []int{maxDepth, maxDepth + 1} {
		for _, inner := range []string{"", "1"} {
			src := []byte(strings.Repeat("[", depth) + inner + strings.Repeat("]", depth))
			_, wantErr := standard(src)
			_, err := appendValue(nil, src)
			assert.Equal(t, wantErr == nil, err == nil, "depth %d, inner %q", depth, inner)
		}
	}
	_, err := appendValue(nil, []byte(strings.Repeat("[", maxDepth+1)+strings.Repeat("]", maxDepth+1)))
	assert.Error(t, err, "one past the limit")
}

// FuzzAppend checks Append's fast path against encoding/json on any
// input: the same verdict, and the same bytes when valid.
func FuzzAppend(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		want, wantErr := standard(src)
		got, err := appendValue(nil, src)
		if wantErr != nil {
			if err == nil {
				t.Fatalf("%q: accepted, encoding/json says %v", src, wantErr)
			}
			return
		}
		if err != nil {
			t.Fatalf("%q: rejected, encoding/json accepts it", src)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%q: got %q, want %q", src, got, want)
		}
	})
}

func BenchmarkCompact(b *testing.B) {
	rec, err := json.Marshal(map[string]any{"type": "tool_result", "call_id": "c1",
		"output": strings.Repeat("ok  \tgithub.com/example/pkg\t0.123s\n--- PASS: TestSomething (0.00s)\n", 1000)})
	require.NoError(b, err)
	for _, impl := range []struct {
		name string
		fn   func([]byte) ([]byte, error)
	}{
		{"encoding-json", standard},
		{"jsoncompact", func(src []byte) ([]byte, error) { return Append(nil, src) }},
	} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(rec)))
			for b.Loop() {
				if _, err := impl.fn(rec); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
