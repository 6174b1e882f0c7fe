package sessionstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// remoteFilesOf returns the remote files of session id, open in s.
func remoteFilesOf(t *testing.T, s *Store, id uuid.UUID) *remoteFiles {
	t.Helper()
	h, ok := s.reg.tab.Get(id)
	require.True(t, ok, "session %s is open", id)
	rf, ok := h.files.(*remoteFiles)
	require.True(t, ok, "session %s is kept remotely", id)
	return rf
}

// TestRemoteIdleHolderRenewsItsLease: a holder that writes nothing for
// twice LeaseTime keeps its session (its renewals count as writes), and
// appends afterwards unfenced; once it stops renewing (paused, its session
// still open) another Store takes the session over LeaseTime later; when
// it wakes, its renewal finds the other Store's marker and fences it
// without a write, and its next append returns ErrFenced. The object
// store's clock runs with the local one here.
func TestRemoteIdleHolderRenewsItsLease(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	obj := newMemObjects()
	obj.followTime()
	const lease = 1500 * time.Millisecond
	opts := func(wait bool) *Options {
		o := remoteOpts(obj)
		o.LeaseTime, o.WaitForLock = lease, wait
		return o
	}
	a, _ := apiNewStore(t, opts(false))
	m, err := a.Create(ctx, Meta{Name: "idle"})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("a0"))
	rf := remoteFilesOf(t, a, m.ID)

	time.Sleep(2 * lease) // a writes nothing
	b, _ := apiNewStore(t, opts(false))
	_, err = b.Load(ctx, m.ID)
	require.ErrorIs(t, err, ErrLocked, "a renewed its lease while idle")
	renewal, err := obj.Get(ctx, seam.RenewKey(m.ID), 0, -1)
	require.NoError(t, err)
	rf.Mu.Lock()
	assert.Equal(t, rf.Lease.String(), string(renewal), "the renewal names a's lease")
	rf.Mu.Unlock()
	apiAppend(t, a, m.ID, textEv("a1"))

	rf.stopRenewal() // a pauses, its session open
	w, _ := apiNewStore(t, opts(true))
	assert.Equal(t, []string{"a0", "a1"}, loadTexts(t, w, m.ID), "taken over once a stopped renewing")

	rf.startRenewal() // a wakes
	require.Eventually(t, func() bool {
		rf.Mu.Lock()
		defer rf.Mu.Unlock()
		return errors.Is(rf.Lost, ErrFenced)
	}, 5*time.Second, 10*time.Millisecond, "a's renewal finds w's marker")
	_, err = a.Append(ctx, m.ID, textEv("zombie"))
	require.ErrorIs(t, err, ErrFenced)
	apiAppend(t, w, m.ID, textEv("w0"))
	assert.Equal(t, []string{"a0", "a1", "w0"}, loadTexts(t, w, m.ID))
}

// TestHolderIdleCountsOnlyTheNewestLeasesRenewal: HolderIdle is the age of
// the newest log object, or of a younger renewal naming that object's
// lease; a renewal naming another lease, or that is not a lease id, or
// longer than one, does not count.
func TestHolderIdleCountsOnlyTheNewestLeasesRenewal(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("a0"))
	rf := remoteFilesOf(t, a, m.ID)
	rf.stopRenewal() // the test puts the renewals
	rf.Mu.Lock()
	lease := rf.Lease
	rf.Mu.Unlock()

	b, _ := apiNewStore(t, remoteOpts(obj))
	r := b.remoteReader(m.ID)
	v, err := r.readView(ctx)
	require.NoError(t, err)
	require.NotNil(t, v)
	require.Equal(t, lease, v.NewestHead.Lease)

	const old = 2 * time.Minute
	obj.advance(old)
	for _, c := range []struct {
		name    string
		renewal string // "" for none
		want    time.Duration
	}{
		{"no renewal", "", old},
		{"the holder's", lease.String(), 0},
		{"another lease's", uuid.Must(uuid.NewV7()).String(), old},
		{"not a lease id", "renewed", old},
		{"longer than a lease id", lease.String() + strings.Repeat(" ", 64), old},
	} {
		if c.renewal != "" {
			require.NoError(t, obj.Put(ctx, seam.RenewKey(m.ID), []byte(c.renewal)), c.name)
		}
		idle, err := r.HolderIdle(ctx, v, time.Minute)
		require.NoError(t, err, c.name)
		assert.Equal(t, c.want, idle, c.name)
	}
	require.NoError(t, obj.Put(ctx, seam.RenewKey(m.ID), []byte(lease.String())))
	idle, err := r.HolderIdle(ctx, v, 3*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, old, idle, "the renewal is read only once the log is a lease old")
}
