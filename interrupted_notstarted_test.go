package sessionstore

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// nsAnnounce returns an assistant message announcing calls with the given
// CallIDs.
func nsAnnounce(callIDs ...string) Event {
	m := Message{Content: "calling tools"}
	for _, id := range callIDs {
		m.ToolCalls = append(m.ToolCalls, ToolCall{CallID: id, Name: "tool", Arguments: json.RawMessage(`{"n":1}`)})
	}
	return AssistantMessage(m)
}

// nsClosed is a synthetic result expected from the repair: the call it
// answers and its outcome.
type nsClosed struct {
	callID  string
	outcome string
}

// nsResults returns the (CallID, Outcome) of synthetic results.
func nsResults(t *testing.T, evs []Event) []nsClosed {
	t.Helper()
	out := []nsClosed{}
	for _, ev := range evs {
		r, err := ev.ToolResult()
		require.NoError(t, err)
		out = append(out, nsClosed{r.CallID, r.Outcome})
		assert.True(t, r.IsError)
		switch r.Outcome {
		case OutcomeUnknown:
			assert.Equal(t, interruptedOutput, r.Output)
		case OutcomeNotStarted:
			assert.Equal(t, notStartedOutput, r.Output)
		default:
			t.Errorf("result for %s has outcome %q", r.CallID, r.Outcome)
		}
	}
	return out
}

// nsRequireBalanced checks that every call on the active path, announced
// by an assistant message or recorded as an event, has exactly one result
// after it, and returns the outcomes of the results by CallID.
func nsRequireBalanced(t *testing.T, path []Event) map[string]string {
	t.Helper()
	outcome := map[string]string{}
	for i, ev := range path {
		var calls []string
		switch {
		case ev.Kind == KindMessage && ev.Role == RoleAssistant:
			m, err := ev.Message()
			require.NoError(t, err)
			for _, c := range m.ToolCalls {
				calls = append(calls, c.CallID)
			}
		case ev.Kind == KindToolCall:
			c, err := ev.ToolCall()
			require.NoError(t, err)
			calls = append(calls, c.CallID)
		}
		for _, id := range calls {
			n := 0
			for _, later := range path[i+1:] {
				if later.Kind != KindToolResult {
					continue
				}
				r, err := later.ToolResult()
				require.NoError(t, err)
				if r.CallID == id {
					n++
					outcome[id] = r.Outcome
				}
			}
			assert.Equal(t, 1, n, "call %s has one result after it", id)
		}
	}
	return outcome
}

