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

// TestBrowserLaneSwitch: after a lane switch no append has followed, the
// page shows the lane's path as the active one, its end tagged NEXT and
// HEAD where it is, and the path's title names that end as NEXT, not as
// HEAD.
func TestBrowserLaneSwitch(t *testing.T) {
	exe := chromium(t)
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, &sessionstore.Options{BlobThreshold: 16 << 10})
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	s := build(t, w)
	require.NoError(t, w.SwitchLane(ctx, s.meta.ID, "state-machine"))

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	srv := httptest.NewServer(web.New(ro, web.Options{PollInterval: 100 * time.Millisecond}))
	defer srv.Close()
	bctx, stop := newTab(t, exe, 60*time.Second)
	defer stop()
	b := &browser{t: t, ctx: bctx}

	leaf := s.firstLeaf.ID.String()
	b.do(chromedp.Navigate(srv.URL+"/#/s/"+s.meta.ID.String()),
		chromedp.WaitVisible(chromedp.CSS(`#tree-svg .node`)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.ev[data-id="`+leaf+`"]`)))
	assert.ElementsMatch(t, []string{"HEAD", "NEXT", "⎇ main", "⎇ state-machine"}, eval[[]string](b, `[...document.querySelectorAll("#tree-svg text.tag")].map(e => e.textContent)`))
	assert.Equal(t, s.head.ID.String(), eval[string](b, `document.querySelector("#tree-svg .node.head").dataset.id`))
	texts := eval[[]string](b, `[...document.querySelectorAll("#transcript .ev .text")].map(e => e.textContent)`)
	assert.Equal(t, []string{askText, lookText, approachA, tooMuchText}, texts, "the lane's path")
	title := b.text(`#path-title`)
	short := sessionstore.ShortID(s.firstLeaf.ID)
	assert.Contains(t, title, "NEXT "+short, "the path's end is not HEAD")
	assert.NotContains(t, title, "HEAD", "the path's end is not HEAD")
}
