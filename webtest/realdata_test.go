package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
	"github.com/sessionstore/sessionstore/importer/claude"
)

// claudeCodeDir finds the shared Claude Code transcripts: $SESSIONSTORE_SHARED_DATA,
// a shared/data directory above this one, or /work/shared/data. It skips
// the test when there are none, and fails it under CI.
func claudeCodeDir(t *testing.T) string {
	t.Helper()
	var dirs []string
	if d := os.Getenv("SESSIONSTORE_SHARED_DATA"); d != "" {
		dirs = append(dirs, d)
	}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dirs = append(dirs, filepath.Join(d, "shared", "data"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	dirs = append(dirs, "/work/shared/data")
	for _, d := range dirs {
		if fi, err := os.Stat(filepath.Join(d, "claude-code")); err == nil && fi.IsDir() {
			return filepath.Join(d, "claude-code")
		}
	}
	msg := "no shared/data/claude-code (set SESSIONSTORE_SHARED_DATA to the directory holding it)"
	if ci := os.Getenv("CI"); ci != "" && ci != "0" && ci != "false" {
		t.Fatal(msg)
	}
	t.Skip("skipped: " + msg)
	return ""
}

// pathPage is the number of events the page shows of a path at first
// (app.js's PATH_PAGE).
const pathPage = 100

// TestBrowserRealData imports the shared Claude Code transcripts (package
// importer/claude: branches, compactions, subagent sessions) and opens each
// session in the browser: every event drawn, the path shown
// whole, no error on the page.
func TestBrowserRealData(t *testing.T) {
	exe := chromium(t)
	dir := claudeCodeDir(t)
	paths, err := filepath.Glob(filepath.Join(dir, "*", "*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)

	root := t.TempDir()
	w, err := sessionstore.Open(root, &sessionstore.Options{BlobThreshold: 16 << 10})
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	start := time.Now()
	report, err := claude.Import(context.Background(), w, []string{dir}, nil)
	require.NoError(t, err)
	for _, e := range report.Errors {
		t.Logf("import: %v", e) // malformed lines are left out, the rest imported
	}
	require.NotZero(t, report.Sessions)
	type imported struct {
		meta   sessionstore.Meta
		events int
	}
	metas, err := w.List(context.Background())
	require.NoError(t, err)
	require.Len(t, metas, report.Sessions, "every session the import wrote is listed")
	var sessions []imported
	total := 0
	for _, m := range metas {
		nodes, err := w.Tree(context.Background(), m.ID)
		require.NoError(t, err, m.Name)
		sessions = append(sessions, imported{m, len(nodes)})
		total += len(nodes)
	}
	assert.Equal(t, report.Added, total, "the tree holds every event the import appended")
	t.Logf("%d transcripts, %d sessions, %d events, imported in %v", report.Files, len(sessions), total, time.Since(start).Round(time.Millisecond))

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	srv := httptest.NewServer(web.New(ro, web.Options{}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1440, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	defer cancelBrowser()
	b := &browser{t: t, ctx: bctx}

	// The list's first page: the newest sessions, with their sizes.
	b.do(chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr.session`)))
	rows := min(len(sessions), sessionstore.DefaultPageSize)
	assert.Equal(t, rows, eval[int](b, `document.querySelectorAll("tr.session").length`))
	assert.Equal(t, len(sessions) > rows, eval[bool](b, `!document.querySelector("#more").hidden`))
	first, _, err := ro.ListPage(ctx, sessionstore.Query{Limit: rows}, "")
	require.NoError(t, err)
	require.Len(t, first, rows)
	events := map[uuid.UUID]int{}
	for _, s := range sessions {
		events[s.meta.ID] = s.events
	}
	for _, m := range first {
		sel := `tr.session[data-id="` + m.ID.String() + `"] td.events`
		assert.Equal(t, fmt.Sprint(events[m.ID]), b.text(sel), m.Name)
	}

	for _, s := range sessions {
		sid := s.meta.ID.String()
		if s.events == 0 { // a transcript of summary lines only
			b.do(chromedp.Evaluate[chromedp.Void](`location.hash = "#/s/` + sid + `"`))
			_, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector("#tree-count").textContent.startsWith("(0 events")`, chromedp.WithPollingTimeout(10*time.Second)))
			require.NoError(t, err, s.meta.Name)
			assert.Equal(t, 0, eval[int](b, `document.querySelectorAll("#tree-svg .node").length`), s.meta.Name)
			continue
		}
		var p struct {
			Events []struct {
				ID uuid.UUID `json:"id"`
			} `json:"events"`
		}
		resp, err := http.Get(srv.URL + "/api/sessions/" + sid + "/path")
		require.NoError(t, err)
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
		resp.Body.Close()
		require.NotEmpty(t, p.Events)
		last := p.Events[len(p.Events)-1].ID.String()

		b.do(chromedp.Evaluate[chromedp.Void](`location.hash = "#/s/`+sid+`"`),
			chromedp.WaitVisible(chromedp.CSS(`#tree-svg .node.head`)),
			chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev[data-id="`+last+`"]`)))
		// The tree is drawn where it is on screen: every row of the
		// window drawn holds its node, and the window is the whole tree
		// when it fits.
		assert.Equal(t, fmt.Sprint(s.events), eval[string](b, `document.querySelector("#graph").dataset.total`), s.meta.Name)
		firstRow := eval[int](b, `+document.querySelector("#tree-svg").dataset.first`)
		lastRow := eval[int](b, `+document.querySelector("#tree-svg").dataset.last`)
		assert.True(t, firstRow >= 0 && firstRow < lastRow && lastRow <= s.events, "%s: rows [%d, %d) of %d", s.meta.Name, firstRow, lastRow, s.events)
		_, err = chromedp.Run(bctx, chromedp.Poll[bool](fmt.Sprintf(`document.querySelectorAll("#tree-svg .node").length === %d`, lastRow-firstRow), chromedp.WithPollingTimeout(10*time.Second)))
		assert.NoError(t, err, "%s: a node of the rows drawn is missing", s.meta.Name)
		if s.events <= 30 {
			assert.Equal(t, s.events, lastRow-firstRow, "%s: a small tree is drawn whole", s.meta.Name)
		}
		// The path's newest page, and a button for the rest.
		shown := min(len(p.Events), pathPage)
		assert.Equal(t, shown, eval[int](b, `document.querySelectorAll("#transcript li.ev").length`), s.meta.Name)
		assert.Contains(t, b.text(`#path-title`), fmt.Sprintf("· %d events", len(p.Events)), s.meta.Name)
		assert.Equal(t, len(p.Events) > pathPage, eval[bool](b, `!document.querySelector("#earlier").hidden`), s.meta.Name)
		assert.True(t, eval[bool](b, `document.querySelector("#error").hidden`), "%s: %s", s.meta.Name, eval[string](b, `document.querySelector("#error").textContent`))
	}
}
