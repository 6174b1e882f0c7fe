package webtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// newTab starts the browser and returns a tab, and the function that
// stops the browser (before the server closes: its live stream holds a
// connection).
func newTab(tb testing.TB, exe string, timeout time.Duration) (context.Context, func()) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1440, 1000))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(allocCtx, chromedp.WithErrorf(tb.Logf))
	return bctx, func() { cancelBrowser(); cancelAlloc(); cancel() }
}

// TestBrowserHostileNames: a session's name, working dir and model, a lane's
// name, a tool's name and call id, and a custom record, written to be taken
// for markup, show as text.
func TestBrowserHostileNames(t *testing.T) {
	exe := chromium(t)
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	const x = `<img src=x onerror="window.pwned=1"><svg onload="window.pwned=1"></svg>`
	m, err := w.Create(ctx, sessionstore.Meta{Name: "name " + x, WorkingDir: "/dir/" + x, Model: "model " + x,
		Labels: map[string]string{"l": x}})
	require.NoError(t, err)
	ask, err := w.Append(ctx, m.ID, sessionstore.UserText("ask "+x))
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "id " + x, Name: "tool " + x, Arguments: json.RawMessage(`{"a":"` + strings.ReplaceAll(x, `"`, `\"`) + `"}`)}))
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "id " + x, Output: "out " + x, Outcome: "outcome " + x}))
	require.NoError(t, err)
	raw, err := json.Marshal(map[string]string{"custom": x})
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.Event{Kind: sessionstore.KindCustom, Record: raw})
	require.NoError(t, err)
	require.NoError(t, w.CreateLane(ctx, m.ID, "lane-"+strings.NewReplacer("<", "", ">", "", " ", "", `"`, "", "=", "").Replace(x), ask.ID))

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	srv := httptest.NewServer(web.New(ro, web.Options{}))
	defer srv.Close()
	tab, stop := newTab(t, exe, 60*time.Second)
	defer stop()
	b := &browser{t: t, ctx: tab}

	b.do(chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr.session a.name`)))
	assert.Equal(t, "name "+x, b.text(`tr.session a.name`))
	assert.Contains(t, b.text(`#sessions tbody`), "/dir/"+x)
	b.do(chromedp.Click(chromedp.CSS(`tr.session a.name`)),
		chromedp.WaitVisible(chromedp.CSS(`#tree-svg .node.head`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev.custom`)))
	meta := b.text(`#meta`)
	assert.Contains(t, meta, "dir /dir/"+x)
	assert.Contains(t, meta, "model model "+x)
	assert.Contains(t, b.text(`#crumb`), "name "+x)
	body := b.text(`#transcript`)
	for _, want := range []string{"ask " + x, "tool call: tool " + x + " (id " + x + ")", "outcome " + x} {
		assert.Contains(t, body, want)
	}
	assert.False(t, eval[bool](b, `window.pwned !== undefined`), "text ran as script")
	assert.Equal(t, 0, eval[int](b, `document.querySelectorAll("main img, main svg svg, #tree-svg image, #tree-svg foreignObject, main script").length`), "text became markup")
}

// BenchmarkBrowserTenThousand: opening a session of 10,000 events (a
// branch every hundred, the path to HEAD about half of them) until its
// tree and path are drawn, and a live append until the page shows it.
func BenchmarkBrowserTenThousand(b *testing.B) {
	exe := chromium(b)
	ctx := context.Background()
	root := b.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(b, err)
	defer w.Close()
	m, err := w.Create(ctx, sessionstore.Meta{Name: "ten thousand"})
	require.NoError(b, err)
	var all []sessionstore.Event
	for len(all) < 10000 {
		batch := make([]sessionstore.Event, 100)
		for i := range batch {
			batch[i] = sessionstore.UserText(strings.Repeat("text of a message ", 10))
		}
		got, err := w.AppendBatch(ctx, m.ID, batch...)
		require.NoError(b, err)
		all = append(all, got...)
		if len(all) < 10000 {
			require.NoError(b, w.Branch(ctx, m.ID, all[len(all)-50].ID))
		}
	}
	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(b, err)
	defer ro.Close()
	srv := httptest.NewServer(web.New(ro, web.Options{PollInterval: 100 * time.Millisecond}))
	defer srv.Close()
	tab, stop := newTab(b, exe, 5*time.Minute)
	defer stop()
	err = chromedp.Do(tab, chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr.session`)))
	require.NoError(b, err)
	head := all[len(all)-1].ID.String()
	sid := m.ID.String()

	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			err := chromedp.Do(tab,
				chromedp.Evaluate[chromedp.Void](`location.hash = "#/"`),
				chromedp.WaitVisible(chromedp.CSS(`#list-view`)),
				chromedp.Evaluate[chromedp.Void](`location.hash = "#/s/`+sid+`"`),
				chromedp.WaitVisible(chromedp.CSS(`#tree-svg .node.head[data-id="`+head+`"]`)),
				chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev[data-id="`+head+`"]`)))
			require.NoError(b, err)
		}
		n, err := chromedp.Run(tab, chromedp.Evaluate[string](`document.querySelector("#graph").dataset.total`))
		require.NoError(b, err)
		require.Equal(b, fmt.Sprint(len(all)), n)
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/open")
	})
	b.Run("live-append", func(b *testing.B) {
		err := chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`#status.live`)))
		require.NoError(b, err)
		for b.Loop() {
			ev, err := w.Append(ctx, m.ID, sessionstore.AssistantText("live"))
			require.NoError(b, err)
			require.NoError(b, chromedp.Do(tab, chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev[data-id="`+ev.ID.String()+`"]`))))
		}
		b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/append")
	})
}

// TestBrowserOpenFetchesOnce: opening a session fetches its tree and its
// path once; the live stream's first look, which holds nothing the page
// lacks, draws nothing again (on a session of 10,000 events each draw
// costs seconds); an append fetches the path once more.
func TestBrowserOpenFetchesOnce(t *testing.T) {
	exe := chromium(t)
	root := t.TempDir()
	w, err := sessionstore.Open(root, &sessionstore.Options{BlobThreshold: 16 << 10})
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	s := build(t, w)
	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	h := web.New(ro, web.Options{PollInterval: 100 * time.Millisecond})
	var paths atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/path") {
			paths.Add(1)
		}
		h.ServeHTTP(rw, r)
	}))
	defer srv.Close()
	tab, stop := newTab(t, exe, 60*time.Second)
	defer stop()
	b := &browser{t: t, ctx: tab}

	b.do(chromedp.Navigate(srv.URL+"/#/s/"+s.meta.ID.String()),
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev[data-id="`+s.head.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#status.live`)))
	// Wait for a second fetch, which must not come (the first look
	// arrives within a poll interval of the stream's start).
	time.Sleep(time.Second)
	assert.Equal(t, int64(1), paths.Load(), "path fetches after the open")

	live, err := w.Append(context.Background(), s.meta.ID, sessionstore.AssistantText(liveText))
	require.NoError(t, err)
	b.do(chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev[data-id="` + live.ID.String() + `"]`)))
	assert.Equal(t, int64(2), paths.Load(), "path fetches after an append")
}
