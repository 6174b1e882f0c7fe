package anthropicadapter

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
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

var idPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// validate returns the first way msgs break the Messages API's rules, or
// nil: roles alternate, no message or
// text block is empty, tool_use ids are unique in the request and of
// [a-zA-Z0-9_-]+, every
// tool_use is answered in the next message, which starts with its
// tool_result blocks, every tool_result answers a tool_use of the
// message before, and a thinking block has its signature.
func validate(msgs []map[string]any) error {
	seen := map[string]bool{}
	prevUses := map[string]bool{}
	for i, m := range msgs {
		role := m["role"]
		if i > 0 && msgs[i-1]["role"] == role {
			return fmt.Errorf("message %d: same role as the one before", i)
		}
		bs, _ := m["content"].([]any)
		if len(bs) == 0 {
			return fmt.Errorf("message %d is empty", i)
		}
		uses, results, other := map[string]bool{}, map[string]bool{}, false
		for j, b := range bs {
			b := b.(map[string]any)
			switch b["type"] {
			case "text":
				if s, _ := b["text"].(string); strings.TrimSpace(s) == "" {
					return fmt.Errorf("message %d block %d: empty text", i, j)
				}
				other = true
			case "thinking":
				if role != "assistant" || b["signature"] == "" || b["signature"] == nil {
					return fmt.Errorf("message %d block %d: thinking without a signature", i, j)
				}
				other = true
			case "tool_use":
				id, _ := b["id"].(string)
				if role != "assistant" || !idPattern.MatchString(id) || seen[id] {
					return fmt.Errorf("message %d block %d: tool_use %q repeated, not of [a-zA-Z0-9_-]+ or not the assistant's", i, j, id)
				}
				seen[id] = true
				uses[id] = true
			case "tool_result":
				id, _ := b["tool_use_id"].(string)
				switch {
				case role != "user" || other:
					return fmt.Errorf("message %d block %d: tool_result %s after another block", i, j, id)
				case !prevUses[id] || results[id]:
					return fmt.Errorf("message %d block %d: tool_result %s answers no tool_use of the message before", i, j, id)
				}
				results[id] = true
			default:
				other = true
			}
		}
		for id := range prevUses {
			if !results[id] {
				return fmt.Errorf("message %d: tool_use %s of the message before unanswered", i, id)
			}
		}
		prevUses = uses
	}
	if len(prevUses) > 0 {
		return fmt.Errorf("the last message's tool_use unanswered")
	}
	return nil
}

// Every session of the real Claude Code transcripts, imported and loaded,
// makes a request the API takes once its pending calls are answered, and
// sends every tool result Load holds whose call Load holds too.
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
	var dropped, synthesized, checked int
	for _, m := range metas {
		evs, err := st.Load(ctx, m.ID)
		require.NoError(t, err)
		c, err := convo.Build(evs, nil)
		require.NoError(t, err)
		for _, p := range c.Pending {
			evs = append(evs, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: p.CallID, Output: "done"}))
		}
		msgs, err := Messages(evs)
		require.NoError(t, err)
		if len(msgs) == 0 {
			continue
		}
		checked++
		got := decode(t, wire(t, msgs))
		if err := validate(got); err != nil {
			t.Errorf("session %s (%s): %v", m.ID, m.Labels["source_path"], err)
		}
		results, sent := 0, 0
		for _, ev := range evs {
			if ev.Kind == sessionstore.KindToolResult {
				results++
			}
		}
		for _, m := range got {
			for _, b := range m["content"].([]any) {
				if b.(map[string]any)["type"] == "tool_result" {
					sent++
				}
			}
		}
		// Claude Code's context holds each result's call: none is dropped.
		assert.Equal(t, results+c.Synthesized, sent, "session %s", m.ID)
		dropped += c.Dropped
		synthesized += c.Synthesized
	}
	assert.Positive(t, checked)
	t.Logf("%d sessions checked, %d results dropped, %d synthesized", checked, dropped, synthesized)
}

