package web

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// maxSearchLimit bounds the hits one search answer holds.
const maxSearchLimit = 500

// hitJSON is a hit of /api/search.
type hitJSON struct {
	Session uuid.UUID `json:"session"`
	// SessionName is the session's name, "" for none (or when its
	// metadata could not be read).
	SessionName string            `json:"session_name,omitempty"`
	Event       uuid.UUID         `json:"event"`
	Kind        sessionstore.Kind `json:"kind"`
	Role        sessionstore.Role `json:"role,omitempty"`
	Time        time.Time         `json:"timestamp"`
	Snippet     string            `json:"snippet"`
	Rank        float64           `json:"rank"`
}

// searchJSON is the answer of /api/search.
type searchJSON struct {
	Query string    `json:"q"`
	Hits  []hitJSON `json:"hits"`
}

// search answers /api/search: Store.Search with the query q, the
// sessions selected as for the list (working_dir, parent, label=k=v
// repeated, since and until in RFC 3339), kind and role repeated, and
// limit (1 to 500, sessionstore.DefaultSearchLimit when absent). A query
// Search refuses (sessionstore.ErrInvalidSearch) or a bad parameter
// answers 400.
func (h *Handler) search(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	q := sessionstore.SearchQuery{Text: v.Get("q")}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 || n > maxSearchLimit {
			writeError(w, http.StatusBadRequest, "bad limit %q: want 1 to %d", s, maxSearchLimit)
			return
		}
		q.Limit = n
	}
	q.WorkingDir = v.Get("working_dir")
	if s := v.Get("parent"); s != "" {
		id, ok := parseIDValue(w, s, "parent session")
		if !ok {
			return
		}
		q.ParentSession = id
	}
	for _, l := range v["label"] {
		k, val, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			writeError(w, http.StatusBadRequest, "bad label %q: want key=value", l)
			return
		}
		if q.Labels == nil {
			q.Labels = map[string]string{}
		}
		q.Labels[k] = val
	}
	for _, p := range []struct {
		name string
		to   *time.Time
	}{{"since", &q.Since}, {"until", &q.Until}} {
		if s := v.Get(p.name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				writeError(w, http.StatusBadRequest, "bad %s %q: want a time in RFC 3339", p.name, s)
				return
			}
			*p.to = t
		}
	}
	for _, k := range v["kind"] {
		q.Kinds = append(q.Kinds, sessionstore.Kind(k))
	}
	for _, role := range v["role"] {
		q.Roles = append(q.Roles, sessionstore.Role(role))
	}
	out := searchJSON{Query: q.Text, Hits: []hitJSON{}}
	names := map[uuid.UUID]string{}
	for hit, err := range h.st.Search(r.Context(), q) {
		if err != nil {
			if errors.Is(err, sessionstore.ErrInvalidSearch) {
				writeError(w, http.StatusBadRequest, "search %q: %v", q.Text, err)
				return
			}
			storeError(w, err, "search")
			return
		}
		name, ok := names[hit.Session]
		if !ok {
			if m, err := h.st.Meta(r.Context(), hit.Session); err == nil {
				name = m.Name
			}
			names[hit.Session] = name
		}
		out.Hits = append(out.Hits, hitJSON{Session: hit.Session, SessionName: name, Event: hit.Event,
			Kind: hit.Kind, Role: hit.Role, Time: hit.Time, Snippet: hit.Snippet, Rank: hit.Rank})
	}
	writeJSON(w, http.StatusOK, out)
}
