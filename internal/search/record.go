package search

import (
	"strconv"
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
		} else if s, err := strconv.Unquote(string(rec[i:end])); err == nil {
			dst = append(dst, s...)
		} else {
			dst = appendUnescaped(dst, rec[i+1:end-1])
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
