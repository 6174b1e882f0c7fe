package sessionstore

import (
	"context"
	"fmt"
	"log"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// hubGuard bounds every wait of these tests. It is a safety net that turns
// a hang into a failure with a message, never a measurement: nothing here
// passes or fails by how long it takes.
const hubGuard = time.Minute

// hubStore opens a store on a fresh MemFS with one session, closed when
// the test ends.
func hubStore(t *testing.T) (*vfs.MemFS, *Store, uuid.UUID) {
	t.Helper()
	m, s, id := memSession(t, Options{})
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	return m, s, id
}

// hubSubscribe subscribes with a background context and closes the
// subscription when the test ends.
func hubSubscribe(t *testing.T, s *Store, session uuid.UUID) *Subscription {
	t.Helper()
	sub, err := s.Subscribe(context.Background(), session)
	require.NoError(t, err)
	t.Cleanup(sub.Close)
	return sub
}

// hubRecv returns the next update of sub; the channel must not be closed.
func hubRecv(t *testing.T, sub *Subscription) Update {
	t.Helper()
	select {
	case u, ok := <-sub.C:
		require.True(t, ok, "subscription channel closed early (Err: %v)", sub.Err())
		return u
	case <-time.After(hubGuard):
		require.FailNow(t, "no update arrived")
		return Update{}
	}
}

// hubClosed requires that sub.C is closed with nothing left in it.
func hubClosed(t *testing.T, sub *Subscription) {
	t.Helper()
	select {
	case u, ok := <-sub.C:
		require.False(t, ok, "channel still open; received %+v", u)
	case <-time.After(hubGuard):
		require.FailNow(t, "subscription channel was not closed")
	}
}

// hubSettleGoroutines polls until at most max goroutines run, failing
// with a dump of them if that does not happen within hubGuard.
func hubSettleGoroutines(t *testing.T, max int) {
	t.Helper()
	deadline := time.Now().Add(hubGuard)
	for runtime.NumGoroutine() > max {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			require.FailNow(t, "goroutines leaked", "%d goroutines, want at most %d:\n%s", runtime.NumGoroutine(), max, buf)
		}
		time.Sleep(time.Millisecond)
	}
}

func textDelta(s string) Delta { return Delta{Kind: DeltaText, Data: s} }

func TestSubscribeReceivesAppendedEvents(t *testing.T) {
	_, s, id := hubStore(t)
	ctx := context.Background()
	sub := hubSubscribe(t, s, id)

	large := strings.Repeat("y", testBlobThreshold+1) // stored as a blob
	var want []Event
	for _, ev := range []Event{
		UserText("first"),
		ToolCallEvent(ToolCall{CallID: "c1", Name: "ls"}),
		ToolResultEvent(ToolResult{CallID: "c1", Output: large}),
		AssistantText("last"),
	} {
		out, err := s.Append(ctx, id, ev)
		require.NoError(t, err)
		want = append(want, out)
	}
	require.NotEmpty(t, want[2].Digest, "precondition: the large record is a blob")

	for i, w := range want {
		u := hubRecv(t, sub)
		require.NotNil(t, u.Event, "update %d: %+v", i, u)
		assert.Nil(t, u.Delta)
		assert.Zero(t, u.Missed)
		assert.Equal(t, w, *u.Event, "update %d", i)
	}
}

func TestSubscribeEventIsACopy(t *testing.T) {
	_, s, id := hubStore(t)
	sub := hubSubscribe(t, s, id)
	out, err := s.Append(context.Background(), id, UserText("unchanged"))
	require.NoError(t, err)
	want := out
	want.Record = append([]byte(nil), out.Record...)
	// The caller owns what Append returned and may reuse it.
	for i := range out.Record {
		out.Record[i] = ' '
	}
	u := hubRecv(t, sub)
	require.NotNil(t, u.Event)
	assert.Equal(t, want, *u.Event)
}

