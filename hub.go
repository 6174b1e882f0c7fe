package sessionstore

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
)

// Live fan-out.
//
// A harness that streams a model's response has two kinds of output: the
// settled events it appends (durable, part of the timeline) and the
// fragments that lead to them (tokens, reasoning, partial tool output),
// which are worth showing live but not worth an fdatasync each. A
// [Subscription] receives both, for one session, in one ordered stream of
// [Update] values: every event appended to the session through this Store,
// once it is durable, and every [Delta] given to [Store.Publish] for it,
// which touches no file.
//
// Delivery never waits for a subscriber. Each subscription has a bounded
// queue of SubscriptionBuffer updates; when it is full, further updates
// are dropped and counted, and the subscriber receives the count as an
// Update with Missed set, in the position of the updates it replaces. The
// notice is queued, so it arrives even if nothing is ever published again.

// SubscriptionBuffer is how many updates can wait for one subscriber.
// Updates that arrive while that many are waiting are dropped and counted;
// the subscriber then receives an Update whose Missed is the count.
const SubscriptionBuffer = 1024

// DeltaKind says what a [Delta] carries. The kinds below are conventions;
// a harness may use its own.
type DeltaKind string

// The conventional delta kinds.
const (
	DeltaText       DeltaKind = "text"        // a fragment of an assistant message's content
	DeltaReasoning  DeltaKind = "reasoning"   // a fragment of an assistant message's reasoning
	DeltaToolOutput DeltaKind = "tool_output" // partial output of the tool call named by CallID
)

// Delta is a live fragment of output that is not an event: a few tokens of
// a message being generated, a line of a running tool's output. It is
// delivered to the session's current subscribers and then forgotten: unless
// Options.DurableDeltas is set it is never written, so a subscriber that
// missed it, a subscriber that comes later and a process that restarts
// never see it (with it: PartialOutput and Tail). The settled event that a
// stream of deltas leads to (the whole message, the tool result) is what a
// harness appends.
type Delta struct {
	Kind   DeltaKind `json:"kind"`
	CallID string    `json:"call_id,omitempty"` // the ToolCall.CallID a DeltaToolOutput belongs to
	Data   string    `json:"data"`
}

// Update is one item of a subscription's stream. Exactly one field is set:
//
//   - Event: an event appended to the session, durable when it is
//     delivered; equal to what Append returned (the record included, even
//     when it is stored as a blob).
//   - Delta: a fragment given to Publish.
//   - Missed: the number of updates, events and deltas alike, that were
//     dropped at this point of the stream because SubscriptionBuffer
//     updates were already waiting for the subscriber. Dropped events are
//     durable: Load, Tree or Event read them back. Dropped deltas are
//     lost.
//
// The Event and Delta are shared by every subscriber of the session and
// must not be modified.
type Update struct {
	Event  *Event
	Delta  *Delta
	Missed int
	// Cursor is set by Tail only: the position in the session's stream
	// just after this update, to give to Tail to resume there (an SSE
	// Last-Event-ID). It is opaque.
	Cursor string
}

// Subscription is a live stream of a session's updates, created by
// [Store.Subscribe]. Its methods are safe for concurrent use.
type Subscription struct {
	// C delivers the updates in the order they happened: for events, the
	// order of the log; for deltas, the order of the Publish calls,
	// interleaved with the events as they were called. Every subscriber
	// of a session sees the same order. C is closed when the
	// subscription ends: its context is done, Close is called or the
	// Store is closed. Updates still queued then are discarded.
	C <-chan Update

	ch      chan Update
	hub     *hub
	session uuid.UUID
	t       *topic      // set by hub.add; registered in hub.topics until the pump ends
	q       updateQueue // guarded by t.mu

	wake   chan struct{} // capacity 1: the queue went from empty to non-empty
	done   chan struct{} // closed by stop
	exited chan struct{} // closed when the pump has closed C
	once   sync.Once
	errMu  sync.Mutex
	err    error // why the subscription ended; set by stop

	// replay, when set (SubscribeFrom), sends the events stored before
	// the subscription was registered, before the queued updates.
	replay func(ctx context.Context, send func(Update) bool) error
}

