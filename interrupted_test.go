package sessionstore

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// ivCall and ivResult build a tool call and its normal result.
func ivCall(callID string) Event {
	return ToolCallEvent(ToolCall{CallID: callID, Name: "tool", Arguments: json.RawMessage(`{"n":1}`)})
}

func ivResult(callID string) Event {
	return ToolResultEvent(ToolResult{CallID: callID, Output: "done"})
}

// ivStep appends ev under name, or, when branchTo is set, selects the event
// of that name with Branch.
type ivStep struct {
	name     string
	ev       Event
	branchTo string
}

// ivBuild runs the steps and returns the appended events by name.
func ivBuild(t *testing.T, s *Store, id uuid.UUID, steps []ivStep) map[string]Event {
	t.Helper()
	byName := map[string]Event{}
	for _, st := range steps {
		if st.branchTo != "" {
			to, ok := byName[st.branchTo]
			require.True(t, ok, "unknown step %q", st.branchTo)
			require.NoError(t, s.Branch(t.Context(), id, to.ID))
			continue
		}
		_, dup := byName[st.name]
		require.False(t, dup, "duplicate step name %q", st.name)
		byName[st.name] = apiAppend(t, s, id, st.ev)
	}
	return byName
}

// ivCheckSynthetic checks that ev is a synthetic result answering callID,
// appended as a child of parent.
func ivCheckSynthetic(t *testing.T, ev Event, callID string, parent uuid.UUID) {
	t.Helper()
	assert.Equal(t, KindToolResult, ev.Kind)
	assert.Equal(t, RoleTool, ev.Role)
	assert.Equal(t, parent, ev.ParentID, "a child of the previous HEAD")
	assert.Equal(t, uuid.Nil, ev.BranchFrom, "does not start a branch")
	assert.NotEqual(t, uuid.Nil, ev.ID)
	assert.False(t, ev.Time.IsZero())
	r, err := ev.ToolResult()
	require.NoError(t, err)
	assert.Equal(t, callID, r.CallID)
	assert.True(t, r.IsError)
	assert.Equal(t, OutcomeUnknown, r.Outcome)
	assert.Equal(t, interruptedOutput, r.Output)
}