func TestPublishOnlyToItsSession(t *testing.T) {
	_, s, a := hubStore(t)
	ctx := context.Background()
	meta, err := s.Create(ctx, Meta{Name: "other"})
	require.NoError(t, err)
	b := meta.ID
	subA1, subA2, subB := hubSubscribe(t, s, a), hubSubscribe(t, s, a), hubSubscribe(t, s, b)

	require.NoError(t, s.Publish(ctx, a, textDelta("a1")))
	require.NoError(t, s.Publish(ctx, b, textDelta("b1")))
	require.NoError(t, s.Publish(ctx, a, Delta{Kind: DeltaToolOutput, CallID: "c1", Data: "a2"}))
	evB, err := s.Append(ctx, b, UserText("only in b"))
	require.NoError(t, err)
	// A last update per session: anything misrouted would arrive first.
	require.NoError(t, s.Publish(ctx, a, textDelta("end")))
	require.NoError(t, s.Publish(ctx, b, textDelta("end")))

	for _, sub := range []*Subscription{subA1, subA2} {
		assert.Equal(t, Update{Delta: &Delta{Kind: DeltaText, Data: "a1"}}, hubRecv(t, sub))
		assert.Equal(t, Update{Delta: &Delta{Kind: DeltaToolOutput, CallID: "c1", Data: "a2"}}, hubRecv(t, sub))
		assert.Equal(t, Update{Delta: &Delta{Kind: DeltaText, Data: "end"}}, hubRecv(t, sub))
	}
	assert.Equal(t, Update{Delta: &Delta{Kind: DeltaText, Data: "b1"}}, hubRecv(t, subB))
	assert.Equal(t, Update{Event: &evB}, hubRecv(t, subB))
	assert.Equal(t, Update{Delta: &Delta{Kind: DeltaText, Data: "end"}}, hubRecv(t, subB))
}

func TestPublishWritesNothing(t *testing.T) {
	m, s, id := hubStore(t)
	ctx := context.Background()
	_, err := s.Append(ctx, id, UserText("open the session first"))
	require.NoError(t, err)
	sub := hubSubscribe(t, s, id)

	// Every operation that reaches the filesystem seam: opens, reads,
	// writes, syncs, creates, renames, removes, truncates.
	var mu sync.Mutex
	var ops []string
	m.SetFault(func(op vfs.Op, path string) error {
		mu.Lock()
		ops = append(ops, string(op)+" "+path)
		mu.Unlock()
		return nil
	})
	defer m.SetFault(nil)
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(ops)
	}

	for i := range 100 {
		require.NoError(t, s.Publish(ctx, id, textDelta(strconv.Itoa(i))))
	}
	for i := range 100 {
		u := hubRecv(t, sub)
		require.NotNil(t, u.Delta)
		assert.Equal(t, strconv.Itoa(i), u.Delta.Data)
	}
	mu.Lock()
	assert.Empty(t, ops, "Publish touched the filesystem")
	mu.Unlock()

	// The counter sees what Append does.
	_, err = s.Append(ctx, id, UserText("durable"))
	require.NoError(t, err)
	assert.NotZero(t, count(), "the hook saw no operation of Append")
}

func TestSubscribeSlowSubscriberMissed(t *testing.T) {
	// Syncs dropped: MemFS copies a file on each, and durability is not
	// what this test is about.
	s := openMem(t, noSyncFS{vfs.NewMemFS()}, Options{})
	t.Cleanup(func() { assert.NoError(t, s.Close()) })
	ctx := context.Background()
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	id := meta.ID
	sub := hubSubscribe(t, s, id)

	// Nobody reads sub while 10,000 updates go out: none of these calls
	// may wait for it (if one did, this loop would never finish).
	const total = 10_000
	var appended []Event
	for i := range total {
		if i%2 == 0 {
			ev, err := s.Append(ctx, id, UserText(strconv.Itoa(i)))
			require.NoError(t, err)
			appended = append(appended, ev)
		} else {
			require.NoError(t, s.Publish(ctx, id, textDelta(strconv.Itoa(i))))
		}
	}

	// The first updates arrive whole and in order, then one notice counts
	// every dropped update, then nothing, until the next update.
	k := 0
	var u Update
	for {
		u = hubRecv(t, sub)
		if u.Missed != 0 {
			break
		}
		require.Less(t, k, total, "more updates than were sent")
		if k%2 == 0 {
			require.NotNil(t, u.Event, "update %d", k)
			assert.Equal(t, appended[k/2], *u.Event, "update %d", k)
		} else {
			require.NotNil(t, u.Delta, "update %d", k)
			assert.Equal(t, strconv.Itoa(k), u.Delta.Data, "update %d", k)
		}
		k++
	}
	assert.GreaterOrEqual(t, k, SubscriptionBuffer, "fewer updates were kept than the buffer holds")
	assert.Equal(t, total-k, u.Missed, "the notice must count exactly the dropped updates")
	assert.Nil(t, u.Event)
	assert.Nil(t, u.Delta)

	require.NoError(t, s.Publish(ctx, id, textDelta("after")))
	assert.Equal(t, Update{Delta: &Delta{Kind: DeltaText, Data: "after"}}, hubRecv(t, sub))
}

