package search

import (
	"errors"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMatchAgainstRegexp: Match agrees with a regular expression of the
// term's words as whole words, case-insensitive, on random texts.
func TestMatchAgainstRegexp(t *testing.T) {
	words := []string{"alpha", "Beta", "gamma", "x1", "é", "delta"}
	seps := []string{" ", "_", ".", "\n", "--", "/"}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		var b strings.Builder
		for i := range rng.IntN(10) {
			if i > 0 {
				b.WriteString(seps[rng.IntN(len(seps))])
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		text := b.String()
		w1, w2 := words[rng.IntN(len(words))], words[rng.IntN(len(words))]
		terms, err := Parse(`"` + w1 + " " + w2 + `"`)
		require.NoError(t, err)
		re := regexp.MustCompile(`(?i)(^|[^\pL\pN])` + regexp.QuoteMeta(w1) + `[^\pL\pN]+` + regexp.QuoteMeta(w2) + `($|[^\pL\pN])`)
		// overlapping matches: the regexp may miss "a a a" style repeats; check both ways on each start
		want := false
		for i := 0; i <= len(text); i++ {
			if loc := re.FindStringIndex(text[i:]); loc != nil && (i == 0 || loc[0] > 0 || !isWordByte(text[i-1])) {
				want = true
				break
			}
		}
		assert.Equal(t, want, Analyse(text).Match(terms), "%q in %q", w1+" "+w2, text)
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

func TestRecordText(t *testing.T) {
	got := string(RecordText(nil, []byte(`{"content":"Hello \"World\"","n":3,"parts":[{"text":"a\/b \u00e9"}],"key":"v"}`)))
	assert.Equal(t, "Hello \"World\"\na/b é\nv\n", got)
	assert.Equal(t, "", string(RecordText(nil, []byte(`{"unterminated`))))
}

func TestParseRefusals(t *testing.T) {
	for _, q := range []string{"", " ", "...", `"a`, strings.Repeat("a", MaxQueryBytes+1), "\xff"} {
		_, err := Parse(q)
		assert.True(t, errors.Is(err, ErrInvalidQuery), "%.20q: %v", q, err)
	}
	terms, err := Parse(`Foo "bar baz" a.go`)
	require.NoError(t, err)
	assert.Equal(t, []Term{{[]string{"foo"}}, {[]string{"bar", "baz"}}, {[]string{"a", "go"}}}, terms)
}

// TestSegmentRoundTrip: an index saved and decoded holds the same
// candidates, and every damaged form of the bytes is ErrDamaged.
func TestSegmentRoundTrip(t *testing.T) {
	x := New()
	texts := []string{"alpha beta", "beta gamma beta", "gamma", "alpha alpha gamma"}
	for i, text := range texts {
		sl, ok := x.Slot([16]byte{byte(i % 2)})
		if !ok {
			sl = x.NewSlot([16]byte{byte(i % 2)}, false)
		}
		x.Add(sl, DocInfo{Event: [16]byte{1, byte(i)}, Time: int64(i) * 1000, Kind: 1, Role: 2}, Analyse(text))
	}
	b := x.encodeSegment(7, 7, []uint32{0, 1}, []uint64{0, 0}, []uint32{0, 1, 2, 3})
	s, err := DecodeSegment(b)
	require.NoError(t, err)
	y := New()
	require.NoError(t, y.apply(s))
	assert.Equal(t, x.Docs, y.Docs)
	for _, q := range [][]string{{"alpha"}, {"beta"}, {"gamma", "alpha"}, {"delta"}} {
		assert.Equal(t, x.Candidates(q), y.Candidates(q), "%v", q)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x21
		_, err := DecodeSegment(c)
		assert.ErrorIs(t, err, ErrDamaged, "byte %d flipped", i)
		_, err = DecodeSegment(b[:i])
		assert.ErrorIs(t, err, ErrDamaged, "cut at %d", i)
	}
}

// FuzzDecodeSegment: any bytes decode to a segment or ErrDamaged, never a
// panic; one that decodes encodes back to an index with its documents.
func FuzzDecodeSegment(f *testing.F) {
	x := New()
	sl := x.NewSlot([16]byte{9}, false)
	x.Add(sl, DocInfo{Event: [16]byte{3}}, Analyse("hello fuzz world hello"))
	f.Add(x.encodeSegment(1, 1, []uint32{sl}, []uint64{0}, []uint32{0}))
	f.Add([]byte(segMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := DecodeSegment(b)
		if err != nil {
			require.ErrorIs(t, err, ErrDamaged)
			return
		}
		y := New()
		if err := y.apply(s); err != nil {
			require.ErrorIs(t, err, ErrDamaged)
			return
		}
		require.Len(t, y.Docs, len(s.docs))
	})
}

// TestRecordTextData: a long string value without whitespace is data, left
// out; one as long with a space, or an escaped newline, is text.
func TestRecordTextData(t *testing.T) {
	data := strings.Repeat("QUJD", MaxWordless/4)
	assert.Equal(t, "x\n", string(RecordText(nil, []byte(`{"img":"`+data+`","t":"x"}`))))
	spaced := data[:100] + " " + data[100:]
	assert.Equal(t, spaced+"\n", string(RecordText(nil, []byte(`{"t":"`+spaced+`"}`))))
	escaped := data[:100] + `\n` + data[100:]
	assert.Equal(t, data[:100]+"\n"+data[100:]+"\n", string(RecordText(nil, []byte(`{"t":"`+escaped+`"}`))))
	short := data[:MaxWordless-1]
	assert.Equal(t, short+"\n", string(RecordText(nil, []byte(`{"t":"`+short+`"}`))))
}

// TestSegmentsSparseAndInTurn: a segment of some documents only (another
// session's between them left out) decodes to those documents and their
// postings, and a second segment applied after it continues it: the
// decoded index's candidates are the original's for that session's
// documents, renumbered; Compact changes no candidate.
func TestSegmentsSparseAndInTurn(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"alpha", "beta", "gamma", "delta", "eps"}
	text := func() string {
		var b strings.Builder
		for range 1 + rng.IntN(6) {
			b.WriteString(words[rng.IntN(len(words))] + " ")
		}
		return b.String()
	}
	x := New()
	a, other := x.NewSlot([16]byte{1}, false), x.NewSlot([16]byte{2}, false)
	var mine []uint32 // a's documents in x
	add := func(n int) {
		for range n {
			sl := other
			if rng.IntN(2) == 0 {
				sl, mine = a, append(mine, uint32(len(x.Docs)))
			}
			x.Add(sl, DocInfo{Event: [16]byte{byte(len(x.Docs)), 7}, Time: int64(len(x.Docs))}, Analyse(text()))
		}
	}
	check := func(y *Index) {
		t.Helper()
		for _, q := range [][]string{{"alpha"}, {"beta", "gamma"}, {"eps", "delta", "alpha"}} {
			var want []Candidate
			for _, c := range x.Candidates(q) {
				if i, ok := slices.BinarySearch(mine, c.Doc); ok {
					want = append(want, Candidate{Doc: uint32(i), TF: c.TF})
				}
			}
			assert.Equal(t, want, y.Candidates(q), "%v", q)
		}
	}
	add(60)
	y := New()
	s, err := DecodeSegment(x.encodeSegment(1, 1, []uint32{a}, []uint64{0}, slices.Clone(mine)))
	require.NoError(t, err)
	require.NoError(t, y.apply(s))
	check(y)
	n0, from := len(mine), x.Sessions[a].Next
	add(60)
	s, err = DecodeSegment(x.encodeSegment(2, 1, []uint32{a}, []uint64{from}, slices.Clone(mine[n0:])))
	require.NoError(t, err)
	require.NoError(t, y.apply(s))
	check(y)
	y.Compact()
	check(y)
}

// TestFindFirstAgainstDoc: FindFirst, which reads a record's tokens
// once and stops early, agrees with Doc's Match and Snippet on random
// texts and queries of words and phrases (repeated words, a phrase
// overlapping itself, terms given twice).
func TestFindFirstAgainstDoc(t *testing.T) {
	words := []string{"a", "B", "c", "dé", "a1"}
	rng := rand.New(rand.NewPCG(3, 4))
	matched := 0
	for range 5000 {
		var b strings.Builder
		for i := range rng.IntN(120) {
			if i > 0 {
				b.WriteString([]string{" ", ".", "\n", "-- "}[rng.IntN(4)])
			}
			b.WriteString(words[rng.IntN(len(words))])
		}
		text := b.String()
		var q []string
		for range 1 + rng.IntN(3) {
			n := 1 + rng.IntN(3)
			var ws []string
			for range n {
				ws = append(ws, words[rng.IntN(len(words))])
			}
			if n == 1 {
				q = append(q, ws[0])
			} else {
				q = append(q, `"`+strings.Join(ws, " ")+`"`)
			}
		}
		terms, err := Parse(strings.Join(q, " "))
		require.NoError(t, err)
		d := Analyse(text)
		at, ok := FindFirst(text, terms)
		if !assert.Equal(t, d.Match(terms), ok, "text %q query %q", text, q) {
			continue
		}
		if ok {
			matched++
			assert.Equal(t, d.Snippet(terms), SnippetAt(text, at), "text %q query %q", text, q)
		}
	}
	assert.Greater(t, matched, 500, "the random cases match often enough to test the snippets")
}
