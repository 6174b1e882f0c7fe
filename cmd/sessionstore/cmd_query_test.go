package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
		{"query", "-parent", "abc", root},
		{"query", "-label", "novalue", root},
		{"query", "-since", "yesterday", root},
	} {
		status, _, stderr := runCmd(args...)
		assert.Equal(t, exitUsage, status, "args %q: %s", args, stderr)
	}
}
