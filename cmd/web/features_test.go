package web_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

type tokensAnswer struct {
	In       int64 `json:"in"`
	Out      int64 `json:"out"`
	Messages int64 `json:"messages"`
}

type totalsAnswer struct {
	tokensAnswer
	InputTokens     int64 `json:"input_tokens"`
	OutputTokens    int64 `json:"output_tokens"`
	CacheReadTokens int64 `json:"cache_read_tokens"`
	ByModel         []struct {
		Model    string `json:"model"`
		Messages int64  `json:"messages"`
	} `json:"by_model"`
}

type usageAnswer struct {
	Session      *totalsAnswer `json:"session"`
	Branch       *totalsAnswer `json:"branch"`
	SessionError string        `json:"session_error"`
	BranchError  string        `json:"branch_error"`
}

// usageFixture is a session with usage on two branches: the first
// answer (1000 in, 500 cache read, 200 out) on the abandoned branch, the
// second (10 in, 3 out) on the active one; totals recorded by a Flush.
func usageFixture(t *testing.T) (*fixture, uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	f := newFixture(t)
	m, err := f.w.Create(ctx, sessionstore.Meta{Name: "with usage", Model: "m-default"})
	require.NoError(t, err)
	ask, err := f.w.Append(ctx, m.ID, sessionstore.UserText("count the tokens"))
	require.NoError(t, err)
	_, err = f.w.Append(ctx, m.ID, sessionstore.AssistantMessage(sessionstore.Message{Content: "first", Model: "m1",
		Usage: &sessionstore.Usage{InputTokens: 1000, CacheReadTokens: 500, OutputTokens: 200}}))
	require.NoError(t, err)
	require.NoError(t, f.w.Branch(ctx, m.ID, ask.ID))
	_, err = f.w.Append(ctx, m.ID, sessionstore.AssistantMessage(sessionstore.Message{Content: "second",
		Usage: &sessionstore.Usage{InputTokens: 10, OutputTokens: 3}}))
	require.NoError(t, err)
	require.NoError(t, f.w.Flush(ctx, m.ID))
	return f, m.ID
}

func TestUsageColumn(t *testing.T) {
	f, id := usageFixture(t)
	var list struct {
		Sessions []struct {
			ID     uuid.UUID     `json:"id"`
			Tokens *tokensAnswer `json:"tokens"`
		} `json:"sessions"`
	}
	require.Equal(t, 200, f.get(t, "/api/sessions", &list))
	found := false
	for _, s := range list.Sessions {
		switch s.ID {
		case id:
			found = true
			require.NotNil(t, s.Tokens, "the recorded totals")
			assert.Equal(t, tokensAnswer{In: 1510, Out: 203, Messages: 2}, *s.Tokens)
		case f.other.ID:
			assert.Nil(t, s.Tokens, "a session without events records no totals")
		}
	}
	assert.True(t, found)
}

func TestUsageDetails(t *testing.T) {
	f, id := usageFixture(t)
	for _, path := range []string{"/api/sessions/" + id.String() + "/usage", "/api/sessions/" + id.String()} {
		var u usageAnswer
		if path == "/api/sessions/"+id.String() {
			var d struct {
				Usage usageAnswer `json:"usage"`
			}
			require.Equal(t, 200, f.get(t, path, &d))
			u = d.Usage
		} else {
			require.Equal(t, 200, f.get(t, path, &u))
		}
		require.NotNil(t, u.Session, "%s: %s", path, u.SessionError)
		require.NotNil(t, u.Branch, "%s: %s", path, u.BranchError)
		assert.Equal(t, tokensAnswer{In: 1510, Out: 203, Messages: 2}, u.Session.tokensAnswer, path)
		assert.Equal(t, int64(500), u.Session.CacheReadTokens, path)
		assert.Equal(t, tokensAnswer{In: 10, Out: 3, Messages: 1}, u.Branch.tokensAnswer, path+": the active branch only")
		models := map[string]int64{}
		for _, m := range u.Session.ByModel {
			models[m.Model] = m.Messages
		}
		assert.Equal(t, map[string]int64{"m1": 1, "m-default": 1}, models, path+": a message without a model counts under the session's")
	}
}

func TestUsageErrors(t *testing.T) {
	f := newFixture(t)
	var e struct {
		Error string `json:"error"`
	}
	assert.Equal(t, 400, f.get(t, "/api/sessions/nope/usage", &e))
	assert.Contains(t, e.Error, "bad session id")
	assert.Equal(t, 404, f.get(t, "/api/sessions/"+uuid.NewString()+"/usage", &e))
	assert.Contains(t, e.Error, "not found")
	// A session without usage: zero totals, not an error.
	var u usageAnswer
	require.Equal(t, 200, f.get(t, "/api/sessions/"+f.session.ID.String()+"/usage", &u))
	require.NotNil(t, u.Session)
	assert.Equal(t, tokensAnswer{}, u.Session.tokensAnswer)
}

