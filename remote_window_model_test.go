package sessionstore

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A model of a session's log on object storage with several log objects
// in flight (a window of W), checked over every interleaving of its
// actors' steps, as remote_model_test.go does for one object at a time.
// Each step is one object store call, atomic; an append's Create is two
// steps, its issue and its landing, and the Creates in flight land in
// any order. Leases and clocks are left out, the worst case: any Store
// may take the session at any moment.
//
// The log is numbered objects 1, 2, 3, ..., each created once (Create
// fails when the number is taken): data, markers (create, open, release,
// delete) and voids (nothing), each of a lease.
//
// A marker records Fills: for an open, how many numbers after it its
// taker fills with trailing voids (rule 2), W-1 when the taker's listing
// did not end with a release marker, 0 when it did; a create marker has
// Fills 0. (The holder's open marker at 1, where the model starts, has
// Fills 0: its stretch starts right after it.)
//
// Rule 1, the reader rule, what a Store opening the session reads: the
// newest marker M; a release gives M's state only, a delete a deleted
// session; a create or open of lease L gives M's state, then, ascending
// from M+1:
//
//   - an absent number: stop;
//   - a void of L (its own trailing fills): skip;
//   - a void of another lease: stop (a newer taker filled the number: L's
//     Create of it, data or trailing fill, fails and fences L, so L
//     acknowledges nothing after it);
//   - another lease's data (any non-void object of another lease) at a
//     number <= M + M.Fills: skip (a stale writer's late Create in L's
//     trailing numbers; L's trailing fill there skips it and goes on, so
//     L may acknowledge data after it);
//   - another lease's non-void object at a number > M + M.Fills: stop;
//   - L's data: apply.
//
// The stop past the fills is safe: L's Creates after its fills are its
// data, so L's Create at that number failed (or will), which fences L,
// and L acknowledges a data object only once every number of its stretch
// up to it landed as its own: it acknowledges nothing from there on, and
// everything it acknowledged is below, applied already. Anything of L's
// past it was never acknowledged. (In the model the stop is never
// reached: a stale writer, unable to acknowledge past a taker's marker at
// N+1, issues nothing past N+W = M + M.Fills, and a clean take, Fills 0,
// follows a release, after which its lease has nothing in flight. The
// model shows that the stop costs nothing here, the same interleavings
// pass as with the old rule, which skipped another lease's data
// anywhere.)
//
// Rule 2, the trailing fills: a taker whose marker is at N+1 creates
// voids at N+2 .. N+W, ascending, unless its listing's newest object was
// a release marker. On a collision it looks at the object that took the
// number: a marker (any kind) or a void of another lease fences it (it
// acknowledges nothing more and writes nothing more); another lease's
// data is skipped, and it goes on. Its own acknowledgements start after
// its last trailing fill.
//
// Why each is needed, each trace a failing interleaving of the variant
// without it:
//
//   - Rule 1's stop at another lease's void (foreign-void-skip, the
//     protocol as first written, which skips every void; W = 2): H issues
//     2 and 3, 2 lands, H issues 4, 4 lands; D lists (newest 4) and fills
//     a void at 3, where H's 3 collides. A reader (H's marker at 1 the
//     newest) skipping the void applies 4, not acknowledged, without 3
//     (check 3), and an open's state would be that view; stopping there
//     it applies 2, as acknowledged.
//   - Rule 2's fence at another lease's void (trail-void-skip, which
//     skips it; W = 3): H issues 2, 3 and 4, 2 lands, H issues 5; T lists
//     (newest 2) and creates its marker at 3, where H's 3 collides; H's 5
//     lands; U lists (newest 5) and fills a void at 4, where H's 4
//     collides; T's trailing fill at 4 is taken by U's void, T skips it
//     (and H's data at 5), appends at 6 and acknowledges it; a reader
//     stops at U's void at 4, so T's acknowledged data is lost (check 1),
//     for good once U's marker is at 7. (With W = 2 it cannot happen: the
//     void needs a stale object two past T's marker.)
//   - Rule 2's fence at a marker (first-trail-ignore, the protocol as
//     first written, which skips every taken number; W = 2): H's 2, 3 and
//     4 land; T lists (newest 4) and creates its marker at 5; D lists
//     (newest 5) and creates its delete marker at 6; T's trailing fill at
//     6 is taken by it, T skips it, appends at 7, acknowledges it and
//     releases at 8: T acknowledged after a newer marker (check 2) and
//     the deleted session lives again (check 4).
//
// Skipping another lease's data, in both rules, keeps a stale writer's
// late Create in a new holder's trailing numbers from hiding its appends
// or failing its takeover (a stale writer, unable to acknowledge past
// the marker at N+1, issues nothing past N+W); the reader skips it only
// there, within M.Fills of M.
//
// The actors:
//
//   - the holder (lease 1), past its open marker at 1 when its lease ran
//     out, appends W+1 data objects: with A its acknowledged point and I
//     its issued point, it may issue the Create of I+1 when I+1 <= A+W
//     and it is not fenced; a landing that collides fences it. It
//     acknowledges data object k once every number from its marker+1 to
//     k landed as its own, so never one after a collision.
//   - takers, opens (T, U) or a Delete (D), each with its own lease: a
//     taker lists (M the newest marker, N the newest number), creates a
//     void at each absent number of (M, N], ascending, then its marker at
//     N+1 (an open's state is the reader rule on its listing with those
//     voids), listing again when a number is taken, at most 3 times (then
//     it gives up, as a failed open or a Store that died: its voids stay).
//     Then it creates its trailing fills (rule 2). An open then appends
//     one data object as a holder of its lease, its stretch starting
//     after its last trailing fill (N+W, or its marker without them), and
//     releases: a release marker at its next number once its Creates
//     landed, its state its view.
//
// Checked after every step (a reader may come at any moment, and any
// actor may stop there) and at the end of every interleaving:
//
//  1. no acknowledged loss: every acknowledged data object is in the
//     reader's view, unless the newest marker is a delete, and then none
//     was acknowledged at a number after the delete marker;
//  2. no double holders: no lease acknowledges a data object at a number
//     after a marker of another lease created after its own marker;
//  3. the reader applies no data object that was not acknowledged and
//     whose predecessor in its lease's stretch never landed;
//  4. a deleted session stays deleted: no marker after a delete marker.
//
// The variants show that the checks fail: (a) a-no-gap-fills, the taker
// creates no voids before its marker; (b) b-out-of-order-ack, the holder
// acknowledges a data object when it lands, while an earlier number of
// its window is in flight or was taken; and the three above.
//
// Interleavings are counted over a memo of states: a state is the log,
// the actors' programs and what was acknowledged and checked, all an
// interleaving's future depends on, so each state is explored once.

