package sessionstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lanes on object storage: a change is in the session's log when the call
// returns, and a Store on another machine sees it, whether it reads it
// from a release marker's state or from the lanes object itself.
func TestRemoteLanesHandoff(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	dirA, dirB := t.TempDir(), t.TempDir()
	a, err := Open(dirA, remoteOpts(obj))
	require.NoError(t, err)
	m, err := a.Create(ctx, Meta{Name: "lanes"})
	require.NoError(t, err)
	e0 := apiAppend(t, a, m.ID, textEv("zero"))
	e1 := apiAppend(t, a, m.ID, textEv("one"))
	require.NoError(t, a.CreateLane(ctx, m.ID, "alt", e0.ID))
	require.NoError(t, a.SwitchLane(ctx, m.ID, "alt"))
	require.NotEmpty(t, obj.keys(seam.LogPrefix(m.ID)))
	require.NoError(t, a.Close())

	// B, on an empty directory, restores the lanes from the release
	// marker's state: alt is active and the next append goes onto e0.
	b, err := Open(dirB, remoteOpts(obj))
	require.NoError(t, err)
	tips, active := laneTips(t, b, m.ID)
	assert.Equal(t, "alt", active)
	assert.Equal(t, map[string]uuid.UUID{DefaultLane: e1.ID, "alt": e0.ID}, tips)
	e2 := apiAppend(t, b, m.ID, textEv("on alt"))
	assert.Equal(t, e0.ID, e2.ParentID)
	require.NoError(t, b.MoveLane(ctx, m.ID, DefaultLane, e0.ID))
	require.NoError(t, b.Close())

	// A again, whose directory holds its own older lanes file: the log's
	// wins.
	a, err = Open(dirA, remoteOpts(obj))
	require.NoError(t, err)
	tips, active = laneTips(t, a, m.ID)
	assert.Equal(t, "alt", active)
	assert.Equal(t, map[string]uuid.UUID{DefaultLane: e0.ID, "alt": e2.ID}, tips)
	require.NoError(t, a.SwitchLane(ctx, m.ID, DefaultLane))
	// A stops without releasing (its process died): the lanes object is
	// newer than the newest marker. B takes the session over once the
	// lease ran out and reads the lanes from the object.
	obj.advance(2 * time.Minute)
	b, err = Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	tips, active = laneTips(t, b, m.ID)
	assert.Equal(t, DefaultLane, active)
	assert.Equal(t, map[string]uuid.UUID{DefaultLane: e0.ID, "alt": e2.ID}, tips)
	e3 := apiAppend(t, b, m.ID, textEv("on main"))
	assert.Equal(t, e0.ID, e3.ParentID)
	require.NoError(t, b.Close())
	a.Close() // fenced: its lease was taken over
}

// A lane change whose log object is not stored fails, stops the
// session's writes, and is not what the next open sees: the local file
// it left is replaced by the log's.
func TestRemoteLaneChangeNotStored(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	dir := t.TempDir()
	a, err := Open(dir, remoteOpts(obj))
	require.NoError(t, err)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	e0 := apiAppend(t, a, m.ID, textEv("zero"))
	apiAppend(t, a, m.ID, textEv("one"))
	require.NoError(t, a.CreateLane(ctx, m.ID, "alt", e0.ID))
	obj.mu.Lock()
	obj.fail = func(op, key string) (error, bool) {
		if op == "create" && strings.Contains(key, "/log/") {
			obj.fail = nil
			return fmt.Errorf("create %s: connection reset", key), true
		}
		return nil, false
	}
	obj.mu.Unlock()
	err = a.SwitchLane(ctx, m.ID, "alt")
	require.ErrorIs(t, err, ErrRemote)
	b, err := os.ReadFile(filepath.Join(dir, sessionsDir, m.ID.String(), lanesFile))
	require.NoError(t, err)
	require.Contains(t, string(b), `"active":"alt"`, "the local file holds the unacknowledged switch")
	require.NoError(t, a.Close())

	for _, d := range []string{dir, t.TempDir()} {
		s, err := Open(d, remoteOpts(obj))
		require.NoError(t, err)
		_, active := laneTips(t, s, m.ID)
		assert.Equal(t, DefaultLane, active, "the switch was never acknowledged (%s)", d)
		require.NoError(t, s.Close())
	}
}
