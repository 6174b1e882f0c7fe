package claude

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeLines writes lines, each ended by "\n", as the transcript <name>.jsonl
// in dir.
func writeLines(t *testing.T, dir, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(dir, name+".jsonl")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600))
	return path
}

// boundary is a compact_boundary line with uuid u after the record p, at
// second s.
func boundary(u, p string, s int) string {
	return fmt.Sprintf(`{"type":"system","subtype":"compact_boundary","uuid":%q,"parentUuid":null,"logicalParentUuid":%q,"sessionId":"s","timestamp":"2026-01-01T00:00:%02dZ","content":"Conversation compacted","compactMetadata":{"trigger":"auto","preTokens":1000}}`, u, p, s)
}

// compactSummary is the isCompactSummary user line with uuid u, the child of
// the boundary p, at second s.
func compactSummary(u, p string, s int, text string) string {
	return fmt.Sprintf(`{"type":"user","isCompactSummary":true,"uuid":%q,"parentUuid":%q,"sessionId":"s","timestamp":"2026-01-01T00:00:%02dZ","message":{"role":"user","content":%q}}`, u, p, s, text)
}

func onlySession(t *testing.T, st *sessionstore.Store) sessionstore.Meta {
	t.Helper()
	metas, err := st.List(context.Background())
	require.NoError(t, err)
	require.Len(t, metas, 1)
	return metas[0]
}

// A transcript read while Claude Code is writing its compaction: the
// boundary line is there, the summary line not yet. Importing it again
// once the summary is written must give the context Claude Code rebuilds:
// the compaction with its summary.
func TestReviewGrownCompactionGetsItsSummary(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	dir := t.TempDir()
	head := []string{rec("a", "", 0), rec("b", "a", 1), boundary("c", "b", 2)}
	path := writeLines(t, dir, "s", head...)
	_, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)

	full := append(head, compactSummary("d", "c", 3, "The summary."), rec("e", "d", 4))
	writeLines(t, dir, "s", full...)
	rep, err := Import(ctx, st, []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)

	evs, err := st.Load(ctx, onlySession(t, st).ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"compaction: The summary.", "user: e"}, texts(t, evs))

	// The same as importing the whole file at once.
	fresh := openStore(t)
	_, err = Import(ctx, fresh, []string{path}, nil)
	require.NoError(t, err)
	want, err := fresh.Load(ctx, onlySession(t, fresh).ID)
	require.NoError(t, err)
	assert.Equal(t, texts(t, want), texts(t, evs))
}

func texts(t *testing.T, evs []sessionstore.Event) []string {
	t.Helper()
	var out []string
	for _, it := range loadedContext(t, evs) {
		out = append(out, it.Text)
	}
	return out
}

// Edge cases of the bytes of a file: CRLF line ends, no final newline, a
// line longer than bufio.Scanner's default limit.
func TestReviewLineShapes(t *testing.T) {
	big := strings.Repeat("x", 3<<20)
	cases := []struct {
		name string
		data string
		want []string
	}{
		{"crlf", rec("a", "", 0) + "\r\n" + rec("b", "a", 1) + "\r\n", []string{"user: a", "user: b"}},
		{"no final newline", rec("a", "", 0) + "\n" + rec("b", "a", 1), []string{"user: a", "user: b"}},
		{"a line over 1 MiB", rec("a", "", 0) + "\n" + strings.Replace(rec("b", "a", 1), `"content":"b"`, `"content":"`+big+`"`, 1) + "\n", []string{"user: a", "user: " + big}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.jsonl")
			require.NoError(t, os.WriteFile(path, []byte(tc.data), 0o600))
			st := openStore(t)
			rep, err := Import(context.Background(), st, []string{path}, nil)
			require.NoError(t, err)
			assert.Empty(t, rep.Errors)
			evs, err := st.Load(context.Background(), onlySession(t, st).ID)
			require.NoError(t, err)
			assert.Equal(t, tc.want, texts(t, evs))
		})
	}
}

// Two leaves with the same timestamp: HEAD is the later line.
func TestReviewEqualTimestamps(t *testing.T) {
	path := writeLines(t, t.TempDir(), "s", rec("a", "", 0), rec("b", "a", 1), rec("c", "a", 1))
	st := openStore(t)
	_, err := Import(context.Background(), st, []string{path}, nil)
	require.NoError(t, err)
	evs, err := st.Load(context.Background(), onlySession(t, st).ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"user: a", "user: c"}, texts(t, evs))
}

// Two goroutines import the same directory into one Store: both finish
// without error and the store holds each session once, whole.
func TestReviewConcurrentImports(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = Import(ctx, st, []string{fixture}, nil)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	metas, err := st.List(ctx)
	require.NoError(t, err)
	assert.Len(t, metas, 3)
	assert.Equal(t, 2, checkContexts(t, st, transcripts(t, fixture)))
}

// A summary line in one file names the session of its leaf in another.
func TestReviewSummaryInAnotherFile(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, "a", rec("a1", "", 0), rec("a2", "a1", 1))
	writeLines(t, dir, "b", `{"type":"summary","summary":"Named from b","leafUuid":"a2"}`)
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{dir}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, "Named from b", onlySession(t, st).Name)
}

