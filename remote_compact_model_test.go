package sessionstore

import (
	"fmt"
	"hash/maphash"
	"math/bits"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A model of a session's log on object storage with marker compaction
// (remote.go, "Numbers freed by compaction"; internal/seam's compact.go),
// checked over every interleaving of its actors' steps. It is the model
// of remote_window_model_test.go (its log of numbered objects, its reader
// rule, rule 1, and its trailing fills, rule 2, with W Creates in flight)
// with log objects deleted: a deleted number is free again, and a Create
// of it succeeds below the newest object. Each step is one object store
// call, atomic; each deletion of a compaction is a step of its own, in
// any order among its deletions and in any interleaving with the other
// actors; leases and clocks are left out, the worst case: any Store may
// take the session, and any Store that took it may compact, at any
// moment (the real code compacts only once CompactEvery numbers lie below
// the marker it took the session from; the model drops the threshold and
// the state's Compacted, which only spare deletions).
//
// The protocol, on top of the window model's:
//
//   - Keep ranges (seam.KeepRange). A taker whose listing did not end
//     with a release marker records in its marker's state the keep range
//     [k-W, k+W-1], k its marker's number. Its state carries the keep
//     ranges of the newest marker of its listing, and a release marker
//     carries its holder's state, so every later marker carries every
//     keep range. A clean takeover (after a release) records none.
//   - The check (seam.LogWriter.CheckNewestLocked). After its marker at k
//     and its trailing fills (k+1 .. k+W-1 with rule 2's collisions, or
//     none after a release), a taker lists the log: a newest number past
//     its last fill means its marker landed in a number freed below a
//     newer marker; it acknowledges nothing, writes nothing more and
//     lists again. Only once the check passes does an open append or
//     compact.
//   - A Delete (markRemoteDeleted, copyDeleteMarker) fills the free
//     numbers before its marker with voids as an open does, creates its
//     delete marker at k, then, unless its listing ended with a release
//     marker, copies of it at k+1 .. k+W-1: a copy whose number is taken
//     by data (a holder's Create in flight) is skipped, one taken by a
//     marker or a void means the log moved, and the Delete lists again;
//     then the same check. A Delete that passes it has deleted the
//     session; one that lists again removed nothing.
//   - Compaction (seam.LogWriter.Compact). An open whose check passed
//     lists the log, at any later step (it runs in the background), and
//     deletes every object it listed at a number from 2 to below M_prev,
//     the newest marker of the listing it took the session from, that
//     its state does not keep: neither a data object the state names nor
//     a number in one of its keep ranges. A deletion is ObjectStore.Delete
//     of the number's key: it deletes whatever lies there when it runs,
//     also an object created after the compaction's listing. A holder's
//     compaction goes on after it was taken over or fenced; its release
//     waits for it (remoteFiles.release). Number 1, the holder's marker
//     where the model starts (the create marker in a real log), is never
//     deleted.
//
// The actors: the holder H (lease 1), past its open marker at 1, appends
// hdata data objects with its window of W in flight, as in the window
// model, then releases or not (scenario "h<n>": it releases; "z<n>": it
// does not, a zombie once taken over; "r": H released already, with no
// data, its release marker at 2); takers with their own leases, opens T,
// U, V, X (appending 0 or 1 data objects, then releasing) and a Delete D,
// in the order the scenario's name gives them ("o<n>", "d"). A taker
// lists, fills, creates its marker, fills after it (or copies it), checks
// it, each a step; a number found taken or a failed check sends it to
// list again once (a second time it gives up: a failed open, or a Store
// that died; what it created stays). Any actor may stall at any step for
// as long as the others take: a taker between its listing and its
// marker's Create, a zombie before issuing or landing its next Create,
// a compaction between its listing and a deletion.
//
// Checked after every step (a reader may come at any moment, and any
// actor may stop there) and at the end of every interleaving, the window
// model's checks restated for a log whose numbers no longer follow time,
// and a fifth:
//
//  1. no acknowledged loss: every acknowledged data object is in the
//     reader's view, unless the newest marker is a delete marker, and
//     then none was acknowledged at a number after it, and none at all
//     once a Delete passed its check;
//  2. no double holders: no lease acknowledges a data object while a
//     marker of another lease lies above its own marker (the window
//     model counts markers created after a lease's marker and below its
//     acknowledged data, whenever created; here a stale taker's marker
//     may land in a freed number below a holder's acknowledged data
//     after the acknowledgement, which is no takeover, so the check is
//     made at the acknowledgement; without deletions the two are the
//     same);
//  3. the reader applies no data object that was not acknowledged and
//     whose predecessor in its lease's stretch never landed;
//  4. a deleted session stays deleted: once a Delete passed its check,
//     or once the reader found the session deleted, the reader finds it
//     deleted (a stale delete marker below a newer marker, whose Delete
//     then fails its check, deletes nothing, as the real code intends);
//  5. compaction never deletes a needed object: every data object the
//     reader's view holds is in the log.
//
// The protocol passes every check over every interleaving of the sizes
// of cmSizes (the interleavings reach what it guards against: stale
// markers and Delete markers landing in freed numbers and failing their
// check, Deletes' copies meeting markers, zombies fenced by voids and
// markers); see the end of this comment for the counts. In none of them
// does a data object ever land in a freed number: the keep ranges hold
// every number a zombie can still Create.
//
// The variants, each failing run the shortest the search finds ("k lands
// in a freed number": a Create that succeeded below the newest marker):
//
//   - (i) i-no-keep, no keep ranges (W = 2; W = 3 alike): H issues data
//     at 2 and 3, 3 lands; T lists (newest 3), fills a void at 2, where
//     H's Create is in flight, creates its marker at 4 and stalls before
//     its fill; U lists (newest 4), creates its marker at 5, fills 6,
//     passes its check, and compacts below 4: it deletes T's void at 2
//     (and H's 3, not named: after the void). H's Create at 2 lands in
//     the freed number and H acknowledges data 0 at 2 (and then 3): the
//     reader, from U's marker at 5, whose state stops before 2, lacks
//     them (check 1), and H acknowledged under U's marker (check 2).
//     T's keep range [2, 5] keeps 2 and 3.
//   - (ii) ii-no-open-check, no check for opens (W = 2; it needs four
//     opens after a release, the shortest way to free two adjacent
//     numbers): T and U list (newest 2, H's release); U takes the session
//     at 3 and releases at 4; V lists (newest 4), takes it at 5 and
//     compacts below 4: it deletes H's release at 2 and U's marker at 3.
//     T's marker lands in the freed 3 and, unchecked, T issues data at
//     4; V releases at 6; X takes the session at 7 and compacts below 6,
//     deleting U's release at 4; T's data lands in the freed 4 and T
//     acknowledges it: the reader, from X's marker at 7, lacks it (check
//     1), and T acknowledged under V's and X's markers (check 2).
//   - (iii) iii-no-delete-check, no check for Deletes (W = 2): T and D
//     list (newest 2, H's release); T takes the session at 3 and releases
//     at 4; U takes it at 5 and compacts below 4, deleting T's marker at
//     3; D's delete marker lands in the freed 3 and, unchecked, D has
//     deleted the session (and would go on to remove its objects), while
//     the reader, from U's marker at 5, finds it (check 4).
//   - (iv) iv-below-own, compaction below the compactor's own marker
//     instead of below M_prev: no interleaving fails, at any size of
//     cmSizes. Between M_prev and the compactor's marker k lie M_prev's
//     trailing fills (in M_prev's own keep range), its holder's data up
//     to where the reader stopped (named), and from there on (the
//     holder's prefix ended at p, and p+1 >= k-W) numbers in the
//     compactor's own keep range (after a release, nothing lies
//     between); what the variant frees more is the marker M_prev itself,
//     when no keep range holds it, and a stale taker's marker landing
//     there fails its check, the compactor's marker being above it. What deleting below M_prev alone keeps is
//     for readers whose listing predates the compactor's marker (they
//     start from M_prev; remote.go has them read the log again when an
//     object is gone), which the model's reader, one instant, cannot be.
//   - (v) v-delete-named, compaction ignores the data objects its state
//     names (W = 2), a check of check 5: T takes the session at 2, fills
//     3, appends data 2 at 4, releases at 5; U takes it at 6 and compacts
//     below 5, deleting data 2 at 4, which its state names (check 5).
//   - (vi) vi-keep-upper, a keep range of [k, k+W-1] only (W = 3): the
//     trace of (i), with W = 3: T's range [4, 6] does not hold T's void
//     at 2 (checks 1 and 2).
//   - (vii) vii-keep-lower, a keep range of [k-W, k] only: no
//     interleaving fails, at any size of cmSizes. A zombie acknowledges
//     a data object only once every number of its stretch up to it
//     landed as its own, so of its numbers only p+1, the first after its
//     stored prefix, matters, and p+1 lies in [k-W, k] (k-W <= p+1, and
//     k itself is the taker's marker, never the zombie's): the zombie's
//     late Creates at k+1 .. k+W-1, which then land in freed numbers,
//     are never acknowledged, and no reader reads there (below the newest
//     marker); a stale taker's marker landing there fails its check. The
//     upper half of the range costs W-1 numbers per takeover of a holder
//     that did not release, and keeps those late Creates from landing at
//     all (with it, no data object lands in a freed number).
//   - (viii) viii-old-copies, a Delete's copy skipping every taken
//     number, as before compaction (W = 4): H appends data at 2; D lists
//     (newest 2: not a release, so D will copy its marker); H releases at
//     3; T takes the session at 4 and releases at 5; U takes it at 6 and
//     compacts below 5, deleting H's release at 3; D's marker lands in
//     the freed 3, its copies find T's marker at 4, T's release at 5 and
//     U's marker at 6 and skip them, and its check finds nothing past
//     its last copy, 6: D has deleted the session, while the reader finds
//     U's marker (check 4). A copy meeting a marker or a void must send
//     the Delete to list again, as copyDeleteMarker does. With W <= 3 no
//     interleaving of cmSizes fails, nor can one: the compactor C that
//     freed D's number k took the session from a marker above k, at a
//     number above that, and passed its check after its fills, so for
//     D's check to pass C's marker and its fills lie within k+W-1: C
//     took the session at k+2 with no fills, after a release at k+1; k,
//     held by no keep range and named by no state, is then the marker of
//     a clean takeover that wrote nothing, whose listing ended with a
//     release at k-1, the same that ended D's listing: D made no copies,
//     and its check finds C's marker past k.
//
// Interleavings are counted over a memo of states, as in the window
// model; a state is keyed by a 128-bit hash of it (maphash, two seeds),
// whose collisions are negligible (about n^2/2^129 for n states), and an
// actor's fields that no later step reads are cleared (tidy), so that
// states differing only there are one. The counts saturate at 2^64-1.
//
// Sizes (W, scenario: states, time on one core of the machine it was
// written on; interleavings saturate past about 1.8e19), by default:
//
//	W2 h2-o1-o0-o0      1,929,092 states   3.7 s
//	W2 h2-o0-o0-d         225,888 states   0.3 s
//	W2 r-o1-o0-o0          96,731 states   0.1 s
//	W3 z3-o1-o0            66,692 states   0.1 s
//	W3 h3-o0-o0-d       1,998,538 states   4.1 s
//	W3 h2-o0-o0-o0      2,352,665 states   3.6 s
//	W4 h1-d-o0-o0         237,256 states   0.3 s
//
// both tests with the variants in about 12 s on 2 cores (88 s under
// -race); with SESSIONSTORE_COMPACT_MODEL=all (.ci/run's long step)
// also these (the variants iv and vii at each too with huge):
//
//	W2 r-o1-o0-o0-o0   26,184,524 states   59 s
//	W3 h3-o0-o0-o0      9,274,685 states   30 s
//	W3 z3-o1-o0-o0     13,493,377 states   36 s
//	W4 h3-o0-o0-d       3,396,743 states   12 s
//
// about 2 minutes in all on 2 cores; with SESSIONSTORE_COMPACT_MODEL=huge
// also this one (by hand):
//
//	W2 z3-o0-o0-o0-d   72,892,785 states  4 min 27 s (several GB)

// cmMaxSeq is the model's last number: masks of numbers are uint32, bit j
// for number j.
const cmMaxSeq = 27

// The model's sizes: actors (the holder and up to five takers; actor i
// has lease i+1), leases (0 unused), data objects.
const (
	cmActors = 6
	cmLeases = cmActors + 1
	cmIDs    = 12
)

// cmObj is one object of the log; its kinds are winAbsent .. winDelete.
type cmObj struct {
	kind  uint8
	lease uint8
	id    uint8  // data: its id
	fills uint8  // open marker: Fills (W-1, or 0 after a release)
	st    uint16 // marker: its state, an index in the explorer's table of states
}

// cmMarkState is a marker's state: the data objects it names, and its
// keep ranges, as the mask of the numbers they hold.
type cmMarkState struct {
	view uint16
	keep uint32
}

// cmCheck is the phase after winDone .. winAppend of a taker that
// created its marker (and its fills or copies): it lists to check it.
const cmCheck = winAppend + 1

// Phases of an open's compaction.
const (
	cmNoCompaction uint8 = iota
	cmToList             // its check passed: it lists the log, then deletes
	cmDeleting           // deleting the numbers in del
)

// cmActor is what changes of one Store (cmPart is what does not). Its
// fields, and cmState's, leave no padding: the memo hashes a state as
// plain memory.
type cmActor struct {
	gaps uint32 // numbers of (M, N] absent from its listing, still to fill
	del  uint32 // numbers its compaction still deletes
	st   uint16 // its marker's state

	phase   uint8
	tries   uint8 // listings again left
	snapN   uint8 // the newest number of its listing
	mPrev   uint8 // the newest marker of its listing: M_prev
	mark    uint8 // its marker's number
	next    uint8 // its next trailing void (a Delete's: copy)
	noTrail bool  // its listing's newest object was a release
	cphase  uint8 // its compaction's phase

	// Appending: base is the number before its first data object, acked
	// A, issued I; inflight its data issued and not landed, landed its
	// data landed, bit i for number base+1+i.
	base, acked, issued, inflight, landed uint8
	fenced                                bool
}

// cmPart is what does not change of a Store: its name, role, data
// objects (their ids from firstID), and whether it releases after them.
type cmPart struct {
	name           byte
	role           uint8
	ndata, firstID uint8
	release        bool
}

// cmProtocol is the protocol, or one of its variants.
type cmProtocol struct {
	W             int
	noKeep        bool // (i): a taker records no keep range
	noOpenCheck   bool // (ii): an open does not check its marker
	noDeleteCheck bool // (iii): a Delete does not list after its copies
	belowOwn      bool // (iv): compaction deletes below the compactor's own marker, not below M_prev
	deleteNamed   bool // (v): compaction deletes the data objects the state names too
	keepUpper     bool // (vi): the keep range is [k, k+W-1] only
	keepLower     bool // (vii): the keep range is [k-W, k] only
	oldCopies     bool // (viii): a Delete's copy skips every taken number, as before compaction
}

// cmState is the log and what happened to it, the key of the memo (by
// its hash).
type cmState struct {
	actors [cmActors]cmActor
	log    [cmMaxSeq + 1]cmObj
	acked  uint16          // data objects acknowledged to an append
	pos    [cmIDs]uint8    // where each data object landed (also once deleted), 0 if it did not
	own    [cmLeases]uint8 // per lease: the number of its newest open (or create) marker
	// A lease that acknowledged a data object while another lease's
	// marker lay above its own (check 2): the lease, the data object's
	// number and the marker's; 0 none.
	dblLease, dblAt, dblMark uint8
	delDone                  bool // a Delete passed its check: the session is deleted
	seenDel                  bool // the reader found the session deleted, at some step
	lateAck                  bool // a data object was acknowledged after delDone
	// problems are the checks that failed: 1 .. 5 as bits 1, 2, 4, 8, 16.
	problems uint8
}

// What a step did; cmSays names them.
const (
	cmIssued uint8 = iota
	cmLanded
	cmLandTaken
	cmReleased
	cmReleaseTaken
	cmListed
	cmListedDeleted
	cmFilled
	cmFillTaken
	cmFillGaveUp
	cmMarked
	cmMarkTaken
	cmMarkGaveUp
	cmTrailed
	cmTrailTakenData
	cmTrailFenced
	cmTrailFencedVoid
	cmCopied
	cmCopyTakenData
	cmCopyStale
	cmCopyStaleGaveUp
	cmChecked
	cmCheckFailed
	cmCheckGaveUp
	cmDeleteConfirmed
	cmCompactListed
	cmDeleted
	cmDeletedNothing
	cmSaid
)

var cmSays = [cmSaid]string{
	cmIssued:          "issues data at",
	cmLanded:          "lands data at",
	cmLandTaken:       "lands data: taken, fenced, at",
	cmReleased:        "releases at",
	cmReleaseTaken:    "releases: taken, at",
	cmListed:          "lists: newest",
	cmListedDeleted:   "lists: deleted, newest",
	cmFilled:          "fills a void at",
	cmFillTaken:       "fills a void: taken, lists again, at",
	cmFillGaveUp:      "fills a void: taken, gives up, at",
	cmMarked:          "creates its marker at",
	cmMarkTaken:       "creates its marker: taken, lists again, at",
	cmMarkGaveUp:      "creates its marker: taken, gives up, at",
	cmTrailed:         "creates a trailing void at",
	cmTrailTakenData:  "creates a trailing void: taken by data, skipped, at",
	cmTrailFenced:     "creates a trailing void: taken by a marker, fenced, at",
	cmTrailFencedVoid: "creates a trailing void: taken by a void, fenced, at",
	cmCopied:          "creates a copy of its marker at",
	cmCopyTakenData:   "creates a copy of its marker: taken, skipped, at",
	cmCopyStale:       "creates a copy of its marker: taken by a marker or void, lists again, at",
	cmCopyStaleGaveUp: "creates a copy of its marker: taken by a marker or void, gives up, at",
	cmChecked:         "checks its marker: passes, newest",
	cmCheckFailed:     "checks its marker: fails, lists again, newest",
	cmCheckGaveUp:     "checks its marker: fails, gives up, newest",
	cmDeleteConfirmed: "checks its marker: passes, the session is deleted, newest",
	cmCompactListed:   "lists to compact below",
	cmDeleted:         "deletes",
	cmDeletedNothing:  "deletes nothing (absent) at",
}

var cmKinds = [...]string{winAbsent: "nothing", winData: "data", winVoid: "void", winCreate: "create marker",
	winOpen: "open marker", winRelease: "release marker", winDelete: "delete marker"}

// cmEvent is one step of an interleaving, for a trace.
type cmEvent struct {
	name  byte
	what  uint8
	seq   uint8
	below bool   // a Create that succeeded below the newest marker: at a number compaction freed
	obj   cmObj  // what a deletion deleted
	set   uint32 // the numbers a compaction's listing is to delete
	names *[cmLeases]byte
}

func (e cmEvent) String() string {
	switch e.what {
	case cmDeleted:
		o := e.obj
		if o.kind == winData {
			return fmt.Sprintf("%c deletes %c's data %d at %d", e.name, e.names[o.lease], o.id, e.seq)
		}
		return fmt.Sprintf("%c deletes %c's %s at %d", e.name, e.names[o.lease], cmKinds[o.kind], e.seq)
	case cmCompactListed:
		var ns []string
		for m := e.set; m != 0; m &= m - 1 {
			ns = append(ns, fmt.Sprint(bits.TrailingZeros32(m)))
		}
		return fmt.Sprintf("%c lists to compact below %d: to delete {%s}", e.name, e.seq, strings.Join(ns, " "))
	}
	s := fmt.Sprintf("%c %s %d", e.name, cmSays[e.what], e.seq)
	if e.below {
		s += " (below the newest marker: a freed number)"
	}
	return s
}

func (s *cmState) newest() uint8 {
	for j := uint8(cmMaxSeq); j > 0; j-- {
		if s.log[j].kind != winAbsent {
			return j
		}
	}
	return 0
}

func (s *cmState) newestMarker() uint8 {
	for j := uint8(cmMaxSeq); j > 0; j-- {
		if s.log[j].kind >= winCreate {
			return j
		}
	}
	return 0
}

// create is ObjectStore.Create of number seq: false if it is taken.
func (s *cmState) create(seq uint8, o cmObj) bool {
	if seq > cmMaxSeq {
		panic("the model's log is too short")
	}
	if s.log[seq].kind != winAbsent {
		return false
	}
	s.log[seq] = o
	if o.kind == winOpen || o.kind == winCreate {
		s.own[o.lease] = seq
	}
	return true
}

// cmKey is a state's memo key: its hash, 128 bits.
type cmKey [2]uint64

var cmSeeds = [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}

func (s *cmState) key() cmKey {
	return cmKey{maphash.Comparable(cmSeeds[0], *s), maphash.Comparable(cmSeeds[1], *s)}
}

// cmExplorer explores every interleaving from a state.
type cmExplorer struct {
	p      cmProtocol
	cast   [cmActors]cmPart
	names  [cmLeases]byte
	states []cmMarkState
	index  map[cmMarkState]uint16
	memo   map[cmKey]cmCount
	seen   [cmSaid]int // the steps explored, from distinct states, by what they did
	below  [cmSaid]int // the same, of Creates that succeeded below the newest marker
}

func (e *cmExplorer) init() {
	e.index = map[cmMarkState]uint16{}
	e.memo = map[cmKey]cmCount{}
	e.intern(cmMarkState{})
	for i, c := range e.cast {
		e.names[i+1] = c.name
	}
}

// intern is the index of a marker's state in the table.
func (e *cmExplorer) intern(ms cmMarkState) uint16 {
	if i, ok := e.index[ms]; ok {
		return i
	}
	i := uint16(len(e.states))
	if int(i) != len(e.states) {
		panic("too many states")
	}
	e.states = append(e.states, ms)
	e.index[ms] = i
	return i
}

// read is the reader rule on the log: the delete marker's number if the
// session is deleted, else the data objects the reader applies.
// gapsAreVoids reads an absent number up to the newest as a void: a
// taker's listing with the voids it is to create.
func (e *cmExplorer) read(s *cmState, gapsAreVoids bool) (del uint8, view uint16) {
	n, m := s.newest(), s.newestMarker()
	mo := s.log[m]
	switch mo.kind {
	case winDelete:
		return m, 0
	case winRelease:
		return 0, e.states[mo.st].view
	}
	view = e.states[mo.st].view
	for j := m + 1; j <= n; j++ {
		switch o := s.log[j]; {
		case o.kind == winAbsent && !gapsAreVoids:
			return 0, view
		case o.kind == winAbsent, o.kind == winVoid && o.lease != mo.lease:
			return 0, view
		case o.kind == winVoid:
		case o.lease != mo.lease:
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
func (e *cmExplorer) check(s *cmState, why *[]string) {
	fail := func(bit uint8, format string, args ...any) {
		if why != nil && s.problems&bit == 0 {
			*why = append(*why, fmt.Sprintf(format, args...))
		}
		s.problems |= bit
	}
	del, view := e.read(s, false)
	if m := s.newestMarker(); del != 0 {
		s.seenDel = true
	} else if s.delDone || s.seenDel {
		before := "a Delete passed its check"
		if !s.delDone {
			before = "the reader found the session deleted"
		}
		fail(8, "check 4: %s, and the reader finds it (the newest marker is %c's %s at %d)", before, e.names[s.log[m].lease], cmKinds[s.log[m].kind], m)
	}
	if s.lateAck {
		fail(1, "check 1: a data object acknowledged after a Delete passed its check")
	}
	for ids := s.acked; ids != 0; ids &= ids - 1 {
		id := uint8(bits.TrailingZeros16(ids))
		at := s.pos[id]
		if del != 0 && at > del {
			fail(1, "check 1: data %d acknowledged at %d, after the delete marker at %d", id, at, del)
		}
		if del == 0 && view&(1<<id) == 0 {
			fail(1, "check 1: data %d acknowledged at %d, not in the reader's view (the newest marker is at %d)", id, at, s.newestMarker())
		}
	}
	if s.dblLease != 0 {
		fail(2, "check 2: %c acknowledged data at %d while %c's %s at %d lay above its own marker at %d",
			e.names[s.dblLease], s.dblAt, e.names[s.log[s.dblMark].lease], cmKinds[s.log[s.dblMark].kind], s.dblMark, s.own[s.dblLease])
	}
	for j := uint8(1); j <= cmMaxSeq; j++ {
		o := s.log[j]
		if o.kind == winData && view&(1<<o.id) != 0 && s.acked&(1<<o.id) == 0 && o.id > e.cast[o.lease-1].firstID && s.pos[o.id-1] == 0 {
			fail(4, "check 3: the reader applies data %d at %d, not acknowledged, its predecessor never landed", o.id, j)
		}
	}
	for ids := view; ids != 0; ids &= ids - 1 {
		id := uint8(bits.TrailingZeros16(ids))
		if o := s.log[s.pos[id]]; o.kind != winData || o.id != id {
			fail(16, "check 5: the reader's view holds data %d, at %d, which is gone", id, s.pos[id])
		}
	}
}

// cmMove is one step an actor can take.
type cmMove struct {
	actor int
	op    uint8
	seq   uint8
}

const (
	cmStep uint8 = iota
	cmIssue
	cmLand
	cmRel
	cmCompactList
	cmDelete
)

func (e *cmExplorer) moves(s *cmState, into []cmMove) []cmMove {
	for i := range s.actors {
		a, c := &s.actors[i], &e.cast[i]
		switch a.cphase {
		case cmToList:
			into = append(into, cmMove{i, cmCompactList, 0})
		case cmDeleting:
			for m := a.del; m != 0; m &= m - 1 {
				into = append(into, cmMove{i, cmDelete, uint8(bits.TrailingZeros32(m))})
			}
		}
		switch a.phase {
		case winDone:
		case winAppend:
			if !a.fenced && a.issued < a.base+c.ndata && int(a.issued) < int(a.acked)+e.p.W {
				into = append(into, cmMove{i, cmIssue, a.issued + 1})
			}
			for m := a.inflight; m != 0; m &= m - 1 {
				into = append(into, cmMove{i, cmLand, a.base + 1 + uint8(bits.TrailingZeros8(m))})
			}
			// The release waits for the compaction (remoteFiles.release).
			if c.release && !a.fenced && a.inflight == 0 && a.acked == a.base+c.ndata && a.cphase == cmNoCompaction {
				into = append(into, cmMove{i, cmRel, a.acked + 1})
			}
		default:
			into = append(into, cmMove{i, cmStep, 0})
		}
	}
	return into
}

func (s *cmState) ack(c *cmPart, a *cmActor, lease, k uint8) {
	s.acked |= 1 << (c.firstID + k - a.base - 1)
	if s.delDone {
		s.lateAck = true
	}
	for j := s.own[lease] + 1; j <= cmMaxSeq && s.dblLease == 0; j++ {
		if o := s.log[j]; o.kind >= winCreate && o.lease != lease {
			s.dblLease, s.dblAt, s.dblMark = lease, k, j
		}
	}
}

// apply takes one step, then runs the checks.
func (e *cmExplorer) apply(s *cmState, mv cmMove, why *[]string) cmEvent {
	a, c, lease := &s.actors[mv.actor], &e.cast[mv.actor], uint8(mv.actor+1)
	k := mv.seq
	ev := cmEvent{name: c.name, seq: k, names: &e.names}
	switch mv.op {
	case cmIssue:
		a.issued = k
		a.inflight |= 1 << (k - a.base - 1)
		ev.what = cmIssued
	case cmLand:
		a.inflight &^= 1 << (k - a.base - 1)
		id := c.firstID + k - a.base - 1
		ev.what, ev.below = cmLanded, k < s.newestMarker()
		if !s.create(k, cmObj{kind: winData, lease: lease, id: id}) {
			a.fenced = true
			ev.what, ev.below = cmLandTaken, false
			break
		}
		s.pos[id] = k
		a.landed |= 1 << (k - a.base - 1)
		for a.landed&(1<<(a.acked-a.base)) != 0 {
			a.acked++
			s.ack(c, a, lease, a.acked)
		}
	case cmRel:
		ms := e.states[a.st]
		ms.view |= (1<<c.ndata - 1) << c.firstID
		ev.what, ev.below = cmReleased, k < s.newestMarker()
		if !s.create(k, cmObj{kind: winRelease, lease: lease, st: e.intern(ms)}) {
			ev.what, ev.below = cmReleaseTaken, false
		}
		a.phase = winDone
	case cmCompactList:
		// Compact's listing: the objects from 2 below M_prev (belowOwn:
		// below its own marker) that its state does not keep.
		below := a.mPrev
		if e.p.belowOwn {
			below = a.mark
		}
		ms := e.states[a.st]
		named := uint32(0)
		if !e.p.deleteNamed {
			for ids := ms.view; ids != 0; ids &= ids - 1 {
				named |= 1 << s.pos[bits.TrailingZeros16(ids)]
			}
		}
		for j := uint8(2); j < below; j++ {
			if s.log[j].kind != winAbsent && ms.keep&(1<<j) == 0 && named&(1<<j) == 0 {
				a.del |= 1 << j
			}
		}
		a.cphase = cmDeleting
		if a.del == 0 {
			a.cphase = cmNoCompaction
		}
		ev.what, ev.seq, ev.set = cmCompactListed, below, a.del
	case cmDelete:
		// ObjectStore.Delete of the number's key: whatever is there now.
		a.del &^= 1 << k
		if a.del == 0 {
			a.cphase = cmNoCompaction
		}
		ev.what, ev.obj = cmDeleted, s.log[k]
		if s.log[k].kind == winAbsent {
			ev.what = cmDeletedNothing
		}
		s.log[k] = cmObj{}
	default:
		ev = e.step(s, mv.actor)
	}
	s.tidy()
	e.check(s, why)
	return ev
}

// tidy forgets what no later step of an actor reads, so that states
// differing only there are one state in the memo.
func (s *cmState) tidy() {
	for i := range s.actors {
		a := &s.actors[i]
		if a.phase == winAppend && a.fenced && a.inflight == 0 {
			a.phase = winDone
		}
		switch a.phase {
		case winDone:
			t := cmActor{cphase: a.cphase, del: a.del}
			if a.cphase == cmToList {
				t.mPrev, t.mark, t.st = a.mPrev, a.mark, a.st
			}
			*a = t
		case winAppend:
			a.gaps, a.tries, a.snapN, a.next, a.noTrail = 0, 0, 0, 0, false
			if a.cphase != cmToList {
				a.mPrev, a.mark = 0, 0
			}
		}
	}
}

// keepRange is the mask of a non-clean taker's keep range around its
// marker at k.
func (e *cmExplorer) keepRange(k uint8) uint32 {
	W := int(e.p.W)
	from, to := max(int(k)-W, 1), int(k)+W-1
	switch {
	case e.p.noKeep:
		return 0
	case e.p.keepUpper:
		from = int(k)
	case e.p.keepLower:
		to = int(k)
	}
	var m uint32
	for j := from; j <= min(to, cmMaxSeq); j++ {
		m |= 1 << j
	}
	return m
}

// step is a taker's next call.
func (e *cmExplorer) step(s *cmState, i int) cmEvent {
	a, c, lease := &s.actors[i], &e.cast[i], uint8(i+1)
	ev := cmEvent{name: c.name, names: &e.names}
	p := &e.p
	switch a.phase {
	case winList:
		n, m := s.newest(), s.newestMarker()
		ev.what, ev.seq = cmListed, n
		if s.log[m].kind == winDelete || m == 0 {
			ev.what = cmListedDeleted
			a.phase = winDone
			break
		}
		a.snapN, a.mPrev, a.gaps = n, m, 0
		for j := m + 1; j <= n; j++ {
			if s.log[j].kind == winAbsent {
				a.gaps |= 1 << j
			}
		}
		_, view := e.read(s, true)
		a.noTrail = s.log[n].kind == winRelease
		ms := cmMarkState{view: view, keep: e.states[s.log[m].st].keep}
		if !a.noTrail {
			ms.keep |= e.keepRange(n + 1)
		}
		a.st = e.intern(ms)
		a.phase = winMark
		if a.gaps != 0 {
			a.phase = winGap
		}
	case winGap:
		j := uint8(bits.TrailingZeros32(a.gaps))
		ev.what, ev.seq, ev.below = cmFilled, j, j < s.newestMarker()
		if !s.create(j, cmObj{kind: winVoid, lease: lease}) {
			ev.what, ev.below = cmFillTaken, false
			if !a.listAgain() {
				ev.what = cmFillGaveUp
			}
			break
		}
		a.gaps &^= 1 << j
		if a.gaps == 0 {
			a.phase = winMark
		}
	case winMark:
		kind := winOpen
		if c.role == winDeleter {
			kind = winDelete
		}
		var fills uint8
		if kind == winOpen && !a.noTrail {
			fills = uint8(p.W - 1)
		}
		k := a.snapN + 1
		ev.what, ev.seq, ev.below = cmMarked, k, k < s.newestMarker()
		if !s.create(k, cmObj{kind: kind, lease: lease, st: a.st, fills: fills}) {
			ev.what, ev.below = cmMarkTaken, false
			if !a.listAgain() {
				ev.what = cmMarkGaveUp
			}
			break
		}
		a.mark, a.next = k, k+1
		a.phase = winTrail
		if a.noTrail || p.W == 1 {
			a.phase = cmCheck
		}
	case winTrail:
		j := a.next
		ev.seq, ev.below = j, j < s.newestMarker()
		if c.role == winDeleter {
			// Copies of the delete marker (copyDeleteMarker): one taken
			// by data is a holder's Create in flight, skipped; by a
			// marker or a void, the log moved: it lists again.
			ev.what = cmCopied
			if !s.create(j, cmObj{kind: winDelete, lease: lease, st: a.st}) {
				ev.below = false
				if o := s.log[j]; o.kind == winData || p.oldCopies {
					ev.what = cmCopyTakenData
				} else {
					ev.what = cmCopyStale
					if !a.listAgain() {
						ev.what = cmCopyStaleGaveUp
					}
					return ev
				}
			}
		} else {
			// The trailing fills, rule 2.
			ev.what = cmTrailed
			if !s.create(j, cmObj{kind: winVoid, lease: lease}) {
				ev.below = false
				switch o := s.log[j]; {
				case o.kind == winData:
					ev.what = cmTrailTakenData
				case o.kind == winVoid:
					ev.what = cmTrailFencedVoid
					a.phase = winDone
					return ev
				default:
					ev.what = cmTrailFenced
					a.phase = winDone
					return ev
				}
			}
		}
		a.next++
		if int(a.next) > int(a.mark)+p.W-1 {
			a.phase = cmCheck
		}
	case cmCheck:
		// The check (CheckNewestLocked): nothing lies after the last of
		// its marker and fills (or copies), a.next-1.
		n, last := s.newest(), a.next-1
		ev.what, ev.seq = cmChecked, n
		skip := p.noOpenCheck
		if c.role == winDeleter {
			skip = p.noDeleteCheck
		}
		if n > last && !skip {
			ev.what = cmCheckFailed
			if !a.listAgain() {
				ev.what = cmCheckGaveUp
			}
			break
		}
		if c.role == winDeleter {
			ev.what = cmDeleteConfirmed
			s.delDone = true
			a.phase = winDone
			break
		}
		a.phase = winAppend
		a.base, a.acked, a.issued = last, last, last
		a.cphase = cmToList
	}
	return ev
}

// listAgain sends a taker back to its listing, false if it gives up.
func (a *cmActor) listAgain() bool {
	if a.tries == 0 {
		a.phase = winDone
		return false
	}
	a.tries--
	a.phase = winList
	return true
}

// cmTaker is a taker of a scenario: an open with ndata data objects, or
// a Delete.
type cmTaker struct {
	role  uint8
	ndata uint8
}

// cmScenario is where the model starts: the holder H (lease 1) holds the
// session from its open marker at 1 (the session's first marker, which
// compaction never deletes), none of its hdata data objects issued yet;
// it releases after them if hrelease. With released, H has released
// already, with no data: its release marker is at 2, and H does nothing
// more. The takers (opens T, U, V, X, Y in order, a Delete D) have
// leases 2 on, and list again at most tries times.
type cmScenario struct {
	name               string
	hdata              uint8
	hrelease, released bool
	tries              uint8
	takers             []cmTaker
}

func (sc cmScenario) start(p cmProtocol) (*cmExplorer, cmState) {
	var s cmState
	e := &cmExplorer{p: p}
	s.create(1, cmObj{kind: winOpen, lease: 1})
	e.cast[0] = cmPart{name: 'H', role: winHolder, ndata: sc.hdata, release: sc.hrelease}
	s.actors[0] = cmActor{phase: winAppend, base: 1, acked: 1, issued: 1}
	if sc.released {
		e.cast[0] = cmPart{name: 'H', role: winHolder}
		s.actors[0] = cmActor{}
		s.create(2, cmObj{kind: winRelease, lease: 1})
	}
	open, id := "TUVXY", sc.hdata
	for i, tk := range sc.takers {
		c := cmPart{name: 'D', role: tk.role}
		if tk.role == winOpener {
			c.name, open = open[0], open[1:]
			c.ndata, c.firstID, c.release = tk.ndata, id, true
			id += tk.ndata
		}
		e.cast[i+1] = c
		s.actors[i+1] = cmActor{phase: winList, tries: sc.tries}
	}
	if int(id) > cmIDs {
		panic("too many data objects")
	}
	e.init()
	return e, s
}

// cmCount is what follows a state: its interleavings (saturating at
// 2^64-1), how many fail a check after some step, and how many fail one
// at their end.
type cmCount struct{ runs, bad, badEnd uint64 }

// cmSaturated says so of a count that saturated.
func cmSaturated(n uint64) string {
	if n == ^uint64(0) {
		return " (or more: the count saturated)"
	}
	return ""
}

func cmAdd(a, b uint64) uint64 {
	if s, c := bits.Add64(a, b, 0); c == 0 {
		return s
	}
	return ^uint64(0)
}

func (e *cmExplorer) count(s cmState) cmCount {
	key := s.key()
	if c, ok := e.memo[key]; ok {
		return c
	}
	var c cmCount
	ms := e.moves(&s, make([]cmMove, 0, 16))
	for _, mv := range ms {
		s2 := s
		ev := e.apply(&s2, mv, nil)
		e.seen[ev.what]++
		if ev.below {
			e.below[ev.what]++
		}
		sub := e.count(s2)
		c.runs = cmAdd(c.runs, sub.runs)
		c.bad = cmAdd(c.bad, sub.bad)
		c.badEnd = cmAdd(c.badEnd, sub.badEnd)
	}
	if len(ms) == 0 {
		c.runs = 1
		if s.problems != 0 {
			c.bad = 1
		}
		end := s
		end.problems = 0
		if e.check(&end, nil); end.problems != 0 {
			c.badEnd = 1
		}
	}
	e.memo[key] = c
	return c
}

// firstFailure searches the interleavings from s breadth first for a
// step that fails a check, and returns a shortest run to it (its steps,
// why it fails, the checks it fails), or nothing; states is how many
// states it saw.
func (e *cmExplorer) firstFailure(s cmState) (steps, why []string, problems uint8, states int) {
	type back struct {
		parent cmKey
		mv     cmMove
	}
	root := s.key()
	seen := map[cmKey]back{root: {}}
	queue := []cmState{s}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		ck := cur.key()
		for _, mv := range e.moves(&cur, nil) {
			s2 := cur
			e.apply(&s2, mv, nil)
			k2 := s2.key()
			if _, ok := seen[k2]; ok {
				continue
			}
			seen[k2] = back{ck, mv}
			if s2.problems == 0 {
				queue = append(queue, s2)
				continue
			}
			var path []cmMove
			for k := k2; k != root; k = seen[k].parent {
				path = append(path, seen[k].mv)
			}
			for i := len(path) - 1; i >= 0; i-- {
				steps = append(steps, e.apply(&s, path[i], &why).String())
			}
			return steps, why, s.problems, len(seen)
		}
	}
	return nil, nil, 0, len(seen)
}

// cmParse reads a scenario from its name: "z<n>" a holder with n data
// objects that does not release (a zombie once taken over), "h<n>" one
// that releases after them, "r" one released already; then the takers,
// "o<n>" an open with n data objects, "d" a Delete; "t<n>" sets tries
// (1 without).
func cmParse(name string) cmScenario {
	sc := cmScenario{name: name, tries: 1}
	for i, f := range strings.Split(name, "-") {
		n, _ := strconv.Atoi(f[1:])
		switch {
		case i == 0 && f[0] == 'z':
			sc.hdata = uint8(n)
		case i == 0 && f[0] == 'h':
			sc.hdata, sc.hrelease = uint8(n), true
		case i == 0 && f == "r":
			sc.released = true
		case f[0] == 'o':
			sc.takers = append(sc.takers, cmTaker{winOpener, uint8(n)})
		case f == "d":
			sc.takers = append(sc.takers, cmTaker{role: winDeleter})
		case f[0] == 't':
			sc.tries = uint8(n)
		default:
			panic("no such scenario: " + name)
		}
	}
	return sc
}

// cmRun is a scenario at a window.
type cmRun struct {
	W    int
	name string // cmParse's
}

func (r cmRun) String() string { return fmt.Sprintf("W%d/%s", r.W, r.name) }

// cmSizes are the sizes the protocol is checked at: cmSizes[0] by
// default, cmSizes[1] too with SESSIONSTORE_COMPACT_MODEL=all (.ci/run's
// long step), cmSizes[2] too with SESSIONSTORE_COMPACT_MODEL=huge (by
// hand: minutes and gigabytes each).
var cmSizes = [3][]cmRun{{
	{2, "h2-o1-o0-o0"}, // H's window in flight, three opens: numbers freed, stale markers in them
	{2, "h2-o0-o0-d"},  // a Delete: its marker and copies in freed numbers
	{2, "r-o1-o0-o0"},  // clean handoffs only
	{3, "z3-o1-o0"},    // a zombie with its window of 3 in flight
	{3, "h3-o0-o0-d"},  // the same with two opens and a Delete
	{3, "h2-o0-o0-o0"}, // three opens at W 3
	{4, "h1-d-o0-o0"},  // a Delete's copies meeting markers
}, {
	{2, "r-o1-o0-o0-o0"},
	{3, "h3-o0-o0-o0"},
	{3, "z3-o1-o0-o0"},
	{4, "h3-o0-o0-d"},
}, {
	{2, "z3-o0-o0-o0-d"},
}}

// cmLarge reports whether the larger sizes run too; cmHuge, the largest.
func cmLarge() bool { return cmHuge() || os.Getenv("SESSIONSTORE_COMPACT_MODEL") == "all" }
func cmHuge() bool  { return os.Getenv("SESSIONSTORE_COMPACT_MODEL") == "huge" }

func TestCompactModel(t *testing.T) {
	runs := cmSizes[0]
	if raceOn && !cmLarge() {
		// Under the race detector (the README's test command), the sizes
		// of under a second without it; the run without the detector
		// and .ci/run's long step check them all.
		runs = slices.DeleteFunc(slices.Clone(runs), func(r cmRun) bool {
			return strings.HasPrefix(r.name, "h2-o1") || strings.HasPrefix(r.name, "h3") || r.name == "h2-o0-o0-o0"
		})
	}
	if cmLarge() {
		runs = append(runs, cmSizes[1]...)
	}
	if cmHuge() {
		runs = append(runs, cmSizes[2]...)
	}
	for _, r := range runs {
		t.Run(r.String(), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			sc := cmParse(r.name)
			e, s := sc.start(cmProtocol{W: r.W})
			c := e.count(s)
			require.Greater(t, c.runs, uint64(1000), "precondition: the actors interleave")
			t.Logf("%d interleavings%s, %d failing after some step, %d at their end; %d states, %v",
				c.runs, cmSaturated(c.runs), c.bad, c.badEnd, len(e.memo), time.Since(start).Round(time.Millisecond))
			t.Logf("%d deletions, %d checks failed; below the newest marker: %d markers, %d trailing voids, %d copies of a delete marker, %d data objects",
				e.seen[cmDeleted], e.seen[cmCheckFailed]+e.seen[cmCheckGaveUp], e.below[cmMarked], e.below[cmTrailed], e.below[cmCopied], e.below[cmLanded])
			// The interleavings reach what the protocol guards against.
			reach := []uint8{cmMarkTaken, cmCheckFailed}
			if sc.hdata >= 2 {
				reach = append(reach, cmLandTaken, cmFilled, cmTrailTakenData)
			}
			if sc.hrelease || sc.released {
				reach = append(reach, cmDeleted)
			}
			for _, tk := range sc.takers {
				if tk.role == winDeleter {
					reach = append(reach, cmDeleteConfirmed, cmCopied)
				}
			}
			if r.W >= 4 {
				reach = append(reach, cmCopyStale)
			}
			for _, what := range reach {
				require.Positive(t, e.seen[what], "precondition: some step %s", cmSays[what])
			}
			if sc.hrelease || sc.released {
				require.Positive(t, e.below[cmMarked], "precondition: a stale taker's marker lands in a freed number")
			}
			assert.Zero(t, c.bad, "interleavings fail a check")
			assert.Zero(t, c.badEnd, "interleavings fail a check at their end")
		})
	}
}

func TestCompactModelVariants(t *testing.T) {
	type variant struct {
		name string
		p    cmProtocol
		at   cmRun
		// fails are the checks a shortest failing run fails (bits as
		// cmState.problems); 0: no interleaving fails.
		fails uint8
	}
	variants := []variant{
		{"i-no-keep", cmProtocol{noKeep: true}, cmRun{2, "z2-o1-o0"}, 1 | 2},
		{"i-no-keep", cmProtocol{noKeep: true}, cmRun{3, "z3-o1-o0"}, 1 | 2},
		{"ii-no-open-check", cmProtocol{noOpenCheck: true}, cmRun{2, "r-o1-o0-o0-o0"}, 1 | 2},
		{"iii-no-delete-check", cmProtocol{noDeleteCheck: true}, cmRun{2, "r-o0-o0-d"}, 8},
		{"v-delete-named", cmProtocol{deleteNamed: true}, cmRun{2, "z2-o1-o0"}, 16},
		{"vi-keep-upper", cmProtocol{keepUpper: true}, cmRun{3, "z3-o1-o0"}, 1 | 2},
		{"viii-old-copies", cmProtocol{oldCopies: true}, cmRun{4, "h1-d-o0-o0"}, 8},
		{"iv-below-own", cmProtocol{belowOwn: true}, cmRun{2, "h2-o0-o0-o0"}, 0},
		{"iv-below-own", cmProtocol{belowOwn: true}, cmRun{3, "h2-o0-o0-d"}, 0},
		{"vii-keep-lower", cmProtocol{keepLower: true}, cmRun{2, "h2-o0-o0-o0"}, 0},
		{"vii-keep-lower", cmProtocol{keepLower: true}, cmRun{3, "h2-o0-o0-d"}, 0},
		{"viii-old-copies", cmProtocol{oldCopies: true}, cmRun{3, "h2-o0-o0-d"}, 0},
	}
	if cmHuge() {
		for _, at := range cmSizes[1] {
			variants = append(variants,
				variant{"iv-below-own", cmProtocol{belowOwn: true}, at, 0},
				variant{"vii-keep-lower", cmProtocol{keepLower: true}, at, 0})
		}
	}
	for _, v := range variants {
		if raceOn && !cmLarge() && v.fails == 0 && v.at.name == "h2-o0-o0-o0" {
			continue // seconds without the race detector, a minute with it
		}
		t.Run(v.name+"/"+v.at.String(), func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			v.p.W = v.at.W
			e, s := cmParse(v.at.name).start(v.p)
			if v.fails == 0 {
				c := e.count(s)
				require.Greater(t, c.runs, uint64(1000), "precondition: the actors interleave")
				t.Logf("%d interleavings%s, %d failing; %d states, %v", c.runs, cmSaturated(c.runs), c.bad, len(e.memo), time.Since(start).Round(time.Millisecond))
				assert.Zero(t, c.bad, "interleavings fail a check")
				assert.Zero(t, c.badEnd, "interleavings fail a check at their end")
				return
			}
			steps, why, problems, states := e.firstFailure(s)
			t.Logf("%d states, %v", states, time.Since(start).Round(time.Millisecond))
			if assert.NotEmpty(t, steps, "no interleaving fails") {
				t.Logf("failing: %s: %s", strings.Join(steps, "; "), strings.Join(why, "; "))
				assert.Equal(t, v.fails, problems, "the checks the shortest failing run fails")
			}
		})
	}
}