// Kinds of objects; markers from winCreate on.
const (
	winAbsent uint8 = iota
	winData
	winVoid
	winCreate
	winOpen
	winRelease
	winDelete
)

// winMaxSeq is the model's last number (masks of numbers are uint16).
const winMaxSeq = 15

// winObj is one object of the log.
type winObj struct {
	kind  uint8
	lease uint8
	id    uint8 // data: its id, its bit in the masks of data objects
	state uint8 // marker: the data objects its state names
	fills uint8 // open marker: Fills, the numbers after it its taker fills (W-1, or 0 after a release)
}

// Roles.
const (
	winHolder uint8 = iota
	winOpener
	winDeleter
)

// Phases of an actor's program; winDone is the zero value, so an unused
// actor slot is done.
const (
	winDone uint8 = iota
	winList
	winGap
	winMark
	winTrail
	winAppend
)

// winActor is one Store. (Its fields leave no padding: the memo hashes
// a state as plain memory.)
type winActor struct {
	gaps     uint16 // numbers of (M, N] absent from its listing, still to fill
	inflight uint16 // numbers of its data issued and not landed
	landed   uint16 // numbers of its data landed

	name  byte
	role  uint8
	lease uint8
	phase uint8
	tries uint8 // listings again left

	// Taking the session.
	snapN   uint8 // the newest number of its listing
	state   uint8 // its marker's state
	noTrail bool  // its listing's newest object was a release
	next    uint8 // its next trailing void

	// Appending.
	base    uint8 // the number before its first data object
	acked   uint8 // A
	issued  uint8 // I
	ndata   uint8 // data objects to append
	firstID uint8 // the id of its first data object
	fenced  bool
	release bool // it releases after its appends
}

