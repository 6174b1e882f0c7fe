package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// message is a Server-Sent Event with its id ("" when it carries none).
type message struct{ id, name, data string }

// readMessages reads the messages of a stream into a channel until it ends.
func readMessages(body io.Reader) <-chan message {
	ch := make(chan message, 64)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		var m message
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.name != "" {
					ch <- m
				}
				m = message{}
			case strings.HasPrefix(line, "id: "):
				m.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				m.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				m.data += strings.TrimPrefix(line, "data: ")
			}
		}
	}()
	return ch
}

// streamFixture is a session written by a Store with durable deltas, and
// the web view of a read-only Store beside it.
type streamFixture struct {
	w   *sessionstore.Store
	srv *httptest.Server
	id  uuid.UUID
	ask sessionstore.Event
}

func newStreamFixture(t *testing.T) *streamFixture {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, &sessionstore.Options{DurableDeltas: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, w.Close()) })
	m, err := w.Create(ctx, sessionstore.Meta{Name: "streaming"})
	require.NoError(t, err)
	ask, err := w.Append(ctx, m.ID, sessionstore.UserText("tell me"))
	require.NoError(t, err)
	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ro.Close()) })
	srv := httptest.NewServer(web.New(ro, web.Options{PollInterval: web.MinPollInterval}))
	t.Cleanup(srv.Close)
	return &streamFixture{w: w, srv: srv, id: m.ID, ask: ask}
}

