package openaiadapter

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/openai/openai-go/v3"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChatMessagesWire(t *testing.T) {
	msgs, err := ChatMessages(scenario(t))
	require.NoError(t, err)
	b := wire(t, msgs)
	golden(t, "chat_messages.golden", b)

	got := decode(t, b)
	var roles []string
	for _, m := range got {
		roles = append(roles, m["role"].(string))
	}
	assert.Equal(t, []string{
		"user",                      // the compaction's summary
		"user",                      // Read a.go and b.go.
		"assistant", "tool", "tool", // parallel calls and their results
		"assistant", "tool", // the abandoned call, answered synthetically
		"user",                           // Stop (the empty assistant message is left out)
		"user",                           // Check a.go again.
		"assistant", "tool", "assistant", // invalid arguments, empty result, final answer
	}, roles)
	assert.Contains(t, got[0]["content"], "The user asked what the repository is.")
	assert.Contains(t, got[0]["content"], "Goals:\n- fix the build")

	checkChatPairs(t, got)

	calls := got[2]["tool_calls"].([]any)
	require.Len(t, calls, 2)
	fn := calls[1].(map[string]any)["function"].(map[string]any)
	assert.Equal(t, "read_file", fn["name"])
	assert.Equal(t, `{"path":"b.go"}`, fn["arguments"])
	assert.Equal(t, "Reading both.", got[2]["content"])
	assert.Equal(t, "package a", got[3]["content"])
	assert.Equal(t, ErrorPrefix+"open b.go: no such file", got[4]["content"])
	assert.Equal(t, ErrorPrefix+convo.MissingResult, got[6]["content"])
	assert.NotContains(t, got[5], "content", "an assistant message with calls only has no content")
	bad := got[9]["tool_calls"].([]any)[0].(map[string]any)["function"].(map[string]any)
	assert.Equal(t, `{"path": "a.go"`, bad["arguments"], "arguments that are not JSON come back as the model wrote them")
	assert.Equal(t, "", got[10]["content"])
}

// checkChatPairs checks that every tool message answers a call of the
// assistant message before it, and that every call is answered before
// the next other message.
func checkChatPairs(t *testing.T, got []map[string]any) {
	t.Helper()
	open := map[string]bool{}
	for i, m := range got {
		switch m["role"] {
		case "assistant":
			assert.Empty(t, open, "message %d: calls left unanswered", i)
			calls, _ := m["tool_calls"].([]any)
			for _, c := range calls {
				c := c.(map[string]any)
				assert.Equal(t, "function", c["type"])
				open[c["id"].(string)] = true
			}
		case "tool":
			id := m["tool_call_id"].(string)
			assert.True(t, open[id], "message %d answers %s, which is not open", i, id)
			delete(open, id)
		default:
			assert.Empty(t, open, "message %d: calls left unanswered", i)
		}
	}
	assert.Empty(t, open)
}

// chatResponse is a chat completion as the API sends it.
const chatResponse = `{
  "id": "chatcmpl-1", "object": "chat.completion", "created": 1764680000, "model": "gpt-test-2026",
  "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": null, "message": {
    "role": "assistant", "content": "Reading both.", "refusal": null, "annotations": [],
    "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"a.go\"}"}},
      {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"b.go\""}}
    ]}}],
  "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
    "prompt_tokens_details": {"cached_tokens": 1000, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0}}
}`

func unmarshalChat(t testing.TB, s string) *openai.ChatCompletion {
	t.Helper()
	var c openai.ChatCompletion
	require.NoError(t, json.Unmarshal([]byte(s), &c))
	return &c
}

