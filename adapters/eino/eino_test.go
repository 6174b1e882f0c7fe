package eino

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/cloudwego/eino/schema"
	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ids gives each event an id, as the store would.
func ids(evs ...sessionstore.Event) []sessionstore.Event {
	for i := range evs {
		evs[i].ID = uuid.Must(uuid.NewV7())
	}
	return evs
}

func call(id, name, args string) sessionstore.ToolCall {
	c := sessionstore.ToolCall{CallID: id, Name: name}
	if args != "" {
		c.Arguments = json.RawMessage(args)
	}
	return c
}

func result(id, out string, isErr bool) sessionstore.Event {
	return sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: id, Output: out, IsError: isErr})
}

func reply(text string, calls ...sessionstore.ToolCall) []sessionstore.Event {
	return convo.Reply{Text: text, ToolCalls: calls}.Events()
}

func cat(parts ...any) []sessionstore.Event {
	var out []sessionstore.Event
	for _, p := range parts {
		switch p := p.(type) {
		case sessionstore.Event:
			out = append(out, p)
		case []sessionstore.Event:
			out = append(out, p...)
		}
	}
	return out
}

func user(s string) *schema.Message { return &schema.Message{Role: schema.User, Content: s} }

func asst(text string, calls ...schema.ToolCall) *schema.Message {
	return &schema.Message{Role: schema.Assistant, Content: text, ToolCalls: calls}
}

func ecall(id, name, args string) schema.ToolCall {
	return schema.ToolCall{ID: id, Type: "function", Function: schema.FunctionCall{Name: name, Arguments: args}}
}

func tool(id, name, content string) *schema.Message {
	return &schema.Message{Role: schema.Tool, Content: content, ToolCallID: id, ToolName: name}
}

func TestMessages(t *testing.T) {
	summary := sessionstore.Summary{Text: "We fixed the parser.", Goals: []string{"ship"}}
	tests := []struct {
		name   string
		events []sessionstore.Event
		want   []*schema.Message
	}{
		{
			name:   "plain turns, reasoning kept",
			events: cat(sessionstore.UserText("hi"), sessionstore.AssistantMessage(sessionstore.Message{Content: "hello", Reasoning: "greet"})),
			want:   []*schema.Message{user("hi"), {Role: schema.Assistant, Content: "hello", ReasoningContent: "greet"}},
		},
		{
			name: "parallel calls, results in order, then the answer",
			events: cat(sessionstore.UserText("read both"), reply("reading", call("a", "read", `{"p":"a"}`), call("b", "grep", `{"q":"x"}`)),
				result("a", "A", false), result("b", "B", false), sessionstore.AssistantText("done")),
			want: []*schema.Message{user("read both"),
				asst("reading", ecall("a", "read", `{"p":"a"}`), ecall("b", "grep", `{"q":"x"}`)),
				tool("a", "read", "A"), tool("b", "grep", "B"), asst("done")},
		},
		{
			name:   "an error result is marked",
			events: cat(sessionstore.UserText("x"), reply("", call("a", "run", `{}`)), result("a", "exit 1", true)),
			want:   []*schema.Message{user("x"), asst("", ecall("a", "run", `{}`)), tool("a", "run", "error: exit 1")},
		},
		{
			name:   "an abandoned call gets a synthetic error result before the user speaks",
			events: cat(sessionstore.UserText("x"), reply("", call("a", "run", "")), sessionstore.UserText("never mind")),
			want: []*schema.Message{user("x"), asst("", ecall("a", "run", "{}")),
				tool("a", "run", ErrorPrefix+convo.MissingResult), user("never mind")},
		},
		{
			name: "a branch summary is a user message",
			events: cat(sessionstore.NewEvent(sessionstore.KindBranchSummary, sessionstore.RoleNone, sessionstore.BranchSummaryRecord{Summary: summary}),
				sessionstore.UserText("next")),
			want: []*schema.Message{
				user("The user left another path of this conversation; this is a summary of it.\n\n" + convo.RenderSummary(summary)),
				user("next")},
		},
		{
			name: "a compaction summary is a user message",
			events: cat(sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, sessionstore.CompactionRecord{Summary: summary}),
				sessionstore.UserText("next")),
			want: []*schema.Message{
				user("The conversation before this point was compacted; this is its summary.\n\n" + convo.RenderSummary(summary)),
				user("next")},
		},
		{
			name:   "empty messages are left out",
			events: cat(sessionstore.UserText(""), sessionstore.AssistantText(""), sessionstore.UserText("x")),
			want:   []*schema.Message{user("x")},
		},
		{
			name:   "an orphan result is left out",
			events: cat(sessionstore.UserText("x"), result("zz", "lost", false)),
			want:   []*schema.Message{user("x")},
		},
		{
			name: "nothing",
			want: []*schema.Message{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Messages(ids(tt.events...))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)

			// Eino's own JSON keeps every field.
			b, err := json.Marshal(got)
			require.NoError(t, err)
			back := []*schema.Message{}
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, got, back)
		})
	}
}

