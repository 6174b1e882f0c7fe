package durable

import (
	"errors"
	"sync"
)

// Coalescer runs one operation, such as the sync of a directory, once for
// every goroutine that asks for it while the run before is under way.
// Do returns the error of a run of fn that started after Do was called:
// a sync of a directory that began after the caller's change to it covers
// that change, so one run serves every caller that arrived while the run
// before it was going, however many. Runs never overlap.
//
// Every call of Do on one Coalescer must pass an fn doing the same thing
// (a round runs the fn of its first caller only). The zero value is ready
// to use.
type Coalescer struct {
	run   sync.Mutex // held by the round whose fn runs
	mu    sync.Mutex // guards next and calls
	next  *round     // the round callers join, not started; nil if none
	calls int        // calls of Do so far
}

// round is one run of fn and the callers it serves; done is closed when
// the run has returned, err set.
type round struct {
	done chan struct{}
	err  error
}

// errNotReturned is the answer of a round whose fn panicked.
var errNotReturned = errors.New("durable: the coalesced operation did not return")

// Do runs fn, or waits for a run of it that starts after this call, and
// returns that run's error. The first caller to find no round waiting
// starts one and runs fn in it once the run before has returned; callers
// that arrive before then join it and wait.
func (c *Coalescer) Do(fn func() error) error {
	c.mu.Lock()
	c.calls++
	r := c.next
	lead := r == nil
	if lead {
		r = &round{done: make(chan struct{}), err: errNotReturned}
		c.next = r
	}
	c.mu.Unlock()
	if !lead {
		<-r.done
		return r.err
	}
	c.run.Lock()
	defer c.run.Unlock()
	defer close(r.done)
	c.mu.Lock()
	c.next = nil // from here on, callers need the next run
	c.mu.Unlock()
	r.err = fn()
	return r.err
}
