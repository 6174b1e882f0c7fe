package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// nextTree reads the stream's next event, which must be "tree".
func nextTree(t *testing.T, s *sse) treeAnswer {
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
	name, _, err := stream.next()
	require.NoError(t, err)
	assert.Equal(t, "gone", name)
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
