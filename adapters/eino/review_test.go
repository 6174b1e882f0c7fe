package eino

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cloudwego/eino-ext/components/model/openai"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer/claude"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chatRules returns what the Chat Completions API refuses in a request's
// messages, or "" when it accepts them: an unknown role; a user message
// without content; a tool call without an id or name, of a type other
// than "function", or whose arguments are not JSON; a tool message that
// does not answer a call of the assistant message before its run of tool
// messages, or answers one twice; a call not answered before the next
// message that is not a tool message (calls at the end are pending).
func chatRules(body []byte) string {
	var req struct {
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return err.Error()
	}
	if len(req.Messages) == 0 {
		return "no messages"
	}
	open := map[string]bool{}
	for i, m := range req.Messages {
		if m.Role != "tool" && len(open) > 0 {
			return fmt.Sprintf("message %d (%s) before the results of %v", i, m.Role, open)
		}
		switch m.Role {
		case "system":
		case "user":
			if c := string(m.Content); c == "" || c == "null" || c == `""` || c == "[]" {
				return fmt.Sprintf("message %d: user message without content", i)
			}
		case "assistant":
			for _, c := range m.ToolCalls {
				switch {
				case c.ID == "" || c.Function.Name == "":
					return fmt.Sprintf("message %d: call without id or name", i)
				case c.Type != "function":
					return fmt.Sprintf("message %d: call %s of type %q", i, c.ID, c.Type)
				case !json.Valid([]byte(c.Function.Arguments)):
					return fmt.Sprintf("message %d: arguments of %s are not JSON", i, c.ID)
				}
				open[c.ID] = true
			}
			if len(m.ToolCalls) == 0 && (string(m.Content) == "" || string(m.Content) == "null") {
				return fmt.Sprintf("message %d: assistant message without content or calls", i)
			}
		case "tool":
			if !open[m.ToolCallID] {
				return fmt.Sprintf("message %d: result %s without its call", i, m.ToolCallID)
			}
			delete(open, m.ToolCallID)
		default:
			return fmt.Sprintf("message %d: role %q", i, m.Role)
		}
	}
	return ""
}

// strictChatServer plays Chat Completions and answers 400 with the rule a
// request breaks; it counts the requests it accepted.
func strictChatServer(t *testing.T, accepted *int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body json.RawMessage
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil || r.URL.Path != "/chat/completions" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		if p := chatRules(body); p != "" {
			http.Error(w, p, http.StatusBadRequest)
			return
		}
		*accepted++
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The validator refuses what it should.
func TestChatRulesRefuse(t *testing.T) {
	ok := `{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]}`
	require.Empty(t, chatRules([]byte(`{"messages":[`+ok+`,{"role":"tool","tool_call_id":"a","content":"r"}]}`)))
	for name, msgs := range map[string]string{
		"no type":    `{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f","arguments":"{}"}}]}`,
		"bad args":   `{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":""}}]}`,
		"unanswered": ok + `,{"role":"user","content":"y"}`,
		"orphan":     `{"role":"user","content":"x"},{"role":"tool","tool_call_id":"a","content":"r"}`,
		"twice":      ok + `,{"role":"tool","tool_call_id":"a","content":"r"},{"role":"tool","tool_call_id":"a","content":"r"}`,
		"empty user": `{"role":"user","content":""}`,
	} {
		assert.NotEmpty(t, chatRules([]byte(`{"messages":[`+msgs+`]}`)), name)
	}
}

func strictModel(t *testing.T, srv *httptest.Server) *openai.ChatModel {
	cm, err := openai.NewChatModel(context.Background(), &openai.ChatModelConfig{BaseURL: srv.URL, APIKey: "test", Model: "gpt-4o-mini"})
	require.NoError(t, err)
	return cm
}

// Probes of single conversations, each through eino-ext's OpenAI model
// to the strict server: parallel calls answered out of order, error
// results, empty and non-object arguments, unicode, a very long output,
// a compaction, a branch summary, a reasoning-only turn.
func TestMessagesProbes(t *testing.T) {
	long := strings.Repeat("løng 出力 🙂 ", 200_000)
	summary := sessionstore.Summary{Text: "We fixed the parser ✓.", Decisions: []string{"keep v2"}}
	for name, evs := range map[string][]sessionstore.Event{
		"parallel, out of order": cat(sessionstore.UserText("x"), reply("", call("a", "f", `{}`), call("b", "g", `{"q":1}`), call("c", "h", "")),
			result("c", "C", false), result("a", "A", true), result("b", "B", false), sessionstore.AssistantText("done")),
		"non-object arguments": cat(sessionstore.UserText("x"), reply("", call("a", "f", `[1,2]`), call("b", "g", `"s"`), call("c", "h", `null`)),
			result("a", "A", false), result("b", "B", false), result("c", "C", false)),
		"unicode and long output": cat(sessionstore.UserText("ünïcödé ✓ 日本"), reply("読む", call("a", "read", `{"p":"ファイル"}`)), result("a", long, false)),
		"compaction": cat(sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, sessionstore.CompactionRecord{Summary: summary}),
			reply("", call("a", "f", `{}`)), result("a", "A", false), sessionstore.UserText("go on")),
		"branch summary": cat(sessionstore.UserText("x"), reply("", call("a", "f", `{}`)),
			sessionstore.NewEvent(sessionstore.KindBranchSummary, sessionstore.RoleNone, sessionstore.BranchSummaryRecord{Summary: summary}), sessionstore.UserText("y")),
		"reasoning only": cat(sessionstore.UserText("x"), sessionstore.AssistantMessage(sessionstore.Message{Reasoning: "hmm"}), sessionstore.UserText("y")),
	} {
		accepted := 0
		cm := strictModel(t, strictChatServer(t, &accepted))
		msgs, err := Messages(ids(evs...))
		require.NoError(t, err, name)
		_, err = cm.Generate(context.Background(), msgs)
		assert.NoError(t, err, name)
		assert.Equal(t, 1, accepted, name)
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
// messages eino-ext's OpenAI model sends as a request the Chat
// Completions rules accept.
func TestImportedClaudeSessions(t *testing.T) {
	sessions := importClaude(t)
	accepted := 0
	cm := strictModel(t, strictChatServer(t, &accepted))
	sent, calls := 0, 0
	for name, evs := range sessions {
		msgs, err := Messages(evs)
		require.NoError(t, err, name)
		if len(msgs) == 0 {
			continue
		}
		for _, m := range msgs {
			calls += len(m.ToolCalls)
		}
		sent++
		_, err = cm.Generate(context.Background(), msgs)
		assert.NoError(t, err, name)
	}
	t.Logf("%d sessions, %d sent, %d accepted, %d tool calls", len(sessions), sent, accepted, calls)
	assert.Equal(t, sent, accepted)
	assert.Positive(t, calls)
}
