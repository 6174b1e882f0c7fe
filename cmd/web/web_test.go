package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
	"github.com/sessionstore/sessionstore/sessiontest"
)

// hostile is text a transcript may hold that must stay text in the page.
const (
	hostileScript = `<script>window.pwned=1</script>`
	hostileImg    = `<img src=x onerror="window.pwned=1">`
)

// bigOutput is a tool output over the fixture's 16 KiB blob threshold.
var bigOutput = strings.Repeat("line of test output\n", 1200)

// fixture is a root with a writer Store and a read-only Store beside it,
// the web view of the read-only one, and the ids the tests look for.
type fixture struct {
	root       string
	w, ro      *sessionstore.Store
	srv        *httptest.Server
	h          *web.Handler
	session    sessionstore.Meta
	other      sessionstore.Meta // an older session, without events
	ask        sessionstore.Event
	result     sessionstore.Event // a tool result stored as a blob
	firstLeaf  sessionstore.Event // the end of the abandoned branch
	summary    sessionstore.Event // the branch summary that starts the second branch
	compaction sessionstore.Event
	hostile    sessionstore.Event
	head       sessionstore.Event
	all        []sessionstore.Event // in append order
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{root: t.TempDir()}
	var err error
	f.w, err = sessionstore.Open(f.root, &sessionstore.Options{BlobThreshold: 16 << 10})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.w.Close()) })

	f.other, err = f.w.Create(ctx, sessionstore.Meta{Name: "older session"})
	require.NoError(t, err)
	f.session, err = f.w.Create(ctx, sessionstore.Meta{Name: "web view", WorkingDir: "/src/app", Model: "test-model"})
	require.NoError(t, err)
	id := f.session.ID
	add := func(ev sessionstore.Event) sessionstore.Event {
		t.Helper()
		got, err := f.w.Append(ctx, id, ev)
		require.NoError(t, err)
		f.all = append(f.all, got)
		return got
	}
	f.ask = add(sessionstore.UserText("Build the feature."))
	add(sessionstore.AssistantText("Running the tests first."))
	add(sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "run_tests", Arguments: json.RawMessage(`{"pkg":"./..."}`)}))
	f.result = add(sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: bigOutput}))
	require.NotEmpty(t, f.result.Digest, "the tool result should be a blob")
	f.firstLeaf = add(sessionstore.AssistantText("Approach A: rewrite main.go."))

	f.summary, err = f.w.AppendBranchSummary(ctx, id, f.ask.ID, sessionstore.BranchSummaryRecord{Summary: sessionstore.Summary{Text: "Approach A was abandoned."}})
	require.NoError(t, err)
	f.all = append(f.all, f.summary)
	add(sessionstore.AssistantText("Approach B: a new package."))
	f.compaction, err = f.w.CompactWith(ctx, id, sessiontest.Summarizer{}, sessionstore.CompactOptions{})
	require.NoError(t, err)
	f.all = append(f.all, f.compaction)
	f.hostile = add(sessionstore.UserText(hostileScript + " and " + hostileImg))
	f.head = add(sessionstore.AssistantText("Go on after the summary."))
	require.NoError(t, f.w.CreateLane(ctx, id, "approach-a", f.firstLeaf.ID))

	f.ro, err = sessionstore.Open(f.root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, f.ro.Close()) })
	f.h = web.New(f.ro, web.Options{PollInterval: web.MinPollInterval})
	f.srv = httptest.NewServer(f.h)
	t.Cleanup(f.srv.Close)
	return f
}

