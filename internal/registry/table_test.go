package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fake is the session value of the tests: what closed it, and how many
// calls use it as they count themselves.
type fake struct {
	name   string
	users  atomic.Int32
	closed atomic.Bool
}

// kept is the value the tests keep for closed sessions.
type kept struct{ notes []string }

// harness is a Table of fakes named by a letter, with the order they were
// closed in.
type harness struct {
	t     *testing.T
	tab   *Table[*fake, kept]
	mu    sync.Mutex
	order []string // names, in the order closed
	// block, when set, is waited on by every close, after it is told on
	// entered.
	block    chan struct{}
	entered  chan string
	closeErr error
	// busyClosed counts closes of a session a call was using.
	busyClosed atomic.Int32
}

func newHarness(t *testing.T, max int) *harness {
	h := &harness{t: t}
	h.tab = NewTable[*fake, kept](Config[*fake]{
		Max: max,
		New: func(e *Entry[*fake]) *fake { return &fake{name: nameOf(e.ID)} },
		CloseIdle: func(s *fake) error {
			if h.block != nil {
				h.entered <- s.name
				<-h.block
			}
			h.closeFake(s)
			return h.closeErr
		},
	})
	return h
}

func (h *harness) closeFake(s *fake) {
	if s.users.Load() != 0 {
		h.busyClosed.Add(1)
	}
	s.closed.Store(true)
	h.mu.Lock()
	h.order = append(h.order, s.name)
	h.mu.Unlock()
}

func (h *harness) closed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.order...)
}

// idOf is the session id a one-letter name stands for.
func idOf(name string) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)) }

func nameOf(id uuid.UUID) string {
	for c := 'a'; c <= 'z'; c++ {
		if idOf(string(c)) == id {
			return string(c)
		}
	}
	return id.String()
}

// acquire acquires session name, opening it (Opened) when the table says
// so.
func (h *harness) acquire(name string) *Entry[*fake] {
	h.t.Helper()
	e, open, err := h.tab.Acquire(context.Background(), idOf(name))
	require.NoError(h.t, err)
	if open {
		e.Opened()
	}
	e.Value.users.Add(1)
	return e
}

func (h *harness) release(e *Entry[*fake]) {
	e.Value.users.Add(-1)
	h.tab.Release(e)
}

func (h *harness) registered() []string {
	var out []string
	for c := 'a'; c <= 'z'; c++ {
		if _, ok := h.tab.Get(idOf(string(c))); ok {
			out = append(out, string(c))
		}
	}
	return out
}

// TestTableEviction: idle sessions beyond Max are closed least recently
// used first, and a session a call uses is never closed. Each op is "a"
// (acquire and release a), "+a" (acquire a, keeping it) or "-a" (release
// what "+a" acquired).
func TestTableEviction(t *testing.T) {
	cases := []struct {
		name       string
		max        int
		ops        string
		closed     string // in order
		registered string
	}{
		{name: "within the limit", max: 3, ops: "a b c a", closed: "", registered: "a b c"},
		{name: "least recently used first", max: 2, ops: "a b c d", closed: "a b", registered: "c d"},
		{name: "a use makes it recent", max: 2, ops: "a b a c", closed: "b", registered: "a c"},
		{name: "two beyond at once", max: 3, ops: "+a +b +c +d +e -c -b -a -d -e", closed: "c b", registered: "a d e"},
		{name: "busy never closed", max: 1, ops: "+a b c d", closed: "b c d", registered: "a"},
		{name: "busy past the limit, then idle", max: 1, ops: "+a +b -a -b", closed: "a", registered: "b"},
		{name: "a second call keeps it busy", max: 1, ops: "+a +a b -a c -a", closed: "b c", registered: "a"},
		{name: "no limit left", max: 0, ops: "a +b -b", closed: "a b", registered: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, c.max)
			held := map[string][]*Entry[*fake]{}
			for _, op := range strings.Fields(c.ops) {
				switch op[0] {
				case '+':
					held[op[1:]] = append(held[op[1:]], h.acquire(op[1:]))
				case '-':
					es := held[op[1:]]
					require.NotEmpty(t, es, "op %s", op)
					h.release(es[len(es)-1])
					held[op[1:]] = es[:len(es)-1]
				default:
					h.release(h.acquire(op))
				}
			}
			assert.Equal(t, strings.Fields(c.closed), nilIfEmpty(h.closed()), "closed, in order")
			assert.Equal(t, strings.Fields(c.registered), nilIfEmpty(h.registered()), "registered")
			assert.Equal(t, len(strings.Fields(c.registered)), h.tab.Len())
			assert.Zero(t, h.busyClosed.Load(), "a session in use was closed")
		})
	}
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return []string{}
	}
	return s
}