// A tool_result whose content is an array with an image, and a tool_use
// that never got its result.
func TestReviewToolBlocks(t *testing.T) {
	lines := []string{
		rec("a", "", 0),
		`{"type":"assistant","uuid":"b","parentUuid":"a","sessionId":"s","timestamp":"2026-01-01T00:00:01Z","message":{"role":"assistant","model":"m","content":[{"type":"tool_use","id":"t1","name":"Shot","input":{}}]}}`,
		`{"type":"user","uuid":"c","parentUuid":"b","sessionId":"s","timestamp":"2026-01-01T00:00:02Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"took it"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}]}]}}`,
		`{"type":"assistant","uuid":"d","parentUuid":"c","sessionId":"s","timestamp":"2026-01-01T00:00:03Z","message":{"role":"assistant","model":"m","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"ls"}}]}}`,
	}
	path := writeLines(t, t.TempDir(), "s", lines...)
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	evs, err := st.Load(context.Background(), onlySession(t, st).ID)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"user: a",
		`assistant [m] "" reasoning="" calls=[t1 Shot {}]`,
		`call t1 Shot {}`,
		"result t1 error=false: took it\n[image: image/png]",
		`assistant [m] "" reasoning="" calls=[t2 Bash {"command":"ls"}]`,
		`call t2 Bash {"command":"ls"}`,
	}, texts(t, evs))
}

// A session resumed into a new file (a new sessionId, the history copied
// with its uuids): two sessions, each with the whole history as its own
// events; the copies have the same ids in both, which the store allows
// (ids are a session's).
func TestReviewResumedCopy(t *testing.T) {
	dir := t.TempDir()
	first := []string{rec("a", "", 0), rec("b", "a", 1)}
	writeLines(t, dir, "s1", first...)
	second := make([]string, 0, 3)
	for _, l := range first {
		second = append(second, strings.Replace(l, `"sessionId":"s"`, `"sessionId":"s2"`, 1))
	}
	second = append(second, strings.Replace(rec("c", "b", 2), `"sessionId":"s"`, `"sessionId":"s2"`, 1))
	writeLines(t, dir, "s2", second...)
	ctx := context.Background()
	st := openStore(t)
	rep, err := Import(ctx, st, []string{dir}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, 2, rep.Created)
	got := map[string][]string{}
	metas, err := st.List(ctx)
	require.NoError(t, err)
	for _, m := range metas {
		evs, err := st.Load(ctx, m.ID)
		require.NoError(t, err)
		got[m.Labels["claude_session_id"]] = texts(t, evs)
	}
	assert.Equal(t, map[string][]string{"s": {"user: a", "user: b"}, "s2": {"user: a", "user: b", "user: c"}}, got)
}

// use is an assistant line of response msg with one tool_use block id,
// uuid u, parent p, at second s.
func use(u, p, msg, id string, s int) string {
	return fmt.Sprintf(`{"type":"assistant","uuid":%q,"parentUuid":%q,"sessionId":"s","timestamp":"2026-01-01T00:00:%02dZ","message":{"id":%q,"role":"assistant","model":"m","content":[{"type":"tool_use","id":%q,"name":"Read","input":{}}]}}`, u, p, s, msg, id)
}

// result is a user line with the tool_result of call id, uuid u, parent p,
// at second s.
func result(u, p, id string, s int) string {
	return fmt.Sprintf(`{"type":"user","uuid":%q,"parentUuid":%q,"sessionId":"s","timestamp":"2026-01-01T00:00:%02dZ","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":%q,"content":"out %s"}]}}`, u, p, s, id, id)
}

// Parallel tool calls, as Claude Code writes them: one line per tool_use
// block, each the child of the one before, and each result the child of
// its own call's line, so the parentUuid walk from the leaf passes only
// the result of the last call. The context Claude Code sends has every
// result (the API refuses a tool_use without its tool_result): so must
// Load.
func TestReviewParallelToolResults(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
	}{
		{"results in call order", []string{
			rec("a", "", 0),
			use("u1", "a", "msg1", "t1", 1), use("u2", "u1", "msg1", "t2", 2), use("u3", "u2", "msg1", "t3", 3),
			result("r1", "u1", "t1", 4), result("r2", "u2", "t2", 5), result("r3", "u3", "t3", 6),
			rec("z", "r3", 7),
		}},
		{"the last call's result first", []string{
			rec("a", "", 0),
			use("u1", "a", "msg1", "t1", 1), use("u2", "u1", "msg1", "t2", 2),
			result("r2", "u2", "t2", 3), result("r1", "u1", "t1", 4),
			rec("z", "r1", 5),
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := writeLines(t, t.TempDir(), "s", tc.lines...)
			st := openStore(t)
			rep, err := Import(context.Background(), st, []string{path}, nil)
			require.NoError(t, err)
			assert.Empty(t, rep.Errors)
			evs, err := st.Load(context.Background(), onlySession(t, st).ID)
			require.NoError(t, err)
			calls, results := map[string]int{}, map[string]int{}
			for i, ev := range evs {
				switch ev.Kind {
				case sessionstore.KindToolCall:
					c, err := ev.ToolCall()
					require.NoError(t, err)
					calls[c.CallID] = i
				case sessionstore.KindToolResult:
					r, err := ev.ToolResult()
					require.NoError(t, err)
					results[r.CallID] = i
				}
			}
			assert.Len(t, calls, strings.Count(strings.Join(tc.lines, ""), `"tool_use"`), "every call is in the context")
			for id, at := range calls {
				if assert.Contains(t, results, id, "the result of %s is in the context", id) {
					assert.Greater(t, results[id], at, "after its call")
				}
			}
			assert.Equal(t, "user: z", texts(t, evs)[len(evs)-1])
		})
	}
}

// A boundary last in the file whose summary line came before it (out of
// order) is not held back: the summary is the compaction's, nothing is
// reported.
func TestReviewBoundaryAfterItsSummary(t *testing.T) {
	path := writeLines(t, t.TempDir(), "s", rec("a", "", 0), compactSummary("d", "c", 2, "Sum."), boundary("c", "a", 1))
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	evs, err := st.Load(context.Background(), onlySession(t, st).ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"compaction: Sum."}, texts(t, evs))
}
