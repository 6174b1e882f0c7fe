// Package web serves a read-only web view of a sessionstore root: the
// session list, a session's event tree drawn as a graph, a path of it as a
// transcript, and live updates while a writer in another process appends.
//
// New returns an http.Handler. It answers GET (and HEAD) only and never
// writes to the store: give it a Store opened with Options.ReadOnly, which
// takes no lock and reads beside a writer. The page is plain HTML, CSS and
// JavaScript embedded in the binary (no build step, nothing fetched from
// elsewhere); it draws everything from the JSON API below and puts record
// text into the page as text only, never as markup.
//
// The JSON API (every error is {"error": "..."} with its HTTP status: 400
// for an id that does not parse or a bad parameter, 404 for an unknown
// session or event or endpoint, 405 for a method other than GET, 403 for a
// Host that is not the server's):
//
//	GET /api/sessions?limit=n&cursor=c
//	    a page of sessions, newest first, each with its number of events
//	    and the bytes of their records (from Tree; no record is read)
//	GET /api/sessions/{session}
//	    its metadata, HEAD, the end of the active path ("next": the event
//	    the next append extends, which Load ends at: HEAD, or the tip of
//	    a lane switched to and not appended to yet), lanes and the tree's
//	    nodes, in append order, a workspace snapshot's marked "snapshot"
//	GET /api/sessions/{session}/path?leaf=e&context=1
//	    the path from the root to leaf (the active path's end when
//	    absent), every event of it (FullPath), or with context=1 the
//	    model's context (LoadPath); records over Options.InlineLimit, and
//	    blobs, left out
//	GET /api/sessions/{session}/events/{event}
//	    one event with its record (a blob read and checked)
//	GET /api/sessions/{session}/events/{event}/changes
//	    whether the event is a workspace snapshot (Store.SnapshotDir,
//	    RecordFiles) and the files it changed: the Diff between the
//	    workspaces as of its parent and as of it (every file added for
//	    a snapshot without a parent, or the first on its path), sorted by
//	    path, at most MaxChanges of them, with the count of files the
//	    workspace holds as of the event; no change for another event
//	GET /api/sessions/{session}/live?known=n&last=e
//	    Server-Sent Events: "tree", the nodes after the first n with HEAD
//	    and the lanes, at the start and whenever the session's Revision or
//	    lanes change; "gone" when the session is deleted. last, if given, is
//	    the id of the client's node n-1: when the tree's node n-1 is another
//	    (the session was made again), or the tree has fewer than n nodes,
//	    the stream sends the whole tree (from 0) instead
//	    ; "delta" and "settled", the durable deltas no event settled yet
//	    and the events that settle them (Store.Tail). Each of these
//	    messages has an id, the stream's position after it; a request
//	    with one (Last-Event-ID header, or cursor=c) resumes exactly
//	    after it (cursor.go, docs/web-view.md)
//	GET /api/sessions/{session}/usage
//	    the session's token totals and its active branch's (Store.Usage)
//	GET /api/search?q=text&limit=n&working_dir=d&parent=p&label=k=v&since=t&until=t&kind=k&role=r
//	    the events whose record text matches q (Store.Search), best first;
//	    400 for a query Search refuses (ErrInvalidSearch)
//	GET /api/live
//	    Server-Sent Events: "sessions", the list's first page, at the
//	    start and whenever it changes
//
// The page itself uses the paged endpoints (pages.go): the layout (each
// node's parent's row, no preview), pages of nodes, and pages of a path
// (/path with limit). It draws the rows on screen only and adds a live
// update's nodes and events to what it holds, so that a session of
// 100,000 events opens and follows as fast as a small one. A session
// without a name carries a "title": the preview of its first user
// message (titleOf); a custom event carries a one-line "summary" of its
// record (Summary).
//
// A live stream polls the store every Options.PollInterval and ends when
// its client goes away. Requests must name the server by a loopback
// address or localhost in their Host header (or by one of
// Options.AllowedHosts), so that a page of another site whose name is made
// to resolve to 127.0.0.1 cannot read the transcripts.
package web

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

//go:embed static
var static embed.FS

// Defaults and bounds of Options.
const (
	// DefaultPollInterval is the Options.PollInterval of zero.
	DefaultPollInterval = 500 * time.Millisecond
	// MinPollInterval and MaxPollInterval bound Options.PollInterval.
	MinPollInterval = 50 * time.Millisecond
	MaxPollInterval = 10 * time.Second
	// DefaultInlineLimit is the Options.InlineLimit of zero, in bytes.
	DefaultInlineLimit = 16 << 10
	// keepAlive is how often an idle live stream sends a comment, so
	// that proxies and the browser keep the connection.
	keepAlive = 15 * time.Second
	// MaxChanges is the most files the changes endpoint lists; "total"
	// counts them all.
	MaxChanges = 5000
)

