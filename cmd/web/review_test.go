package web_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// nextTree reads the stream's next event, which must be "tree".
func nextTree(t testing.TB, s *sse) treeAnswer {
	t.Helper()
	name, data, err := s.next()
	require.NoError(t, err)
	require.Equal(t, "tree", name, data)
	var tr treeAnswer
	require.NoError(t, json.Unmarshal([]byte(data), &tr))
	return tr
}

// TestLiveGoneOpened: a session the read-only store has open (its tree was
// read) is reported gone when a writer deletes it.
func TestLiveGoneOpened(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, stream := openLive(t, ctx, f.srv.URL+"/api/sessions/"+f.session.ID.String()+"/live")
	defer resp.Body.Close()
	tr := nextTree(t, stream)
	require.Len(t, tr.Nodes, len(f.all))
	require.NoError(t, f.w.Delete(ctx, f.session.ID))
	name, data, err := stream.next()
	require.NoError(t, err)
	assert.Equal(t, "gone", name, data)
}

// TestLiveKnownTooMany: a client that claims more nodes than the tree has
// gets the whole tree, from 0.
func TestLiveKnownTooMany(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, stream := openLive(t, ctx, f.srv.URL+"/api/sessions/"+f.session.ID.String()+"/live?known=1000")
	defer resp.Body.Close()
	tr := nextTree(t, stream)
	assert.Equal(t, 0, tr.From)
	assert.Len(t, tr.Nodes, len(f.all))
}

// TestLiveRecreated: a session deleted and made again under its id, with
// more events than before, between two looks of a stream, is not sent as
// a continuation of the tree the client holds.
func TestLiveRecreated(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := httptest.NewServer(web.New(f.ro, web.Options{PollInterval: web.MaxPollInterval}))
	defer srv.Close()
	resp, stream := openLive(t, ctx, srv.URL+"/api/sessions/"+f.session.ID.String()+"/live")
	defer resp.Body.Close()
	first := nextTree(t, stream)
	require.Len(t, first.Nodes, len(f.all))

	require.NoError(t, f.w.Delete(ctx, f.session.ID))
	_, err := f.w.Create(ctx, sessionstore.Meta{ID: f.session.ID, Name: "made again"})
	require.NoError(t, err)
	var again []sessionstore.Event
	for range len(f.all) + 3 {
		ev, err := f.w.Append(ctx, f.session.ID, sessionstore.UserText("another tree"))
		require.NoError(t, err)
		again = append(again, ev)
	}
	name, data, err := stream.next()
	require.NoError(t, err)
	if name == "gone" {
		return // the stream looked while the session was gone: as good
	}
	require.Equal(t, "tree", name, data)
	var tr treeAnswer
	require.NoError(t, json.Unmarshal([]byte(data), &tr))
	assert.Equal(t, 0, tr.From, "a new tree, not a continuation")
	got := map[string]bool{}
	for _, n := range tr.Nodes {
		got[n.ID.String()] = true
	}
	for _, ev := range again {
		assert.True(t, got[ev.ID.String()], "event %s of the new tree", ev.ID)
	}
}

// TestLiveKnownOther: a client whose count matches the tree's length but
// whose nodes are another tree's (the session made again) gets the tree.
func TestLiveKnownLast(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := f.srv.URL + "/api/sessions/" + f.session.ID.String() + "/live?known=" + itoa(len(f.all)-2)
	// The client's last node is the server's node known-1: a continuation.
	resp, stream := openLive(t, ctx, base+"&last="+f.all[len(f.all)-3].ID.String())
	tr := nextTree(t, stream)
	resp.Body.Close()
	assert.Equal(t, len(f.all)-2, tr.From)
	assert.Len(t, tr.Nodes, 2)
	// Another last node: the client holds another tree.
	resp, stream = openLive(t, ctx, base+"&last="+f.all[0].ID.String())
	tr = nextTree(t, stream)
	resp.Body.Close()
	assert.Equal(t, 0, tr.From)
	assert.Len(t, tr.Nodes, len(f.all))
	// A bad one.
	r, err := http.Get(base + "&last=nope")
	require.NoError(t, err)
	r.Body.Close()
	assert.Equal(t, http.StatusBadRequest, r.StatusCode)
}

