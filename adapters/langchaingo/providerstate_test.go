package langchaingo

import (
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/tmc/langchaingo/llms"
)

// A call without an id gets the same derived id in every turn that makes
// it: the request names each call once, its result the same, and the
// same events give the same ids in every request.
func TestMessagesDerivedIDsAcrossTurns(t *testing.T) {
	resp := func() *llms.ContentResponse {
		return &llms.ContentResponse{Choices: []*llms.ContentChoice{{ToolCalls: []llms.ToolCall{lcCall("", "read", `{"p":1}`), lcCall("", "read", `{"p":2}`)}}}}
	}
	var evs []sessionstore.Event
	var stored []string
	for _, q := range []string{"first", "second", "third"} {
		r, err := Reply(resp())
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
		for _, p := range m.Parts {
			switch p := p.(type) {
			case llms.ToolCall:
				assert.False(t, sent[p.ID], "call id %s sent twice", p.ID)
				sent[p.ID] = true
				callIDs = append(callIDs, p.ID)
			case llms.ToolCallResponse:
				assert.True(t, sent[p.ToolCallID], "result %s answers a call sent before it", p.ToolCallID)
				answer[p.ToolCallID] = p.Content
			}
		}
	}
	require.Len(t, callIDs, 6)
	assert.Equal(t, stored[:2], callIDs[:2], "the first turn keeps its ids")
	assert.Equal(t, "second {\"p\":1}", answer[callIDs[2]], "each result answers its own turn's call")
	assert.Equal(t, "third {\"p\":2}", answer[callIDs[5]])

	again, err := Messages(evs)
	require.NoError(t, err)
	assert.Equal(t, msgs, again, "the same events, the same ids")
	more, err := Messages(append(evs, ids(sessionstore.UserText("fourth"))...))
	require.NoError(t, err)
	assert.Equal(t, msgs, more[:len(msgs)], "a longer session does not change the ids of its earlier turns")
	assert.NotEqual(t, stored[0], callIDs[2], "the repeated id is renamed")
	assert.Equal(t, sessionstore.ToolCall{CallID: stored[0], Name: "read", Arguments: []byte(`{"p":1}`)}, mustCall(t, evs[1]), "the session keeps the stored id")
}

func mustCall(t *testing.T, ev sessionstore.Event) sessionstore.ToolCall {
	t.Helper()
	m, err := ev.Message()
	require.NoError(t, err)
	require.NotEmpty(t, m.ToolCalls)
	return m.ToolCalls[0]
}

// The anthropic provider's signed thinking is kept as provider state in
// the anthropic adapter's shape; thinking without a signature is not.
func TestReplyAllThinkingSignature(t *testing.T) {
	resp := &llms.ContentResponse{Choices: []*llms.ContentChoice{
		{GenerationInfo: map[string]any{"ThinkingContent": "plan", "ThinkingSignature": "sig-1", "InputTokens": 9}},
		{Content: "Looking.", GenerationInfo: map[string]any{"ThinkingContent": "from tags"}},
		{ToolCalls: []llms.ToolCall{lcCall("t1", "ls", `{}`)}},
	}}
	got, err := ReplyAll(resp)
	require.NoError(t, err)
	assert.Equal(t, []sessionstore.ProviderState{{Provider: "anthropic", Type: "thinking",
		Data: []byte(`{"type":"thinking","thinking":"plan","signature":"sig-1"}`)}}, got.ProviderState)
	assert.Equal(t, "Looking.", got.Text, "the state is never text")

	// Messages has no part to send it in.
	msgs, err := Messages(ids(append([]sessionstore.Event{sessionstore.UserText("q")}, got.Events()...)...))
	require.NoError(t, err)
	for _, m := range msgs {
		for _, p := range m.Parts {
			if tc, ok := p.(llms.TextContent); ok {
				assert.NotContains(t, tc.Text, "sig-1")
			}
		}
	}
}