// winProtocol is the protocol, or one of its variants.
type winProtocol struct {
	W               int
	skipGapFills    bool // (a): no voids before the taker's marker
	ackOutOfOrder   bool // (b): a data object is acknowledged when it lands
	foreignVoidSkip bool // as first written: the reader skips another lease's void too
	trailVoidSkip   bool // a trailing number taken by another lease's void is skipped
	trailIgnore     bool // as first written: every taken trailing number is skipped, a marker's too
}

// winState is the log and what happened to it, the key of the memo.
type winState struct {
	log       [winMaxSeq + 1]winObj
	actors    [4]winActor
	acked     uint16   // data objects acknowledged to an append
	ackMax    [5]uint8 // per lease: the largest number it acknowledged
	fence     [5]uint8 // per lease: the smallest number of a marker of another lease created after its own; 0 none
	hasMarker uint8    // leases with a marker in the log
	problems  uint8    // the checks that failed: 1, 2, 3, 4 as bits 1, 2, 4, 8
}

// What a step did; winSays names them.
const (
	winIssued uint8 = iota
	winLanded
	winLandTaken
	winReleased
	winReleaseTaken
	winListed
	winListedDeleted
	winFilled
	winFillTaken
	winFillGaveUp
	winMarked
	winMarkTaken
	winMarkGaveUp
	winTrailed
	winTrailTakenData
	winTrailTakenVoid
	winTrailTakenMarker // skipped: trailIgnore
	winTrailFenced
	winTrailFencedVoid
	winSaid
)

var winSays = [winSaid]string{
	winIssued:           "issues data at",
	winLanded:           "lands data at",
	winLandTaken:        "lands data: taken, fenced, at",
	winReleased:         "releases at",
	winReleaseTaken:     "releases: taken, fenced, at",
	winListed:           "lists: newest",
	winListedDeleted:    "lists: deleted, newest",
	winFilled:           "fills a void at",
	winFillTaken:        "fills a void: taken, lists again, at",
	winFillGaveUp:       "fills a void: taken, gives up, at",
	winMarked:           "creates its marker at",
	winMarkTaken:        "creates its marker: taken, lists again, at",
	winMarkGaveUp:       "creates its marker: taken, gives up, at",
	winTrailed:          "creates a trailing void at",
	winTrailTakenData:   "creates a trailing void: taken by data, skipped, at",
	winTrailTakenVoid:   "creates a trailing void: taken by a void, skipped, at",
	winTrailTakenMarker: "creates a trailing void: taken by a marker, skipped, at",
	winTrailFenced:      "creates a trailing void: taken by a marker, fenced, at",
	winTrailFencedVoid:  "creates a trailing void: taken by a void, fenced, at",
}

// winEvent is one step of an interleaving, for a trace.
type winEvent struct {
	name byte
	what uint8
	seq  uint8
}

func (e winEvent) String() string { return fmt.Sprintf("%c %s %d", e.name, winSays[e.what], e.seq) }

func (s *winState) newest() uint8 {
	for j := uint8(winMaxSeq); j > 0; j-- {
		if s.log[j].kind != winAbsent {
			return j
		}
	}
	return 0
}

func (s *winState) newestMarker() uint8 {
	for j := uint8(winMaxSeq); j > 0; j-- {
		if s.log[j].kind >= winCreate {
			return j
		}
	}
	return 0
}

// where is the number data object id landed at, 0 if it did not.
func (s *winState) where(id uint8) uint8 {
	for j := uint8(1); j <= winMaxSeq; j++ {
		if o := s.log[j]; o.kind == winData && o.id == id {
			return j
		}
	}
	return 0
}

