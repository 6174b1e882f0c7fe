package openaiadapter

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func reasoningState(data string) sessionstore.ProviderState {
	return sessionstore.ProviderState{Provider: "openai", Type: "reasoning", Data: []byte(data)}
}

func itemID(id string) sessionstore.ProviderState {
	return sessionstore.ProviderState{Provider: "openai", Type: "item_id", Data: []byte(id)}
}

// reasoningJSON is a response of a reasoning model: reasoning before its
// message, reasoning before the second of two calls, reasoning before a
// hosted tool's item, and reasoning at the end.
const reasoningJSON = `{"id":"resp_1","object":"response","model":"o-test","status":"completed","output":[
  {"type":"reasoning","id":"rs_a","summary":[{"type":"summary_text","text":"Say it."}],"encrypted_content":"encA"},
  {"type":"message","id":"msg_1","role":"assistant","status":"completed","content":[{"type":"output_text","text":"Reading.","annotations":[]}]},
  {"type":"function_call","id":"fc_1","call_id":"call_1","name":"read_file","arguments":"{}"},
  {"type":"reasoning","id":"rs_b","summary":[],"encrypted_content":"encB"},
  {"type":"function_call","id":"fc_2","call_id":"call_2","name":"read_file","arguments":"{}"},
  {"type":"reasoning","id":"rs_c","summary":[]},
  {"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"go"}},
  {"type":"reasoning","id":"rs_d","summary":[]}]}`

// Each reasoning item is kept, as the API returned it, with the item it
// preceded, together with that item's id; one before a hosted tool's item
// is not.
func TestResponseReplyProviderState(t *testing.T) {
	r, err := ResponseReply(unmarshalResponse(t, reasoningJSON))
	require.NoError(t, err)
	assert.Equal(t, []sessionstore.ProviderState{
		reasoningState(`{"type":"reasoning","id":"rs_a","summary":[{"type":"summary_text","text":"Say it."}],"encrypted_content":"encA"}`),
		itemID("msg_1"),
		reasoningState(`{"type":"reasoning","id":"rs_d","summary":[]}`),
	}, r.ProviderState)
	require.Len(t, r.ToolCalls, 2)
	assert.Nil(t, r.ToolCalls[0].ProviderState)
	assert.Equal(t, []sessionstore.ProviderState{reasoningState(`{"type":"reasoning","id":"rs_b","summary":[],"encrypted_content":"encB"}`), itemID("fc_2")},
		r.ToolCalls[1].ProviderState)
	assert.Equal(t, "Reading.", r.Text, "the state is never text")
	assert.Equal(t, "Say it.", r.Reasoning)

	// Chat Completions has no such state.
	c, err := ChatReply(unmarshalChat(t, `{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,
	  "message":{"role":"assistant","content":"x","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}}]}`))
	require.NoError(t, err)
	assert.Nil(t, c.ProviderState)
	assert.Nil(t, c.ToolCalls[0].ProviderState)
}

