package export

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// mdLines splits s into lines at "\n", "\r\n" and "\r", as CommonMark does.
func mdLines(s string) []string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	return strings.Split(s, "\n")
}

var (
	fenceOpen = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})")
	rawOpen   = regexp.MustCompile(`(?i)^ {0,3}<(script|pre|style|textarea)(\s|>|$)`)
)

// topLevel returns, for each line of a Markdown document, whether it is
// at the top level: outside a fenced code block, outside a raw HTML block
// that runs to a closing tag (<script>, <pre>, <style>, <textarea>, <!--)
// and outside an open <details> element.
func topLevel(doc string) []bool {
	lines := mdLines(doc)
	out := make([]bool, len(lines))
	var fence string // the open fence's run, "" outside one
	var rawEnd string
	details := 0
	for i, l := range lines {
		switch {
		case fence != "":
			t := strings.TrimLeft(l, " ")
			if len(l)-len(t) <= 3 && strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]+" \t") == "" {
				fence = ""
			}
		case rawEnd != "":
			if strings.Contains(strings.ToLower(l), rawEnd) {
				rawEnd = ""
			}
		default:
			out[i] = details == 0
			if m := fenceOpen.FindStringSubmatch(l); m != nil {
				fence = m[1]
				continue
			}
			if m := rawOpen.FindStringSubmatch(l); m != nil {
				if !strings.Contains(strings.ToLower(l), "</"+strings.ToLower(m[1])+">") {
					rawEnd = "</" + strings.ToLower(m[1]) + ">"
				}
				continue
			}
			if strings.HasPrefix(strings.TrimLeft(l, " "), "<!--") && !strings.Contains(l, "-->") {
				rawEnd = "-->"
				continue
			}
			lower := strings.ToLower(l)
			details += strings.Count(lower, "<details") - strings.Count(lower, "</details>")
		}
	}
	return out
}

// TestReviewMarkdownStructure: whatever a message holds, the sections
// written after it stay sections: a fence, a raw HTML block or an HTML
// element left open in one message does not swallow the rest of the
// transcript.
func TestReviewMarkdownStructure(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, content string
	}{
		{"open backtick fence", "Here is the start:\n```python\nprint(1)"},
		{"open tilde fence", "~~~~\nno end"},
		{"open fence, CR line ends", "text\r```\rcode"},
		{"open details", "<details>\n<summary>more</summary>\n\nhidden"},
		{"open script", "<script>\nalert(1)"},
		{"open pre", "<pre>\nraw"},
		{"open comment", "<!-- a note never closed"},
		{"inline details", "see <details> here"},
		{"fence in a long line", strings.Repeat("x", 1<<20) + "\n```"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := openStore(t)
			meta, err := st.Create(ctx, sessionstore.Meta{Name: "hostile"})
			require.NoError(t, err)
			_, err = st.Append(ctx, meta.ID, sessionstore.UserText(tc.content))
			require.NoError(t, err)
			_, err = st.Append(ctx, meta.ID, sessionstore.AssistantText("the sentinel reply"))
			require.NoError(t, err)
			var buf bytes.Buffer
			_, err = Markdown(ctx, &buf, st, meta.ID, Options{})
			require.NoError(t, err)
			doc := buf.String()
			lines, top := mdLines(doc), topLevel(doc)
			found := 0
			for i, l := range lines {
				if l == "## Assistant" || l == "the sentinel reply" {
					found++
					assert.True(t, top[i], "line %d %q is not at the top level", i+1, l)
				}
			}
			assert.Equal(t, 2, found, "the reply's heading and text are in the transcript")
			if !strings.Contains(tc.content, "<") {
				// Text without HTML is shown as it is, its line ends "\n".
				assert.Contains(t, doc, strings.Join(mdLines(tc.content), "\n"))
			}
		})
	}
}