// create is ObjectStore.Create of number seq: false if it is taken.
func (s *winState) create(seq uint8, o winObj) bool {
	if seq > winMaxSeq {
		panic("the model's log is too short")
	}
	if s.log[seq].kind != winAbsent {
		return false
	}
	s.log[seq] = o
	if o.kind >= winCreate {
		for l := range s.fence {
			if uint8(l) != o.lease && s.hasMarker&(1<<l) != 0 && (s.fence[l] == 0 || seq < s.fence[l]) {
				s.fence[l] = seq
			}
		}
		s.hasMarker |= 1 << o.lease
	}
	return true
}

// read is the reader rule on the log: the delete marker's number if the
// session is deleted, else the data objects the reader applies.
// gapsAreVoids reads an absent number up to the newest as a void: a
// taker's listing with the voids it is to create.
func (s *winState) read(p *winProtocol, gapsAreVoids bool) (del, view uint8) {
	n, m := s.newest(), s.newestMarker()
	mo := s.log[m]
	switch mo.kind {
	case winDelete:
		return m, 0
	case winRelease:
		return 0, mo.state
	}
	view = mo.state
	for j := m + 1; j <= n; j++ {
		switch o := s.log[j]; {
		case o.kind == winAbsent && !gapsAreVoids:
			return 0, view
		case o.kind == winAbsent, o.kind == winVoid && o.lease != mo.lease:
			// Another lease's void (an absent number read as a void is
			// the taker's own, to be created).
			if !p.foreignVoidSkip {
				return 0, view
			}
		case o.kind == winVoid:
			// L's void.
		case o.lease != mo.lease:
			// Another lease's data: a stale writer's late Create, skipped
			// within M's fills, a stop past them.
			if j > m+mo.fills {
				return 0, view
			}
		default:
			view |= 1 << o.id
		}
	}
	return 0, view
}

// check runs the checks on the log as it is now, adding to s.problems
// and, for a trace, saying why.
func (s *winState) check(p *winProtocol, why *[]string) {
	fail := func(bit uint8, format string, args ...any) {
		if why != nil && s.problems&bit == 0 {
			*why = append(*why, fmt.Sprintf(format, args...))
		}
		s.problems |= bit
	}
	del, view := s.read(p, false)
	for j := s.newestMarker() - 1; j > 0; j-- {
		if s.log[j].kind == winDelete {
			fail(8, "check 4: a delete marker at %d below the newest marker at %d: the session lives again", j, s.newestMarker())
		}
	}
	for ids := s.acked; ids != 0; ids &= ids - 1 {
		id := uint8(bits.TrailingZeros16(ids))
		at := s.where(id)
		if del != 0 && at > del {
			fail(1, "check 1: data %d acknowledged at %d, after the delete marker at %d", id, at, del)
		}
		if del == 0 && view&(1<<id) == 0 {
			fail(1, "check 1: data %d acknowledged at %d, not in the reader's view (the newest marker is at %d)", id, at, s.newestMarker())
		}
	}
	for l := range s.fence {
		if s.fence[l] != 0 && s.ackMax[l] > s.fence[l] {
			fail(2, "check 2: lease %d acknowledged at %d, after another lease's newer marker at %d", l, s.ackMax[l], s.fence[l])
		}
	}
	for j := uint8(1); j <= winMaxSeq; j++ {
		o := s.log[j]
		if o.kind == winData && view&(1<<o.id) != 0 && s.acked&(1<<o.id) == 0 && s.hasPred(o) && s.where(o.id-1) == 0 {
			fail(4, "check 3: the reader applies data %d at %d, not acknowledged, its predecessor never landed", o.id, j)
		}
	}
}

// hasPred is whether data object o follows another in its lease's stretch
// (the one with the id before it).
func (s *winState) hasPred(o winObj) bool {
	for _, a := range s.actors {
		if a.lease == o.lease && a.ndata > 0 {
			return o.id > a.firstID
		}
	}
	panic("no actor of the lease")
}

// winMove is one step an actor can take: a taker's next call, or an
// appender's issue, landing or release.
type winMove struct {
	actor int
	op    uint8
	seq   uint8
}

const (
	winStep uint8 = iota
	winIssue
	winLand
	winRel
)