// The queue in isolation: notices sit where the dropped updates were, a
// notice at the tail absorbs further drops, and a new one starts once an
// update has queued behind it.
func TestHubQueueMissedPositions(t *testing.T) {
	sub := &Subscription{q: updateQueue{buf: make([]Update, SubscriptionBuffer+1)}, wake: make(chan struct{}, 1)}
	seq := 0
	offer := func(n int) {
		for range n {
			sub.offer(Update{Delta: &Delta{Data: strconv.Itoa(seq)}})
			seq++
		}
	}
	var got []string
	pop := func(n int) {
		for range n {
			u, ok := sub.q.pop()
			require.True(t, ok)
			if u.Missed > 0 {
				got = append(got, fmt.Sprintf("missed %d", u.Missed))
			} else {
				got = append(got, u.Delta.Data)
			}
		}
	}

	offer(SubscriptionBuffer + 3) // 0..1023 kept, 1024..1026 dropped
	assert.Len(t, sub.wake, 1, "the pump was woken")
	assert.Equal(t, SubscriptionBuffer+1, sub.q.n)
	pop(2)                      // 0, 1
	offer(1)                    // 1027 queues behind the notice
	offer(2)                    // 1028, 1029 dropped: a new notice
	pop(SubscriptionBuffer - 2) // 2..1023
	pop(3)                      // missed 3, 1027, missed 2
	_, ok := sub.q.pop()
	assert.False(t, ok, "queue should be empty")

	want := []string{"0", "1"}
	for i := 2; i < SubscriptionBuffer; i++ {
		want = append(want, strconv.Itoa(i))
	}
	want = append(want, "missed 3", "1027", "missed 2")
	assert.Equal(t, want, got)
}

func TestSubscribeEndsWithContext(t *testing.T) {
	_, s, id := hubStore(t)
	_, err := s.Append(context.Background(), id, UserText("open the session first"))
	require.NoError(t, err)
	base := runtime.NumGoroutine()

	ctx, cancel := context.WithCancel(context.Background())
	sub, err := s.Subscribe(ctx, id)
	require.NoError(t, err)
	require.NoError(t, s.Publish(context.Background(), id, textDelta("x")))
	assert.Equal(t, Update{Delta: &Delta{Kind: DeltaText, Data: "x"}}, hubRecv(t, sub))
	require.NoError(t, s.Publish(context.Background(), id, textDelta("queued, then discarded")))
	assert.NoError(t, sub.Err())

	cancel()
	// A last update may still be delivered while the pump sees ctx end.
	for range sub.C {
	}
	assert.ErrorIs(t, sub.Err(), context.Canceled)
	hubSettleGoroutines(t, base)
	// The hub has forgotten it: publishing has no one to deliver to.
	assert.Nil(t, s.hub.topic(id))
	sub.Close() // after the context: still fine
	assert.ErrorIs(t, sub.Err(), context.Canceled)
}

