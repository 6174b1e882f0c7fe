package web

import (
	"context"
	"net/http"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore"
)

// tokensJSON is a session's token totals as the list shows them: the
// input tokens (cache reads and writes included) and the output tokens
// session.json records (Meta.Usage). It is read with the listing, no
// session is loaded, so it may lag the log after a crash until a writer
// next closes the session; the session's answer carries the exact totals.
type tokensJSON struct {
	In  int64 `json:"in"`
	Out int64 `json:"out"`
	// Messages is the number of messages that reported usage.
	Messages int64 `json:"messages"`
}

// recordedTokens sums up u; nil when the session records no totals (one
// written before the store kept them, or not closed since its first
// events).
func recordedTokens(u *sessionstore.RecordedUsage) *tokensJSON {
	if u == nil {
		return nil
	}
	var t tokensJSON
	for _, m := range u.Models {
		t.In += m.InputTokens + m.CacheReadTokens + m.CacheWriteTokens
		t.Out += m.OutputTokens
		t.Messages += m.Messages
	}
	return &t
}

// usageTotalsJSON is what Store.Usage returns for one scope.
type usageTotalsJSON struct {
	sessionstore.Usage
	// In and Out are the input (cache included) and output tokens, as the
	// list shows them.
	In       int64                     `json:"in"`
	Out      int64                     `json:"out"`
	Messages int64                     `json:"messages"`
	ByModel  []sessionstore.ModelUsage `json:"by_model"`
	Cost     float64                   `json:"cost,omitempty"`
	Unpriced []string                  `json:"unpriced,omitempty"`
}

// usageJSON is the usage part of a session's answer: the session's own
// totals (every branch, each event once) and the active branch's (root
// to the active path's end, a fork's prefix included). A scope the
// store could not add up is null, with its error beside it.
type usageJSON struct {
	Session      *usageTotalsJSON `json:"session"`
	Branch       *usageTotalsJSON `json:"branch"`
	SessionError string           `json:"session_error,omitempty"`
	BranchError  string           `json:"branch_error,omitempty"`
}

func newUsageTotalsJSON(t sessionstore.UsageTotals) *usageTotalsJSON {
	out := &usageTotalsJSON{Usage: t.Usage, Messages: t.Messages, ByModel: t.ByModel,
		Cost: t.Cost, Unpriced: t.Unpriced,
		In:  t.InputTokens + t.CacheReadTokens + t.CacheWriteTokens,
		Out: t.OutputTokens}
	if out.ByModel == nil {
		out.ByModel = []sessionstore.ModelUsage{}
	}
	return out
}

// readUsage reads the session's exact totals (Store.Usage reads what the
// recorded totals lack from the log).
func (h *Handler) readUsage(ctx context.Context, id uuid.UUID) usageJSON {
	var out usageJSON
	if t, err := h.st.Usage(ctx, id, sessionstore.UsageScope{Kind: sessionstore.UsageSession}); err != nil {
		out.SessionError = err.Error()
	} else {
		out.Session = newUsageTotalsJSON(t)
	}
	if t, err := h.st.Usage(ctx, id, sessionstore.UsageScope{Kind: sessionstore.UsageBranch}); err != nil {
		out.BranchError = err.Error()
	} else {
		out.Branch = newUsageTotalsJSON(t)
	}
	return out
}

// usage answers /api/sessions/{session}/usage: the session's exact totals
// and its active branch's (usageJSON).
func (h *Handler) usage(w http.ResponseWriter, r *http.Request) {
	id, ok := parseID(w, r, "session")
	if !ok {
		return
	}
	if _, err := h.st.Meta(r.Context(), id); err != nil {
		storeError(w, err, "session "+id.String())
		return
	}
	writeJSON(w, http.StatusOK, h.readUsage(r.Context(), id))
}
