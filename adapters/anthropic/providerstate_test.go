package anthropicadapter

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/convo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The thinking blocks of a reply are its provider state, in block order,
// each the block's JSON as the API returned it; the record has no other
// member for them.
func TestEventsProviderState(t *testing.T) {
	evs, err := Events(unmarshalMessage(t, messageJSON))
	require.NoError(t, err)
	m, err := evs[0].Message()
	require.NoError(t, err)
	assert.Equal(t, []sessionstore.ProviderState{
		{Provider: "anthropic", Type: "thinking", Data: []byte(`{"type": "thinking", "thinking": "Both files are needed.", "signature": "sig-abc"}`)},
		{Provider: "anthropic", Type: "redacted_thinking", Data: []byte(`{"type": "redacted_thinking", "data": "ENCRYPTED"}`)},
	}, m.ProviderState)
	assert.NotContains(t, string(evs[0].Record), ThinkingField)
	assert.NotContains(t, m.Content, "sig-abc", "the state is never text")
}

// legacyRecord is an assistant message's record as earlier versions of
// Events wrote it: the thinking blocks under ThinkingField.
type legacyRecord struct {
	sessionstore.Message
	Thinking []ThinkingBlock `json:"anthropic_thinking,omitempty"`
}

// A session written before ProviderState keeps its signed thinking under
// ThinkingField: Messages still sends it, stored and loaded back.
func TestMessagesLegacyThinkingField(t *testing.T) {
	s := newSession(t, nil)
	s.append(sessionstore.UserText("Read a.go."))
	s.append(sessionstore.NewEvent(sessionstore.KindMessage, sessionstore.RoleAssistant, legacyRecord{
		Message:  sessionstore.Message{Reasoning: "Read it.", ToolCalls: []sessionstore.ToolCall{tc("toolu_1", "read_file", `{"path":"a.go"}`)}},
		Thinking: []ThinkingBlock{{Type: "thinking", Thinking: "Read it.", Signature: "sig-old"}, {Type: "redacted_thinking", Data: "ENC"}},
	}), sessionstore.ToolCallEvent(tc("toolu_1", "read_file", `{"path":"a.go"}`)))
	s.append(result("toolu_1", "package a", false))
	msgs, err := Messages(s.load())
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	checkAPIRules(t, got)
	require.Len(t, got, 3)
	asst := blocks(got[1])
	require.Len(t, asst, 3)
	assert.Equal(t, map[string]any{"type": "thinking", "thinking": "Read it.", "signature": "sig-old"}, asst[0])
	assert.Equal(t, map[string]any{"type": "redacted_thinking", "data": "ENC"}, asst[1])
	assert.Equal(t, "tool_use", asst[2]["type"])
}

// Only Anthropic's state is sent; thinking state whose Data is not a block
// is an error of Messages, naming the message, and left out by
// MessagesOf.
func TestMessagesProviderStateFilter(t *testing.T) {
	call := tc("toolu_1", "read_file", `{}`)
	call.ProviderState = []sessionstore.ProviderState{{Provider: "gemini", Type: "thought_signature", Data: []byte("g")}}
	other := []sessionstore.ProviderState{
		{Provider: "openai", Type: "reasoning", Data: []byte(`{"type":"reasoning","id":"rs_1"}`)},
		{Provider: "anthropic", Type: "thinking", Data: []byte(`{"type":"thinking","thinking":"t","signature":"s"}`)},
		{Provider: "anthropic", Type: "other", Data: []byte(`{"type":"other"}`)},
	}
	evs := []sessionstore.Event{sessionstore.UserText("q"),
		sessionstore.AssistantMessage(sessionstore.Message{Content: "x", ToolCalls: []sessionstore.ToolCall{call}, ProviderState: other}),
		sessionstore.ToolCallEvent(call), result("toolu_1", "r", false)}
	for i := range evs {
		evs[i].ID = uuid.Must(uuid.NewV7())
	}
	msgs, err := Messages(evs)
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	asst := blocks(got[1])
	require.Len(t, asst, 3)
	assert.Equal(t, map[string]any{"type": "thinking", "thinking": "t", "signature": "s"}, asst[0])
	assert.Equal(t, "text", asst[1]["type"])
	assert.Equal(t, "tool_use", asst[2]["type"])

	for name, data := range map[string]string{"not JSON": `{"type":"thinking"`, "another block": `{"type":"text","text":"x"}`} {
		bad := []sessionstore.ProviderState{{Provider: "anthropic", Type: "thinking", Data: []byte(data)}}
		evs[1] = sessionstore.AssistantMessage(sessionstore.Message{Content: "x", ToolCalls: []sessionstore.ToolCall{call}, ProviderState: bad})
		evs[1].ID = uuid.Must(uuid.NewV7())
		_, err = Messages(evs)
		require.Error(t, err, name)
		assert.Contains(t, err.Error(), evs[1].ID.String(), name)
		c, err := convo.Build(evs, nil)
		require.NoError(t, err)
		asst := blocks(decode(t, wire(t, MessagesOf(c)))[1])
		assert.Equal(t, "text", asst[0]["type"], "%s: left out by MessagesOf", name)
	}
}

