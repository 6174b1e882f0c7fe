package webtest

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
	"github.com/sessionstore/sessionstore/sessiontest"
)

// defaultChromium is Debian's chromium package; SESSIONSTORE_CHROMIUM
// names another binary.
const defaultChromium = "/usr/bin/chromium"

// Texts the test looks for in the page.
const (
	askText     = "The CSV parser drops quoted newlines. Fix it and add tests."
	lookText    = "I'll read the parser first."
	approachA   = "Approach A: rewrite the tokenizer as a state machine."
	tooMuchText = "That touches too much; try a smaller fix."
	approachB   = "Approach B: keep the tokenizer, handle quoted newlines in readField."
	hostileText = `Does this survive: <script>window.pwned=1</script> <img src=x onerror="window.pwned=1">`
	headText    = "Done: quoted newlines are kept, and parser_test.go covers them."
	liveText    = "Live: appended while the page was open."
	// blobMarker is in the large tool result only, past its preview.
	blobMarker = "func readFieldMarker"
)

// session is the branched session the test builds, with the ids it checks.
type session struct {
	meta      sessionstore.Meta
	result    sessionstore.Event // the large tool result, a blob
	firstLeaf sessionstore.Event // the abandoned branch's end, a lane's tip
	head      sessionstore.Event
	events    int
}

