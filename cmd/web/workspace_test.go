package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

// hostilePath is a file name a workspace may hold that must stay text in
// the page.
const hostilePath = `docs/<img src=x onerror="window.pwned=1">.md`

// wsFixture is a root whose session recorded workspace snapshots, served
// by the web view of a read-only Store:
//
//	ask -> snap1 (first: a.go, b.go, hostilePath) -> reply -> snap2 (a.go changed,
//	    b.go made executable, hostilePath deleted, d.go added) -> state -> custom -> head
//	    reply -> snap3 (a branch, by SnapshotDir: e.txt added)
//
// and a second session whose first event is a snapshot.
type wsFixture struct {
	srv                 *httptest.Server
	session, rooted     uuid.UUID
	ask, reply          sessionstore.Event
	snap1, snap2, snap3 sessionstore.Event
	state, custom, head sessionstore.Event
	rootSnap            sessionstore.Event // the first event of rooted
	all                 []sessionstore.Event
}

func newWSFixture(t *testing.T) *wsFixture {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	f := &wsFixture{}
	m, err := w.Create(ctx, sessionstore.Meta{Name: "workspace"})
	require.NoError(t, err)
	f.session = m.ID
	keep := func(ev sessionstore.Event, err error) sessionstore.Event {
		t.Helper()
		require.NoError(t, err)
		f.all = append(f.all, ev)
		return ev
	}
	f.ask = keep(w.Append(ctx, f.session, sessionstore.UserText("Change a.go.")))
	f.snap1 = keep(w.RecordFiles(ctx, f.session, "before the edit",
		sessionstore.FileWrite{Path: "a.go", Data: []byte("package a\n")},
		sessionstore.FileWrite{Path: "b.go", Data: []byte("package b\n")},
		sessionstore.FileWrite{Path: hostilePath, Data: []byte("# doc\n")}))
	f.reply = keep(w.Append(ctx, f.session, sessionstore.AssistantText("Editing a.go.")))
	f.snap2 = keep(w.RecordFiles(ctx, f.session, "after the edit",
		sessionstore.FileWrite{Path: "a.go", Data: []byte("package a\n\nfunc A() {}\n")},
		sessionstore.FileWrite{Path: "b.go", Data: []byte("package b\n"), Mode: 0o755},
		sessionstore.FileWrite{Path: hostilePath, Deleted: true},
		sessionstore.FileWrite{Path: "d.go", Data: []byte("package d\n")}))
	f.state = keep(w.AppendState(ctx, f.session, sessionstore.StateDelta{Set: map[string]json.RawMessage{"mode": json.RawMessage(`"edit"`)}}))
	f.custom = keep(w.Append(ctx, f.session, sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage(`{"app":"snapshot","files":[]}`)}))
	f.head = keep(w.Append(ctx, f.session, sessionstore.AssistantText("Done.")))

	// A branch from reply, its snapshot taken of a directory.
	require.NoError(t, w.Branch(ctx, f.session, f.reply.ID))
	dir := t.TempDir()
	for name, content := range map[string]string{"a.go": "package a\n", "b.go": "package b\n", hostilePath: "# doc\n", "e.txt": "e\n"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	res, err := w.SnapshotDir(ctx, f.session, dir, sessionstore.SnapshotOptions{Label: "on the branch"})
	f.snap3 = keep(res.Event, err)
	require.Equal(t, []string{"e.txt"}, res.Added)

	r, err := w.Create(ctx, sessionstore.Meta{Name: "snapshot first"})
	require.NoError(t, err)
	f.rooted = r.ID
	f.rootSnap, err = w.RecordFiles(ctx, f.rooted, "", sessionstore.FileWrite{Path: "only.txt", Data: []byte("x")})
	require.NoError(t, err)
	require.NoError(t, w.Close())

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ro.Close()) })
	f.srv = httptest.NewServer(web.New(ro, web.Options{}))
	t.Cleanup(f.srv.Close)
	return f
}

// get fetches path and decodes its JSON answer into v (when not nil),
// returning the status.
func (f *wsFixture) get(t *testing.T, path string, v any) int {
	t.Helper()
	resp, err := http.Get(f.srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, "application/json; charset=utf-8", resp.Header.Get("Content-Type"), "%s: %s", path, body)
	if v != nil {
		require.NoError(t, json.Unmarshal(body, v), "%s: %s", path, body)
	}
	return resp.StatusCode
}

