package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// searchFixture is a store whose events hold known words.
type searchFixture struct {
	root                  string
	top, sub, other       uuid.UUID
	topFix, topCall       uuid.UUID // top: a user message, a tool result
	subFix, subNote       uuid.UUID // sub (a subagent of top, labelled): an assistant message, a custom event
	otherFix, otherPhrase uuid.UUID // other (in /src/b): user messages
}

func newSearchFixture(t *testing.T) searchFixture {
	t.Helper()
	ctx := context.Background()
	f := searchFixture{root: t.TempDir()}
	s, err := sessionstore.Open(f.root, nil)
	require.NoError(t, err)
	appendEv := func(session uuid.UUID, ev sessionstore.Event) uuid.UUID {
		out, err := s.Append(ctx, session, ev)
		require.NoError(t, err)
		return out.ID
	}
	top, err := s.Create(ctx, sessionstore.Meta{Name: "top", WorkingDir: "/src/a"})
	require.NoError(t, err)
	f.top = top.ID
	f.topFix = appendEv(f.top, sessionstore.UserText("Where did we fix the Migration of the orders table?"))
	appendEv(f.top, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "grep", Arguments: []byte(`{"pattern":"ALTER TABLE"}`)}))
	f.topCall = appendEv(f.top, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "db/migration_0042.sql: ALTER TABLE orders"}))
	appendEv(f.top, sessionstore.AssistantText("Nothing to see here."))

	sub, err := s.Create(ctx, sessionstore.Meta{Name: "sub", ParentSession: f.top, Labels: map[string]string{"agent": "reviewer"}})
	require.NoError(t, err)
	f.sub = sub.ID
	f.subFix = appendEv(f.sub, sessionstore.AssistantText("The migration fix is in db, migration after migration."))
	f.subNote = appendEv(f.sub, sessionstore.NewEvent(sessionstore.KindCustom, sessionstore.RoleNone, map[string]string{"note": "a migration checkpoint\x1bwith an escape"}))

	other, err := s.Create(ctx, sessionstore.Meta{Name: "other", WorkingDir: "/src/b"})
	require.NoError(t, err)
	f.other = other.ID
	f.otherFix = appendEv(f.other, sessionstore.UserText("migration"))
	f.otherPhrase = appendEv(f.other, sessionstore.UserText("Open the file, then the other file."))
	require.NoError(t, s.Close())
	return f
}