// validate refuses what the API refuses: each case breaks one rule.
func TestReviewValidateRefuses(t *testing.T) {
	user := func(blocks ...string) string { return `{"role":"user","content":[` + strings.Join(blocks, ",") + `]}` }
	asst := func(blocks ...string) string {
		return `{"role":"assistant","content":[` + strings.Join(blocks, ",") + `]}`
	}
	text := `{"type":"text","text":"t"}`
	use := func(id string) string { return `{"type":"tool_use","id":"` + id + `","name":"n","input":{}}` }
	res := func(id string) string { return `{"type":"tool_result","tool_use_id":"` + id + `"}` }
	valid := []string{user(text), asst(`{"type":"thinking","thinking":"x","signature":"s"}`, use("a"), use("b")), user(res("b"), res("a"), text), asst(text)}
	require.NoError(t, validate(decode(t, []byte("["+strings.Join(valid, ",")+"]"))))
	for name, msgs := range map[string][]string{
		"same role":          {user(text), user(text)},
		"empty message":      {user()},
		"empty text":         {user(`{"type":"text","text":""}`)},
		"unsigned thinking":  {user(text), asst(`{"type":"thinking","thinking":"x"}`, text)},
		"repeated tool_use":  {user(text), asst(use("a")), user(res("a")), asst(use("a")), user(res("a"))},
		"bad tool_use id":    {user(text), asst(use("a.b")), user(res("a.b"))},
		"unanswered":         {user(text), asst(use("a"), use("b")), user(res("a"))},
		"unanswered at end":  {user(text), asst(use("a"))},
		"result after text":  {user(text), asst(use("a")), user(text, res("a"))},
		"result of no call":  {user(text), asst(text), user(res("a"))},
		"result answered 2x": {user(text), asst(use("a")), user(res("a"), res("a"))},
	} {
		assert.Error(t, validate(decode(t, []byte("["+strings.Join(msgs, ",")+"]"))), name)
	}
}

// The orders of the convo review, through Messages, keep to the API's
// rules: a call event recorded after another call's result made a second
// tool_use with the same id, a message repeating an id sent it twice, and
// an id a later turn used again was sent again.
func TestReviewMessagesOrders(t *testing.T) {
	a, b := tc("a", "read", `{"p":1}`), tc("b", "read", `{"p":2}`)
	announce := func(calls ...sessionstore.ToolCall) sessionstore.Event {
		return sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: calls})
	}
	for name, evs := range map[string][]sessionstore.Event{
		"results reordered":                 {sessionstore.UserText("u"), announce(a, b), result("b", "B", false), result("a", "A", false)},
		"call event after a result":         {sessionstore.UserText("u"), announce(a, b), sessionstore.ToolCallEvent(a), result("a", "A", false), sessionstore.ToolCallEvent(b), result("b", "B", false)},
		"call event reusing an answered id": {sessionstore.UserText("u"), sessionstore.ToolCallEvent(a), result("a", "A", false), sessionstore.ToolCallEvent(a), result("a", "A2", false)},
		"id repeated in a message":          {sessionstore.UserText("u"), announce(a, a), result("a", "A", false)},
		"late result":                       {sessionstore.UserText("u"), announce(a), sessionstore.UserText("stop"), result("a", "A", false)},
		"id reused by the next turn":        {sessionstore.UserText("u"), announce(a), result("a", "A", false), announce(a), result("a", "A2", false)},
		"ids the API would refuse": {sessionstore.UserText("u"), announce(tc("functions.read:0", "read", `{}`), tc("", "ls", `{}`)),
			result("functions.read:0", "A", false), result("", "B", false), announce(tc("functions.read:0", "read", `{}`)), result("functions.read:0", "C", false)},
	} {
		s := newSession(t, nil)
		s.append(evs...)
		msgs, err := Messages(s.load())
		require.NoError(t, err, name)
		got := decode(t, wire(t, msgs))
		assert.NoError(t, validate(got), name)
		if name == "ids the API would refuse" {
			var uses, results []string
			for _, m := range got {
				for _, b := range m["content"].([]any) {
					b := b.(map[string]any)
					switch b["type"] {
					case "tool_use":
						uses = append(uses, b["id"].(string))
					case "tool_result":
						results = append(results, b["tool_use_id"].(string)+"="+b["content"].([]any)[0].(map[string]any)["text"].(string))
					}
				}
			}
			assert.Equal(t, []string{"functions_read_0", "toolu", "functions_read_0_2"}, uses)
			assert.Equal(t, []string{"functions_read_0=A", "toolu=B", "functions_read_0_2=C"}, results)
		}
	}
}

// Text that is only white space (a transcript's "\n\n" block before a
// tool_use, say) is refused by the API in a text block: it is left out.
func TestReviewWhitespaceText(t *testing.T) {
	s := newSession(t, nil)
	s.append(sessionstore.UserText("Read a.go."),
		sessionstore.AssistantMessage(sessionstore.Message{Content: "\n\n", ToolCalls: []sessionstore.ToolCall{tc("toolu_1", "read", `{}`)}}),
		result("toolu_1", "\n", false),
		sessionstore.AssistantText(" "),
		sessionstore.UserText(" \t"),
		sessionstore.AssistantText("Done."))
	msgs, err := Messages(s.load())
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	require.NoError(t, validate(got))
	assert.Len(t, got, 4)
}