func TestInterruptedToolCalls(t *testing.T) {
	cases := []struct {
		name  string
		steps []ivStep
		want  []string // step names of the interrupted calls, oldest first
	}{
		{
			name:  "empty session",
			steps: nil,
		},
		{
			name: "no tool calls",
			steps: []ivStep{
				{name: "u", ev: UserText("hi")},
				{name: "a", ev: AssistantText("hello")},
			},
		},
		{
			name: "call with result",
			steps: []ivStep{
				{name: "u", ev: UserText("list")},
				{name: "c1", ev: ivCall("c1")},
				{name: "r1", ev: ivResult("c1")},
				{name: "a", ev: AssistantText("ok")},
			},
		},
		{
			name: "call without result at the end of the path",
			steps: []ivStep{
				{name: "u", ev: UserText("list")},
				{name: "c1", ev: ivCall("c1")},
			},
			want: []string{"c1"},
		},
		{
			name: "two calls, the first answered",
			steps: []ivStep{
				{name: "u", ev: UserText("list")},
				{name: "c1", ev: ivCall("c1")},
				{name: "c2", ev: ivCall("c2")},
				{name: "r1", ev: ivResult("c1")},
			},
			want: []string{"c2"},
		},
		{
			name: "two calls, the second answered",
			steps: []ivStep{
				{name: "u", ev: UserText("list")},
				{name: "c1", ev: ivCall("c1")},
				{name: "c2", ev: ivCall("c2")},
				{name: "r2", ev: ivResult("c2")},
			},
			want: []string{"c1"},
		},
		{
			name: "two calls, none answered, oldest first",
			steps: []ivStep{
				{name: "u", ev: UserText("list")},
				{name: "c1", ev: ivCall("c1")},
				{name: "c2", ev: ivCall("c2")},
			},
			want: []string{"c1", "c2"},
		},
		{
			name: "call followed by other events",
			steps: []ivStep{
				{name: "u", ev: UserText("list")},
				{name: "c1", ev: ivCall("c1")},
				{name: "u2", ev: UserText("still there?")},
			},
			want: []string{"c1"},
		},
		{
			name: "result before the call does not count",
			steps: []ivStep{
				{name: "r1", ev: ivResult("c1")},
				{name: "c1", ev: ivCall("c1")},
			},
			want: []string{"c1"},
		},
		{
			name: "reused call id answered only before the last call",
			steps: []ivStep{
				{name: "c1a", ev: ivCall("c1")},
				{name: "r1", ev: ivResult("c1")},
				{name: "c1b", ev: ivCall("c1")},
			},
			want: []string{"c1b"},
		},
		{
			name: "call on an inactive branch is ignored",
			steps: []ivStep{
				{name: "u", ev: UserText("list")},
				{name: "c1", ev: ivCall("c1")},
				{branchTo: "u"},
				{name: "a", ev: AssistantText("another way")},
			},
		},
		{
			name: "result on another branch does not count",
			steps: []ivStep{
				{name: "u", ev: UserText("list")},
				{name: "c1", ev: ivCall("c1")},
				{name: "r1", ev: ivResult("c1")},
				{branchTo: "c1"},
				{name: "a", ev: AssistantText("no result here")},
			},
			want: []string{"c1"},
		},
		{
			name: "the active branch has its own unanswered call",
			steps: []ivStep{
				{name: "u", ev: UserText("list")},
				{name: "c1", ev: ivCall("c1")},
				{branchTo: "u"},
				{name: "c2", ev: ivCall("c2")},
			},
			want: []string{"c2"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			s, _ := apiNewStore(t, nil)
			id := apiNewSession(t, s)
			byName := ivBuild(t, s, id, tc.steps)
			treeBefore := apiTree(t, s, id)
			headBefore := apiHead(t, s, id)
			pathBefore := apiLoad(t, s, id)

			got, err := s.InterruptedToolCalls(ctx, id)
			require.NoError(t, err)
			require.NotNil(t, got)
			want := []Event{}
			for _, name := range tc.want {
				want = append(want, byName[name])
			}
			apiSameEvents(t, want, got)
			apiSameNodes(t, treeBefore, apiTree(t, s, id))
			assert.Equal(t, headBefore, apiHead(t, s, id), "InterruptedToolCalls writes nothing")

			// The repair answers exactly those calls, in order, at HEAD.
			repaired, err := s.RepairInterruptedToolCalls(ctx, id)
			require.NoError(t, err)
			require.NotNil(t, repaired)
			require.Len(t, repaired, len(want))
			parent := headBefore
			for i, ev := range repaired {
				c, err := want[i].ToolCall()
				require.NoError(t, err)
				ivCheckSynthetic(t, ev, c.CallID, parent)
				parent = ev.ID
			}
			assert.Equal(t, parent, apiHead(t, s, id))
			assert.Len(t, apiTree(t, s, id), len(treeBefore)+len(want))

			// The active path is balanced, and its prefix is unchanged.
			apiSameEvents(t, append(slices.Clone(pathBefore), repaired...), apiLoad(t, s, id))
			left, err := s.InterruptedToolCalls(ctx, id)
			require.NoError(t, err)
			assert.Empty(t, left)

			// Idempotent: a second repair appends nothing.
			treeAfter := apiTree(t, s, id)
			again, err := s.RepairInterruptedToolCalls(ctx, id)
			require.NoError(t, err)
			assert.Empty(t, again)
			apiSameNodes(t, treeAfter, apiTree(t, s, id))
		})
	}
}

