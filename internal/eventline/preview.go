package eventline

import (
	"bytes"
	"encoding/base64"
	"unicode"
	"unicode/utf8"
)

// Previews
//
// Node.Preview is computed once, when the index Entry is built, from the
// record the builder already holds: at append time from the caller's
// record, and when an Entry is rebuilt from a chunk line (recovery, a lazy
// session loading its index, a remote restore, Verify) from the record in
// the line. It then travels with the Entry: in memory (Entry.Preview), in
// index.jsonl and in a sealed chunk's embedded index (the optional
// "preview" member of an index line, see AppendIndex). Chunk lines are
// unchanged, so Tree reads no record for it.
//
// A record stored as a blob gets its Preview at append time, which holds
// the record; an Entry rebuilt from its chunk line has an empty Preview:
// the line names the blob only, and reading, decompressing and parsing a
// record of megabytes for each such Entry would make recovery's cost grow
// with the blobs' bytes, and a missing blob fail a rebuild that needs only
// the lines. Index lines written before previews existed have no member:
// their entries keep an empty Preview until they are rebuilt from the
// chunk lines, which happens when index.jsonl is missing or cut (a crash,
// a repair, a file removed by hand). Sealing a chunk, Upgrade and
// ConvertCompression carry the entries as they are, empty previews too,
// into the embedded indexes and index.jsonl they write.
//
// The Preview is held in the Entry as a fixed array, not a string, so that
// entries keep holding no pointers: the garbage collector does not scan a
// session's index (100,000 entries), and building an Entry allocates
// nothing. The price is PreviewMax bytes per Entry whatever the Preview's
// length; a shared byte arena would save the unused part of short previews
// but tie every Entry to the arena of one index, while entries move
// between indexes (decoded lines, records in flight, a fork's prefix).

// PreviewMax is the longest Preview, in bytes.
const PreviewMax = 80

// Preview is a short text of a record: valid UTF-8, whitespace runs
// collapsed to one space, no leading or trailing space, no control
// characters, cut at a rune boundary to at most PreviewMax bytes.
//
// A sealed Preview (SealedPreview) holds instead the sealed bytes of an
// encrypted session's preview, which have no text until opened with the
// session's key.
type Preview struct {
	n      uint8
	sealed bool
	b      [PreviewMax]byte
}

// String returns the preview's text; a sealed one's is empty.
func (p *Preview) String() string { return string(p.Bytes()) }

// Bytes returns the preview's text, in p's memory; a sealed one's is
// empty.
func (p *Preview) Bytes() []byte {
	if p.sealed {
		return nil
	}
	return p.b[:p.n]
}

// Sealed Previews
//
// An encrypted session's previews are sealed (the root's encrypt.go
// seals and opens them): the Preview holds the sealed bytes, at most
// PreviewMax (a key generation, a nonce, the cipher text of the preview's
// text cut to fit, a tag), and its index line holds their base64 as
// "sealed_preview", in the place of "preview". Only a reader with the
// session's key turns them into text; everything below the root carries
// them as it carries a preview in clear.

// SealedPreview returns the sealed Preview holding raw, 1 to PreviewMax
// bytes (ok false otherwise).
func SealedPreview(raw []byte) (p Preview, ok bool) {
	if len(raw) == 0 || len(raw) > PreviewMax {
		return Preview{}, false
	}
	p.sealed, p.n = true, uint8(copy(p.b[:], raw))
	return p, true
}

// SealedNone returns the sealed Preview of a record without text to
// preview: no bytes, and no member in an index line (it reads back as an
// empty Preview in clear). It marks in memory an encrypted session's
// entry whose preview was looked for and is empty.
func SealedNone() Preview { return Preview{sealed: true} }

// Sealed reports whether p is a sealed Preview.
func (p *Preview) Sealed() bool { return p.sealed }

// SealedBytes returns a sealed Preview's bytes, in p's memory (none for a
// Preview in clear).
func (p *Preview) SealedBytes() []byte {
	if !p.sealed {
		return nil
	}
	return p.b[:p.n]
}

// Cut returns p's text cut to at most n bytes, at a rune boundary and
// without a trailing space. A sealed Preview is returned as it is.
func (p Preview) Cut(n int) Preview {
	if p.sealed || int(p.n) <= n {
		return p
	}
	end := max(n, 0)
	for end > 0 && !utf8.RuneStart(p.b[end]) {
		end--
	}
	for end > 0 && p.b[end-1] == ' ' {
		end--
	}
	clear(p.b[end:])
	p.n = uint8(end)
	return p
}

