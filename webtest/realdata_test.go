package webtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
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

// ccLine is what the import reads of a Claude Code transcript line.
type ccLine struct {
	Type       string    `json:"type"`
	UUID       string    `json:"uuid"`
	ParentUUID string    `json:"parentUuid"`
	Timestamp  time.Time `json:"timestamp"`
	Cwd        string    `json:"cwd"`
	Message    *struct {
		Role    string          `json:"role"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
	} `json:"message"`
}

type ccBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// ccEvents maps a transcript line to the events a harness would append:
// text to messages, tool_use blocks to tool calls, tool_result blocks to
// tool results, anything else to a custom event holding the line.
func ccEvents(l ccLine, raw []byte) []sessionstore.Event {
	custom := []sessionstore.Event{{Kind: sessionstore.KindCustom, Record: raw}}
	if l.Message == nil || (l.Type != "user" && l.Type != "assistant") {
		return custom
	}
	var text string
	if json.Unmarshal(l.Message.Content, &text) == nil {
		if l.Type == "user" {
			return []sessionstore.Event{sessionstore.UserText(text)}
		}
		return []sessionstore.Event{sessionstore.AssistantMessage(sessionstore.Message{Content: text, Model: l.Message.Model})}
	}
	var blocks []ccBlock
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		return custom
	}
	var out []sessionstore.Event
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if l.Type == "user" {
				out = append(out, sessionstore.UserText(b.Text))
			} else {
				out = append(out, sessionstore.AssistantMessage(sessionstore.Message{Content: b.Text, Model: l.Message.Model}))
			}
		case "tool_use":
			out = append(out, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: b.ID, Name: b.Name, Arguments: b.Input}))
		case "tool_result":
			output := ""
			if json.Unmarshal(b.Content, &output) != nil {
				var parts []ccBlock
				if json.Unmarshal(b.Content, &parts) == nil {
					var texts []string
					for _, p := range parts {
						texts = append(texts, p.Text)
					}
					output = strings.Join(texts, "\n")
				} else {
					output = string(b.Content)
				}
			}
			out = append(out, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: b.ToolUseID, Output: output, IsError: b.IsError}))
		default:
			blob, _ := json.Marshal(b)
			out = append(out, sessionstore.Event{Kind: sessionstore.KindCustom, Record: blob})
		}
	}
	if len(out) == 0 {
		return custom
	}
	return out
}

// importTranscript appends the transcript at path to a new session,
// following its parentUuid links (a line whose parent is not the newest
// event starts a branch), keeping its timestamps; it returns the session
// and its number of events.
func importTranscript(t *testing.T, w *sessionstore.Store, path string) (sessionstore.Meta, int) {
	t.Helper()
	ctx := context.Background()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	m, err := w.Create(ctx, sessionstore.Meta{Name: filepath.Base(filepath.Dir(path)) + "/" + filepath.Base(path)})
	require.NoError(t, err)
	ours := map[string]uuid.UUID{} // a line's uuid to the last event made of it
	head := uuid.Nil
	n := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for sc.Scan() {
		raw := append([]byte(nil), sc.Bytes()...)
		var l ccLine
		if json.Unmarshal(raw, &l) != nil || l.UUID == "" {
			continue // a summary line, or not a transcript line
		}
		if m.WorkingDir == "" && l.Cwd != "" {
			m, err = w.UpdateMeta(ctx, m.ID, func(mm *sessionstore.Meta) { mm.WorkingDir = l.Cwd })
			require.NoError(t, err)
		}
		if p, ok := ours[l.ParentUUID]; ok && p != head {
			require.NoError(t, w.Branch(ctx, m.ID, p))
		}
		evs := ccEvents(l, raw)
		for i := range evs {
			evs[i].Time = l.Timestamp
		}
		got, err := w.AppendWith(ctx, m.ID, sessionstore.AppendOptions{KeepTime: true}, evs...)
		require.NoError(t, err, "%s: line %s", path, l.UUID)
		head = got[len(got)-1].ID
		ours[l.UUID] = head
		n += len(got)
	}
	require.NoError(t, sc.Err())
	return m, n
}

// TestBrowserRealData imports the shared Claude Code transcripts and
// opens each session in the browser: every event drawn, the path shown
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
	type imported struct {
		meta   sessionstore.Meta
		events int
	}
	var sessions []imported
	total := 0
	start := time.Now()
	for _, p := range paths {
		m, n := importTranscript(t, w, p)
		sessions = append(sessions, imported{m, n})
		total += n
	}
	t.Logf("%d transcripts, %d events, imported in %v", len(sessions), total, time.Since(start).Round(time.Millisecond))

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
	for _, s := range sessions[len(sessions)-rows:] {
		sel := `tr.session[data-id="` + s.meta.ID.String() + `"] td.events`
		assert.Equal(t, fmt.Sprint(s.events), b.text(sel), s.meta.Name)
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
		assert.Equal(t, s.events, eval[int](b, `document.querySelectorAll("#tree-svg .node").length`), s.meta.Name)
		assert.Equal(t, len(p.Events), eval[int](b, `document.querySelectorAll("#transcript li.ev").length`), s.meta.Name)
		assert.True(t, eval[bool](b, `document.querySelector("#error").hidden`), "%s: %s", s.meta.Name, eval[string](b, `document.querySelector("#error").textContent`))
	}
}