// The items ResponsesInput sends for stored reasoning state: as stored
// with the following item's id, without its id (when encrypted) if the
// following item's id was not kept, not at all when it could not be
// paired; message-level reasoning only with the message item.
func TestResponsesInputReasoning(t *testing.T) {
	withID := `{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"enc"}`
	noEnc := `{"type":"reasoning","id":"rs_1","summary":[]}`
	noID := `{"summary":[],"type":"reasoning","encrypted_content":"enc"}`
	other := sessionstore.ProviderState{Provider: "gemini", Type: "thought_signature", Data: []byte("sig")}
	call := func(st ...sessionstore.ProviderState) sessionstore.ToolCall {
		c := tc("call_1", "read_file", `{}`)
		c.ProviderState = st
		return c
	}
	fc := func(id string) map[string]any {
		m := map[string]any{"type": "function_call", "call_id": "call_1", "name": "read_file", "arguments": "{}"}
		if id != "" {
			m["id"] = id
		}
		return m
	}
	tests := []struct {
		name string
		msg  sessionstore.Message
		want []map[string]any // the assistant turn's items
	}{
		{name: "as the API gave them", msg: sessionstore.Message{ToolCalls: []sessionstore.ToolCall{call(reasoningState(withID), itemID("fc_1"))}},
			want: []map[string]any{{"type": "reasoning", "id": "rs_1", "summary": []any{}, "encrypted_content": "enc"}, fc("fc_1")}},
		{name: "the call's id not kept: encrypted reasoning without its id", msg: sessionstore.Message{ToolCalls: []sessionstore.ToolCall{call(reasoningState(withID))}},
			want: []map[string]any{{"type": "reasoning", "summary": []any{}, "encrypted_content": "enc"}, fc("")}},
		{name: "nothing to pair by: left out", msg: sessionstore.Message{ToolCalls: []sessionstore.ToolCall{call(reasoningState(noEnc))}},
			want: []map[string]any{fc("")}},
		{name: "stored without id: as stored", msg: sessionstore.Message{ToolCalls: []sessionstore.ToolCall{call(reasoningState(noID), other)}},
			want: []map[string]any{{"type": "reasoning", "summary": []any{}, "encrypted_content": "enc"}, fc("")}},
		{name: "another provider's state is not sent", msg: sessionstore.Message{ToolCalls: []sessionstore.ToolCall{call(other)}},
			want: []map[string]any{fc("")}},
		{name: "message-level reasoning before the message", msg: sessionstore.Message{Content: "hi", ProviderState: []sessionstore.ProviderState{reasoningState(withID), itemID("msg_1")}},
			want: []map[string]any{{"type": "reasoning", "id": "rs_1", "summary": []any{}, "encrypted_content": "enc"},
				{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed", "content": []any{map[string]any{"type": "output_text", "text": "hi", "annotations": []any{}}}}}},
		{name: "message-level reasoning without a message item: left out", msg: sessionstore.Message{ProviderState: []sessionstore.ProviderState{reasoningState(withID)},
			ToolCalls: []sessionstore.ToolCall{call()}},
			want: []map[string]any{fc("")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := []sessionstore.Event{sessionstore.UserText("q"), sessionstore.AssistantMessage(tt.msg)}
			if len(tt.msg.ToolCalls) > 0 {
				evs = append(evs, result("call_1", "r", false))
			}
			items, err := ResponsesInput(evs)
			require.NoError(t, err)
			got := decode(t, wire(t, items))
			end := len(got)
			if len(tt.msg.ToolCalls) > 0 {
				end--
			}
			assert.Equal(t, tt.want, got[1:end])
		})
	}

	// Data that is not a JSON object: an error naming the message, or
	// left out by ResponsesInputOf.
	bad := sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: []sessionstore.ToolCall{call(reasoningState(`{"type":`), itemID("fc_1"))}})
	bad.ID = uuid.Must(uuid.NewV7())
	evs := []sessionstore.Event{sessionstore.UserText("q"), bad, result("call_1", "r", false)}
	_, err := ResponsesInput(evs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), bad.ID.String())
	c, err := convo.Build(evs, nil)
	require.NoError(t, err)
	got := decode(t, wire(t, ResponsesInputOf(c)))
	assert.Equal(t, fc(""), got[1])

	// Chat Completions sends no state.
	msgs, err := ChatMessages([]sessionstore.Event{sessionstore.UserText("q"),
		sessionstore.AssistantMessage(sessionstore.Message{Content: "x", ProviderState: []sessionstore.ProviderState{reasoningState(withID)}})})
	require.NoError(t, err)
	assert.NotContains(t, string(wire(t, msgs)), "rs_1")
}

