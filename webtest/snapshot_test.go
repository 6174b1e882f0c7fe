package webtest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// TestBrowserSnapshots: the tree marks the events that carry a workspace
// snapshot (their own shape, a "files" tag, labelled "workspace snapshot"
// and the manifest's label), and the transcript shows the files each one
// changed: every file added at the first snapshot, the delta at a later
// one, a file name that holds markup as text.
func TestBrowserSnapshots(t *testing.T) {
	exe := chromium(t)
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	const hostile = `docs/<img src=x onerror="window.pwned=1">.md`
	m, err := w.Create(ctx, sessionstore.Meta{Name: "snapshots"})
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.UserText("Change a.go."))
	require.NoError(t, err)
	snap1, err := w.RecordFiles(ctx, m.ID, "before the edit",
		sessionstore.FileWrite{Path: "a.go", Data: []byte("package a\n")},
		sessionstore.FileWrite{Path: "b.go", Data: []byte("package b\n")},
		sessionstore.FileWrite{Path: hostile, Data: []byte("# doc\n")})
	require.NoError(t, err)
	reply, err := w.Append(ctx, m.ID, sessionstore.AssistantText("Editing a.go."))
	require.NoError(t, err)
	snap2, err := w.RecordFiles(ctx, m.ID, "after the edit",
		sessionstore.FileWrite{Path: "a.go", Data: []byte("package a\n\nfunc A() {}\n")},
		sessionstore.FileWrite{Path: hostile, Deleted: true},
		sessionstore.FileWrite{Path: "d.go", Data: []byte("package d\n")})
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.AssistantText("Done."))
	require.NoError(t, err)
	require.NoError(t, w.Branch(ctx, m.ID, reply.ID))
	snap3, err := w.RecordFiles(ctx, m.ID, "", sessionstore.FileWrite{Path: "e.txt", Data: []byte("e\n")})
	require.NoError(t, err)

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	srv := httptest.NewServer(web.New(ro, web.Options{PollInterval: 100 * time.Millisecond}))
	defer srv.Close()
	bctx, stop := newTab(t, exe, 60*time.Second)
	defer stop()
	b := &browser{t: t, ctx: bctx}

	sel := func(id string) string { return `#transcript li.ev[data-id="` + id + `"]` }
	ops := func(id string) []string {
		return eval[[]string](b, `[...document.querySelectorAll('`+sel(id)+` li.change')].map(e => e.dataset.op + " " + e.querySelector(".path").textContent)`)
	}
	// The active path ends at snap3, on the branch.
	b.do(chromedp.Navigate(srv.URL+"/#/s/"+m.ID.String()),
		chromedp.WaitVisible(chromedp.CSS(`#tree-svg .node`)),
		chromedp.WaitVisible(chromedp.CSS(sel(snap3.ID.String())+` li.change`)),
		chromedp.WaitVisible(chromedp.CSS(sel(snap1.ID.String())+` li.change`)))
	assert.ElementsMatch(t, []string{snap1.ID.String(), snap2.ID.String(), snap3.ID.String()},
		eval[[]string](b, `[...document.querySelectorAll("#tree-svg .node.snapshot")].map(e => e.dataset.id)`))
	assert.Equal(t, 3, eval[int](b, `[...document.querySelectorAll("#tree-svg text.tag")].filter(e => e.textContent === "files").length`))
	labels := eval[[]string](b, `[...document.querySelectorAll("#tree-svg text.label")].map(e => e.textContent)`)
	assert.Contains(t, labels, "workspace snapshot · before the edit")
	assert.Contains(t, labels, "workspace snapshot · after the edit")
	assert.Contains(t, labels, "workspace snapshot")

	assert.Equal(t, []string{"added a.go", "added b.go", "added " + hostile}, ops(snap1.ID.String()), "the first snapshot: every file added")
	assert.Contains(t, b.text(sel(snap1.ID.String())+` .changes-head`), "3 files changed (3 added) · 3 files in the workspace")
	assert.Equal(t, "before the edit", b.text(sel(snap1.ID.String())+` .snapshot-label`))
	assert.Equal(t, []string{"added e.txt"}, ops(snap3.ID.String()))
	assert.Equal(t, 0, eval[int](b, `document.querySelectorAll("`+`#transcript li.ev[data-id='`+snap2.ID.String()+`']").length`), "not on the path")

	// A click on the second snapshot: the path to it, its delta.
	b.do(chromedp.Click(chromedp.CSS(`#tree-svg .node[data-id="`+snap2.ID.String()+`"]`)),
		chromedp.WaitVisible(chromedp.CSS(sel(snap2.ID.String())+` li.change`)))
	assert.Equal(t, []string{"modified a.go", "added d.go", "deleted " + hostile}, ops(snap2.ID.String()))
	assert.Contains(t, b.text(sel(snap2.ID.String())+` li.change[data-op="modified"] .size`), "10 B → 23 B")
	assert.False(t, eval[bool](b, `window.pwned !== undefined`), "a file name ran as script")
	assert.Equal(t, 0, eval[int](b, `document.querySelectorAll("#transcript img, #tree-svg image").length`), "a file name became markup")
}