func TestRepairInterruptedToolCallsFields(t *testing.T) {
	ctx := t.Context()
	s, _ := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	apiAppend(t, s, id, UserText("run the tests"))
	call := apiAppend(t, s, id, ToolCallEvent(ToolCall{CallID: "call_42", Name: "run_tests"}))

	repaired, err := s.RepairInterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	require.Len(t, repaired, 1)
	ev := repaired[0]
	ivCheckSynthetic(t, ev, "call_42", call.ID)
	assert.Equal(t, ev.ID, apiHead(t, s, id), "the synthetic result is the new HEAD")

	// The stored event is the returned one, record included.
	stored, err := s.Event(ctx, id, ev.ID)
	require.NoError(t, err)
	apiSameEvent(t, ev, stored)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(stored.Record, &raw))
	assert.Equal(t, map[string]any{
		"call_id":  "call_42",
		"output":   interruptedOutput,
		"is_error": true,
		"outcome":  "outcome_unknown",
	}, raw)

	// The text tells the model what to do.
	for _, phrase := range []string{"unknown", "read-only or idempotent", "side effects", "ask the user"} {
		assert.Contains(t, interruptedOutput, phrase)
	}
}

func TestToolResultOutcomeJSON(t *testing.T) {
	b, err := json.Marshal(ToolResult{CallID: "c", Output: "o", IsError: true, Outcome: OutcomeUnknown})
	require.NoError(t, err)
	assert.Equal(t, `{"call_id":"c","output":"o","is_error":true,"outcome":"outcome_unknown"}`, string(b))
	b, err = json.Marshal(ToolResult{CallID: "c", Output: "o"})
	require.NoError(t, err)
	assert.Equal(t, `{"call_id":"c","output":"o"}`, string(b), "a normal result has no outcome member")
}

func TestRepairInterruptedToolCallsAfterCrash(t *testing.T) {
	ctx := t.Context()
	m := vfs.NewMemFS()
	s := apiOpen(t, "/store", &Options{fs: m})
	id := apiNewSession(t, s)
	apiAppend(t, s, id, UserText("deploy"))
	apiAppend(t, s, id, ivCall("c1"))
	apiAppend(t, s, id, ivResult("c1"))
	call := apiAppend(t, s, id, ToolCallEvent(ToolCall{CallID: "c2", Name: "deploy"}))

	// Power loss after the call was acknowledged, before its result: the
	// store is not closed, so HEAD and the index were never checkpointed.
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	s2 := apiOpen(t, "/store", &Options{fs: crashed})
	interrupted, err := s2.InterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	apiSameEvents(t, []Event{call}, interrupted)

	repaired, err := s2.RepairInterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	require.Len(t, repaired, 1)
	ivCheckSynthetic(t, repaired[0], "c2", call.ID)

	// Durable when returned: a second crash, again without Close, keeps it.
	s3 := apiOpen(t, "/store", &Options{fs: crashed.CrashClone(vfs.KeepSynced, 0)})
	path := apiLoad(t, s3, id)
	require.Len(t, path, 5)
	apiSameEvent(t, call, path[3])
	apiSameEvent(t, repaired[0], path[4])
	left, err := s3.InterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, left)
	again, err := s3.RepairInterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, again)
	assert.Len(t, apiTree(t, s3, id), 5)
}

func TestRepairInterruptedToolCallsRefusesPendingBranch(t *testing.T) {
	ctx := t.Context()
	s, _ := apiNewStore(t, nil)
	id := apiNewSession(t, s)
	ask := apiAppend(t, s, id, UserText("list"))
	call := apiAppend(t, s, id, ivCall("c1"))
	require.NoError(t, s.Branch(ctx, id, ask.ID))
	tree := apiTree(t, s, id)

	repaired, err := s.RepairInterruptedToolCalls(ctx, id)
	require.ErrorIs(t, err, ErrInvalidEvent)
	assert.Contains(t, err.Error(), "Branch")
	assert.Empty(t, repaired)
	apiSameNodes(t, tree, apiTree(t, s, id))
	parent, branching, err := s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.True(t, branching, "the selection is left pending")
	assert.Equal(t, ask.ID, parent)

	// Cancelling the selection (Branch to HEAD) lets the repair run.
	require.NoError(t, s.Branch(ctx, id, call.ID))
	repaired, err = s.RepairInterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	require.Len(t, repaired, 1)
	ivCheckSynthetic(t, repaired[0], "c1", call.ID)
}

