package sessionstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// stateOf returns the state of a session the store has open.
func stateOf(t *testing.T, s *Store, id uuid.UUID) sessionState {
	t.Helper()
	h := lockedHandle(t, s, id)
	defer h.mu.Unlock()
	return h.state
}

// TestSessionStates walks one session through the states of openSession by
// public calls: lazy on a clean reopen, appending after an append,
// indexed once a call needs the whole index, failed after a failed sync
// (writes refused, reads served), and closed by Close, after which the
// old session object refuses every call.
func TestSessionStates(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{JournalSize: -1, ChunkSize: 64 << 10}
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{Name: "states"})
	require.NoError(t, err)
	assert.Equal(t, stateIndexed, stateOf(t, s, meta.ID), "a created session holds its (empty) index")
	evs := appendN(t, s, meta.ID, 3)
	require.NoError(t, s.Close())

	s = openMem(t, m, o)
	defer s.Close()
	_, err = s.Head(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, stateLazy, stateOf(t, s, meta.ID), "a clean format 2 session opens without its index")

	ev, err := s.Append(ctx, meta.ID, UserText("appended lazily"))
	require.NoError(t, err)
	evs = append(evs, ev)
	assert.Equal(t, stateAppending, stateOf(t, s, meta.ID), "an append starts a partial index")

	_, err = s.Tree(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, stateIndexed, stateOf(t, s, meta.ID), "Tree loads the whole index")

	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, chunksDir) {
			return errors.New("injected EIO")
		}
		return nil
	})
	_, err = s.Append(ctx, meta.ID, UserText("not acknowledged"))
	require.Error(t, err, "precondition: the sync failed")
	m.SetFault(nil)
	assert.Equal(t, stateFailed, stateOf(t, s, meta.ID), "a failed sync stops writes")
	_, err = s.Append(ctx, meta.ID, UserText("refused"))
	assert.ErrorIs(t, err, ErrSessionFailed)
	got, err := s.Load(ctx, meta.ID)
	require.NoError(t, err, "a failed session still serves reads")
	assertSameEvents(t, evs, got)

	h := lockedHandle(t, s, meta.ID)
	h.mu.Unlock()
	require.NoError(t, s.Close())
	h.mu.Lock()
	st, cause := h.state, h.usable()
	h.mu.Unlock()
	assert.Equal(t, stateClosed, st)
	assert.ErrorIs(t, cause, ErrClosed)
}

// TestSessionDamagedState: a session whose log is corrupt in the middle
// (found by the analysis: here the index is rebuilt from the chunk) is
// damaged once its index loads, with the valid prefix readable, writes refused with the
// damage, and every call reporting it.
func TestSessionDamagedState(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	evs := appendN(t, s, id, 4)
	require.NoError(t, s.Close())
	path := sessionPath(id, chunksDir, chunkName(0))
	b, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	i := strings.Index(string(b), evs[1].ID.String())
	require.Positive(t, i, "precondition: the second event's line is in the chunk")
	b[i] ^= 1 // inside the second of four lines: not a torn tail
	writeMemFile(t, m, path, b)
	// Without index.jsonl the analysis rebuilds the index from the chunk,
	// reading every record.
	require.NoError(t, m.Remove(sessionPath(id, indexName)))

	s = openMem(t, m, Options{})
	defer s.Close()
	_, err = s.Tree(ctx, id) // loads the index: the analysis finds the damage
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce, "Tree reports the damage")
	assert.Equal(t, stateDamaged, stateOf(t, s, id))
	got, err := s.Load(ctx, id)
	require.ErrorAs(t, err, &ce, "Load reports the damage")
	assertSameEvents(t, evs[:1], got)
	_, err = s.Append(ctx, id, UserText("refused"))
	assert.ErrorAs(t, err, &ce, "writes are refused with the damage")
}

// TestSessionTransitionsGuarded: a transition from a state that does not
// lead to it is a bug in the package, and panics instead of leaving the
// session in a state its doc does not describe.
func TestSessionTransitionsGuarded(t *testing.T) {
	opts, err := (&Options{}).withDefaults()
	require.NoError(t, err)
	tests := []struct {
		from sessionState
		do   func(h *openSession)
	}{
		{stateIndexed, func(h *openSession) { h.becomeAppending() }},
		{stateClosed, func(h *openSession) { h.becomeIndexed(memIndex{}) }},
		{stateAppending, func(h *openSession) { h.becomeIndexed(memIndex{}) }},
		{stateIndexed, func(h *openSession) { h.becomeFailedIndexed(memIndex{}) }},
		{stateClosed, func(h *openSession) { h.becomeDamaged(memIndex{}, &CorruptionError{}) }},
	}
	for _, tc := range tests {
		h := newOpenSession(uuid.New(), "/nowhere", &opts, newHub())
		h.state = tc.from
		assert.Panics(t, func() { tc.do(h) }, "from %s", tc.from)
		assert.Equal(t, tc.from, h.state, "the state is unchanged")
	}
	// The transitions the diagram draws do not panic.
	h := newOpenSession(uuid.New(), "/nowhere", &opts, newHub())
	e := entry{}
	e.ID = uuid.New()
	require.NotPanics(t, func() { h.becomeLazy(e) })
	require.NotPanics(t, func() { h.becomeAppending() })
	require.NotPanics(t, func() { h.becomeLazy(e) })
	require.NotPanics(t, func() { h.becomeIndexed(memIndex{}) })
	require.NotPanics(t, func() { h.becomeFailed(errors.New("x")) })
	require.NotPanics(t, func() { h.becomeDamaged(memIndex{}, &CorruptionError{}) })
	assert.Equal(t, stateDamaged, h.state)
	h.becomeFailed(errors.New("later"))
	assert.Equal(t, stateDamaged, h.state, "a failure keeps a damaged session damaged")
	assert.EqualError(t, h.writeFailure, "x", "the first failure is kept")
}