func TestNotStartedToolCalls(t *testing.T) {
	cases := []struct {
		name       string
		steps      []ivStep
		notStarted []string   // NotStartedToolCalls, by CallID
		want       []nsClosed // what the repair appends, in order
	}{
		{
			name:       "message announcing calls, none recorded",
			steps:      []ivStep{{name: "u", ev: UserText("go")}, {name: "a", ev: nsAnnounce("c1", "c2")}},
			notStarted: []string{"c1", "c2"},
			want:       []nsClosed{{"c1", OutcomeNotStarted}, {"c2", OutcomeNotStarted}},
		},
		{
			name:       "the first call recorded",
			steps:      []ivStep{{name: "u", ev: UserText("go")}, {name: "a", ev: nsAnnounce("c1", "c2")}, {name: "c1", ev: ivCall("c1")}},
			notStarted: []string{"c2"},
			want:       []nsClosed{{"c1", OutcomeUnknown}, {"c2", OutcomeNotStarted}},
		},
		{
			name:       "the second call recorded",
			steps:      []ivStep{{name: "a", ev: nsAnnounce("c1", "c2")}, {name: "c2", ev: ivCall("c2")}},
			notStarted: []string{"c1"},
			want:       []nsClosed{{"c1", OutcomeNotStarted}, {"c2", OutcomeUnknown}},
		},
		{
			name:  "every call recorded, none answered",
			steps: []ivStep{{name: "a", ev: nsAnnounce("c1", "c2")}, {name: "c1", ev: ivCall("c1")}, {name: "c2", ev: ivCall("c2")}},
			want:  []nsClosed{{"c1", OutcomeUnknown}, {"c2", OutcomeUnknown}},
		},
		{
			name: "one call answered, the other recorded",
			steps: []ivStep{{name: "a", ev: nsAnnounce("c1", "c2")}, {name: "c1", ev: ivCall("c1")}, {name: "c2", ev: ivCall("c2")},
				{name: "r1", ev: ivResult("c1")}},
			want: []nsClosed{{"c2", OutcomeUnknown}},
		},
		{
			name: "one call answered, the other announced only",
			steps: []ivStep{{name: "a", ev: nsAnnounce("c1", "c2")}, {name: "c1", ev: ivCall("c1")},
				{name: "r1", ev: ivResult("c1")}},
			notStarted: []string{"c2"},
			want:       []nsClosed{{"c2", OutcomeNotStarted}},
		},
		{
			name: "balanced",
			steps: []ivStep{{name: "a", ev: nsAnnounce("c1")}, {name: "c1", ev: ivCall("c1")}, {name: "r1", ev: ivResult("c1")},
				{name: "b", ev: AssistantText("done")}},
		},
		{
			name:  "a call no message announced",
			steps: []ivStep{{name: "a", ev: AssistantText("let me look")}, {name: "c1", ev: ivCall("c1")}},
			want:  []nsClosed{{"c1", OutcomeUnknown}},
		},
		{
			name: "two turns, the older one open",
			steps: []ivStep{{name: "a", ev: nsAnnounce("c1")}, {name: "u", ev: UserText("never mind")},
				{name: "b", ev: nsAnnounce("c2")}, {name: "c2", ev: ivCall("c2")}, {name: "r2", ev: ivResult("c2")}},
			notStarted: []string{"c1"},
			want:       []nsClosed{{"c1", OutcomeNotStarted}},
		},
		{
			name:  "a user message's tool calls are not announcements",
			steps: []ivStep{{name: "u", ev: UserMessage(Message{Content: "x", ToolCalls: []ToolCall{{CallID: "c1", Name: "tool"}}})}},
		},
		{
			name: "announced on another branch",
			steps: []ivStep{{name: "u", ev: UserText("go")}, {name: "a", ev: nsAnnounce("c1")},
				{branchTo: "u"}, {name: "b", ev: AssistantText("other answer")}},
		},
		{
			name: "answered on another branch only",
			steps: []ivStep{{name: "a", ev: nsAnnounce("c1")}, {name: "c1", ev: ivCall("c1")}, {name: "r1", ev: ivResult("c1")},
				{branchTo: "a"}, {name: "x", ev: UserText("retry from the announcement")}},
			notStarted: []string{"c1"},
			want:       []nsClosed{{"c1", OutcomeNotStarted}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, _ := apiNewStore(t, nil)
			id := apiNewSession(t, s)
			ivBuild(t, s, id, tc.steps)
			head := apiHead(t, s, id)

			ns, err := s.NotStartedToolCalls(ctx, id)
			require.NoError(t, err)
			var got []string
			for _, c := range ns {
				got = append(got, c.CallID)
				assert.Equal(t, "tool", c.Name, "the call as announced")
			}
			assert.Equal(t, tc.notStarted, got)

			repaired, err := s.RepairInterruptedToolCalls(ctx, id)
			require.NoError(t, err)
			want := tc.want
			if want == nil {
				want = []nsClosed{}
			}
			assert.Equal(t, want, nsResults(t, repaired))
			parent := head
			for _, ev := range repaired {
				assert.Equal(t, parent, ev.ParentID, "appended in a chain at HEAD")
				parent = ev.ID
			}
			nsRequireBalanced(t, apiLoad(t, s, id))
			left, err := s.NotStartedToolCalls(ctx, id)
			require.NoError(t, err)
			assert.Empty(t, left)
			again, err := s.RepairInterruptedToolCalls(ctx, id)
			require.NoError(t, err)
			assert.Empty(t, again, "a second repair appends nothing")
		})
	}
}

