package sessionstore

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// CompactWith never keeps a reply's tool_call events without the
// assistant message that announced them: that message holds the reply's
// message-level provider state (Anthropic's signed thinking, which the API
// wants at the start of the turn whose tool results follow), so a kept
// call without it would be a turn without its state. Whatever the budget,
// a kept call's announcing message is kept, with its state, or the call
// is not kept.
func TestCompactWithKeepsAnnouncingMessageOfKeptCalls(t *testing.T) {
	ctx := context.Background()
	think := ProviderState{Provider: "anthropic", Type: "thinking", Data: []byte(`{"type":"thinking","thinking":"t","signature":"s"}`)}
	call := func(id string) ToolCall {
		return ToolCall{CallID: id, Name: "read", Arguments: json.RawMessage(`{"p":"` + id + `"}`)}
	}
	turns := map[string][]Event{
		"one call": {
			UserText("read a"),
			AssistantMessage(Message{ProviderState: []ProviderState{think}, ToolCalls: []ToolCall{call("a")}}),
			ToolCallEvent(call("a")),
			ToolResultEvent(ToolResult{CallID: "a", Output: "A"}),
		},
		"parallel calls, each recorded as it runs": {
			UserText("read a and b"),
			AssistantMessage(Message{Content: "Reading both.", ProviderState: []ProviderState{think}, ToolCalls: []ToolCall{call("a"), call("b")}}),
			ToolCallEvent(call("a")),
			ToolResultEvent(ToolResult{CallID: "a", Output: "A"}),
			ToolCallEvent(call("b")),
			ToolResultEvent(ToolResult{CallID: "b", Output: "B"}),
		},
	}
	for name, turn := range turns {
		for keep := 0; keep <= len(turn); keep++ {
			_, s, id := memSession(t, Options{})
			appended, err := s.AppendBatch(ctx, id, turn...)
			require.NoError(t, err)
			reply := appended[1].ID
			one := func(Event) int64 { return 1 }
			_, err = s.CompactWith(ctx, id, testSummarizer{}, CompactOptions{KeepTokens: int64(keep), Tokens: one})
			require.NoError(t, err)
			got, err := s.Load(ctx, id)
			require.NoError(t, err)
			kept := map[uuid.UUID]bool{}
			for _, ev := range got[1:] {
				kept[ev.ID] = true
			}
			for _, ev := range got[1:] {
				switch {
				case ev.Kind == KindToolCall:
					assert.True(t, kept[reply], "%s, budget %d: call event %s kept without the message that announced it", name, keep, ev.ID)
				case ev.ID == reply:
					m, err := ev.Message()
					require.NoError(t, err)
					assert.Equal(t, []ProviderState{think}, m.ProviderState, "%s, budget %d", name, keep)
				}
			}
			require.NoError(t, s.Close())
		}
	}
}