// A turn kept after a compaction still sends its signed thinking.
func TestMessagesThinkingAfterCompaction(t *testing.T) {
	s := newSession(t, nil)
	s.append(sessionstore.UserText("Earlier question."), sessionstore.AssistantText("Earlier answer."))
	s.append(sessionstore.UserText("Read a.go and b.go."))
	evs, err := Events(unmarshalMessage(t, messageJSON))
	require.NoError(t, err)
	s.append(evs...)
	head := s.append(result("toolu_1", "package a", false), result("toolu_2", "no such file", true))
	loaded := s.load()
	firstKept := loaded[len(loaded)-len(evs)-2] // the reply's message
	require.Equal(t, sessionstore.KindMessage, firstKept.Kind)
	require.Equal(t, sessionstore.RoleAssistant, firstKept.Role)
	_, err = s.st.Compact(context.Background(), s.id, sessionstore.Compaction{Summary: sessionstore.Summary{Text: "s"}, FirstKept: firstKept.ID, Head: head.ID})
	require.NoError(t, err)
	msgs, err := Messages(s.load())
	require.NoError(t, err)
	got := decode(t, wire(t, msgs))
	require.Len(t, got, 3, "summary, the kept turn, its results")
	sent := decode(t, []byte("["+messageJSON+"]"))[0]
	assert.Equal(t, sent["content"], got[1]["content"], "the kept turn is sent with its thinking")
}

// The thinking state's Data decodes as the block it holds.
func TestThinkingStateData(t *testing.T) {
	r, err := Reply(unmarshalMessage(t, messageJSON))
	require.NoError(t, err)
	for _, st := range r.ProviderState {
		var b ThinkingBlock
		require.NoError(t, json.Unmarshal(st.Data, &b))
		assert.Equal(t, st.Type, b.Type)
	}
}

// The ids of a request's tool_use blocks cost work in proportion to the
// calls, not to the square of the turns that repeat one id (calls that
// came without one, or a derived id another adapter wrote): the
// allocations per call stay the same as the session grows.
func TestCallIDsLinear(t *testing.T) {
	perCall := func(n int, id string) float64 {
		return testing.AllocsPerRun(3, func() {
			ids := callIDs{used: map[string]bool{}}
			for range n {
				ids.turn = map[string]string{}
				ids.call(id)
			}
		}) / float64(n)
	}
	for _, id := range []string{"", "toolu_1"} {
		small, large := perCall(100, id), perCall(2000, id)
		assert.Less(t, large, 2*small+1, "id %q: allocations per call %.1f for 100 calls, %.1f for 2000", id, small, large)
	}
	ids := callIDs{used: map[string]bool{}, turn: map[string]string{}}
	var sent []string
	for _, id := range []string{"", "", "toolu", "a.b", "a_b", "a_b_2", "a.b"} {
		sent = append(sent, ids.call(id))
	}
	assert.Equal(t, []string{"toolu", "toolu_2", "toolu_3", "a_b", "a_b_2", "a_b_2_2", "a_b_3"}, sent)
}