func (s *winState) moves(p *winProtocol, into []winMove) []winMove {
	for i := range s.actors {
		a := &s.actors[i]
		switch a.phase {
		case winDone:
		case winAppend:
			if !a.fenced && a.issued < a.base+a.ndata && int(a.issued) < int(a.acked)+p.W {
				into = append(into, winMove{i, winIssue, a.issued + 1})
			}
			for m := a.inflight; m != 0; m &= m - 1 {
				into = append(into, winMove{i, winLand, uint8(bits.TrailingZeros16(m))})
			}
			if a.release && !a.fenced && a.inflight == 0 && a.acked == a.base+a.ndata {
				into = append(into, winMove{i, winRel, a.acked + 1})
			}
		default:
			into = append(into, winMove{i, winStep, 0})
		}
	}
	return into
}

func (s *winState) ack(a *winActor, k uint8) {
	s.acked |= 1 << (a.firstID + k - a.base - 1)
	s.ackMax[a.lease] = max(s.ackMax[a.lease], k)
}

// apply takes one step, then runs the checks.
func (s *winState) apply(p *winProtocol, mv winMove, why *[]string) winEvent {
	a := &s.actors[mv.actor]
	k := mv.seq
	ev := winEvent{name: a.name, seq: k}
	switch mv.op {
	case winIssue:
		a.issued = k
		a.inflight |= 1 << k
		ev.what = winIssued
	case winLand:
		a.inflight &^= 1 << k
		if !s.create(k, winObj{kind: winData, lease: a.lease, id: a.firstID + k - a.base - 1}) {
			a.fenced = true
			ev.what = winLandTaken
			break
		}
		ev.what = winLanded
		a.landed |= 1 << k
		if p.ackOutOfOrder {
			s.ack(a, k)
		}
		for a.landed&(1<<(a.acked+1)) != 0 {
			a.acked++
			if !p.ackOutOfOrder {
				s.ack(a, a.acked)
			}
		}
	case winRel:
		ev.what = winReleased
		if !s.create(k, winObj{kind: winRelease, lease: a.lease, state: a.state | (1<<a.ndata-1)<<a.firstID}) {
			ev.what = winReleaseTaken
		}
		a.phase = winDone
	default:
		ev = s.step(p, a)
	}
	s.check(p, why)
	return ev
}

// step is a taker's next call.
func (s *winState) step(p *winProtocol, a *winActor) winEvent {
	ev := winEvent{name: a.name}
	switch a.phase {
	case winList:
		n, m := s.newest(), s.newestMarker()
		ev.what, ev.seq = winListed, n
		if s.log[m].kind == winDelete {
			ev.what = winListedDeleted
			a.phase = winDone
			break
		}
		a.snapN, a.gaps = n, 0
		for j := m + 1; j <= n && !p.skipGapFills; j++ {
			if s.log[j].kind == winAbsent {
				a.gaps |= 1 << j
			}
		}
		_, a.state = s.read(p, !p.skipGapFills)
		a.noTrail = s.log[n].kind == winRelease
		a.phase = winMark
		if a.gaps != 0 {
			a.phase = winGap
		}
	case winGap:
		j := uint8(bits.TrailingZeros16(a.gaps))
		ev.what, ev.seq = winFilled, j
		if !s.create(j, winObj{kind: winVoid, lease: a.lease}) {
			ev.what = winFillTaken
			if !a.listAgain() {
				ev.what = winFillGaveUp
			}
			break
		}
		a.gaps &^= 1 << j
		if a.gaps == 0 {
			a.phase = winMark
		}
	case winMark:
		kind := winOpen
		if a.role == winDeleter {
			kind = winDelete
		}
		var fills uint8
		if kind == winOpen && !a.noTrail {
			fills = uint8(p.W - 1)
		}
		ev.what, ev.seq = winMarked, a.snapN+1
		if !s.create(a.snapN+1, winObj{kind: kind, lease: a.lease, state: a.state, fills: fills}) {
			ev.what = winMarkTaken
			if !a.listAgain() {
				ev.what = winMarkGaveUp
			}
			break
		}
		a.next = a.snapN + 2
		a.phase = winTrail
		if a.noTrail || int(a.next) > int(a.snapN)+p.W {
			a.endTake()
		}
	case winTrail:
		j := a.next
		ev.what, ev.seq = winTrailed, j
		if !s.create(j, winObj{kind: winVoid, lease: a.lease}) {
			// Never the taker's own: it has created nothing after its
			// marker yet.
			switch o := s.log[j]; {
			case o.kind == winData:
				ev.what = winTrailTakenData
			case o.kind == winVoid && (p.trailVoidSkip || p.trailIgnore):
				ev.what = winTrailTakenVoid
			case o.kind == winVoid:
				ev.what = winTrailFencedVoid
				a.phase = winDone
				return ev
			case p.trailIgnore:
				ev.what = winTrailTakenMarker
			default:
				ev.what = winTrailFenced
				a.phase = winDone
				return ev
			}
		}
		a.next++
		if int(a.next) > int(a.snapN)+p.W {
			a.endTake()
		}
	}
	return ev
}

