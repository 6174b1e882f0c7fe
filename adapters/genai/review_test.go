package genai

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer/claude"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"
)

// geminiRules returns what the Gemini API refuses in a request's
// contents, or "" when it accepts them: a content without parts or with
// an unknown role; a function call turn that does not follow a user turn
// or a function response turn; a function response turn that does not
// directly follow the function call turn it answers, with one response
// per call, in order, by name (and id when the call has one); a function
// response content holding any other part (the API takes the parts after
// the responses as a model turn). Calls at the end are pending: the
// harness runs them before it sends.
func geminiRules(cs []*genai.Content) string {
	var calls []*genai.FunctionCall // of the model content before, unanswered
	for i, c := range cs {
		if len(c.Parts) == 0 {
			return fmt.Sprintf("content %d has no parts", i)
		}
		var fc []*genai.FunctionCall
		var fr []*genai.FunctionResponse
		other := 0
		for _, p := range c.Parts {
			switch {
			case p.FunctionCall != nil:
				fc = append(fc, p.FunctionCall)
			case p.FunctionResponse != nil:
				fr = append(fr, p.FunctionResponse)
			default:
				other++
			}
		}
		switch c.Role {
		case genai.RoleModel:
			if len(calls) > 0 {
				return fmt.Sprintf("content %d: model turn before the responses to %d calls", i, len(calls))
			}
			if len(fr) > 0 {
				return fmt.Sprintf("content %d: function response in a model turn", i)
			}
			if len(fc) > 0 && (i == 0 || cs[i-1].Role != genai.RoleUser) {
				return fmt.Sprintf("content %d: function call turn not after a user or function response turn", i)
			}
			calls = fc
		case genai.RoleUser:
			if len(fc) > 0 {
				return fmt.Sprintf("content %d: function call in a user turn", i)
			}
			if len(fr) > 0 && other > 0 {
				return fmt.Sprintf("content %d: function responses mixed with %d other parts", i, other)
			}
			if len(calls) > 0 && len(fr) == 0 {
				return fmt.Sprintf("content %d: user turn before the responses to %d calls", i, len(calls))
			}
			if len(fr) > 0 {
				if len(fr) != len(calls) {
					return fmt.Sprintf("content %d: %d function responses for %d calls", i, len(fr), len(calls))
				}
				for j := range fr {
					if fr[j].Name != calls[j].Name || fr[j].ID != calls[j].ID {
						return fmt.Sprintf("content %d: response %d (%s %s) does not answer call %s %s", i, j, fr[j].ID, fr[j].Name, calls[j].ID, calls[j].Name)
					}
				}
			}
			calls = nil
		default:
			return fmt.Sprintf("content %d: role %q", i, c.Role)
		}
	}
	return ""
}

