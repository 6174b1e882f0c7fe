package convo

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func announce(calls ...sessionstore.ToolCall) sessionstore.Event {
	return sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: calls})
}

// The pairing rules on the orders a harness or an importer writes events
// in: each call is sent once and answered once, by its real result when
// the context holds it.
func TestReviewBuildOrders(t *testing.T) {
	a, b := call("a", "read"), call("b", "read")
	argsB := b
	argsB.Arguments = json.RawMessage(`{"path":"other.go"}`)
	tests := []struct {
		name                 string
		events               []sessionstore.Event
		want                 []string
		dropped, synthesized int
	}{
		{
			name:   "results in another order than the calls",
			events: []sessionstore.Event{sessionstore.UserText("u"), announce(a, b), result("b", "B"), result("a", "A")},
			want:   []string{"user:u", "assistant: call(a) call(b)", "tool: result(b=B)", "tool: result(a=A)"},
		},
		{
			name: "a call event recorded after another call's result",
			events: []sessionstore.Event{sessionstore.UserText("u"), announce(a, b),
				sessionstore.ToolCallEvent(a), result("a", "A"), sessionstore.ToolCallEvent(b), result("b", "B")},
			want: []string{"user:u", "assistant: call(a) call(b)", "tool: result(a=A)", "tool: result(b=B)"},
		},
		{
			name: "a call event after the result of its id is a new call that uses the id again",
			events: []sessionstore.Event{sessionstore.UserText("u"), sessionstore.ToolCallEvent(a),
				result("a", "A1"), sessionstore.ToolCallEvent(a), result("a", "A2")},
			want: []string{"user:u", "assistant: call(a)", "tool: result(a=A1)", "assistant: call(a)", "tool: result(a=A2)"},
		},
		{
			name: "a call event with other arguments than announced keeps the announced ones",
			events: []sessionstore.Event{sessionstore.UserText("u"), announce(a, b),
				sessionstore.ToolCallEvent(a), result("a", "A"), sessionstore.ToolCallEvent(argsB), result("b", "B")},
			want: []string{"user:u", "assistant: call(a) call(b)", "tool: result(a=A)", "tool: result(b=B)"},
		},
		{
			name: "an id reused by a later turn pairs with that turn",
			events: []sessionstore.Event{sessionstore.UserText("u"), announce(a), result("a", "A1"),
				announce(a), result("a", "A2")},
			want: []string{"user:u", "assistant: call(a)", "tool: result(a=A1)", "assistant: call(a)", "tool: result(a=A2)"},
		},
		{
			name: "a result after the user moved on is dropped, not sent twice",
			events: []sessionstore.Event{sessionstore.UserText("u"), announce(a), sessionstore.UserText("stop"),
				result("a", "late")},
			want:        []string{"user:u", "assistant: call(a)", "tool: result(a=" + MissingResult + ")", "user:stop"},
			dropped:     1,
			synthesized: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(ids(tt.events...), nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, shape(c))
			assert.Equal(t, tt.dropped, c.Dropped, "dropped")
			assert.Equal(t, tt.synthesized, c.Synthesized, "synthesized")
			assert.Empty(t, c.Pending)
			for _, m := range c.Messages {
				for _, tc := range m.ToolCalls {
					if tc.CallID == "b" {
						assert.JSONEq(t, string(b.Arguments), string(tc.Arguments))
					}
				}
			}
		})
	}
}

// A compaction whose kept events start inside a turn, and a branch
// summary right after a call, as Load returns them from a store.
func TestReviewBuildStoreCuts(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()

	t.Run("kept events start at a result", func(t *testing.T) {
		m, err := st.Create(ctx, sessionstore.Meta{})
		require.NoError(t, err)
		evs, err := st.AppendBatch(ctx, m.ID, sessionstore.UserText("read"), announce(call("a", "read")),
			sessionstore.ToolCallEvent(call("a", "read")), result("a", "A"), sessionstore.AssistantText("read it"))
		require.NoError(t, err)
		_, err = st.Compact(ctx, m.ID, sessionstore.Compaction{Summary: sessionstore.Summary{Text: "s"}, FirstKept: evs[3].ID, Head: evs[4].ID})
		require.NoError(t, err)
		_, err = st.Append(ctx, m.ID, sessionstore.UserText("next"))
		require.NoError(t, err)
		loaded, err := st.Load(ctx, m.ID)
		require.NoError(t, err)
		c, err := Build(loaded, &Options{Summary: func(_ sessionstore.Kind, s sessionstore.Summary) string { return s.Text }})
		require.NoError(t, err)
		assert.Equal(t, []string{"user:s", "assistant:read it", "user:next"}, shape(c))
		assert.Equal(t, 1, c.Dropped)
	})
	t.Run("kept events start at a call event", func(t *testing.T) {
		m, err := st.Create(ctx, sessionstore.Meta{})
		require.NoError(t, err)
		evs, err := st.AppendBatch(ctx, m.ID, sessionstore.UserText("read"), announce(call("a", "read")),
			sessionstore.ToolCallEvent(call("a", "read")), result("a", "A"))
		require.NoError(t, err)
		_, err = st.Compact(ctx, m.ID, sessionstore.Compaction{Summary: sessionstore.Summary{Text: "s"}, FirstKept: evs[2].ID, Head: evs[3].ID})
		require.NoError(t, err)
		loaded, err := st.Load(ctx, m.ID)
		require.NoError(t, err)
		c, err := Build(loaded, &Options{Summary: func(_ sessionstore.Kind, s sessionstore.Summary) string { return s.Text }})
		require.NoError(t, err)
		assert.Equal(t, []string{"user:s", "assistant: call(a)", "tool: result(a=A)"}, shape(c))
		assert.Zero(t, c.Dropped)
	})
	t.Run("branch summary after a call", func(t *testing.T) {
		m, err := st.Create(ctx, sessionstore.Meta{})
		require.NoError(t, err)
		evs, err := st.AppendBatch(ctx, m.ID, sessionstore.UserText("read"), announce(call("a", "read")),
			sessionstore.ToolCallEvent(call("a", "read")), result("a", "A"))
		require.NoError(t, err)
		_, err = st.AppendBranchSummary(ctx, m.ID, evs[2].ID, sessionstore.BranchSummaryRecord{Summary: sessionstore.Summary{Text: "left"}})
		require.NoError(t, err)
		loaded, err := st.Load(ctx, m.ID)
		require.NoError(t, err)
		c, err := Build(loaded, &Options{Summary: func(_ sessionstore.Kind, s sessionstore.Summary) string { return s.Text }})
		require.NoError(t, err)
		assert.Equal(t, []string{"user:read", "assistant: call(a)", "tool: result(a=" + MissingResult + ")", "user:left"}, shape(c))
		assert.Equal(t, 1, c.Synthesized)
	})
}
