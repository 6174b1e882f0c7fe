package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
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

// Files of another tool's format are recognised before anything is
// opened: exit status 1, a message that names each and the source that
// reads them, nothing on stdout, and no store made.
func TestImportWrongSource(t *testing.T) {
	piFile := filepath.Join("..", "..", "importer", "pi", "testdata", "tree.jsonl")
	codexFile := filepath.Join("..", "..", "importer", "codex", "testdata", "basic.jsonl")
	cases := []struct {
		source, path, looks, use string
	}{
		{"pi", claudeFixture, "looks like a Claude Code transcript", "sessionstore import claude"},
		{"codex", claudeFixture, "looks like a Claude Code transcript", "sessionstore import claude"},
		{"claude", piFile, "looks like a Pi session", "sessionstore import pi"},
		{"pi", codexFile, "looks like a Codex rollout", "sessionstore import codex"},
	}
	for _, tc := range cases {
		t.Run(tc.source+" of "+filepath.Base(tc.path), func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "store")
			status, stdout, stderr := runCmd("import", tc.source, "-store", root, tc.path)
			assert.Equal(t, exitFail, status)
			assert.Contains(t, stderr, tc.looks)
			assert.Contains(t, stderr, tc.use)
			assert.Contains(t, stderr, "nothing imported")
			assert.Empty(t, stdout)
			_, err := os.Stat(root)
			assert.ErrorIs(t, err, os.ErrNotExist, "no store made")
		})
	}
}

// One bad transcript does not stop the import: its problems are listed,
// every file is imported, and nothing says the import stopped.
func TestImportBadFileDoesNotStop(t *testing.T) {
	dir := t.TempDir()
	line := func(sid, u, parent, ts string) string {
		p := "null"
		if parent != "" {
			p = `"` + parent + `"`
		}
		return `{"type":"user","uuid":"` + u + `","parentUuid":` + p + `,"sessionId":"` + sid + `","timestamp":"` + ts + `","message":{"role":"user","content":"` + u + `"}}` + "\n"
	}
	files := map[string]string{
		"a.jsonl":     line("sa", "a1", "", "2026-01-01T00:00:00Z") + line("sa", "a2", "a1", "2300-01-01T00:00:00Z"),
		"b\xff.jsonl": line("sb", "b1", "", "2026-01-01T00:00:00Z"),
		"c.jsonl":     line("sc", "c1", "", "2026-01-01T00:00:00Z"),
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	root := filepath.Join(t.TempDir(), "store")
	for range 2 {
		status, stdout, stderr := runCmd("import", "claude", "-store", root, "-progress", "0", dir)
		assert.Equal(t, exitFail, status)
		assert.NotContains(t, stderr, "import stopped")
		assert.Contains(t, stderr, "1 problems in the input (listed above); the rest is imported")
		assert.Contains(t, stdout, "  sessions: 3 (")
		assert.Contains(t, stdout, "a.jsonl:2: importer: malformed input: user record a2: timestamp 2300-01-01T00:00:00Z is outside 1970 to 2262")
	}
}

// A compact boundary whose conversation is in an earlier transcript is a
// note, not a problem: exit status 0.
func TestImportBoundaryNoteSucceeds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	lines := `{"type":"system","subtype":"compact_boundary","uuid":"c","parentUuid":null,"logicalParentUuid":"earlier","sessionId":"s","timestamp":"2026-01-01T00:00:02Z","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":1000}}
{"type":"user","isCompactSummary":true,"uuid":"d","parentUuid":"c","sessionId":"s","timestamp":"2026-01-01T00:00:03Z","message":{"role":"user","content":"The summary."}}
{"type":"user","uuid":"e","parentUuid":"d","sessionId":"s","timestamp":"2026-01-01T00:00:04Z","message":{"role":"user","content":"Go on."}}
`
	require.NoError(t, os.WriteFile(path, []byte(lines), 0o644))
	status, stdout, stderr := runCmd("import", "claude", "-store", filepath.Join(t.TempDir(), "store"), path)
	assert.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "  problems: 0\n  notes:    1 (not problems: nothing is lost)\n")
	assert.Contains(t, stdout, path+":1: compact boundary c compacts a conversation not in the file")
}

// cancelOnWrite is a writer that ends a context at its first write.
type cancelOnWrite struct {
	bytes.Buffer
	cancel context.CancelFunc
}

func (w *cancelOnWrite) Write(p []byte) (int, error) {
	w.cancel()
	return w.Buffer.Write(p)
}

// TestImportInterrupted: an import whose context ends (main ends it on
// SIGINT or SIGTERM) stops between sessions, closes the store whole and
// says so, with exit status 1; importing again completes the rest.
func TestImportInterrupted(t *testing.T) {
	dir := t.TempDir()
	for i := range 20 {
		sid := fmt.Sprintf("s%02d", i)
		rec := `{"type":"user","uuid":"` + sid + `-1","parentUuid":null,"sessionId":"` + sid + `","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hello"}}` + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, sid+".jsonl"), []byte(rec), 0o644))
	}
	root := filepath.Join(t.TempDir(), "store")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	stderr := &cancelOnWrite{cancel: cancel}
	status := runContext(ctx, []string{"import", "claude", "-store", root, "-progress", "1", dir}, &stdout, stderr)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr.String(), "import interrupted")

	s, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err, "the store was closed whole")
	metas, err := s.List(context.Background())
	require.NoError(t, err)
	require.NoError(t, s.Close())
	assert.Less(t, len(metas), 20, "the import stopped before the end")
	for _, m := range metas {
		st, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
		require.NoError(t, err)
		evs, err := st.Load(context.Background(), m.ID)
		require.NoError(t, err)
		assert.Len(t, evs, 1, "no session left empty or half written")
		require.NoError(t, st.Close())
	}

	code, out, errOut := runCmd("import", "claude", "-store", root, "-progress", "0", dir)
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "  sessions: 20 (")
}
