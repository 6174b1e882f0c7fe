package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// The paged API
//
// A session of 100,000 events is too large to send whole to the page
// and too large to draw whole: the page draws the rows on screen and asks
// for what it draws. These endpoints serve it:
//
//	GET /api/sessions/{session}/layout
//	    what the page needs to lay the whole tree out and scroll it,
//	    without a record or a preview: the session's metadata, HEAD, the
//	    active path's end, the lanes (each with its tip's row), and for
//	    every node in append order its parent's row (-1 for a root) and
//	    whether it starts a branch; about 7 bytes a node
//	GET /api/sessions/{session}/nodes?offset=n&limit=m
//	    the nodes of rows [n, n+m), as the session's answer has them,
//	    each with its parent's row; m at most MaxPageNodes
//	GET /api/sessions/{session}/path?leaf=e&context=1&offset=n&limit=m
//	    with limit, a page of the path: its events [n, n+m) (the last m
//	    when offset is absent) and the path's length, "total"; the other
//	    parameters as without limit. Without context only the page's
//	    records are read; with context=1 the model's context is read
//	    whole (LoadPath) and cut
//
// Each of them reads the session's tree (Store.Tree) at most once per
// Revision: the handler keeps the last trees read, keyed by session and
// Revision (treeCache), so the page's requests after an append share one
// read.

// Bounds of the paged API.
const (
	// MaxPageNodes is the most nodes one nodes answer holds.
	MaxPageNodes = 2000
	// MaxPageEvents is the most events one page of a path holds.
	MaxPageEvents = 1000
	// treeCacheSize is the number of sessions whose tree the handler keeps.
	treeCacheSize = 8
)

// tree is a session's tree as read at one Revision, with each node's row.
type tree struct {
	rev    sessionstore.Revision
	nodes  []sessionstore.Node
	err    error             // a damaged session's error: nodes are its valid prefix
	row    map[uuid.UUID]int // a node's index in nodes
	parent []int             // the row of a node's parent, -1 for a root or a parent not among nodes
}

// parentRow returns the row of the parent of the node of row i.
func (t *tree) parentRow(i int) int { return t.parent[i] }

// pathRows returns the rows from the root to the node of row leaf.
func (t *tree) pathRows(leaf int) []int {
	var rows []int
	for r := leaf; r >= 0 && len(rows) <= len(t.nodes); r = t.parent[r] {
		rows = append(rows, r)
	}
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	return rows
}

// treeCache keeps the trees last read, one per session.
type treeCache struct {
	mu    sync.Mutex
	trees map[uuid.UUID]*tree
	order []uuid.UUID // least recently read first
}

