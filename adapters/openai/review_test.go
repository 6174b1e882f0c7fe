package openaiadapter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/sessionstore/sessionstore/importer/claude"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// claudeData returns the directory of real Claude Code transcripts:
// $SESSIONSTORE_SHARED_DATA/claude-code, or shared/data/claude-code in a
// directory above the package's. Without it the test skips, and fails
// under CI.
func claudeData(t *testing.T) string {
	var dirs []string
	if d := os.Getenv("SESSIONSTORE_SHARED_DATA"); d != "" {
		dirs = append(dirs, filepath.Join(d, "claude-code"))
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	for d := wd; ; d = filepath.Dir(d) {
		dirs = append(dirs, filepath.Join(d, "shared", "data", "claude-code"))
		if filepath.Dir(d) == d {
			break
		}
	}
	dirs = append(dirs, "/work/shared/data/claude-code")
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "0" && ci != "false" {
		t.Fatal("no shared/data/claude-code above the package (or $SESSIONSTORE_SHARED_DATA)")
	}
	t.Skip("no shared/data/claude-code")
	return ""
}

// validateChat returns the first way msgs break the Chat Completions
// rules, or nil: each assistant message's tool_calls are answered, each
// id once, by the tool messages right after it, before any other message;
// a tool message answers a call of that assistant message; a user message
// has content.
func validateChat(msgs []map[string]any) error {
	open := map[string]bool{}
	for i, m := range msgs {
		if m["role"] == "tool" {
			id, _ := m["tool_call_id"].(string)
			if !open[id] {
				return fmt.Errorf("message %d: tool message for %q, not an open call", i, id)
			}
			delete(open, id)
			continue
		}
		if len(open) > 0 {
			return fmt.Errorf("message %d: %d calls of the assistant message before unanswered", i, len(open))
		}
		switch m["role"] {
		case "assistant":
			calls, _ := m["tool_calls"].([]any)
			if len(calls) == 0 && m["content"] == nil {
				return fmt.Errorf("message %d: assistant message with no content and no calls", i)
			}
			for _, c := range calls {
				id, _ := c.(map[string]any)["id"].(string)
				if open[id] {
					return fmt.Errorf("message %d: call %q twice", i, id)
				}
				open[id] = true
			}
		case "user":
			if s, _ := m["content"].(string); s == "" {
				return fmt.Errorf("message %d: empty user message", i)
			}
		default:
			return fmt.Errorf("message %d: role %v", i, m["role"])
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("the last assistant message's calls unanswered")
	}
	return nil
}

// validateResponses returns the first way items break the Responses
// API's pairing, or nil: every function_call_output follows the
// function_call of its call_id, and every function_call has one output.
func validateResponses(items []map[string]any) error {
	calls, outputs := map[string]bool{}, map[string]bool{}
	for i, it := range items {
		id, _ := it["call_id"].(string)
		switch it["type"] {
		case "function_call":
			if calls[id] {
				return fmt.Errorf("item %d: call_id %q twice", i, id)
			}
			calls[id] = true
		case "function_call_output":
			if !calls[id] || outputs[id] {
				return fmt.Errorf("item %d: output for %q without its call before it, or twice", i, id)
			}
			outputs[id] = true
		}
	}
	for id := range calls {
		if !outputs[id] {
			return fmt.Errorf("call %q has no output", id)
		}
	}
	return nil
}

// The validators refuse what the APIs refuse.
func TestReviewValidatorsRefuse(t *testing.T) {
	asst := func(ids ...string) string {
		s := `{"role":"assistant","tool_calls":[`
		for i, id := range ids {
			if i > 0 {
				s += ","
			}
			s += `{"id":"` + id + `","type":"function","function":{"name":"n","arguments":"{}"}}`
		}
		return s + `]}`
	}
	tool := func(id string) string { return `{"role":"tool","tool_call_id":"` + id + `","content":"x"}` }
	user := `{"role":"user","content":"q"}`
	chat := func(ms ...string) []map[string]any {
		b := "["
		for i, m := range ms {
			if i > 0 {
				b += ","
			}
			b += m
		}
		return decode(t, []byte(b+"]"))
	}
	require.NoError(t, validateChat(chat(user, asst("a", "b"), tool("b"), tool("a"), user)))
	for name, msgs := range map[string][]map[string]any{
		"unanswered":        chat(user, asst("a", "b"), tool("a"), user),
		"unanswered at end": chat(user, asst("a")),
		"late tool message": chat(user, asst("a"), user, tool("a")),
		"orphan":            chat(user, tool("a")),
		"answered twice":    chat(user, asst("a"), tool("a"), tool("a")),
		"empty user":        chat(`{"role":"user","content":""}`),
	} {
		assert.Error(t, validateChat(msgs), name)
	}
	fc := func(id string) string {
		return `{"type":"function_call","call_id":"` + id + `","name":"n","arguments":"{}"}`
	}
	out := func(id string) string { return `{"type":"function_call_output","call_id":"` + id + `","output":"x"}` }
	require.NoError(t, validateResponses(chat(fc("a"), fc("b"), out("b"), out("a"))))
	for name, items := range map[string][]map[string]any{
		"no output":      chat(fc("a")),
		"output first":   chat(out("a"), fc("a")),
		"output twice":   chat(fc("a"), out("a"), out("a")),
		"call_id twice":  chat(fc("a"), out("a"), fc("a"), out("a")),
		"no call at all": chat(out("a")),
	} {
		assert.Error(t, validateResponses(items), name)
	}
}

// Every session of the real Claude Code transcripts, imported and loaded,
// makes Chat Completions and Responses requests the APIs take once the
// pending calls are answered, with every tool result Load holds.
func TestReviewClaudeCodeSessions(t *testing.T) {
	dir := claudeData(t)
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	rep, err := claude.Import(ctx, st, []string{dir}, nil)
	require.NoError(t, err)
	require.Positive(t, rep.Sessions)
	metas, err := st.List(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, metas)
	withResults := 0
	for _, m := range metas {
		evs, err := st.Load(ctx, m.ID)
		require.NoError(t, err)
		c, err := convo.Build(evs, nil)
		require.NoError(t, err)
		for _, p := range c.Pending {
			evs = append(evs, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: p.CallID, Output: "done"}))
		}
		results := 0
		for _, ev := range evs {
			if ev.Kind == sessionstore.KindToolResult {
				results++
			}
		}
		if results > 0 {
			withResults++
		}
		name := fmt.Sprintf("session %s (%s)", m.ID, m.Labels["source_path"])
		msgs, err := ChatMessages(evs)
		require.NoError(t, err)
		got := decode(t, wire(t, msgs))
		assert.NoError(t, validateChat(got), name)
		tools := 0
		for _, m := range got {
			if m["role"] == "tool" {
				tools++
			}
		}
		// Claude Code's context holds each result's call: none is dropped.
		assert.Equal(t, results+c.Synthesized, tools, name)

		items, err := ResponsesInput(evs)
		require.NoError(t, err)
		assert.NoError(t, validateResponses(decode(t, wire(t, items))), name)
	}
	assert.Positive(t, withResults)
}