// TestReviewMarkdownCodeKept: escaping HTML leaves code alone: a fenced
// block and a code span keep their "<" as it is, and a closed fence is
// not closed again.
func TestReviewMarkdownCodeKept(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "code"})
	require.NoError(t, err)
	content := "Use `Vec<T>` here:\n\n```go\nif a < b {}\n```\n\nand <b>not</b> this."
	_, err = st.Append(ctx, meta.ID, sessionstore.UserText(content))
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = Markdown(ctx, &buf, st, meta.ID, Options{})
	require.NoError(t, err)
	assert.Contains(t, buf.String(), "Use `Vec<T>` here:\n\n```go\nif a < b {}\n```\n\nand &lt;b>not&lt;/b> this.\n\n")
}

// TestReviewTreeForksOfForks: a fork of a fork with many branches exports
// in tree scope every event of Tree exactly once, parents first, each
// record, time, size, digest and branch_from as the store has them; the
// active path is FullPath's.
func TestReviewTreeForksOfForks(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	grow := func(session uuid.UUID, n int, seed uint32) {
		nodes, err := st.Tree(ctx, session)
		require.NoError(t, err)
		var own []uuid.UUID
		for _, nd := range nodes {
			own = append(own, nd.ID)
		}
		state := seed
		for i := range n {
			state = state*1664525 + 1013904223
			if state%5 == 0 {
				require.NoError(t, st.Branch(ctx, session, own[int(state>>8)%len(own)]))
			}
			ev := sessionstore.AssistantText(fmt.Sprintf("%s event %d", session, i))
			if i%9 == 0 {
				ev = sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: fmt.Sprint(i), Output: strings.Repeat(fmt.Sprint(i), 300)})
			}
			got, err := st.Append(ctx, session, ev)
			require.NoError(t, err)
			own = append(own, got.ID)
		}
	}
	f1, err := st.Fork(ctx, s, eid(7))
	require.NoError(t, err)
	grow(f1.ID, 60, 3)
	nodes, err := st.Tree(ctx, f1.ID)
	require.NoError(t, err)
	f2, err := st.Fork(ctx, f1.ID, nodes[len(nodes)/2].ID)
	require.NoError(t, err)
	grow(f2.ID, 60, 11)

	for _, session := range []uuid.UUID{s, f1.ID, f2.ID} {
		for _, scope := range []Scope{Tree, ActivePath, Context} {
			var buf bytes.Buffer
			stats, err := JSONL(ctx, &buf, st, session, Options{Scope: scope})
			require.NoError(t, err)
			h, evs := readAll(t, buf.Bytes())
			assert.Equal(t, len(evs), h.Events)
			assert.Equal(t, len(evs), stats.Events)
			assert.Equal(t, wantIDs(t, st, session, scope), ids(evs), "session %s scope %s", session, scope)
			checkEvents(t, st, session, evs, "")
			if scope != Tree {
				continue
			}
			seen := map[uuid.UUID]bool{}
			for _, ev := range evs {
				assert.False(t, seen[ev.ID], "event %s once", ev.ID)
				if ev.ParentID != uuid.Nil {
					assert.True(t, seen[ev.ParentID], "parent of %s first", ev.ID)
				}
				seen[ev.ID] = true
				want, err := st.Event(ctx, session, ev.ID)
				require.NoError(t, err)
				want, err = st.Resolve(ctx, session, want)
				require.NoError(t, err)
				assert.Equal(t, string(want.Record), string(ev.Record))
				assert.True(t, want.Time.Equal(ev.Time))
				assert.Equal(t, want.BranchFrom, ev.BranchFrom)
				assert.Equal(t, want.Size, ev.Size)
				assert.Equal(t, want.Digest, ev.Digest)
			}
		}
	}
}

