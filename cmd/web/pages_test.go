package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cmd/web"
)

type layoutAnswer struct {
	Session struct {
		ID     uuid.UUID `json:"id"`
		Name   string    `json:"name"`
		Title  string    `json:"title"`
		Events int       `json:"events"`
	} `json:"session"`
	Head    *uuid.UUID `json:"head"`
	Next    *uuid.UUID `json:"next"`
	HeadRow int        `json:"head_row"`
	NextRow int        `json:"next_row"`
	Lanes   []struct {
		Name   string     `json:"name"`
		Tip    *uuid.UUID `json:"tip"`
		TipRow int        `json:"tip_row"`
	} `json:"lanes"`
	Total    int        `json:"total"`
	Parents  []int      `json:"parents"`
	Branches []int      `json:"branches"`
	Last     *uuid.UUID `json:"last"`
}

type nodesAnswer struct {
	Total  int `json:"total"`
	Offset int `json:"offset"`
	Nodes  []struct {
		node
		ParentRow int `json:"parent_row"`
	} `json:"nodes"`
}

type pathPage struct {
	Leaf    uuid.UUID   `json:"leaf"`
	Offset  int         `json:"offset"`
	Total   int         `json:"total"`
	LeafRow int         `json:"leaf_row"`
	Events  []pathEvent `json:"events"`
}

// TestLayout: the layout gives every node's parent's row, as Tree's order
// numbers them, the rows of HEAD, the active path's end and the lanes'
// tips, and the rows that start a branch.
func TestLayout(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	nodes, err := f.ro.Tree(ctx, f.session.ID)
	require.NoError(t, err)
	row := map[uuid.UUID]int{}
	for i, n := range nodes {
		row[n.ID] = i
	}
	var l layoutAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.session.ID.String()+"/layout", &l))
	assert.Equal(t, len(nodes), l.Total)
	assert.Equal(t, len(nodes), l.Session.Events)
	require.Len(t, l.Parents, len(nodes))
	var branches []int
	for i, n := range nodes {
		want := -1
		if n.ParentID != uuid.Nil {
			want = row[n.ParentID]
		}
		assert.Equal(t, want, l.Parents[i], "parent of row %d", i)
		if n.BranchFrom != uuid.Nil {
			branches = append(branches, i)
		}
	}
	assert.Equal(t, branches, l.Branches)
	require.NotEmpty(t, branches)
	require.NotNil(t, l.Head)
	assert.Equal(t, f.head.ID, *l.Head)
	assert.Equal(t, row[f.head.ID], l.HeadRow)
	assert.Equal(t, row[f.head.ID], l.NextRow)
	assert.Equal(t, nodes[len(nodes)-1].ID, *l.Last)
	tips := map[string]int{}
	for _, ln := range l.Lanes {
		tips[ln.Name] = ln.TipRow
	}
	assert.Equal(t, row[f.firstLeaf.ID], tips["approach-a"])

	// A session without events, and errors.
	var empty layoutAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.other.ID.String()+"/layout", &empty))
	assert.Equal(t, 0, empty.Total)
	assert.Equal(t, -1, empty.HeadRow)
	assert.Nil(t, empty.Head)
	assert.Equal(t, http.StatusNotFound, f.get(t, "/api/sessions/"+uuid.NewString()+"/layout", nil))
	assert.Equal(t, http.StatusBadRequest, f.get(t, "/api/sessions/nope/layout", nil))
}