// TestRepairNotStartedAfterCrash: a power loss at each step of a turn
// (after the assistant message, after some of its calls, after a call
// before its result), with everything acknowledged durable and nothing
// checkpointed; the reopened session is repaired to a balanced path with
// the outcome each case calls for, and the repair survives the next crash.
func TestRepairNotStartedAfterCrash(t *testing.T) {
	cases := []struct {
		name  string
		after int // events of the turn acknowledged: message, c1, c2, result of c1
		want  map[string]string
	}{
		{"after the assistant message", 1, map[string]string{"c1": OutcomeNotStarted, "c2": OutcomeNotStarted}},
		{"after the first call", 2, map[string]string{"c1": OutcomeUnknown, "c2": OutcomeNotStarted}},
		{"after both calls", 3, map[string]string{"c1": OutcomeUnknown, "c2": OutcomeUnknown}},
		{"after a call's result", 4, map[string]string{"c1": "", "c2": OutcomeUnknown}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			m := vfs.NewMemFS()
			s := apiOpen(t, memRoot, &Options{fs: m})
			id := apiNewSession(t, s)
			apiAppend(t, s, id, UserText("deploy"))
			turn := []Event{nsAnnounce("c1", "c2"), ivCall("c1"), ivCall("c2"), ivResult("c1")}
			for _, ev := range turn[:tc.after] {
				apiAppend(t, s, id, ev)
			}
			crashed := m.CrashClone(vfs.KeepSynced, 0)
			s2 := openMem(t, crashed, Options{})
			defer func() { assert.NoError(t, s2.Close()) }()
			require.Len(t, apiLoad(t, s2, id), 1+tc.after, "every acknowledged event survived")
			repaired, err := s2.RepairInterruptedToolCalls(ctx, id)
			require.NoError(t, err)
			assert.Len(t, repaired, len(tc.want)-tc.after/4)
			assert.Equal(t, tc.want, nsRequireBalanced(t, apiLoad(t, s2, id)))

			s3 := openMem(t, crashed.CrashClone(vfs.KeepSynced, 0), Options{})
			defer func() { assert.NoError(t, s3.Close()) }()
			assert.Equal(t, tc.want, nsRequireBalanced(t, apiLoad(t, s3, id)), "the repair is durable")
		})
	}
}

// TestRepairNotStartedBatchCrashPoints: an assistant message and its two
// calls appended as one batch, with the power cut at each mutating
// operation (a sample by default): whatever prefix of the batch survives,
// the repair balances the path, answering a recorded call with
// OutcomeUnknown and a call only announced with OutcomeNotStarted.
//
// SESSIONSTORE_CRASH_STATES=all tries every operation in every crash mode.
func TestRepairNotStartedBatchCrashPoints(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own
	ctx := t.Context()
	session := uuid.Must(uuid.NewV7())
	run := func(k int) (*vfs.MemFS, int) {
		m := vfs.NewMemFS()
		s, err := Open(memRoot, &Options{fs: m})
		require.NoError(t, err)
		_, err = s.Create(ctx, Meta{ID: session, Name: "turn"})
		require.NoError(t, err)
		_, err = s.Append(ctx, session, UserText("deploy"))
		require.NoError(t, err)
		n := 0
		m.SetFault(func(op vfs.Op, _ string) error {
			if vfs.Mutating(op) {
				if n++; n == k {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		_, _ = s.AppendBatch(ctx, session, nsAnnounce("c1", "c2"), ivCall("c1"), ivCall("c2"))
		_ = s.Close()
		m.PowerOff()
		return m, n
	}
	_, total := run(0)
	points := testSize(t, "SESSIONSTORE_CRASH_STATES", 4, total)
	modes := vfs.CrashModes
	if points < total {
		modes = []vfs.CrashMode{vfs.KeepSynced, vfs.KeepRandomSectors}
	}
	seen := map[int]bool{} // events of the batch that survived
	for i := range points {
		k := 1 + i*total/points
		m, _ := run(k)
		for j, mode := range modes {
			s2 := openMem(t, m.CrashClone(mode, uint64(k*100+j)), Options{})
			path := apiLoad(t, s2, session)
			kept := len(path) - 1
			require.True(t, kept >= 0 && kept <= 3, "crash at op %d, %s: %d events", k, mode, len(path))
			seen[kept] = true
			_, err := s2.RepairInterruptedToolCalls(ctx, session)
			require.NoError(t, err, "crash at op %d, %s", k, mode)
			got := nsRequireBalanced(t, apiLoad(t, s2, session))
			want := map[string]string{}
			if kept >= 1 {
				want = map[string]string{"c1": OutcomeNotStarted, "c2": OutcomeNotStarted}
				for _, c := range []string{"c1", "c2"}[:kept-1] {
					want[c] = OutcomeUnknown
				}
			}
			assert.Equal(t, want, got, "crash at op %d, %s: %d events of the batch kept", k, mode, kept)
			require.NoError(t, s2.Close())
		}
	}
	if points == total {
		assert.True(t, seen[0] && seen[3], "the crash points cover the batch lost and kept")
	}
}