// A reply's reasoning, stored, loaded back and kept after a compaction,
// goes back before its call.
func TestResponsesReasoningRoundTrip(t *testing.T) {
	const reply = `{"id":"resp_1","object":"response","model":"o-test","status":"completed","output":[
	  {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Read it."}],"encrypted_content":"gAAAA=="},
	  {"type":"function_call","id":"fc_1","call_id":"call_1","name":"read_file","arguments":"{\"path\":\"a.go\"}","status":"completed"}]}`
	s := newSession(t, nil)
	s.append(sessionstore.UserText("Earlier."), sessionstore.AssistantText("Earlier answer."))
	s.append(sessionstore.UserText("Read a.go."))
	evs, err := ResponseEvents(unmarshalResponse(t, reply))
	require.NoError(t, err)
	first := s.append(evs[0])
	s.append(evs[1:]...)
	head := s.append(result("call_1", "package a", false))
	want := []map[string]any{
		{"type": "reasoning", "id": "rs_1", "summary": []any{map[string]any{"type": "summary_text", "text": "Read it."}}, "encrypted_content": "gAAAA=="},
		{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "read_file", "arguments": `{"path":"a.go"}`},
	}
	items, err := ResponsesInput(s.load())
	require.NoError(t, err)
	got := decode(t, wire(t, items))
	require.Len(t, got, 6)
	assert.Equal(t, want, got[3:5])

	_, err = s.st.Compact(context.Background(), s.id, sessionstore.Compaction{Summary: sessionstore.Summary{Text: "s"}, FirstKept: first.ID, Head: head.ID})
	require.NoError(t, err)
	items, err = ResponsesInput(s.load())
	require.NoError(t, err)
	got = decode(t, wire(t, items))
	require.Len(t, got, 4, "summary, reasoning, call, output")
	assert.Equal(t, want, got[1:3], "the kept turn keeps its reasoning")
	assert.NotContains(t, got[0]["content"].([]any)[0].(map[string]any)["text"], "gAAAA")
}

// A reasoning item is sent with its id only right before the item it
// preceded: reasoning that preceded nothing the input sends (output's end,
// or a message item a later event of the turn joined into the first) is
// not paired with the message that carries it, but sent without its id
// when it holds encrypted content, and left out when it does not.
func TestResponsesInputReasoningPairedWithItsOwnItem(t *testing.T) {
	ids := func(items []map[string]any) []string {
		var out []string
		for _, it := range items {
			id, _ := it["id"].(string)
			out = append(out, it["type"].(string)+":"+id)
		}
		return out
	}
	// The reply's last reasoning (rs_d, no encrypted content) preceded
	// nothing: it is not sent.
	evs, err := ResponseEvents(unmarshalResponse(t, reasoningJSON))
	require.NoError(t, err)
	all := append([]sessionstore.Event{sessionstore.UserText("q")}, evs...)
	all = append(all, result("call_1", "r", false), result("call_2", "r", false))
	items, err := ResponsesInput(all)
	require.NoError(t, err)
	assert.Equal(t, []string{"message:", "reasoning:rs_a", "message:msg_1", "function_call:", "reasoning:rs_b", "function_call:fc_2",
		"function_call_output:", "function_call_output:"}, ids(decode(t, wire(t, items))))

	// Two replies of one turn (a reply, then its continuation): the
	// second's reasoning preceded a message item not sent as such.
	text := func(rs, enc, msg, say string) string {
		return `{"id":"resp_` + msg + `","object":"response","model":"o-test","status":"completed","output":[
		  {"type":"reasoning","id":"` + rs + `","summary":[]` + enc + `},
		  {"type":"message","id":"` + msg + `","role":"assistant","status":"completed","content":[{"type":"output_text","text":"` + say + `","annotations":[]}]}]}`
	}
	for name, tt := range map[string]struct {
		enc  string
		want []string
	}{
		"encrypted: sent without its id": {enc: `,"encrypted_content":"enc2"`, want: []string{"message:", "reasoning:", "reasoning:rs_1", "message:msg_1"}},
		"not encrypted: left out":        {want: []string{"message:", "reasoning:rs_1", "message:msg_1"}},
	} {
		first, err := ResponseEvents(unmarshalResponse(t, text("rs_1", `,"encrypted_content":"enc1"`, "msg_1", "Part one.")))
		require.NoError(t, err)
		second, err := ResponseEvents(unmarshalResponse(t, text("rs_2", tt.enc, "msg_2", "Part two.")))
		require.NoError(t, err)
		items, err := ResponsesInput(append(append([]sessionstore.Event{sessionstore.UserText("q")}, first...), second...))
		require.NoError(t, err)
		got := decode(t, wire(t, items))
		assert.Equal(t, tt.want, ids(got), name)
		if tt.enc != "" {
			assert.Equal(t, "enc2", got[1]["encrypted_content"], name)
		}
	}
}