// get fetches path and decodes its JSON answer into v (when not nil),
// returning the status.
func (f *fixture) get(t *testing.T, path string, v any) int {
	t.Helper()
	resp, err := http.Get(f.srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if v != nil {
		require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%s: %s", path, body)
		require.NoError(t, json.Unmarshal(body, v), "%s: %s", path, body)
	}
	return resp.StatusCode
}

type listAnswer struct {
	Sessions []struct {
		ID         uuid.UUID `json:"id"`
		Name       string    `json:"name"`
		WorkingDir string    `json:"working_dir"`
		Model      string    `json:"model"`
		CreatedAt  time.Time `json:"created_at"`
		Events     int       `json:"events"`
		Bytes      int64     `json:"bytes"`
	} `json:"sessions"`
	Next string `json:"next"`
}

type node struct {
	ID         uuid.UUID  `json:"id"`
	ParentID   *uuid.UUID `json:"parent_id"`
	BranchFrom *uuid.UUID `json:"branch_from"`
	Kind       string     `json:"kind"`
	Role       string     `json:"role"`
	Size       int64      `json:"size"`
	Preview    string     `json:"preview"`
}

type treeAnswer struct {
	Session struct {
		ID     uuid.UUID `json:"id"`
		Name   string    `json:"name"`
		Events int       `json:"events"`
	} `json:"session"`
	Head  *uuid.UUID `json:"head"`
	Next  *uuid.UUID `json:"next"`
	Lanes []struct {
		Name   string     `json:"name"`
		Tip    *uuid.UUID `json:"tip"`
		Active bool       `json:"active"`
	} `json:"lanes"`
	From  int    `json:"from"`
	Total int    `json:"total"`
	Nodes []node `json:"nodes"`
}

type pathEvent struct {
	ID      uuid.UUID       `json:"id"`
	Kind    string          `json:"kind"`
	Role    string          `json:"role"`
	Digest  string          `json:"digest"`
	Size    int64           `json:"size"`
	Record  json.RawMessage `json:"record"`
	Omitted bool            `json:"omitted"`
	Summary string          `json:"summary"`
}

type pathAnswer struct {
	Leaf    uuid.UUID   `json:"leaf"`
	Context bool        `json:"context"`
	Events  []pathEvent `json:"events"`
}

func ids(events []sessionstore.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, ev := range events {
		out[i] = ev.ID
	}
	return out
}

func TestPage(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ path, ctype, holds string }{
		{"/", "text/html; charset=utf-8", `<script src="/static/app.js" defer></script>`},
		{"/static/app.js", "text/javascript; charset=utf-8", "EventSource"},
		{"/static/style.css", "text/css; charset=utf-8", "svg .node"},
	} {
		resp, err := http.Get(f.srv.URL + tc.path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, tc.path)
		assert.Equal(t, tc.ctype, resp.Header.Get("Content-Type"), tc.path)
		assert.Contains(t, string(body), tc.holds, tc.path)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'self'", tc.path)
		assert.Equal(t, "nosniff", resp.Header.Get("X-Content-Type-Options"), tc.path)
	}
	// Nothing is loaded from elsewhere.
	for _, name := range []string{"/", "/static/app.js", "/static/style.css"} {
		resp, err := http.Get(f.srv.URL + name)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.NotRegexp(t, `(?i)(src|href)\s*=\s*["']?(https?:)?//`, string(body), name)
		assert.NotRegexp(t, `(?i)(url\(|fetch\(|EventSource\(|import)\s*["']?(https?:)?//`, string(body), name)
	}
}

func TestList(t *testing.T) {
	f := newFixture(t)
	var l listAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions", &l))
	require.Len(t, l.Sessions, 2)
	assert.Empty(t, l.Next)
	s := l.Sessions[0]
	assert.Equal(t, f.session.ID, s.ID, "newest first")
	assert.Equal(t, "web view", s.Name)
	assert.Equal(t, "/src/app", s.WorkingDir)
	assert.Equal(t, "test-model", s.Model)
	assert.True(t, f.session.CreatedAt.Equal(s.CreatedAt))
	assert.Equal(t, len(f.all), s.Events)
	var want int64
	for _, ev := range f.all {
		want += ev.Size
	}
	assert.Equal(t, want, s.Bytes)
	assert.Equal(t, f.other.ID, l.Sessions[1].ID)
	assert.Equal(t, 0, l.Sessions[1].Events)

	// A page of one, and the next.
	var p1, p2 listAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions?limit=1", &p1))
	require.Len(t, p1.Sessions, 1)
	require.NotEmpty(t, p1.Next)
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions?limit=1&cursor="+p1.Next, &p2))
	require.Len(t, p2.Sessions, 1)
	assert.Equal(t, f.other.ID, p2.Sessions[0].ID)
}