// readTreeCached returns the session's tree as of its Revision now,
// reading it only when the kept one is of another Revision. The Revision
// is read before the tree, so that a kept tree is at least as new as its
// Revision says.
func (h *Handler) readTreeCached(ctx context.Context, id uuid.UUID) (*tree, error) {
	rev, err := h.st.Revision(ctx, id)
	if err != nil {
		return nil, err
	}
	c := &h.trees
	c.mu.Lock()
	t := c.trees[id]
	c.mu.Unlock()
	if t != nil && t.rev == rev {
		return t, nil
	}
	nodes, treeErr := h.st.Tree(ctx, id)
	if treeErr != nil && len(nodes) == 0 {
		return nil, treeErr
	}
	t = &tree{rev: rev, nodes: nodes, err: treeErr, row: make(map[uuid.UUID]int, len(nodes)), parent: make([]int, len(nodes))}
	for i, n := range nodes {
		t.row[n.ID] = i
		t.parent[i] = -1
		if p, ok := t.row[n.ParentID]; ok && n.ParentID != uuid.Nil {
			t.parent[i] = p
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trees == nil {
		c.trees = make(map[uuid.UUID]*tree)
	}
	if _, ok := c.trees[id]; !ok {
		if len(c.order) >= treeCacheSize {
			delete(c.trees, c.order[0])
			c.order = c.order[1:]
		}
		c.order = append(c.order, id)
	}
	c.trees[id] = t
	return t, nil
}

// layoutJSON is the answer of /api/sessions/{session}/layout.
type layoutJSON struct {
	Session sessionJSON `json:"session"`
	Head    *uuid.UUID  `json:"head"`
	Next    *uuid.UUID  `json:"next"`
	// HeadRow and NextRow are the rows of Head and Next, -1 for none.
	HeadRow int           `json:"head_row"`
	NextRow int           `json:"next_row"`
	Lanes   []laneRowJSON `json:"lanes"`
	Total   int           `json:"total"`
	Parents []int         `json:"parents"`  // a node's parent's row, -1 for a root
	Branch  []int         `json:"branches"` // the rows of the nodes that start a branch (BranchFrom)
	Last    *uuid.UUID    `json:"last"`     // the last node's id: a live stream's "last"
	Error   string        `json:"error,omitempty"`
}

// laneRowJSON is a lane with its tip's row (-1 when the tip is not in the tree).
type laneRowJSON struct {
	laneJSON
	TipRow int `json:"tip_row"`
}

func (h *Handler) layout(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(w, r, "session")
	if !ok {
		return
	}
	ctx := r.Context()
	meta, err := h.st.Meta(ctx, id)
	if err != nil {
		storeError(w, err, "session "+id.String())
		return
	}
	// HEAD, the active path's end and the lanes before the tree, so that
	// the tree holds them while a writer appends.
	head, next, headErr, nextErr := h.activeEnds(ctx, id)
	lanes, lanesErr := h.st.Lanes(ctx, id)
	t, err := h.readTreeCached(ctx, id)
	if err != nil {
		storeError(w, err, "session "+id.String())
		return
	}
	for _, e := range []error{headErr, nextErr} {
		if e != nil && t.err == nil {
			storeError(w, e, "session "+id.String())
			return
		}
	}
	out := layoutJSON{Session: newSessionJSON(meta), HeadRow: -1, NextRow: -1, Lanes: []laneRowJSON{},
		Total: len(t.nodes), Parents: t.parent, Branch: []int{}}
	out.Session.Events = len(t.nodes)
	out.Session.Title = titleOf(t.nodes)
	for i, n := range t.nodes {
		out.Session.Bytes += n.Size
		if n.BranchFrom != uuid.Nil {
			out.Branch = append(out.Branch, i)
		}
	}
	if t.err != nil {
		out.Error = t.err.Error()
	}
	rowOf := func(id uuid.UUID) int {
		if r, ok := t.row[id]; ok && id != uuid.Nil {
			return r
		}
		return -1
	}
	if head != uuid.Nil {
		out.Head, out.HeadRow = &head, rowOf(head)
	}
	if next != uuid.Nil {
		out.Next, out.NextRow = &next, rowOf(next)
	}
	if lanesErr == nil {
		for _, l := range lanes {
			lj := laneRowJSON{laneJSON: laneJSON{Name: l.Name, Active: l.Active}, TipRow: rowOf(l.Tip)}
			if l.Tip != uuid.Nil {
				tip := l.Tip
				lj.Tip = &tip
			}
			out.Lanes = append(out.Lanes, lj)
		}
	} else if out.Error == "" {
		out.Error = "lanes: " + lanesErr.Error()
	}
	if len(t.nodes) > 0 {
		last := t.nodes[len(t.nodes)-1].ID
		out.Last = &last
	}
	writeJSON(w, http.StatusOK, out)
}

// pageParams reads offset and limit: limit 1 to most (def when absent),
// offset 0 or more (-1 when absent).
func pageParams(w http.ResponseWriter, r *http.Request, def, most int) (offset, limit int, ok bool) {
	q := r.URL.Query()
	offset, limit = -1, def
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > most {
			writeError(w, http.StatusBadRequest, "bad limit %q: want 1 to %d", v, most)
			return 0, 0, false
		}
		limit = n
	}
	if v := q.Get("offset"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "bad offset %q: want 0 or more", v)
			return 0, 0, false
		}
		offset = n
	}
	return offset, limit, true
}

// nodesJSON is the answer of /api/sessions/{session}/nodes.
type nodesJSON struct {
	Total  int        `json:"total"`
	Offset int        `json:"offset"`
	Nodes  []nodeJSON `json:"nodes"`
}

func (h *Handler) nodes(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(w, r, "session")
	if !ok {
		return
	}
	offset, limit, ok := pageParams(w, r, 500, MaxPageNodes)
	if !ok {
		return
	}
	offset = max(offset, 0)
	t, err := h.readTreeCached(r.Context(), id)
	if err != nil {
		storeError(w, err, "session "+id.String())
		return
	}
	out := nodesJSON{Total: len(t.nodes), Offset: offset, Nodes: []nodeJSON{}}
	for i := offset; i < min(offset+limit, len(t.nodes)); i++ {
		n := newNodeJSON(t.nodes[i])
		n.ParentRow = t.parentRow(i)
		out.Nodes = append(out.Nodes, n)
	}
	writeJSON(w, http.StatusOK, out)
}

