package importer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIDIsDeterministicV7(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 8e6, time.UTC)
	a, b := ID("claude:x", at), ID("claude:x", at)
	assert.Equal(t, a, b)
	assert.NotEqual(t, a, ID("claude:y", at))
	assert.Equal(t, uuid.Version(7), a.Version())
	assert.Equal(t, uuid.RFC4122, a.Variant())
	sec, nsec := a.Time().UnixTime()
	assert.Equal(t, at.UnixMilli(), sec*1000+nsec/1e6)
	assert.Equal(t, uuid.Version(7), ID("k", time.Time{}).Version(), "a zero time clamps")
}

// session builds a tree: r - a - b (head)
//
//	\- c
func treeSession(t *testing.T) *Session {
	t.Helper()
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := func(key string, parent uuid.UUID, mk func() sessionstore.Event, i int) sessionstore.Event {
		e := mk()
		e.Time = at.Add(time.Duration(i) * time.Second)
		e.ID = ID(key, e.Time)
		e.ParentID = parent
		return e
	}
	r := ev("r", uuid.Nil, func() sessionstore.Event { return sessionstore.UserText("root") }, 0)
	a := ev("a", r.ID, func() sessionstore.Event { return sessionstore.AssistantText("a") }, 1)
	c := ev("c", r.ID, func() sessionstore.Event { return sessionstore.AssistantText("c") }, 2)
	b := ev("b", a.ID, func() sessionstore.Event { return sessionstore.UserText("b") }, 3)
	return &Session{
		Meta:   sessionstore.Meta{ID: ID("session", at), Name: "imported", CreatedAt: at},
		Events: []sessionstore.Event{r, a, b, c},
		Head:   b.ID,
		Path:   "test.jsonl",
	}
}

func TestWriteTreeAndReimport(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	s := treeSession(t)

	res, err := Write(ctx, st, s)
	require.NoError(t, err)
	assert.Equal(t, WriteResult{Created: true, Added: 4}, res)

	head, err := st.Head(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Equal(t, s.Head, head, "HEAD names the session's head")
	path, err := st.Load(ctx, s.Meta.ID)
	require.NoError(t, err)
	require.Len(t, path, 3)
	for i, want := range []sessionstore.Event{s.Events[0], s.Events[1], s.Events[2]} {
		assert.Equal(t, want.ID, path[i].ID)
		assert.True(t, want.Time.Equal(path[i].Time), "time kept: %s vs %s", want.Time, path[i].Time)
	}
	nodes, err := st.Tree(ctx, s.Meta.ID)
	require.NoError(t, err)
	require.Len(t, nodes, 4)
	for _, n := range nodes {
		if n.ID == s.Events[3].ID {
			assert.Equal(t, s.Events[0].ID, n.ParentID)
			assert.Equal(t, s.Events[0].ID, n.BranchFrom, "c starts a branch")
		}
	}

	// Importing again adds nothing and leaves HEAD.
	res, err = Write(ctx, st, s)
	require.NoError(t, err)
	assert.Equal(t, WriteResult{Existing: 4}, res)
	nodes, err = st.Tree(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Len(t, nodes, 4)

	// A source that grew: only the new event is appended, and is HEAD.
	grown := *s
	d := sessionstore.AssistantText("d")
	d.Time = s.Events[2].Time.Add(time.Minute)
	d.ID = ID("d", d.Time)
	d.ParentID = s.Head
	grown.Events = append(append([]sessionstore.Event(nil), s.Events...), d)
	grown.Head = d.ID
	res, err = Write(ctx, st, &grown)
	require.NoError(t, err)
	assert.Equal(t, WriteResult{Added: 1, Existing: 4}, res)
	head, err = st.Head(ctx, s.Meta.ID)
	require.NoError(t, err)
	assert.Equal(t, d.ID, head)
}

func TestWriteRefusesInvalidSessions(t *testing.T) {
	ctx := context.Background()
	st, err := sessionstore.Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	cases := map[string]func(s *Session){
		"no session id":    func(s *Session) { s.Meta.ID = uuid.Nil },
		"event without id": func(s *Session) { s.Events[1].ID = uuid.Nil },
		"repeated id":      func(s *Session) { s.Events[2].ID = s.Events[1].ID },
		"child first":      func(s *Session) { s.Events[1], s.Events[2] = s.Events[2], s.Events[1] },
		"second root":      func(s *Session) { s.Events[3].ParentID = uuid.Nil },
		"head not a leaf":  func(s *Session) { s.Head = s.Events[1].ID },
		"unknown head":     func(s *Session) { s.Head = ID("nowhere", time.Now()) },
	}
	for name, spoil := range cases {
		t.Run(name, func(t *testing.T) {
			s := treeSession(t)
			spoil(s)
			_, err := Write(ctx, st, s)
			assert.ErrorIs(t, err, ErrInvalidSession)
			if s.Meta.ID != uuid.Nil {
				_, err = st.Meta(ctx, s.Meta.ID)
				assert.ErrorIs(t, err, sessionstore.ErrNotFound, "nothing written")
			}
		})
	}
}

func TestLineError(t *testing.T) {
	err := error(Malformed("a/b.jsonl", 7, "no %s", "uuid"))
	var le *LineError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, 7, le.Line)
	assert.ErrorIs(t, err, ErrMalformed)
	assert.Equal(t, "a/b.jsonl:7: importer: malformed input: no uuid", err.Error())
}
