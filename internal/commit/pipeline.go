package commit

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore/internal/chunkwriter"
	"github.com/sessionstore/sessionstore/internal/durable"
)

// A Log is what a Pipeline writes its records to and tells about them:
// the open session above it. Every method but Write is called with the
// session's mutex held; see the package documentation.
type Log[R any] interface {
	// Stopped returns the error appends are refused with once the
	// session stopped writing, nil while it writes. A leader asks it
	// before it writes: the records of a session that stopped while they
	// waited are dropped, never written.
	Stopped() error
	// Write writes data, the chunk writer's queue, at off, the end of the
	// data of c, its active chunk, and makes it durable. writeErr means
	// nothing of data is left in c (its data ends at off again), unless it
	// wraps durable.ErrUnsynced; syncErr means data's state is unknown.
	// journaled reports that data is durable in a journal and written
	// into c without a sync. A leader calls Write with the mutex released,
	// Settle with it held; never two at once.
	//
	// pending, when not nil, is what remains of making data durable once
	// Write returned (an object store's Create in flight): the pipeline
	// calls it, with the mutex released (by Settle, held), and the data
	// is durable once it returns nil; an error leaves the data's state
	// unknown, as syncErr. A Log that returns pending must make each
	// pending return nil only once the pendings of every earlier Write
	// did, so that records are acknowledged in the order they were
	// written; the next Write may start before it returns.
	Write(c chunkwriter.Chunk, data []byte, off int64) (pending func() error, writeErr, syncErr error, journaled bool)
	// Journaled is told that a Write went through a journal (the chunk
	// writer is marked unsynced, or Settle synced the chunk).
	Journaled()
	// Publish is given the oldest records in flight, now durable, to make
	// them visible (in order); they leave the flight when it returns.
	Publish(rs []R)
	// Dropped is given the records in flight that a failed write drops:
	// none of them is on disk, and their appends fail.
	Dropped(rs []R)
	// Stop is told that a failed write or sync left the records' state
	// unknown: err, which wraps durable.ErrUnsynced, stops the session's
	// writes (Stopped returns an error from then on).
	Stop(err error)
}

// GatherWait bounds how long a commit leader yields the mutex before a
// write when the previous sync covered more than one record, so that
// appends on their way join and share the sync. A lone writer never
// waits.
const GatherWait = 200 * time.Microsecond

// GatherLag ends a gathering early: once half the records it waits for
// have come, a pause this long between two means the rest lag behind.
const GatherLag = 15 * time.Microsecond

// A Pipeline is the group commit of one session: its records in flight
// (queued in the chunk writer, not yet known durable), the commit groups
// waiting to be written, and the sync under way. Its zero value is not
// usable: see New. Every method is called with the session's mutex held.
type Pipeline[R any] struct {
	mu     sync.Locker
	chunks *chunkwriter.Writer
	log    Log[R]
	synced *sync.Cond       // on mu: records in flight were published or failed
	now    func() time.Time // time.Now; tests step it

	inflight  []R      // queued, not yet known durable, oldest first
	syncing   bool     // a commit leader is writing and syncing
	writing   *Group   // the group whose Write runs
	flight    []*Group // groups written, whose pending runs, oldest first
	flying    int      // the records of flight
	lastBatch int      // records the last commit write covered
	open      *Group   // the records in flight no write has started on
	waiting   int      // calls in WaitSync, which tests wait for
	settled   int      // settles that wrote records in flight, which tests count
}

// New returns the pipeline of a session whose mutex is mu, whose records
// are queued in chunks, and which log writes and publishes. chunks is
// used with mu held, as its own documentation requires, except for the
// bytes a leader hands to log.Write.
func New[R any](mu sync.Locker, chunks *chunkwriter.Writer, log Log[R]) Pipeline[R] {
	return Pipeline[R]{mu: mu, chunks: chunks, log: log, synced: sync.NewCond(mu), now: time.Now}
}

// A Group is the records one write and sync make durable: those added
// since the last write started. The first caller to join a group leads
// it (see Commit); the others wait for it without taking the session's
// mutex again, so that the end of a sync wakes only the callers it made
// durable, plus the leader of the next group.
type Group struct {
	records int           // records in the group
	lead    chan struct{} // closed once no write runs before this group's
	done    chan struct{} // closed when the records are published, or failed
	err     error         // why they failed; read after done
	led     bool          // the first to commit leads; set in Commit
	n       int           // the records its write covered
	stored  bool          // its pending returned nil
}

// Add adds r, whose line the caller just queued in the chunk writer, to
// the records in flight. The caller then joins it to a group (Join).
func (p *Pipeline[R]) Add(r R) { p.inflight = append(p.inflight, r) }