func TestMessagesErrors(t *testing.T) {
	unresolved := sessionstore.Event{ID: uuid.Must(uuid.NewV7()), Kind: sessionstore.KindToolResult, Digest: "sha256:00", Size: 10}
	_, err := Messages([]sessionstore.Event{unresolved})
	assert.ErrorIs(t, err, convo.ErrUnresolved)

	bad := sessionstore.Event{ID: uuid.Must(uuid.NewV7()), Kind: sessionstore.KindToolCall, Role: sessionstore.RoleAssistant, Record: json.RawMessage(`"x"`)}
	_, err = Messages([]sessionstore.Event{bad})
	assert.ErrorContains(t, err, bad.ID.String())
}

// A reply read by Reply, appended, results added and built again gives
// the same turn back as request messages.
func TestReplyRoundTrip(t *testing.T) {
	out := &schema.Message{
		Role:             schema.Assistant,
		Content:          "Reading both.",
		ReasoningContent: "two files",
		ToolCalls:        []schema.ToolCall{ecall("c1", "read", `{"path":"a.go"}`), ecall("c2", "read", `{"path":"b.go"}`)},
		ResponseMeta: &schema.ResponseMeta{FinishReason: "tool_calls", Usage: &schema.TokenUsage{
			PromptTokens: 100, CompletionTokens: 20, TotalTokens: 120, PromptTokenDetails: schema.PromptTokenDetails{CachedTokens: 64}}},
	}
	// Through Eino's JSON first, as a message a model component logged.
	b, err := json.Marshal(out)
	require.NoError(t, err)
	var decoded schema.Message
	require.NoError(t, json.Unmarshal(b, &decoded))

	r, err := Reply(&decoded)
	require.NoError(t, err)
	assert.Equal(t, &sessionstore.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 64}, r.Usage)

	evs := cat(sessionstore.UserText("read"), r.Events(), result("c1", "A", false), result("c2", "B", true))
	msgs, err := Messages(ids(evs...))
	require.NoError(t, err)
	want := []*schema.Message{user("read"),
		{Role: schema.Assistant, Content: "Reading both.", ReasoningContent: "two files", ToolCalls: out.ToolCalls},
		tool("c1", "read", "A"), tool("c2", "read", "error: B")}
	assert.Equal(t, want, msgs)
}

