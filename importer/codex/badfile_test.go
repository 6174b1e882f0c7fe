package codex

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

// One bad file (or one bad line) is reported for its file, and every
// other file is imported; no session is left empty, and importing again
// reports the same and completes the rest, every time.
func TestBadFileDoesNotStopTheImport(t *testing.T) {
	cases := []struct {
		name  string
		file  string // the first file of the import, a.jsonl
		opts  *sessionstore.Options
		a     int   // events of a's session, 0 for none
		lines []int // lines reported; nil: one problem of the file
	}{
		{"line after 2262", meta + userLine("one") + strings.Replace(userLine("two"), "2025-01-01", "2300-01-01", 1), nil, 3, []int{3}},
		{"line before 1970", meta + strings.Replace(userLine("one"), "2025-01-01", "1960-01-01", 1), nil, 2, []int{2}},
		{"session start after 2262", strings.ReplaceAll(meta, "2025-01-01", "2300-01-01") + userLine("one"), nil, 2, []int{1, 1}}, // the line's and the payload's
		{"session start only after 2262", strings.Replace(meta, `"timestamp":"2025-01-01T00:00:00Z","cwd"`, `"timestamp":"2300-01-01T00:00:00Z","cwd"`, 1) + userLine("one"), nil, 2, []int{1}},
		{"record over the store's limit", meta + userLine(strings.Repeat("x", 2000)), &sessionstore.Options{MaxRecordSize: 1000}, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte(tc.file), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "b.jsonl"), []byte(strings.Replace(meta, `"id":"s1"`, `"id":"s2"`, 1)+userLine("two")), 0o644))
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
					if m.Labels["source_id"] == "s1" {
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
		"claude.jsonl": `{"type":"queue-operation","operation":"dequeue","timestamp":"2026-01-01T00:00:00Z","sessionId":"s"}` + "\n" + `{"parentUuid":null,"type":"user","uuid":"u","sessionId":"s","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hi"}}` + "\n",
		"pi.jsonl":     `{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}` + "\n",
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
		assert.Equal(t, importer.FormatCodex, fe.Want)
		looks[filepath.Base(fe.Path)] = fe.Looks
	}
	assert.Equal(t, map[string]string{"claude.jsonl": importer.FormatClaude, "pi.jsonl": importer.FormatPi}, looks)
	metas, err := st.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, metas)
}