// previewBuilder writes runes into a Preview, collapsing whitespace.
type previewBuilder struct {
	p     Preview
	space bool // a space is owed before the next rune
	full  bool
}

// rune adds r and reports whether there is room for more.
func (w *previewBuilder) rune(r rune) bool {
	if w.full {
		return false
	}
	if unicode.IsSpace(r) || unicode.IsControl(r) {
		w.space = w.p.n > 0
		return true
	}
	need := utf8.RuneLen(r)
	if w.space {
		need++
	}
	if int(w.p.n)+need > PreviewMax {
		w.full = true
		return false
	}
	if w.space {
		w.p.b[w.p.n] = ' '
		w.p.n++
		w.space = false
	}
	w.p.n += uint8(utf8.EncodeRune(w.p.b[w.p.n:], r))
	return true
}

// text adds the runes of s (invalid bytes become U+FFFD).
func (w *previewBuilder) text(s []byte) bool {
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		if !w.rune(r) {
			return false
		}
		s = s[n:]
	}
	return true
}

// sep owes a space before what comes next.
func (w *previewBuilder) sep() { w.space = w.p.n > 0 }

// jsonText adds a JSON value: a string's decoded text, anything else as
// its (compact) JSON text.
func (w *previewBuilder) jsonText(v []byte) bool {
	if len(v) > 0 && v[0] == '"' {
		return jsonString(v, w.rune)
	}
	return w.text(v)
}

// PreviewOf returns the Preview of a record of kind k (its compact JSON):
//
//   - message: its content, else its reasoning, else its first tool
//     call's name and the start of its arguments;
//   - tool_call: the name and the start of the arguments;
//   - tool_result: its output, after "error:" when is_error is true;
//   - compaction and branch_summary: the summary's text, else its first
//     goal;
//   - custom, and a record that is not a JSON object: a string's text,
//     or the record's JSON text.
//
// An object without the members its kind names has an empty Preview.
func PreviewOf(k KindCode, rec []byte) Preview {
	var w previewBuilder
	kind := k
	if kind == KindInvalid || kind >= kindEnd {
		kind = KindCustom
	}
	switch kind {
	case KindMessage:
		if w.jsonNonEmpty(jsonMember(rec, "content")) || w.jsonNonEmpty(jsonMember(rec, "reasoning")) {
			return w.p
		}
		if calls := jsonMember(rec, "tool_calls"); len(calls) > 1 && calls[0] == '[' {
			if first, _ := jsonFirst(calls); first != nil && w.toolCall(first) {
				return w.p
			}
		}
	case KindToolCall:
		if w.toolCall(rec) {
			return w.p
		}
	case KindToolResult:
		var out []byte
		isError := false
		jsonEach(rec, func(k, v []byte) bool { // one pass: is_error follows a long output
			switch {
			case out == nil && jsonKeyIs(k, "output"):
				out = v
			case jsonKeyIs(k, "is_error"):
				isError = string(v) == "true"
			}
			return true
		})
		if out != nil {
			if isError {
				w.text([]byte("error:"))
				w.sep()
			}
			w.jsonText(out)
			return w.p
		}
	case KindCompaction, KindBranchSummary:
		sum := jsonMember(rec, "summary")
		if w.jsonNonEmpty(jsonMember(sum, "text")) {
			return w.p
		}
		if goals := jsonMember(sum, "goals"); len(goals) > 1 && goals[0] == '[' {
			if first, _ := jsonFirst(goals); w.jsonNonEmpty(first) {
				return w.p
			}
		}
	}
	w = previewBuilder{}
	if i := jsonSpace(rec, 0); (kind == KindCustom || i >= len(rec) || rec[i] != '{') && !Sealed(rec) {
		w.jsonText(rec)
	}
	return w.p
}

// minSealed is the length of the shortest record Sealed reports: the
// quotes and the base64 of a generation, a nonce, a flag byte and a tag.
const minSealed = 2 + (4+12+1+16+2)/3*4

