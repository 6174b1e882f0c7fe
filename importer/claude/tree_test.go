package claude

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rec is a user line with uuid u and parent p ("" for null) at second s.
func rec(u, p string, s int) string {
	parent := "null"
	if p != "" {
		parent = `"` + p + `"`
	}
	return fmt.Sprintf(`{"type":"user","uuid":%q,"parentUuid":%s,"sessionId":"s","timestamp":"2026-01-01T00:00:%02dZ","message":{"role":"user","content":%q}}`, u, parent, s, u)
}

// TestReadTrees: how records that do not form a clean tree are placed,
// and which are reported.
func TestReadTrees(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
		// tree is each record's parent record, "" for the root.
		tree map[string]string
		head string
		bad  []int // lines reported malformed
	}{
		{"clean", []string{rec("a", "", 0), rec("b", "a", 1), rec("c", "a", 2)},
			map[string]string{"a": "", "b": "a", "c": "a"}, "c", nil},
		{"parent later in the file waits for it", []string{rec("a", "", 0), rec("c", "b", 2), rec("b", "a", 1)},
			map[string]string{"a": "", "b": "a", "c": "b"}, "c", nil},
		{"dangling parent joins the record before it", []string{rec("a", "", 0), rec("b", "a", 1), rec("c", "zz", 2)},
			map[string]string{"a": "", "b": "a", "c": "b"}, "c", []int{3}},
		{"second root joins the record before it", []string{rec("a", "", 0), rec("b", "", 1)},
			map[string]string{"a": "", "b": "a"}, "b", []int{2}},
		{"repeated uuid is left out", []string{rec("a", "", 0), rec("b", "a", 1), rec("b", "a", 2)},
			map[string]string{"a": "", "b": "a"}, "b", []int{3}},
		{"a cycle is broken at its first line", []string{rec("a", "", 0), rec("b", "c", 1), rec("c", "b", 2)},
			map[string]string{"a": "", "b": "a", "c": "b"}, "c", []int{2}},
		{"head is the newest leaf, not the last line", []string{rec("a", "", 0), rec("b", "a", 5), rec("c", "a", 3)},
			map[string]string{"a": "", "b": "a", "c": "a"}, "b", nil},
		{"bad timestamp", []string{rec("a", "", 0), strings.Replace(rec("b", "a", 1), "2026-01-01T00:00:01Z", "yesterday", 1)},
			map[string]string{"a": ""}, "a", []int{2}},
		{"no type", []string{rec("a", "", 0), `{"uuid":"b"}`},
			map[string]string{"a": ""}, "a", []int{2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := parseFile("t.jsonl", []byte(strings.Join(tc.lines, "\n")+"\n"))
			require.Len(t, f.Sessions, 1)
			s := f.Sessions[0]
			var got []int
			for _, e := range f.Errors {
				got = append(got, lineOf(t, e))
			}
			assert.Equal(t, tc.bad, got, "malformed lines: %v", f.Errors)
			byID := map[uuid.UUID]string{}
			parents := map[string]string{}
			for _, ev := range s.Events {
				m, err := ev.Message()
				require.NoError(t, err)
				byID[ev.ID] = m.Content
				parents[m.Content] = byID[ev.ParentID]
			}
			assert.Equal(t, tc.tree, parents)
			assert.Equal(t, tc.head, byID[s.Head])
		})
	}
}

func lineOf(t *testing.T, err error) int {
	t.Helper()
	var le *importer.LineError
	require.ErrorAs(t, err, &le)
	if le.Path != "t.jsonl" && !strings.HasSuffix(le.Path, ".jsonl") {
		t.Errorf("path %q", le.Path)
	}
	return le.Line
}
