package pi

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

func writeFile(t *testing.T, dir, content string) string {
	t.Helper()
	path := filepath.Join(dir, "s.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

// loaded renders what Load returns in piContext's terms.
func loaded(t *testing.T, st *sessionstore.Store, s *importer.Session) []string {
	t.Helper()
	events, err := st.Load(context.Background(), s.Meta.ID)
	require.NoError(t, err)
	var got []string
	for _, ev := range events {
		if r := render(t, ev); r != "" {
			got = append(got, r)
		}
	}
	return got
}

func typedLine(typ, id, parent, rest string) string {
	p := "null"
	if parent != "" {
		p = fmt.Sprintf("%q", parent)
	}
	return fmt.Sprintf(`{"type":%q,"id":%q,"parentId":%s,"timestamp":"2025-01-01T00:00:02Z"%s}`+"\n", typ, id, p, rest)
}

func assistantLine(id, parent, text string) string {
	return typedLine("message", id, parent, fmt.Sprintf(`,"message":{"role":"assistant","content":[{"type":"text","text":%q}],"model":"m"}`, text))
}

// importCompare imports content as a Pi file and checks that Load is the
// context Pi rebuilds from it and HEAD is Pi's leaf (the last entry).
func importCompare(t *testing.T, content string) (*sessionstore.Store, *importer.Session, string) {
	t.Helper()
	ctx := context.Background()
	path := writeFile(t, t.TempDir(), content)
	st := openStore(t)
	rep, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	s, _, err := Read(path)
	require.NoError(t, err)
	checkSession(t, s)
	assert.Equal(t, piContext(t, path), loaded(t, st, s))
	head, err := st.Head(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Equal(t, s.Head, head)
	return st, s, path
}

// Pi's leaf after a reopen is the last entry of the file, even when the
// user had navigated elsewhere (branch without summary) before: here the
// last entry is on the first branch again.
func TestLeafIsLastEntryNotLastBranch(t *testing.T) {
	content := hdr +
		entryLine("u1", "", "one") + assistantLine("a1", "u1", "r1") +
		entryLine("u2", "a1", "two") + assistantLine("a2", "u2", "r2") +
		entryLine("u3", "a1", "three, a branch") + assistantLine("a3", "u3", "r3") +
		typedLine("label", "l1", "a2", `,"targetId":"u2","label":"back"`)
	importCompare(t, content)
}

// Re-editing the first user message in Pi's tree view resets the leaf
// (resetLeaf, or branchWithSummary(null) with fromId "root"): the next
// entry is a second root, and Pi's context is that second tree.
func TestSecondRootIsPisContext(t *testing.T) {
	for name, content := range map[string]string{
		"resetLeaf": hdr +
			entryLine("u1", "", "first try") + assistantLine("a1", "u1", "r1") +
			entryLine("u2", "", "second try") + assistantLine("a2", "u2", "r2"),
		"branchWithSummary": hdr +
			entryLine("u1", "", "first try") + assistantLine("a1", "u1", "r1") +
			typedLine("branch_summary", "b1", "", `,"fromId":"root","summary":"tried once"`) +
			entryLine("u2", "b1", "second try") + assistantLine("a2", "b1x", "r2"),
	} {
		t.Run(name, func(t *testing.T) {
			content = strings.ReplaceAll(content, `"b1x"`, `"u2"`)
			st, s, _ := importCompare(t, content)
			nodes, err := st.Tree(context.Background(), s.Meta.ID)
			require.NoError(t, err)
			assert.Len(t, nodes, len(s.Events), "every entry is kept")
		})
	}
}

// A branch summary as Pi writes it: the child of the navigation target,
// with fromId the target too (branchWithSummary). The abandoned head is
// the leaf Pi left, the entry appended before the summary, not the
// target on the new path.
func TestBranchSummaryAbandonedHead(t *testing.T) {
	content := hdr +
		entryLine("u1", "", "one") + assistantLine("a1", "u1", "r1") +
		entryLine("u2", "a1", "approach A") + assistantLine("a2", "u2", "A failed") +
		typedLine("branch_summary", "b1", "a1", `,"fromId":"a1","summary":"A failed"`) +
		entryLine("u3", "b1", "approach B")
	st, s, _ := importCompare(t, content)
	events, err := st.Load(context.Background(), s.Meta.ID)
	require.NoError(t, err)
	var rec sessionstore.BranchSummaryRecord
	for _, ev := range events {
		if ev.Kind == sessionstore.KindBranchSummary {
			rec, err = ev.BranchSummary()
			require.NoError(t, err)
		}
	}
	want := s.Events[4].ID // a2, after the header
	assert.Equal(t, want, rec.AbandonedHead)
	for _, ev := range events {
		assert.NotEqual(t, ev.ID, rec.AbandonedHead, "the abandoned head is not on the active path")
	}
}

// A compaction whose firstKeptEntryId is on another branch: Pi keeps
// nothing verbatim (the id is not on the path).
func TestCompactionFirstKeptOnOtherBranch(t *testing.T) {
	content := hdr +
		entryLine("u1", "", "one") + assistantLine("a1", "u1", "r1") +
		entryLine("u2", "a1", "two") + assistantLine("a2", "u2", "r2") +
		entryLine("u3", "a1", "three") + assistantLine("a3", "u3", "r3") +
		typedLine("compaction", "c1", "a3", `,"summary":"sum","firstKeptEntryId":"u2","tokensBefore":10`) +
		entryLine("u4", "c1", "four")
	importCompare(t, content)
}

// Line endings and sizes: CRLF lines, a last line without a newline, a
// line over 1 MiB (beyond bufio.Scanner's default), unicode.
func TestLinesOfEveryShape(t *testing.T) {
	big := strings.Repeat("ü€", 220_000) // 1.1 MB of UTF-8
	lines := func(text string) string {
		return hdr + entryLine("u1", "", "héllo") + assistantLine("a1", "u1", text) + entryLine("u2", "a1", "last")
	}
	t.Run("crlf", func(t *testing.T) {
		importCompare(t, strings.ReplaceAll(lines("ü€"), "\n", "\r\n"))
	})
	t.Run("no final newline", func(t *testing.T) {
		importCompare(t, strings.TrimSuffix(lines("ü€"), "\n"))
	})
	t.Run("big line", func(t *testing.T) {
		st, s, _ := importCompare(t, lines(big))
		got := loaded(t, st, s)
		require.Len(t, got, 3)
		assert.Contains(t, got[1], big)
	})
}

// An empty file is reported; a file with only a header is a session
// without events, imported once.
func TestEmptyAndHeaderOnly(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	empty := writeFile(t, t.TempDir(), "")
	rep, err := Import(ctx, st, []string{empty}, nil)
	require.NoError(t, err)
	require.Len(t, rep.Errors, 1)
	var le *importer.LineError
	assert.ErrorAs(t, rep.Errors[0], &le)
	assert.Equal(t, 0, rep.Sessions)

	only := writeFile(t, t.TempDir(), hdr)
	for i := range 2 {
		rep, err = Import(ctx, st, []string{only}, nil)
		require.NoError(t, err)
		assert.Empty(t, rep.Errors)
		assert.Equal(t, 1, rep.Sessions)
		assert.Equal(t, i == 0, rep.Created == 1)
		assert.Equal(t, 1-i, rep.Added, "the header's event, once")
	}
}

// A file that grew on another branch after the first import: the second
// import adds only the new entries, and Load is Pi's context then.
func TestReimportAfterGrowthOnOtherBranch(t *testing.T) {
	ctx := context.Background()
	first := hdr +
		entryLine("u1", "", "one") + assistantLine("a1", "u1", "r1") +
		entryLine("u2", "a1", "two") + assistantLine("a2", "u2", "r2")
	st, s, path := importCompare(t, first)
	n := len(s.Events)
	grown := first + typedLine("branch_summary", "b1", "a1", `,"fromId":"a1","summary":"two was wrong"`) +
		entryLine("u3", "b1", "three") + assistantLine("a3", "u3", "r3")
	require.NoError(t, os.WriteFile(path, []byte(grown), 0o644))
	rep, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, n, rep.Existing)
	assert.Equal(t, 3, rep.Added)
	s2, _, err := Read(path)
	require.NoError(t, err)
	assert.Equal(t, piContext(t, path), loaded(t, st, s2))
	head, err := st.Head(ctx, s2.Meta.ID)
	require.NoError(t, err)
	assert.Equal(t, s2.Head, head)
	rep, err = Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Equal(t, 0, rep.Added)
}

// The same file imported twice at once into one store: both imports
// succeed without errors and the session holds each event once.
func TestConcurrentImportSameFile(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join("testdata", "tree.jsonl")
	st := openStore(t)
	var wg sync.WaitGroup
	reps := make([]importer.Report, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() { reps[i], errs[i] = Import(ctx, st, []string{path}, nil) })
	}
	wg.Wait()
	s, _, err := Read(path)
	require.NoError(t, err)
	for i := range 2 {
		require.NoError(t, errs[i])
		assert.Empty(t, reps[i].Errors)
	}
	nodes, err := st.Tree(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Len(t, nodes, len(s.Events))
	assert.Equal(t, piContext(t, path), loaded(t, st, s))
}

// A file whose name is not valid UTF-8 (Linux allows it) is imported, and
// does not stop the import of the files after it.
func TestFileNameNotUTF8(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a\xff.jsonl"), []byte(hdr+entryLine("u1", "", "one")), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(strings.Replace(hdr, `"id":"s"`, `"id":"s2"`, 1)+entryLine("u1", "", "one")), 0o644))
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{dir}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, 2, rep.Sessions)
}