// TestNodes: pages of nodes are Tree's, in order, with their parents' rows.
func TestNodes(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sid := f.session.ID.String()
	nodes, err := f.ro.Tree(ctx, f.session.ID)
	require.NoError(t, err)
	var l layoutAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+sid+"/layout", &l))
	for _, limit := range []int{1, 3, len(nodes)} {
		var got []uuid.UUID
		for off := 0; off < len(nodes); off += limit {
			var p nodesAnswer
			require.Equal(t, http.StatusOK, f.get(t, fmt.Sprintf("/api/sessions/%s/nodes?offset=%d&limit=%d", sid, off, limit), &p))
			assert.Equal(t, len(nodes), p.Total)
			assert.Equal(t, off, p.Offset)
			assert.Len(t, p.Nodes, min(limit, len(nodes)-off))
			for i, n := range p.Nodes {
				got = append(got, n.ID)
				assert.Equal(t, nodes[off+i].Preview, n.Preview)
				assert.Equal(t, l.Parents[off+i], n.ParentRow)
			}
		}
		assert.Equal(t, treeIDs(nodes), got, "limit %d", limit)
	}
	var past nodesAnswer
	require.Equal(t, http.StatusOK, f.get(t, fmt.Sprintf("/api/sessions/%s/nodes?offset=%d", sid, len(nodes)+5), &past))
	assert.Empty(t, past.Nodes)
	for _, q := range []string{"limit=0", "limit=-1", fmt.Sprintf("limit=%d", web.MaxPageNodes+1), "limit=x", "offset=-1", "offset=x"} {
		assert.Equal(t, http.StatusBadRequest, f.get(t, "/api/sessions/"+sid+"/nodes?"+q, nil), q)
	}
	assert.Equal(t, http.StatusNotFound, f.get(t, "/api/sessions/"+uuid.NewString()+"/nodes", nil))
}

func treeIDs(nodes []sessionstore.Node) []uuid.UUID {
	out := make([]uuid.UUID, len(nodes))
	for i, n := range nodes {
		out[i] = n.ID
	}
	return out
}

// TestPathPages: the pages of a path, joined, are the whole path, for the
// active path, another leaf and the model's context; without an offset a
// page is the path's newest events.
func TestPathPages(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	sid := f.session.ID.String()
	full, err := f.w.FullPath(ctx, f.session.ID, uuid.Nil)
	require.NoError(t, err)
	loaded, err := f.w.Load(ctx, f.session.ID)
	require.NoError(t, err)
	branch, err := f.w.FullPath(ctx, f.session.ID, f.firstLeaf.ID)
	require.NoError(t, err)
	nodes, err := f.ro.Tree(ctx, f.session.ID)
	require.NoError(t, err)
	rowOf := func(id uuid.UUID) int {
		for i, n := range nodes {
			if n.ID == id {
				return i
			}
		}
		return -1
	}
	for _, tc := range []struct {
		name  string
		query string
		leaf  uuid.UUID
		want  []sessionstore.Event
	}{
		{"active path", "", f.head.ID, full},
		{"context", "&context=1", f.head.ID, loaded},
		{"leaf", "&leaf=" + f.firstLeaf.ID.String(), f.firstLeaf.ID, branch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{1, 2, 5, 100} {
				var got []uuid.UUID
				for off := 0; off < len(tc.want); off += limit {
					var p pathPage
					require.Equal(t, http.StatusOK, f.get(t, fmt.Sprintf("/api/sessions/%s/path?offset=%d&limit=%d%s", sid, off, limit, tc.query), &p))
					assert.Equal(t, tc.leaf, p.Leaf)
					assert.Equal(t, len(tc.want), p.Total)
					assert.Equal(t, off, p.Offset)
					assert.Equal(t, rowOf(tc.leaf), p.LeafRow)
					for _, ev := range p.Events {
						got = append(got, ev.ID)
					}
				}
				assert.Equal(t, ids(tc.want), got, "limit %d", limit)
				// The newest page.
				var p pathPage
				require.Equal(t, http.StatusOK, f.get(t, fmt.Sprintf("/api/sessions/%s/path?limit=%d%s", sid, limit, tc.query), &p))
				from := max(len(tc.want)-limit, 0)
				assert.Equal(t, from, p.Offset)
				assert.Equal(t, ids(tc.want[from:]), pathIDs(p.Events), "newest %d", limit)
			}
		})
	}
	// Records as the whole path's answer carries them: the blob's left out.
	var p pathPage
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+sid+"/path?offset=0&limit=100&leaf="+f.firstLeaf.ID.String(), &p))
	var whole pathAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+sid+"/path?leaf="+f.firstLeaf.ID.String(), &whole))
	assert.Equal(t, whole.Events, p.Events)

	// Bad parameters, an unknown leaf, a session without events.
	for _, q := range []string{"limit=0", fmt.Sprintf("limit=%d", web.MaxPageEvents+1), "offset=-2", "offset=1.5"} {
		assert.Equal(t, http.StatusBadRequest, f.get(t, "/api/sessions/"+sid+"/path?"+q, nil), q)
	}
	assert.Equal(t, http.StatusNotFound, f.get(t, "/api/sessions/"+sid+"/path?limit=5&leaf="+uuid.NewString(), nil))
	var empty pathPage
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+f.other.ID.String()+"/path?limit=5", &empty))
	assert.Empty(t, empty.Events)
	assert.Equal(t, 0, empty.Total)
}