// searchLines runs search and returns its table's data lines (the header
// checked and dropped) and its stderr.
func searchLines(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	status, stdout, stderr := runCmd(append([]string{"search"}, args...)...)
	require.Equal(t, exitOK, status, stderr)
	if stdout == "" {
		return nil, stderr
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Regexp(t, `^SESSION +EVENT +KIND +ROLE +RANK +SNIPPET$`, lines[0])
	return lines[1:], stderr
}

// hitEvents returns the event id of each table line.
func hitEvents(t *testing.T, lines []string) []uuid.UUID {
	t.Helper()
	var out []uuid.UUID
	for _, l := range lines {
		f := strings.Fields(l)
		require.GreaterOrEqual(t, len(f), 6, l)
		id, err := uuid.Parse(f[1])
		require.NoError(t, err, l)
		out = append(out, id)
	}
	return out
}

// TestSearch: search prints the matching events best first (session,
// event, kind, role, rank, snippet), only those, and narrows them by the
// session filters, kind and role.
func TestSearch(t *testing.T) {
	f := newSearchFixture(t)

	// Every event holding the word, whatever its case, and no other:
	// migration_0042 is the word migration then 0042.
	lines, stderr := searchLines(t, f.root, "migration")
	assert.Empty(t, stderr)
	assert.ElementsMatch(t, []uuid.UUID{f.topFix, f.topCall, f.subFix, f.subNote, f.otherFix}, hitEvents(t, lines))
	// Best first: the message that says it three times above those that
	// say it once.
	require.Len(t, lines, 5)
	all := lines
	assert.Equal(t, f.subFix, hitEvents(t, lines)[0])
	ranks := rankColumn(t, lines)
	for i := 1; i < len(ranks); i++ {
		assert.GreaterOrEqual(t, ranks[i-1], ranks[i], "ranks in order: %q", lines)
	}
	assert.Regexp(t, `^`+f.other.String()+` +`+f.otherFix.String()+` +message +user +\d+\.\d{3} +migration$`, lineOf(t, strings.Join(lines, "\n"), f.otherFix.String()))
	assert.Regexp(t, ` +custom +- +\d+\.\d{3} +"a migration checkpoint\\x1bwith an escape"$`, lineOf(t, strings.Join(lines, "\n"), f.subNote.String()), "a role-less event shows -; a snippet with a control character quoted")
	assert.Contains(t, lineOf(t, strings.Join(lines, "\n"), f.topFix.String()), "Where did we fix the Migration of the orders table?")

	// Words are all required, and the arguments after the root are one
	// text; a phrase needs its words in order.
	lines, _ = searchLines(t, f.root, "fix", "migration")
	assert.ElementsMatch(t, []uuid.UUID{f.topFix, f.subFix}, hitEvents(t, lines))
	lines, _ = searchLines(t, f.root, `"migration fix"`)
	assert.Equal(t, []uuid.UUID{f.subFix}, hitEvents(t, lines))
	lines, _ = searchLines(t, f.root, `"the file"`)
	assert.Equal(t, []uuid.UUID{f.otherPhrase}, hitEvents(t, lines))

	// Kind and role, repeatable; "none" is the empty role.
	lines, _ = searchLines(t, f.root, "-kind", "tool_result", "migration")
	assert.Equal(t, []uuid.UUID{f.topCall}, hitEvents(t, lines))
	lines, _ = searchLines(t, f.root, "migration", "-role", "user", "-role", "none")
	assert.ElementsMatch(t, []uuid.UUID{f.topFix, f.otherFix, f.subNote}, hitEvents(t, lines))
	lines, _ = searchLines(t, f.root, "migration", "-kind", "message", "-role", "assistant")
	assert.Equal(t, []uuid.UUID{f.subFix}, hitEvents(t, lines))

	// The session filters: working directory, label, parent (by a
	// prefix of its id).
	lines, _ = searchLines(t, f.root, "-cwd", "/src/b", "migration")
	assert.Equal(t, []uuid.UUID{f.otherFix}, hitEvents(t, lines))
	lines, _ = searchLines(t, f.root, "-label", "agent=reviewer", "migration")
	assert.ElementsMatch(t, []uuid.UUID{f.subFix, f.subNote}, hitEvents(t, lines))
	lines, _ = searchLines(t, f.root, "-parent", f.top.String()[:13], "migration")
	assert.ElementsMatch(t, []uuid.UUID{f.subFix, f.subNote}, hitEvents(t, lines))
	lines, _ = searchLines(t, f.root, "-since", "1h", "-until", "2000-01-01", "migration")
	assert.Empty(t, lines, "no session created before 2000")

	// The limit: the best hits, and a note that there may be more.
	lines, stderr = searchLines(t, f.root, "-limit", "2", "migration")
	assert.Equal(t, hitEvents(t, all)[:2], hitEvents(t, lines))
	assert.Contains(t, stderr, "search: 2 hits shown, there may be more")

	// Nothing found: nothing printed, a note, success.
	lines, stderr = searchLines(t, f.root, "nonesuch")
	assert.Empty(t, lines)
	assert.Equal(t, "search: no event matches\n", stderr)
}

// rankColumn returns each table line's rank.
func rankColumn(t *testing.T, lines []string) []float64 {
	t.Helper()
	re := regexp.MustCompile(` (\d+\.\d{3}) `)
	var out []float64
	for _, l := range lines {
		m := re.FindStringSubmatch(l)
		require.NotNil(t, m, l)
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

// TestSearchJSON: -json prints one object a line with every field of a
// hit.
func TestSearchJSON(t *testing.T) {
	f := newSearchFixture(t)
	status, stdout, stderr := runCmd("search", "-json", f.root, "orders")
	require.Equal(t, exitOK, status, stderr)
	var got []map[string]any
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var m map[string]any
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		got = append(got, m)
	}
	require.Len(t, got, 2, stdout)
	byEvent := map[string]map[string]any{}
	for _, m := range got {
		byEvent[m["event"].(string)] = m
		assert.Equal(t, f.top.String(), m["session"])
		assert.Positive(t, m["rank"])
		assert.NotEmpty(t, m["time"])
	}
	res := byEvent[f.topCall.String()]
	require.NotNil(t, res, stdout)
	assert.Equal(t, "tool_result", res["kind"])
	assert.Equal(t, "tool", res["role"])
	assert.Contains(t, res["snippet"], "ALTER TABLE orders")
	msg := byEvent[f.topFix.String()]
	require.NotNil(t, msg, stdout)
	assert.Equal(t, "user", msg["role"])
}

// TestSearchBadCommandLines: a bad command line or query is a usage
// error (status 2) that says what is wrong, before anything is read; a
// root without a store is a failure (status 1).
func TestSearchBadCommandLines(t *testing.T) {
	f := newSearchFixture(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{f.root}, "missing arguments"},
		{[]string{"-limit", "0", f.root, "x"}, "-limit 0: want from 1 to 10000 hits"},
		{[]string{"-limit", "10001", f.root, "x"}, "-limit 10001"},
		{[]string{"-kind", "bogus", f.root, "x"}, `unknown kind "bogus"`},
		{[]string{"-role", "robot", f.root, "x"}, `unknown role "robot"`},
		{[]string{f.root, "..."}, "no word to search for"},
		{[]string{f.root, `"unclosed`}, "double quote"},
		{[]string{f.root, strings.Repeat("w ", 3000)}, "more than 4096"},
		{[]string{"-parent", "xyz", f.root, "x"}, `-parent "xyz" is neither an id nor an id prefix`},
		{[]string{"-since", "yesterday", f.root, "x"}, "invalid value"},
	} {
		status, stdout, stderr := runCmd(append([]string{"search"}, tc.args...)...)
		assert.Equal(t, exitUsage, status, "%q: %s", tc.args, stderr)
		assert.Empty(t, stdout, "%q", tc.args)
		assert.Contains(t, stderr, tc.want, "%q", tc.args)
		assert.Contains(t, stderr, "usage: sessionstore search", "%q", tc.args)
	}

	// No store there.
	empty := t.TempDir()
	status, stdout, stderr := runCmd("search", empty, "x")
	assert.Equal(t, exitFail, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "search: ")

	// A -parent prefix that names no session fails.
	status, _, stderr = runCmd("search", "-parent", "ffffffff", f.root, "x")
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "-parent:")

	// Nothing was written: the root holds what it held.
	_, err := os.Stat(filepath.Join(empty, "sessionstore.json"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}
