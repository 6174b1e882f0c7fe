package sessionstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/durable"
)

// Followers
//
// A Store opened with Options.ReadOnly and a Remote follows sessions that
// other Stores write to the object store. It writes nothing there: it
// takes no lease and creates no marker, so it is never fenced and never
// delays a writer or a taker, and the log's protocol (remote.go) does not
// know it exists. It reads the log as an open does (the newest marker and
// the objects after it: seam.View) and makes its own directory, a cache,
// hold what the log holds (reconcileLocal), then reads the sessions from
// there as any read-only Store reads sessions a writer appends to
// (readonly.go): lazily, and refreshing from the files' new tail.
//
// Each call that opens or finds a session open first brings it up to
// the log (follow): a listing of the newest log objects, and a read of
// each object listed since the previous look (seam's ExtendView), so a
// follower of a session that another Store has held for hours pays for
// what is new, not for the whole lease; a new marker (a handoff, a
// release) reads the log from that marker. The new data objects are
// written to the cached chunks at their offsets, a seal record's chunk
// is downloaded when a read needs it, and the rest of reconcileLocal's
// rules apply unchanged. So a call sees every event whose Append (in any
// Store, on any machine) returned before the call started: an Append
// returns once its data object is stored, and the follower lists the log
// after that. It may also see events whose Append has not returned yet
// (stored, not yet acknowledged: the writer's next open keeps them too,
// remote.go), never one that a writer's open could cut.
//
// While a session is open in the follower, the cache's index.jsonl and
// HEAD (derived files) are not rewritten for data appended to the newest
// chunk: the open session reads the chunks' new tail itself, and the
// files are rebuilt when the follower closes the session (release), with
// remote.json recording the log object the cache then matches, so that
// the follower's next open of the session reads only newer objects.
// Anything else the log did (a seal, a cut, a handoff's new state)
// rewrites them at once, as an open does.
//
// A session deleted on the object store is ErrNotFound for the follower
// from its next look on; the cache of it stays in its directory until
// removed by hand (the follower writes no tombstone of its own).

// followState is what a follower's session keeps between its looks at
// the log: the view the cache matches, and whether the derived files lag
// the chunks.
type followState struct {
	view  *logView
	stale bool // index.jsonl and HEAD lag the chunks (rebuilt at release)
}

// follow brings a follower's cache of the session up to its log, with
// the open session's mutex held. On the session's first look in this
// Store it takes the session's LOCK in the cache (lockSession; the
// directory is made if missing) and trusts the cache up to what
// remote.json records; later looks read only the objects listed since
// (ExtendView). It returns ErrNotFound for a session the object store
// does not hold, or whose log ends with a delete marker.
func (r *remoteFiles) follow(ctx context.Context, lockSession func(string) (io.Closer, error)) (io.Closer, error) {
	var lock io.Closer
	if r.following == nil {
		// The session's first look: its directory and lock.
		v, err := r.readFollowView(ctx, nil)
		if err != nil {
			return nil, err
		}
		if err := durable.MkdirAll(r.FS, r.Dir, r.DirPerm); err != nil {
			return nil, err
		}
		if lock, err = lockSession(filepath.Join(r.Dir, lockName)); err != nil {
			return nil, err
		}
		for {
			err := r.reconcileLocal(ctx, v, nil)
			if errors.Is(err, errLogMoved) {
				if v, err = r.readFollowView(ctx, nil); err == nil {
					continue
				}
			}
			if err != nil {
				lock.Close()
				return nil, err
			}
			break
		}
		r.following = &followState{view: v}
		return lock, nil
	}
	prev := r.following.view
	for {
		v, err := r.readFollowView(ctx, prev)
		if err != nil {
			return nil, err
		}
		if v == r.following.view {
			return nil, nil // nothing new
		}
		// The cache matches the previous view: only what is newer is
		// fetched, and an append to the chunks leaves the derived files.
		r.trust = r.cacheState(r.following.view)
		r.appendOnly = true
		err = r.reconcileLocal(ctx, v, nil)
		r.trust, r.appendOnly = nil, false
		if errors.Is(err, errLogMoved) {
			prev = nil // a data object became a tombstone since: read the log anew
			continue
		}
		if err != nil {
			return nil, err
		}
		r.following.view = v
		r.following.stale = r.following.stale || r.derivedLag
		return nil, nil
	}
}

// readFollowView reads the log's view (extended from prev when it is not
// nil), reading again while another Store writes under the reading, and
// maps a log that is gone or deleted to ErrNotFound.
func (r *remoteFiles) readFollowView(ctx context.Context, prev *logView) (*logView, error) {
	for {
		v, err := r.ExtendView(ctx, prev)
		if errors.Is(err, errLogMoved) {
			prev = nil // read while another Store wrote: read it anew
			continue
		}
		if err != nil {
			return nil, remoteDamage(err)
		}
		if v == nil || v.Deleted() {
			return nil, fmt.Errorf("%w: session %s", ErrNotFound, r.ID)
		}
		return v, nil
	}
}

// cacheState is what remote.json says of a cache that holds exactly the
// log view v: the newest object, and the sealed chunks it vouches for.
func (r *remoteFiles) cacheState(v *logView) *localRemoteState {
	ls := &localRemoteState{Seq: v.NewestSeq, Lease: v.Marker.Lease}
	if len(v.State.Sealed) > 0 {
		ls.SealedThrough = slices.MaxFunc(v.State.Sealed, func(a, b sealedObject) int { return cmp.Compare(a.Chunk, b.Chunk) }).Chunk
		ls.SealedDigest = sealedDigest(v.State.Sealed, ls.SealedThrough)
	}
	return ls
}