func TestChatReply(t *testing.T) {
	tests := []struct {
		name string
		resp string
		want convo.Reply
		err  error
	}{
		{name: "parallel calls, cached tokens", resp: chatResponse, want: convo.Reply{
			Text: "Reading both.", Model: "gpt-test-2026",
			Usage: &sessionstore.Usage{InputTokens: 200, OutputTokens: 40, CacheReadTokens: 1000},
			ToolCalls: []sessionstore.ToolCall{
				{CallID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path": "a.go"}`)},
				{CallID: "call_2", Name: "read_file", Arguments: json.RawMessage(`"{\"path\":\"b.go\""`)},
			},
		}},
		{name: "text, no usage", resp: `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Done."}}]}`,
			want: convo.Reply{Text: "Done.", Model: "m"}},
		{name: "refusal", resp: `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."}}]}`,
			want: convo.Reply{Text: "I can't help with that.", Model: "m"}},
		{name: "cache write", resp: `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"prompt_tokens_details":{"cached_tokens":20,"cache_write_tokens":30}}}`,
			want: convo.Reply{Text: "x", Model: "m", Usage: &sessionstore.Usage{InputTokens: 50, OutputTokens: 1, CacheReadTokens: 20, CacheWriteTokens: 30}}},
		{name: "no choices", resp: `{"id":"c","model":"m","choices":[]}`, err: ErrNoReply},
		{name: "custom tool", resp: `{"id":"c","model":"m","choices":[{"index":0,"message":{"role":"assistant","tool_calls":[{"id":"x","type":"custom","custom":{"name":"n","input":"i"}}]}}]}`, err: ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ChatReply(unmarshalChat(t, tt.resp))
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := ChatReply(nil)
	assert.ErrorIs(t, err, ErrNoReply)
}

// A response becomes events; the events, loaded back with the tools'
// results, become a request that repeats the calls and pairs the results.
func TestChatRoundTrip(t *testing.T) {
	s := newSession(t, nil)
	s.append(sessionstore.UserText("Read a.go and b.go."))
	evs, err := ChatEvents(unmarshalChat(t, chatResponse))
	require.NoError(t, err)
	require.Len(t, evs, 3)
	s.append(evs...)
	s.append(result("call_1", "package a", false), result("call_2", "bad arguments", true))
	msgs, err := ChatMessages(s.load())
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	require.Len(t, got, 4)

	var sent openai.ChatCompletion
	require.NoError(t, json.Unmarshal([]byte(chatResponse), &sent))
	calls := got[1]["tool_calls"].([]any)
	require.Len(t, calls, 2)
	for i, c := range calls {
		c := c.(map[string]any)
		fn := c["function"].(map[string]any)
		want := sent.Choices[0].Message.ToolCalls[i]
		assert.Equal(t, want.ID, c["id"])
		assert.Equal(t, want.Function.Name, fn["name"])
		assert.JSONEq(t, jsonOrString(want.Function.Arguments), jsonOrString(fn["arguments"].(string)))
	}
	assert.Equal(t, `{"path":"b.go"`, calls[1].(map[string]any)["function"].(map[string]any)["arguments"])
	assert.Equal(t, "call_1", got[2]["tool_call_id"])
	assert.Equal(t, "call_2", got[3]["tool_call_id"])
	assert.Equal(t, ErrorPrefix+"bad arguments", got[3]["content"])

	m, err := s.load()[1].Message()
	require.NoError(t, err)
	assert.Equal(t, &sessionstore.Usage{InputTokens: 200, OutputTokens: 40, CacheReadTokens: 1000}, m.Usage)
	assert.Equal(t, "gpt-test-2026", m.Model)
}

// jsonOrString returns s if it is JSON, else s as a JSON string, so that
// JSONEq can compare arguments that may not be JSON.
func jsonOrString(s string) string {
	if json.Valid([]byte(s)) {
		return s
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// A result stored as a blob (over the store's BlobThreshold) is resolved
// by Load and sent whole.
func TestChatBlobResult(t *testing.T) {
	s := newSession(t, &sessionstore.Options{BlobThreshold: 1024})
	big := strings.Repeat("line of output\n", 1000)
	s.append(sessionstore.UserText("Dump the log."))
	s.append(convo.Reply{ToolCalls: []sessionstore.ToolCall{tc("call_1", "cat", `{}`)}}.Events()...)
	s.append(result("call_1", big, false))
	evs := s.load()
	require.NotEmpty(t, evs[3].Digest, "the result is stored as a blob")
	msgs, err := ChatMessages(evs)
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	require.Len(t, got, 3)
	assert.Equal(t, big, got[2]["content"])

	// An event read without Resolve has no record: a clear error.
	ev, err := s.st.Event(context.Background(), s.id, evs[3].ID)
	require.NoError(t, err)
	require.Nil(t, ev.Record, "Store.Event leaves a blob unresolved")
	_, err = ChatMessages(append(evs[:3:3], ev))
	assert.ErrorIs(t, err, convo.ErrUnresolved)
}

func TestChatMessagesEmpty(t *testing.T) {
	msgs, err := ChatMessages(nil)
	require.NoError(t, err)
	assert.Empty(t, msgs)
	assert.Equal(t, "[]\n", string(wire(t, msgs)))
}

func TestArguments(t *testing.T) {
	tests := []struct {
		in    string
		store string // "" for none
		text  string
	}{
		{`{"a": 1}`, `{"a": 1}`, `{"a": 1}`},
		{`{"a":`, `"{\"a\":"`, `{"a":`},
		{`"quoted"`, `"\"quoted\""`, `"quoted"`},
		{`  `, ``, `{}`},
		{`[1,2]`, `[1,2]`, `[1,2]`},
	}
	for _, tt := range tests {
		got := ArgumentsJSON(tt.in)
		assert.Equal(t, tt.store, string(got), tt.in)
		assert.Equal(t, tt.text, ArgumentsText(got), tt.in)
	}
	assert.Equal(t, "{}", ArgumentsText(json.RawMessage("null")))
}

func FuzzArguments(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `{"a":`, `"x"`, ` "x" `, `[`, `1`, "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		stored := ArgumentsJSON(s)
		trimmed := strings.TrimSpace(s)
		if trimmed == "" {
			assert.Empty(t, stored)
			return
		}
		require.True(t, json.Valid(stored), "stored arguments must be JSON: %q", stored)
		if trimmed == "null" {
			return
		}
		if utf8.ValidString(s) { // a JSON string cannot hold invalid UTF-8
			assert.Equal(t, s, ArgumentsText(stored))
		}
	})
}

func FuzzChatReply(f *testing.F) {
	f.Add([]byte(chatResponse))
	f.Add([]byte(`{"choices":[{"message":{"content":"x","refusal":"y"}}],"usage":{"prompt_tokens":1}}`))
	f.Add([]byte(`{"choices":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var c openai.ChatCompletion
		if json.Unmarshal(b, &c) != nil {
			return
		}
		evs, err := ChatEvents(&c)
		if err != nil {
			assert.True(t, isKnown(err), "unexpected error %v", err)
			return
		}
		checkEvents(t, evs)
	})
}

func isKnown(err error) bool {
	return errors.Is(err, ErrNoReply) || errors.Is(err, ErrUnsupported)
}

// checkEvents checks that events are what a store accepts: each record
// valid JSON, the calls announced and recorded alike.
func checkEvents(t *testing.T, evs []sessionstore.Event) {
	require.NotEmpty(t, evs)
	for _, ev := range evs {
		require.True(t, json.Valid(ev.Record), "record %s", ev.Record)
	}
	m, err := evs[0].Message()
	require.NoError(t, err)
	require.Len(t, evs, 1+len(m.ToolCalls))
	for i, c := range m.ToolCalls {
		if len(c.Arguments) > 0 {
			assert.True(t, json.Valid(c.Arguments))
		}
		got, err := evs[1+i].ToolCall()
		require.NoError(t, err)
		assert.Equal(t, c.CallID, got.CallID)
	}
}

func BenchmarkChatMessages(b *testing.B) {
	evs := loadRecorded(b)
	b.SetBytes(recordBytes(evs))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		msgs, err := ChatMessages(evs)
		if err != nil {
			b.Fatal(err)
		}
		n = len(msgs)
	}
	b.ReportMetric(float64(n), "messages/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
}

// recordBytes is the size of the events' records: what a request is
// built from.
func recordBytes(evs []sessionstore.Event) int64 {
	var n int64
	for _, ev := range evs {
		n += int64(len(ev.Record))
	}
	return n
}