// Options configure the handler. The zero value selects the defaults.
type Options struct {
	// PollInterval is how often a live stream compares the session's
	// Revision with the last one it sent. Default DefaultPollInterval;
	// it is kept within [MinPollInterval, MaxPollInterval].
	PollInterval time.Duration
	// InlineLimit is the largest record, in bytes of compact JSON, that a
	// path answer carries; a larger one, and every record stored as a
	// blob, is left out and fetched through the events endpoint when the
	// reader opens it. Default DefaultInlineLimit; negative sends none.
	InlineLimit int64
	// PageSize is the number of sessions the list shows at a time.
	// Default sessionstore.DefaultPageSize; at most 500.
	PageSize int
	// AllowedHosts are host names (without port) requests may name in
	// their Host header besides localhost and loopback addresses: the
	// names of a proxy that forwards to the view without rewriting Host.
	AllowedHosts []string
}

// Handler is the web view's http.Handler (see the package doc).
type Handler struct {
	st      *sessionstore.Store
	opts    Options
	mux     *http.ServeMux
	streams atomic.Int64 // live streams being served
	trees   treeCache    // the trees last read (pages.go)
}

// New returns the web view of st. st should be opened with
// Options.ReadOnly; the handler itself never calls a method that writes.
func New(st *sessionstore.Store, opts Options) *Handler {
	switch {
	case opts.PollInterval == 0:
		opts.PollInterval = DefaultPollInterval
	case opts.PollInterval < MinPollInterval:
		opts.PollInterval = MinPollInterval
	case opts.PollInterval > MaxPollInterval:
		opts.PollInterval = MaxPollInterval
	}
	if opts.InlineLimit == 0 {
		opts.InlineLimit = DefaultInlineLimit
	}
	if opts.PageSize <= 0 {
		opts.PageSize = sessionstore.DefaultPageSize
	}
	opts.PageSize = min(opts.PageSize, 500)
	h := &Handler{st: st, opts: opts, mux: http.NewServeMux()}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded directory is part of the build
	}
	files := http.FileServerFS(sub)
	h.mux.Handle("GET /static/", http.StripPrefix("/static/", files))
	h.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, sub, "index.html")
	})
	h.mux.HandleFunc("GET /api/sessions", h.list)
	h.mux.HandleFunc("GET /api/sessions/{session}", h.session)
	h.mux.HandleFunc("GET /api/sessions/{session}/path", h.path)
	h.mux.HandleFunc("GET /api/sessions/{session}/layout", h.layout)
	h.mux.HandleFunc("GET /api/sessions/{session}/nodes", h.nodes)
	h.mux.HandleFunc("GET /api/sessions/{session}/events/{event}", h.event)
	h.mux.HandleFunc("GET /api/sessions/{session}/events/{event}/changes", h.changes)
	h.mux.HandleFunc("GET /api/sessions/{session}/live", h.live)
	h.mux.HandleFunc("GET /api/sessions/{session}/usage", h.usage)
	h.mux.HandleFunc("GET /api/search", h.search)
	h.mux.HandleFunc("GET /api/live", h.liveList)
	h.mux.HandleFunc("GET /api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: %s", r.URL.Path)
	})
	return h
}

