package web

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/sessionstore/sessionstore"
)

// Readable names and records
//
// A session imported from a transcript without a title has no name, and a
// custom event's record is whatever JSON its writer chose (an importer
// keeps a line it has no event kind for as it was: {"parentUuid":...}).
// The view shows the first as the agent tools do, by the first prompt,
// and the second by a one-line summary, with the JSON a click away.

// MaxTitle is the most runes of a Title.
const MaxTitle = 80

// titleOf returns the title of a session whose nodes are nodes: the
// preview of its first user message that a person typed, that is, whose
// text does not begin as the wrappers tools put around what they add to
// a transcript ("<command-name>", "<local-command-stdout>", the
// "Caveat: " note); else the first user message's preview; "" when the
// session has no user message with text. It reads no record: previews
// are in the nodes.
func titleOf(nodes []sessionstore.Node) string {
	first := ""
	for _, n := range nodes {
		if n.Kind != sessionstore.KindMessage || n.Role != sessionstore.RoleUser || n.Preview == "" {
			continue
		}
		if !toolWrapped(n.Preview) {
			return cutRunes(n.Preview, MaxTitle)
		}
		if first == "" {
			first = n.Preview
		}
	}
	return cutRunes(first, MaxTitle)
}

// toolWrapped reports whether a user message's text is one a tool wrote
// rather than a person: it starts with a tag, or with Claude Code's note
// before local commands' output.
func toolWrapped(text string) bool {
	return strings.HasPrefix(text, "<") || strings.HasPrefix(text, "Caveat: ")
}

// cutRunes returns s cut to at most n runes, the last an ellipsis when
// something was cut.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, k := 0, 0
	for i = range s {
		if k == n-1 {
			break
		}
		k++
	}
	return strings.TrimRight(s[:i], " ") + "…"
}

// summaryKinds are the members that name what a record is, most telling
// first; summaryText are those that hold its text.
var (
	summaryKinds = []string{"type", "subtype", "kind", "event", "name", "level", "operation", "label"}
	summaryText  = []string{"content", "text", "message", "summary", "description", "title", "output", "error"}
)

// MaxSummary is the most runes of a Summary.
const MaxSummary = 160

// shortRecord is the length under which an object without a member
// Summary knows is shown as its JSON rather than by its members' names.
const shortRecord = 80

// Summary returns a one-line summary of a custom record (its JSON): for
// an object, the values of the members that name what it is ("type",
// "subtype", "kind", ...) joined by " · ", then the first member that holds
// text ("content", "text", "message", ...) as "member: text", then how
// many other members it has (an object without any of those members:
// its JSON when shorter than 80 bytes, else its first members' names);
// for a string, the string; for anything else, the JSON. Control
// characters and whitespace runs are one space, and the whole is at most
// MaxSummary runes. A record that is not JSON is summed up as its bytes,
// cut.
func Summary(record json.RawMessage) string {
	rec := bytes.TrimSpace(record)
	if len(rec) == 0 {
		return ""
	}
	switch rec[0] {
	case '{':
		var m map[string]json.RawMessage
		if err := json.Unmarshal(rec, &m); err != nil {
			break
		}
		var parts []string
		used := 0
		for _, k := range summaryKinds {
			if s, ok := scalar(m[k]); ok && s != "" {
				if k == "type" || k == "subtype" || k == "kind" || k == "event" {
					parts = append(parts, s)
				} else {
					parts = append(parts, k+" "+s)
				}
				used++
			}
		}
		for _, k := range summaryText {
			if s := textOf(m[k]); s != "" {
				parts = append(parts, k+": "+s)
				used++
				break
			}
		}
		switch rest := len(m) - used; {
		case used == 0 && len(rec) <= shortRecord:
			return oneLine(string(rec), MaxSummary) // short enough to read as it is
		case used == 0:
			parts = append(parts, "{"+strings.Join(firstKeys(rec, 4), ", ")+"}")
		case rest == 1:
			parts = append(parts, "+1 more field")
		case rest > 1:
			parts = append(parts, "+"+strconv.Itoa(rest)+" more fields")
		}
		return oneLine(strings.Join(parts, " · "), MaxSummary)
	case '"':
		var s string
		if json.Unmarshal(rec, &s) == nil {
			return oneLine(s, MaxSummary)
		}
	}
	return oneLine(string(rec), MaxSummary)
}

// scalar returns a JSON string's text, or a number's or boolean's JSON.
func scalar(v json.RawMessage) (string, bool) {
	if len(v) == 0 {
		return "", false
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) != nil {
			return "", false
		}
		return oneLine(s, 60), true
	case '{', '[', 'n':
		return "", false
	}
	return string(v), true
}

// textOf returns the text a member holds: a string's, or the "text"
// members of the objects of an array (the content blocks of a message),
// or the "content" or "text" member of an object.
func textOf(v json.RawMessage) string {
	if len(v) == 0 {
		return ""
	}
	switch v[0] {
	case '"':
		var s string
		if json.Unmarshal(v, &s) == nil {
			return oneLine(s, MaxSummary)
		}
	case '[':
		var blocks []map[string]json.RawMessage
		if json.Unmarshal(v, &blocks) != nil {
			return ""
		}
		var texts []string
		for _, b := range blocks {
			if s, ok := scalar(b["text"]); ok && s != "" {
				texts = append(texts, s)
			}
		}
		return oneLine(strings.Join(texts, " "), MaxSummary)
	case '{':
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) != nil {
			return ""
		}
		if s := textOf(m["content"]); s != "" {
			return s
		}
		return textOf(m["text"])
	}
	return ""
}

// firstKeys returns the first n member names of the object rec, in the
// order they are written.
func firstKeys(rec []byte, n int) []string {
	dec := json.NewDecoder(bytes.NewReader(rec))
	var keys []string
	if _, err := dec.Token(); err != nil {
		return nil
	}
	for dec.More() && len(keys) < n {
		t, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := t.(string)
		keys = append(keys, k)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
	}
	if dec.More() {
		keys = append(keys, "…")
	}
	return keys
}

// oneLine returns s with control characters and whitespace runs as one
// space, trimmed, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return cutRunes(strings.Join(strings.Fields(s), " "), n)
}