// pathPageJSON is a page of a path: the answer of the path endpoint with limit.
type pathPageJSON struct {
	pathJSON
	Offset int `json:"offset"` // the index of Events[0] in the path
	Total  int `json:"total"`  // the path's length
	// LeafRow is the leaf's row in the session's nodes (as the layout
	// and nodes endpoints number them), -1 when the tree read lacks it.
	LeafRow int `json:"leaf_row"`
}

// pathPage answers a page of the path to leaf (not uuid.Nil). Without
// contextOnly, the path's rows come from the tree, and only the page's
// events are read (Store.Event); with it, LoadPath reads the model's
// context whole, and the page is cut from it.
func (h *Handler) pathPage(w http.ResponseWriter, ctx context.Context, id, leaf uuid.UUID, contextOnly bool, offset, limit int) {
	out := pathPageJSON{pathJSON: pathJSON{Leaf: &leaf, Context: contextOnly, Events: []eventJSON{}}, LeafRow: -1}
	what := fmt.Sprintf("session %s, path to %s", id, leaf)
	cut := func(total int) (int, int) {
		if offset < 0 {
			offset = max(total-limit, 0)
		}
		offset = min(offset, total)
		return offset, min(offset+limit, total)
	}
	if contextOnly {
		events, err := h.st.LoadPath(ctx, id, leaf)
		if err != nil && len(events) == 0 {
			storeError(w, err, what)
			return
		}
		if err != nil {
			out.Error = err.Error()
		}
		from, to := cut(len(events))
		out.Offset, out.Total = from, len(events)
		if t, err := h.readTreeCached(ctx, id); err == nil {
			if r, ok := t.row[leaf]; ok {
				out.LeafRow = r
			}
		}
		for _, ev := range events[from:to] {
			out.Events = append(out.Events, h.pathEvent(ev))
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	t, err := h.readTreeCached(ctx, id)
	if err != nil {
		storeError(w, err, what)
		return
	}
	leafRow, ok := t.row[leaf]
	if !ok {
		// Not in the tree read: an event appended since, or none.
		if _, err := h.st.Event(ctx, id, leaf); err != nil {
			storeError(w, err, what)
			return
		}
		t, err = h.readTreeAgain(ctx, id)
		if err != nil {
			storeError(w, err, what)
			return
		}
		if leafRow, ok = t.row[leaf]; !ok {
			writeError(w, http.StatusNotFound, "%s: not found", what)
			return
		}
	}
	rows := t.pathRows(leafRow)
	from, to := cut(len(rows))
	out.Offset, out.Total, out.LeafRow = from, len(rows), leafRow
	for _, r := range rows[from:to] {
		ev, err := h.st.Event(ctx, id, t.nodes[r].ID)
		if err != nil {
			if len(out.Events) == 0 && !errors.As(err, new(*sessionstore.CorruptionError)) {
				storeError(w, err, what)
				return
			}
			out.Error = err.Error()
			break
		}
		out.Events = append(out.Events, h.pathEvent(ev))
	}
	writeJSON(w, http.StatusOK, out)
}

// readTreeAgain drops the kept tree of the session and reads it.
func (h *Handler) readTreeAgain(ctx context.Context, id uuid.UUID) (*tree, error) {
	h.trees.mu.Lock()
	if t := h.trees.trees[id]; t != nil {
		t2 := *t
		t2.rev = sessionstore.Revision{Chunk: ^uint32(0)} // never a real one
		h.trees.trees[id] = &t2
	}
	h.trees.mu.Unlock()
	return h.readTreeCached(ctx, id)
}

// pathEvent is ev as a path answer carries it: a record over the inline
// limit, or a blob, left out; a custom record with its summary.
func (h *Handler) pathEvent(ev sessionstore.Event) eventJSON {
	e := newEventJSON(ev)
	if ev.Digest != "" || ev.Size > h.opts.InlineLimit {
		e.Record, e.Omitted = json.RawMessage("null"), true
	}
	return e
}
