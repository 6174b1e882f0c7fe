package search

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// unquoteRef is what RecordText appended for a JSON string's content s
// holding escapes before appendUnquoted: strconv.Unquote's result, else
// appendUnescaped's.
func unquoteRef(dst, s []byte) []byte {
	if u, err := strconv.Unquote(`"` + string(s) + `"`); err == nil {
		return append(dst, u...)
	}
	return appendUnescaped(dst, s)
}

// unquoteSeeds are JSON strings' contents with every kind of escape Go
// and JSON know, and the malformed ones.
var unquoteSeeds = []string{
	`a\nb`, `tab\there`, `\"quoted\"`, `back\\slash`, `\/path\/`, `\u00e9t\u00e9`,
	`\ud83d\ude00 surrogates`, `\ud800 lone`, `\x41\x7f\xff`, `\101\377\400`, `\U0001F600`,
	`\U00110000`, `\a\b\f\r\v`, `\'`, `\q unknown`, `trailing \`, `\u12`, `\u12G4`, `\08`,
	"raw\nnewline \\n", "bad utf-8 \xff\xfe \\n", "é \\t ü", `\`, ``, `\\`, `\"`,
}

// TestAppendUnquoted: the same bytes as strconv.Unquote (or, where it
// fails, appendUnescaped) for every seed, after a prefix already in dst.
func TestAppendUnquoted(t *testing.T) {
	for _, s := range unquoteSeeds {
		want := unquoteRef([]byte("pre:"), []byte(s))
		got, ok := appendUnquoted([]byte("pre:"), []byte(s))
		if !ok {
			assert.Equal(t, "pre:", string(got), "%q: dst as it was", s)
			got = appendUnescaped(got, []byte(s))
		}
		assert.Equal(t, string(want), string(got), "%q", s)
		_, err := strconv.Unquote(`"` + s + `"`)
		assert.Equal(t, err == nil, ok, "%q: fails where Unquote does", s)
	}
}

// FuzzAppendUnquoted: appendUnquoted agrees with strconv.Unquote on any
// bytes without an unescaped quote (what a JSON string's content is).
func FuzzAppendUnquoted(f *testing.F) {
	for _, s := range unquoteSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		if end, _ := stringEnd(append(append([]byte{'"'}, s...), '"'), 0); end != len(s)+2 {
			return // an unescaped quote inside: not a string's content
		}
		want := unquoteRef(nil, s)
		got, ok := appendUnquoted(nil, s)
		if !ok {
			if len(got) != 0 {
				t.Fatalf("%q: dst changed on failure: %q", s, got)
			}
			got = appendUnescaped(got, s)
		}
		if string(got) != string(want) {
			t.Fatalf("%q: %q, Unquote gives %q", s, got, want)
		}
		if _, err := strconv.Unquote(`"` + string(s) + `"`); (err == nil) != ok {
			t.Fatalf("%q: ok %v, Unquote's error %v", s, ok, err)
		}
	})
}

// fieldsRef is what SnippetAt made of a text's cut before appendFields.
func fieldsRef(s string) string { return strings.Join(strings.Fields(s), " ") }

var fieldsSeeds = []string{
	"", " ", "a", "  a  b\t\tc\n", "x\u00a0y\u0085z", "\u2003em\u2003space ", "bad \xff\xfe utf-8\xe2\x80",
	"\v\f\r mixed \r\n", "é ü  ß", "one", "trailing ", " leading",
}

// TestAppendFields: the same text as strings.Join(strings.Fields(s), " ")
// for every seed, after what the builder holds already.
func TestAppendFields(t *testing.T) {
	for _, s := range fieldsSeeds {
		var b strings.Builder
		b.WriteString("…")
		appendFields(&b, s)
		assert.Equal(t, "…"+fieldsRef(s), b.String(), "%q", s)
	}
}

// FuzzAppendFields: appendFields agrees with strings.Fields and Join on
// any text.
func FuzzAppendFields(f *testing.F) {
	for _, s := range fieldsSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var b strings.Builder
		appendFields(&b, s)
		if got, want := b.String(), fieldsRef(s); got != want {
			t.Fatalf("%q: %q, Fields and Join give %q", s, got, want)
		}
	})
}