// Inflight returns the records in flight, oldest first: queued or being
// written, not yet published. The slice is the pipeline's: read it with
// the mutex held, and do not keep it.
func (p *Pipeline[R]) Inflight() []R { return p.inflight }

// Syncing reports whether a leader is writing and syncing a group (with
// the mutex released), or written groups wait for their pending.
func (p *Pipeline[R]) Syncing() bool { return p.syncing || len(p.flight) > 0 }

// Waiting is the number of calls in WaitSync (for tests).
func (p *Pipeline[R]) Waiting() int { return p.waiting }

// Settled is the number of Settle calls that wrote records in flight
// (for tests).
func (p *Pipeline[R]) Settled() int { return p.settled }

// WaitSync waits, with the mutex released, until records in flight are
// published or failed: at the end of the running write and sync, or of
// a Settle.
func (p *Pipeline[R]) WaitSync() {
	p.waiting++
	p.synced.Wait()
	p.waiting--
}

// Join adds the last n records added to the open group, starting one if
// none is open, and returns it: the caller passes it to Commit.
func (p *Pipeline[R]) Join(n int) *Group {
	g := p.open
	if g == nil {
		g = &Group{lead: make(chan struct{}), done: make(chan struct{})}
		p.open = g
		if !p.syncing {
			close(g.lead)
		}
	}
	g.records += n
	return g
}

// finish ends group g with err (nil when its records are published),
// unless it ended.
func (p *Pipeline[R]) finish(g *Group, err error) {
	if p.open == g {
		p.open = nil
	}
	if closed(g.done) {
		return
	}
	g.err = err
	close(g.done)
}

// closed reports whether c is closed.
func closed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Commit waits until the records of group g, which the caller joined
// with the mutex held, are published (durable), leading the group's
// write and sync if the caller is the first of the group to commit. It
// returns with the mutex released: nil once the records are published,
// or why they failed (see the package documentation).
func (p *Pipeline[R]) Commit(g *Group) error {
	if g.led {
		p.mu.Unlock()
		<-g.done
		return g.err
	}
	g.led = true
	defer p.mu.Unlock()
	for !closed(g.lead) && !closed(g.done) {
		p.mu.Unlock()
		select {
		case <-g.lead:
		case <-g.done:
		}
		p.mu.Lock()
	}
	if closed(g.done) { // settled, or failed
		return g.err
	}
	if err := p.log.Stopped(); err != nil {
		// The session stopped writing while g waited: its records (and
		// those of the open group behind it) were never written. Drop
		// them, so that nothing names them as the next parent.
		p.inflight = p.inflight[:0]
		p.chunks.DropQueue()
		p.failGroups(g, err)
		return err
	}
	p.gather(g)
	if closed(g.done) { // settled meanwhile
		return g.err
	}
	// Every record in flight is in g, but those of the groups written
	// whose pending runs (flight).
	p.syncing, p.open, p.writing = true, nil, g
	g.n = len(p.inflight) - p.flying
	c := p.chunks.Active()
	q, off := p.chunks.TakeQueue()
	p.lastBatch = g.n
	p.mu.Unlock()
	pending, werr, serr, journaled := p.log.Write(c, q, off)
	p.mu.Lock()
	p.writing = nil
	if journaled {
		p.chunks.MarkUnsynced()
		p.log.Journaled()
	}
	p.chunks.GiveBack(q)
	if werr != nil && serr == nil && !errors.Is(werr, durable.ErrUnsynced) {
		// Nothing of g reached the chunk: the groups written before it
		// settle first (they may be acknowledged), then g's records and
		// those after them are dropped. No write starts meanwhile.
		for len(p.flight) > 0 && !closed(g.done) {
			p.WaitSync()
		}
	}
	p.syncing = false
	if next := p.open; next != nil {
		close(next.lead)
	}
	switch {
	case closed(g.done): // a failure of a group before it ended it
	case werr != nil:
		p.writeFailed(g, off, werr)
	case serr != nil:
		p.syncFailed(g, serr)
	case pending == nil && len(p.flight) == 0:
		p.publish(g.n)
		p.finish(g, nil)
	default:
		p.flight = append(p.flight, g)
		p.flying += g.n
		if pending != nil {
			p.mu.Unlock()
			perr := pending()
			p.mu.Lock()
			if closed(g.done) {
				return g.err
			}
			if perr != nil {
				p.syncFailed(g, perr)
				return g.err
			}
		}
		g.stored = true
		p.publishFlight()
		for !closed(g.done) {
			// Stored, after a group written before it whose pending
			// has not returned yet: its leader publishes both.
			p.mu.Unlock()
			<-g.done
			p.mu.Lock()
		}
	}
	return g.err
}

