package langchaingo

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
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

func human(s string) llms.MessageContent { return llms.TextParts(llms.ChatMessageTypeHuman, s) }

func ai(text string, calls ...llms.ToolCall) llms.MessageContent {
	m := llms.MessageContent{Role: llms.ChatMessageTypeAI}
	if text != "" {
		m.Parts = append(m.Parts, llms.TextContent{Text: text})
	}
	for _, c := range calls {
		m.Parts = append(m.Parts, c)
	}
	return m
}

func lcCall(id, name, args string) llms.ToolCall {
	return llms.ToolCall{ID: id, Type: "function", FunctionCall: &llms.FunctionCall{Name: name, Arguments: args}}
}

func tool(id, name, content string) llms.MessageContent {
	return llms.MessageContent{Role: llms.ChatMessageTypeTool, Parts: []llms.ContentPart{llms.ToolCallResponse{ToolCallID: id, Name: name, Content: content}}}
}

func TestMessages(t *testing.T) {
	summary := sessionstore.Summary{Text: "We fixed the parser.", Facts: []string{"v2"}}
	tests := []struct {
		name   string
		events []sessionstore.Event
		want   []llms.MessageContent
	}{
		{
			name:   "plain turns",
			events: cat(sessionstore.UserText("hi"), sessionstore.AssistantText("hello")),
			want:   []llms.MessageContent{human("hi"), ai("hello")},
		},
		{
			name: "parallel calls, results in order, then the answer",
			events: cat(sessionstore.UserText("read both"), reply("reading", call("a", "read", `{"p":"a"}`), call("b", "grep", `{"q":"x"}`)),
				result("a", "A", false), result("b", "B", false), sessionstore.AssistantText("done")),
			want: []llms.MessageContent{human("read both"),
				ai("reading", lcCall("a", "read", `{"p":"a"}`), lcCall("b", "grep", `{"q":"x"}`)),
				tool("a", "read", "A"), tool("b", "grep", "B"), ai("done")},
		},
		{
			name:   "an error result is marked",
			events: cat(sessionstore.UserText("x"), reply("", call("a", "run", `{}`)), result("a", "exit 1", true)),
			want:   []llms.MessageContent{human("x"), ai("", lcCall("a", "run", `{}`)), tool("a", "run", "error: exit 1")},
		},
		{
			name:   "an abandoned call gets a synthetic error result before the user speaks",
			events: cat(sessionstore.UserText("x"), reply("", call("a", "run", "")), sessionstore.UserText("never mind")),
			want: []llms.MessageContent{human("x"), ai("", lcCall("a", "run", "{}")),
				tool("a", "run", ErrorPrefix+convo.MissingResult), human("never mind")},
		},
		{
			name: "a compaction summary is a human message",
			events: cat(sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, sessionstore.CompactionRecord{Summary: summary}),
				sessionstore.UserText("next")),
			want: []llms.MessageContent{
				human("The conversation before this point was compacted; this is its summary.\n\n" + convo.RenderSummary(summary)),
				human("next")},
		},
		{
			name:   "empty messages are left out",
			events: cat(sessionstore.UserText(""), sessionstore.AssistantText(""), sessionstore.UserText("x")),
			want:   []llms.MessageContent{human("x")},
		},
		{
			name:   "an orphan result is left out",
			events: cat(sessionstore.UserText("x"), result("zz", "lost", false)),
			want:   []llms.MessageContent{human("x")},
		},
		{
			name: "nothing",
			want: []llms.MessageContent{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Messages(ids(tt.events...))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)

			// LangChainGo's own JSON keeps every part.
			b, err := json.Marshal(got)
			require.NoError(t, err)
			var back []llms.MessageContent
			require.NoError(t, json.Unmarshal(b, &back))
			if len(got) == 0 {
				assert.Empty(t, back)
			} else {
				assert.Equal(t, got, back)
			}
		})
	}
}

