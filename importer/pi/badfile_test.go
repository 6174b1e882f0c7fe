package pi

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// One bad file (or one bad entry) is reported for its file, and every
// other file is imported; no session is left empty, and importing again
// reports the same and completes the rest, every time.
func TestBadFileDoesNotStopTheImport(t *testing.T) {
	second := func(id string) string { return strings.Replace(hdr, `"id":"s"`, `"id":"`+id+`"`, 1) }
	cases := []struct {
		name  string
		file  string // the first file of the import, a.jsonl
		opts  *sessionstore.Options
		a     int // events of a's session, 0 for none
		lines []int
	}{
		{"entry after 2262", hdr + entryLine("u1", "", "one") + strings.Replace(entryLine("u2", "u1", "two"), "2025-01-01", "2300-01-01", 1), nil, 3, []int{3}},
		{"entry before 1970", hdr + strings.Replace(entryLine("u1", "", "one"), "2025-01-01", "1960-01-01", 1), nil, 2, []int{2}},
		{"header after 2262", strings.Replace(hdr, "2025-01-01", "2300-01-01", 1) + entryLine("u1", "", "one"), nil, 2, []int{1}},
		{"entry in ms after 2262", hdr + strings.Replace(entryLine("u1", "", "one"), `"2025-01-01T00:00:01Z"`, `10000000000000`, 1), nil, 2, []int{2}},
		{"record over the store's limit", hdr + entryLine("u1", "", strings.Repeat("x", 2000)), &sessionstore.Options{MaxRecordSize: 1000}, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(tc.file), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(second("s2")+entryLine("u1", "", "two")), 0o644))
			st, err := sessionstore.Open(t.TempDir(), tc.opts)
			require.NoError(t, err)
			defer st.Close()
			for range 2 {
				rep, err := Import(ctx, st, []string{dir}, nil)
				require.NoError(t, err, "a problem of one file does not stop the import")
				if tc.lines != nil {
					var lines []int
					for _, e := range rep.Errors {
						var le *importer.LineError
						if assert.ErrorAs(t, e, &le, "%v", e) {
							assert.Equal(t, filepath.Join(dir, "a.jsonl"), le.Path)
							lines = append(lines, le.Line)
						}
					}
					assert.Equal(t, tc.lines, lines, "%v", rep.Errors)
				} else if assert.Len(t, rep.Errors, 1) {
					assert.ErrorIs(t, rep.Errors[0], sessionstore.ErrRecordTooLarge)
					assert.True(t, importer.SessionProblem(rep.Errors[0]))
					assert.Contains(t, rep.Errors[0].Error(), filepath.Join(dir, "a.jsonl"))
				}
				metas, err := st.List(ctx)
				require.NoError(t, err)
				want := 1
				if tc.a > 0 {
					want = 2
				}
				require.Len(t, metas, want, "b imported, a too unless refused")
				for _, m := range metas {
					nodes, err := st.Tree(ctx, m.ID)
					require.NoError(t, err)
					assert.NotEmpty(t, nodes, "no session left empty")
					if m.Labels["source_id"] == "s" {
						assert.Len(t, nodes, tc.a)
					}
				}
			}
		})
	}
}

// Files of another tool are recognised, one problem a file that says
// what they look like, and nothing of them is written.
func TestOtherFormatsAreRecognised(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	files := map[string]string{
		"claude.jsonl": `{"parentUuid":null,"isSidechain":false,"type":"user","uuid":"u","sessionId":"s","timestamp":"2026-01-01T00:00:00Z","version":"2.0.1","message":{"role":"user","content":"hi"}}` + "\n",
		"codex.jsonl":  `{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s1","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}}` + "\n",
	}
	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644))
	}
	st := openStore(t)
	rep, err := Import(ctx, st, []string{dir}, nil)
	require.NoError(t, err)
	require.Len(t, rep.Errors, 2, "one a file: %v", rep.Errors)
	looks := map[string]string{}
	for _, e := range rep.Errors {
		var fe *importer.FormatError
		require.ErrorAs(t, e, &fe)
		assert.Equal(t, importer.FormatPi, fe.Want)
		looks[filepath.Base(fe.Path)] = fe.Looks
	}
	assert.Equal(t, map[string]string{"claude.jsonl": importer.FormatClaude, "codex.jsonl": importer.FormatCodex}, looks)
	assert.Equal(t, 0, rep.Sessions)
	metas, err := st.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, metas)
}
