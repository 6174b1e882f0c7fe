package search

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// RecordText appends to dst the text of a record in compact JSON: its
// string values (not object keys), each followed by a newline, except
// those of MaxWordless bytes or more without whitespace. It reads
// the bytes once, left to right, without recursion; bytes that are not
// JSON end the text where they start.
func RecordText(dst, rec []byte) []byte {
	for i := 0; i < len(rec); {
		if rec[i] != '"' {
			i++
			continue
		}
		end, esc := stringEnd(rec, i)
		if end < 0 {
			return dst
		}
		j := end
		for j < len(rec) && (rec[j] == ' ' || rec[j] == '\t' || rec[j] == '\n' || rec[j] == '\r') {
			j++
		}
		if j < len(rec) && rec[j] == ':' { // an object key
			i = j + 1
			continue
		}
		if end-i-2 >= MaxWordless && !hasSpace(rec[i+1:end-1]) {
			i = end // data, not text: base64, a digest
			continue
		}
		if !esc {
			dst = append(dst, rec[i+1:end-1]...)
		} else if d, ok := appendUnquoted(dst, rec[i+1:end-1]); ok {
			dst = d
		} else {
			dst = appendUnescaped(d, rec[i+1:end-1])
		}
		dst = append(dst, '\n')
		i = end
	}
	return dst
}

// MaxWordless is the length from which a string value without
// whitespace (a space, a tab, a newline, or their escapes) is data, not
// text: base64 images, digests, minified blobs are not searched.
const MaxWordless = 256

func hasSpace(b []byte) bool {
	for i, c := range b {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\\' && i+1 < len(b) && (b[i+1] == 'n' || b[i+1] == 't' || b[i+1] == 'r') {
			return true
		}
	}
	return false
}

// stringEnd returns the offset after the closing quote of the JSON string
// starting at rec[i], and whether it holds escapes; -1 if it is not
// closed.
func stringEnd(rec []byte, i int) (int, bool) {
	esc := false
	for j := i + 1; j < len(rec); j++ {
		switch rec[j] {
		case '\\':
			esc = true
			j++
		case '"':
			return j + 1, esc
		}
	}
	return -1, esc
}

// appendUnquoted appends what strconv.Unquote makes of s between double
// quotes, byte for byte, without its allocations (a hit's record is read
// for its snippet at every query, the index's words were made by it): s
// is a JSON string's content, holding escapes and no unescaped quote. It
// reports false, with dst as it was, where Unquote fails (an escape Go
// does not know, a newline).
func appendUnquoted(dst, s []byte) ([]byte, bool) {
	start := len(dst)
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '\n' || c == '"':
			return dst[:start], false
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRune(s[i:]) // invalid UTF-8: U+FFFD, as Unquote
			dst = utf8.AppendRune(dst, r)
			i += size
			continue
		case c != '\\':
			dst = append(dst, c)
			i++
			continue
		}
		if i+1 >= len(s) {
			return dst[:start], false
		}
		e := s[i+1]
		i += 2
		switch e {
		case 'a', 'b', 'f', 'n', 'r', 't', 'v':
			dst = append(dst, "\a\b\f\n\r\t\v"[strings.IndexByte("abfnrtv", e)])
		case '\\', '"':
			dst = append(dst, e)
		case 'x', 'u', 'U':
			n := 2
			switch e {
			case 'u':
				n = 4
			case 'U':
				n = 8
			}
			if i+n > len(s) {
				return dst[:start], false
			}
			var v rune
			for _, h := range s[i : i+n] {
				x, ok := unhex(h)
				if !ok {
					return dst[:start], false
				}
				v = v<<4 | x
			}
			i += n
			switch {
			case e == 'x':
				dst = append(dst, byte(v)) // one byte, perhaps not UTF-8
			case !utf8.ValidRune(v):
				return dst[:start], false
			default:
				dst = utf8.AppendRune(dst, v)
			}
		case '0', '1', '2', '3', '4', '5', '6', '7':
			if i+2 > len(s) {
				return dst[:start], false
			}
			v := rune(e - '0')
			for _, o := range s[i : i+2] {
				if o < '0' || o > '7' {
					return dst[:start], false
				}
				v = v<<3 | rune(o-'0')
			}
			i += 2
			if v > 255 {
				return dst[:start], false
			}
			dst = append(dst, byte(v))
		default:
			return dst[:start], false
		}
	}
	return dst, true
}

func unhex(c byte) (rune, bool) {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0'), true
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10), true
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10), true
	}
	return 0, false
}

// appendUnescaped decodes the JSON escapes strconv.Unquote does not
// (\/ and \uXXXX surrogate pairs): each escape is one character, an
// unknown one a space.
func appendUnescaped(dst, s []byte) []byte {
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			dst = append(dst, s[i])
			continue
		}
		i++
		switch s[i] {
		case 'n', 't', 'r', 'b', 'f':
			dst = append(dst, ' ')
		case 'u':
			if i+4 < len(s) {
				if v, err := strconv.ParseUint(string(s[i+1:i+5]), 16, 32); err == nil {
					r := rune(v)
					if utf8.ValidRune(r) {
						dst = utf8.AppendRune(dst, r)
					} else {
						dst = append(dst, ' ')
					}
					i += 4
					continue
				}
			}
			dst = append(dst, ' ')
		default:
			dst = append(dst, s[i])
		}
	}
	return dst
}
