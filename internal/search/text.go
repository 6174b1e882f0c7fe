package search

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The limits of a query.
const (
	MaxQueryBytes = 4096 // a query's text
	MaxTerms      = 16   // words and phrases
	MaxTermTokens = 32   // tokens of one phrase
	MaxTokenBytes = 64   // a longer token is cut at a rune boundary
)

// ErrInvalidQuery is a query Parse refuses: no term, too long, too many
// terms, an unbalanced quote.
var ErrInvalidQuery = errors.New("invalid search query")

// Term is one word or phrase of a query: its tokens, in order.
type Term struct {
	Tokens []string
}

// Parse splits a query into its terms: words, and phrases in double
// quotes. A word or phrase without a letter or digit is dropped; a query
// left with no term, longer than MaxQueryBytes, with more than MaxTerms
// terms or a phrase of more than MaxTermTokens tokens, with an odd number
// of double quotes, or not valid UTF-8, is ErrInvalidQuery.
func Parse(q string) ([]Term, error) {
	if len(q) > MaxQueryBytes {
		return nil, wrapf("the query has %d bytes, more than %d", len(q), MaxQueryBytes)
	}
	if !utf8.ValidString(q) {
		return nil, wrapf("the query is not valid UTF-8")
	}
	if strings.Count(q, `"`)%2 != 0 {
		return nil, wrapf("a double quote is not closed")
	}
	var terms []Term
	add := func(s string) error {
		toks := Tokens(nil, s)
		if len(toks) == 0 {
			return nil
		}
		if len(toks) > MaxTermTokens {
			return wrapf("a phrase has %d words, more than %d", len(toks), MaxTermTokens)
		}
		terms = append(terms, Term{Tokens: toks})
		if len(terms) > MaxTerms {
			return wrapf("more than %d words and phrases", MaxTerms)
		}
		return nil
	}
	for i, part := range strings.Split(q, `"`) {
		if i%2 == 1 {
			if err := add(part); err != nil {
				return nil, err
			}
			continue
		}
		for _, w := range strings.Fields(part) {
			if err := add(w); err != nil {
				return nil, err
			}
		}
	}
	if len(terms) == 0 {
		return nil, wrapf("no word to search for")
	}
	return terms, nil
}

type queryError struct{ msg string }

func (e *queryError) Error() string { return "invalid search query: " + e.msg }
func (e *queryError) Unwrap() error { return ErrInvalidQuery }

func wrapf(format string, args ...any) error {
	return &queryError{msg: fmt.Sprintf(format, args...)}
}

// QueryTokens is the distinct tokens of terms, in order of first use.
func QueryTokens(terms []Term) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range terms {
		for _, tok := range t.Tokens {
			if !seen[tok] {
				seen[tok] = true
				out = append(out, tok)
			}
		}
	}
	return out
}

func isTokenRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// Tokens appends the tokens of s to dst.
func Tokens(dst []string, s string) []string {
	ForEachToken(s, func(tok string, _, _ int) bool {
		dst = append(dst, tok)
		return true
	})
	return dst
}

