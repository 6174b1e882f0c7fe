package commit

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/durable"
)

// gates gives each successful Write of a test log a pending that returns
// only once the test opens its gate, and after the pending of the Write
// before it returned (with that one's error if it failed), as a Log must
// (an object store's Creates, acknowledged in log order).
type gates struct {
	// unchained: a pending returns as soon as its gate opens, whatever
	// the earlier ones do (the pipeline orders them all the same).
	unchained bool
	mu        sync.Mutex
	chans     []chan error
	last      *resolved
}

type resolved struct {
	done chan struct{}
	err  error
}

func (g *gates) next() func() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := make(chan error, 1)
	g.chans = append(g.chans, c)
	prev, mine := g.last, &resolved{done: make(chan struct{})}
	g.last = mine
	return func() error {
		err := <-c
		if prev != nil && !g.unchained {
			<-prev.done
			if err == nil {
				err = prev.err
			}
		}
		mine.err = err
		close(mine.done)
		return err
	}
}

// open opens gate i (the i-th Write's) with err.
func (g *gates) open(i int, err error) {
	g.mu.Lock()
	c := g.chans[i]
	g.mu.Unlock()
	c <- err
}

// issued is the number of pendings handed out.
func (g *gates) issued() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.chans)
}

// pendingSession returns a test session whose writes return gated
// pendings.
func pendingSession(t *testing.T) (*session, *gates) {
	s, g := newSession(t), &gates{}
	s.log.pending = g.next
	return s, g
}

// waitIssued waits until n pendings were handed out.
func waitIssued(t *testing.T, g *gates, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return g.issued() >= n }, 10*time.Second, time.Millisecond, "%d writes", n)
}

// TestCommitPending: a Write whose durability is still pending (an object
// store's Create in flight) lets the next group be written at once; the
// groups are acknowledged in the order they were written, whatever order
// their pendings end in; a failed pending fails its group and every
// group after it, and stops the session; a write that fails behind a
// pending group drops only its own records and those after them; Settle
// waits for the pending groups.
func TestCommitPending(t *testing.T) {
	t.Run("acknowledged in order", func(t *testing.T) {
		s, g := pendingSession(t)
		g.unchained = true
		var first, second error
		var wg sync.WaitGroup
		wg.Go(func() { first = s.append(1) })
		waitIssued(t, g, 1)
		wg.Go(func() { second = s.append(2) })
		waitIssued(t, g, 2) // written while the first is pending
		g.open(1, nil)      // the second ends first
		time.Sleep(20 * time.Millisecond)
		s.locked(func() {
			assert.Empty(t, s.log.published, "nothing published before the first group is stored")
			assert.True(t, s.p.Syncing())
		})
		g.open(0, nil)
		wg.Wait()
		assert.NoError(t, first)
		assert.NoError(t, second)
		s.locked(func() {
			assert.Equal(t, seq(0, 3), s.log.published, "published in the order written")
			assert.Empty(t, s.p.Inflight())
			assert.False(t, s.p.Syncing())
		})
		_, _, writes, _ := s.c.state()
		assert.Equal(t, 2, writes)
	})
	t.Run("a failed pending fails the groups after it", func(t *testing.T) {
		s, g := pendingSession(t)
		var first, second error
		var wg sync.WaitGroup
		wg.Go(func() { first = s.append(1) })
		waitIssued(t, g, 1)
		wg.Go(func() { second = s.append(2) })
		waitIssued(t, g, 2)
		g.open(1, nil) // stored, but after a number that is not
		refused := errors.New("create refused")
		g.open(0, refused)
		wg.Wait()
		assert.ErrorIs(t, first, refused)
		assert.ErrorIs(t, first, durable.ErrUnsynced)
		assert.ErrorIs(t, second, refused, "not acknowledged: an earlier group failed")
		s.locked(func() {
			assert.Empty(t, s.log.published)
			assert.Equal(t, 1, s.log.stops, "the session stops writing")
			assert.Empty(t, s.p.Inflight())
			assert.False(t, s.p.Syncing())
		})
		assert.Error(t, s.append(1), "a stopped session refuses appends")
	})
	t.Run("a write that fails behind a pending group", func(t *testing.T) {
		s, g := pendingSession(t)
		s.log.writeErrs = []error{nil, errWrite}
		var first, second error
		var wg sync.WaitGroup
		wg.Go(func() { first = s.append(1) })
		waitIssued(t, g, 1)
		wg.Go(func() { second = s.append(2) })
		require.Eventually(t, func() bool {
			s.log.wmu.Lock()
			defer s.log.wmu.Unlock()
			return len(s.log.writeErrs) == 0
		}, 10*time.Second, time.Millisecond, "the second write ran")
		time.Sleep(20 * time.Millisecond)
		s.locked(func() { assert.Empty(t, s.log.dropped, "nothing dropped while the first group is pending") })
		g.open(0, nil)
		wg.Wait()
		assert.NoError(t, first, "the group before the failed write is acknowledged")
		assert.ErrorIs(t, second, errWrite)
		s.locked(func() {
			assert.Equal(t, seq(0, 1), s.log.published)
			assert.Equal(t, seq(1, 3), s.log.dropped)
			assert.Zero(t, s.log.stops, "a failed write does not stop the session")
		})
		done := make(chan error, 1)
		go func() { done <- s.append(1) }()
		waitIssued(t, g, 2)
		g.open(1, nil)
		require.NoError(t, <-done)
		data, _, _, _ := s.c.state()
		assert.Equal(t, lineOf(0)+lineOf(3), data, "the next record follows the acknowledged one")
	})
	t.Run("Settle waits for the pending groups", func(t *testing.T) {
		s, g := pendingSession(t)
		var first error
		var wg sync.WaitGroup
		wg.Go(func() { first = s.append(1) })
		waitIssued(t, g, 1)
		settled := make(chan error, 1)
		go func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			settled <- s.p.Settle()
		}()
		select {
		case err := <-settled:
			t.Fatalf("Settle returned %v with a group pending", err)
		case <-time.After(20 * time.Millisecond):
		}
		g.open(0, nil)
		require.NoError(t, <-settled)
		wg.Wait()
		assert.NoError(t, first)
		s.locked(func() {
			assert.Equal(t, seq(0, 1), s.log.published)
			assert.False(t, s.p.Syncing())
		})
	})
}