func TestSession(t *testing.T) {
	f := newFixture(t)
	var tr treeAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.ID.String(), &tr))
	assert.Equal(t, f.session.ID, tr.Session.ID)
	assert.Equal(t, len(f.all), tr.Session.Events)
	require.Len(t, tr.Nodes, len(f.all))
	assert.Equal(t, len(f.all), tr.Total)
	assert.Equal(t, 0, tr.From)
	for i, n := range tr.Nodes {
		ev := f.all[i]
		assert.Equal(t, ev.ID, n.ID)
		assert.Equal(t, string(ev.Kind), n.Kind)
		assert.Equal(t, string(ev.Role), n.Role)
		assert.Equal(t, ev.Size, n.Size)
		if ev.ParentID == uuid.Nil {
			assert.Nil(t, n.ParentID)
		} else if assert.NotNil(t, n.ParentID) {
			assert.Equal(t, ev.ParentID, *n.ParentID)
		}
		assert.Equal(t, ev.BranchFrom != uuid.Nil, n.BranchFrom != nil, "branch_from of %s", ev.ID)
	}
	require.NotNil(t, tr.Head)
	assert.Equal(t, f.head.ID, *tr.Head)
	require.NotNil(t, tr.Next)
	assert.Equal(t, f.head.ID, *tr.Next, "no switch pending: the active path ends at HEAD")
	require.Len(t, tr.Lanes, 2)
	assert.Equal(t, "approach-a", tr.Lanes[0].Name)
	assert.Equal(t, f.firstLeaf.ID, *tr.Lanes[0].Tip)
	assert.False(t, tr.Lanes[0].Active)
	assert.Equal(t, sessionstore.DefaultLane, tr.Lanes[1].Name)
	assert.True(t, tr.Lanes[1].Active)

	// A session without events.
	var empty treeAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.other.ID.String(), &empty))
	assert.Nil(t, empty.Head)
	assert.Empty(t, empty.Nodes)
	assert.NotNil(t, empty.Nodes, "an empty list, not null")
}

// TestActivePathAfterSwitch: after a lane switch in the writer, the view
// (a read-only Store) shows the lane's path as the active one, as Load
// gives it, with HEAD where it was until the next append.
func TestActivePathAfterSwitch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	require.NoError(t, f.w.SwitchLane(ctx, f.session.ID, "approach-a"))
	loaded, err := f.w.Load(ctx, f.session.ID)
	require.NoError(t, err)
	require.Equal(t, f.firstLeaf.ID, loaded[len(loaded)-1].ID, "precondition: Load follows the switch")

	var tr treeAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.ID.String(), &tr))
	require.NotNil(t, tr.Head)
	require.NotNil(t, tr.Next)
	assert.Equal(t, f.head.ID, *tr.Head, "HEAD moves with the next append")
	assert.Equal(t, f.firstLeaf.ID, *tr.Next, "the active path ends at the lane's tip")
	var p pathAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.ID.String()+"/path?context=1", &p))
	assert.Equal(t, f.firstLeaf.ID, p.Leaf)
	got := make([]uuid.UUID, len(p.Events))
	for i, e := range p.Events {
		got[i] = e.ID
	}
	assert.Equal(t, ids(loaded), got, "the path shown is Load's")
}

func TestPath(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sid := f.session.ID.String()
	full, err := f.w.FullPath(ctx, f.session.ID, uuid.Nil)
	require.NoError(t, err)
	loaded, err := f.w.Load(ctx, f.session.ID)
	require.NoError(t, err)
	branch, err := f.w.FullPath(ctx, f.session.ID, f.firstLeaf.ID)
	require.NoError(t, err)
	require.Less(t, len(loaded), len(full), "the compaction should shorten the context")

	for _, tc := range []struct {
		name  string
		query string
		leaf  uuid.UUID
		want  []uuid.UUID
	}{
		{"active path", "", f.head.ID, ids(full)},
		{"context", "?context=1", f.head.ID, ids(loaded)},
		{"leaf", "?leaf=" + f.firstLeaf.ID.String(), f.firstLeaf.ID, ids(branch)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p pathAnswer
			require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+sid+"/path"+tc.query, &p))
			assert.Equal(t, tc.leaf, p.Leaf)
			got := make([]uuid.UUID, len(p.Events))
			for i, ev := range p.Events {
				got[i] = ev.ID
			}
			assert.Equal(t, tc.want, got)
		})
	}

	// The blob's record is left out, the others are carried.
	var p pathAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+sid+"/path?leaf="+f.firstLeaf.ID.String(), &p))
	var sawBlob bool
	for _, ev := range p.Events {
		if ev.ID == f.result.ID {
			sawBlob = true
			assert.True(t, ev.Omitted)
			assert.Equal(t, "null", string(ev.Record))
			assert.Equal(t, f.result.Digest, ev.Digest)
			assert.Equal(t, f.result.Size, ev.Size)
			continue
		}
		assert.False(t, ev.Omitted, "event %s", ev.ID)
		assert.NotEqual(t, "null", string(ev.Record), "event %s", ev.ID)
	}
	assert.True(t, sawBlob)

	// An inline record over Options.InlineLimit is left out too.
	small := httptest.NewServer(web.New(f.ro, web.Options{InlineLimit: 40}))
	defer small.Close()
	resp, err := http.Get(small.URL + "/api/sessions/" + sid + "/path")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&p))
	for _, ev := range p.Events {
		assert.Equal(t, ev.Size > 40 || ev.Digest != "", ev.Omitted, "event %s of %d bytes", ev.ID, ev.Size)
	}

	// A session without events has an empty path.
	var empty pathAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.other.ID.String()+"/path", &empty))
	assert.NotNil(t, empty.Events)
	assert.Empty(t, empty.Events)
}