// open opens the session's live stream from the cursor (none for ""),
// given as the Last-Event-ID header or, with query, as the cursor
// parameter.
func (f *streamFixture) open(t *testing.T, ctx context.Context, cursor string, query bool) (*http.Response, <-chan message) {
	t.Helper()
	u := f.srv.URL + "/api/sessions/" + f.id.String() + "/live"
	if cursor != "" && query {
		u += "?cursor=" + url.QueryEscape(cursor)
	}
	req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
	require.NoError(t, err)
	if cursor != "" && !query {
		req.Header.Set("Last-Event-ID", cursor)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp, readMessages(resp.Body)
}

func (f *streamFixture) publish(t *testing.T, text string) {
	t.Helper()
	require.NoError(t, f.w.Publish(context.Background(), f.id, sessionstore.Delta{Kind: sessionstore.DeltaText, Data: text}))
}

// collect reads messages until stop says it has what it waits for,
// returning the deltas' texts, the events settled, the nodes the tree
// messages added (by id, counted) and the last id.
func collect(t *testing.T, ch <-chan message, stop func(deltas []string, nodes map[uuid.UUID]int, settled []uuid.UUID) bool) (deltas []string, nodes map[uuid.UUID]int, settled []uuid.UUID, last string) {
	t.Helper()
	nodes = map[uuid.UUID]int{}
	timeout := time.After(15 * time.Second)
	for !stop(deltas, nodes, settled) {
		var m message
		select {
		case mm, ok := <-ch:
			require.True(t, ok, "the stream ended")
			m = mm
		case <-timeout:
			require.FailNow(t, "timed out", "deltas %q nodes %v settled %v", deltas, nodes, settled)
		}
		switch m.name {
		case "tree":
			var tr treeAnswer
			require.NoError(t, json.Unmarshal([]byte(m.data), &tr))
			for _, n := range tr.Nodes {
				nodes[n.ID]++
			}
		case "delta":
			var d sessionstore.Delta
			require.NoError(t, json.Unmarshal([]byte(m.data), &d))
			deltas = append(deltas, d.Data)
		case "settled":
			var s struct {
				Event uuid.UUID `json:"event"`
			}
			require.NoError(t, json.Unmarshal([]byte(m.data), &s))
			settled = append(settled, s.Event)
		default:
			require.FailNow(t, "unexpected message", "%s: %s", m.name, m.data)
		}
		require.NotEmpty(t, m.id, "every %s message carries an id", m.name)
		last = m.id
	}
	return deltas, nodes, settled, last
}

// TestLiveResume: a client that comes back with the id of the last
// message it received (Last-Event-ID, or the cursor parameter) gets
// exactly the deltas after it and the nodes it lacks, none twice; one
// without gets the tree and the deltas no event settled yet.
func TestLiveResume(t *testing.T) {
	for _, query := range []bool{false, true} {
		t.Run(map[bool]string{false: "header", true: "query"}[query], func(t *testing.T) {
			f := newStreamFixture(t)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			resp, ch := f.open(t, ctx, "", false)
			_, nodes, _, _ := collect(t, ch, func(_ []string, nodes map[uuid.UUID]int, _ []uuid.UUID) bool { return nodes[f.ask.ID] > 0 })
			assert.Equal(t, map[uuid.UUID]int{f.ask.ID: 1}, nodes)
			f.publish(t, "Hel")
			deltas, _, _, cursor := collect(t, ch, func(d []string, _ map[uuid.UUID]int, _ []uuid.UUID) bool { return len(d) == 1 })
			assert.Equal(t, []string{"Hel"}, deltas)
			resp.Body.Close() // the client goes away after "Hel"

			f.publish(t, "lo")
			f.publish(t, ", world")
			answer, err := f.w.Append(context.Background(), f.id, sessionstore.AssistantText("Hello, world"))
			require.NoError(t, err)
			f.publish(t, "next")

			resp, ch = f.open(t, ctx, cursor, query)
			defer resp.Body.Close()
			deltas, nodes, settled, _ := collect(t, ch, func(d []string, n map[uuid.UUID]int, _ []uuid.UUID) bool {
				return n[answer.ID] > 0 && len(d) == 3
			})
			assert.Equal(t, []string{"lo", ", world", "next"}, deltas, "the deltas after the cursor, once each")
			assert.Equal(t, []uuid.UUID{answer.ID}, settled)
			assert.Equal(t, map[uuid.UUID]int{answer.ID: 1}, nodes, "only the node the client lacks")

			// A client without a cursor: the whole tree, and the deltas
			// no event settled yet.
			resp2, ch2 := f.open(t, ctx, "", false)
			defer resp2.Body.Close()
			deltas, nodes, _, _ = collect(t, ch2, func(d []string, n map[uuid.UUID]int, _ []uuid.UUID) bool {
				return n[answer.ID] > 0 && len(d) == 1
			})
			assert.Equal(t, []string{"next"}, deltas)
			assert.Equal(t, map[uuid.UUID]int{f.ask.ID: 1, answer.ID: 1}, nodes)
		})
	}
}

// TestLiveResumeErrors: a cursor the stream did not make answers 400; one
// naming an event the session lacks, 404.
func TestLiveResumeErrors(t *testing.T) {
	f := newStreamFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, ch := f.open(t, ctx, "", false)
	f.publish(t, "x")
	_, _, _, cursor := collect(t, ch, func(d []string, _ map[uuid.UUID]int, _ []uuid.UUID) bool { return len(d) == 1 })
	resp.Body.Close()
	require.Greater(t, len(cursor), 36)
	tailEvent := cursor[len(cursor)-36:]
	_, err := uuid.Parse(tailEvent)
	require.NoError(t, err, "the cursor ends with its last event's id: %q", cursor)

	base := f.srv.URL + "/api/sessions/" + f.id.String() + "/live"
	for _, tc := range []struct {
		cursor string
		status int
		holds  string
	}{
		{"nonsense", 400, "bad cursor"},
		{"x.-.", 400, "bad cursor"},
		{"-1.-.", 400, "bad cursor"},
		{"01.-.", 400, "bad cursor"},
		{"0.not-a-uuid.", 400, "bad cursor"},
		{"0.-.garbage", 400, "bad cursor"},
		{strings.Repeat("1", 600), 400, "too long"},
		{cursor[:len(cursor)-36] + uuid.NewString(), 404, "not found"},
	} {
		for _, query := range []bool{false, true} {
			u := base
			req, err := http.NewRequestWithContext(ctx, "GET", u, nil)
			require.NoError(t, err)
			if query {
				req.URL.RawQuery = "cursor=" + url.QueryEscape(tc.cursor)
			} else {
				req.Header.Set("Last-Event-ID", tc.cursor)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, tc.status, resp.StatusCode, "%q query=%v: %s", tc.cursor, query, body)
			var e struct {
				Error string `json:"error"`
			}
			require.NoError(t, json.Unmarshal(body, &e), "%s", body)
			assert.Contains(t, e.Error, tc.holds, tc.cursor)
		}
	}
}