// releaseFollower ends a follower's use of the session: the derived
// files are rebuilt if they lag the chunks, and remote.json records the
// log object the cache matches. It writes nothing to the object store.
func (r *remoteFiles) releaseFollower(clean bool) error {
	f := r.following
	r.following = nil
	if f == nil || !clean {
		return nil
	}
	if f.stale {
		if err := r.rebuildDerived(f.view, livePieces(f.view)); err != nil {
			return err
		}
	}
	b, _ := json.Marshal(r.cacheState(f.view))
	return durable.ReplaceFile(r.FS, r.Dir, remoteStateFile, b, r.Perm)
}

// livePieces are the data objects of the chunks the log view v holds
// plain, by chunk.
func livePieces(v *logView) map[uint32][]logPiece {
	pieces := map[uint32][]logPiece{}
	for _, p := range v.State.Live {
		if _, ok := v.State.SealedChunk(p.Chunk); !ok {
			pieces[p.Chunk] = append(pieces[p.Chunk], p)
		}
	}
	return pieces
}

// follow brings an open session of a follower up to its log (a no-op for
// a read-only Store without a Remote), with h.mu held; its refresh then
// reads what the cache gained.
func (h *openSession) follow(ctx context.Context) error {
	rf, ok := h.files.(*remoteFiles)
	if !ok || rf.following == nil {
		return nil
	}
	_, err := rf.follow(ctx, nil)
	return err
}

// follower reports whether the Store is a follower.
func (s *Store) follower() bool { return s.opts.ReadOnly && s.opts.Remote != nil }

// deliverFollowed hands the events the follower's index of the session
// gained since the last delivery to the session's subscribers, in log
// order, with h.mu held (a no-op for a Store that is not a follower, or a
// session without subscribers).
func (s *Store) deliverFollowed(ctx context.Context, h *openSession) error {
	if !s.follower() {
		return nil
	}
	t := s.hub.topic(h.id)
	if t == nil || len(h.Entries) == 0 {
		return nil
	}
	start := 0
	if t.followed != uuid.Nil {
		i, ok := h.ByID[t.followed]
		if !ok {
			// Not in the index any more: the session's log was cut,
			// which a follower never sees for acknowledged events.
			return fmt.Errorf("%w: event %s left session %s", ErrNotFound, t.followed, h.id)
		}
		start = int(i) + 1
	}
	// h.mu is held: the key from h's metadata (recordKey would ask the
	// registry, which takes h.mu).
	key, err := s.heldKey(ctx, h)
	if err != nil {
		return err
	}
	for start < len(h.Entries) {
		end := batchEnd(h.Entries, start)
		evs, err := s.readRunSealed(ctx, h, nil, -1, h.Entries[start:end])
		if err == nil {
			err = s.openEvents(key, h.id, evs)
		}
		if err != nil {
			return err
		}
		s.hub.settled(h.id, evs)
		t.followed = h.Entries[end-1].ID
		start = end
	}
	return nil
}

// pollers are a follower's goroutines that poll the logs of the sessions
// it has subscribers for, one per session.
type pollers struct {
	mu      sync.Mutex
	running map[uuid.UUID]bool
	wg      sync.WaitGroup
	stop    chan struct{} // closed by Close
	stopped bool
}

// start starts polling the session, unless it is polled already or the
// Store is closing.
func (p *pollers) start(s *Store, session uuid.UUID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.running[session] {
		return
	}
	if p.running == nil {
		p.running, p.stop = map[uuid.UUID]bool{}, make(chan struct{})
	}
	p.running[session] = true
	p.wg.Go(func() { s.poll(session) })
}

// close stops every poller and waits for them.
func (p *pollers) close() {
	p.mu.Lock()
	if !p.stopped && p.stop != nil {
		close(p.stop)
	}
	p.stopped = true
	p.mu.Unlock()
	p.wg.Wait()
}

// poll polls the session's log every Options.FollowInterval while it has
// subscribers: each look brings the cache and the index up to the log
// (the session's open, as any call's) and delivers what they gained.
// A session deleted meanwhile ends its subscriptions with ErrNotFound;
// another failure (the object store unreachable, say) is logged and the
// next look tries again.
func (s *Store) poll(session uuid.UUID) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.polls.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	tick := time.NewTicker(s.opts.FollowInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			s.polls.done(session)
			return
		case <-tick.C:
		}
		if s.polls.idle(s, session) {
			return
		}
		err := s.withHandle(ctx, session, func(h *openSession) error { return s.deliverFollowed(ctx, h) })
		switch {
		case err == nil:
		case errors.Is(err, ErrClosed) || ctx.Err() != nil:
			s.polls.done(session)
			return
		case errors.Is(err, ErrNotFound):
			s.hub.end(session, err)
		default:
			s.opts.Logger.Warn("sessionstore: a follower's look at a session's log failed; the next look tries again", "session", session, "err", err)
		}
	}
}

// idle reports whether the session has no subscribers left, and then
// forgets its poller: a Subscribe after that starts another.
func (p *pollers) idle(s *Store, session uuid.UUID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.hub.topic(session) != nil {
		return false
	}
	delete(p.running, session)
	return true
}

// done forgets the session's poller.
func (p *pollers) done(session uuid.UUID) {
	p.mu.Lock()
	delete(p.running, session)
	p.mu.Unlock()
}
