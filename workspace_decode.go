package sessionstore

import (
	"encoding/json"
	"io/fs"
	"strconv"
	"unicode/utf8"
)

// Manifests are decoded by hand in the form the store writes them
// (compact JSON, known members, strings without escapes): a manifest of
// 10,000 files is most of what Files costs, and encoding/json took four
// times as long. Any other form (an escape in a string, a number written
// otherwise, a member the store does not write) is decoded by
// encoding/json, so the result is the same for every input; the fuzz test
// compares the two.

// unmarshalManifest decodes rec into a snapshotRecord.
func unmarshalManifest(rec []byte) (snapshotRecord, error) {
	p := manifestParser{b: rec}
	if m, ok := p.manifest(); ok {
		return m, nil
	}
	var m snapshotRecord
	err := json.Unmarshal(rec, &m)
	return m, err
}

// manifestParser reads a manifest in the store's form; each method
// reports false for anything else, and the caller falls back. It never
// recurses: the form has three levels.
type manifestParser struct {
	b []byte
	i int
}

func (p *manifestParser) ws() {
	for p.i < len(p.b) && (p.b[p.i] == ' ' || p.b[p.i] == '\t' || p.b[p.i] == '\n' || p.b[p.i] == '\r') {
		p.i++
	}
}

// lit consumes c after any whitespace.
func (p *manifestParser) lit(c byte) bool {
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// str reads a string without escapes or control characters, valid UTF-8.
func (p *manifestParser) str() (string, bool) {
	if !p.lit('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				return "", false
			}
			return string(s), true
		case c == '\\' || c < 0x20:
			return "", false
		}
		p.i++
	}
	return "", false
}

// int reads an integer in JSON's form (no leading zeros, no fraction or
// exponent) that fits an int64.
func (p *manifestParser) int() (int64, bool) {
	p.ws()
	start := p.i
	if p.i < len(p.b) && p.b[p.i] == '-' {
		p.i++
	}
	digits := p.i
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		p.i++
	}
	switch {
	case p.i == digits, p.i-digits > 1 && p.b[digits] == '0':
		return 0, false
	case p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E'):
		return 0, false
	}
	n, err := strconv.ParseInt(string(p.b[start:p.i]), 10, 64)
	return n, err == nil
}

func (p *manifestParser) boolean() (bool, bool) {
	p.ws()
	switch {
	case len(p.b)-p.i >= 4 && string(p.b[p.i:p.i+4]) == "true":
		p.i += 4
		return true, true
	case len(p.b)-p.i >= 5 && string(p.b[p.i:p.i+5]) == "false":
		p.i += 5
		return false, true
	}
	return false, false
}

// members reads an object's members, calling member for each key; an
// empty object is fine.
func (p *manifestParser) members(member func(key string) bool) bool {
	if !p.lit('{') {
		return false
	}
	if p.lit('}') {
		return true
	}
	for {
		k, ok := p.str()
		if !ok || !p.lit(':') || !member(k) {
			return false
		}
		if p.lit('}') {
			return true
		}
		if !p.lit(',') {
			return false
		}
	}
}

// elements reads an array, calling elem for each element.
func (p *manifestParser) elements(elem func() bool) bool {
	if !p.lit('[') {
		return false
	}
	if p.lit(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if p.lit(']') {
			return true
		}
		if !p.lit(',') {
			return false
		}
	}
}

func (p *manifestParser) entry() (FileEntry, bool) {
	var e FileEntry
	ok := p.members(func(k string) bool {
		var ok bool
		var n int64
		switch k {
		case "path":
			e.Path, ok = p.str()
		case "mode":
			n, ok = p.int()
			if ok && (n < 0 || n > 1<<32-1) {
				return false
			}
			e.Mode = fs.FileMode(n)
		case "size":
			e.Size, ok = p.int()
		case "digest":
			e.Digest, ok = p.str()
		case "mtime":
			e.ModTime, ok = p.int()
		case "blob":
			e.Blob, ok = p.str()
		case "blob_size":
			e.BlobSize, ok = p.int()
		case "deleted":
			e.Deleted, ok = p.boolean()
		}
		return ok
	})
	return e, ok
}

func (p *manifestParser) manifest() (snapshotRecord, bool) {
	var m snapshotRecord
	ok := p.members(func(k string) bool {
		var ok bool
		var n int64
		switch k {
		case "sessionstore":
			m.Tag, ok = p.str()
		case "full":
			m.Full, ok = p.boolean()
		case "depth":
			n, ok = p.int()
			m.Depth = int(n)
		case "since":
			n, ok = p.int()
			m.Since = int(n)
		case "label":
			m.Label, ok = p.str()
		case "gitignore":
			m.GitIgnore, ok = p.boolean()
		case "ignore":
			m.Ignore = nil
			ok = p.elements(func() bool {
				s, ok := p.str()
				m.Ignore = append(m.Ignore, s)
				return ok
			})
			if ok && m.Ignore == nil {
				m.Ignore = []string{}
			}
		case "files":
			m.Files = nil
			ok = p.elements(func() bool {
				e, ok := p.entry()
				m.Files = append(m.Files, e)
				return ok
			})
			if ok && m.Files == nil {
				m.Files = []FileEntry{}
			}
		}
		return ok
	})
	p.ws()
	return m, ok && p.i == len(p.b)
}
