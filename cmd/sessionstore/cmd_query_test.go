package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// TestQuery: the query command pages newest first, filters, and
// prints the cursor that the next call takes.
func TestQuery(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	top, err := s.Create(ctx, sessionstore.Meta{Name: "top", WorkingDir: "/src/app"})
	require.NoError(t, err)
	var subs []sessionstore.Meta
	for i := range 3 {
		m, err := s.Create(ctx, sessionstore.Meta{Name: fmt.Sprint("sub", i), ParentSession: top.ID, Labels: map[string]string{"role": "reviewer"}})
		require.NoError(t, err)
		subs = append(subs, m)
	}
	require.NoError(t, s.Close())

	status, stdout, stderr := runCmd("query", "-limit", "2", root)
	require.Equal(t, exitOK, status, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3, stdout)
	assert.Regexp(t, `^ID +NAME +CREATED +DEPTH +PARENT +WORKING DIR$`, lines[0])
	assert.Regexp(t, `^`+subs[2].ID.String()+` +sub2 +\S+ +1 +`+top.ID.String()+` +-$`, lines[1])
	assert.Contains(t, lines[2], subs[1].ID.String())
	cursor, ok := strings.CutPrefix(strings.TrimSpace(stderr), "query: more: -cursor ")
	require.True(t, ok, stderr)

	status, stdout, stderr = runCmd("query", "-limit", "2", "-cursor", cursor, root)
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr, "the last page")
	lines = strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3, stdout)
	assert.Regexp(t, `^`+subs[0].ID.String()+` +sub0 `, lines[1])
	assert.Regexp(t, `^`+top.ID.String()+` +top +\S+ +0 +- +/src/app$`, lines[2])

	status, stdout, stderr = runCmd("query", "-json", "-parent", top.ID.String(), "-label", "role=reviewer", root)
	require.Equal(t, exitOK, status, stderr)
	var got []string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var m sessionstore.Meta
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		assert.Equal(t, top.ID, m.ParentSession)
		got = append(got, m.Name)
	}
	assert.Equal(t, []string{"sub2", "sub1", "sub0"}, got)

	status, stdout, _ = runCmd("query", "-cwd", "/nowhere", root)
	assert.Equal(t, exitOK, status)
	assert.Empty(t, stdout)

	for _, args := range [][]string{
		{"query", "-cursor", "nonsense", root},
		{"query", "-limit", "0", root},
		{"query", "-parent", "not-hex", root},
		{"query", "-label", "novalue", root},
		{"query", "-since", "yesterday", root},
	} {
		status, _, stderr := runCmd(args...)
		assert.Equal(t, exitUsage, status, "args %q: %s", args, stderr)
	}
}

// TestQueryParentPrefix: -parent takes a session as every command does, by
// its id, its short id or a unique prefix; a full id is taken as it is.
func TestQueryParentPrefix(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	top, err := s.Create(ctx, sessionstore.Meta{Name: "top"})
	require.NoError(t, err)
	other, err := s.Create(ctx, sessionstore.Meta{Name: "other"})
	require.NoError(t, err)
	sub, err := s.Create(ctx, sessionstore.Meta{Name: "sub", ParentSession: top.ID})
	require.NoError(t, err)
	_, err = s.Create(ctx, sessionstore.Meta{Name: "other's sub", ParentSession: other.ID})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	full := top.ID.String()
	for _, parent := range []string{full, sessionstore.ShortID(top.ID), full[24:30], strings.ToUpper(sessionstore.ShortID(top.ID))} {
		status, stdout, stderr := runCmd("query", "-parent", parent, root)
		require.Equal(t, exitOK, status, "-parent %s: %s", parent, stderr)
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		require.Len(t, lines, 2, "-parent %s: %s", parent, stdout)
		assert.Regexp(t, `^`+sub.ID.String()+` +sub `, lines[1], "-parent %s", parent)
	}

	// A prefix that names no session fails; one that names several says so.
	status, stdout, stderr := runCmd("query", "-parent", "0123abcd", root)
	assert.Equal(t, exitFail, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, `query: -parent: no session in "`+root+`" matches "0123abcd"`)
	status, _, stderr = runCmd("query", "-parent", full[:8], root)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "is ambiguous")
}

// TestQueryDates: -since and -until take a date (midnight UTC), as
// prune's -older-than does, besides an RFC 3339 time and a duration.
func TestQueryDates(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	for _, day := range []string{"2026-01-01T23:59:59Z", "2026-01-02T00:00:00Z", "2026-01-03T12:00:00Z"} {
		at, err := time.Parse(time.RFC3339, day)
		require.NoError(t, err)
		_, err = s.Create(ctx, sessionstore.Meta{Name: day, CreatedAt: at})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"-since", "2026-01-02"}, []string{"2026-01-03T12:00:00Z", "2026-01-02T00:00:00Z"}},
		{[]string{"-until", "2026-01-02"}, []string{"2026-01-01T23:59:59Z"}},
		{[]string{"-since", "2026-01-02", "-until", "2026-01-03"}, []string{"2026-01-02T00:00:00Z"}},
		{[]string{"-since", "2026-01-01T23:59:59Z"}, []string{"2026-01-03T12:00:00Z", "2026-01-02T00:00:00Z", "2026-01-01T23:59:59Z"}},
		{[]string{"-since", "1h"}, nil}, // created months before now
		{[]string{"-until", "1h"}, []string{"2026-01-03T12:00:00Z", "2026-01-02T00:00:00Z", "2026-01-01T23:59:59Z"}},
	} {
		args := append(append([]string{"query", "-json"}, tc.args...), root)
		status, stdout, stderr := runCmd(args...)
		require.Equal(t, exitOK, status, "%q: %s", tc.args, stderr)
		var got []string
		for line := range strings.Lines(stdout) {
			var m sessionstore.Meta
			require.NoError(t, json.Unmarshal([]byte(line), &m), line)
			got = append(got, m.Name)
		}
		assert.Equal(t, tc.want, got, "%q", tc.args)
	}
	for bad, why := range map[string]string{
		"2026-13-01":          "want a time (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration before now (720h)",
		"2026-01-02T00:00:00": "want a time (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration before now (720h)",
		"yesterday":           "want a time (2026-01-02T15:04:05Z), a date (2026-01-02) or a duration before now (720h)",
		"-1h":                 "a negative duration",
	} {
		status, stdout, stderr := runCmd("query", "-since", bad, root)
		assert.Equal(t, exitUsage, status, "-since %s", bad)
		assert.Empty(t, stdout)
		assert.Contains(t, stderr, `invalid value "`+bad+`" for flag -since: `+why, "-since %s", bad)
	}
}