// listAgain sends a taker back to its listing, false if it gives up.
func (a *winActor) listAgain() bool {
	if a.tries == 0 {
		a.phase = winDone
		return false
	}
	a.tries--
	a.phase = winList
	return true
}

// endTake ends a taker's taking: a Delete is done, an open appends.
func (a *winActor) endTake() {
	if a.role == winDeleter {
		a.phase = winDone
		return
	}
	a.phase = winAppend
	a.base = a.next - 1
	a.acked, a.issued = a.base, a.base
}

// winStart is the log when the holder's lease has run out: its open
// marker at 1, none of its hdata data objects issued yet. The takers
// (opens T, U; a Delete D) have their own leases, 2 on.
func winStart(hdata, tries uint8, takers ...uint8) winState {
	var s winState
	s.create(1, winObj{kind: winOpen, lease: 1})
	s.actors[0] = winActor{name: 'H', role: winHolder, lease: 1, phase: winAppend, base: 1, acked: 1, issued: 1, ndata: hdata}
	names := "TU"
	for i, role := range takers {
		a := winActor{name: 'D', role: role, lease: uint8(i + 2), phase: winList, tries: tries}
		if role == winOpener {
			a.name, names = names[0], names[1:]
			a.ndata, a.firstID, a.release = 1, hdata+uint8(i), true
		}
		s.actors[i+1] = a
	}
	return s
}

// winCount is what follows a state: its interleavings, how many fail a
// check after some step, and how many fail one at their end.
type winCount struct{ runs, bad, badEnd uint64 }

type winExplorer struct {
	p    winProtocol
	memo map[winState]winCount
	seen [winSaid]int // the steps explored, from distinct states, by what they did
}

func (e *winExplorer) count(s winState) winCount {
	if c, ok := e.memo[s]; ok {
		return c
	}
	var c winCount
	ms := s.moves(&e.p, make([]winMove, 0, 8))
	for _, mv := range ms {
		s2 := s
		e.seen[s2.apply(&e.p, mv, nil).what]++
		sub := e.count(s2)
		c.runs += sub.runs
		c.bad += sub.bad
		c.badEnd += sub.badEnd
	}
	if len(ms) == 0 {
		c.runs = 1
		if s.problems != 0 {
			c.bad = 1
		}
		end := s
		end.problems = 0
		if end.check(&e.p, nil); end.problems != 0 {
			c.badEnd = 1
		}
	}
	e.memo[s] = c
	return c
}

// trace is one failing interleaving from s, one that fails at its end if
// any does: its steps, and why it fails, from the first step that fails
// a check, and at its end.
func (e *winExplorer) trace(s winState) (steps, why []string) {
	atEnd := e.count(s).badEnd > 0
	for {
		ms := s.moves(&e.p, nil)
		if len(ms) == 0 {
			var end []string
			s.problems = 0
			if s.check(&e.p, &end); len(end) > 0 {
				why = append(why, "at the end: "+strings.Join(end, "; "))
			}
			return steps, why
		}
		for _, mv := range ms {
			s2 := s
			s2.apply(&e.p, mv, nil)
			if c := e.count(s2); c.bad == 0 || atEnd && c.badEnd == 0 {
				continue
			}
			steps = append(steps, s.apply(&e.p, mv, &why).String())
			break
		}
	}
}

