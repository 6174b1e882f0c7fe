package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

var updateImportGolden = flag.Bool("update-import", false, "rewrite testdata/import-claude.golden")

// claudeFixture is the importer's test project: a session with a broken
// line, a sidechain and a subagent.
var claudeFixture = filepath.Join("..", "..", "importer", "claude", "testdata", "projects", "-tmp-demo")

func TestImportClaude(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store") // made by import
	status, stdout, stderr := runCmd("import", "claude", "-store", root, "-progress", "1", claudeFixture)
	assert.Equal(t, exitFail, status, "a malformed line fails the command")
	assert.Contains(t, stderr, "2 problems in the input (listed above); the rest is imported")
	assert.Equal(t, 3, strings.Count(stderr, " sessions, "), "a progress line per session:\n%s", stderr)
	assert.Contains(t, stderr, "import: 3 sessions, 24 events added, 2 files")

	golden := filepath.Join("testdata", "import-claude.golden")
	got := strings.ReplaceAll(stdout, root, "<root>")
	if *updateImportGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err, "run go test -run TestImportClaude -update-import to make it")
	assert.Equal(t, string(want), got)

	// The sessions are there, for the other commands.
	status, stdout, _ = runCmd("ls", root)
	require.Equal(t, exitOK, status)
	assert.Contains(t, stdout, "Demo session")
	assert.Contains(t, stdout, "Big files")

	// Again: nothing added, the same problems.
	status, stdout, _ = runCmd("import", "claude", "-store", root, "-progress", "0", claudeFixture)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, "  sessions: 3 (0 new)\n  events:   0 added, 24 already stored\n")
}

func TestImportCleanInputSucceeds(t *testing.T) {
	root := filepath.Join(t.TempDir(), "store")
	agent := filepath.Join(claudeFixture, "11111111-1111-4111-8111-111111111111", "subagents", "agent-abc123.jsonl")
	t.Setenv(storeEnv, root)
	status, stdout, stderr := runCmd("import", "claude", agent)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "  sessions: 1 (1 new)\n  events:   5 added, 0 already stored\n  problems: 0\n")
	assert.Empty(t, stderr, "no progress line before 100 sessions")
	s, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	metas, err := s.List(context.Background())
	require.NoError(t, err)
	require.Len(t, metas, 1)
	assert.Equal(t, "Big files", metas[0].Name)
}

func TestImportCommandLine(t *testing.T) {
	t.Setenv(storeEnv, "")
	dir := t.TempDir()
	cases := []struct {
		name   string
		args   []string
		status int
		msg    string
	}{
		{"no source", []string{"import"}, exitUsage, "missing the source (" + sourceNames(", ") + ")"},
		{"unknown source", []string{"import", "vim", "-store", dir, "x"}, exitUsage, `unknown source "vim" (one of: ` + sourceNames(", ") + ")"},
		{"no paths", []string{"import", "claude", "-store", dir}, exitUsage, "missing the paths"},
		{"no store", []string{"import", "claude", claudeFixture}, exitUsage, "missing -store (or $SESSIONSTORE_ROOT)"},
		{"bad progress", []string{"import", "claude", "-store", dir, "-progress", "-1", claudeFixture}, exitUsage, "-progress must be 0 or more"},
		{"missing path", []string{"import", "claude", "-store", dir, filepath.Join(dir, "nope")}, exitFail, "no such file or directory"},
		{"store's parent missing", []string{"import", "claude", "-store", filepath.Join(dir, "a", "b"), claudeFixture}, exitFail, "no store at"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, _, stderr := runCmd(tc.args...)
			assert.Equal(t, tc.status, status, stderr)
			assert.Contains(t, stderr, tc.msg)
		})
	}
}

func TestImportSourcesListed(t *testing.T) {
	assert.Contains(t, strings.Split(sourceNames(","), ","), "claude")
	for name, fn := range importSources {
		assert.NotNil(t, fn, name)
		assert.Contains(t, usage, name, "the usage text names every source")
	}
}
