package workspace

import (
	"path"
	"strings"
)

// Rules are ignore rules in the form of .gitignore files: each rule a
// pattern of one line, read against paths below the directory whose file
// held it. The last rule that matches a path decides: it is ignored,
// unless that rule starts with "!". Supported, as git reads them: blank
// lines and lines starting with "#" are no rules; "\#" and "\!" escape a
// leading "#" or "!"; a trailing "/" matches directories only; a pattern
// holding no "/" but a trailing one matches a name at any depth; any
// other is anchored to its file's directory (a leading "/" only anchors);
// "*", "?" and "[...]" match within one element (path.Match), "**" any
// number of elements. Trailing spaces are dropped. A directory that is
// ignored is not walked, so a rule cannot bring back a file inside it.
// The zero Rules ignores nothing.
type Rules struct {
	parent *Rules // rules read before these (a parent directory's), or nil
	rules  []rule
}

type rule struct {
	base     string   // the directory of the file the rule came from ("" for the root)
	segs     []string // the pattern's elements
	anchored bool     // matched against the whole path below base, else against the last element
	dirOnly  bool
	negate   bool
}

// MaxRules is the most rules a Rules holds; lines past it are not read.
const MaxRules = 100_000

// Add adds the rules of text, the lines of a .gitignore file in the
// directory base ("" for the root, else a path CheckPath accepts).
func (r *Rules) Add(base, text string) {
	for line := range strings.SplitSeq(text, "\n") {
		if len(r.rules) >= MaxRules {
			return
		}
		line = strings.TrimSuffix(line, "\r")
		for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, "\\ ") {
			line = line[:len(line)-1]
		}
		if line == "" || line[0] == '#' {
			continue
		}
		var ru rule
		ru.base = base
		if line[0] == '!' {
			ru.negate, line = true, line[1:]
		} else if line[0] == '\\' && len(line) > 1 && (line[1] == '#' || line[1] == '!') {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			ru.dirOnly, line = true, strings.TrimRight(line, "/")
		}
		if strings.Contains(line, "/") {
			ru.anchored, line = true, strings.TrimLeft(line, "/")
		}
		if line == "" {
			continue
		}
		// path.Match writes a bracket's negation "^"; .gitignore "!".
		line = strings.ReplaceAll(line, "[!", "[^")
		ru.segs = strings.Split(line, "/")
		r.rules = append(r.rules, ru)
	}
}

// Len is the number of rules.
func (r *Rules) Len() int { return len(r.rules) }

// child returns the rules of r followed by those of text, a .gitignore
// in base, leaving r as it is: a directory's rules for its subtree.
func (r *Rules) child(base, text string) *Rules {
	c := &Rules{parent: r}
	c.Add(base, text)
	if len(c.rules) == 0 {
		return r
	}
	return c
}

// Ignored reports whether the rules ignore the path p (CheckPath's form),
// a directory when dir is true.
func (r *Rules) Ignored(p string, dir bool) bool {
	for ; r != nil; r = r.parent {
		if ignored, matched := r.match(p, dir); matched {
			return ignored
		}
	}
	return false
}

// match reports whether a rule of r itself (not its parent's) matches
// p, and if so whether it ignores it.
func (r *Rules) match(p string, dir bool) (ignored, matched bool) {
	var elems []string
	for i := len(r.rules) - 1; i >= 0; i-- {
		ru := &r.rules[i]
		if ru.dirOnly && !dir {
			continue
		}
		rel := p
		if ru.base != "" {
			if !strings.HasPrefix(p, ru.base+"/") {
				continue
			}
			rel = p[len(ru.base)+1:]
		}
		var ok bool
		if ru.anchored {
			if elems == nil || ru.base != "" {
				elems = strings.Split(rel, "/")
			}
			ok = matchElems(ru.segs, elems)
			if ru.base != "" {
				elems = nil
			}
		} else {
			ok = matchElem(ru.segs[0], path.Base(rel))
		}
		if ok {
			return !ru.negate, true
		}
	}
	return false, false
}

// matchElem matches one element; a malformed pattern matches nothing.
func matchElem(pat, name string) bool {
	ok, err := path.Match(pat, name)
	return ok && err == nil
}

// matchElems matches the elements of a path against the pattern's, "**"
// standing for any number of elements, by dynamic programming over the
// two (no recursion: a pattern of many "**" costs their product at most).
func matchElems(pat, name []string) bool {
	// cur[j]: pat[:i] matches name[:j].
	cur := make([]bool, len(name)+1)
	next := make([]bool, len(name)+1)
	cur[0] = true
	for i := range pat {
		clear(next)
		if pat[i] == "**" && i == len(pat)-1 && i > 0 {
			// A trailing "**" matches everything inside: one element or
			// more, never the directory itself.
			seen := false
			for j := 0; j <= len(name); j++ {
				next[j] = seen
				seen = seen || cur[j]
			}
		} else if pat[i] == "**" {
			seen := false
			for j := 0; j <= len(name); j++ {
				seen = seen || cur[j]
				next[j] = seen
			}
		} else {
			for j := 1; j <= len(name); j++ {
				next[j] = cur[j-1] && matchElem(pat[i], name[j-1])
			}
		}
		cur, next = next, cur
	}
	return cur[len(name)]
}