// Close ends the subscription. When Close returns, C is closed (a receive
// yields no further update) and the subscription's goroutine is exiting.
// Close is idempotent and may be called from any goroutine, including one
// that reads C.
func (sub *Subscription) Close() {
	sub.stop(nil)
	<-sub.exited
}

// Err reports why the subscription ended: nil while it is active and after
// Close, the context's error when its context ended it, ErrClosed when the
// Store was closed, ErrNotFound when the Store deleted the session.
func (sub *Subscription) Err() error {
	sub.errMu.Lock()
	defer sub.errMu.Unlock()
	return sub.err
}

// stop records why the subscription ends and tells the pump, once.
func (sub *Subscription) stop(err error) {
	sub.once.Do(func() {
		sub.errMu.Lock()
		sub.err = err
		sub.errMu.Unlock()
		close(sub.done)
	})
}

// Subscribe starts a live stream of the session's updates: each event
// appended to the session through this Store after Subscribe returns, once
// it is durable, and each Delta published to it. It delivers nothing from
// before the call: to show a session live, subscribe first, then Load (or
// Tree) and skip the events that arrive again on C, by ID.
//
// Events appended by another process or through another Store value are
// not seen: the stream is this Store's. On a store opened with
// Options.ReadOnly, a subscription therefore receives deltas only,
// unless the store is a follower (ReadOnly with a Remote: follow.go),
// which polls the session's log every Options.FollowInterval while it
// has subscribers and delivers the events any Store appended.
//
// Subscribing and reading never slow the writers down: see
// [SubscriptionBuffer] and [Update]. The subscription ends, and C is
// closed, when ctx is done, when Close is called, or when the Store is
// closed; a subscriber that stops reading before then must call Close (or
// cancel ctx) to release the subscription.
//
// Subscribe checks that the session exists (its session.json, as Meta
// would read it, though it is not parsed) and takes no lock: subscribing
// to a session that another process writes is allowed.
//
// Errors: ErrNotFound for a session the store does not hold; ErrClosed;
// ctx's error.
func (s *Store) Subscribe(ctx context.Context, session uuid.UUID) (*Subscription, error) {
	if s.follower() {
		return s.subscribe(ctx, session, uuid.Nil, false)
	}
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	defer s.end()
	dir := s.sessionDir(session)
	if _, err := s.opts.fs.Stat(filepath.Join(dir, metaFile)); err != nil {
		if noSession(s.opts.fs, dir, err) {
			return nil, fmt.Errorf("%w: session %s", ErrNotFound, session)
		}
		return nil, fmt.Errorf("sessionstore: subscribe to session %s: %w", session, err)
	}
	sub := s.hub.newSubscription(session)
	if !s.hub.add(sub) {
		return nil, ErrClosed
	}
	go sub.pump(ctx)
	// A Delete that moved the session away after the check above ended
	// the session's subscriptions before this one was added; one that
	// moves it after this check ends this one too.
	if _, err := s.opts.fs.Stat(filepath.Join(dir, metaFile)); err != nil && noSession(s.opts.fs, dir, err) {
		sub.Close()
		return nil, fmt.Errorf("%w: session %s", ErrNotFound, session)
	}
	return sub, nil
}

// newSubscription returns a subscription to the session, not yet
// registered (add) or pumping.
func (hb *hub) newSubscription(session uuid.UUID) *Subscription {
	ch := make(chan Update)
	return &Subscription{
		C:       ch,
		ch:      ch,
		hub:     hb,
		session: session,
		q:       updateQueue{buf: make([]Update, SubscriptionBuffer+1)},
		wake:    make(chan struct{}, 1),
		done:    make(chan struct{}),
		exited:  make(chan struct{}),
	}
}

