package convo

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func state(provider, typ, data string) sessionstore.ProviderState {
	return sessionstore.ProviderState{Provider: provider, Type: typ, Data: []byte(data)}
}

func states(s ...sessionstore.ProviderState) []sessionstore.ProviderState { return s }

func signed(c sessionstore.ToolCall, s ...sessionstore.ProviderState) sessionstore.ToolCall {
	c.ProviderState = s
	return c
}

// The provider state of a reply comes back with its message and calls,
// once, whichever of the announcing message and the call event holds it,
// and never as text.
func TestBuildProviderState(t *testing.T) {
	think := state("anthropic", "thinking", `{"type":"thinking","thinking":"t","signature":"s"}`)
	sigA, sigB := state("gemini", "thought_signature", "\x00A"), state("gemini", "thought_signature", "B")
	rs := state("openai", "reasoning", `{"type":"reasoning","id":"rs_1"}`)
	a, b := call("a", "read"), call("b", "read")
	tests := []struct {
		name      string
		events    []sessionstore.Event
		message   []sessionstore.ProviderState
		calls     map[string][]sessionstore.ProviderState
		text      string
		reasoning string
	}{
		{
			name:    "a reply's events",
			events:  Reply{Text: "x", Reasoning: "r", ProviderState: states(think), ToolCalls: []sessionstore.ToolCall{signed(a, sigA), b}}.Events(),
			message: states(think), calls: map[string][]sessionstore.ProviderState{"a": states(sigA), "b": nil},
			text: "x", reasoning: "r",
		},
		{
			name: "state on the call event only",
			events: []sessionstore.Event{announce(a, b), sessionstore.ToolCallEvent(signed(a, sigA)),
				sessionstore.ToolCallEvent(signed(b, rs, sigB))},
			calls: map[string][]sessionstore.ProviderState{"a": states(sigA), "b": states(rs, sigB)},
		},
		{
			name:   "other state on the event than announced: both, announced first",
			events: []sessionstore.Event{announce(signed(a, sigA)), sessionstore.ToolCallEvent(signed(a, sigB, sigA))},
			calls:  map[string][]sessionstore.ProviderState{"a": states(sigA, sigB)},
		},
		{
			name: "a call event after another call's result still merges",
			events: []sessionstore.Event{announce(a, b), sessionstore.ToolCallEvent(a), result("a", "A"),
				sessionstore.ToolCallEvent(signed(b, sigB))},
			calls: map[string][]sessionstore.ProviderState{"a": nil, "b": states(sigB)},
		},
		{
			name: "a turn stored as several events keeps each event's state in order",
			events: []sessionstore.Event{
				sessionstore.AssistantMessage(sessionstore.Message{Reasoning: "t", ProviderState: states(think)}),
				sessionstore.AssistantMessage(sessionstore.Message{Content: "part", ProviderState: states(rs)}),
				announce(signed(a, sigA)),
				sessionstore.AssistantMessage(sessionstore.Message{ToolCalls: []sessionstore.ToolCall{signed(a, sigB)}}),
			},
			message: states(think, rs), calls: map[string][]sessionstore.ProviderState{"a": states(sigA, sigB)},
			text: "part", reasoning: "t",
		},
		{
			name:   "a call event without an announcing message",
			events: []sessionstore.Event{sessionstore.UserText("u"), sessionstore.ToolCallEvent(signed(a, sigA))},
			calls:  map[string][]sessionstore.ProviderState{"a": states(sigA)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(ids(tt.events...), nil)
			require.NoError(t, err)
			var m *Message
			for i := range c.Messages {
				if c.Messages[i].Role == sessionstore.RoleAssistant {
					require.Nil(t, m, "one assistant message")
					m = &c.Messages[i]
				}
			}
			require.NotNil(t, m)
			assert.Equal(t, tt.message, m.ProviderState)
			assert.Equal(t, tt.text, m.Text, "the state is never text")
			assert.Equal(t, tt.reasoning, m.Reasoning)
			require.Len(t, m.ToolCalls, len(tt.calls))
			for _, tc := range m.ToolCalls {
				assert.Equal(t, tt.calls[tc.CallID], tc.ProviderState, "call %s", tc.CallID)
			}
			for _, p := range c.Pending {
				assert.Equal(t, tt.calls[p.CallID], p.ProviderState, "pending call %s", p.CallID)
			}
		})
	}
}

// Merging never writes into the records' arrays: a context built twice
// from the same events is the same.
func TestBuildProviderStateNoAliasing(t *testing.T) {
	sigA, sigB := state("gemini", "thought_signature", "A"), state("gemini", "thought_signature", "B")
	a := call("a", "read")
	a.ProviderState = make([]sessionstore.ProviderState, 1, 4)
	a.ProviderState[0] = sigA
	evs := ids(announce(a), sessionstore.ToolCallEvent(signed(call("a", "read"), sigB)))
	first, err := Build(evs, nil)
	require.NoError(t, err)
	second, err := Build(evs, nil)
	require.NoError(t, err)
	assert.Equal(t, first, second)
	assert.Equal(t, states(sigA, sigB), first.Messages[0].ToolCalls[0].ProviderState)
}