// build writes, through the writer w, a session with a tool call and its
// large result (a blob), an abandoned branch named by a lane, a branch
// summary starting the second branch, a compaction, and text a browser
// must not take for markup; and a second, older session.
func build(t *testing.T, w *sessionstore.Store) session {
	t.Helper()
	ctx := context.Background()
	_, err := w.Create(ctx, sessionstore.Meta{Name: "release notes draft", WorkingDir: "/src/docs", Model: "model-small"})
	require.NoError(t, err)
	var s session
	s.meta, err = w.Create(ctx, sessionstore.Meta{Name: "fix the CSV parser", WorkingDir: "/src/csv", Model: "model-large"})
	require.NoError(t, err)
	id := s.meta.ID
	add := func(ev sessionstore.Event) sessionstore.Event {
		t.Helper()
		got, err := w.Append(ctx, id, ev)
		require.NoError(t, err)
		s.events++
		return got
	}
	add(sessionstore.UserText(askText))
	add(sessionstore.AssistantMessage(sessionstore.Message{Content: lookText, ToolCalls: []sessionstore.ToolCall{{CallID: "c1", Name: "read_file"}}}))
	add(sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"parser.go"}`)}))
	var src strings.Builder
	// The marker comes last, past the record's first 80 bytes that the
	// node's preview shows.
	src.WriteString("package csv\n\n")
	for i := 0; src.Len() < 40<<10; i++ {
		src.WriteString("// readField reads one field; a quoted field may hold newlines.\n")
	}
	src.WriteString(blobMarker + "() {}\n")
	s.result = add(sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: src.String()}))
	require.NotEmpty(t, s.result.Digest, "the tool result should be a blob")
	add(sessionstore.AssistantText(approachA))
	s.firstLeaf = add(sessionstore.UserText(tooMuchText))

	_, err = w.AppendBranchSummary(ctx, id, s.result.ID, sessionstore.BranchSummaryRecord{Summary: sessionstore.Summary{
		Decisions: []string{"do not rewrite the tokenizer"},
		Text:      "Approach A (a state machine) was abandoned: too invasive.",
	}})
	require.NoError(t, err)
	s.events++
	add(sessionstore.AssistantText(approachB))
	add(sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c2", Name: "run_tests", Arguments: json.RawMessage(`{"pkg":"./csv"}`)}))
	add(sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c2", Output: "ok  \texample.com/csv\t0.021s\n"}))
	_, err = w.CompactWith(ctx, id, sessiontest.Summarizer{}, sessionstore.CompactOptions{})
	require.NoError(t, err)
	s.events++
	add(sessionstore.UserText(hostileText))
	s.head = add(sessionstore.AssistantText(headText))
	require.NoError(t, w.CreateLane(ctx, id, "state-machine", s.firstLeaf.ID))
	return s
}

// chromium returns the browser to drive, skipping the test when there is
// none, or failing it under CI (CI set to anything but "", 0 or false).
func chromium(t testing.TB) string {
	t.Helper()
	path := defaultChromium
	if p := os.Getenv("SESSIONSTORE_CHROMIUM"); p != "" {
		path = p
	}
	if _, err := os.Stat(path); err != nil {
		msg := "no Chromium at " + path + " (apt-get install chromium, or set SESSIONSTORE_CHROMIUM): " + err.Error()
		if ci := os.Getenv("CI"); ci != "" && ci != "0" && ci != "false" {
			t.Fatal(msg)
		}
		t.Skip("skipped: " + msg)
	}
	return path
}

func TestBrowser(t *testing.T) {
	exe := chromium(t)
	root := t.TempDir()
	w, err := sessionstore.Open(root, &sessionstore.Options{BlobThreshold: 16 << 10})
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	s := build(t, w)
	sid := s.meta.ID.String()

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	h := web.New(ro, web.Options{PollInterval: 100 * time.Millisecond})
	var recordFetches atomic.Int64 // requests for one event's record
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/events/") {
			recordFetches.Add(1)
		}
		h.ServeHTTP(rw, r)
	}))
	defer srv.Close()
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"), srv.URL)

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox, // Chromium refuses to run as root with its sandbox
		chromedp.Headless,
		chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1440, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	defer cancelBrowser()

	b := &browser{t: t, ctx: bctx}

	// The list.
	b.do(chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr.session[data-id="`+sid+`"] a.name`)))
	listText := b.text(`#sessions tbody`)
	assert.Contains(t, listText, "fix the CSV parser")
	assert.Contains(t, listText, "release notes draft")
	assert.Contains(t, listText, "/src/csv")
	assert.Equal(t, sid, eval[string](b, `document.querySelector("#sessions tbody tr").dataset.id`), "newest first")

	// The list is live too: a session created now shows, on top.
	b.do(chromedp.WaitVisible(chromedp.CSS(`#status.live`)))
	created, err := w.Create(ctx, sessionstore.Meta{Name: "created while the list was open"})
	require.NoError(t, err)
	listWait, cancelListWait := context.WithTimeout(bctx, 20*time.Second)
	defer cancelListWait()
	require.NoError(t, chromedp.Do(listWait, chromedp.WaitVisible(chromedp.CSS(`#sessions tbody tr:first-child[data-id="`+created.ID.String()+`"]`))),
		"the new session did not show")
	assert.Equal(t, "created while the list was open", b.text(`#sessions tbody tr:first-child a.name`))

	// The tree.
	b.do(chromedp.Click(chromedp.CSS(`tr.session[data-id="`+sid+`"] a.name`)),
		chromedp.WaitVisible(chromedp.CSS(`#tree-svg .node`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev`)))
	assert.Equal(t, s.events, eval[int](b, `document.querySelectorAll("#tree-svg .node").length`), "one node per event")
	assert.Equal(t, 1, eval[int](b, `document.querySelectorAll("#tree-svg .node.head").length`))
	assert.Equal(t, s.head.ID.String(), eval[string](b, `document.querySelector("#tree-svg .node.head").dataset.id`))
	assert.ElementsMatch(t, []string{"HEAD", "⎇ main", "⎇ state-machine"}, eval[[]string](b, `[...document.querySelectorAll("#tree-svg text.tag")].map(e => e.textContent)`))

	// Each node is labelled with its preview, or its kind and role.
	tree := getTree(t, srv.URL+"/api/sessions/"+sid)
	labels := eval[[]string](b, `[...document.querySelectorAll("#tree-svg text.label")].map(e => e.textContent)`)
	require.Len(t, labels, len(tree.Nodes))
	for i, n := range tree.Nodes {
		want := n.Preview
		if want == "" {
			want = n.Kind
			if n.Role != "" {
				want += " · " + n.Role
			}
		}
		if r := []rune(strings.Join(strings.Fields(want), " ")); len(r) > 90 {
			want = string(r[:89]) + "…"
		}
		assert.Equal(t, want, labels[i], "label of node %d", i)
	}

	// The path to HEAD: from the root, the common part and the second
	// branch, the compaction and the branch summary marked, the hostile
	// text as text.
	texts := eval[[]string](b, `[...document.querySelectorAll("#transcript .ev .text")].map(e => e.textContent)`)
	for _, want := range []string{askText, lookText, approachB, hostileText, headText} {
		assert.Contains(t, texts, want)
	}
	assert.NotContains(t, texts, approachA, "not on the path to HEAD")
	assert.Len(t, eval[[]string](b, `[...document.querySelectorAll("#transcript .ev .mark")].map(e => e.textContent)`), 2)
	assert.False(t, eval[bool](b, `window.pwned !== undefined`), "a record's text ran as script")
	assert.Equal(t, 0, eval[int](b, `document.querySelectorAll("#transcript script, #transcript img, #tree-svg script, #tree-svg image").length`), "a record's text became markup")

	// The large tool result is collapsed and not fetched until opened.
	resultSel := `#transcript li.ev[data-id="` + s.result.ID.String() + `"]`
	assert.False(t, eval[bool](b, `document.querySelector('`+resultSel+` details.lazy').open`))
	assert.NotContains(t, eval[string](b, `document.body.textContent`), blobMarker)
	assert.Equal(t, int64(0), recordFetches.Load(), "no record fetched before one is opened")

	if file := os.Getenv("SESSIONSTORE_SCREENSHOT"); file != "" {
		png, err := chromedp.Run(bctx, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(file, png, 0o644))
		t.Logf("screenshot: %s (%d bytes)", file, len(png))
	}

	b.do(chromedp.Click(chromedp.CSS(resultSel+` details.lazy summary`)), chromedp.WaitVisible(chromedp.CSS(resultSel+` pre`)))
	assert.Contains(t, b.text(resultSel+` pre`), blobMarker)
	assert.Equal(t, int64(1), recordFetches.Load(), "the opened record, once")

	// A click on a node shows the path to it.
	b.do(chromedp.Click(chromedp.CSS(`#tree-svg .node[data-id="`+s.firstLeaf.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev[data-id="`+s.firstLeaf.ID.String()+`"]`)))
	assert.Equal(t, []string{askText, lookText, approachA, tooMuchText}, eval[[]string](b, `[...document.querySelectorAll("#transcript .ev .text")].map(e => e.textContent)`))
	assert.Equal(t, 1, eval[int](b, `document.querySelectorAll("#tree-svg .node.selected").length`))

	// Back to HEAD, and a live append: the writer appends, the page
	// shows the new event without a reload.
	b.do(chromedp.Click(chromedp.CSS(`#to-head`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev[data-id="`+s.head.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#status.live`)),
		chromedp.Evaluate[chromedp.Void](`window.beforeLive = 1`))
	live, err := w.Append(ctx, s.meta.ID, sessionstore.AssistantText(liveText))
	require.NoError(t, err)
	liveSel := `#transcript li.ev[data-id="` + live.ID.String() + `"]`
	waitCtx, cancelWait := context.WithTimeout(bctx, 20*time.Second)
	defer cancelWait()
	require.NoError(t, chromedp.Do(waitCtx, chromedp.WaitVisible(chromedp.CSS(liveSel))), "the appended event did not show")
	assert.Equal(t, liveText, b.text(liveSel+` .text`))
	assert.Equal(t, s.events+1, eval[int](b, `document.querySelectorAll("#tree-svg .node").length`))
	assert.Equal(t, live.ID.String(), eval[string](b, `document.querySelector("#tree-svg .node.head").dataset.id`))
	assert.True(t, eval[bool](b, `window.beforeLive === 1`), "the page was reloaded")
}

// browser is a tab the test drives.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, steps...))
}

// text returns the text of the first element sel matches, waiting up to
// 10 s for one. The query and the read are one expression: the page
// redraws parts of itself when a live update comes (the list, the tree),
// and a node found by one call may be gone by the next.
func (b *browser) text(sel string) string {
	b.t.Helper()
	q, err := json.Marshal(sel)
	require.NoError(b.t, err)
	expr := `(() => { const e = document.querySelector(` + string(q) + `); return e ? e.textContent : null })()`
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := chromedp.Run(b.ctx, chromedp.Evaluate[*string](expr))
		require.NoError(b.t, err, sel)
		if v != nil {
			return *v
		}
		if time.Now().After(deadline) {
			require.FailNow(b.t, "no element matches "+sel)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eval evaluates a JavaScript expression in the tab.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	require.NoError(b.t, err, expr)
	return v
}

// treeAnswer is what the test reads of /api/sessions/{id}.
type treeAnswer struct {
	Nodes []struct {
		ID      uuid.UUID `json:"id"`
		Kind    string    `json:"kind"`
		Role    string    `json:"role"`
		Preview string    `json:"preview"`
	} `json:"nodes"`
}

func getTree(t *testing.T, url string) treeAnswer {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var tr treeAnswer
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&tr))
	return tr
}