// Publish delivers a delta to the current subscribers of the session. It
// writes nothing and reads nothing: a delta for a session without
// subscribers is discarded, and Publish does not check that the session
// exists. It never waits for a subscriber; for one that is
// SubscriptionBuffer updates behind, the delta is dropped and counted (see
// [Update]). When Publish returns, the delta is queued for every
// subscriber, after every update queued before the call. Publish writes
// nothing, so it works on a store opened with Options.ReadOnly.
//
// With Options.DurableDeltas (on a writing store, for a session that is
// not encrypted), Publish also writes the delta to the session's delta
// stream (stream_durable.go, docs/streams.md), under the session's lock,
// which it opens as Append does: when it returns nil the delta is written
// (a killed process does not lose it; PartialOutput and Tail see it) and
// it is synced within Options.DeltaSyncInterval (a power loss loses at
// most the deltas of that last interval).
//
// Errors: ErrClosed; ctx's error; with DurableDeltas also ErrNotFound,
// ErrLocked, ErrSessionFailed, ErrInvalidEvent for a delta larger than
// 1 MiB, and the stream's write or sync failure (the delta is then not
// delivered either).
func (s *Store) Publish(ctx context.Context, session uuid.UUID, d Delta) error {
	if s.opts.DurableDeltas && !s.opts.ReadOnly {
		return s.publishDurable(ctx, session, d)
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	defer s.end()
	if t := s.hub.topic(session); t != nil {
		t.deliver(nil, &d)
	}
	return nil
}

// hub routes updates to the subscribers of each session. Lock order:
// hub.mu, then a topic's mu.
type hub struct {
	n      atomic.Int64 // subscriptions registered: the fast path of settled
	mu     sync.RWMutex
	topics map[uuid.UUID]*topic // sessions with at least one subscriber
	closed bool
}

// topic is one session's subscribers. Its mu orders the deliveries to all
// of them, so they see the same order, and guards their queues.
type topic struct {
	mu   sync.Mutex
	subs []*Subscription
	// followed is, in a follower (follow.go), the newest event of the
	// session's index handed to the topic's subscribers (uuid.Nil: none
	// yet, from the first); guarded by the open session's mutex.
	followed uuid.UUID
}

func newHub() *hub { return &hub{topics: map[uuid.UUID]*topic{}} }

// add registers a subscription; false if the hub is closed.
func (hb *hub) add(sub *Subscription) bool {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if hb.closed {
		return false
	}
	t := hb.topics[sub.session]
	if t == nil {
		t = &topic{}
		hb.topics[sub.session] = t
	}
	t.mu.Lock()
	t.subs = append(t.subs, sub)
	t.mu.Unlock()
	sub.t = t
	hb.n.Add(1)
	return true
}

// remove unregisters a subscription if it is registered.
func (hb *hub) remove(sub *Subscription) {
	hb.mu.Lock()
	defer hb.mu.Unlock()
	t := sub.t
	t.mu.Lock()
	defer t.mu.Unlock()
	if i := slices.Index(t.subs, sub); i >= 0 {
		t.subs = slices.Delete(t.subs, i, i+1)
		hb.n.Add(-1)
	}
	if len(t.subs) == 0 && hb.topics[sub.session] == t {
		delete(hb.topics, sub.session)
	}
}

// topic returns the session's subscribers, nil if it has none. It is
// cheap: an atomic load when no session has any, else a map lookup under
// a read lock.
func (hb *hub) topic(session uuid.UUID) *topic {
	if hb.n.Load() == 0 {
		return nil
	}
	hb.mu.RLock()
	t := hb.topics[session]
	hb.mu.RUnlock()
	return t
}

// settled hands events that are durable to the session's subscribers. The
// store calls it in append order, with the session's write lock held. It
// never blocks on a subscriber and does nothing but an atomic load (or a
// map lookup) when the session has none.
func (hb *hub) settled(session uuid.UUID, evs []Event) {
	if len(evs) == 0 {
		return
	}
	t := hb.topic(session)
	if t == nil {
		return
	}
	// One copy for every subscriber, so that neither the caller of Append
	// (who owns the returned Record) nor the store can change what they
	// see: two allocations per call.
	size := 0
	for i := range evs {
		size += len(evs[i].Record)
	}
	recs := make([]byte, 0, size)
	cp := make([]Event, len(evs))
	for i := range evs {
		cp[i] = evs[i]
		if evs[i].Record != nil {
			start := len(recs)
			recs = append(recs, evs[i].Record...)
			cp[i].Record = recs[start:len(recs):len(recs)]
		}
	}
	t.deliver(cp, nil)
}

// deliver queues, for every subscriber of the topic, an update for d if it
// is not nil and one for each of evs. A topic that lost its last
// subscriber after it was looked up has none to deliver to.
func (t *topic) deliver(evs []Event, d *Delta) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, sub := range t.subs {
		if d != nil {
			sub.offer(Update{Delta: d})
		}
		for i := range evs {
			sub.offer(Update{Event: &evs[i]})
		}
	}
}

