package codex

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeRollout(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rollout-x.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func userLine(text string) string {
	return itemLine(fmt.Sprintf(`{"type":"message","role":"user","content":[{"type":"input_text","text":%q}]}`, text))
}

func assistantLine(text string) string {
	return itemLine(fmt.Sprintf(`{"type":"message","role":"assistant","content":[{"type":"output_text","text":%q}]}`, text))
}

// loadedHistory renders Load in codexHistory's terms, the compaction
// (if any) dropped.
func loadedHistory(t *testing.T, st *sessionstore.Store, s *importer.Session) []string {
	t.Helper()
	events, err := st.Load(context.Background(), s.Meta.ID)
	require.NoError(t, err)
	var got []string
	for _, ev := range events {
		if ev.Kind == sessionstore.KindCompaction {
			continue
		}
		if r := render(t, ev); r != "" {
			got = append(got, r)
		}
	}
	return got
}

func importCompare(t *testing.T, st *sessionstore.Store, path string) (importer.Report, *importer.Session) {
	t.Helper()
	rep, err := Import(context.Background(), st, []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	s, _, err := Read(path)
	require.NoError(t, err)
	checkSession(t, s)
	want, _, _ := codexHistory(t, path)
	assert.Equal(t, want, loadedHistory(t, st, s))
	head, err := st.Head(context.Background(), s.Meta.ID)
	require.NoError(t, err)
	assert.Equal(t, s.Head, head)
	return rep, s
}

// CRLF lines, no final newline, a line over 1 MiB, unicode.
func TestLinesOfEveryShape(t *testing.T) {
	big := strings.Repeat("ü€", 220_000) // 1.1 MB of UTF-8
	lines := func(text string) string { return meta + userLine("héllo") + assistantLine(text) + userLine("last") }
	for name, c := range map[string]struct{ content, text string }{
		"crlf":             {strings.ReplaceAll(lines("ü€"), "\n", "\r\n"), "ü€"},
		"no final newline": {strings.TrimSuffix(lines("ü€"), "\n"), "ü€"},
		"big line":         {lines(big), big},
	} {
		t.Run(name, func(t *testing.T) {
			st := openStore(t)
			_, s := importCompare(t, st, writeRollout(t, c.content))
			got := loadedHistory(t, st, s)
			require.Len(t, got, 3)
			assert.Contains(t, got[1], c.text)
		})
	}
}

// An empty file is reported; a rollout of only its session_meta is a
// session with one event, imported once.
func TestEmptyAndMetaOnly(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	rep, err := Import(ctx, st, []string{writeRollout(t, "")}, nil)
	require.NoError(t, err)
	require.Len(t, rep.Errors, 1)
	var le *importer.LineError
	assert.ErrorAs(t, rep.Errors[0], &le)
	assert.Equal(t, 0, rep.Sessions)

	only := writeRollout(t, meta)
	for i := range 2 {
		rep, err = Import(ctx, st, []string{only}, nil)
		require.NoError(t, err)
		assert.Empty(t, rep.Errors)
		assert.Equal(t, 1, rep.Sessions)
		assert.Equal(t, 1-i, rep.Added)
	}
}

// A rollout read while Codex writes it: the last line is torn, reported,
// and imported whole by the next import along with what followed; a
// rollback then branches, and importing again adds nothing.
func TestReimportAfterTornLineAndRollback(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	whole := meta + userLine("one") + assistantLine("r1") + userLine("two") + assistantLine("r2")
	path := writeRollout(t, whole[:len(whole)-20])
	rep, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	require.Len(t, rep.Errors, 1)
	var le *importer.LineError
	require.ErrorAs(t, rep.Errors[0], &le)
	assert.Equal(t, 5, le.Line)
	assert.Equal(t, 4, rep.Added)

	grown := whole + `{"timestamp":"2025-01-01T00:00:02Z","type":"event_msg","payload":{"type":"thread_rolled_back","num_turns":1}}` + "\n" + userLine("three") + assistantLine("r3")
	require.NoError(t, os.WriteFile(path, []byte(grown), 0o644))
	rep, s := importCompare(t, st, path)
	assert.Equal(t, 4, rep.Added, "the torn line, the rollback marker and two items")
	assert.Equal(t, 4, rep.Existing)
	nodes, err := st.Tree(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Len(t, nodes, len(s.Events))

	rep, err = Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Added)
}

// The same rollout imported twice at once into one store.
func TestConcurrentImportSameFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join("testdata", "rollback.jsonl")
	st := openStore(t)
	var wg sync.WaitGroup
	reps := make([]importer.Report, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { reps[i], errs[i] = Import(ctx, st, []string{path}, nil) })
	}
	wg.Wait()
	for i := range 2 {
		require.NoError(t, errs[i])
		assert.Empty(t, reps[i].Errors)
	}
	s, _, err := Read(path)
	require.NoError(t, err)
	nodes, err := st.Tree(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Len(t, nodes, len(s.Events))
	want, _, _ := codexHistory(t, path)
	assert.Equal(t, want, loadedHistory(t, st, s))
}

// A file whose name is not valid UTF-8 (Linux allows it) is imported, and
// does not stop the import of the files after it; without a session_meta
// its name is the session's.
func TestFileNameNotUTF8(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a\xff.jsonl"), []byte(meta+userLine("one")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b\xff.jsonl"), []byte(userLine("no meta")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "c.jsonl"), []byte(strings.Replace(meta, `"id":"s1"`, `"id":"s2"`, 1)+userLine("two")), 0o644))
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{dir}, nil)
	require.NoError(t, err)
	assert.Len(t, rep.Errors, 1, "the missing session_meta")
	assert.Equal(t, 3, rep.Sessions)
}