// ForEachToken calls fn with each token of s (lower-cased, cut to
// MaxTokenBytes) and its byte range in s, until fn returns false.
func ForEachToken(s string, fn func(tok string, start, end int) bool) {
	start := -1
	for i := 0; i <= len(s); {
		r, n := rune(0), 1
		if i < len(s) {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		if i < len(s) && isTokenRune(r) {
			if start < 0 {
				start = i
			}
			i += n
			continue
		}
		if start >= 0 {
			if !fn(normalize(s[start:i]), start, i) {
				return
			}
			start = -1
		}
		i += n
	}
}

// normalize lower-cases a token and cuts it to MaxTokenBytes.
func normalize(t string) string {
	lower := true
	for i := 0; i < len(t); i++ {
		if c := t[i]; c >= 0x80 || 'A' <= c && c <= 'Z' {
			lower = false
			break
		}
	}
	if !lower {
		t = strings.ToLower(t)
	}
	if len(t) > MaxTokenBytes {
		n := MaxTokenBytes
		for n > 0 && !utf8.RuneStart(t[n]) {
			n--
		}
		t = t[:n]
	}
	return t
}

// Doc is one record's text analysed for matching and ranking.
type Doc struct {
	Text   string
	tokens []string
	spans  [][2]int
	counts map[string]int
}

// Analyse tokenizes text.
func Analyse(text string) *Doc {
	d := &Doc{}
	d.Reset(text)
	return d
}

// Reset makes d the analysis of text, reusing d's memory: a caller
// analysing many records in turn keeps one Doc.
func (d *Doc) Reset(text string) {
	d.Text = text
	d.tokens, d.spans = d.tokens[:0], d.spans[:0]
	if d.counts == nil {
		d.counts = map[string]int{}
	}
	clear(d.counts)
	ForEachToken(text, func(tok string, s, e int) bool {
		d.tokens = append(d.tokens, tok)
		d.spans = append(d.spans, [2]int{s, e})
		d.counts[tok]++
		return true
	})
}

// Len is the record's token count.
func (d *Doc) Len() int { return len(d.tokens) }

// Counts calls fn with each distinct token of the record and its count.
func (d *Doc) Counts(fn func(tok string, n int)) {
	for t, n := range d.counts {
		fn(t, n)
	}
}

// find returns the index of the first occurrence of term's tokens in d,
// or -1.
func (d *Doc) find(t Term) int {
	if len(t.Tokens) == 0 || d.counts[t.Tokens[0]] == 0 {
		return -1
	}
	for i := 0; i+len(t.Tokens) <= len(d.tokens); i++ {
		ok := true
		for k, tok := range t.Tokens {
			if d.tokens[i+k] != tok {
				ok = false
				break
			}
		}
		if ok {
			return i
		}
	}
	return -1
}

// Match reports whether d matches every term.
func (d *Doc) Match(terms []Term) bool {
	for _, t := range terms {
		if d.find(t) < 0 {
			return false
		}
	}
	return len(terms) > 0
}

// Rank is the record's rank for the query's distinct tokens (package doc).
func Rank(tf func(tok string) int, n int, tokens []string) float64 {
	var sum float64
	for _, t := range tokens {
		if c := tf(t); c > 0 {
			sum += 1 + math.Log(float64(c))
		}
	}
	return sum / (1 + math.Log(1+float64(n)/64))
}

// Rank is Rank of d.
func (d *Doc) Rank(tokens []string) float64 {
	return Rank(func(t string) int { return d.counts[t] }, len(d.tokens), tokens)
}

// SnippetBytes bounds a snippet.
const SnippetBytes = 160

// Snippet is a short excerpt of the text around the first match of the
// first term, whitespace runs as one space, cut at rune boundaries.
func (d *Doc) Snippet(terms []Term) string {
	at := 0
	for _, t := range terms {
		if i := d.find(t); i >= 0 {
			at = d.spans[i][0]
			break
		}
	}
	return SnippetAt(d.Text, at)
}

// SnippetAt is the snippet of text around byte offset at (Snippet's).
func SnippetAt(text string, at int) string {
	start := max(0, at-SnippetBytes/3)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start--
	}
	end := min(len(text), start+SnippetBytes)
	for end < len(text) && !utf8.RuneStart(text[end]) {
		end--
	}
	var b strings.Builder
	b.Grow(end - start + 2*len("…"))
	if start > 0 {
		b.WriteString("…")
	}
	appendFields(&b, text[start:end])
	if end < len(text) {
		b.WriteString("…")
	}
	return b.String()
}

// appendFields writes the fields of s (strings.Fields's: the runs
// between white space, as unicode.IsSpace says) separated by one space,
// as strings.Join(strings.Fields(s), " ") makes them, in one pass.
func appendFields(b *strings.Builder, s string) {
	n0 := b.Len()
	gap := false
	for i := 0; i < len(s); {
		size, space := 1, false
		if c := s[i]; c < utf8.RuneSelf {
			space = c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
		} else {
			var r rune
			r, size = utf8.DecodeRuneInString(s[i:])
			space = unicode.IsSpace(r)
		}
		if space {
			gap = b.Len() > n0
		} else {
			if gap {
				b.WriteByte(' ')
				gap = false
			}
			b.WriteString(s[i : i+size])
		}
		i += size
	}
}

// FindFirst reports whether text matches every term (Doc.Match), and the
// byte offset of the first occurrence of the first term (where Snippet
// cuts). It reads the tokens left to right, keeping only as many as the
// longest term spans, and stops once every term was found: what a query
// needs of a record the index names, without Analyse's token lists and
// counts.
func FindFirst(text string, terms []Term) (at int, ok bool) {
	span := 0
	for _, t := range terms {
		span = max(span, len(t.Tokens))
	}
	if span == 0 {
		return 0, false
	}
	found := make([]bool, len(terms))
	left := len(terms)
	ring := make([]string, span) // the last tokens, ring[n%span] the nth
	starts := make([]int, span)
	n := 0
	at = -1
	ForEachToken(text, func(tok string, s, _ int) bool {
		ring[n%span], starts[n%span] = tok, s
		n++
		for i, t := range terms {
			k := len(t.Tokens)
			if found[i] || k > n || t.Tokens[k-1] != tok {
				continue
			}
			same := true
			for j := 0; j < k-1; j++ {
				if ring[(n-k+j)%span] != t.Tokens[j] {
					same = false
					break
				}
			}
			if same {
				found[i] = true
				left--
				if i == 0 {
					at = starts[(n-k)%span]
				}
			}
		}
		return left > 0
	})
	return max(at, 0), left == 0
}
