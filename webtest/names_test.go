package webtest

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// TestBrowserTitleAndCustom: a session without a name shows as its first
// typed prompt (marked as no name), in the list and its header; a custom
// record shows as a readable line, its JSON behind a closed "raw JSON",
// and its tree node is labelled by the same line.
func TestBrowserTitleAndCustom(t *testing.T) {
	exe := chromium(t)
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	m, err := w.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	const prompt = "Why does the importer drop quoted newlines?"
	const raw = `{"parentUuid":"b3af772f-56ab-4b26-b550-7ad62735d794","isSidechain":false,"userType":"external","type":"system","subtype":"informational","content":"Hook ran"}`
	_, err = w.Append(ctx, m.ID, sessionstore.UserText("<command-name>/clear</command-name>"))
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.UserText(prompt))
	require.NoError(t, err)
	custom, err := w.Append(ctx, m.ID, sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage(raw)})
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.AssistantText("Let me look."))
	require.NoError(t, err)

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	srv := httptest.NewServer(web.New(ro, web.Options{}))
	defer srv.Close()
	tab, stop := newTab(t, exe, 60*time.Second)
	defer stop()
	b := &browser{t: t, ctx: tab}

	b.do(chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`tr.session a.name`)))
	assert.Equal(t, prompt, b.text(`tr.session a.name`))
	assert.True(t, eval[bool](b, `document.querySelector("tr.session a.name").classList.contains("untitled")`))

	sel := `#transcript li.ev[data-id="` + custom.ID.String() + `"]`
	b.do(chromedp.Click(chromedp.CSS(`tr.session a.name`)), chromedp.WaitVisible(chromedp.CSS(sel)))
	assert.Equal(t, prompt, b.text(`#meta b`))
	assert.Contains(t, b.text(`#crumb`), prompt)
	want := web.Summary(json.RawMessage(raw))
	assert.Equal(t, "system · informational · content: Hook ran · +3 more fields", want)
	assert.Equal(t, want, b.text(sel+` .custom-summary`))
	assert.False(t, eval[bool](b, `document.querySelector('`+sel+` details.raw').open`), "the JSON is behind a click")
	var shown any
	require.NoError(t, json.Unmarshal([]byte(b.text(sel+` details.raw pre`)), &shown))
	var stored any
	require.NoError(t, json.Unmarshal([]byte(raw), &stored))
	assert.Equal(t, stored, shown, "the raw JSON is the record")
	_, err = chromedp.Run(tab, chromedp.Poll[bool](`[...document.querySelectorAll("#tree-svg text.label")].some(e => e.textContent === `+jsString(want)+`)`, chromedp.WithPollingTimeout(10*time.Second)))
	assert.NoError(t, err, "the custom node's label: %v", eval[[]string](b, `[...document.querySelectorAll("#tree-svg text.label")].map(e => e.textContent)`))
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
