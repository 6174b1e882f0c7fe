package export

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// fixtureSession is the id of the session fixture writes.
var fixtureSession = uuid.MustParse("01a039f0-0000-7000-8000-0000000000ff")

// base is the time of the fixture's first event.
var base = time.Date(2026, 8, 25, 17, 0, 0, 0, time.UTC)

// eid is the fixture's n-th event id (a UUIDv7), its last group (where
// a short id comes from) spread by a multiplicative hash.
func eid(n int) uuid.UUID {
	return uuid.MustParse(fmt.Sprintf("01a039f0-0000-7000-8000-%08x%04x", uint32(n)*2654435761, n))
}

// blobThreshold is the fixture store's: records above it are blobs.
const blobThreshold = 512

// openStore opens a new store in a temporary directory.
func openStore(t testing.TB) *sessionstore.Store {
	t.Helper()
	st, err := sessionstore.Open(t.TempDir(), &sessionstore.Options{BlobThreshold: blobThreshold})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	return st
}

// add appends ev with id eid(n) at base+n seconds.
func add(t testing.TB, st *sessionstore.Store, session uuid.UUID, n int, ev sessionstore.Event) sessionstore.Event {
	t.Helper()
	ev.ID = eid(n)
	ev.Time = base.Add(time.Duration(n) * time.Second)
	out, err := st.AppendWith(context.Background(), session, sessionstore.AppendOptions{KeepTime: true}, ev)
	require.NoError(t, err)
	return out[0]
}

// bigOutput is the fixture's blob record's output: over the threshold,
// with a fence in it.
var bigOutput = strings.Repeat("ok   pkg/module  0.01s\n", 40) + "```\nnot the end of the block\n```\n"

// fixture writes a session with every kind of event, a branch, a blob
// (twice: the same output in two events), a compaction and a custom event,
// all with fixed ids and times.
func fixture(t testing.TB, st *sessionstore.Store) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	meta, err := st.Create(ctx, sessionstore.Meta{ID: fixtureSession, Name: "fix the build", WorkingDir: "/src/app", Model: "model-x", CreatedAt: base.Add(-time.Minute)})
	require.NoError(t, err)
	s := meta.ID
	add(t, st, s, 1, sessionstore.UserText("The build fails. Fix it."))
	add(t, st, s, 2, sessionstore.AssistantMessage(sessionstore.Message{
		Content: "Let me run the tests.", Reasoning: "Start with the failing package.", Model: "model-x",
		ToolCalls: []sessionstore.ToolCall{{CallID: "c1", Name: "run_tests"}},
	}))
	add(t, st, s, 3, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "run_tests", Arguments: json.RawMessage(`{"pkg":"./...","flags":["-race"]}`)}))
	add(t, st, s, 4, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: "FAIL\tpkg\t0.01s\n", IsError: true}))
	require.NoError(t, st.Branch(ctx, s, eid(1)))
	add(t, st, s, 5, sessionstore.UserText("Try approach B instead: <b>bold</b> & all."))
	add(t, st, s, 6, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c2", Name: "run_tests", Arguments: json.RawMessage(`{"pkg":"./b"}`)}))
	add(t, st, s, 7, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c2", Output: bigOutput}))
	add(t, st, s, 8, sessionstore.NewEvent(sessionstore.KindCompaction, sessionstore.RoleNone, sessionstore.CompactionRecord{
		Summary:      sessionstore.Summary{Goals: []string{"fix the build"}, Decisions: []string{"approach B"}, Text: "Approach A failed;\nB passes."},
		TokensBefore: 1234, FirstKept: eid(6), Summarized: eid(7),
	}))
	add(t, st, s, 9, sessionstore.AssistantText("Approach B passes."))
	add(t, st, s, 10, sessionstore.NewEvent(sessionstore.KindCustom, sessionstore.RoleNone, map[string]any{"type": "model_change", "model": "model-y"}))
	add(t, st, s, 11, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c3", Output: bigOutput}))
	return s
}