func pathIDs(events []pathEvent) []uuid.UUID {
	out := make([]uuid.UUID, len(events))
	for i, ev := range events {
		out[i] = ev.ID
	}
	return out
}

// TestPathPagesRandom: on random trees, every page of the path to every
// leaf is FullPath's, also after appends made while the handler keeps a
// tree read before them.
func TestPathPagesRandom(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	m, err := w.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	f := &fixture{srv: newServer(t, web.New(ro, web.Options{}))}
	rng := rand.New(rand.NewPCG(1, 2))
	var all []sessionstore.Event
	for round := range 4 {
		for range 40 {
			if len(all) > 0 && rng.IntN(6) == 0 {
				require.NoError(t, w.Branch(ctx, m.ID, all[rng.IntN(len(all))].ID))
			}
			ev, err := w.Append(ctx, m.ID, sessionstore.UserText(fmt.Sprintf("r%d %d", round, len(all))))
			require.NoError(t, err)
			all = append(all, ev)
		}
		for _, leaf := range []sessionstore.Event{all[rng.IntN(len(all))], all[len(all)-1]} {
			want, err := ro.FullPath(ctx, m.ID, leaf.ID)
			require.NoError(t, err)
			limit := 1 + rng.IntN(9)
			var got []uuid.UUID
			for off := 0; off < len(want); off += limit {
				var p pathPage
				require.Equal(t, http.StatusOK, f.get(t, fmt.Sprintf("/api/sessions/%s/path?offset=%d&limit=%d&leaf=%s", m.ID, off, limit, leaf.ID), &p))
				assert.Equal(t, len(want), p.Total)
				got = append(got, pathIDs(p.Events)...)
			}
			assert.Equal(t, ids(want), got, "round %d, leaf %s", round, leaf.ID)
		}
		var l layoutAnswer
		require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+m.ID.String()+"/layout", &l))
		assert.Equal(t, len(all), l.Total, "the layout after the appends of round %d", round)
	}
}