func TestSubscriptionClose(t *testing.T) {
	_, s, id := hubStore(t)
	_, err := s.Append(context.Background(), id, UserText("open the session first"))
	require.NoError(t, err)
	base := runtime.NumGoroutine()

	sub, err := s.Subscribe(context.Background(), id)
	require.NoError(t, err)
	other := hubSubscribe(t, s, id)
	require.NoError(t, s.Publish(context.Background(), id, textDelta("pending")))

	sub.Close()
	hubClosed(t, sub) // closed when Close returns: pending updates are discarded
	assert.NoError(t, sub.Err())
	sub.Close() // idempotent

	// The other subscriber is unaffected.
	assert.Equal(t, Update{Delta: &Delta{Kind: DeltaText, Data: "pending"}}, hubRecv(t, other))
	require.NoError(t, s.Publish(context.Background(), id, textDelta("more")))
	assert.Equal(t, Update{Delta: &Delta{Kind: DeltaText, Data: "more"}}, hubRecv(t, other))
	other.Close()
	hubSettleGoroutines(t, base)
	assert.Nil(t, s.hub.topic(id))
}

// Close may be called by the goroutine that reads C, while the pump is
// blocked handing it an update.
func TestSubscriptionCloseFromReader(t *testing.T) {
	_, s, id := hubStore(t)
	sub := hubSubscribe(t, s, id)
	for range 3 {
		require.NoError(t, s.Publish(context.Background(), id, textDelta("x")))
	}
	n := 0
	for range sub.C {
		n++
		sub.Close()
	}
	assert.Equal(t, 1, n, "no update after Close returned")
}

func TestSubscribeEndsWithStoreClose(t *testing.T) {
	s := openMem(t, vfs.NewMemFS(), Options{})
	ctx := context.Background()
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	_, err = s.Append(ctx, meta.ID, UserText("open the session first"))
	require.NoError(t, err)
	base := runtime.NumGoroutine()
	subs := []*Subscription{hubSubscribe(t, s, meta.ID), hubSubscribe(t, s, meta.ID)}
	_, err = s.Append(ctx, meta.ID, UserText("x"))
	require.NoError(t, err)

	require.NoError(t, s.Close())
	for _, sub := range subs {
		hubClosed(t, sub) // closed when Close returns
		assert.ErrorIs(t, sub.Err(), ErrClosed)
	}
	hubSettleGoroutines(t, base)

	_, err = s.Subscribe(ctx, meta.ID)
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, s.Publish(ctx, meta.ID, textDelta("x")), ErrClosed)
}

func TestSubscribeErrors(t *testing.T) {
	_, s, id := hubStore(t)
	_, err := s.Subscribe(context.Background(), uuid.Must(uuid.NewV7()))
	assert.ErrorIs(t, err, ErrNotFound)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Subscribe(ctx, id)
	assert.ErrorIs(t, err, context.Canceled)
	assert.ErrorIs(t, s.Publish(ctx, id, textDelta("x")), context.Canceled)

	// Publishing to a session nobody watches (or that does not exist) is
	// not an error: the delta is simply not delivered.
	assert.NoError(t, s.Publish(context.Background(), uuid.Must(uuid.NewV7()), textDelta("x")))
}