// Sealed reports whether rec has the form of an encrypted session's
// record as stored (the root's encrypt.go: a JSON string holding the
// base64 of the sealed bytes), which has no text to preview: an index
// entry rebuilt from its chunk line gets none. A plain record of that
// form (a string of base64 alone) loses its preview with it.
func Sealed(rec []byte) bool {
	n := len(rec)
	if n < minSealed || rec[0] != '"' || rec[n-1] != '"' || (n-2)%4 != 0 {
		return false
	}
	for _, c := range rec[1 : n-1] {
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '+', c == '/', c == '=':
		default:
			return false
		}
	}
	return true
}

// jsonNonEmpty adds v, a JSON string, when it has text, and reports
// whether it did.
func (w *previewBuilder) jsonNonEmpty(v []byte) bool {
	if len(v) < 2 || v[0] != '"' {
		return false
	}
	w.jsonText(v)
	return w.p.n > 0
}

// toolCall adds a tool call object's name and the start of its
// arguments, and reports whether it had a name.
func (w *previewBuilder) toolCall(obj []byte) bool {
	if !w.jsonNonEmpty(jsonMember(obj, "name")) {
		return false
	}
	if args := jsonMember(obj, "arguments"); len(args) > 0 && string(args) != "null" && string(args) != "{}" {
		w.sep()
		w.jsonText(args)
	}
	return true
}

// The JSON helpers below read compact or spaced JSON and never panic on
// bad input: what they cannot read they report as absent.

// jsonMember returns the raw value of the member key of the JSON object
// obj (the first one, if repeated), or nil.
func jsonMember(obj []byte, key string) []byte {
	var out []byte
	jsonEach(obj, func(k, v []byte) bool {
		if jsonKeyIs(k, key) {
			out = v
			return false
		}
		return true
	})
	return out
}

// jsonEach calls f with the quoted key and the raw value of each member
// of the JSON object obj, in order, until f returns false or the object
// ends or cannot be read.
func jsonEach(obj []byte, f func(k, v []byte) bool) {
	i := jsonSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i = jsonSpace(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		kend := jsonSkip(obj, i)
		if kend < 0 {
			return
		}
		k := obj[i:kend]
		i = jsonSpace(obj, kend)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		i = jsonSpace(obj, i+1)
		vend := jsonSkip(obj, i)
		if vend < 0 || !f(k, obj[i:vend]) {
			return
		}
		i = jsonSpace(obj, vend)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i = jsonSpace(obj, i+1)
	}
}

// jsonFirst returns the first element of the JSON array arr, or nil.
func jsonFirst(arr []byte) ([]byte, bool) {
	i := jsonSpace(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return nil, false
	}
	i = jsonSpace(arr, i+1)
	end := jsonSkip(arr, i)
	if end < 0 {
		return nil, false
	}
	return arr[i:end], true
}

// jsonKeyIs reports whether the quoted key k decodes to key.
func jsonKeyIs(k []byte, key string) bool {
	if bytes.IndexByte(k, '\\') < 0 {
		return len(k) == len(key)+2 && string(k[1:len(k)-1]) == key
	}
	var b []byte
	jsonString(k, func(r rune) bool { b = utf8.AppendRune(b, r); return len(b) <= len(key) })
	return string(b) == key
}

func jsonSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// jsonSkip returns the offset just past the JSON value at b[i:], or -1.
// It checks brackets and strings, not the grammar of what is between.
func jsonSkip(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		// A string's end is the first quote after an even run of
		// backslashes: found with IndexByte, fast on a long output.
		for j := i + 1; ; {
			q := bytes.IndexByte(b[j:], '"')
			if q < 0 {
				return -1
			}
			j += q
			k := j
			for k > i+1 && b[k-1] == '\\' {
				k--
			}
			if (j-k)%2 == 0 {
				return j + 1
			}
			j++
		}
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				end := jsonSkip(b, j)
				if end < 0 {
					return -1
				}
				j = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

// jsonString decodes the quoted JSON string s, passing each rune to emit
// until it returns false; it reports whether emit stopped it. A bad escape
// or a lone surrogate becomes U+FFFD.
func jsonString(s []byte, emit func(rune) bool) bool {
	if len(s) < 2 || s[0] != '"' {
		return false
	}
	s = s[1 : len(s)-1]
	for len(s) > 0 {
		c := s[0]
		if c != '\\' {
			r, n := utf8.DecodeRune(s)
			if !emit(r) {
				return true
			}
			s = s[n:]
			continue
		}
		if len(s) < 2 {
			return false
		}
		r, n := rune(utf8.RuneError), 2
		switch s[1] {
		case '"', '\\', '/':
			r = rune(s[1])
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			r, n = jsonU(s)
		}
		if !emit(r) {
			return true
		}
		s = s[n:]
	}
	return false
}

// jsonU decodes the \uXXXX escape (or surrogate pair) at the start of s.
func jsonU(s []byte) (rune, int) {
	r1, ok := hex4(s[min(2, len(s)):])
	if !ok {
		return utf8.RuneError, min(2, len(s))
	}
	if r1 < 0xD800 || r1 > 0xDFFF {
		return r1, 6
	}
	if r1 < 0xDC00 && len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
		if r2, ok := hex4(s[8:]); ok && r2 >= 0xDC00 && r2 <= 0xDFFF {
			return (r1-0xD800)<<10 | (r2 - 0xDC00) + 0x10000, 12
		}
	}
	return utf8.RuneError, 6
}