// TestTableAcquireWaitsForOpen: a second Acquire of a session being
// opened returns the same entry once Opened is called, or ctx's error,
// holding nothing.
func TestTableAcquireWaitsForOpen(t *testing.T) {
	h := newHarness(t, 10)
	id := idOf("a")
	e, open, err := h.tab.Acquire(context.Background(), id)
	require.NoError(t, err)
	require.True(t, open, "the first call opens it")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = h.tab.Acquire(ctx, id)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, 1, h.tab.Refs(id), "the cancelled call holds nothing")
	_, ok := h.tab.Opened(id)
	assert.False(t, ok, "not opened yet")

	got := make(chan *Entry[*fake])
	go func() {
		e2, open2, err := h.tab.Acquire(context.Background(), id)
		assert.NoError(t, err)
		assert.False(t, open2)
		got <- e2
	}()
	e.Opened()
	e2 := <-got
	assert.Same(t, e, e2)
	assert.Equal(t, 2, h.tab.Refs(id))
	v, ok := h.tab.Lookup(id)
	assert.True(t, ok)
	assert.Same(t, e.Value, v)
	h.tab.Release(e)
	h.tab.Release(e2)
	assert.Zero(t, h.tab.Refs(id))
}

// TestTableAwaitClosing: an Acquire of a session being closed waits for
// the close to end (or returns ctx's error), then registers it anew.
func TestTableAwaitClosing(t *testing.T) {
	h := newHarness(t, 0)
	h.block, h.entered = make(chan struct{}), make(chan string)
	e := h.acquire("a")
	released := make(chan struct{})
	go func() {
		h.release(e) // closes a (Max 0), waiting on h.block
		close(released)
	}()
	select {
	case name := <-h.entered:
		require.Equal(t, "a", name, "the close has begun")
	case <-released:
		require.FailNow(t, "released without closing the idle session beyond Max")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err := h.tab.Acquire(ctx, idOf("a"))
	assert.ErrorIs(t, err, context.Canceled, "waits for the close")
	assert.ErrorIs(t, h.tab.CloseOne(ctx, idOf("a")), context.Canceled, "CloseOne waits too")
	_, err = h.tab.Hold(ctx, idOf("a"), func(*fake) {})
	assert.ErrorIs(t, err, context.Canceled, "Hold waits too")
	assert.Empty(t, h.closed(), "the close has not ended")

	close(h.block)
	<-released
	h.block = nil
	e2, open, err := h.tab.Acquire(context.Background(), idOf("a"))
	require.NoError(t, err)
	assert.True(t, open, "registered anew")
	assert.NotSame(t, e, e2)
	assert.True(t, e.Value.closed.Load())
	e2.Opened()
}

// TestTableCloseOne: CloseOne closes a session once the last call using
// it ends, leaves a session not registered alone, and on ctx's end closes
// nothing.
func TestTableCloseOne(t *testing.T) {
	h := newHarness(t, 10)
	h.closeErr = errors.New("checkpoint failed")
	assert.NoError(t, h.tab.CloseOne(context.Background(), idOf("z")), "not registered")

	e1, e2 := h.acquire("a"), h.acquire("a")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, h.tab.CloseOne(ctx, idOf("a")), context.Canceled)
	assert.Empty(t, h.closed())

	done := make(chan error)
	go func() { done <- h.tab.CloseOne(context.Background(), idOf("a")) }()
	h.release(e1)
	assert.Empty(t, h.closed(), "a call still uses it")
	h.release(e2)
	assert.ErrorIs(t, <-done, h.closeErr, "CloseIdle's error")
	assert.Equal(t, []string{"a"}, h.closed())
	assert.Zero(t, h.tab.Len())
	assert.Zero(t, h.busyClosed.Load())
}

// TestTableHold: Hold waits for the last call, closes the session, and
// makes every Acquire wait until released; what is kept survives a
// release that did not delete and is forgotten by one that did.
func TestTableHold(t *testing.T) {
	for _, deleted := range []bool{false, true} {
		t.Run(fmt.Sprintf("deleted=%v", deleted), func(t *testing.T) {
			h := newHarness(t, 10)
			id := idOf("a")
			e := h.acquire("a")
			h.tab.Keep(id, func(k *kept) { k.notes = append(k.notes, "selection") })

			cancelled, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := h.tab.Hold(cancelled, id, h.closeFake)
			require.ErrorIs(t, err, context.Canceled, "a call uses it")
			assert.Equal(t, 1, h.tab.Refs(id), "nothing held")

			held := make(chan func(bool))
			go func() {
				release, err := h.tab.Hold(context.Background(), id, h.closeFake)
				assert.NoError(t, err)
				held <- release
			}()
			h.release(e)
			release := <-held
			assert.Equal(t, []string{"a"}, h.closed(), "closed by Hold")
			assert.Zero(t, h.busyClosed.Load())

			_, _, err = h.tab.Acquire(cancelled, id)
			assert.ErrorIs(t, err, context.Canceled, "Acquire waits while held")
			assert.Zero(t, h.tab.Len(), "nothing registered while held")

			release(deleted)
			k, ok := h.tab.Take(id)
			if deleted {
				assert.False(t, ok, "forgotten")
			} else {
				assert.True(t, ok)
				assert.Equal(t, []string{"selection"}, k.notes)
			}
			e2, open, err := h.tab.Acquire(context.Background(), id)
			require.NoError(t, err)
			assert.True(t, open, "opened again")
			e2.Opened()
		})
	}
}

