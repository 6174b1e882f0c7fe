package remote_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

// TestIdleHolderKeepsItsSession, against the S3 server: a Store that
// holds a session and writes nothing for twice LeaseTime keeps it (its
// renewals, on the server's clock, count as writes: another Store gets
// ErrLocked), and appends afterwards without being fenced; once it
// closes, the other Store opens the session at once and loads both
// events.
func TestIdleHolderKeepsItsSession(t *testing.T) {
	t.Parallel() // mostly waits
	// The server's modification times are whole seconds: the lease leaves
	// room for a renewal (due every LeaseTime/3, checked every LeaseTime/6)
	// and that rounding.
	const lease = 6 * time.Second
	obj := s3test.Shared(t).Store(t)
	ctx := t.Context()
	opts := func() *sessionstore.Options {
		return &sessionstore.Options{Remote: obj, LeaseTime: lease, RemoteTimeout: 20 * time.Second}
	}
	a, err := sessionstore.Open(t.TempDir(), opts())
	require.NoError(t, err)
	defer a.Close()
	m, err := a.Create(ctx, sessionstore.Meta{Name: "idle"})
	require.NoError(t, err)
	_, err = a.Append(ctx, m.ID, sessionstore.UserText("before"))
	require.NoError(t, err)

	b, err := sessionstore.Open(t.TempDir(), opts())
	require.NoError(t, err)
	defer b.Close()
	for range 2 {
		time.Sleep(lease)
		_, err = b.Load(ctx, m.ID)
		require.ErrorIs(t, err, sessionstore.ErrLocked, "the idle holder renewed its lease")
	}
	_, err = a.Append(ctx, m.ID, sessionstore.UserText("after"))
	require.NoError(t, err, "not fenced")
	require.NoError(t, a.Close())

	evs, err := b.Load(ctx, m.ID)
	require.NoError(t, err)
	assert.Len(t, evs, 2)
}
