package convo

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ids gives each event an id, as the store would, so Build can name them.
func ids(evs ...sessionstore.Event) []sessionstore.Event {
	for i := range evs {
		evs[i].ID = uuid.Must(uuid.NewV7())
	}
	return evs
}

func call(id, name string) sessionstore.ToolCall {
	return sessionstore.ToolCall{CallID: id, Name: name, Arguments: json.RawMessage(`{"path":"a.go"}`)}
}

func result(id, out string) sessionstore.Event {
	return sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: id, Output: out})
}

// shape is a compact view of a Context for table checks.
func shape(c Context) []string {
	var out []string
	for _, m := range c.Messages {
		s := string(m.Role) + ":" + m.Text
		for _, tc := range m.ToolCalls {
			s += " call(" + tc.CallID + ")"
		}
		if m.Result != nil {
			s += " result(" + m.Result.CallID + "=" + m.Result.Output + ")"
		}
		out = append(out, s)
	}
	return out
}

func TestBuild(t *testing.T) {
	reply := func(text string, calls ...sessionstore.ToolCall) []sessionstore.Event {
		return Reply{Text: text, ToolCalls: calls}.Events()
	}
	cat := func(parts ...[]sessionstore.Event) []sessionstore.Event {
		var out []sessionstore.Event
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	one := func(e sessionstore.Event) []sessionstore.Event { return []sessionstore.Event{e} }
	tests := []struct {
		name                 string
		events               []sessionstore.Event
		want                 []string
		pending              []string
		dropped, synthesized int
	}{
		{
			name:   "plain turns",
			events: cat(one(sessionstore.UserText("hi")), reply("hello")),
			want:   []string{"user:hi", "assistant:hello"},
		},
		{
			name: "calls announced and recorded are one turn, results follow",
			events: cat(one(sessionstore.UserText("read")), reply("reading", call("a", "read"), call("b", "read")),
				one(result("a", "A")), one(result("b", "B")), reply("done")),
			want: []string{"user:read", "assistant:reading call(a) call(b)", "tool: result(a=A)", "tool: result(b=B)", "assistant:done"},
		},
		{
			name:    "calls without results at the end are pending",
			events:  cat(one(sessionstore.UserText("read")), reply("", call("a", "read"), call("b", "read")), one(result("a", "A"))),
			want:    []string{"user:read", "assistant: call(a) call(b)", "tool: result(a=A)"},
			pending: []string{"b"},
		},
		{
			name:        "a call left without result when the user speaks gets a synthetic one",
			events:      cat(reply("", call("a", "read")), one(sessionstore.UserText("stop"))),
			want:        []string{"assistant: call(a)", "tool: result(a=" + MissingResult + ")", "user:stop"},
			synthesized: 1,
		},
		{
			name:    "an orphan result is dropped",
			events:  cat(one(sessionstore.UserText("x")), one(result("zz", "lost"))),
			want:    []string{"user:x"},
			dropped: 1,
		},
		{
			name:   "a call event without an announcing message starts a turn",
			events: cat(one(sessionstore.UserText("x")), one(sessionstore.ToolCallEvent(call("c", "ls"))), one(result("c", "C"))),
			want:   []string{"user:x", "assistant: call(c)", "tool: result(c=C)"},
		},
		{
			name: "a transcript that stores each block apart joins one turn",
			events: cat(one(sessionstore.UserText("go")), one(sessionstore.AssistantText("part one")),
				reply("", call("a", "read")), reply("", call("b", "grep")), one(result("a", "A")), one(result("b", "B"))),
			want: []string{"user:go", "assistant:part one call(a) call(b)", "tool: result(a=A)", "tool: result(b=B)"},
		},
		{
			name: "a call after results starts the next turn",
			events: cat(reply("", call("a", "read")), one(result("a", "A")),
				one(sessionstore.ToolCallEvent(call("b", "read"))), one(result("b", "B"))),
			want: []string{"assistant: call(a)", "tool: result(a=A)", "assistant: call(b)", "tool: result(b=B)"},
		},
		{
			name:   "custom events are left out",
			events: cat(one(sessionstore.NewEvent(sessionstore.KindCustom, sessionstore.RoleNone, map[string]int{"n": 1})), one(sessionstore.UserText("x"))),
			want:   []string{"user:x"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(ids(tt.events...), nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, shape(c))
			var pending []string
			for _, p := range c.Pending {
				pending = append(pending, p.CallID)
			}
			assert.Equal(t, tt.pending, pending)
			assert.Equal(t, tt.dropped, c.Dropped, "dropped")
			assert.Equal(t, tt.synthesized, c.Synthesized, "synthesized")
		})
	}
}

func TestBuildSummaries(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	m, err := st.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	first, err := st.AppendBatch(ctx, m.ID, sessionstore.UserText("long history"), sessionstore.AssistantText("ok"))
	require.NoError(t, err)
	_, err = st.Compact(ctx, m.ID, sessionstore.Compaction{
		Summary: sessionstore.Summary{Text: "We fixed the parser.", Decisions: []string{"keep v2"}},
		Head:    first[1].ID,
	})
	require.NoError(t, err)
	_, err = st.Append(ctx, m.ID, sessionstore.UserText("next"))
	require.NoError(t, err)
	evs, err := st.Load(ctx, m.ID)
	require.NoError(t, err)

	c, err := Build(evs, nil)
	require.NoError(t, err)
	require.Len(t, c.Messages, 2)
	assert.Equal(t, sessionstore.RoleUser, c.Messages[0].Role)
	assert.Equal(t, sessionstore.KindCompaction, c.Messages[0].Summary)
	assert.Contains(t, c.Messages[0].Text, "compacted")
	assert.Contains(t, c.Messages[0].Text, "We fixed the parser.\n\nDecisions:\n- keep v2")
	assert.Equal(t, "next", c.Messages[1].Text)

	c, err = Build(evs, &Options{Summary: func(k sessionstore.Kind, s sessionstore.Summary) string { return string(k) + "|" + s.Text }})
	require.NoError(t, err)
	assert.Equal(t, "compaction|We fixed the parser.", c.Messages[0].Text)
}

func TestBuildUnresolvedBlob(t *testing.T) {
	ev := sessionstore.Event{ID: uuid.Must(uuid.NewV7()), Kind: sessionstore.KindToolResult, Digest: "sha256:00", Size: 10}
	_, err := Build([]sessionstore.Event{ev}, nil)
	assert.ErrorIs(t, err, ErrUnresolved)
}

func TestBuildBadRecord(t *testing.T) {
	ev := sessionstore.Event{ID: uuid.Must(uuid.NewV7()), Kind: sessionstore.KindMessage, Role: sessionstore.RoleUser, Record: json.RawMessage(`[1]`)}
	_, err := Build([]sessionstore.Event{ev}, nil)
	assert.ErrorContains(t, err, ev.ID.String())
}

func TestReplyEvents(t *testing.T) {
	signedCall := call("a", "read")
	signedCall.ProviderState = []sessionstore.ProviderState{{Provider: "gemini", Type: "thought_signature", Data: []byte{1, 2}}}
	think := []sessionstore.ProviderState{{Provider: "anthropic", Type: "thinking", Data: []byte(`{"type":"thinking"}`)}}
	r := Reply{Text: "t", Reasoning: "r", Model: "m", Usage: &sessionstore.Usage{InputTokens: 3}, ToolCalls: []sessionstore.ToolCall{signedCall}, ProviderState: think}
	evs := r.Events()
	require.Len(t, evs, 2)
	msg, err := evs[0].Message()
	require.NoError(t, err)
	assert.Equal(t, sessionstore.Message{Content: "t", Reasoning: "r", Model: "m", Usage: &sessionstore.Usage{InputTokens: 3}, ToolCalls: r.ToolCalls, ProviderState: think}, msg)
	c, err := evs[1].ToolCall()
	require.NoError(t, err)
	assert.Equal(t, signedCall, c, "the call event carries the call's state")

	// The events round-trip: built back, they are the reply's turn.
	got, err := Build(ids(evs...), nil)
	require.NoError(t, err)
	require.Len(t, got.Messages, 1)
	assert.Equal(t, "t", got.Messages[0].Text)
	assert.Equal(t, "r", got.Messages[0].Reasoning)
	assert.Equal(t, think, got.Messages[0].ProviderState)
	assert.Equal(t, r.ToolCalls, got.Messages[0].ToolCalls)
	assert.Len(t, got.Messages[0].Events, 2)
	assert.Equal(t, r.ToolCalls, got.Pending)
}

func TestRenderSummary(t *testing.T) {
	assert.Equal(t, "", RenderSummary(sessionstore.Summary{}))
	assert.Equal(t, "Goals:\n- a\n- b\n\nFacts:\n- x=1", RenderSummary(sessionstore.Summary{Goals: []string{"a", "b"}, Facts: []string{"x=1"}}))
}

func TestBuildCustom(t *testing.T) {
	custom := sessionstore.NewEvent(sessionstore.KindCustom, sessionstore.RoleNone, map[string]string{"say": "x"})
	evs := ids(sessionstore.UserText("go"), custom, result("k", "K"))
	asCall := &Options{Custom: func(ev sessionstore.Event) (Message, bool) {
		return Message{Role: sessionstore.RoleAssistant, ToolCalls: []sessionstore.ToolCall{call("k", "ls")}, Events: []uuid.UUID{ev.ID}}, true
	}}
	c, err := Build(evs, asCall)
	require.NoError(t, err)
	assert.Equal(t, []string{"user:go", "assistant: call(k)", "tool: result(k=K)"}, shape(c), "a mapped call is paired with its result")
	assert.Zero(t, c.Dropped)

	asTool := &Options{Custom: func(sessionstore.Event) (Message, bool) { return Message{Role: sessionstore.RoleTool}, true }}
	_, err = Build(evs, asTool)
	assert.ErrorIs(t, err, ErrCustomRole)
}
