package durable

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// waitCalls waits until c has had n calls of Do. The deadline is a safety
// net that turns a call that never comes into a failure, not a hang; it
// decides no outcome.
func waitCalls(t *testing.T, c *Coalescer, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c.mu.Lock()
		calls := c.calls
		c.mu.Unlock()
		if calls >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls of Do, want %d", calls, n)
		}
		runtime.Gosched()
	}
}

// TestCoalescerLaterCallersGetALaterRun: callers that arrive while a run
// is under way are all served by the one run after it, never by the run
// under way (which began before their change, say a file made in the
// directory it syncs).
func TestCoalescerLaterCallersGetALaterRun(t *testing.T) {
	var c Coalescer
	started, release := make(chan struct{}), make(chan struct{})
	runs := 0 // written by runs only, which never overlap
	fn := func() error {
		runs++
		n := runs
		if n == 1 {
			close(started)
			<-release
		}
		return fmt.Errorf("run %d", n)
	}
	first := make(chan error, 1)
	go func() { first <- c.Do(fn) }()
	<-started
	const later = 3
	results := make(chan error, later)
	for range later {
		go func() { results <- c.Do(fn) }()
	}
	waitCalls(t, &c, 1+later) // every later caller is in Do, run 1 still under way
	close(release)
	assert.EqualError(t, <-first, "run 1")
	for range later {
		assert.EqualError(t, <-results, "run 2", "a caller that came during run 1 is served by run 2")
	}
	assert.Equal(t, 2, runs, "one run served every later caller")

	// With no run under way, a call runs fn at once.
	assert.EqualError(t, c.Do(fn), "run 3")
}

// TestCoalescerRunsStartAfterTheirCalls: many goroutines call Do at once;
// each gets the result of a run that started after its call, and runs
// never overlap.
func TestCoalescerRunsStartAfterTheirCalls(t *testing.T) {
	var c Coalescer
	var clock, running atomic.Int64
	fn := func() error {
		if running.Add(1) != 1 {
			t.Error("two runs at once")
		}
		defer running.Add(-1)
		return fmt.Errorf("%d", clock.Add(1)) // the run's start
	}
	const goroutines, calls = 16, 200
	var wg sync.WaitGroup
	var runs sync.Map
	for range goroutines {
		wg.Go(func() {
			for range calls {
				called := clock.Add(1)
				err := c.Do(fn)
				var start int64
				_, serr := fmt.Sscan(err.Error(), &start)
				if !assert.NoError(t, serr) {
					return
				}
				assert.Greater(t, start, called, "served by a run that started before the call")
				runs.Store(start, true)
			}
		})
	}
	wg.Wait()
	n := 0
	runs.Range(func(any, any) bool { n++; return true })
	require.Positive(t, n)
	t.Logf("%d calls served by %d runs", goroutines*calls, n)
}

// TestCoalescerPanic: a run whose fn panics answers its callers with an
// error, and the next call runs fn again.
func TestCoalescerPanic(t *testing.T) {
	var c Coalescer
	require.Panics(t, func() { _ = c.Do(func() error { panic("boom") }) })
	assert.NoError(t, c.Do(func() error { return nil }))
}