// close ends every subscription with ErrClosed and waits until each has
// closed its channel. The Store calls it once, from Close, when no other
// call is in flight.
func (hb *hub) close() {
	hb.mu.Lock()
	hb.closed = true
	var subs []*Subscription
	for _, t := range hb.topics {
		t.mu.Lock()
		subs = append(subs, t.subs...)
		t.mu.Unlock()
	}
	hb.mu.Unlock()
	for _, sub := range subs {
		sub.stop(ErrClosed)
	}
	for _, sub := range subs {
		<-sub.exited
	}
}

// offer queues an update without blocking, with the topic's mu held.
//
// The queue holds at most SubscriptionBuffer updates plus one Missed
// notice. An update that finds SubscriptionBuffer entries waiting is
// dropped: it is counted in the notice at the tail of the queue, which is
// added in the spare slot if the tail is not a notice already. Later
// updates queue behind the notice once the subscriber makes room, so the
// notice sits exactly where the dropped updates would have been. At most
// SubscriptionBuffer+1 entries wait: an entry is added past
// SubscriptionBuffer only as a notice, and only when none is at the tail.
func (sub *Subscription) offer(u Update) {
	q := &sub.q
	if q.n < SubscriptionBuffer {
		q.push(u)
		if q.n == 1 {
			select {
			case sub.wake <- struct{}{}:
			default:
			}
		}
		return
	}
	if last := q.last(); last.Missed > 0 {
		last.Missed++
		return
	}
	q.push(Update{Missed: 1}) // the queue is not empty: the pump is awake or woken
}

// pump moves queued updates to C, one at a time, until the subscription
// ends; then it unregisters the subscription and closes C.
func (sub *Subscription) pump(ctx context.Context) {
	defer close(sub.exited)
	defer close(sub.ch)
	defer sub.hub.remove(sub)
	if sub.replay != nil {
		sent := true
		err := sub.replay(ctx, func(u Update) bool {
			select {
			case sub.ch <- u:
				return true
			case <-sub.done:
			case <-ctx.Done():
				sub.stop(ctx.Err())
			}
			sent = false
			return false
		})
		if err != nil {
			sub.stop(err)
		}
		if err != nil || !sent {
			return
		}
	}
	for {
		u, ok := sub.next()
		if !ok {
			select {
			case <-sub.wake:
				continue
			case <-sub.done:
				return
			case <-ctx.Done():
				sub.stop(ctx.Err())
				return
			}
		}
		select {
		case sub.ch <- u:
		case <-sub.done:
			return
		case <-ctx.Done():
			sub.stop(ctx.Err())
			return
		}
	}
}

// next takes the oldest queued update.
func (sub *Subscription) next() (Update, bool) {
	sub.t.mu.Lock()
	defer sub.t.mu.Unlock()
	return sub.q.pop()
}

// updateQueue is a ring of fixed capacity; the topic's mu guards it.
type updateQueue struct {
	buf     []Update
	head, n int
}

func (q *updateQueue) push(u Update) {
	q.buf[(q.head+q.n)%len(q.buf)] = u
	q.n++
}

func (q *updateQueue) pop() (Update, bool) {
	if q.n == 0 {
		return Update{}, false
	}
	u := q.buf[q.head]
	q.buf[q.head] = Update{}
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return u, true
}

// last is the newest queued update; the queue must not be empty.
func (q *updateQueue) last() *Update {
	return &q.buf[(q.head+q.n-1)%len(q.buf)]
}

// end ends the subscriptions of one session with err (Delete: the
// session is gone), without waiting for them to exit.
func (hb *hub) end(session uuid.UUID, err error) {
	t := hb.topic(session)
	if t == nil {
		return
	}
	t.mu.Lock()
	subs := slices.Clone(t.subs)
	t.mu.Unlock()
	for _, sub := range subs {
		sub.stop(err)
	}
}
