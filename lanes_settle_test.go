package sessionstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestSwitchLaneBesideAppendInFlight: a switch made while an append of the
// same Store is being synced takes effect after that append, not before
// it. The append chose its parent on the old lane; were the switch written
// first, that append's event would become HEAD after it and so the new
// active lane's tip, undoing the switch. The lane change waits for the
// append (settle), so the next parent is the switched-to lane's tip.
func TestSwitchLaneBesideAppendInFlight(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test gates, fails or checks.
	ctx := t.Context()
	m := vfs.NewMemFS()
	g := &rtGate{reached: make(chan struct{}), release: make(chan struct{})}
	m.SetFault(g.hook)
	s := apiOpen(t, memRoot, &Options{JournalSize: -1, fs: m})
	released := false
	release := func() {
		if !released {
			released = true
			close(g.release)
		}
	}
	t.Cleanup(release)
	session := apiNewSession(t, s)
	root := apiAppend(t, s, session, UserText("root"))
	apiAppend(t, s, session, AssistantText("on main"))
	require.NoError(t, s.CreateLane(ctx, session, "other", root.ID))

	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, session, UserText("in flight on main"))
		appended <- err
	}()
	reached(t, g.reached, "the append's sync")
	switched := make(chan error, 1)
	go func() { switched <- s.SwitchLane(ctx, session, "other") }()
	// The switch either waits for the sync or returns at once; either
	// way the sync is released next, and both must end.
	select {
	case err := <-switched:
		switched <- err
	case <-time.After(200 * time.Millisecond):
	}
	release()
	require.NoError(t, <-appended)
	require.NoError(t, <-switched)

	active, err := s.ActiveLane(ctx, session)
	require.NoError(t, err)
	assert.Equal(t, "other", active.Name)
	assert.Equal(t, root.ID, active.Tip, "the active lane's tip is the one switched to")
	next, branching, err := s.NextParent(ctx, session)
	require.NoError(t, err)
	assert.Equal(t, root.ID, next, "the next append goes on the switched-to lane")
	assert.True(t, branching)
}