func TestReply(t *testing.T) {
	tests := []struct {
		name string
		msg  *schema.Message
		want convo.Reply
		err  error
	}{
		{name: "nil", msg: nil, err: ErrNotAssistant},
		{name: "a user message", msg: user("x"), err: ErrNotAssistant},
		{name: "bad arguments", msg: asst("", ecall("c", "f", `{"a":`)), err: ErrArguments},
		{name: "empty content", msg: asst(""), want: convo.Reply{}},
		{name: "no role is an assistant", msg: &schema.Message{Content: "x"}, want: convo.Reply{Text: "x"}},
		{
			name: "multi-content text, model from Extra",
			msg: &schema.Message{Role: schema.Assistant, Extra: map[string]any{"model": "m1"}, AssistantGenMultiContent: []schema.MessageOutputPart{
				{Type: schema.ChatMessagePartTypeText, Text: "one"}, {Type: schema.ChatMessagePartTypeImageURL}, {Type: schema.ChatMessagePartTypeText, Text: "two"}}},
			want: convo.Reply{Text: "one\n\ntwo", Model: "m1", ProviderState: []sessionstore.ProviderState{{Provider: "eino", Type: "extra", Data: []byte(`{"model":"m1"}`)}}},
		},
		{
			name: "zero usage is none, empty arguments are none",
			msg:  &schema.Message{Role: schema.Assistant, ToolCalls: []schema.ToolCall{ecall("c", "f", "")}, ResponseMeta: &schema.ResponseMeta{Usage: &schema.TokenUsage{}}},
			want: convo.Reply{ToolCalls: []sessionstore.ToolCall{{CallID: "c", Name: "f"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reply(tt.msg)
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestReplyDerivedCallIDs(t *testing.T) {
	msg := asst("", ecall("", "read", `{"p":1}`), ecall("", "read", `{"p":1}`), ecall("", "read", `{"p":2}`), ecall("given", "read", `{}`))
	a, err := Reply(msg)
	require.NoError(t, err)
	b, err := Reply(msg)
	require.NoError(t, err)
	assert.Equal(t, a, b, "the same message gives the same ids")
	seen := map[string]bool{}
	for _, c := range a.ToolCalls[:3] {
		assert.Regexp(t, `^`+CallIDPrefix+`[0-9a-f]{16}$`, c.CallID)
		assert.False(t, seen[c.CallID], "ids are distinct: %s", c.CallID)
		seen[c.CallID] = true
	}
	assert.Equal(t, "given", a.ToolCalls[3].CallID)
}

// FuzzMessages feeds records of every kind, valid or not: Messages either
// fails or returns messages whose every tool message answers a call of
// the assistant turn before it, and no empty message.
func FuzzMessages(f *testing.F) {
	f.Add([]byte(`{"content":"hi"}`), []byte(`{"content":"","tool_calls":[{"call_id":"a","name":"f"}]}`), []byte(`{"call_id":"a","output":"x"}`), uint8(0))
	f.Add([]byte(`{"call_id":"b","name":"g","arguments":{"x":1}}`), []byte(`{"summary":{"text":"s"}}`), []byte(`{"call_id":"b","output":"y","is_error":true}`), uint8(7))
	f.Add([]byte(`[1]`), []byte(`null`), []byte(`{"call_id":""}`), uint8(3))
	kinds := []struct {
		kind sessionstore.Kind
		role sessionstore.Role
	}{
		{sessionstore.KindMessage, sessionstore.RoleUser}, {sessionstore.KindMessage, sessionstore.RoleAssistant},
		{sessionstore.KindToolCall, sessionstore.RoleAssistant}, {sessionstore.KindToolResult, sessionstore.RoleTool},
		{sessionstore.KindCompaction, sessionstore.RoleNone}, {sessionstore.KindBranchSummary, sessionstore.RoleNone},
	}
	f.Fuzz(func(t *testing.T, a, b, c []byte, sel uint8) {
		var evs []sessionstore.Event
		for i, rec := range [][]byte{a, b, c, a, c} {
			k := kinds[(int(sel)+i*int(sel>>4+1))%len(kinds)]
			if !json.Valid(rec) {
				rec = []byte(fmt.Sprintf("%q", rec))
			}
			evs = append(evs, sessionstore.Event{Kind: k.kind, Role: k.role, Record: json.RawMessage(rec)})
		}
		msgs, err := Messages(ids(evs...))
		if err != nil {
			return
		}
		open := map[string]bool{}
		for _, m := range msgs {
			switch m.Role {
			case schema.Assistant:
				require.True(t, m.Content != "" || len(m.ToolCalls) > 0, "empty assistant message")
				clear(open)
				for _, tc := range m.ToolCalls {
					open[tc.ID] = true
					require.True(t, json.Valid([]byte(tc.Function.Arguments)))
				}
			case schema.Tool:
				require.True(t, open[m.ToolCallID], "result %q without its call", m.ToolCallID)
				delete(open, m.ToolCallID)
			default:
				require.NotEmpty(t, m.Content)
				clear(open)
			}
		}
	})
}

func BenchmarkMessages(b *testing.B) {
	var evs []sessionstore.Event
	for i := range 100 {
		id := fmt.Sprintf("c%d", i)
		evs = append(evs, sessionstore.UserText("step"))
		evs = append(evs, reply("working on it", call(id, "read", `{"path":"a.go"}`))...)
		evs = append(evs, result(id, "package main\n\nfunc main() {}\n", false))
	}
	evs = ids(evs...)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		msgs, err := Messages(evs)
		if err != nil {
			b.Fatal(err)
		}
		n = len(msgs)
	}
	b.ReportMetric(float64(len(evs)), "events/op")
	b.ReportMetric(float64(n), "messages/op")
}