func TestEvent(t *testing.T) {
	f := newFixture(t)
	var ev pathEvent
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.ID.String()+"/events/"+f.result.ID.String(), &ev))
	assert.Equal(t, f.result.ID, ev.ID)
	assert.False(t, ev.Omitted)
	var r sessionstore.ToolResult
	require.NoError(t, json.Unmarshal(ev.Record, &r))
	assert.Equal(t, bigOutput, r.Output, "the blob is read")

	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.ID.String()+"/events/"+f.ask.ID.String(), &ev))
	assert.JSONEq(t, string(f.ask.Record), string(ev.Record))
}

func TestErrors(t *testing.T) {
	f := newFixture(t)
	sid := f.session.ID.String()
	unknown := uuid.Must(uuid.NewV7()).String()
	for _, tc := range []struct {
		method, path string
		status       int
		holds        string
	}{
		{"GET", "/api/sessions/" + unknown, http.StatusNotFound, "not found"},
		{"GET", "/api/sessions/" + unknown + "/path", http.StatusNotFound, "not found"},
		{"GET", "/api/sessions/" + unknown + "/live", http.StatusNotFound, "not found"},
		{"GET", "/api/sessions/" + sid + "/events/" + unknown, http.StatusNotFound, "not found"},
		{"GET", "/api/sessions/" + sid + "/path?leaf=" + unknown, http.StatusNotFound, "not found"},
		{"GET", "/api/sessions/not-an-id", http.StatusBadRequest, `bad session id "not-an-id"`},
		{"GET", "/api/sessions/" + strings.ReplaceAll(sid, "-", ""), http.StatusBadRequest, "canonical form"},
		{"GET", "/api/sessions/xyz/path", http.StatusBadRequest, "bad session id"},
		{"GET", "/api/sessions/" + sid + "/events/12", http.StatusBadRequest, `bad event id "12"`},
		{"GET", "/api/sessions/" + sid + "/path?leaf=nope", http.StatusBadRequest, "bad leaf event id"},
		{"GET", "/api/sessions/" + sid + "/path?context=maybe", http.StatusBadRequest, "bad context"},
		{"GET", "/api/sessions/" + sid + "/live?known=-1", http.StatusBadRequest, "bad known"},
		{"GET", "/api/sessions?limit=0", http.StatusBadRequest, "bad limit"},
		{"GET", "/api/sessions?cursor=garbage", http.StatusBadRequest, "invalid list query"},
		{"GET", "/api/nothing", http.StatusNotFound, "no such endpoint"},
		{"POST", "/api/sessions", http.StatusMethodNotAllowed, "read-only"},
		{"DELETE", "/api/sessions/" + sid, http.StatusMethodNotAllowed, "read-only"},
	} {
		req, err := http.NewRequest(tc.method, f.srv.URL+tc.path, nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, tc.status, resp.StatusCode, "%s %s: %s", tc.method, tc.path, body)
		assert.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%s %s", tc.method, tc.path)
		var e struct{ Error string }
		if assert.NoError(t, json.Unmarshal(body, &e), "%s %s: %s", tc.method, tc.path, body) {
			assert.Contains(t, e.Error, tc.holds, "%s %s", tc.method, tc.path)
		}
	}
	// The store is untouched by a refused write.
	var l listAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions", &l))
	assert.Len(t, l.Sessions, 2)
}

