package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// TestTableLongFields: a session whose name or working directory is
// huge (session.json holds up to 1 MiB) does not make every line of ls and
// query as wide as it: the columns are padded to their widest cell, so one
// 1 MiB name made 50 MB of spaces for 50 sessions. A cell is cut, ending
// in "…"; -json prints the field whole.
func TestTableLongFields(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	// Three fields of 300 KiB: together within session.json's 1 MiB.
	long := strings.Repeat("n", 300<<10)
	longDir := "/" + strings.Repeat("d", 300<<10)
	const n = 20
	for i := range n {
		m := sessionstore.Meta{Name: "short", WorkingDir: "/w", Model: "m"}
		if i == n/2 {
			m = sessionstore.Meta{Name: long, WorkingDir: longDir, Model: long}
		}
		_, err := s.Create(ctx, m)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	for _, cmd := range []string{"ls", "query"} {
		status, stdout, stderr := runCmd(cmd, root)
		require.Equal(t, exitOK, status, stderr)
		lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
		require.Len(t, lines, n+1, "%s: a header and a line per session", cmd)
		assert.Less(t, maxLineLen(stdout), 1000, "%s: lines stay short", cmd)
		assert.Contains(t, stdout, " "+strings.Repeat("n", 20), "%s: the long name's start", cmd)
		assert.Contains(t, stdout, "n… ", "%s: the long name, cut", cmd)
		assert.Contains(t, stdout, " /dd", "%s: the long working dir's start", cmd)

		status, stdout, stderr = runCmd(cmd, "-json", root)
		require.Equal(t, exitOK, status, stderr)
		found := false
		for line := range strings.Lines(stdout) {
			var m sessionstore.Meta
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			if m.Name == long {
				found = true
				assert.Equal(t, longDir, m.WorkingDir, "%s -json", cmd)
			}
		}
		assert.True(t, found, "%s -json: the long name whole", cmd)
	}
}

// TestTableControlCharacters: a value holding a control character, C1
// ones (U+0080 to U+009F: U+009B is a terminal's CSI, U+0085 a line
// break) as C0 ones, is quoted in ls and query, escaped, so that it
// neither breaks the columns nor drives the terminal.
func TestTableControlCharacters(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	names := map[string]string{
		"csi\u009b31mred": `"csi\u009b31mred"`,
		"next\u0085line":  `"next\u0085line"`,
		"esc\x1b[31mred":  `"esc\x1b[31mred"`,
		"tab\there":       `"tab\there"`,
		"plain é ü 名前":    "plain é ü 名前",
	}
	for name := range names {
		_, err := s.Create(ctx, sessionstore.Meta{Name: name, WorkingDir: "/w"})
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	for _, cmd := range []string{"ls", "query"} {
		status, stdout, stderr := runCmd(cmd, root)
		require.Equal(t, exitOK, status, stderr)
		for name, want := range names {
			assert.Contains(t, stdout, "  "+want+"  ", "%s: name %q", cmd, name)
		}
		assert.NotContains(t, stdout, "\u009b", cmd)
		assert.NotContains(t, stdout, "\u0085", cmd)
	}
}
