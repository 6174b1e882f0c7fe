package workspace

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidPath is the cause of every path CheckPath refuses.
var ErrInvalidPath = errors.New("invalid workspace path")

// MaxPath is the longest path, in bytes, a snapshot holds.
const MaxPath = 4096

// CheckPath reports whether p may name a file of a workspace: relative,
// slash-separated, clean (no empty, "." or ".." element, no trailing
// slash), valid UTF-8, no NUL, at most MaxPath bytes. Its error wraps
// ErrInvalidPath and quotes p.
func CheckPath(p string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidPath, p, why) }
	switch {
	case p == "":
		return bad("empty")
	case len(p) > MaxPath:
		return bad(fmt.Sprintf("longer than %d bytes", MaxPath))
	case !utf8.ValidString(p):
		return bad("not valid UTF-8")
	case strings.IndexByte(p, 0) >= 0:
		return bad("holds a NUL byte")
	case p[0] == '/':
		return bad("absolute")
	}
	for elem := range strings.SplitSeq(p, "/") {
		switch elem {
		case "":
			return bad("has an empty element")
		case ".", "..":
			return bad("has a " + elem + " element")
		}
	}
	return nil
}