// The turns Load keeps after a compaction are the original events, state
// included: whether the kept events start at the reply or at its call
// event.
func TestBuildProviderStateAfterCompaction(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	think := state("anthropic", "thinking", `{"type":"thinking","thinking":"t","signature":"s"}`)
	sig := sessionstore.ProviderState{Provider: "gemini", Type: "thought_signature", Data: []byte{0xff, 0, 'x'}}
	reply := Reply{ProviderState: states(think), ToolCalls: []sessionstore.ToolCall{signed(call("a", "read"), sig)}}
	for _, keep := range []int{1, 2} { // the reply's message, its call event
		m, err := st.Create(ctx, sessionstore.Meta{})
		require.NoError(t, err)
		evs, err := st.AppendBatch(ctx, m.ID, append([]sessionstore.Event{sessionstore.UserText("read")}, reply.Events()...)...)
		require.NoError(t, err)
		res, err := st.Append(ctx, m.ID, result("a", "A"))
		require.NoError(t, err)
		_, err = st.Compact(ctx, m.ID, sessionstore.Compaction{Summary: sessionstore.Summary{Text: "s"}, FirstKept: evs[keep].ID, Head: res.ID})
		require.NoError(t, err)
		loaded, err := st.Load(ctx, m.ID)
		require.NoError(t, err)
		require.Equal(t, sessionstore.KindCompaction, loaded[0].Kind)
		c, err := Build(loaded, nil)
		require.NoError(t, err)
		require.Len(t, c.Messages, 3, "summary, the kept turn, its result")
		got := c.Messages[1]
		if keep == 1 {
			assert.Equal(t, states(think), got.ProviderState)
		}
		require.Len(t, got.ToolCalls, 1)
		assert.Equal(t, states(sig), got.ToolCalls[0].ProviderState, "kept from %d", keep)
		assert.NotContains(t, c.Messages[0].Text, "signature")
	}
}

