package sessionstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/google/uuid"
)

// Streams from an offset
//
// SubscribeFrom makes a subscription durable in the sense a consumer
// needs: what it missed while it was away (a restart, a Missed notice, a
// network cut between it and the Store) is in the log, and the event ID
// it processed last is an offset into it. The replay and the live stream
// are joined under the session's mutex: the subscription is registered
// and the events the session's index holds after the offset are taken as
// one step, and every later event reaches the subscriber through the live
// queue (an Append's publish, or a follower's delivery, runs under the
// same mutex), so none is missed or repeated between the two. The replay
// is read in bounded batches as the subscriber takes it (as LoadSeq
// reads), so its size does not bound what a subscriber can catch up on.

// SubscribeFrom is Subscribe with a replay: C first delivers every event
// of the session that follows the event after in the order of the log
// (the order of the appends; uuid.Nil: from the session's first event),
// read from the files in bounded batches as the subscriber takes them,
// then the live stream, with no event missed or repeated between the
// two. A consumer that records the ID of the last event it processed
// resumes after a restart, or after an Update with Missed set, by calling
// SubscribeFrom with it: the events are durable, so none is lost to the
// consumer. A fork's stream is its own events: its prefix is its parent's
// (Meta.ForkedFrom), and after may be its fork point.
//
// Updates of the live stream that come while the replay is being read
// queue as Subscribe's do, and beyond SubscriptionBuffer are counted in a
// Missed notice. On a follower (Options.ReadOnly with a Remote) the live
// stream is what the session's log gains, polled every
// Options.FollowInterval: events appended by any Store, on any machine.
//
// SubscribeFrom opens the session and loads its index, as Tree does.
//
// Errors: ErrNotFound for a session the store does not hold, or when
// after is not one of its events; ErrLocked; ErrClosed; a
// *CorruptionError for a session its open finds damaged; ctx's error.
// Damage that only a read finds (a bad record the replay meets) ends the
// subscription: C closes, and Err reports the *CorruptionError.
func (s *Store) SubscribeFrom(ctx context.Context, session, after uuid.UUID) (*Subscription, error) {
	return s.subscribe(ctx, session, after, true)
}

// subscribe registers a subscription to the session under its mutex: with
// replay, one that first delivers the events after the event after
// (uuid.Nil: from the first); without, a live one (Subscribe on a
// follower). In a follower the events its index gained since the last
// delivery are handed to the current subscribers first (deliverFollowed),
// so that the new subscriber's replay starts where theirs ends.
func (s *Store) subscribe(ctx context.Context, session, after uuid.UUID, replay bool) (*Subscription, error) {
	sub := s.hub.newSubscription(session)
	err := s.withHandle(ctx, session, func(h *openSession) error {
		if err := h.damage(); err != nil {
			return err
		}
		start := len(h.Entries)
		if replay {
			start = 0
			if after != uuid.Nil {
				i, ok := h.ByID[after]
				switch {
				case ok:
					start = int(i) + 1
				case h.meta.ForkedFrom != nil && h.meta.ForkedFrom.Event == after:
					// A fork's fork point: its own events all follow.
				default:
					return fmt.Errorf("%w: event %s in session %s", ErrNotFound, after, session)
				}
			}
		}
		if err := s.deliverFollowed(ctx, h); err != nil {
			return err
		}
		if start < len(h.Entries) {
			p := &resolvedPath{h: h, runs: []pathRun{{seg: -1, entries: slices.Clone(h.Entries[start:])}}}
			sub.replay = func(ctx context.Context, send func(Update) bool) error {
				return s.replayPath(ctx, session, p, send)
			}
		}
		if !s.hub.add(sub) {
			return ErrClosed
		}
		// Registered: from here on its pump runs, so that the Store's
		// Close, which waits for it, never waits in vain.
		go sub.pump(ctx)
		if s.follower() {
			sub.t.followed = uuid.Nil
			if len(h.Entries) > 0 {
				sub.t.followed = h.Entries[len(h.Entries)-1].ID
			}
			s.polls.start(s, session)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return sub, nil
}

// replayPath sends the events of p (one run, the session's own) to a
// subscriber, a batch at a time (seqBatch), until send refuses one.
func (s *Store) replayPath(ctx context.Context, session uuid.UUID, p *resolvedPath, send func(Update) bool) error {
	run := p.runs[0].entries
	for k := 0; k < len(run); {
		end := batchEnd(run, k)
		evs, err := s.seqBatch(ctx, session, p, -1, run[k:end])
		if err != nil {
			return err
		}
		for i := range evs {
			if !send(Update{Event: &evs[i]}) {
				return nil
			}
		}
		k = end
	}
	return nil
}
