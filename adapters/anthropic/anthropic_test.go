package anthropicadapter

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blocks returns a wire message's content blocks.
func blocks(m map[string]any) []map[string]any {
	var out []map[string]any
	for _, b := range m["content"].([]any) {
		out = append(out, b.(map[string]any))
	}
	return out
}

// checkAPIRules checks what the Messages API demands of a request's
// messages: user and assistant alternate, no message or text block is
// empty, every tool_use is answered by a tool_result in the next message,
// tool_result blocks come first in their message, and every tool_result
// answers a tool_use of the message before.
func checkAPIRules(t *testing.T, msgs []map[string]any) {
	t.Helper()
	prevUses := map[string]bool{}
	for i, m := range msgs {
		if i > 0 {
			assert.NotEqual(t, msgs[i-1]["role"], m["role"], "message %d: same role as the one before", i)
		}
		bs := blocks(m)
		assert.NotEmpty(t, bs, "message %d is empty", i)
		uses := map[string]bool{}
		results, sawOther := map[string]bool{}, false
		for j, b := range bs {
			switch b["type"] {
			case "text":
				assert.NotEmpty(t, b["text"], "message %d block %d: empty text", i, j)
				sawOther = true
			case "tool_use":
				assert.Equal(t, "assistant", m["role"])
				uses[b["id"].(string)] = true
			case "tool_result":
				assert.Equal(t, "user", m["role"])
				assert.False(t, sawOther, "message %d: tool_result after another block", i)
				id := b["tool_use_id"].(string)
				assert.True(t, prevUses[id], "message %d: result for %s, not a tool_use of the message before", i, id)
				results[id] = true
			default:
				sawOther = true
			}
		}
		for id := range prevUses {
			assert.True(t, results[id], "message %d: tool_use %s of the message before unanswered", i, id)
		}
		prevUses = uses
	}
}

func TestMessagesWire(t *testing.T) {
	msgs, err := Messages(scenario(t))
	require.NoError(t, err)
	b := wire(t, msgs)
	golden(t, "messages.golden", b)

	got := decode(t, b)
	checkAPIRules(t, got)
	var shape []string
	for _, m := range got {
		s := m["role"].(string) + ":"
		for _, b := range blocks(m) {
			s += " " + b["type"].(string)
		}
		shape = append(shape, s)
	}
	assert.Equal(t, []string{
		"user: text text",                   // the summary, then Read a.go and b.go.
		"assistant: text tool_use tool_use", // parallel calls
		"user: tool_result tool_result",     // their results, in one message
		"assistant: tool_use",               // the abandoned call
		"user: tool_result text text",       // its synthetic result, Stop, Check a.go again
		"assistant: tool_use",               // arguments that are not an object
		"user: tool_result",                 // an empty result (the stale one is dropped)
		"assistant: text",                   // the final answer
	}, shape)

	first := blocks(got[0])
	assert.Contains(t, first[0]["text"], "The user asked what the repository is.")
	use := blocks(got[1])[2]
	assert.Equal(t, map[string]any{"type": "tool_use", "id": "call_b", "name": "read_file", "input": map[string]any{"path": "b.go"}}, use)
	res := blocks(got[2])
	assert.Equal(t, map[string]any{"type": "tool_result", "tool_use_id": "call_a", "content": []any{map[string]any{"type": "text", "text": "package a"}}}, res[0])
	assert.Equal(t, true, res[1]["is_error"])
	synth := blocks(got[4])[0]
	assert.Equal(t, true, synth["is_error"])
	assert.Equal(t, convo.MissingResult, synth["content"].([]any)[0].(map[string]any)["text"])
	assert.Equal(t, map[string]any{"arguments": `{"path": "a.go"`}, blocks(got[5])[0]["input"])
	assert.NotContains(t, blocks(got[6])[0], "content", "an empty result has no content")
}

// messageJSON is a Messages API response as the API sends it: thinking,
// text and two parallel tool_use blocks, with cache usage.
const messageJSON = `{
  "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test-2026",
  "content": [
    {"type": "thinking", "thinking": "Both files are needed.", "signature": "sig-abc"},
    {"type": "redacted_thinking", "data": "ENCRYPTED"},
    {"type": "text", "text": "Reading both."},
    {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "a.go"}},
    {"type": "tool_use", "id": "toolu_2", "name": "read_file", "input": {"path": "b.go", "lines": [1, 2]}}
  ],
  "stop_reason": "tool_use", "stop_sequence": null,
  "usage": {"input_tokens": 12, "output_tokens": 80, "cache_read_input_tokens": 3000, "cache_creation_input_tokens": 400}
}`

func unmarshalMessage(t testing.TB, s string) *anthropic.Message {
	t.Helper()
	var m anthropic.Message
	require.NoError(t, json.Unmarshal([]byte(s), &m))
	return &m
}

