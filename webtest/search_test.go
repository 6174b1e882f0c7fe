package webtest

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// TestBrowserSearch: words typed in the search box list the events that
// hold them; a click on a hit opens its session with the event selected,
// as a click on its tree node does, and the path ends at it.
func TestBrowserSearch(t *testing.T) {
	exe := chromium(t)
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	m, err := w.Create(ctx, sessionstore.Meta{Name: "searched"})
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.UserText("Fix the flaky importer."))
	require.NoError(t, err)
	target, err := w.Append(ctx, m.ID, sessionstore.AssistantText("The quokka parser drops quoted newlines."))
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.UserText("Go on."))
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.AssistantText("Done."))
	require.NoError(t, err)

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	srv := httptest.NewServer(web.New(ro, web.Options{}))
	defer srv.Close()
	tab, stop := newTab(t, exe, 60*time.Second)
	defer stop()
	b := &browser{t: t, ctx: tab}

	hit := `#hits li.hit[data-event="` + target.ID.String() + `"] a.hit-link`
	b.do(chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr.session a.name`)),
		chromedp.SendKeys(chromedp.CSS(`#search-q`), "quokka"+kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(hit)))
	assert.Equal(t, 1, eval[int](b, `document.querySelectorAll("#hits li.hit").length`), "only the event with the word")
	assert.Contains(t, b.text(hit), "quokka")

	node := `#tree-svg .node.selected[data-id="` + target.ID.String() + `"]`
	b.do(chromedp.Click(chromedp.CSS(hit)), chromedp.WaitVisible(chromedp.CSS(node)))
	assert.Equal(t, "#/s/"+m.ID.String()+"/e/"+target.ID.String(), eval[string](b, `location.hash`))
	assert.Equal(t, 1, eval[int](b, `document.querySelectorAll("#tree-svg .node.selected").length`))
	_, err = chromedp.Run(tab, chromedp.Poll[bool](`(() => { const l = [...document.querySelectorAll("#transcript li.ev[data-id]")]; return l.length > 0 && l[l.length-1].dataset.id === `+jsString(target.ID.String())+` })()`, chromedp.WithPollingTimeout(10*time.Second)))
	assert.NoError(t, err, "the path ends at the event")
}