func TestMessagesErrors(t *testing.T) {
	unresolved := sessionstore.Event{ID: uuid.Must(uuid.NewV7()), Kind: sessionstore.KindToolResult, Digest: "sha256:00", Size: 10}
	_, err := Messages([]sessionstore.Event{unresolved})
	assert.ErrorIs(t, err, convo.ErrUnresolved)

	bad := sessionstore.Event{ID: uuid.Must(uuid.NewV7()), Kind: sessionstore.KindMessage, Role: sessionstore.RoleUser, Record: json.RawMessage(`[1]`)}
	_, err = Messages([]sessionstore.Event{bad})
	assert.ErrorContains(t, err, bad.ID.String())
}

// A response read by Reply, appended, results added and built again gives
// the same turn back as request messages.
func TestReplyRoundTrip(t *testing.T) {
	resp := &llms.ContentResponse{Choices: []*llms.ContentChoice{{
		Content:          "Reading both.",
		ReasoningContent: "two files",
		ToolCalls:        []llms.ToolCall{lcCall("c1", "read", `{"path":"a.go"}`), lcCall("c2", "read", `{"path":"b.go"}`)},
		GenerationInfo:   map[string]any{"PromptTokens": 100, "CompletionTokens": 20, "PromptCachedTokens": 64},
	}}}
	r, err := Reply(resp)
	require.NoError(t, err)
	assert.Equal(t, "two files", r.Reasoning)
	assert.Equal(t, &sessionstore.Usage{InputTokens: 100, OutputTokens: 20, CacheReadTokens: 64}, r.Usage)

	evs := cat(sessionstore.UserText("read"), r.Events(), result("c1", "A", false), result("c2", "B", true))
	msgs, err := Messages(ids(evs...))
	require.NoError(t, err)
	want := []llms.MessageContent{human("read"), ai("Reading both.", resp.Choices[0].ToolCalls...), tool("c1", "read", "A"), tool("c2", "read", "error: B")}
	assert.Equal(t, want, msgs)

	// The stored message keeps what the request does not carry.
	m, err := evs[1].Message()
	require.NoError(t, err)
	assert.Equal(t, "two files", m.Reasoning)
	assert.Equal(t, int64(100), m.Usage.InputTokens)
}