type fileAnswer struct {
	Mode   uint32 `json:"mode"`
	Size   int64  `json:"size"`
	Digest string `json:"digest"`
}

type changesAnswer struct {
	Event    uuid.UUID  `json:"event"`
	Parent   *uuid.UUID `json:"parent"`
	Snapshot bool       `json:"snapshot"`
	Files    int        `json:"files"`
	Total    int        `json:"total"`
	Changes  []struct {
		Path string      `json:"path"`
		Op   string      `json:"op"`
		From *fileAnswer `json:"from"`
		To   *fileAnswer `json:"to"`
	} `json:"changes"`
}

// TestSnapshotNodes: the tree marks the nodes of workspace snapshots, and
// only those: not a state delta, nor an application's custom event.
func TestSnapshotNodes(t *testing.T) {
	f := newWSFixture(t)
	var tr struct {
		Nodes []struct {
			ID       uuid.UUID `json:"id"`
			Kind     string    `json:"kind"`
			Snapshot bool      `json:"snapshot"`
		} `json:"nodes"`
	}
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.String(), &tr))
	require.Len(t, tr.Nodes, len(f.all))
	var marked []uuid.UUID
	for i, n := range tr.Nodes {
		assert.Equal(t, f.all[i].ID, n.ID)
		if n.Snapshot {
			assert.Equal(t, "custom", n.Kind)
			marked = append(marked, n.ID)
		}
	}
	assert.Equal(t, []uuid.UUID{f.snap1.ID, f.snap2.ID, f.snap3.ID}, marked)

	// Unmarked nodes carry no member.
	resp, err := http.Get(f.srv.URL + "/api/sessions/" + f.session.String())
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(body), `"snapshot":true`))
	assert.NotContains(t, string(body), `"snapshot":false`)
}

// TestChanges: the changes endpoint answers the Diff between a snapshot's
// parent and it: every file added at the first snapshot (a full
// manifest), and for a root snapshot; the changes of a delta; none for
// another event.
func TestChanges(t *testing.T) {
	f := newWSFixture(t)
	type change struct{ path, op string }
	for _, tc := range []struct {
		name     string
		session  uuid.UUID
		event    sessionstore.Event
		snapshot bool
		files    int
		want     []change
	}{
		{"the first snapshot: every file added", f.session, f.snap1, true, 3,
			[]change{{"a.go", "added"}, {"b.go", "added"}, {hostilePath, "added"}}},
		{"a delta", f.session, f.snap2, true, 3,
			[]change{{"a.go", "modified"}, {"b.go", "modified"}, {"d.go", "added"}, {hostilePath, "deleted"}}},
		{"on a branch, by SnapshotDir", f.session, f.snap3, true, 4, []change{{"e.txt", "added"}}},
		{"a root snapshot", f.rooted, f.rootSnap, true, 1, []change{{"only.txt", "added"}}},
		{"a message before any snapshot", f.session, f.ask, false, 0, nil},
		{"a message after one", f.session, f.reply, false, 3, nil},
		{"a state delta", f.session, f.state, false, 3, nil},
		{"an application's custom event", f.session, f.custom, false, 3, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c changesAnswer
			require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+tc.session.String()+"/events/"+tc.event.ID.String()+"/changes", &c))
			assert.Equal(t, tc.event.ID, c.Event)
			if tc.event.ParentID == uuid.Nil {
				assert.Nil(t, c.Parent)
			} else if assert.NotNil(t, c.Parent) {
				assert.Equal(t, tc.event.ParentID, *c.Parent)
			}
			assert.Equal(t, tc.snapshot, c.Snapshot)
			assert.Equal(t, tc.files, c.Files)
			assert.Equal(t, len(tc.want), c.Total)
			require.NotNil(t, c.Changes, "an empty list, not null")
			got := make([]change, len(c.Changes))
			for i, ch := range c.Changes {
				got[i] = change{ch.Path, ch.Op}
				assert.Equal(t, ch.Op == "added", ch.From == nil, "%s %s: from", ch.Op, ch.Path)
				assert.Equal(t, ch.Op == "deleted", ch.To == nil, "%s %s: to", ch.Op, ch.Path)
			}
			if tc.want == nil {
				tc.want = []change{}
			}
			assert.Equal(t, tc.want, got)
		})
	}

	// The files before and after.
	var c changesAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.String()+"/events/"+f.snap2.ID.String()+"/changes", &c))
	a, b := c.Changes[0], c.Changes[1]
	assert.Equal(t, int64(len("package a\n")), a.From.Size)
	assert.Equal(t, int64(len("package a\n\nfunc A() {}\n")), a.To.Size)
	assert.NotEqual(t, a.From.Digest, a.To.Digest)
	assert.True(t, strings.HasPrefix(a.To.Digest, "sha256:"), a.To.Digest)
	assert.Equal(t, uint32(0o644), b.From.Mode)
	assert.Equal(t, uint32(0o755), b.To.Mode, "a mode change is a modification")
	assert.Equal(t, b.From.Digest, b.To.Digest)
	assert.Equal(t, uint32(0o644), c.Changes[2].To.Mode)
}