// Several appenders, publishers and subscribers on one session, with
// subscriptions ending while updates flow, under -race. Every subscriber
// must account for every update (received or counted as missed), see
// each publisher's deltas and the log's events in order, and, when none
// missed anything, all subscribers see the same sequence.
func TestHubStress(t *testing.T) {
	_, s, id := hubStore(t)
	ctx := context.Background()
	meta, err := s.Create(ctx, Meta{Name: "elsewhere"})
	require.NoError(t, err)
	other := meta.ID

	const appenders, appends, publishers, publishes, readers = 3, 100, 3, 500, 4
	const total = appenders*appends + publishers*publishes

	type seen struct {
		updates []Update
		missed  int
	}
	results := make([]seen, readers)
	var readersWG sync.WaitGroup
	for r := range readers {
		sub := hubSubscribe(t, s, id)
		readersWG.Add(1)
		go func() {
			defer readersWG.Done()
			got := &results[r]
			for n := 0; n < total; {
				u, ok := <-sub.C
				if !ok {
					return
				}
				if u.Missed > 0 {
					got.missed += u.Missed
					n += u.Missed
				} else {
					n++
				}
				got.updates = append(got.updates, u)
			}
		}()
	}
	// Subscriptions that end while updates flow, one by Close, one by its
	// context, and one on another session that must see none of this
	// session's updates.
	quitter := hubSubscribe(t, s, id)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	canceled, err := s.Subscribe(cctx, id)
	require.NoError(t, err)
	elsewhere := hubSubscribe(t, s, other)

	var writers sync.WaitGroup
	for a := range appenders {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range appends {
				_, err := s.Append(ctx, id, UserText(fmt.Sprintf("a%d-%d", a, i)))
				assert.NoError(t, err)
			}
		}()
	}
	for p := range publishers {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range publishes {
				assert.NoError(t, s.Publish(ctx, id, Delta{Kind: DeltaText, CallID: strconv.Itoa(p), Data: strconv.Itoa(i)}))
				if i == publishes/2 && p == 0 {
					quitter.Close()
					cancel()
				}
			}
		}()
	}
	writers.Add(1)
	go func() {
		defer writers.Done()
		for i := range publishes {
			assert.NoError(t, s.Publish(ctx, other, textDelta(strconv.Itoa(i))))
		}
	}()
	writers.Wait()
	readersWG.Wait()
	for range canceled.C {
	}
	for range quitter.C {
	}
	for i := range publishes {
		u := hubRecv(t, elsewhere)
		require.NotNil(t, u.Delta, "update %d", i)
		require.Equal(t, strconv.Itoa(i), u.Delta.Data)
	}

	nodes, err := s.Tree(ctx, id)
	require.NoError(t, err)
	require.Len(t, nodes, appenders*appends)
	logPos := map[uuid.UUID]int{}
	for i, n := range nodes {
		logPos[n.ID] = i
	}
	anyMissed := false
	for r, got := range results {
		n, events := got.missed, 0
		lastEvent := -1
		lastDelta := map[string]int{}
		for _, u := range got.updates {
			switch {
			case u.Event != nil:
				n++
				pos, ok := logPos[u.Event.ID]
				require.True(t, ok, "reader %d: unknown event", r)
				require.Greater(t, pos, lastEvent, "reader %d: events out of log order", r)
				lastEvent = pos
				events++
			case u.Delta != nil:
				n++
				seq, err := strconv.Atoi(u.Delta.Data)
				require.NoError(t, err)
				last, ok := lastDelta[u.Delta.CallID]
				require.True(t, !ok || seq > last, "reader %d: publisher %s out of order", r, u.Delta.CallID)
				lastDelta[u.Delta.CallID] = seq
			}
		}
		assert.Equal(t, total, n, "reader %d: updates received and missed", r)
		if got.missed == 0 {
			assert.Equal(t, appenders*appends, events, "reader %d: missed nothing, so it saw every event", r)
		}
		anyMissed = anyMissed || got.missed > 0
	}
	if !anyMissed {
		for r := 1; r < readers; r++ {
			assert.Equal(t, results[0].updates, results[r].updates, "reader %d saw another order than reader 0", r)
		}
	}
}

// A subscriber sees the tokens of a response as they are published, then
// the settled message once it is durable.
func ExampleStore_Subscribe() {
	dir, err := os.MkdirTemp("", "sessionstore-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	store, err := Open(dir, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()
	meta, err := store.Create(ctx, Meta{Name: "streaming"})
	if err != nil {
		log.Fatal(err)
	}

	sub, err := store.Subscribe(ctx, meta.ID)
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()

	// The harness streams the model's answer, then records it.
	for _, tok := range []string{"The build ", "is ", "green."} {
		if err := store.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: tok}); err != nil {
			log.Fatal(err)
		}
	}
	if _, err := store.Append(ctx, meta.ID, AssistantText("The build is green.")); err != nil {
		log.Fatal(err)
	}

	for range 4 {
		u := <-sub.C
		switch {
		case u.Delta != nil:
			fmt.Printf("delta %s %q\n", u.Delta.Kind, u.Delta.Data)
		case u.Event != nil:
			fmt.Printf("event %s %s %s\n", u.Event.Role, u.Event.Kind, u.Event.Record)
		case u.Missed > 0:
			fmt.Printf("missed %d updates\n", u.Missed)
		}
	}
	// Output:
	// delta text "The build "
	// delta text "is "
	// delta text "green."
	// event assistant message {"content":"The build is green."}
}