// TestReviewMarkdownSummaryStructure: a compaction's summary with HTML in
// it does not open an element around the rest of the transcript.
func TestReviewMarkdownSummaryStructure(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "summary"})
	require.NoError(t, err)
	first, err := st.Append(ctx, meta.ID, sessionstore.UserText("start"))
	require.NoError(t, err)
	_, err = st.Append(ctx, meta.ID, sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, sessionstore.CompactionRecord{
		Summary:    sessionstore.Summary{Goals: []string{"<details>"}, Text: "<details>\n<summary>x</summary>"},
		Summarized: first.ID,
	}))
	require.NoError(t, err)
	_, err = st.Append(ctx, meta.ID, sessionstore.AssistantText("the sentinel reply"))
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = Markdown(ctx, &buf, st, meta.ID, Options{})
	require.NoError(t, err)
	doc := buf.String()
	lines, top := mdLines(doc), topLevel(doc)
	found := 0
	for i, l := range lines {
		if l == "## Assistant" {
			found++
			assert.True(t, top[i], "line %d %q is not at the top level", i+1, l)
		}
	}
	assert.Equal(t, 1, found)
}

// lanesSession writes a session of lanes branches off one root, appended
// in turn (one event to each, then again), each event's record about size
// bytes, into a store at dir, and closes the store.
func lanesSession(t *testing.T, dir string, lanes, per, size int) uuid.UUID {
	ctx := context.Background()
	st, err := sessionstore.Open(dir, nil)
	require.NoError(t, err)
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "lanes"})
	require.NoError(t, err)
	root, err := st.Append(ctx, meta.ID, sessionstore.UserText("root"))
	require.NoError(t, err)
	tips := make([]uuid.UUID, lanes)
	for k := range tips {
		tips[k] = root.ID
	}
	pad := strings.Repeat("x", size)
	for i := range per {
		for k := range tips {
			require.NoError(t, st.Branch(ctx, meta.ID, tips[k]))
			ev, err := st.Append(ctx, meta.ID, sessionstore.AssistantText(fmt.Sprint(k, " ", i, " ", pad)))
			require.NoError(t, err)
			tips[k] = ev.ID
		}
	}
	require.NoError(t, st.Close())
	return meta.ID
}

// heapPeak is a writer that notes the largest live heap seen when written
// to: it collects first, so that what it notes is what the export holds,
// not garbage a collector behind on a loaded machine has yet to free.
type heapPeak struct{ peak uint64 }

func (h *heapPeak) Write(p []byte) (int, error) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.peak = max(h.peak, ms.HeapAlloc)
	return len(p), nil
}

// TestReviewTreeMemory: a tree export holds about one path's records, not
// the session's: with sixteen lanes appended in turn (each lane's path a
// sixteenth of the session), the live heap grows by under a quarter of the
// session's bytes while the export runs (about a tenth: one path plus the
// read-ahead budget).
func TestReviewTreeMemory(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const lanes, per, size = 16, 12, 160 << 10 // 30 MiB of records
	s := lanesSession(t, dir, lanes, per, size)
	st, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	old := pendingBudget
	pendingBudget = 1 << 20
	defer func() { pendingBudget = old }()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	hp := &heapPeak{}
	stats, err := JSONL(ctx, hp, st, s, Options{})
	require.NoError(t, err)
	require.Equal(t, lanes*per+1, stats.Events)
	total := int64(lanes * per * size)
	grown := int64(hp.peak) - int64(ms.HeapAlloc)
	t.Logf("records %d MiB, heap grew by %d MiB", total>>20, grown>>20)
	assert.Less(t, grown, total/4)
}