// TestHost: a request must name the server by a loopback address or
// localhost (or an allowed name), which a page of another site whose name
// resolves to 127.0.0.1 does not.
func TestHost(t *testing.T) {
	f := newFixture(t)
	h := web.New(f.ro, web.Options{AllowedHosts: []string{"view.example"}})
	for _, tc := range []struct {
		host   string
		status int
	}{
		{"127.0.0.1:8080", http.StatusOK},
		{"localhost:8080", http.StatusOK},
		{"LOCALHOST", http.StatusOK},
		{"[::1]:8080", http.StatusOK},
		{"127.0.0.2", http.StatusOK},
		{"view.example:443", http.StatusOK},
		{"evil.example:8080", http.StatusForbidden},
		{"10.0.0.1:8080", http.StatusForbidden},
		{"", http.StatusForbidden},
	} {
		req := httptest.NewRequest("GET", "/api/sessions", nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, tc.status, rec.Code, "host %q: %s", tc.host, rec.Body)
		if tc.status == http.StatusForbidden {
			assert.Contains(t, rec.Body.String(), "is not this server's", tc.host)
		}
	}
}

// TestEscaping checks that hostile record text reaches the page only as
// JSON string content, and that the page's script never parses text as
// markup (the browser test in webtest/ checks the drawn page).
func TestEscaping(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{
		"/api/sessions/" + f.session.ID.String() + "/path",
		"/api/sessions/" + f.session.ID.String() + "/events/" + f.hostile.ID.String(),
	} {
		resp, err := http.Get(f.srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.NotContains(t, string(body), "<script", path)
		assert.NotContains(t, string(body), "<img", path)
		assert.Contains(t, string(body), `\u003cscript\u003e`, path)
		// And it decodes back to the text as written.
		assert.Contains(t, decodeStrings(t, body), hostileScript+" and "+hostileImg, path)
	}
	resp, err := http.Get(f.srv.URL + "/static/app.js")
	require.NoError(t, err)
	js, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	for _, sink := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"} {
		assert.NotContains(t, string(js), sink)
	}
}

// decodeStrings returns every string value in the JSON document b, joined by newlines.
func decodeStrings(t *testing.T, b []byte) string {
	var v any
	require.NoError(t, json.Unmarshal(b, &v))
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			out = append(out, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return strings.Join(out, "\n")
}

// sse reads Server-Sent Events from a stream.
type sse struct {
	sc *bufio.Scanner
}

// next returns the next event's name and data.
func (s *sse) next() (name, data string, err error) {
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case line == "":
			if name != "" || data != "" {
				return name, data, nil
			}
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data += strings.TrimPrefix(line, "data: ")
		}
	}
	if err := s.sc.Err(); err != nil {
		return "", "", err
	}
	return "", "", io.EOF
}

func openLive(t *testing.T, ctx context.Context, url string) (*http.Response, *sse) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	return resp, &sse{sc: sc}
}

