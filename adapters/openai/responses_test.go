package openaiadapter

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/openai/openai-go/v3/responses"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestResponsesInputWire(t *testing.T) {
	items, err := ResponsesInput(scenario(t))
	require.NoError(t, err)
	b := wire(t, items)
	golden(t, "responses_input.golden", b)

	got := decode(t, b)
	var kinds []string
	for _, it := range got {
		k := it["type"].(string)
		if k == "message" {
			k += ":" + it["role"].(string)
		}
		kinds = append(kinds, k)
	}
	assert.Equal(t, []string{
		"message:user", "message:user",
		"message:assistant", "function_call", "function_call", "function_call_output", "function_call_output",
		"function_call", "function_call_output",
		"message:user", "message:user",
		"function_call", "function_call_output", "message:assistant",
	}, kinds)

	// Each output follows its call.
	open := map[string]bool{}
	for i, it := range got {
		switch it["type"] {
		case "function_call":
			open[it["call_id"].(string)] = true
		case "function_call_output":
			id := it["call_id"].(string)
			assert.True(t, open[id], "item %d answers %s, which is not open", i, id)
			delete(open, id)
		}
	}
	assert.Empty(t, open)

	user := got[1]["content"].([]any)[0].(map[string]any)
	assert.Equal(t, map[string]any{"type": "input_text", "text": "Read a.go and b.go."}, user)
	asst := got[2]["content"].([]any)[0].(map[string]any)
	assert.Equal(t, "output_text", asst["type"])
	assert.Equal(t, "Reading both.", asst["text"])
	assert.NotContains(t, got[2], "id", "no made-up item id")
	assert.Equal(t, `{"path":"a.go"}`, got[3]["arguments"])
	assert.Equal(t, ErrorPrefix+"open b.go: no such file", got[6]["output"])
	assert.Equal(t, ErrorPrefix+convo.MissingResult, got[8]["output"])
	assert.Equal(t, `{"path": "a.go"`, got[11]["arguments"])
}

// responseJSON is a Responses API response as the API sends it: a
// reasoning item with a summary, a message, two function calls, and a
// hosted web search the reply leaves out.
const responseJSON = `{
  "id": "resp_1", "object": "response", "created_at": 1764680000, "status": "completed",
  "model": "gpt-test-2026", "error": null, "incomplete_details": null, "parallel_tool_calls": true,
  "output": [
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Both files are needed."}], "encrypted_content": "gAAAA"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "go"}},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Reading both.", "annotations": []}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file", "arguments": "{\"path\":\"a.go\"}", "status": "completed"},
    {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "read_file", "arguments": "{\"path\":", "status": "completed"}
  ],
  "usage": {"input_tokens": 900, "input_tokens_details": {"cached_tokens": 600},
            "output_tokens": 55, "output_tokens_details": {"reasoning_tokens": 30}, "total_tokens": 955}
}`

func unmarshalResponse(t testing.TB, s string) *responses.Response {
	t.Helper()
	var r responses.Response
	require.NoError(t, json.Unmarshal([]byte(s), &r))
	return &r
}

func TestResponseReply(t *testing.T) {
	tests := []struct {
		name string
		resp string
		want convo.Reply
		err  error
	}{
		{name: "reasoning, text, parallel calls", resp: responseJSON, want: convo.Reply{
			Text: "Reading both.", Reasoning: "Both files are needed.", Model: "gpt-test-2026",
			Usage: &sessionstore.Usage{InputTokens: 300, OutputTokens: 55, CacheReadTokens: 600},
			ToolCalls: []sessionstore.ToolCall{
				{CallID: "call_1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a.go"}`)},
				{CallID: "call_2", Name: "read_file", Arguments: json.RawMessage(`"{\"path\":"`)},
			},
		}},
		{name: "refusal and text parts", resp: `{"id":"r","model":"m","output":[{"type":"message","role":"assistant","content":[{"type":"output_text","text":"a"},{"type":"refusal","refusal":"b"}]}]}`,
			want: convo.Reply{Text: "a\n\nb", Model: "m"}},
		{name: "reasoning text without summary", resp: `{"id":"r","model":"m","output":[{"type":"reasoning","id":"rs","summary":[],"content":[{"type":"reasoning_text","text":"think"}]}]}`,
			want: convo.Reply{Reasoning: "think", Model: "m", ProviderState: []sessionstore.ProviderState{
				{Provider: "openai", Type: "reasoning", Data: []byte(`{"type":"reasoning","id":"rs","summary":[],"content":[{"type":"reasoning_text","text":"think"}]}`)}}}},
		{name: "failed", resp: `{"id":"r","model":"m","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`, err: ErrNoReply},
		{name: "custom tool", resp: `{"id":"r","model":"m","output":[{"type":"custom_tool_call","call_id":"c","name":"n","input":"x"}]}`, err: ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResponseReply(unmarshalResponse(t, tt.resp))
			if tt.err != nil {
				assert.ErrorIs(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
	_, err := ResponseReply(nil)
	assert.ErrorIs(t, err, ErrNoReply)
}

func TestResponsesRoundTrip(t *testing.T) {
	s := newSession(t, nil)
	s.append(sessionstore.UserText("Read a.go and b.go."))
	evs, err := ResponseEvents(unmarshalResponse(t, responseJSON))
	require.NoError(t, err)
	s.append(evs...)
	s.append(result("call_1", "package a", false), result("call_2", "bad arguments", true))
	items, err := ResponsesInput(s.load())
	require.NoError(t, err)
	got := decode(t, wire(t, items))
	require.Len(t, got, 6)
	assert.Equal(t, "message", got[1]["type"])
	assert.Equal(t, "assistant", got[1]["role"])
	assert.Equal(t, map[string]any{"call_id": "call_1", "name": "read_file", "arguments": `{"path":"a.go"}`, "type": "function_call"}, got[2])
	assert.Equal(t, `{"path":`, got[3]["arguments"], "arguments that are not JSON come back as the model wrote them")
	assert.Equal(t, map[string]any{"call_id": "call_1", "output": "package a", "type": "function_call_output"}, got[4])
	assert.Equal(t, "call_2", got[5]["call_id"])
	for _, it := range got {
		assert.NotEqual(t, "reasoning", it["type"], "a reasoning item that preceded a hosted tool's item is not kept")
	}
	m, err := s.load()[1].Message()
	require.NoError(t, err)
	assert.Equal(t, "Both files are needed.", m.Reasoning)
}

func FuzzResponseReply(f *testing.F) {
	f.Add([]byte(responseJSON))
	f.Add([]byte(`{"output":[{"type":"function_call","arguments":"x"}]}`))
	f.Add([]byte(`{"error":{"code":"x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r responses.Response
		if json.Unmarshal(b, &r) != nil {
			return
		}
		evs, err := ResponseEvents(&r)
		if err != nil {
			assert.True(t, errors.Is(err, ErrNoReply) || errors.Is(err, ErrUnsupported), "unexpected error %v", err)
			return
		}
		checkEvents(t, evs)
	})
}

func BenchmarkResponsesInput(b *testing.B) {
	evs := loadRecorded(b)
	b.SetBytes(recordBytes(evs))
	b.ReportAllocs()
	var n int
	for b.Loop() {
		items, err := ResponsesInput(evs)
		if err != nil {
			b.Fatal(err)
		}
		n = len(items)
	}
	b.ReportMetric(float64(n), "items/op")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(evs)), "ns/event")
}