// ServeHTTP answers GET and HEAD requests; any other method gets 405.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'")
	hd.Set("Referrer-Policy", "no-referrer")
	if !h.hostAllowed(r.Host) {
		writeError(w, http.StatusForbidden, "host %q is not this server's: use http://127.0.0.1 or http://localhost", r.Host)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		writeError(w, http.StatusMethodNotAllowed, "method %s not allowed: the view is read-only", r.Method)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// hostAllowed reports whether a request's Host header names this server:
// localhost, a loopback address, or one of Options.AllowedHosts.
func (h *Handler) hostAllowed(hostport string) bool {
	host := hostport
	if hh, _, err := net.SplitHostPort(hostport); err == nil {
		host = hh
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	for _, a := range h.opts.AllowedHosts {
		if strings.EqualFold(host, a) {
			return true
		}
	}
	return false
}

// Streams returns the number of live streams being served now.
func (h *Handler) Streams() int { return int(h.streams.Load()) }

// apiError is the body of every error answer.
type apiError struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, status int, format string, args ...any) {
	writeJSON(w, status, apiError{Error: fmt.Sprintf(format, args...)})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(apiError{Error: "encode the answer: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// storeError answers err from a store call about what.
func storeError(w http.ResponseWriter, err error, what string) {
	switch {
	case errors.Is(err, sessionstore.ErrNotFound):
		writeError(w, http.StatusNotFound, "%s: not found", what)
	case errors.Is(err, sessionstore.ErrInvalidQuery):
		writeError(w, http.StatusBadRequest, "%s: %v", what, err)
	case errors.Is(err, context.Canceled):
		// The client went away; nobody reads the answer.
	default:
		writeError(w, http.StatusInternalServerError, "%s: %v", what, err)
	}
}

// parseID parses the path value name as an id, answering 400 when it is not one.
func parseID(w http.ResponseWriter, r *http.Request, name string) (uuid.UUID, bool) {
	return parseIDValue(w, r.PathValue(name), name)
}

func parseIDValue(w http.ResponseWriter, v, name string) (uuid.UUID, bool) {
	// Only the canonical form: the page never sends another.
	id, err := uuid.Parse(v)
	if err != nil || len(v) != 36 {
		writeError(w, http.StatusBadRequest, "bad %s id %q: want a UUID in canonical form", name, v)
		return uuid.Nil, false
	}
	return id, true
}

// sessionJSON is a session in the list.
type sessionJSON struct {
	ID         uuid.UUID               `json:"id"`
	Name       string                  `json:"name"`
	WorkingDir string                  `json:"working_dir"`
	Model      string                  `json:"model"`
	CreatedAt  time.Time               `json:"created_at"`
	UpdatedAt  time.Time               `json:"updated_at"`
	Labels     map[string]string       `json:"labels,omitempty"`
	ForkedFrom *sessionstore.ForkPoint `json:"forked_from,omitempty"`
	Parent     *uuid.UUID              `json:"parent_session,omitempty"`
	// Title is what the page shows for a session without a name: the
	// preview of its first user message (see titleOf), "" for none.
	Title string `json:"title,omitempty"`
	// Events and Bytes are the session's events and the bytes of their
	// records (compact JSON, as Node.Size counts them), from Tree; -1
	// when the tree could not be read (TreeError says why).
	Events    int    `json:"events"`
	Bytes     int64  `json:"bytes"`
	TreeError string `json:"tree_error,omitempty"`
	// Tokens is the token totals session.json records (Meta.Usage), null
	// when it records none.
	Tokens *tokensJSON `json:"tokens"`
}

func newSessionJSON(m sessionstore.Meta) sessionJSON {
	s := sessionJSON{ID: m.ID, Name: m.Name, WorkingDir: m.WorkingDir, Model: m.Model,
		CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt, Labels: m.Labels, ForkedFrom: m.ForkedFrom,
		Tokens: recordedTokens(m.Usage)}
	if m.ParentSession != uuid.Nil {
		p := m.ParentSession
		s.Parent = &p
	}
	return s
}

// listJSON is the answer of /api/sessions.
type listJSON struct {
	Sessions []sessionJSON `json:"sessions"`
	Next     string        `json:"next,omitempty"`
}

func (h *Handler) list(w http.ResponseWriter, r *http.Request) {
	q := sessionstore.Query{Limit: h.opts.PageSize}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > 500 {
			writeError(w, http.StatusBadRequest, "bad limit %q: want 1 to 500", v)
			return
		}
		q.Limit = n
	}
	out, err := h.readList(r.Context(), q, r.URL.Query().Get("cursor"))
	if err != nil {
		storeError(w, err, "list the sessions")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// readList reads a page of sessions with their sizes.
func (h *Handler) readList(ctx context.Context, q sessionstore.Query, cursor string) (listJSON, error) {
	page, next, err := h.st.ListPage(ctx, q, cursor)
	var listErr *sessionstore.ListError
	if err != nil && !errors.As(err, &listErr) {
		return listJSON{}, err
	}
	out := listJSON{Sessions: make([]sessionJSON, 0, len(page)), Next: next}
	for _, m := range page {
		s := newSessionJSON(m)
		nodes, err := h.st.Tree(ctx, m.ID)
		if err != nil {
			s.Events, s.Bytes, s.TreeError = -1, -1, err.Error()
		} else {
			s.Events = len(nodes)
			s.Title = titleOf(nodes)
			for _, n := range nodes {
				s.Bytes += n.Size
			}
		}
		out.Sessions = append(out.Sessions, s)
	}
	return out, nil
}

// liveList streams the first page of sessions as Server-Sent Events: an
// event "sessions" (data: the page, as /api/sessions answers it) at the
// start and whenever the page changes (a session created or deleted, its
// metadata or its number of events changed). It polls every PollInterval
// and returns when the client goes away.
func (h *Handler) liveList(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	sw, ok := h.startStream(w, r)
	if !ok {
		return
	}
	defer h.streams.Add(-1)
	var last []byte
	ticker := time.NewTicker(h.opts.PollInterval)
	defer ticker.Stop()
	for {
		page, err := h.readList(ctx, sessionstore.Query{Limit: h.opts.PageSize}, "")
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			if !sw.event("failure", apiError{Error: err.Error()}) {
				return
			}
		default:
			b, err := json.Marshal(page)
			if err == nil && string(b) != string(last) {
				if !sw.raw("sessions", b) {
					return
				}
				last = b
			}
		}
		if !sw.wait(ctx, ticker) {
			return
		}
	}
}

// nodeJSON is a node of the tree.
type nodeJSON struct {
	ID         uuid.UUID         `json:"id"`
	ParentID   *uuid.UUID        `json:"parent_id"` // null for a root
	BranchFrom *uuid.UUID        `json:"branch_from,omitempty"`
	Kind       sessionstore.Kind `json:"kind"`
	Role       sessionstore.Role `json:"role,omitempty"`
	Time       time.Time         `json:"timestamp"`
	Size       int64             `json:"size"`
	Preview    string            `json:"preview,omitempty"`
	// Snapshot marks a workspace snapshot (see snapshotMark).
	Snapshot bool `json:"snapshot,omitempty"`
	// ParentRow is the index of the parent among the session's nodes,
	// -1 for a root (or a parent the tree does not hold).
	ParentRow int `json:"parent_row"`
}

// snapshotMark is how a workspace snapshot's record, and so its node's
// preview, begins: the library's manifest, {"sessionstore":"snapshot",...}
// (see sessionstore's Workspaces). A node without a preview (an index line
// older than previews, or a sealed one the Store has no key for) is not
// marked; the changes endpoint reads the manifests and tells.
const snapshotMark = `{"sessionstore":"snapshot"`

func newNodeJSON(n sessionstore.Node) nodeJSON {
	out := nodeJSON{ID: n.ID, Kind: n.Kind, Role: n.Role, Time: n.Time, Size: n.Size, Preview: n.Preview,
		Snapshot: n.Kind == sessionstore.KindCustom && strings.HasPrefix(n.Preview, snapshotMark)}
	if n.ParentID != uuid.Nil {
		p := n.ParentID
		out.ParentID = &p
	}
	if n.BranchFrom != uuid.Nil {
		b := n.BranchFrom
		out.BranchFrom = &b
	}
	return out
}

// laneJSON is a lane of a session.
type laneJSON struct {
	Name   string     `json:"name"`
	Tip    *uuid.UUID `json:"tip"` // null for the implicit lane of an empty session
	Active bool       `json:"active,omitempty"`
}

// treeJSON is the tree part of a session's answer, and of each live update.
type treeJSON struct {
	Head *uuid.UUID `json:"head"` // null for a session without events
	// Next is the end of the active path (Store.NextParent): where the
	// next append goes and Load ends; HEAD unless a lane switch is
	// pending. Null for a session without events.
	Next  *uuid.UUID `json:"next"`
	Lanes []laneJSON `json:"lanes"`
	// From is the index of Nodes[0] in the session's tree: 0 in the
	// session's answer, the client's count in a live update.
	From  int        `json:"from"`
	Total int        `json:"total"`
	Nodes []nodeJSON `json:"nodes"`
	// Error is a damaged session's error; Nodes are then its valid prefix.
	Error string `json:"error,omitempty"`
	// last is the id of the tree's last node (uuid.Nil for none), the
	// one a continuation must follow.
	last uuid.UUID
	// title is the session's Title (titleOf).
	title string
}

// sessionDetailJSON is the answer of /api/sessions/{session}.
type sessionDetailJSON struct {
	Session sessionJSON `json:"session"`
	// Usage is the session's exact token totals (Store.Usage).
	Usage usageJSON `json:"usage"`
	treeJSON
}

// readTree reads what the tree view shows of the session, the nodes from
// index from on, or all of them when the tree does not continue the one
// the client holds: fewer than from nodes, or (with last not uuid.Nil) a
// node from-1 other than last. It returns an error only when nothing can
// be shown.
//
// HEAD, the active path's end and the lanes are read before the tree, so
// that the tree holds them while a writer appends.
func (h *Handler) readTree(ctx context.Context, id uuid.UUID, from int, last uuid.UUID) (treeJSON, error) {
	head, next, headErr, nextErr := h.activeEnds(ctx, id)
	lanes, lanesErr := h.st.Lanes(ctx, id)
	t, err := h.readTreeCached(ctx, id) // kept for the page's requests that follow
	if err != nil {
		return treeJSON{}, err
	}
	nodes, treeErr := t.nodes, t.err
	out := treeJSON{Total: len(nodes), Lanes: []laneJSON{}}
	if treeErr != nil {
		out.Error = treeErr.Error()
	}
	if headErr != nil && treeErr == nil {
		return treeJSON{}, headErr
	}
	if head != uuid.Nil {
		out.Head = &head
	}
	if nextErr != nil && treeErr == nil {
		return treeJSON{}, nextErr
	}
	if next != uuid.Nil {
		out.Next = &next
	}
	if lanesErr == nil {
		for _, l := range lanes {
			lj := laneJSON{Name: l.Name, Active: l.Active}
			if l.Tip != uuid.Nil {
				tip := l.Tip
				lj.Tip = &tip
			}
			out.Lanes = append(out.Lanes, lj)
		}
	} else if out.Error == "" {
		out.Error = "lanes: " + lanesErr.Error()
	}
	if from > len(nodes) || (from > 0 && last != uuid.Nil && nodes[from-1].ID != last) {
		from = 0 // the tree is not the one the client knows: send it all
	}
	if len(nodes) > 0 {
		out.last = nodes[len(nodes)-1].ID
	}
	out.From = from
	out.title = titleOf(nodes)
	out.Nodes = make([]nodeJSON, 0, len(nodes)-from)
	for i, n := range nodes[from:] {
		nj := newNodeJSON(n)
		nj.ParentRow = t.parentRow(from + i)
		out.Nodes = append(out.Nodes, nj)
	}
	return out, nil
}

// activeEnds reads the session's HEAD and the end of its active path
// (NextParent) as they were at one moment. They are two reads: an append
// between them moves HEAD, and the event HEAD was would pass for a lane
// tip the next append extends, or HEAD for an event before the active
// path's end. So HEAD is read again after NextParent, until it has not
// moved meanwhile; beside a writer that appends without pause, after a
// few tries, next is the HEAD read last (the appends go on from it).
func (h *Handler) activeEnds(ctx context.Context, id uuid.UUID) (head, next uuid.UUID, headErr, nextErr error) {
	head, headErr = h.st.Head(ctx, id)
	for range 8 {
		next, _, nextErr = h.st.NextParent(ctx, id)
		again, err := h.st.Head(ctx, id)
		if headErr != nil || nextErr != nil || err != nil || again == head {
			return head, next, headErr, nextErr
		}
		head = again
	}
	return head, head, nil, nil
}

func (h *Handler) session(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(w, r, "session")
	if !ok {
		return
	}
	meta, err := h.st.Meta(r.Context(), id)
	if err != nil {
		storeError(w, err, "session "+id.String())
		return
	}
	tree, err := h.readTree(r.Context(), id, 0, uuid.Nil)
	if err != nil {
		storeError(w, err, "session "+id.String())
		return
	}
	s := newSessionJSON(meta)
	s.Events = tree.Total
	s.Title = tree.title
	for _, n := range tree.Nodes {
		s.Bytes += n.Size
	}
	writeJSON(w, http.StatusOK, sessionDetailJSON{Session: s, Usage: h.readUsage(r.Context(), id), treeJSON: tree})
}

// eventJSON is an event of a path, or the answer of the events endpoint.
type eventJSON struct {
	ID         uuid.UUID         `json:"id"`
	ParentID   *uuid.UUID        `json:"parent_id"`
	BranchFrom *uuid.UUID        `json:"branch_from,omitempty"`
	Kind       sessionstore.Kind `json:"kind"`
	Role       sessionstore.Role `json:"role,omitempty"`
	Time       time.Time         `json:"timestamp"`
	Digest     string            `json:"digest,omitempty"`
	Size       int64             `json:"size"`
	// Record is the record, or null when it is left out (Omitted).
	Record json.RawMessage `json:"record"`
	// Omitted: the record is over the inline limit or a blob; the events
	// endpoint returns it.
	Omitted bool `json:"omitted,omitempty"`
	// Summary is a custom record's one-line summary (Summary), also when
	// the record is left out (but not for a blob's).
	Summary string `json:"summary,omitempty"`
}

func newEventJSON(ev sessionstore.Event) eventJSON {
	out := eventJSON{ID: ev.ID, Kind: ev.Kind, Role: ev.Role, Time: ev.Time, Digest: ev.Digest, Size: ev.Size, Record: ev.Record}
	if ev.ParentID != uuid.Nil {
		p := ev.ParentID
		out.ParentID = &p
	}
	if ev.BranchFrom != uuid.Nil {
		b := ev.BranchFrom
		out.BranchFrom = &b
	}
	if out.Record == nil {
		out.Record = json.RawMessage("null")
	} else if ev.Kind == sessionstore.KindCustom {
		out.Summary = Summary(ev.Record)
	}
	return out
}

// pathJSON is the answer of /api/sessions/{session}/path.
type pathJSON struct {
	Leaf    *uuid.UUID  `json:"leaf"`    // null for a session without events
	Context bool        `json:"context"` // from the newest compaction (LoadPath), not the root
	Events  []eventJSON `json:"events"`
	Error   string      `json:"error,omitempty"` // a damaged path's error; Events are what was read
}

func (h *Handler) path(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(w, r, "session")
	if !ok {
		return
	}
	q := r.URL.Query()
	leaf := uuid.Nil
	if v := q.Get("leaf"); v != "" {
		if leaf, ok = parseIDValue(w, v, "leaf event"); !ok {
			return
		}
	}
	contextOnly := false
	switch v := q.Get("context"); v {
	case "", "0", "false":
	case "1", "true":
		contextOnly = true
	default:
		writeError(w, http.StatusBadRequest, "bad context %q: want 0 or 1", v)
		return
	}
	paged := q.Has("limit") || q.Has("offset")
	offset, limit := -1, 0
	if paged {
		if offset, limit, ok = pageParams(w, r, 200, MaxPageEvents); !ok {
			return
		}
	}
	ctx := r.Context()
	if leaf == uuid.Nil {
		next, _, err := h.st.NextParent(ctx, id) // the active path's end, as Load's
		if err != nil {
			storeError(w, err, "session "+id.String())
			return
		}
		leaf = next
	}
	if paged && leaf != uuid.Nil {
		h.pathPage(w, ctx, id, leaf, contextOnly, offset, limit)
		return
	}
	out := pathJSON{Context: contextOnly, Events: []eventJSON{}}
	if leaf != uuid.Nil {
		out.Leaf = &leaf
	}
	if leaf == uuid.Nil { // a session without events
		if _, err := h.st.Meta(ctx, id); err != nil {
			storeError(w, err, "session "+id.String())
			return
		}
		if paged {
			writeJSON(w, http.StatusOK, pathPageJSON{pathJSON: out, LeafRow: -1})
			return
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	var events []sessionstore.Event
	var err error
	if contextOnly {
		events, err = h.st.LoadPath(ctx, id, leaf)
	} else {
		events, err = h.st.FullPath(ctx, id, leaf)
	}
	if err != nil && len(events) == 0 {
		storeError(w, err, fmt.Sprintf("session %s, path to %s", id, leaf))
		return
	}
	if err != nil {
		out.Error = err.Error()
	}
	for _, ev := range events {
		out.Events = append(out.Events, h.pathEvent(ev))
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) event(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(w, r, "session")
	if !ok {
		return
	}
	evID, ok := parseID(w, r, "event")
	if !ok {
		return
	}
	ctx := r.Context()
	what := fmt.Sprintf("session %s, event %s", id, evID)
	ev, err := h.st.Event(ctx, id, evID)
	if err != nil {
		storeError(w, err, what)
		return
	}
	ev, err = h.st.Resolve(ctx, id, ev)
	if err != nil {
		storeError(w, err, what)
		return
	}
	writeJSON(w, http.StatusOK, newEventJSON(ev))
}

// fileJSON is a file of a workspace, as a change lists it.
type fileJSON struct {
	Mode   uint32 `json:"mode"` // permission bits
	Size   int64  `json:"size"`
	Digest string `json:"digest"` // "sha256:<hex>" of the content
}

func newFileJSON(f sessionstore.FileEntry) *fileJSON {
	return &fileJSON{Mode: uint32(f.Mode.Perm()), Size: f.Size, Digest: f.Digest}
}

// changeJSON is a file a snapshot changed.
type changeJSON struct {
	Path string                `json:"path"`
	Op   sessionstore.ChangeOp `json:"op"`   // added, modified or deleted
	From *fileJSON             `json:"from"` // null for a file added
	To   *fileJSON             `json:"to"`   // null for a file deleted
}

// changesJSON is the answer of /api/sessions/{session}/events/{event}/changes.
type changesJSON struct {
	Event  uuid.UUID  `json:"event"`
	Parent *uuid.UUID `json:"parent"` // null for a root
	// Snapshot: the event is a workspace snapshot. Another event changes
	// no file.
	Snapshot bool `json:"snapshot"`
	// Files is how many files the workspace holds as of the event.
	Files int `json:"files"`
	// Changes are the files changed, sorted by path: the first
	// MaxChanges of Total.
	Changes []changeJSON `json:"changes"`
	Total   int          `json:"total"`
}

// changes answers which files the event, a workspace snapshot, changed:
// the Diff between its parent's workspace and its own.
func (h *Handler) changes(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(w, r, "session")
	if !ok {
		return
	}
	evID, ok := parseID(w, r, "event")
	if !ok {
		return
	}
	ctx := r.Context()
	what := fmt.Sprintf("session %s, event %s", id, evID)
	ev, err := h.st.Event(ctx, id, evID)
	if err != nil {
		storeError(w, err, what)
		return
	}
	ws, err := h.st.Files(ctx, id, evID)
	if err != nil {
		storeError(w, err, what+", workspace")
		return
	}
	out := changesJSON{Event: evID, Snapshot: ws.Snapshot == evID, Files: len(ws.Files), Changes: []changeJSON{}}
	if ev.ParentID != uuid.Nil {
		p := ev.ParentID
		out.Parent = &p
	}
	var changes []sessionstore.FileChange
	switch {
	case !out.Snapshot:
	case ev.ParentID == uuid.Nil:
		// Diff reads uuid.Nil as the active path's end: a root's
		// parent workspace is empty, so every file is added.
		for _, f := range ws.Files {
			changes = append(changes, sessionstore.FileChange{Path: f.Path, Op: sessionstore.FileAdded, To: f})
		}
	default:
		if changes, err = h.st.Diff(ctx, id, ev.ParentID, evID); err != nil {
			storeError(w, err, what+", workspace diff")
			return
		}
	}
	out.Total = len(changes)
	for _, c := range changes[:min(len(changes), MaxChanges)] {
		cj := changeJSON{Path: c.Path, Op: c.Op}
		if c.Op != sessionstore.FileAdded {
			cj.From = newFileJSON(c.From)
		}
		if c.Op != sessionstore.FileDeleted {
			cj.To = newFileJSON(c.To)
		}
		out.Changes = append(out.Changes, cj)
	}
	writeJSON(w, http.StatusOK, out)
}

// live streams the session's changes as Server-Sent Events: an event
// "tree" (data: a treeJSON holding the nodes after the ones the client
// knows, or every node when the tree is not the one it knows) each time the session's Revision changes and its tree or lanes
// differ from what was sent, and "gone" when the session is deleted. It
// polls every PollInterval and returns when the client goes away.
func (h *Handler) live(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(w, r, "session")
	if !ok {
		return
	}
	known := 0
	if v := r.URL.Query().Get("known"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "bad known %q: want a count of nodes", v)
			return
		}
		known = n
	}
	last := uuid.Nil
	if v := r.URL.Query().Get("last"); v != "" {
		if last, ok = parseIDValue(w, v, "last node"); !ok {
			return
		}
	}
	// A cursor (the id of the last message the client received) says
	// where to resume, and wins over known and last: a browser that
	// reconnects on its own sends it with the stream's first URL.
	cur := liveCursor{known: known, last: last}
	if v := resumeFrom(r); v != "" {
		c, err := parseLiveCursor(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
		cur = c
	}
	ctx := r.Context()
	if _, err := h.st.Meta(ctx, id); err != nil {
		storeError(w, err, "session "+id.String())
		return
	}
	tail, err := h.st.Tail(ctx, id, cur.tail)
	switch {
	case errors.Is(err, sessionstore.ErrInvalidCursor):
		writeError(w, http.StatusBadRequest, "bad cursor: %v", err)
		return
	case err != nil:
		storeError(w, err, "follow session "+id.String())
		return
	}
	defer func() { tail.Close() }()
	sw, ok := h.startStream(w, r)
	if !ok {
		return
	}
	defer h.streams.Add(-1)
	known, last = cur.known, cur.last
	tailC := tail.C
	pending := false // a delta was sent that no "settled" followed yet
	retail := false  // the tail ended on a session deleted: follow it again when it is back

	var sent sessionstore.Revision
	first := true
	var lastState string // head and lanes last sent
	var lastLanes string // the lanes last read
	ticker := time.NewTicker(h.opts.PollInterval)
	defer ticker.Stop()
	for {
		rev, err := h.st.Revision(ctx, id)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, sessionstore.ErrNotFound):
			sw.raw("gone", []byte("{}"))
			return
		case err != nil:
			if !sw.event("failure", apiError{Error: err.Error()}) {
				return
			}
		case first || rev != sent || h.lanesKey(ctx, id) != lastLanes:
			// Lanes change without an append (lanes.json), so they
			// are compared apart from the revision.
			tree, err := h.readTree(ctx, id, known, last)
			if ctx.Err() != nil {
				return
			}
			if errors.Is(err, sessionstore.ErrNotFound) {
				sw.raw("gone", []byte("{}")) // deleted since the revision
				return
			}
			if err != nil {
				if !sw.event("failure", apiError{Error: err.Error()}) {
					return
				}
				break
			}
			sent, first = rev, false
			lastLanes = lanesKey(tree.Lanes)
			state := stateKey(tree)
			if len(tree.Nodes) == 0 && tree.From == known && state == lastState {
				break // nothing the client lacks
			}
			cur.known, cur.last = tree.Total, tree.last
			if !sw.eventID("tree", cur.String(), tree) {
				return
			}
			known, last, lastState = tree.Total, tree.last, state
		}
		if retail {
			if t, err := h.st.Tail(ctx, id, ""); err == nil {
				tail.Close()
				tail, tailC, retail, pending = t, t.C, false, false
				cur.tail = ""
			}
		}
		// Until the next tick, send what the tail delivers.
		if !sw.keepAlive() {
			return
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				break wait
			case u, ok := <-tailC:
				if !ok {
					tailC = nil
					err := tail.Err()
					if errors.Is(err, sessionstore.ErrNotFound) {
						// Deleted: the tree's look tells the client
						// ("gone", or the tree of the session made
						// again, which is followed from its start).
						retail = true
						continue
					}
					if err != nil && ctx.Err() == nil {
						if !sw.event("failure", apiError{Error: "follow the deltas: " + err.Error()}) {
							return
						}
					}
					continue
				}
				cur.tail = u.Cursor
				switch {
				case u.Delta != nil:
					pending = true
					if !sw.eventID("delta", cur.String(), u.Delta) {
						return
					}
				case u.Event != nil && pending:
					// The event supersedes the deltas sent before it.
					pending = false
					if !sw.eventID("settled", cur.String(), settledJSON{Event: u.Event.ID}) {
						return
					}
				}
				// An event with no delta before it reaches the client
				// as a node of a "tree" message; the cursor moves on.
			}
		}
	}
}

// settledJSON is the data of a live "settled" message: the event that
// supersedes the deltas sent before it.
type settledJSON struct {
	Event uuid.UUID `json:"event"`
}

// stateKey sums up the HEAD, the active path's end and the lanes of tree,
// to tell whether they changed.
func stateKey(t treeJSON) string {
	head, next := uuid.Nil, uuid.Nil
	if t.Head != nil {
		head = *t.Head
	}
	if t.Next != nil {
		next = *t.Next
	}
	return head.String() + next.String() + lanesKey(t.Lanes)
}

// lanesKey sums up lanes, to tell whether they changed.
func lanesKey(lanes []laneJSON) string {
	var b strings.Builder
	for _, l := range lanes {
		tip := uuid.Nil
		if l.Tip != nil {
			tip = *l.Tip
		}
		fmt.Fprintf(&b, "|%s=%s,%v", l.Name, tip, l.Active)
	}
	return b.String()
}

// lanesKey reads the session's lanes (one small file) and sums them up;
// an error gives a key of its own.
func (h *Handler) lanesKey(ctx context.Context, id uuid.UUID) string {
	lanes, err := h.st.Lanes(ctx, id)
	if err != nil {
		return "error: " + err.Error()
	}
	out := make([]laneJSON, len(lanes))
	for i, l := range lanes {
		tip := l.Tip
		out[i] = laneJSON{Name: l.Name, Tip: &tip, Active: l.Active}
		if tip == uuid.Nil {
			out[i].Tip = nil
		}
	}
	return lanesKey(out)
}

// streamWriter writes Server-Sent Events.
type streamWriter struct {
	w    http.ResponseWriter
	f    http.Flusher
	idle time.Time // when the last event or comment was sent
}

// startStream answers the request with an event stream and counts it in
// h.streams; the caller subtracts it when the stream ends. A HEAD request
// gets the headers alone, and false.
func (h *Handler) startStream(w http.ResponseWriter, r *http.Request) (*streamWriter, bool) {
	if r.Method == http.MethodHead {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		return nil, false
	}
	f, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "the connection cannot stream")
		return nil, false
	}
	h.streams.Add(1)
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", h.opts.PollInterval.Milliseconds()*4)
	f.Flush()
	return &streamWriter{w: w, f: f, idle: time.Now()}, true
}

// event sends one event whose data is v as JSON; false when the client is gone.
func (s *streamWriter) event(name string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(apiError{Error: err.Error()})
		name = "failure"
	}
	return s.raw(name, b)
}