func TestReply(t *testing.T) {
	tests := []struct {
		name string
		resp *llms.ContentResponse
		want convo.Reply
		err  error
	}{
		{name: "nil", resp: nil, err: ErrNoChoice},
		{name: "no choice", resp: &llms.ContentResponse{}, err: ErrNoChoice},
		{name: "nil choice", resp: &llms.ContentResponse{Choices: []*llms.ContentChoice{nil}}, err: ErrNoChoice},
		{name: "bad arguments", resp: &llms.ContentResponse{Choices: []*llms.ContentChoice{{ToolCalls: []llms.ToolCall{lcCall("c", "f", `{"a":`)}}}}, err: ErrArguments},
		{name: "empty content", resp: &llms.ContentResponse{Choices: []*llms.ContentChoice{{}}}, want: convo.Reply{}},
		{
			name: "thinking content, anthropic usage, model",
			resp: &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "x", GenerationInfo: map[string]any{
				"ThinkingContent": "hmm", "InputTokens": int32(7), "OutputTokens": int64(3), "CacheReadInputTokens": 2.0, "CacheCreationInputTokens": json.Number("5"), "model": "m1"}}}},
			want: convo.Reply{Text: "x", Reasoning: "hmm", Model: "m1", Usage: &sessionstore.Usage{InputTokens: 7, OutputTokens: 3, CacheReadTokens: 2, CacheWriteTokens: 5}},
		},
		{
			name: "zero usage is none, empty arguments are none",
			resp: &llms.ContentResponse{Choices: []*llms.ContentChoice{{ToolCalls: []llms.ToolCall{lcCall("c", "f", "")}, GenerationInfo: map[string]any{"PromptTokens": 0}}}},
			want: convo.Reply{ToolCalls: []sessionstore.ToolCall{{CallID: "c", Name: "f"}}},
		},
		{
			name: "the legacy FuncCall when there are no ToolCalls",
			resp: &llms.ContentResponse{Choices: []*llms.ContentChoice{{FuncCall: &llms.FunctionCall{Name: "f", Arguments: `{}`}}}},
			want: convo.Reply{ToolCalls: []sessionstore.ToolCall{{CallID: derivedID(0, "f", `{}`), Name: "f", Arguments: json.RawMessage(`{}`)}}},
		},
		{
			name: "only the first choice",
			resp: &llms.ContentResponse{Choices: []*llms.ContentChoice{{Content: "a"}, {Content: "b"}}},
			want: convo.Reply{Text: "a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reply(tt.resp)
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func derivedID(i int, name, args string) string {
	r, err := Reply(&llms.ContentResponse{Choices: []*llms.ContentChoice{{ToolCalls: func() []llms.ToolCall {
		calls := make([]llms.ToolCall, i+1)
		for j := range calls {
			calls[j] = lcCall("", name, args)
		}
		return calls
	}()}}})
	if err != nil {
		panic(err)
	}
	return r.ToolCalls[i].CallID
}

func TestReplyDerivedCallIDs(t *testing.T) {
	resp := &llms.ContentResponse{Choices: []*llms.ContentChoice{{ToolCalls: []llms.ToolCall{
		lcCall("", "read", `{"p":1}`), lcCall("", "read", `{"p":1}`), lcCall("", "read", `{"p":2}`), lcCall("given", "read", `{}`)}}}}
	a, err := Reply(resp)
	require.NoError(t, err)
	b, err := Reply(resp)
	require.NoError(t, err)
	assert.Equal(t, a, b, "the same response gives the same ids")
	seen := map[string]bool{}
	for _, c := range a.ToolCalls[:3] {
		assert.Regexp(t, `^`+CallIDPrefix+`[0-9a-f]{16}$`, c.CallID)
		assert.False(t, seen[c.CallID], "ids are distinct: %s", c.CallID)
		seen[c.CallID] = true
	}
	assert.Equal(t, "given", a.ToolCalls[3].CallID)
}

func TestReplyAll(t *testing.T) {
	resp := &llms.ContentResponse{Choices: []*llms.ContentChoice{
		{GenerationInfo: map[string]any{"ThinkingContent": "plan", "InputTokens": 9}},
		{Content: "Looking.", GenerationInfo: map[string]any{"InputTokens": 9}},
		nil,
		{ToolCalls: []llms.ToolCall{lcCall("t1", "ls", `{}`)}},
		{ToolCalls: []llms.ToolCall{lcCall("t2", "cat", `{"f":"x"}`)}},
	}}
	got, err := ReplyAll(resp)
	require.NoError(t, err)
	assert.Equal(t, convo.Reply{Text: "Looking.", Reasoning: "plan", Usage: &sessionstore.Usage{InputTokens: 9},
		ToolCalls: []sessionstore.ToolCall{call("t1", "ls", `{}`), call("t2", "cat", `{"f":"x"}`)}}, got)

	_, err = ReplyAll(nil)
	assert.ErrorIs(t, err, ErrNoChoice)
	_, err = ReplyAll(&llms.ContentResponse{Choices: []*llms.ContentChoice{{ToolCalls: []llms.ToolCall{lcCall("c", "f", `nope`)}}}})
	assert.ErrorIs(t, err, ErrArguments)
}

// FuzzMessages feeds records of every kind, valid or not: Messages either
// fails or returns messages whose every tool message answers a call of
// the assistant turn before it, with one part, and no empty message.
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
			require.NotEmpty(t, m.Parts)
			switch m.Role {
			case llms.ChatMessageTypeAI:
				clear(open)
				for _, p := range m.Parts {
					if tc, ok := p.(llms.ToolCall); ok {
						open[tc.ID] = true
						require.True(t, json.Valid([]byte(tc.FunctionCall.Arguments)))
					}
				}
			case llms.ChatMessageTypeTool:
				require.Len(t, m.Parts, 1)
				r := m.Parts[0].(llms.ToolCallResponse)
				require.True(t, open[r.ToolCallID], "result %q without its call", r.ToolCallID)
				delete(open, r.ToolCallID)
			default:
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