// TestTitle: a session without a name is titled by its first user message
// a person typed (not a tool's wrapped text), in the list and the layout;
// a named one too, the page showing the name.
func TestTitle(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	m, err := w.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	for _, ev := range []sessionstore.Event{
		{Kind: sessionstore.KindCustom, Record: json.RawMessage(`{"type":"system"}`)},
		sessionstore.UserText("Caveat: The messages below were generated by the user while running local commands."),
		sessionstore.UserText("<command-name>/model</command-name>"),
		sessionstore.AssistantText("Hello."),
		sessionstore.UserText("Fix   the flaky\ntest in parser_test.go, then run every test of the package again please and tell me"),
		sessionstore.UserText("A later prompt."),
	} {
		_, err := w.Append(ctx, m.ID, ev)
		require.NoError(t, err)
	}
	wrappedOnly, err := w.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	_, err = w.Append(ctx, wrappedOnly.ID, sessionstore.UserText("<command-name>/clear</command-name>"))
	require.NoError(t, err)
	silent, err := w.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	_, err = w.Append(ctx, silent.ID, sessionstore.AssistantText("Nobody asked."))
	require.NoError(t, err)

	f := &fixture{srv: newServer(t, web.New(w, web.Options{}))}
	var list struct {
		Sessions []struct {
			ID    uuid.UUID `json:"id"`
			Title string    `json:"title"`
		} `json:"sessions"`
	}
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions", &list))
	titles := map[uuid.UUID]string{}
	for _, s := range list.Sessions {
		titles[s.ID] = s.Title
	}
	nodes, err := w.Tree(ctx, m.ID)
	require.NoError(t, err)
	want := nodes[4].Preview // the prompt typed
	require.Contains(t, want, "Fix the flaky test")
	assert.Equal(t, want, titles[m.ID])
	assert.Equal(t, "<command-name>/clear</command-name>", titles[wrappedOnly.ID], "only wrapped text: the first")
	assert.Equal(t, "", titles[silent.ID])
	var l layoutAnswer
	require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+m.ID.String()+"/layout", &l))
	assert.Equal(t, want, l.Session.Title)
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// TestSummary: a custom record's summary names what it is and its text,
// and never runs past MaxSummary runes.
func TestSummary(t *testing.T) {
	for _, tc := range []struct{ rec, want string }{
		{`{"parentUuid":"p","isSidechain":false,"type":"system","subtype":"compact_boundary","content":"Conversation compacted","level":"info"}`,
			"system · compact_boundary · level info · content: Conversation compacted · +2 more fields"},
		{`{"type":"progress","message":{"content":[{"type":"text","text":"step one"},{"type":"text","text":"step two"}]}}`,
			"progress · message: step one step two"},
		{`{"type":"summary"}`, "summary"},
		{`{"parentUuid":"b3af772f-56ab-4b26-b550-7ad62735d794","isSidechain":false,"userType":"external","cwd":"/src"}`, "{parentUuid, isSidechain, userType, cwd}"},
		{`{"parentUuid":"b3af772f-56ab-4b26-b550-7ad62735d794","isSidechain":false,"userType":"external","cwd":"/src","x":1}`, "{parentUuid, isSidechain, userType, cwd, …}"},
		{`{"a": 1}`, `{"a": 1}`},
		{`"just   text"`, "just text"},
		{`[1, 2]`, "[1, 2]"},
		{`{"type":"x","text":"` + strings.Repeat("word ", 100) + `"}`, ""},
		{``, ""},
	} {
		got := web.Summary(json.RawMessage(tc.rec))
		if tc.want == "" && tc.rec != "" {
			assert.Equal(t, web.MaxSummary, utf8.RuneCountInString(got), tc.rec)
			assert.True(t, strings.HasSuffix(got, "…"), got)
			assert.True(t, strings.HasPrefix(got, "x · text: word word"), got)
			continue
		}
		assert.Equal(t, tc.want, got, tc.rec)
	}
}

// TestCustomSummaryInPath: the path's custom events carry their summary,
// also when their record is left out; other events carry none.
func TestCustomSummaryInPath(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, w.Close()) }()
	m, err := w.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.UserText("hi"))
	require.NoError(t, err)
	_, err = w.Append(ctx, m.ID, sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage(`{"parentUuid":"x","type":"system","content":"` + strings.Repeat("long ", 40) + `"}`)})
	require.NoError(t, err)
	for _, limit := range []int64{0, 50} { // the record carried, then left out
		f := &fixture{srv: newServer(t, web.New(w, web.Options{InlineLimit: limit}))}
		var p pathPage
		require.Equal(t, http.StatusOK, f.get(t, "/api/sessions/"+m.ID.String()+"/path?limit=10", &p))
		require.Len(t, p.Events, 2)
		var sums []string
		for _, ev := range p.Events {
			sums = append(sums, ev.Summary)
		}
		assert.Equal(t, "", sums[0])
		assert.True(t, strings.HasPrefix(sums[1], "system · content: long long"), sums[1])
		assert.Equal(t, limit > 0, p.Events[1].Omitted)
	}
}