// eventID sends one event with the id id (which holds no newline) and v
// as JSON; false when the client is gone.
func (s *streamWriter) eventID(name, id string, v any) bool {
	b, err := json.Marshal(v)
	if err != nil {
		return s.event(name, v) // a "failure", without id
	}
	if _, err := fmt.Fprintf(s.w, "id: %s\n", id); err != nil {
		return false
	}
	return s.raw(name, b)
}

// raw sends one event whose data is the JSON b (which holds no raw
// newline, so it is one data line).
func (s *streamWriter) raw(name string, b []byte) bool {
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b); err != nil {
		return false
	}
	s.f.Flush()
	s.idle = time.Now()
	return true
}

// wait keeps the connection alive and waits for the next tick; false when
// the client is gone or ctx is done.
func (s *streamWriter) wait(ctx context.Context, ticker *time.Ticker) bool {
	if !s.keepAlive() {
		return false
	}
	select {
	case <-ctx.Done():
		return false
	case <-ticker.C:
		return true
	}
}

// keepAlive sends a comment when nothing was sent for a while, so that
// proxies and the browser keep the connection; false when the client is gone.
func (s *streamWriter) keepAlive() bool {
	if time.Since(s.idle) < keepAlive {
		return true
	}
	if _, err := fmt.Fprint(s.w, ": keep-alive\n\n"); err != nil {
		return false
	}
	s.f.Flush()
	s.idle = time.Now()
	return true
}