// TestTableHoldNotRegistered: Hold of a session not registered closes
// nothing and still holds the id.
func TestTableHoldNotRegistered(t *testing.T) {
	h := newHarness(t, 10)
	id := idOf("a")
	release, err := h.tab.Hold(context.Background(), id, h.closeFake)
	require.NoError(t, err)
	assert.Empty(t, h.closed())
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = h.tab.Acquire(cancelled, id)
	assert.ErrorIs(t, err, context.Canceled, "held")
	release(false)
	e, open, err := h.tab.Acquire(cancelled, id)
	require.NoError(t, err, "a registration does not wait")
	assert.True(t, open)
	e.Opened()
}

// TestTableKept: what is kept for a session outlives its close and its
// forgetting, and Take hands it back once.
func TestTableKept(t *testing.T) {
	h := newHarness(t, 10)
	id := idOf("a")
	_, ok := h.tab.Take(id)
	assert.False(t, ok, "nothing kept")

	e := h.acquire("a")
	h.tab.Keep(id, func(k *kept) { k.notes = append(k.notes, "one") })
	assert.True(t, h.tab.Forget(e, func(k *kept) { k.notes = append(k.notes, "two") }))
	assert.False(t, h.tab.Forget(e, func(k *kept) { k.notes = append(k.notes, "three") }),
		"no longer registered: nothing kept")
	assert.Zero(t, h.tab.Len())
	assert.Zero(t, h.tab.Refs(id), "a forgotten entry is not registered")
	h.release(e)
	assert.Empty(t, h.closed(), "a forgotten session is the caller's to close")

	e2 := h.acquire("a")
	assert.NotSame(t, e, e2, "registered anew")
	k, ok := h.tab.Take(id)
	assert.True(t, ok)
	assert.Equal(t, []string{"one", "two"}, k.notes)
	_, ok = h.tab.Take(id)
	assert.False(t, ok, "taken once")
	h.release(e2)
}

// TestTableForget: a forgotten session's last release neither makes it
// idle nor touches the entry registered for its id since.
func TestTableForget(t *testing.T) {
	h := newHarness(t, 0)
	e := h.acquire("a")
	require.True(t, h.tab.Forget(e, nil))
	e2 := h.acquire("a")
	require.NotSame(t, e, e2, "registered anew")
	h.release(e)
	v, ok := h.tab.Get(idOf("a"))
	assert.True(t, ok, "the new entry stays registered")
	assert.Same(t, e2.Value, v)
	assert.Empty(t, h.closed(), "the forgotten session is not closed as idle")
	h.release(e2)
	assert.Equal(t, []string{"a"}, h.closed(), "the new one is, beyond Max")
}

// TestTableCloseAll closes every registered session, busy or idle, and
// empties the table.
func TestTableCloseAll(t *testing.T) {
	h := newHarness(t, 10)
	h.release(h.acquire("a"))
	h.acquire("b")
	var names []string
	err := h.tab.CloseAll(func(id uuid.UUID, s *fake) error {
		names = append(names, nameOf(id))
		return fmt.Errorf("close %s", s.name)
	})
	assert.ElementsMatch(t, []string{"a", "b"}, names)
	assert.ErrorContains(t, err, "close a")
	assert.ErrorContains(t, err, "close b")
	assert.Zero(t, h.tab.Len())
}

// TestTableConcurrent: many calls on a few sessions with a small Max:
// no session is closed while a call uses it, and every call finds the
// session opened.
func TestTableConcurrent(t *testing.T) {
	h := newHarness(t, 2)
	names := []string{"a", "b", "c", "d", "e"}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				id := idOf(names[(g+i)%len(names)])
				e, open, err := h.tab.Acquire(context.Background(), id)
				if !assert.NoError(t, err) {
					return
				}
				e.Value.users.Add(1)
				if open {
					e.Opened()
				}
				assert.False(t, e.Value.closed.Load(), "a session in use is open")
				e.Value.users.Add(-1)
				if i%50 == 0 {
					h.tab.Forget(e, nil) // as a session its call left closed
				}
				h.tab.Release(e)
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, h.busyClosed.Load(), "a session in use was closed")
	assert.LessOrEqual(t, h.tab.Len(), 2)
}

// BenchmarkAcquireRelease: a call's acquire and release of an open
// session, as every call of a Store does.
func BenchmarkAcquireRelease(b *testing.B) {
	for _, sessions := range []int{1, 64} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			tab := NewTable[*fake, kept](Config[*fake]{
				Max:       sessions,
				New:       func(*Entry[*fake]) *fake { return &fake{} },
				CloseIdle: func(*fake) error { return nil },
			})
			ids := make([]uuid.UUID, sessions)
			for i := range ids {
				ids[i] = uuid.New()
				e, _, err := tab.Acquire(context.Background(), ids[i])
				require.NoError(b, err)
				e.Opened()
				tab.Release(e)
			}
			ctx := context.Background()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				e, _, err := tab.Acquire(ctx, ids[i%sessions])
				if err != nil {
					b.Fatal(err)
				}
				tab.Release(e)
			}
		})
	}
}
