package importer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A session whose Head was stored by an earlier Write while new events
// arrive on another branch: the store moves HEAD only by appending, so
// HEAD cannot name s.Head again; Write's doc says HEAD is then the last
// event it wrote.
func TestWriteHeadStoredNewEventsElsewhere(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	s := treeSession(t) // r - a - b (head), r - c
	first := *s
	first.Events = s.Events[:3] // r, a, b
	_, err = Write(ctx, st, &first)
	require.NoError(t, err)

	res, err := Write(ctx, st, s) // c is new, b (Head) is stored
	require.NoError(t, err)
	assert.Equal(t, 1, res.Added)
	head, err := st.Head(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Equal(t, s.Events[3].ID, head, "HEAD is the last event written")
	assert.NotEqual(t, s.Head, head)
}

// Two Writes of the same session at once (an import run twice in
// parallel): both succeed, one creates the session, and it holds each
// event once with HEAD at the session's Head.
func TestWriteConcurrentSameSession(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	var wg sync.WaitGroup
	results := make([]WriteResult, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			results[i], errs[i] = Write(ctx, st, treeSession(t))
		})
	}
	wg.Wait()
	for i := range 2 {
		require.NoError(t, errs[i], "write %d", i)
	}
	nodes, err := st.Tree(ctx, treeSession(t).Meta.ID)
	require.NoError(t, err)
	assert.Len(t, nodes, 4)
	created := 0
	for _, r := range results {
		if r.Created {
			created++
		}
	}
	assert.Equal(t, 1, created)
	head, err := st.Head(ctx, treeSession(t).Meta.ID)
	require.NoError(t, err)
	assert.Equal(t, treeSession(t).Head, head)
}

// branchy builds a session of n events where every third event branches
// from an earlier one.
func branchy(n int) *Session {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	s := &Session{Meta: sessionstore.Meta{ID: ID("branchy", at), CreatedAt: at}, Path: "branchy.jsonl"}
	for i := range n {
		ev := sessionstore.UserText(fmt.Sprint(i))
		ev.Time = at.Add(time.Duration(i) * time.Second)
		ev.ID = ID(fmt.Sprint("e", i), ev.Time)
		switch {
		case i == 0:
		case i%3 == 0:
			ev.ParentID = s.Events[i/2].ID
		default:
			ev.ParentID = s.Events[i-1].ID
		}
		s.Events = append(s.Events, ev)
	}
	return s
}

// Writes of one branched session at once: Branch selections of one
// Write must not redirect another's appends.
func TestWriteConcurrentBranches(t *testing.T) {
	ctx := context.Background()
	for round := range 5 {
		st, err := sessionstore.Open(t.TempDir(), nil)
		require.NoError(t, err)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { _, errs[i] = Write(ctx, st, branchy(60)) })
		}
		wg.Wait()
		for i, err := range errs {
			assert.NoError(t, err, "round %d write %d", round, i)
		}
		s := branchy(60)
		nodes, err := st.Tree(ctx, s.Meta.ID)
		require.NoError(t, err)
		assert.Len(t, nodes, 60)
		parent := map[string]string{}
		for _, n := range nodes {
			parent[n.ID.String()] = n.ParentID.String()
		}
		for _, ev := range s.Events {
			assert.Equal(t, ev.ParentID.String(), parent[ev.ID.String()])
		}
		require.NoError(t, st.Close())
	}
}

// A run that fails after Write chose its branch point leaves no Branch
// selection behind: the next append to the session still follows HEAD.
func TestWriteFailureLeavesNoBranchSelection(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	s := treeSession(t) // r - a - b (head), r - c
	first := *s
	first.Events = s.Events[:3]
	_, err = Write(ctx, st, &first)
	require.NoError(t, err)
	bad := *s
	bad.Events = slices.Clone(s.Events)
	bad.Events[3].ID = uuid.New() // c: a version 4 id, which the store refuses
	bad.Head = uuid.Nil
	_, err = Write(ctx, st, &bad)
	require.ErrorIs(t, err, sessionstore.ErrInvalidEvent)
	parent, branching, err := st.NextParent(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Equal(t, s.Head, parent, "the next append follows HEAD")
	assert.False(t, branching)
}