// geminiRulesServer plays generateContent and answers 400 with the rule
// a request breaks; it counts the requests it accepted.
func geminiRulesServer(t *testing.T, accepted *int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Contents []*genai.Content `json:"contents"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || !strings.HasSuffix(r.URL.Path, ":generateContent") {
			http.Error(w, fmt.Sprintf("bad request %s: %v", r.URL.Path, err), http.StatusBadRequest)
			return
		}
		if p := geminiRules(req.Contents); p != "" {
			http.Error(w, p, http.StatusBadRequest)
			return
		}
		*accepted++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"ok"}]}}],"responseId":"r"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func rulesClient(t *testing.T, srv *httptest.Server) *genai.Client {
	client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "test", Backend: genai.BackendGeminiAPI, HTTPOptions: genai.HTTPOptions{BaseURL: srv.URL}})
	require.NoError(t, err)
	return client
}

// The validator refuses what it should: each case breaks one rule.
func TestGeminiRulesRefuse(t *testing.T) {
	for name, cs := range map[string][]*genai.Content{
		"mixed":        {content("user", text("x")), content("model", fcall("a", "f", nil)), content("user", fresp("a", "f", nil), text("y"))},
		"missing":      {content("user", text("x")), content("model", fcall("a", "f", nil), fcall("b", "g", nil)), content("user", fresp("a", "f", nil))},
		"wrong order":  {content("user", text("x")), content("model", fcall("a", "f", nil), fcall("b", "g", nil)), content("user", fresp("b", "g", nil), fresp("a", "f", nil))},
		"unanswered":   {content("user", text("x")), content("model", fcall("a", "f", nil)), content("user", text("y"))},
		"orphan":       {content("user", text("x")), content("user", fresp("a", "f", nil))},
		"empty":        {content("user")},
		"model after":  {content("user", text("x")), content("model", fcall("a", "f", nil)), content("model", text("y"))},
		"calls follow": {content("user", text("x")), content("model", text("y")), content("model", fcall("a", "f", nil))},
	} {
		assert.NotEmpty(t, geminiRules(cs), name)
	}
	assert.Empty(t, geminiRules([]*genai.Content{content("user", text("x")), content("model", fcall("a", "f", nil)),
		content("user", fresp("a", "f", nil)), content("user", text("y"))}))
}

// The user's next words after function responses (a synthetic result
// for an abandoned call, or results the user interrupted) go in a
// content of their own: a function response turn holds only responses.
func TestContentsResponsesKeptApartFromText(t *testing.T) {
	summary := sessionstore.Summary{Text: "left path"}
	for name, evs := range map[string][]sessionstore.Event{
		"abandoned call":   cat(sessionstore.UserText("x"), reply("", call("a", "run", "")), sessionstore.UserText("never mind")),
		"interrupted":      cat(sessionstore.UserText("x"), reply("", call("a", "f", `{}`), call("b", "g", `{}`)), result("b", "B", false), result("a", "A", false), sessionstore.UserText("[Request interrupted by user]")),
		"branch summary":   cat(sessionstore.UserText("x"), reply("", call("a", "f", `{}`)), result("a", "A", true), sessionstore.NewEvent(sessionstore.KindBranchSummary, sessionstore.RoleNone, sessionstore.BranchSummaryRecord{Summary: summary})),
		"summary and text": cat(sessionstore.UserText("x"), reply("", call("a", "f", `{}`)), sessionstore.NewEvent(sessionstore.KindBranchSummary, sessionstore.RoleNone, sessionstore.BranchSummaryRecord{Summary: summary}), sessionstore.UserText("go on")),
	} {
		got, err := Contents(ids(evs...))
		require.NoError(t, err, name)
		assert.Empty(t, geminiRules(got), name)
		// Nothing is lost: the text is still there, after the responses.
		last := got[len(got)-1]
		assert.Equal(t, genai.RoleUser, last.Role, name)
		assert.NotEmpty(t, last.Parts[len(last.Parts)-1].Text, name)
	}
}

// importClaude imports the real Claude Code transcripts into a store of
// the test's and returns each session's Load.
func importClaude(t *testing.T) map[string][]sessionstore.Event {
	dir := claudeData(t)
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	rep, err := claude.Import(ctx, st, []string{dir}, nil)
	require.NoError(t, err)
	require.Positive(t, rep.Sessions)
	out := map[string][]sessionstore.Event{}
	for m, err := range st.Sessions(ctx, sessionstore.Query{}) {
		require.NoError(t, err)
		evs, err := st.Load(ctx, m.ID)
		require.NoError(t, err)
		out[m.ID.String()+" "+m.Labels["source_path"]] = evs
	}
	return out
}

// Every session of the real transcripts, imported and loaded, becomes
// contents the Gemini API's rules accept, sent by the SDK's client.
func TestImportedClaudeSessions(t *testing.T) {
	sessions := importClaude(t)
	accepted := 0
	srv := geminiRulesServer(t, &accepted)
	client := rulesClient(t, srv)
	ctx := context.Background()
	sent, calls := 0, 0
	for name, evs := range sessions {
		got, err := Contents(evs)
		require.NoError(t, err, name)
		if len(got) == 0 {
			continue
		}
		for _, c := range got {
			for _, p := range c.Parts {
				if p.FunctionCall != nil {
					calls++
				}
			}
		}
		assert.Empty(t, geminiRules(got), name)
		sent++
		_, err = client.Models.GenerateContent(ctx, "gemini-2.5-flash", got, nil)
		assert.NoError(t, err, name)
	}
	t.Logf("%d sessions, %d sent, %d accepted, %d function calls", len(sessions), sent, accepted, calls)
	assert.Equal(t, sent, accepted)
	assert.Positive(t, calls)
}

// Probes of single conversations, each through the SDK's client to the
// rules server: parallel calls answered out of order, an error result,
// empty arguments, unicode, a very long output, a compaction; arguments
// that are not an object are ErrArguments.
func TestContentsProbes(t *testing.T) {
	long := strings.Repeat("løng 出力 🙂 ", 200_000)
	summary := sessionstore.Summary{Text: "We fixed the parser ✓.", Decisions: []string{"keep v2"}}
	for name, evs := range map[string][]sessionstore.Event{
		"parallel, out of order": cat(sessionstore.UserText("x"), reply("", call("a", "f", `{}`), call("b", "g", `{"q":1}`), call("c", "h", "")),
			result("c", "C", false), result("a", "A", true), result("b", "B", false), sessionstore.AssistantText("done")),
		"unicode and long output": cat(sessionstore.UserText("ünïcödé ✓ 日本"), reply("読む", call("a", "read", `{"p":"ファイル"}`)), result("a", long, false),
			sessionstore.UserText("next")),
		"compaction": cat(sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, sessionstore.CompactionRecord{Summary: summary}),
			reply("", call("a", "f", `{}`)), result("a", "A", false), sessionstore.UserText("go on")),
	} {
		accepted := 0
		client := rulesClient(t, geminiRulesServer(t, &accepted))
		got, err := Contents(ids(evs...))
		require.NoError(t, err, name)
		_, err = client.Models.GenerateContent(context.Background(), "gemini-2.5-flash", got, nil)
		assert.NoError(t, err, name)
		assert.Equal(t, 1, accepted, name)
	}
	for _, args := range []string{`[1,2]`, `"s"`, `3`} {
		_, err := Contents(ids(cat(sessionstore.UserText("x"), reply("", call("a", "f", args)))...))
		assert.ErrorIs(t, err, ErrArguments, args)
	}
}

// Contents that would open with the model's turn (a subagent transcript
// that starts with its reply) start with a user content, as the API
// wants before a function call turn; nothing else changes.
func TestContentsOpenWithUser(t *testing.T) {
	evs := cat(reply("Looking.", call("a", "glob", `{"p":"*.py"}`)), result("a", "x.py", false), sessionstore.AssistantText("done"))
	got, err := Contents(ids(evs...))
	require.NoError(t, err)
	assert.Equal(t, []*genai.Content{content("user", text(OpeningText)),
		content("model", text("Looking."), fcall("a", "glob", map[string]any{"p": "*.py"})),
		content("user", fresp("a", "glob", map[string]any{"output": "x.py"})), content("model", text("done"))}, got)
	assert.Empty(t, geminiRules(got))
	assert.NotEmpty(t, geminiRules(got[1:]), "the rules refuse a model turn first")
}
