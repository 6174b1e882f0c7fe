package sessionstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// createGate holds the first Create of chosen keys of a memObjects until
// the test releases it, and says which Creates reached it.
type createGate struct {
	mu      sync.Mutex
	held    map[string]chan struct{}
	reached map[string]bool
}

func newCreateGate(obj *memObjects) *createGate {
	g := &createGate{held: map[string]chan struct{}{}, reached: map[string]bool{}}
	obj.mu.Lock()
	obj.gate = g.pass
	obj.mu.Unlock()
	return g
}

func (g *createGate) hold(key string) {
	g.mu.Lock()
	g.held[key] = make(chan struct{})
	g.mu.Unlock()
}

// pass holds the first Create of a held key; later ones (another
// Store's) go on.
func (g *createGate) pass(key string) {
	g.mu.Lock()
	c := g.held[key]
	if g.reached[key] {
		c = nil
	}
	g.reached[key] = true
	g.mu.Unlock()
	if c != nil {
		<-c
	}
}

func (g *createGate) release(key string) {
	g.mu.Lock()
	c := g.held[key]
	delete(g.held, key)
	g.mu.Unlock()
	close(c)
}

func (g *createGate) waitReached(t *testing.T, key string) {
	t.Helper()
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.reached[key]
	}, 10*time.Second, time.Millisecond, "the Create of %s was issued", key)
}

// newestLogSeq is the number of session id's newest log object.
func newestLogSeq(t *testing.T, obj *memObjects, id uuid.UUID) uint64 {
	t.Helper()
	keys := obj.keys(seam.LogPrefix(id))
	require.NotEmpty(t, keys)
	seq, ok := seam.ParseLogKey(seam.LogPrefix(id), keys[0]) // newest first
	require.True(t, ok)
	return seq
}

// TestRemoteTakeoverWithCreatesInFlight: a holder has four commit groups'
// Creates in flight (its window) when it stalls: the first and the last
// two held on their way, the second stored. Another Store takes the
// session over: it fills the free number before the stored one with a
// void, creates its marker after it, and fills the numbers after its
// marker that the stalled Creates may still take. When those land, each
// finds its number taken: the stalled holder acknowledges none of the
// four appends (the stored second one neither: a number before it is
// not its), and the new holder appends unfenced. A fresh Store loads
// every acknowledged event and nothing else.
func TestRemoteTakeoverWithCreatesInFlight(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a := memRemoteStore(t, obj)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	apiAppend(t, a, m.ID, textEv("e0"))
	k := newestLogSeq(t, obj, m.ID) + 1
	key := func(i uint64) string { return seam.LogKey(m.ID, k+i) }
	g := newCreateGate(obj)
	g.hold(key(0))
	g.hold(key(2))
	g.hold(key(3))

	errs := make([]error, 4)
	done := make([]chan struct{}, 4)
	for i := range 4 {
		done[i] = make(chan struct{})
		go func() {
			defer close(done[i])
			_, errs[i] = a.Append(ctx, m.ID, textEv(fmt.Sprintf("a%d", i+1)))
		}()
		g.waitReached(t, key(uint64(i))) // one commit group per append
	}
	require.Eventually(t, func() bool { return len(obj.keys(key(1))) == 1 }, 10*time.Second, time.Millisecond, "the second Create landed")

	stall(t, a, m.ID)
	obj.advance(time.Second) // past a's lease
	b := memRemoteStore(t, obj)
	assert.Equal(t, []string{"e0"}, loadTexts(t, b, m.ID), "nothing after the free number is applied")

	// The first held Create lands first: it finds the void (without it,
	// the first append, at least, would be acknowledged, and lost).
	g.release(key(0))
	<-done[0]
	g.release(key(2))
	g.release(key(3))
	for _, d := range done {
		<-d
	}
	for i, err := range errs {
		assert.ErrorIs(t, err, ErrFenced, "append a%d of the stalled holder is not acknowledged", i+1)
	}
	apiAppend(t, b, m.ID, textEv("b1")) // unfenced: the stalled Creates found their numbers taken
	require.NoError(t, b.Close())

	c := memRemoteStore(t, obj)
	assert.Equal(t, []string{"e0", "b1"}, loadTexts(t, c, m.ID))
}