func TestUniqueCallIDs(t *testing.T) {
	turn := func(text string, calls ...string) []sessionstore.Event {
		var cs []sessionstore.ToolCall
		var out []sessionstore.Event
		for _, id := range calls {
			cs = append(cs, call(id, "read"))
		}
		out = append(out, Reply{Text: text, ToolCalls: cs}.Events()...)
		for _, id := range calls {
			out = append(out, result(id, "r"+id))
		}
		return out
	}
	cat := func(parts ...[]sessionstore.Event) []sessionstore.Event {
		var out []sessionstore.Event
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	u := []sessionstore.Event{sessionstore.UserText("u")}
	tests := []struct {
		name   string
		events []sessionstore.Event
		want   []string
	}{
		{
			name:   "unique ids are kept",
			events: cat(u, turn("", "a", "b"), turn("", "c")),
			want:   []string{"user:u", "assistant: call(a) call(b)", "tool: result(a=ra)", "tool: result(b=rb)", "assistant: call(c)", "tool: result(c=rc)"},
		},
		{
			name:   "an id of an earlier turn is renamed, its result too",
			events: cat(u, turn("", "a", "b"), u, turn("", "a"), u, turn("", "a")),
			want: []string{"user:u", "assistant: call(a) call(b)", "tool: result(a=ra)", "tool: result(b=rb)",
				"user:u", "assistant: call(a_2)", "tool: result(a_2=ra)", "user:u", "assistant: call(a_3)", "tool: result(a_3=ra)"},
		},
		{
			name:   "a later call stored with an id an earlier one was sent with is renamed",
			events: cat(u, turn("", "a"), turn("", "a"), turn("", "a_2")),
			want: []string{"user:u", "assistant: call(a)", "tool: result(a=ra)", "assistant: call(a_2)", "tool: result(a_2=ra)",
				"assistant: call(a_2_2)", "tool: result(a_2_2=ra_2)"},
		},
		{
			name:   "a renamed id takes none of its own message's",
			events: cat(u, turn("", "a"), turn("", "a", "a_2")),
			want: []string{"user:u", "assistant: call(a)", "tool: result(a=ra)", "assistant: call(a_3) call(a_2)",
				"tool: result(a_3=ra)", "tool: result(a_2=ra_2)"},
		},
		{
			name:   "a synthetic result names the sent id",
			events: cat(u, turn("", "a"), Reply{ToolCalls: []sessionstore.ToolCall{call("a", "read")}}.Events(), u),
			want: []string{"user:u", "assistant: call(a)", "tool: result(a=ra)", "assistant: call(a_2)",
				"tool: result(a_2=" + MissingResult + ")", "user:u"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Build(ids(tt.events...), nil)
			require.NoError(t, err)
			before := shape(c)
			got := UniqueCallIDs(c.Messages)
			assert.Equal(t, tt.want, shape(Context{Messages: got}))
			assert.Equal(t, before, shape(c), "the context is not modified")

			// Stable: the ids of a turn do not change as the session grows.
			more, err := Build(ids(append(tt.events, turn("", "a")...)...), nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, shape(Context{Messages: UniqueCallIDs(more.Messages)})[:len(tt.want)])
		})
	}
}

// The ids a turn is sent with never change as the session grows, whatever
// ids the later turns store: each prefix of the session, ending after a
// turn's results, is sent with the ids the whole session gives it.
func TestUniqueCallIDsPrefixStable(t *testing.T) {
	var evs []sessionstore.Event
	var ends []int // len(evs) after each turn
	for _, calls := range [][]string{{"a"}, {"a"}, {"a_2"}, {"a_3", "a"}, {"a_2_2"}, {"a"}, {"b", "b"}, {"b"}} {
		var cs []sessionstore.ToolCall
		for _, id := range calls {
			cs = append(cs, call(id, "read"))
		}
		evs = append(evs, sessionstore.UserText("u"))
		evs = append(evs, Reply{ToolCalls: cs}.Events()...)
		for _, id := range calls {
			evs = append(evs, result(id, "r"+id))
		}
		ends = append(ends, len(evs))
	}
	ids(evs...)
	full, err := Build(evs, nil)
	require.NoError(t, err)
	all := shape(Context{Messages: UniqueCallIDs(full.Messages)})
	sent := map[string]bool{}
	for _, m := range UniqueCallIDs(full.Messages) {
		ids := map[string]bool{}
		for _, c := range m.ToolCalls {
			ids[c.CallID] = true
		}
		for id := range ids {
			assert.False(t, sent[id], "id %s sent by two messages: %v", id, all)
			sent[id] = true
		}
	}
	for _, n := range ends {
		c, err := Build(evs[:n], nil)
		require.NoError(t, err)
		got := shape(Context{Messages: UniqueCallIDs(c.Messages)})
		assert.Equal(t, all[:len(got)], got, "the first %d events", n)
	}
}

// Build never writes into the slices Options.Custom returns: a call event
// that joins a call the custom message announced merges its state into
// the context's copy, and a call it adds goes into the context's message.
func TestBuildCustomCallsNotModified(t *testing.T) {
	sig := state("gemini", "thought_signature", "S")
	calls := make([]sessionstore.ToolCall, 1, 4)
	calls[0] = call("k", "ls")
	custom := sessionstore.NewEvent(sessionstore.KindCustom, sessionstore.RoleNone, map[string]string{"say": "x"})
	evs := ids(sessionstore.UserText("go"), custom, sessionstore.ToolCallEvent(signed(call("k", "ls"), sig)),
		sessionstore.ToolCallEvent(call("m", "ls")))
	events := make([]uuid.UUID, 1, 4)
	opts := &Options{Custom: func(ev sessionstore.Event) (Message, bool) {
		events[0] = ev.ID
		return Message{Role: sessionstore.RoleAssistant, ToolCalls: calls, Events: events}, true
	}}
	c, err := Build(evs, opts)
	require.NoError(t, err)
	require.Len(t, c.Messages, 2)
	assert.Equal(t, []sessionstore.ToolCall{signed(call("k", "ls"), sig), call("m", "ls")}, c.Messages[1].ToolCalls)
	assert.Nil(t, calls[0].ProviderState, "the custom message's call is not modified")
	assert.Zero(t, calls[:2][1], "nor is the array behind it")
	assert.Zero(t, events[:2][1], "nor the array of its events")
}

// repeatedCalls returns the messages of n turns that each call id "a"
// (a derived id a later turn's same call gets again), each answered.
func repeatedCalls(n int) []Message {
	msgs := make([]Message, 0, 2*n)
	for range n {
		msgs = append(msgs, Message{Role: sessionstore.RoleAssistant, ToolCalls: []sessionstore.ToolCall{{CallID: "a", Name: "status"}}},
			Message{Role: sessionstore.RoleTool, Result: &sessionstore.ToolResult{CallID: "a"}})
	}
	return msgs
}

// UniqueCallIDs does work in proportion to the calls, not to the square
// of the turns that repeat an id: the allocations per turn stay the same
// as the session grows (each renamed call looked for its new id from
// "_2" up, one string per id tried).
func TestUniqueCallIDsLinear(t *testing.T) {
	perTurn := func(n int) float64 {
		msgs := repeatedCalls(n)
		return testing.AllocsPerRun(3, func() { UniqueCallIDs(msgs) }) / float64(n)
	}
	small, large := perTurn(100), perTurn(2000)
	assert.Less(t, large, 2*small+1, "allocations per turn: %.1f for 100 turns, %.1f for 2000", small, large)
	got := UniqueCallIDs(repeatedCalls(5))
	var sent []string
	for _, m := range got {
		for _, c := range m.ToolCalls {
			sent = append(sent, c.CallID)
		}
	}
	assert.Equal(t, []string{"a", "a_2", "a_3", "a_4", "a_5"}, sent)
}

func BenchmarkUniqueCallIDs(b *testing.B) {
	for _, n := range []int{100, 1000} {
		msgs := repeatedCalls(n)
		b.Run(strconv.Itoa(n)+"_turns", func(b *testing.B) {
			for b.Loop() {
				UniqueCallIDs(msgs)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/turn")
		})
	}
}