type hitAnswer struct {
	Session     uuid.UUID `json:"session"`
	SessionName string    `json:"session_name"`
	Event       uuid.UUID `json:"event"`
	Kind        string    `json:"kind"`
	Role        string    `json:"role"`
	Time        time.Time `json:"timestamp"`
	Snippet     string    `json:"snippet"`
	Rank        float64   `json:"rank"`
}

type searchAnswer struct {
	Query string      `json:"q"`
	Hits  []hitAnswer `json:"hits"`
}

func TestSearch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	// Another session, elsewhere, that holds the word too.
	o, err := f.w.Create(ctx, sessionstore.Meta{Name: "elsewhere", WorkingDir: "/src/other", Labels: map[string]string{"team": "b"}})
	require.NoError(t, err)
	oev, err := f.w.Append(ctx, o.ID, sessionstore.UserText("rewrite the parser"))
	require.NoError(t, err)

	var a searchAnswer
	require.Equal(t, 200, f.get(t, "/api/search?q="+url.QueryEscape("rewrite"), &a))
	assert.Equal(t, "rewrite", a.Query)
	got := map[uuid.UUID]hitAnswer{}
	for _, h := range a.Hits {
		got[h.Event] = h
	}
	require.Contains(t, got, f.firstLeaf.ID, "%+v", a.Hits)
	require.Contains(t, got, oev.ID, "%+v", a.Hits)
	h := got[f.firstLeaf.ID]
	assert.Equal(t, f.session.ID, h.Session)
	assert.Equal(t, "web view", h.SessionName)
	assert.Equal(t, "message", h.Kind)
	assert.Equal(t, "assistant", h.Role)
	assert.True(t, h.Time.Equal(f.firstLeaf.Time), "%v != %v", h.Time, f.firstLeaf.Time)
	assert.Contains(t, h.Snippet, "rewrite")
	assert.Greater(t, h.Rank, 0.0)

	// Session filters, kinds, roles and limit narrow the hits.
	for _, tc := range []struct {
		query string
		want  []uuid.UUID
	}{
		{"q=rewrite&working_dir=/src/app", []uuid.UUID{f.firstLeaf.ID}},
		{"q=rewrite&label=team%3Db", []uuid.UUID{oev.ID}},
		{"q=rewrite&role=user", []uuid.UUID{oev.ID}},
		{"q=rewrite&kind=message&role=assistant", []uuid.UUID{f.firstLeaf.ID}},
		{"q=rewrite&kind=tool_call", nil},
		{"q=rewrite&until=2000-01-01T00:00:00Z", nil},
		{"q=rewrite&since=2000-01-01T00:00:00Z&working_dir=/src/other", []uuid.UUID{oev.ID}},
		{"q=" + url.QueryEscape(`"the parser"`), []uuid.UUID{oev.ID}},
	} {
		var a searchAnswer
		require.Equal(t, 200, f.get(t, "/api/search?"+tc.query, &a), tc.query)
		var events []uuid.UUID
		for _, h := range a.Hits {
			events = append(events, h.Event)
		}
		assert.Equal(t, tc.want, events, tc.query)
	}
	require.Equal(t, 200, f.get(t, "/api/search?q=rewrite&limit=1", &a))
	assert.Len(t, a.Hits, 1)
	require.Equal(t, 200, f.get(t, "/api/search?q=zzzunfound", &a))
	assert.NotNil(t, a.Hits, "no hit is an empty list")
	assert.Empty(t, a.Hits)
}

func TestSearchErrors(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ query, holds string }{
		{"", "invalid search"},
		{"q=", "invalid search"},
		{"q=%21%21%21", "invalid search"},                   // punctuation only
		{"q=" + url.QueryEscape(`"open`), "invalid search"}, // unbalanced quote
		{"q=a%ff", "invalid search"},                        // not UTF-8
		{"q=a&kind=nope", "unknown kind"},
		{"q=a&role=nope", "unknown role"},
		{"q=a&limit=0", "bad limit"},
		{"q=a&limit=501", "bad limit"},
		{"q=a&limit=x", "bad limit"},
		{"q=a&parent=nope", "bad parent session id"},
		{"q=a&label=nokey", "bad label"},
		{"q=a&label=%3Dv", "bad label"},
		{"q=a&since=yesterday", "bad since"},
		{"q=a&until=2020", "bad until"},
	} {
		var e struct {
			Error string `json:"error"`
		}
		assert.Equal(t, 400, f.get(t, "/api/search?"+tc.query, &e), tc.query)
		assert.Contains(t, e.Error, tc.holds, tc.query)
	}
}