// TestLiveFork: a fork's stream sends its tree (the parent's path, then
// its own events) and its appends as a continuation.
func TestLiveFork(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fork, err := f.w.Fork(ctx, f.session.ID, f.firstLeaf.ID)
	require.NoError(t, err)
	resp, stream := openLive(t, ctx, f.srv.URL+"/api/sessions/"+fork.ID.String()+"/live")
	defer resp.Body.Close()
	tr := nextTree(t, stream)
	path, err := f.w.FullPath(ctx, f.session.ID, f.firstLeaf.ID)
	require.NoError(t, err)
	require.Len(t, tr.Nodes, len(path))
	ev, err := f.w.Append(ctx, fork.ID, sessionstore.UserText("in the fork"))
	require.NoError(t, err)
	tr = nextTree(t, stream)
	assert.Equal(t, len(path), tr.From)
	require.Len(t, tr.Nodes, 1)
	assert.Equal(t, ev.ID, tr.Nodes[0].ID)
	// The parent grows: the fork's stream sends nothing of it.
	_, err = f.w.Append(ctx, f.session.ID, sessionstore.UserText("in the parent"))
	require.NoError(t, err)
	require.NoError(t, f.w.MoveLane(ctx, fork.ID, sessionstore.DefaultLane, path[1].ID))
	tr = nextTree(t, stream)
	assert.Empty(t, tr.Nodes)
	require.Len(t, tr.Lanes, 1)
	assert.Equal(t, path[1].ID, *tr.Lanes[0].Tip)
}