func hex4(s []byte) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s[:4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// appendPreviewMember appends the index line member of a non-empty
// Preview: `,"preview":"…"`, with `"` and `\` escaped and every other
// byte as it is (a Preview holds no control characters).
func appendPreviewMember(dst []byte, p *Preview) []byte {
	if p.n == 0 {
		return dst
	}
	if p.sealed {
		dst = append(dst, `,"sealed_preview":"`...)
		dst = base64.StdEncoding.AppendEncode(dst, p.SealedBytes())
		return append(dst, '"')
	}
	dst = append(dst, `,"preview":"`...)
	for _, c := range p.Bytes() {
		if c == '"' || c == '\\' {
			dst = append(dst, '\\')
		}
		dst = append(dst, c)
	}
	return append(dst, '"')
}

// sealedPreviewValue parses the value of a sealed_preview member, after
// its opening quote, consuming the closing quote: the base64 (padded) of
// 1 to PreviewMax bytes.
func (p *lineParser) sealedPreviewValue() Preview {
	if p.err != nil {
		return Preview{}
	}
	end := bytes.IndexByte(p.b[p.pos:min(len(p.b), p.pos+sealedPreviewChars+1)], '"')
	if end < 0 {
		p.fail("unterminated or overlong sealed preview")
		return Preview{}
	}
	val := p.b[p.pos : p.pos+end]
	for _, c := range val {
		// Only the alphabet: the decoder skips CR and LF, which would
		// make a line AppendIndex never writes (and not JSON).
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=') {
			p.fail("sealed preview is not base64")
			return Preview{}
		}
	}
	raw, err := base64.StdEncoding.Strict().AppendDecode(make([]byte, 0, PreviewMax), val)
	pv, ok := SealedPreview(raw)
	if err != nil || !ok {
		p.fail("sealed preview is not the base64 of 1 to %d bytes", PreviewMax)
		return Preview{}
	}
	p.pos += end + 1
	return pv
}

// sealedPreviewChars is the length of the longest sealed preview's base64.
const sealedPreviewChars = (PreviewMax + 2) / 3 * 4

// previewValue parses the string value of a preview member, after its
// opening quote, as appendPreviewMember writes it, consuming the closing
// quote.
func (p *lineParser) previewValue() Preview {
	var pv Preview
	if p.err != nil {
		return pv
	}
	for {
		if p.pos >= len(p.b) {
			p.fail("unterminated preview")
			return pv
		}
		c := p.b[p.pos]
		switch {
		case c == '"':
			p.pos++
			if pv.n == 0 {
				p.fail("empty preview")
			} else if !utf8.Valid(pv.Bytes()) {
				p.fail("preview is not valid UTF-8")
			}
			return pv
		case c == '\\':
			if p.pos+1 >= len(p.b) || (p.b[p.pos+1] != '"' && p.b[p.pos+1] != '\\') {
				p.fail("bad escape in preview")
				return pv
			}
			c = p.b[p.pos+1]
			p.pos++
		case c < 0x20 || c == 0x7f:
			p.fail("control byte in preview")
			return pv
		}
		if int(pv.n) == PreviewMax {
			p.fail("preview longer than %d bytes", PreviewMax)
			return pv
		}
		pv.b[pv.n] = c
		pv.n++
		p.pos++
	}
}