func TestReply(t *testing.T) {
	tests := []struct {
		name string
		resp string
		want convo.Reply
	}{
		{name: "thinking, text, parallel calls, cache", resp: messageJSON, want: convo.Reply{
			Text: "Reading both.", Reasoning: "Both files are needed.", Model: "claude-test-2026",
			Usage: &sessionstore.Usage{InputTokens: 12, OutputTokens: 80, CacheReadTokens: 3000, CacheWriteTokens: 400},
			ToolCalls: []sessionstore.ToolCall{
				{CallID: "toolu_1", Name: "read_file", Arguments: json.RawMessage(`{"path": "a.go"}`)},
				{CallID: "toolu_2", Name: "read_file", Arguments: json.RawMessage(`{"path": "b.go", "lines": [1, 2]}`)},
			},
			ProviderState: []sessionstore.ProviderState{
				{Provider: "anthropic", Type: "thinking", Data: []byte(`{"type": "thinking", "thinking": "Both files are needed.", "signature": "sig-abc"}`)},
				{Provider: "anthropic", Type: "redacted_thinking", Data: []byte(`{"type": "redacted_thinking", "data": "ENCRYPTED"}`)},
			},
		}},
		{name: "two text blocks, no usage", resp: `{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"a"},{"type":"text","text":""},{"type":"text","text":"b"}]}`,
			want: convo.Reply{Text: "a\n\nb", Model: "c"}},
		{name: "hosted tool left out", resp: `{"id":"m","type":"message","role":"assistant","model":"c","content":[
			{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"go"}},
			{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},
			{"type":"text","text":"Found it."}]}`,
			want: convo.Reply{Text: "Found it.", Model: "c"}},
		{name: "empty", resp: `{"id":"m","type":"message","role":"assistant","model":"c","content":[]}`, want: convo.Reply{Model: "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Reply(unmarshalMessage(t, tt.resp))
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := Reply(nil)
	assert.ErrorIs(t, err, ErrNoReply)
	_, err = Events(nil)
	assert.ErrorIs(t, err, ErrNoReply)
}

// A response becomes events; loaded back with the tools' results, they
// become a request that repeats the signed thinking, the text and the
// calls, and answers the calls in one user message.
func TestRoundTrip(t *testing.T) {
	s := newSession(t, nil)
	s.append(sessionstore.UserText("Read a.go and b.go."))
	evs, err := Events(unmarshalMessage(t, messageJSON))
	require.NoError(t, err)
	require.Len(t, evs, 3)
	s.append(evs...)
	s.append(result("toolu_1", "package a", false), result("toolu_2", "no such file", true))
	loaded := s.load()
	m, err := loaded[1].Message()
	require.NoError(t, err)
	assert.Equal(t, "Both files are needed.", m.Reasoning)
	assert.Equal(t, &sessionstore.Usage{InputTokens: 12, OutputTokens: 80, CacheReadTokens: 3000, CacheWriteTokens: 400}, m.Usage)

	msgs, err := Messages(loaded)
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	checkAPIRules(t, got)
	require.Len(t, got, 3)

	sent := decode(t, []byte("["+messageJSON+"]"))[0]
	assert.Equal(t, sent["content"], got[1]["content"], "the assistant message is sent back as the API wrote it")
	res := blocks(got[2])
	require.Len(t, res, 2)
	assert.Equal(t, "toolu_1", res[0]["tool_use_id"])
	assert.Equal(t, "toolu_2", res[1]["tool_use_id"])
	assert.Equal(t, true, res[1]["is_error"])

	// MessagesOf sends the same, from the context's provider state.
	c, err := convo.Build(loaded, nil)
	require.NoError(t, err)
	assert.Equal(t, got, decode(t, wire(t, MessagesOf(c))))
}

// Reasoning stored without signed blocks (by another writer) is not sent.
func TestUnsignedReasoningLeftOut(t *testing.T) {
	s := newSession(t, nil)
	s.append(sessionstore.UserText("Hi"), convo.Reply{Text: "Hello.", Reasoning: "greet"}.Events()[0])
	msgs, err := Messages(s.load())
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	require.Len(t, got, 2)
	assert.Equal(t, []map[string]any{{"type": "text", "text": "Hello."}}, blocks(got[1]))
}

func TestMessagesBadThinking(t *testing.T) {
	ev := sessionstore.NewEvent(sessionstore.KindMessage, sessionstore.RoleAssistant, map[string]any{"content": "x", ThinkingField: "not a list"})
	ev.ID = uuid.Must(uuid.NewV7())
	_, err := Messages([]sessionstore.Event{sessionstore.UserText("q"), ev})
	require.Error(t, err)
	assert.Contains(t, err.Error(), ThinkingField)
}

// A result stored as a blob is resolved by Load and sent whole.
func TestBlobResult(t *testing.T) {
	s := newSession(t, &sessionstore.Options{BlobThreshold: 1024})
	big := strings.Repeat("line of output\n", 1000)
	s.append(sessionstore.UserText("Dump the log."))
	s.append(convo.Reply{ToolCalls: []sessionstore.ToolCall{tc("toolu_1", "cat", `{}`)}}.Events()...)
	s.append(result("toolu_1", big, false))
	evs := s.load()
	require.NotEmpty(t, evs[3].Digest, "the result is stored as a blob")
	msgs, err := Messages(evs)
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	require.Len(t, got, 3)
	assert.Equal(t, big, blocks(got[2])[0]["content"].([]any)[0].(map[string]any)["text"])

	ev, err := s.st.Event(context.Background(), s.id, evs[3].ID)
	require.NoError(t, err)
	require.Nil(t, ev.Record, "Store.Event leaves a blob unresolved")
	_, err = Messages(append(evs[:3:3], ev))
	assert.ErrorIs(t, err, convo.ErrUnresolved)
}

func TestMessagesEmpty(t *testing.T) {
	msgs, err := Messages(nil)
	require.NoError(t, err)
	assert.Empty(t, msgs)
}

func TestInput(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{``, `{}`},
		{`null`, `{}`},
		{`{"a":1}`, `{"a":1}`},
		{`"text"`, `{"arguments":"text"}`},
		{`[1]`, `{"arguments":[1]}`},
		{`{bad`, `{"arguments":"{bad"}`},
	} {
		got := Input(json.RawMessage(tt.in))
		assert.JSONEq(t, tt.want, string(got), tt.in)
	}
}

func FuzzReply(f *testing.F) {
	f.Add([]byte(messageJSON))
	f.Add([]byte(`{"content":[{"type":"tool_use","id":"x","input":"str"}]}`))
	f.Add([]byte(`{"content":[{"type":"thinking"}],"usage":{}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m anthropic.Message
		if json.Unmarshal(b, &m) != nil {
			return
		}
		evs, err := Events(&m)
		require.NoError(t, err)
		require.NotEmpty(t, evs)
		for _, ev := range evs {
			require.True(t, json.Valid(ev.Record), "record %s", ev.Record)
		}
		// The events make a request that keeps to the API's rules.
		hist := append([]sessionstore.Event{sessionstore.UserText("q")}, evs...)
		msgs, err := Messages(hist)
		require.NoError(t, err)
		for _, m := range msgs {
			if m.OfAssistant == nil {
				continue
			}
			for _, b := range m.OfAssistant.Content {
				if b.OfToolUse != nil {
					raw, ok := b.OfToolUse.Input.(json.RawMessage)
					require.True(t, ok)
					assert.True(t, json.Valid(raw) && strings.HasPrefix(strings.TrimSpace(string(raw)), "{"), "input %s", raw)
				}
			}
		}
	})
}

// FuzzMessages builds sessions from fuzz bytes (each byte an event: user
// text, assistant text, a call, a result for a recent call, a compaction
// summary) and checks the request keeps to the API's rules.
func FuzzMessages(f *testing.F) {
	f.Add([]byte{0, 2, 2, 3, 3, 1})
	f.Add([]byte{2, 0, 3, 1, 1, 4, 2, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 200 {
			b = b[:200]
		}
		evs := []sessionstore.Event{sessionstore.UserText("start")}
		calls := 0
		for i, x := range b {
			id := "c" + strconv.Itoa(calls)
			switch x % 6 {
			case 0:
				evs = append(evs, sessionstore.UserText("u"+strconv.Itoa(i)))
			case 1:
				evs = append(evs, sessionstore.AssistantText("a"+strconv.Itoa(i)))
			case 2:
				calls++
				id = "c" + strconv.Itoa(calls)
				evs = append(evs, convo.Reply{ToolCalls: []sessionstore.ToolCall{{CallID: id, Name: "t"}}}.Events()...)
			case 3:
				evs = append(evs, result(id, "r", x%2 == 0))
			case 4:
				evs = append(evs, sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, sessionstore.CompactionRecord{Summary: sessionstore.Summary{Text: "s"}}))
			case 5:
				evs = append(evs, sessionstore.AssistantText(""))
			}
		}
		// A harness runs the calls still pending before its next request.
		c, err := convo.Build(evs, nil)
		require.NoError(t, err)
		for _, p := range c.Pending {
			evs = append(evs, result(p.CallID, "done", false))
		}
		msgs, err := Messages(evs)
		require.NoError(t, err)
		if len(msgs) == 0 {
			return
		}
		checkAPIRules(t, decode(t, wire(t, msgs)))
	})
}

func BenchmarkMessages(b *testing.B) {
	var evs []sessionstore.Event
	out := strings.Repeat("output ", 200)
	for i := range 500 {
		a, c := "a"+strconv.Itoa(i), "b"+strconv.Itoa(i)
		evs = append(evs, sessionstore.UserText("Do the next step."))
		evs = append(evs, convo.Reply{Text: "On it.", ToolCalls: []sessionstore.ToolCall{tc(a, "read_file", `{"path":"a.go"}`), tc(c, "grep", `{"p":"x"}`)}}.Events()...)
		evs = append(evs, result(a, out, false), result(c, out, false), sessionstore.AssistantText("Step done."))
	}
	b.ReportAllocs()
	var n int
	for b.Loop() {
		msgs, err := Messages(evs)
		if err != nil {
			b.Fatal(err)
		}
		n = len(msgs)
	}
	b.ReportMetric(float64(n), "messages/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
}
