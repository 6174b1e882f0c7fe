package eino

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/cloudwego/eino/schema"
	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requestID is a value of a named type, as a model keeps in Extra.
type requestID string

// The Extra maps of a reply are its provider state, put back into the
// request's messages as a JSON round trip of the message gives them.
func TestExtraRoundTrip(t *testing.T) {
	sig := []byte{0xff, 0, 's'}
	out := &schema.Message{Role: schema.Assistant, Content: "Reading.", ReasoningContent: "plan",
		Extra: map[string]any{"_eino_claude_thinking": "plan", "_eino_claude_thinking_signature": "sig-1",
			"request-id": requestID("req-9"), "unencodable": func() {}},
		ToolCalls: []schema.ToolCall{
			{ID: "c1", Type: "function", Function: schema.FunctionCall{Name: "read", Arguments: `{}`}, Extra: map[string]any{"thought_signature": sig}},
			{ID: "c2", Type: "function", Function: schema.FunctionCall{Name: "read", Arguments: `{"p":2}`}},
		}}
	r, err := Reply(out)
	require.NoError(t, err)
	assert.Equal(t, []sessionstore.ProviderState{{Provider: "eino", Type: "extra",
		Data: []byte(`{"_eino_claude_thinking":"plan","_eino_claude_thinking_signature":"sig-1","request-id":"req-9"}`)}}, r.ProviderState)
	assert.Equal(t, []sessionstore.ProviderState{{Provider: "eino", Type: "extra",
		Data: []byte(`{"thought_signature":"` + base64.StdEncoding.EncodeToString(sig) + `"}`)}}, r.ToolCalls[0].ProviderState)
	assert.Nil(t, r.ToolCalls[1].ProviderState)
	assert.Equal(t, "Reading.", r.Text, "the state is never text")

	evs := cat(sessionstore.UserText("q"), r.Events(), result("c1", "A", false), result("c2", "B", false))
	msgs, err := Messages(ids(evs...))
	require.NoError(t, err)
	require.Len(t, msgs, 4)
	assert.Equal(t, map[string]any{"_eino_claude_thinking": "plan", "_eino_claude_thinking_signature": "sig-1", "request-id": "req-9"}, msgs[1].Extra)
	assert.Equal(t, map[string]any{"thought_signature": base64.StdEncoding.EncodeToString(sig)}, msgs[1].ToolCalls[0].Extra)
	assert.Nil(t, msgs[1].ToolCalls[1].Extra)

	// Other providers' state is not put back; a turn of several events
	// merges its Extra, later entries winning.
	other := sessionstore.ProviderState{Provider: "anthropic", Type: "thinking", Data: []byte(`{"type":"thinking"}`)}
	evs = []sessionstore.Event{sessionstore.UserText("q"),
		sessionstore.AssistantMessage(sessionstore.Message{Reasoning: "t", ProviderState: []sessionstore.ProviderState{other,
			{Provider: "eino", Type: "extra", Data: []byte(`{"a":"1","b":"1"}`)}}}),
		sessionstore.AssistantMessage(sessionstore.Message{Content: "x", ProviderState: []sessionstore.ProviderState{
			{Provider: "eino", Type: "extra", Data: []byte(`{"b":"2"}`)}}})}
	msgs, err = Messages(ids(evs...))
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	assert.Equal(t, map[string]any{"a": "1", "b": "2"}, msgs[1].Extra)

	// Extra state that is not a JSON object: an error naming the message.
	evs[2] = sessionstore.AssistantMessage(sessionstore.Message{Content: "x", ProviderState: []sessionstore.ProviderState{
		{Provider: "eino", Type: "extra", Data: []byte(`[1]`)}}})
	evs[2].ID = uuid.Must(uuid.NewV7())
	_, err = Messages(evs)
	require.Error(t, err)
	assert.Contains(t, err.Error(), evs[1].ID.String())
}

// A call without an id gets the same derived id in every turn that makes
// it: the request names each call once, its result the same, and the
// same events give the same ids in every request.
func TestMessagesDerivedIDsAcrossTurns(t *testing.T) {
	var evs []sessionstore.Event
	var stored []string
	for _, q := range []string{"first", "second", "third"} {
		r, err := Reply(asst("", ecall("", "read", `{"p":1}`), ecall("", "read", `{"p":2}`)))
		require.NoError(t, err)
		evs = append(evs, sessionstore.UserText(q))
		evs = append(evs, r.Events()...)
		for _, c := range r.ToolCalls {
			evs = append(evs, result(c.CallID, q+" "+string(c.Arguments), false))
			stored = append(stored, c.CallID)
		}
	}
	require.Equal(t, stored[0], stored[2], "the derivation repeats across turns")
	evs = ids(evs...)

	msgs, err := Messages(evs)
	require.NoError(t, err)
	sent := map[string]bool{}
	var callIDs []string
	answer := map[string]string{}
	for _, m := range msgs {
		for _, c := range m.ToolCalls {
			assert.False(t, sent[c.ID], "call id %s sent twice", c.ID)
			sent[c.ID] = true
			callIDs = append(callIDs, c.ID)
		}
		if m.Role == schema.Tool {
			assert.True(t, sent[m.ToolCallID], "result %s answers a call sent before it", m.ToolCallID)
			answer[m.ToolCallID] = m.Content
		}
	}
	require.Len(t, callIDs, 6)
	assert.Equal(t, stored[:2], callIDs[:2], "the first turn keeps its ids")
	assert.Equal(t, `second {"p":1}`, answer[callIDs[2]], "each result answers its own turn's call")
	assert.Equal(t, `third {"p":2}`, answer[callIDs[5]])

	again, err := Messages(evs)
	require.NoError(t, err)
	assert.Equal(t, msgs, again, "the same events, the same ids")
	more, err := Messages(append(evs, ids(sessionstore.UserText("fourth"))...))
	require.NoError(t, err)
	assert.Equal(t, msgs, more[:len(msgs)], "a longer session does not change the ids of its earlier turns")
}

// A turn kept after a compaction still puts its Extra back.
func TestExtraAfterCompaction(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	m, err := st.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	r, err := Reply(&schema.Message{Role: schema.Assistant, Extra: map[string]any{"_eino_claude_thinking_signature": "sig-1"},
		ToolCalls: []schema.ToolCall{{ID: "c1", Type: "function", Function: schema.FunctionCall{Name: "read", Arguments: `{}`}, Extra: map[string]any{"sig": "s"}}}})
	require.NoError(t, err)
	_, err = st.AppendBatch(ctx, m.ID, sessionstore.UserText("Earlier."), sessionstore.AssistantText("Earlier answer."), sessionstore.UserText("read"))
	require.NoError(t, err)
	kept, err := st.AppendBatch(ctx, m.ID, r.Events()...)
	require.NoError(t, err)
	res, err := st.Append(ctx, m.ID, result("c1", "A", false))
	require.NoError(t, err)
	_, err = st.Compact(ctx, m.ID, sessionstore.Compaction{Summary: sessionstore.Summary{Text: "s"}, FirstKept: kept[0].ID, Head: res.ID})
	require.NoError(t, err)
	evs, err := st.Load(ctx, m.ID)
	require.NoError(t, err)
	msgs, err := Messages(evs)
	require.NoError(t, err)
	require.Len(t, msgs, 3, "summary, the kept turn, its result")
	assert.Equal(t, map[string]any{"_eino_claude_thinking_signature": "sig-1"}, msgs[1].Extra)
	assert.Equal(t, map[string]any{"sig": "s"}, msgs[1].ToolCalls[0].Extra)
}