func TestChangesErrors(t *testing.T) {
	f := newWSFixture(t)
	sid := f.session.String()
	unknown := uuid.Must(uuid.NewV7()).String()
	for _, tc := range []struct {
		path   string
		status int
		holds  string
	}{
		{"/api/sessions/" + sid + "/events/" + unknown + "/changes", http.StatusNotFound, "not found"},
		{"/api/sessions/" + unknown + "/events/" + f.snap1.ID.String() + "/changes", http.StatusNotFound, "not found"},
		// An event of another session.
		{"/api/sessions/" + f.rooted.String() + "/events/" + f.snap1.ID.String() + "/changes", http.StatusNotFound, "not found"},
		{"/api/sessions/" + sid + "/events/snap1/changes", http.StatusBadRequest, `bad event id "snap1"`},
		{"/api/sessions/xyz/events/" + f.snap1.ID.String() + "/changes", http.StatusBadRequest, "bad session id"},
		{"/api/sessions/" + sid + "/events/" + f.snap1.ID.String() + "/changes/more", http.StatusNotFound, "no such endpoint"},
	} {
		var e struct{ Error string }
		assert.Equal(t, tc.status, f.get(t, tc.path, &e), tc.path)
		assert.Contains(t, e.Error, tc.holds, tc.path)
	}
	req, err := http.NewRequest("POST", f.srv.URL+"/api/sessions/"+sid+"/events/"+f.snap1.ID.String()+"/changes", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestChangesEscaping: a file name holding markup reaches the page as
// JSON string content only.
func TestChangesEscaping(t *testing.T) {
	f := newWSFixture(t)
	resp, err := http.Get(f.srv.URL + "/api/sessions/" + f.session.String() + "/events/" + f.snap2.ID.String() + "/changes")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.NotContains(t, string(body), "<img")
	assert.Contains(t, string(body), `\u003cimg`)
	assert.Contains(t, decodeStrings(t, body), hostilePath)
}

// TestChangesLimit: a snapshot of more than MaxChanges files lists the
// first MaxChanges, and counts them all.
func TestChangesLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a manifest of MaxChanges files")
	}
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	m, err := w.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	files := make([]sessionstore.FileWrite, web.MaxChanges+1)
	for i := range files {
		files[i] = sessionstore.FileWrite{Path: fmt.Sprintf("f/%05d", i), Data: []byte("same")}
	}
	snap, err := w.RecordFiles(ctx, m.ID, "", files...)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	srv := httptest.NewServer(web.New(ro, web.Options{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/api/sessions/" + m.ID.String() + "/events/" + snap.ID.String() + "/changes")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var c changesAnswer
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&c))
	assert.True(t, c.Snapshot)
	assert.Equal(t, web.MaxChanges+1, c.Total)
	assert.Equal(t, web.MaxChanges+1, c.Files)
	require.Len(t, c.Changes, web.MaxChanges)
	assert.Equal(t, "f/00000", c.Changes[0].Path)
	assert.Equal(t, fmt.Sprintf("f/%05d", web.MaxChanges-1), c.Changes[web.MaxChanges-1].Path)
}

// TestPageShowsSnapshots: the page's script and style know the snapshot
// marks and fetch the changes endpoint; the legend names them.
func TestPageShowsSnapshots(t *testing.T) {
	f := newWSFixture(t)
	for _, tc := range []struct{ path, holds string }{
		{"/", `<span class="sw snapshot"></span>workspace snapshot</span>`},
		{"/static/app.js", `"/changes"`},
		{"/static/app.js", "n.snapshot"},
		{"/static/style.css", "svg .node.snapshot"},
		{"/static/style.css", ".ev .change"},
	} {
		resp, err := http.Get(f.srv.URL + tc.path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, resp.StatusCode, tc.path)
		assert.Contains(t, string(body), tc.holds, tc.path)
	}
}