// TestLive: an append by the writer Store reaches a client of the web view
// of the read-only Store as a "tree" event holding the new node.
func TestLive(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	url := f.srv.URL + "/api/sessions/" + f.session.ID.String() + "/live?known=" + itoa(len(f.all))
	resp, stream := openLive(t, ctx, url)
	defer resp.Body.Close()

	oldHead, err := f.w.Head(ctx, f.session.ID)
	require.NoError(t, err)
	appended, err := f.w.Append(ctx, f.session.ID, sessionstore.UserText("appended while watched"))
	require.NoError(t, err)
	// HEAD is read before the tree (so that HEAD is always a node the
	// client has): the look that first finds the new node may still give
	// the old HEAD, and the next one then gives the new HEAD alone.
	seen := false
	for {
		name, data, err := stream.next()
		require.NoError(t, err, "the stream ended before the append arrived")
		require.Equal(t, "tree", name, data)
		var tr treeAnswer
		require.NoError(t, json.Unmarshal([]byte(data), &tr))
		if tr.Total == len(f.all) {
			// The first look, before the append was seen: nothing new
			// but HEAD and lanes, which the client already has.
			require.False(t, seen, "the tree shrank back")
			assert.Empty(t, tr.Nodes)
			continue
		}
		assert.Equal(t, len(f.all)+1, tr.Total)
		if !seen {
			assert.Equal(t, len(f.all), tr.From)
			require.Len(t, tr.Nodes, 1)
			assert.Equal(t, appended.ID, tr.Nodes[0].ID)
			seen = true
		} else {
			assert.Empty(t, tr.Nodes, "the new node is sent once")
		}
		require.NotNil(t, tr.Head)
		if *tr.Head == appended.ID {
			break
		}
		assert.Equal(t, oldHead, *tr.Head, "HEAD is the old one until it is the new one")
	}

	// A lane change, which no append makes, reaches the client too.
	require.NoError(t, f.w.CreateLane(ctx, f.session.ID, "watched", f.ask.ID))
	name, data, err := stream.next()
	require.NoError(t, err)
	require.Equal(t, "tree", name, data)
	var lanes treeAnswer
	require.NoError(t, json.Unmarshal([]byte(data), &lanes))
	assert.Empty(t, lanes.Nodes)
	var names []string
	for _, l := range lanes.Lanes {
		names = append(names, l.Name)
	}
	assert.Equal(t, []string{"approach-a", sessionstore.DefaultLane, "watched"}, names)

	// A client that knows nothing gets the whole tree first.
	resp2, stream2 := openLive(t, ctx, f.srv.URL+"/api/sessions/"+f.session.ID.String()+"/live")
	defer resp2.Body.Close()
	name, data, err = stream2.next()
	require.NoError(t, err)
	require.Equal(t, "tree", name)
	var tr treeAnswer
	require.NoError(t, json.Unmarshal([]byte(data), &tr))
	assert.Len(t, tr.Nodes, len(f.all)+1)
}

// TestLiveList: the list stream sends the first page, then again when a
// session is created or grows.
func TestLiveList(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, stream := openLive(t, ctx, f.srv.URL+"/api/live")
	defer resp.Body.Close()
	page := func() listAnswer {
		t.Helper()
		name, data, err := stream.next()
		require.NoError(t, err)
		require.Equal(t, "sessions", name, data)
		var l listAnswer
		require.NoError(t, json.Unmarshal([]byte(data), &l))
		return l
	}
	l := page()
	require.Len(t, l.Sessions, 2)
	assert.Equal(t, f.session.ID, l.Sessions[0].ID)

	m, err := f.w.Create(ctx, sessionstore.Meta{Name: "created while watched"})
	require.NoError(t, err)
	l = page()
	require.Len(t, l.Sessions, 3)
	assert.Equal(t, m.ID, l.Sessions[0].ID)
	assert.Equal(t, "created while watched", l.Sessions[0].Name)
	assert.Equal(t, 0, l.Sessions[0].Events)

	_, err = f.w.Append(ctx, m.ID, sessionstore.UserText("first"))
	require.NoError(t, err)
	l = page()
	require.Len(t, l.Sessions, 3)
	assert.Equal(t, 1, l.Sessions[0].Events)
}

// TestLiveHead: a HEAD request of a stream gets its headers and ends.
func TestLiveHead(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/api/live", "/api/sessions/" + f.session.ID.String() + "/live"} {
		resp, err := http.Head(f.srv.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"), path)
	}
	assert.Equal(t, 0, f.h.Streams())
}

// TestLiveGone: the stream says "gone" and ends when the session is deleted.
func TestLiveGone(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, stream := openLive(t, ctx, f.srv.URL+"/api/sessions/"+f.other.ID.String()+"/live")
	defer resp.Body.Close()
	name, _, err := stream.next()
	require.NoError(t, err)
	require.Equal(t, "tree", name)
	require.NoError(t, f.w.Delete(ctx, f.other.ID))
	name, _, err = stream.next()
	require.NoError(t, err)
	assert.Equal(t, "gone", name)
	_, _, err = stream.next()
	assert.ErrorIs(t, err, io.EOF, "the stream ends")
}