// TestReviewTreeReadAhead: however little is kept read ahead, a tree
// export writes the same bytes, of lanes appended in turn and of one path.
func TestReviewTreeReadAhead(t *testing.T) {
	ctx := context.Background()
	for _, lanes := range []int{5, 1} {
		dir := t.TempDir()
		s := lanesSession(t, dir, lanes, 20, 100)
		st, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true})
		require.NoError(t, err)
		defer st.Close()
		var want bytes.Buffer
		_, err = JSONL(ctx, &want, st, s, Options{})
		require.NoError(t, err)
		_, evs := readAll(t, want.Bytes())
		assert.Len(t, evs, lanes*20+1)
		old := pendingBudget
		defer func() { pendingBudget = old }()
		for _, budget := range []int64{0, 1, eventOverhead + 150, 3000, 1 << 40} {
			pendingBudget = budget
			for _, scope := range []Scope{Tree, ActivePath} {
				var got bytes.Buffer
				_, err := JSONL(ctx, &got, st, s, Options{Scope: scope})
				require.NoError(t, err)
				if scope == Tree {
					assert.Equal(t, want.String(), got.String(), "lanes %d budget %d", lanes, budget)
				}
				_, evs := readAll(t, got.Bytes())
				assert.Equal(t, wantIDs(t, st, s, scope), ids(evs))
			}
		}
	}
}

// TestReviewExportBesideWriter: exports through a read-only store while a
// writer appends, branches and moves lanes are each whole: the Reader takes
// them, HEAD is among the events, every event is the writer's, and the
// lanes' tips are events of the export.
func TestReviewExportBesideWriter(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := sessionstore.Open(dir, &sessionstore.Options{BlobThreshold: blobThreshold})
	require.NoError(t, err)
	defer w.Close()
	s := fixture(t, w)
	r, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer r.Close()

	done := make(chan error, 1)
	go func() {
		defer close(done)
		var last uuid.UUID
		for i := range 200 {
			if i%10 == 5 && last != uuid.Nil {
				if err := w.Branch(ctx, s, eid(2)); err != nil {
					done <- err
					return
				}
			}
			ev := sessionstore.AssistantText(fmt.Sprint("concurrent ", i))
			if i%7 == 0 {
				ev = sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: fmt.Sprint(i), Output: strings.Repeat("y", 600+i)})
			}
			got, err := w.Append(ctx, s, ev)
			if err != nil {
				done <- err
				return
			}
			last = got.ID
		}
	}()
	// Export until the writer is done, then check every export against
	// the writer (which knows an event once its Append returns: a reader
	// may see it a moment before).
	type export struct {
		scope Scope
		data  []byte
	}
	var exports []export
	for running := true; running; {
		select {
		case err := <-done:
			require.NoError(t, err)
			running = false
		default:
		}
		for _, scope := range []Scope{Tree, ActivePath, Context} {
			var buf bytes.Buffer
			_, err := JSONL(ctx, &buf, r, s, Options{Scope: scope})
			require.NoError(t, err)
			exports = append(exports, export{scope, buf.Bytes()})
		}
	}
	require.Greater(t, len(exports), 3)
	for _, x := range exports {
		h, evs := readAll(t, x.data)
		in := map[uuid.UUID]bool{}
		for _, ev := range evs {
			in[ev.ID] = true
		}
		assert.True(t, in[h.Head], "scope %s: HEAD %s among the events", x.scope, h.Head)
		if x.scope == Tree {
			for _, l := range h.Lanes {
				assert.True(t, in[l.Tip], "lane %s tip %s among the events", l.Name, l.Tip)
			}
		}
		checkEvents(t, w, s, evs, "")
	}
}

// TestReviewMarkdownInvalidUTF8: records holding bytes that are not UTF-8
// (the store keeps them as given) make a transcript that is UTF-8 still.
func TestReviewMarkdownInvalidUTF8(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "bytes"})
	require.NoError(t, err)
	_, err = st.Append(ctx, meta.ID, sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage("{\"a\":\"\xff\xfe\"}")})
	require.NoError(t, err)
	_, err = st.Append(ctx, meta.ID, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c", Name: "x", Arguments: json.RawMessage("{\"a\":\"\xff\"}")}))
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = Markdown(ctx, &buf, st, meta.ID, Options{})
	require.NoError(t, err)
	assert.True(t, utf8.Valid(buf.Bytes()))
	assert.Contains(t, buf.String(), "\"a\": \"\uFFFD")
}
