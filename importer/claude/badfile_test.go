package claude

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recIn is rec of the Claude session sid.
func recIn(sid, u, p string, s int) string {
	return strings.Replace(rec(u, p, s), `"sessionId":"s"`, `"sessionId":"`+sid+`"`, 1)
}

// One bad transcript (or one bad record) is reported for its file, and
// every other file is imported; no session is left empty, and importing
// again reports the same and completes the rest, every time.
func TestBadFileDoesNotStopTheImport(t *testing.T) {
	cases := []struct {
		name  string
		file  string // the name of the first file
		lines []string
		opts  *sessionstore.Options
		a     int   // events of its session, 0 for none
		bad   []int // lines reported; nil: one problem of the file
	}{
		{"record after 2262", "a", []string{recIn("sa", "a", "", 0), strings.Replace(recIn("sa", "b", "a", 1), "2026-01-01", "2300-01-01", 1), recIn("sa", "c", "b", 2)}, nil, 2, []int{2, 3}},
		{"first record before 1970", "a", []string{strings.Replace(recIn("sa", "a", "", 0), "2026-01-01", "1960-01-01", 1), recIn("sa", "b", "a", 1)}, nil, 1, []int{1, 2}},
		{"file name not UTF-8", "a\xff", []string{recIn("sa", "a", "", 0), recIn("sa", "b", "a", 1)}, nil, 2, []int{}},
		{"session id from a file name not UTF-8", "a\xff", []string{strings.Replace(rec("a", "", 0), `"sessionId":"s",`, "", 1)}, nil, 1, []int{}},
		{"record over the store's limit", "a", []string{recIn("sa", "a", "", 0), recIn("sa", strings.Repeat("x", 2000), "a", 1)}, &sessionstore.Options{MaxRecordSize: 1000}, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			a := writeLines(t, dir, tc.file, tc.lines...)
			writeLines(t, dir, "b", recIn("sb", "a", "", 0), recIn("sb", "b", "a", 1))
			st, err := sessionstore.Open(t.TempDir(), tc.opts)
			require.NoError(t, err)
			defer st.Close()
			for range 2 {
				rep, err := Import(ctx, st, []string{dir}, nil)
				require.NoError(t, err, "a problem of one file does not stop the import")
				if tc.bad != nil {
					lines := []int{}
					for _, e := range rep.Errors {
						var le *importer.LineError
						if assert.ErrorAs(t, e, &le, "%v", e) {
							assert.Equal(t, a, le.Path)
							lines = append(lines, le.Line)
						}
					}
					assert.Equal(t, tc.bad, lines, "%v", rep.Errors)
				} else if assert.Len(t, rep.Errors, 1) {
					assert.ErrorIs(t, rep.Errors[0], sessionstore.ErrRecordTooLarge)
					assert.Contains(t, rep.Errors[0].Error(), a)
				}
				metas, err := st.List(ctx)
				require.NoError(t, err)
				want := 1
				if tc.a > 0 {
					want = 2
				}
				require.Len(t, metas, want, "b imported, a too unless refused")
				for _, m := range metas {
					for k, v := range m.Labels {
						assert.True(t, utf8.ValidString(v), "label %s: %q", k, v)
					}
					nodes, err := st.Tree(ctx, m.ID)
					require.NoError(t, err)
					assert.NotEmpty(t, nodes, "no session left empty")
					if m.Labels["claude_session_id"] != "sb" {
						assert.Len(t, nodes, tc.a)
					}
				}
			}
		})
	}
}

// A line longer than importer.MaxLineSize is reported and left out
// without being held whole, and the lines around it are read.
func TestReadLineTooLong(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s.jsonl")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = f.WriteString(rec("a", "", 0) + "\n" + `{"type":"user","message":{"content":"`)
	require.NoError(t, err)
	chunk := []byte(strings.Repeat("x", 1<<20))
	for range importer.MaxLineSize>>20 + 1 {
		_, err = f.Write(chunk)
		require.NoError(t, err)
	}
	_, err = f.WriteString(`"}}` + "\n" + rec("b", "a", 1) + "\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())
	file, err := Read(path)
	require.NoError(t, err)
	require.Len(t, file.Errors, 1)
	assert.ErrorIs(t, file.Errors[0], importer.ErrLineTooLong)
	assert.Equal(t, 2, lineOf(t, file.Errors[0]))
	require.Len(t, file.Sessions, 1)
	assert.Len(t, file.Sessions[0].Events, 2)
}

// Files of another tool are recognised, one problem a file that says
// what they look like, and nothing of them is written.
func TestOtherFormatsAreRecognised(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	writeLines(t, dir, "pi", `{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}`, `{"type":"message","id":"e1","parentId":null,"timestamp":"2025-01-01T00:00:01Z","message":{"role":"user","content":"hi"}}`)
	writeLines(t, dir, "codex", `{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s1","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}}`)
	st := openStore(t)
	rep, err := Import(ctx, st, []string{dir}, nil)
	require.NoError(t, err)
	require.Len(t, rep.Errors, 2, "one a file: %v", rep.Errors)
	looks := map[string]string{}
	for _, e := range rep.Errors {
		var fe *importer.FormatError
		require.ErrorAs(t, e, &fe)
		assert.Equal(t, importer.FormatClaude, fe.Want)
		looks[filepath.Base(fe.Path)] = fe.Looks
	}
	assert.Equal(t, map[string]string{"pi.jsonl": importer.FormatPi, "codex.jsonl": importer.FormatCodex}, looks)
	metas, err := st.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, metas)
}

// A session the store refuses takes its subagents with it: they are
// reported, not imported as top-level sessions (which they would stay),
// and an import that the store takes whole links them.
func TestRefusedSessionKeepsItsSubagentsOut(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	big := strings.Repeat("x", 2000)
	main := writeLines(t, dir, "s", rec("a", "", 0), rec(big, "a", 1))
	writeLines(t, dir, "agent-x", strings.Replace(rec("b", "", 2), `"sessionId":"s"`, `"sessionId":"s","agentId":"x","isSidechain":true`, 1))
	root := t.TempDir()
	st, err := sessionstore.Open(root, &sessionstore.Options{MaxRecordSize: 1000})
	require.NoError(t, err)
	rep, err := Import(ctx, st, []string{dir}, nil)
	require.NoError(t, err)
	require.Len(t, rep.Errors, 2, "%v", rep.Errors)
	assert.ErrorIs(t, rep.Errors[0], sessionstore.ErrRecordTooLarge)
	assert.Contains(t, rep.Errors[1].Error(), "subagent x not imported")
	metas, err := st.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, metas)
	require.NoError(t, st.Close())

	// Once the store takes the session, both are imported, linked.
	writeLines(t, dir, "s", rec("a", "", 0), rec("b0", "a", 1))
	st, err = sessionstore.Open(root, &sessionstore.Options{MaxRecordSize: 1000})
	require.NoError(t, err)
	defer st.Close()
	rep, err = Import(ctx, st, []string{dir}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, 2, rep.Sessions)
	f, err := Read(main)
	require.NoError(t, err)
	metas, err = st.List(ctx)
	require.NoError(t, err)
	for _, m := range metas {
		if m.ID != f.Sessions[0].Meta.ID {
			assert.Equal(t, f.Sessions[0].Meta.ID, m.ParentSession, "the subagent names its parent")
		}
	}
}