// publishFlight publishes the oldest groups of flight while they are
// stored, in order.
func (p *Pipeline[R]) publishFlight() {
	for len(p.flight) > 0 && p.flight[0].stored {
		g := p.flight[0]
		p.flight = p.flight[1:]
		p.flying -= g.n
		p.publish(g.n)
		p.finish(g, nil)
	}
}

// gather lets more records join g before its leader writes, with the
// mutex held (released while it yields). When the last write covered more
// than one record, their callers are likely to append again at once: it
// yields, for GatherWait at most, until as many records as that write
// covered are in the group besides the leader's. It stops early once most
// have come and the rest lag behind by GatherLag: they are held up
// (preempted, woken late) and the next sync covers them.
func (p *Pipeline[R]) gather(g *Group) {
	want := g.records + p.lastBatch - 1
	if p.lastBatch <= 1 || g.records >= want {
		return
	}
	start := p.now()
	deadline, last, seen := start.Add(GatherWait), start, g.records
	for g.records < want && !closed(g.done) {
		p.mu.Unlock()
		runtime.Gosched()
		p.mu.Lock()
		now := p.now()
		if g.records != seen {
			last, seen = now, g.records
		}
		if !now.Before(deadline) || (2*seen >= want && now.Sub(last) > GatherLag) {
			return
		}
	}
}

// Settle makes every record in flight durable and published, so that the
// active chunk can be sealed or closed: it waits for a running write and
// sync (releasing the mutex), then writes and syncs the rest itself
// without releasing it. When the rest went through a journal, it syncs the
// chunk too: a settled chunk holds its records durably by itself. It
// returns Log.Stopped's error when the session stopped writing, and a
// failed write's or sync's error as Commit does.
func (p *Pipeline[R]) Settle() error {
	for p.Syncing() {
		p.WaitSync()
	}
	if err := p.log.Stopped(); err != nil {
		return err
	}
	if len(p.inflight) == 0 {
		return nil
	}
	q, off := p.chunks.TakeQueue()
	c := p.chunks.Active()
	pending, werr, serr, journaled := p.log.Write(c, q, off)
	p.chunks.GiveBack(q)
	if werr == nil && serr == nil && pending != nil {
		serr = pending()
	}
	if werr != nil {
		return p.writeFailed(nil, off, werr)
	}
	if serr != nil {
		return p.syncFailed(nil, serr)
	}
	if journaled {
		// Settling makes the chunk durable (it is to be sealed or
		// closed): a checkpoint of the chunk, not only of the journal.
		p.log.Journaled()
		if err := c.Sync(); err != nil {
			return p.syncFailed(nil, err)
		}
		p.chunks.MarkSynced()
	}
	p.settled++
	p.publish(len(p.inflight))
	if g := p.open; g != nil {
		p.finish(g, nil)
	}
	return nil
}

// writeFailed handles a failed write of the queued records of group g
// (nil from Settle), which the Log cut back to off: every record in
// flight is dropped (the later ones name dropped parents) and their
// appends fail, but the session goes on writing. A write error wrapping
// durable.ErrUnsynced (even cutting back failed) is a failed sync.
func (p *Pipeline[R]) writeFailed(g *Group, off int64, err error) error {
	if errors.Is(err, durable.ErrUnsynced) {
		return p.syncFailed(g, err)
	}
	p.log.Dropped(p.inflight)
	p.inflight = p.inflight[:0]
	p.chunks.CutBack(off)
	p.failGroups(g, err)
	return err
}

// syncFailed handles a failed sync of the records in flight, for group g
// (nil from Settle): they may or may not be on disk, so none is
// acknowledged and the session stops writing (Log.Stop).
func (p *Pipeline[R]) syncFailed(g *Group, err error) error {
	failed := fmt.Errorf("%w: %w", err, durable.ErrUnsynced)
	p.log.Stop(failed)
	p.inflight = p.inflight[:0]
	p.chunks.DropQueue()
	p.failGroups(g, failed)
	return failed
}

// failGroups finishes g (if not nil), the groups written and waiting
// for their pending, the group being written and the open group with
// err, after their records were dropped, and wakes whoever waits for a
// sync.
func (p *Pipeline[R]) failGroups(g *Group, err error) {
	if g != nil {
		p.finish(g, err)
	}
	for _, f := range p.flight {
		p.finish(f, err)
	}
	p.flight, p.flying = nil, 0
	if w := p.writing; w != nil {
		p.finish(w, err)
	}
	if o := p.open; o != nil {
		p.finish(o, err)
	}
	p.synced.Broadcast()
}

// publish hands the first n records in flight, now durable, to
// Log.Publish, drops them from the flight and wakes the waiters.
func (p *Pipeline[R]) publish(n int) {
	if n > 0 {
		p.log.Publish(p.inflight[:n])
		p.inflight = append(p.inflight[:0], p.inflight[n:]...)
	}
	p.synced.Broadcast()
}
