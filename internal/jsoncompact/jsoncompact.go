// Package jsoncompact checks that bytes are one JSON value and appends
// them without insignificant whitespace, as encoding/json.Compact does,
// several times faster on the long strings agent records are made of
// (tool output, file contents).
//
// encoding/json's scanner calls a function per input byte; Append runs a
// loop per token instead, and copies a string's bytes in runs between the
// characters that need a look (quote, backslash, control characters). It
// accepts exactly what encoding/json.Valid accepts, nesting depth limit
// included, and its output is byte for byte what encoding/json.Compact
// writes (FuzzAppend checks both against the standard library). Strings
// are not checked for valid UTF-8, as encoding/json does not check them.
package jsoncompact

import (
	"bytes"
	"encoding/json"
	"errors"
)

// maxDepth is encoding/json's limit on nested arrays and objects.
const maxDepth = 10000

// errSyntax stands for a syntax error; Append then asks encoding/json for
// its error, so the message is the standard library's.
var errSyntax = errors.New("invalid JSON")

// Append appends src, which must be one JSON value with optional
// whitespace around and inside it, to dst without the whitespace. On an
// error (the one encoding/json.Compact returns) dst is returned as it was.
func Append(dst, src []byte) ([]byte, error) {
	n := len(dst)
	out, err := appendValue(dst, src)
	if err == nil {
		return out, nil
	}
	var buf bytes.Buffer
	if cerr := json.Compact(&buf, src); cerr != nil {
		return dst[:n], cerr
	}
	// Unreachable unless this package and encoding/json disagree; the
	// standard library's answer wins.
	return append(dst[:n], buf.Bytes()...), nil
}

// special marks the bytes a string run stops at: '"', '\\' and the
// control characters, which JSON strings cannot hold unescaped.
var special = func() (t [256]bool) {
	for c := 0; c < 0x20; c++ {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isHex(c byte) bool {
	return isDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// appendValue is the scanner: containers on a stack of their kinds ('{'
// or '['), each value followed by what its container allows.
func appendValue(dst, src []byte) ([]byte, error) {
	var stack []byte
	i := 0
	skip := func() {
		for i < len(src) && isSpace(src[i]) {
			i++
		}
	}
	for {
		// A value.
		skip()
		if i >= len(src) {
			return dst, errSyntax
		}
		switch c := src[i]; {
		case c == '{' || c == '[':
			if len(stack) >= maxDepth {
				return dst, errSyntax
			}
			dst = append(dst, c)
			i++
			skip()
			if i < len(src) && src[i] == c+2 { // '}' or ']'
				dst = append(dst, c+2)
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				var err error
				if dst, i, err = appendKey(dst, src, i); err != nil {
					return dst, err
				}
			}
			continue
		case c == '"':
			var err error
			if dst, i, err = appendString(dst, src, i); err != nil {
				return dst, err
			}
		case c == '-' || isDigit(c):
			j, ok := number(src, i)
			if !ok {
				return dst, errSyntax
			}
			dst = append(dst, src[i:j]...)
			i = j
		case c == 't' || c == 'f' || c == 'n':
			lit := "null"
			switch c {
			case 't':
				lit = "true"
			case 'f':
				lit = "false"
			}
			if !bytes.HasPrefix(src[i:], []byte(lit)) {
				return dst, errSyntax
			}
			dst = append(dst, lit...)
			i += len(lit)
		default:
			return dst, errSyntax
		}
		// After a value: close containers, or go on to the next member.
		for {
			skip()
			if len(stack) == 0 {
				if i != len(src) {
					return dst, errSyntax
				}
				return dst, nil
			}
			if i >= len(src) {
				return dst, errSyntax
			}
			top := stack[len(stack)-1]
			c := src[i]
			if c == top+2 {
				dst = append(dst, c)
				i++
				stack = stack[:len(stack)-1]
				continue
			}
			if c != ',' {
				return dst, errSyntax
			}
			dst = append(dst, ',')
			i++
			if top == '{' {
				skip()
				var err error
				if dst, i, err = appendKey(dst, src, i); err != nil {
					return dst, err
				}
			}
			break
		}
	}
}

// appendKey appends an object member's key and its colon, from src[i]
// (after any whitespace), and returns the index after the colon.
func appendKey(dst, src []byte, i int) ([]byte, int, error) {
	if i >= len(src) || src[i] != '"' {
		return dst, i, errSyntax
	}
	dst, i, err := appendString(dst, src, i)
	if err != nil {
		return dst, i, err
	}
	for i < len(src) && isSpace(src[i]) {
		i++
	}
	if i >= len(src) || src[i] != ':' {
		return dst, i, errSyntax
	}
	return append(dst, ':'), i + 1, nil
}

// appendString appends the string starting at src[i] (its opening quote)
// and returns the index after its closing quote.
func appendString(dst, src []byte, i int) ([]byte, int, error) {
	start := i
	i++
	for {
		for i < len(src) && !special[src[i]] {
			i++
		}
		if i >= len(src) {
			return dst, i, errSyntax
		}
		switch src[i] {
		case '"':
			i++
			return append(dst, src[start:i]...), i, nil
		case '\\':
			if i+1 >= len(src) {
				return dst, i, errSyntax
			}
			switch src[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(src) || !isHex(src[i+2]) || !isHex(src[i+3]) || !isHex(src[i+4]) || !isHex(src[i+5]) {
					return dst, i, errSyntax
				}
				i += 6
			default:
				return dst, i, errSyntax
			}
		default: // a control character
			return dst, i, errSyntax
		}
	}
}

// number returns the index after the number starting at src[i], and
// whether it is one: -? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?
func number(src []byte, i int) (int, bool) {
	if src[i] == '-' {
		i++
	}
	switch {
	case i < len(src) && src[i] == '0':
		i++
	case i < len(src) && isDigit(src[i]):
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	default:
		return i, false
	}
	if i < len(src) && src[i] == '.' {
		i++
		if i >= len(src) || !isDigit(src[i]) {
			return i, false
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		i++
		if i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || !isDigit(src[i]) {
			return i, false
		}
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	return i, true
}
