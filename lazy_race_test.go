package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Calls that wait with a session's mutex released (for a sync, in
// endAppending and settle) while another call changes the session's state
// under them: each must look at the state again after the wait.

// callNoPanic runs f, turning a panic into an error naming it.
func callNoPanic(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

// TestMaterializeAfterFailedRepairByAnotherCall: two calls that need
// the index wait together for the sync of an append to a session
// appending without its index (endAppending waits for it with the mutex
// released). The first to get the mutex ends appending and reconciles; the
// HEAD repair fails, so the session is closed (becomeClosed), which keeps
// headEntry. The second call then finds partial false and headEntry set,
// and reconciles the closed session: it repairs files without holding the
// session's lock and then panics in becomeIndexed ("in state closed").
// It must get the session's cause (or open it again), not panic.
func TestMaterializeAfterFailedRepairByAnotherCall(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	g := &syncGate{FS: m, entered: make(chan struct{}), release: make(chan struct{})}
	o := Options{ChunkSize: 64 << 10}
	s, id, _ := lazySession(t, g, o, 5) // appending without its index
	defer s.Close()

	g.armed.Store(true)
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, id, UserText("in flight"))
		appended <- err
	}()
	reached(t, g.entered, "the append's sync")

	// The HEAD repair of the first reconciliation fails (its rename); the
	// second one finishes it.
	fault := vfs.FailNth(1, errors.New("injected EIO"), vfs.OpRename)
	m.SetFault(fault.Hook)
	results := make(chan error, 2)
	for range 2 {
		go func() {
			results <- callNoPanic(func() error {
				_, err := s.Tree(ctx, id)
				return err
			})
		}()
	}
	waitUntil(t, s, id, "both calls to wait for the sync in endAppending", func(h *openSession) bool { return h.pipe.Waiting() == 2 })
	close(g.release)
	require.NoError(t, <-appended)
	for range 2 {
		select {
		case err := <-results:
			if err != nil {
				assert.NotContains(t, err.Error(), "panic", "a call on a session a failed repair closed")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a Tree call did not return")
		}
	}
	require.True(t, fault.Fired(), "precondition: the repair failed")
}

// TestFlushBesideFailedIndexLoad: a Flush of a session appending
// without its index waits for a running sync (settle releases the mutex);
// meanwhile a call that needs the index ends appending (closing
// index.jsonl, h.index = nil) and fails to load the index. When that call
// gets the mutex first, Flush then syncs h.index, which is nil: a nil
// pointer panic, with the session's mutex held for ever. Flush must return
// an error or flush what there is. Which call gets the mutex first is up
// to the scheduler, so the scenario runs several times.
func TestFlushBesideFailedIndexLoad(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1)) // the call that waited last tends to run first
	for attempt := range 10 {
		t.Run(fmt.Sprint(attempt), flushBesideFailedIndexLoad)
	}
}

func flushBesideFailedIndexLoad(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	g := &syncGate{FS: m, entered: make(chan struct{}), release: make(chan struct{})}
	o := Options{ChunkSize: 64 << 10}
	s, id, _ := lazySession(t, g, o, 5) // appending without its index

	g.armed.Store(true)
	appended := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, id, UserText("in flight"))
		appended <- err
	}()
	reached(t, g.entered, "the append's sync")

	flushed := make(chan error, 1)
	go func() { flushed <- callNoPanic(func() error { return s.Flush(ctx, id) }) }()
	waitUntil(t, s, id, "Flush to wait for the sync", func(h *openSession) bool { return h.pipe.Waiting() == 1 })
	m.SetFault(failIndexOpen) // loading the index fails
	loaded := make(chan error, 1)
	go func() {
		loaded <- callNoPanic(func() error {
			_, err := s.Tree(ctx, id)
			return err
		})
	}()
	waitUntil(t, s, id, "Tree to wait for the sync in endAppending", func(h *openSession) bool { return h.pipe.Waiting() == 2 })
	close(g.release)
	require.NoError(t, <-appended)
	panicked := false
	for _, ch := range []chan error{loaded, flushed} {
		select {
		case err := <-ch:
			if err != nil && strings.HasPrefix(err.Error(), "panic") {
				panicked = true
				t.Error(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call did not return")
		}
	}
	m.SetFault(nil)
	if !panicked {
		require.NoError(t, s.Close())
	}
}
