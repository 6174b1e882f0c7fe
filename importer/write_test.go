package importer

import (
	"context"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Two Stores (two processes) import one session at once, and the other
// stores every run between this Write's look at the session and its
// appends: each event is counted once, as added by the writer that stored
// it, and the session is whole, with no Branch selection left pending.
func TestWriteAddedCountsEachEventOnce(t *testing.T) {
	dir := t.TempDir()
	a, err := sessionstore.Open(dir, &sessionstore.Options{WaitForLock: true})
	require.NoError(t, err)
	defer a.Close()
	b, err := sessionstore.Open(dir, &sessionstore.Options{WaitForLock: true})
	require.NoError(t, err)
	defer b.Close()
	s := treeSession(t) // r - a - b (head), r - c: three runs
	var resB WriteResult
	first := true
	hook := func() {
		if !first {
			return
		}
		first = false
		// a lets go of the session (as when its Store closes idle
		// sessions), and b writes all of it.
		require.NoError(t, a.CloseSession(context.Background(), s.Meta.ID))
		var err error
		resB, err = Write(context.Background(), b, treeSession(t))
		require.NoError(t, err)
		require.NoError(t, b.CloseSession(context.Background(), s.Meta.ID))
	}
	ctx := context.WithValue(context.Background(), beforeRunKey{}, hook)
	resA, err := Write(ctx, a, s)
	require.NoError(t, err)
	assert.Equal(t, WriteResult{Created: true, Existing: 4}, resA, "a stored nothing itself")
	assert.Equal(t, WriteResult{Added: 4}, resB)
	assert.Equal(t, len(s.Events), resA.Added+resB.Added, "each event counted once")

	nodes, err := a.Tree(context.Background(), s.Meta.ID)
	require.NoError(t, err)
	assert.Len(t, nodes, 4)
	parent, branching, err := a.NextParent(context.Background(), s.Meta.ID)
	require.NoError(t, err)
	assert.Equal(t, s.Head, parent, "the next append follows HEAD")
	assert.False(t, branching)
}

// A session the store refuses for its content at the first run (a
// record over Options.MaxRecordSize) is not left behind empty, whether
// this Write made it or found it empty (left by an earlier import that
// stopped there); one that holds events stays.
func TestWriteRefusedLeavesNoEmptySession(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), &sessionstore.Options{MaxRecordSize: 100})
	require.NoError(t, err)
	defer st.Close()
	big := func() *Session {
		s := treeSession(t)
		s.Events[0] = withRecord(t, s.Events[0], sessionstore.UserText(strings.Repeat("x", 200)))
		return s
	}

	res, err := Write(ctx, st, big())
	require.ErrorIs(t, err, sessionstore.ErrRecordTooLarge)
	assert.True(t, SessionProblem(err))
	assert.Equal(t, WriteResult{}, res)
	_, err = st.Meta(ctx, big().Meta.ID)
	assert.ErrorIs(t, err, sessionstore.ErrNotFound, "made and removed again")

	_, err = st.Create(ctx, big().Meta) // an empty session an earlier import left
	require.NoError(t, err)
	_, err = Write(ctx, st, big())
	require.ErrorIs(t, err, sessionstore.ErrRecordTooLarge)
	_, err = st.Meta(ctx, big().Meta.ID)
	assert.ErrorIs(t, err, sessionstore.ErrNotFound, "found empty and removed")

	// The first runs fit, a later one does not: what was written stays.
	s := treeSession(t)
	s.Events[3] = withRecord(t, s.Events[3], sessionstore.AssistantText(strings.Repeat("x", 200)))
	res, err = Write(ctx, st, s)
	require.ErrorIs(t, err, sessionstore.ErrRecordTooLarge)
	assert.Equal(t, 2, res.Added)
	nodes, err := st.Tree(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Len(t, nodes, 2)
}

// withRecord is ev with the kind, role and record of rec.
func withRecord(t *testing.T, ev, rec sessionstore.Event) sessionstore.Event {
	t.Helper()
	ev.Kind, ev.Role, ev.Record = rec.Kind, rec.Role, rec.Record
	return ev
}

func TestSessionProblem(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{ErrInvalidSession, true},
		{sessionstore.ErrInvalidEvent, true},
		{sessionstore.ErrRecordTooLarge, true},
		{sessionstore.ErrInvalidMeta, true},
		{sessionstore.ErrConflict, true},
		{&sessionstore.CorruptionError{Path: "p", Err: context.Canceled}, true},
		{sessionstore.ErrUnsupportedFormat, true},
		{context.Canceled, false},
		{sessionstore.ErrClosed, false},
		{sessionstore.ErrLocked, false},
		{sessionstore.ErrSessionFailed, false},
		{nil, false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, SessionProblem(tc.err), "%v", tc.err)
	}
}

// A Write whose first run the store refuses because another Store stored
// part of it meanwhile (an import of an older copy of the transcript, in
// another process) leaves the session the other wrote: it removes only a
// session that holds no event.
func TestWriteConflictKeepsWhatAnotherStored(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	a, err := sessionstore.Open(dir, &sessionstore.Options{WaitForLock: true})
	require.NoError(t, err)
	defer a.Close()
	b, err := sessionstore.Open(dir, &sessionstore.Options{WaitForLock: true})
	require.NoError(t, err)
	defer b.Close()
	s := treeSession(t) // runs: r - a, then c, then b
	first := true
	hook := func() {
		if !first {
			return
		}
		first = false
		// b imports an older copy, which holds the root alone.
		require.NoError(t, a.CloseSession(ctx, s.Meta.ID))
		older := treeSession(t)
		older.Events, older.Head = older.Events[:1], older.Events[0].ID
		res, err := Write(ctx, b, older)
		require.NoError(t, err)
		require.Equal(t, 1, res.Added)
		require.NoError(t, b.CloseSession(ctx, s.Meta.ID))
	}
	_, err = Write(context.WithValue(ctx, beforeRunKey{}, hook), a, s)
	require.ErrorIs(t, err, sessionstore.ErrConflict, "the run [r a] is stored in part")
	assert.True(t, SessionProblem(err))

	nodes, err := a.Tree(ctx, s.Meta.ID)
	require.NoError(t, err, "the session b wrote is kept")
	assert.Len(t, nodes, 1)

	// Importing again completes it.
	res, err := Write(ctx, a, treeSession(t))
	require.NoError(t, err)
	assert.Equal(t, WriteResult{Added: 3, Existing: 1}, res)
}
