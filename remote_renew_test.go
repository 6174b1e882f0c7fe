package sessionstore

import (
	"context"
	"errors"
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

// stall stops the lease renewal of session id, open in s, as a holder
// that stalls (paused, cut off) stops renewing: tests that move the
// object store's clock past the lease of a holder they leave open call it
// first.
func stall(t *testing.T, s *Store, id uuid.UUID) {
	t.Helper()
	remoteFilesOf(t, s, id).stopRenewal()
}

// TestRemoteIdleHolderRenewsItsLease: a holder that writes nothing for
// twice LeaseTime keeps its session (its renewals count as writes: one
// under its lease's key), and
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
	const lease = 3 * time.Second
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
	rf.Mu.Lock()
	aLease := rf.Lease
	rf.Mu.Unlock()
	_, err = obj.Stat(ctx, seam.RenewKey(m.ID, aLease))
	require.NoError(t, err, "a renewed under its lease's key")
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
// the newest log object, or of a younger renewal of that object's lease;
// a renewal of another lease does not count; the renewal is not read
// while the log is younger than the lease; a release deletes its lease's
// renewal.
func TestHolderIdleCountsOnlyTheNewestLeasesRenewal(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("a0"))
	rf := remoteFilesOf(t, a, m.ID)
	stall(t, a, m.ID) // the test puts the renewals
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
	idle, err := r.HolderIdle(ctx, v, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, old, idle, "no renewal")

	require.NoError(t, obj.Put(ctx, seam.RenewKey(m.ID, uuid.Must(uuid.NewV7())), nil))
	idle, err = r.HolderIdle(ctx, v, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, old, idle, "another lease's renewal")

	idle, err = r.HolderIdle(ctx, v, 3*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, old, idle, "the log younger than the lease")

	obj.advance(-time.Minute)
	require.NoError(t, obj.Put(ctx, seam.RenewKey(m.ID, lease), nil))
	obj.advance(time.Minute)
	idle, err = r.HolderIdle(ctx, v, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, time.Minute, idle, "the holder's renewal, a minute old")

	require.NoError(t, rf.Renew(ctx))
	idle, err = r.HolderIdle(ctx, v, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, time.Duration(0), idle, "renewed now")
	require.NoError(t, a.Close())
	_, err = obj.Stat(ctx, seam.RenewKey(m.ID, lease))
	assert.ErrorIs(t, err, ErrObjectNotFound, "the release deleted its renewal")
}