// tenThousand builds a root holding a session of n events, a tool call
// and its result every tenth event and a branch every hundredth, and
// returns the read-only Store beside the writer, the writer and the session.
func tenThousand(b *testing.B, n int) (ro, w *sessionstore.Store, m sessionstore.Meta) {
	b.Helper()
	ctx := context.Background()
	root := b.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(b, err)
	b.Cleanup(func() { w.Close() })
	m, err = w.Create(ctx, sessionstore.Meta{Name: "ten thousand"})
	require.NoError(b, err)
	var prev []sessionstore.Event
	for len(prev) < n {
		batch := make([]sessionstore.Event, 0, 100)
		for i := len(prev); i < len(prev)+100 && i < n; i++ {
			switch i % 10 {
			case 8:
				batch = append(batch, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c", Name: "run", Arguments: json.RawMessage(`{"cmd":"go test ./..."}`)}))
			case 9:
				batch = append(batch, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c", Output: strings.Repeat("ok\n", 100)}))
			default:
				batch = append(batch, sessionstore.UserText(strings.Repeat("x", 200)))
			}
		}
		got, err := w.AppendBatch(ctx, m.ID, batch...)
		require.NoError(b, err)
		prev = append(prev, got...)
		if len(prev) < n { // the next hundred start a branch
			require.NoError(b, w.Branch(ctx, m.ID, prev[len(prev)-50].ID))
		}
	}
	ro, err = sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(b, err)
	b.Cleanup(func() { ro.Close() })
	return ro, w, m
}

// BenchmarkTenThousand: the answers the page asks for when it opens a
// session of 10,000 events (its tree, the path to HEAD), the list, and a
// live stream's look after an append (the new node sent).
func BenchmarkTenThousand(b *testing.B) {
	ro, w, m := tenThousand(b, 10000)
	h := web.New(ro, web.Options{})
	sid := m.ID.String()
	for _, bc := range []struct{ name, path string }{
		{"list", "/api/sessions"},
		{"tree", "/api/sessions/" + sid},
		{"path", "/api/sessions/" + sid + "/path"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var size int
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1"+bc.path, nil))
				if rec.Code != http.StatusOK {
					b.Fatal(rec.Body)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "B/answer")
		})
	}
	b.Run("live-append", func(b *testing.B) {
		srv := httptest.NewServer(web.New(ro, web.Options{PollInterval: web.MinPollInterval}))
		defer srv.Close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/sessions/"+sid+"/live", nil)
		require.NoError(b, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(b, err)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		stream := &sse{sc: sc}
		tr := nextTree(b, stream)
		require.Len(b, tr.Nodes, 10000)
		known := tr.Total
		for b.Loop() {
			_, err := w.Append(ctx, m.ID, sessionstore.UserText("live"))
			require.NoError(b, err)
			for tr.Total <= known {
				tr = nextTree(b, stream)
			}
			require.Len(b, tr.Nodes, 1, "the new node only")
			known = tr.Total
		}
		b.ReportMetric(float64(known), "nodes")
	})
}

// TestLiveBatch: a writer that appends a thousand events at once reaches
// the client as continuations that, joined, are the tree in append order.
func TestLiveBatch(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, stream := openLive(t, ctx, f.srv.URL+"/api/sessions/"+f.session.ID.String()+"/live?known="+itoa(len(f.all))+"&last="+f.all[len(f.all)-1].ID.String())
	defer resp.Body.Close()
	batch := make([]sessionstore.Event, 1000)
	for i := range batch {
		batch[i] = sessionstore.AssistantText("batch " + itoa(i))
	}
	got, err := f.w.AppendBatch(ctx, f.session.ID, batch...)
	require.NoError(t, err)
	known := len(f.all)
	var seen []string
	for known < len(f.all)+len(got) {
		tr := nextTree(t, stream)
		require.Equal(t, known, tr.From, "a continuation")
		for _, n := range tr.Nodes {
			seen = append(seen, n.ID.String())
		}
		known = tr.Total
	}
	want := make([]string, len(got))
	for i, ev := range got {
		want[i] = ev.ID.String()
	}
	assert.Equal(t, want, seen)
}

// TestSessionBesideWriter: a session's answer read while a writer appends
// holds its HEAD, its active path's end and every lane's tip among its
// nodes, and names the active path's end apart from HEAD only when a lane
// switch is pending (none here): they are read before the tree, as of one
// moment.
func TestSessionBesideWriter(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	done := make(chan error, 1)
	go func() {
		defer close(done)
		for i := range 300 {
			if _, err := f.w.Append(ctx, f.session.ID, sessionstore.AssistantText(fmt.Sprint("event ", i))); err != nil {
				done <- err
				return
			}
		}
	}()
	reads := 0
	for running := true; running || reads < 3; reads++ {
		select {
		case err := <-done:
			require.NoError(t, err)
			running = false
		default:
		}
		var tr treeAnswer
		require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.ID.String(), &tr))
		in := make(map[uuid.UUID]bool, len(tr.Nodes))
		for _, n := range tr.Nodes {
			in[n.ID] = true
		}
		require.NotNil(t, tr.Head)
		require.NotNil(t, tr.Next)
		assert.True(t, in[*tr.Head], "read %d: HEAD %s is not a node", reads, *tr.Head)
		assert.Equal(t, *tr.Head, *tr.Next, "read %d: no switch is pending", reads)
		for _, l := range tr.Lanes {
			if assert.NotNil(t, l.Tip) {
				assert.True(t, in[*l.Tip], "read %d: lane %s's tip %s is not a node", reads, l.Name, *l.Tip)
			}
		}
	}
}

// TestPathLeafNull: the path of a session without events names no leaf:
// "leaf" is null, as "head" and "next" are in the session's answer, not
// the nil uuid.
func TestPathLeafNull(t *testing.T) {
	f := newFixture(t)
	resp, err := http.Get(f.srv.URL + "/api/sessions/" + f.other.ID.String() + "/path")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), `"leaf":null`)
	assert.NotContains(t, string(body), uuid.Nil.String())

	// A session with events names its leaf.
	var p pathAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.ID.String()+"/path", &p))
	assert.Equal(t, f.head.ID, p.Leaf)
}