func TestRepairInterruptedToolCallsPartialFailure(t *testing.T) {
	ctx := t.Context()
	short, long := "a", strings.Repeat("b", 200)
	rec := func(callID string) int {
		b, err := json.Marshal(ToolResult{CallID: callID, Output: interruptedOutput, IsError: true, Outcome: OutcomeUnknown})
		require.NoError(t, err)
		return len(b)
	}
	// The first synthetic result fits, the second is too large; the calls
	// themselves fit.
	limit := rec(short)
	require.Less(t, limit, rec(long))
	s, dir := apiNewStore(t, &Options{MaxRecordSize: limit})
	id := apiNewSession(t, s)
	apiAppend(t, s, id, ivCall(short))
	longCall := apiAppend(t, s, id, ivCall(long))

	repaired, err := s.RepairInterruptedToolCalls(ctx, id)
	require.ErrorIs(t, err, ErrRecordTooLarge)
	assert.Contains(t, err.Error(), long)
	require.Len(t, repaired, 1, "the events appended before the failure")
	ivCheckSynthetic(t, repaired[0], short, longCall.ID)
	assert.Equal(t, repaired[0].ID, apiHead(t, s, id))
	left, err := s.InterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	apiSameEvents(t, []Event{longCall}, left)

	// A retry continues with the call still unanswered.
	require.NoError(t, s.Close())
	s2 := apiOpen(t, dir, nil)
	rest, err := s2.RepairInterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	require.Len(t, rest, 1)
	ivCheckSynthetic(t, rest[0], long, repaired[0].ID)
	left, err = s2.InterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, left)
}

func TestInterruptedToolCallsErrors(t *testing.T) {
	ctx := t.Context()
	s, _ := apiNewStore(t, nil)

	missing := uuid.Must(uuid.NewV7())
	_, err := s.InterruptedToolCalls(ctx, missing)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.RepairInterruptedToolCalls(ctx, missing)
	assert.ErrorIs(t, err, ErrNotFound)

	for _, tc := range []struct {
		name string
		ev   Event
	}{
		{"tool call", NewEvent(KindToolCall, RoleAssistant, "not an object")},
		{"tool result", NewEvent(KindToolResult, RoleTool, []int{1})},
	} {
		t.Run("undecodable "+tc.name, func(t *testing.T) {
			id := apiNewSession(t, s)
			apiAppend(t, s, id, ivCall("c1"))
			bad := apiAppend(t, s, id, tc.ev)
			tree := apiTree(t, s, id)
			_, err := s.InterruptedToolCalls(ctx, id)
			require.Error(t, err)
			assert.Contains(t, err.Error(), bad.ID.String())
			repaired, err := s.RepairInterruptedToolCalls(ctx, id)
			require.Error(t, err)
			assert.Empty(t, repaired)
			apiSameNodes(t, tree, apiTree(t, s, id))
		})
	}

	require.NoError(t, s.Close())
	id := uuid.Must(uuid.NewV7())
	_, err = s.InterruptedToolCalls(ctx, id)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.RepairInterruptedToolCalls(ctx, id)
	assert.ErrorIs(t, err, ErrClosed)
}

// TestToolResultWithoutCall: a tool result whose CallID names no call on
// the path is stored as it is, on purpose (see ToolResultEvent), and is
// not an interrupted call either.
func TestToolResultWithoutCall(t *testing.T) {
	ctx := t.Context()
	_, s, id := memSession(t, Options{})
	defer s.Close()
	appendN(t, s, id, 2)
	orphan, err := s.Append(ctx, id, ToolResultEvent(ToolResult{CallID: "no-such-call", Output: "late result"}))
	require.NoError(t, err)
	path, err := s.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, path, 3)
	assert.Equal(t, orphan.ID, path[2].ID)
	got, err := path[2].ToolResult()
	require.NoError(t, err)
	assert.Equal(t, "no-such-call", got.CallID)
	calls, err := s.InterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, calls)
}