// TestLiveStops: a stream's handler returns when its client goes away,
// leaving no goroutine behind.
func TestLiveStops(t *testing.T) {
	f := newFixture(t)
	// The read-only store opens the session at its first read: do that
	// before counting.
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.ID.String(), nil))
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()
	for i := range 6 {
		url := f.srv.URL + "/api/sessions/" + f.session.ID.String() + "/live"
		if i%2 == 1 {
			url = f.srv.URL + "/api/live"
		}
		ctx, cancel := context.WithCancel(context.Background())
		resp, stream := openLive(t, ctx, url)
		_, _, err := stream.next()
		require.NoError(t, err)
		assert.Equal(t, 1, f.h.Streams())
		cancel()
		resp.Body.Close()
		require.Eventually(t, func() bool { return f.h.Streams() == 0 }, 10*time.Second, 5*time.Millisecond,
			"the handler should return when the client goes away")
	}
	http.DefaultClient.CloseIdleConnections()
	f.srv.CloseClientConnections()
	// Polled here: assert.Eventually runs its condition in a goroutine
	// of its own, which would count.
	after := runtime.NumGoroutine()
	for deadline := time.Now().Add(10 * time.Second); after > before && time.Now().Before(deadline); after = runtime.NumGoroutine() {
		time.Sleep(10 * time.Millisecond)
	}
	if !assert.LessOrEqual(t, after, before, "goroutines before the streams and after") {
		buf := make([]byte, 1<<20)
		t.Logf("%s", buf[:runtime.Stack(buf, true)])
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// FuzzAPIPath: whatever path a client asks for, the API answers with JSON
// and a status below 500, and writes nothing.
func FuzzAPIPath(f *testing.F) {
	root := f.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(f, err)
	m, err := w.Create(context.Background(), sessionstore.Meta{Name: "fuzz"})
	require.NoError(f, err)
	ev, err := w.Append(context.Background(), m.ID, sessionstore.UserText("hi"))
	require.NoError(f, err)
	require.NoError(f, w.Close())
	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(f, err)
	defer ro.Close()
	h := web.New(ro, web.Options{})
	for _, seed := range []string{
		"/api/sessions", "/api/sessions?limit=3&cursor=x", "/api/sessions/" + m.ID.String(),
		"/api/sessions/" + m.ID.String() + "/path?leaf=" + ev.ID.String() + "&context=1",
		"/api/sessions/" + m.ID.String() + "/events/" + ev.ID.String(), "/api/sessions/%zz", "/api/x/y",
		"/api/sessions/" + m.ID.String() + "/events/" + ev.ID.String() + "/changes",
		"/api/sessions/" + m.ID.String() + "/layout", "/api/sessions/" + m.ID.String() + "/nodes?offset=0&limit=5",
		"/api/sessions/" + m.ID.String() + "/path?offset=1&limit=1", "/api/sessions/" + m.ID.String() + "/path?limit=9&context=1",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, path string) {
		if strings.HasSuffix(strings.SplitN(path, "?", 2)[0], "/live") {
			return // a stream does not end by itself
		}
		req, err := http.NewRequest("GET", "http://localhost/", nil)
		require.NoError(t, err)
		if req.URL, err = req.URL.Parse("/api/" + strings.TrimPrefix(path, "/")); err != nil || !strings.HasPrefix(req.URL.Path, "/api/") {
			return // not a URL, or not one of the API's ("/api/.." is "/")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusMovedPermanently || rec.Code == http.StatusTemporaryRedirect {
			return // the mux cleaning a path
		}
		assert.Less(t, rec.Code, 500, "%s: %s", req.URL, rec.Body)
		assert.Equal(t, "application/json; charset=utf-8", rec.Header().Get("Content-Type"), "%s", req.URL)
		assert.True(t, json.Valid(rec.Body.Bytes()), "%s: %s", req.URL, rec.Body)
	})
}

func BenchmarkSession(b *testing.B) {
	root := b.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(b, err)
	ctx := context.Background()
	m, err := w.Create(ctx, sessionstore.Meta{Name: "bench"})
	require.NoError(b, err)
	batch := make([]sessionstore.Event, 1000)
	for i := range batch {
		batch[i] = sessionstore.UserText(strings.Repeat("x", 200))
	}
	_, err = w.AppendBatch(ctx, m.ID, batch...)
	require.NoError(b, err)
	require.NoError(b, w.Close())
	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(b, err)
	defer ro.Close()
	h := web.New(ro, web.Options{})
	for _, bc := range []struct{ name, path string }{{"tree", ""}, {"path", "/path"}} {
		path := bc.path
		b.Run(bc.name, func(b *testing.B) {
			var bytes int
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/api/sessions/"+m.ID.String()+path, nil))
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Body)
				}
				bytes = rec.Body.Len()
			}
			b.ReportMetric(float64(bytes)/1000, "B/event")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/event")
		})
	}
}