func TestRemoteWindowModel(t *testing.T) {
	o, d := winOpener, winDeleter
	scenarios := []struct {
		name         string
		hdata, tries uint8 // the holder's data objects (0: W+1), a taker's listings again (0: 3)
		takers       []uint8
	}{
		{"open", 0, 0, []uint8{o}},
		{"delete", 0, 0, []uint8{d}},
		{"open+delete", 0, 0, []uint8{o, d}},
		{"open+open", 0, 0, []uint8{o, o}},
		{"open+open+delete", 2, 1, []uint8{o, o, d}}, // smaller, to be quick
	}
	// mustFail is whether a variant fails in a scenario, after some step
	// and at the end of some interleaving. (a) needs an open: a Delete
	// carries no state, and the holder acknowledges nothing after its
	// marker, so a Delete alone needs no voids before its marker. With
	// foreign-void-skip and a Delete alone, a reader that comes before
	// the Delete's marker applies past the Delete's void; at the end the
	// session is deleted. The trailing fills need a second taker, and
	// trail-void-skip needs W = 3 and the holder's full window (a stale
	// data object two past the open's marker, the number between absent);
	// with a Delete the open's loss lasts only until the delete marker.
	mustFail := func(variant string, W int, full bool, takers []uint8) (step, end bool) {
		open := slices.Contains(takers, winOpener)
		two := len(takers) > 1
		switch variant {
		case "a-no-gap-fills":
			return open, open
		case "b-out-of-order-ack":
			return true, true
		case "foreign-void-skip":
			return true, open
		case "trail-void-skip":
			step = W >= 3 && full && two
			return step, step && !slices.Contains(takers, winDeleter)
		case "first-trail-ignore":
			return two, two
		}
		return false, false
	}
	for _, W := range []int{2, 3} {
		variants := []struct {
			name string
			p    winProtocol
		}{
			{"correct", winProtocol{W: W}},
			{"a-no-gap-fills", winProtocol{W: W, skipGapFills: true}},
			{"b-out-of-order-ack", winProtocol{W: W, ackOutOfOrder: true}},
			{"foreign-void-skip", winProtocol{W: W, foreignVoidSkip: true}},
			{"trail-void-skip", winProtocol{W: W, trailVoidSkip: true}},
			{"first-trail-ignore", winProtocol{W: W, trailIgnore: true}},
		}
		for _, sc := range scenarios {
			for _, v := range variants {
				t.Run(fmt.Sprintf("W%d/%s/%s", W, sc.name, v.name), func(t *testing.T) {
					start := time.Now()
					e := &winExplorer{p: v.p, memo: map[winState]winCount{}}
					s := winStart(cmp.Or(sc.hdata, uint8(W+1)), cmp.Or(sc.tries, 3), sc.takers...)
					c := e.count(s)
					require.Greater(t, c.runs, uint64(1000), "precondition: the actors interleave")
					t.Logf("%d interleavings, %d failing after some step, %d at their end; %d states, %v",
						c.runs, c.bad, c.badEnd, len(e.memo), time.Since(start).Round(time.Millisecond))
					if c.bad > 0 {
						steps, why := e.trace(s)
						t.Logf("failing: %s: %s", strings.Join(steps, "; "), strings.Join(why, "; "))
					}
					if v.name == "correct" {
						// The interleavings reach the protocol's branches.
						reach := []uint8{winFilled, winFillTaken, winLandTaken, winTrailTakenData}
						if len(sc.takers) > 1 {
							reach = append(reach, winMarkTaken, winTrailFenced, winReleaseTaken)
						}
						if len(sc.takers) > 1 && W >= 3 && sc.hdata == 0 {
							reach = append(reach, winTrailFencedVoid)
						}
						for _, what := range reach {
							require.Positive(t, e.seen[what], "precondition: some step %s", winSays[what])
						}
						assert.Zero(t, c.bad, "interleavings fail")
					}
					step, end := mustFail(v.name, W, sc.hdata == 0, sc.takers)
					if step {
						assert.NotZero(t, c.bad, "no interleaving fails")
					}
					if end {
						assert.NotZero(t, c.badEnd, "no interleaving fails at its end")
					}
				})
			}
		}
	}
}
