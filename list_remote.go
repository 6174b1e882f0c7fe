package sessionstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/seam"
)

// A page of ListPage with a Remote that lists from a key on
// (ObjectListerAfter). The metadata copies, meta/<id>/<n>, sort by id;
// a page wants the ids just below its cursor, newest first, and a
// listing goes up from a key. So metaKeysBefore searches for a key from
// which one listing page reaches the cursor holding enough ids: it steps
// down from the cursor by a distance that grows sixteenfold each time
// while too few ids lie between, and bisects when a listing page ends
// before the cursor (too many). Session ids are UUIDv7, whose first 48
// bits are the creation time, so the distances are spans of time; the
// search works on any ids (it cuts the key space, not time). A page
// costs a few listings (about log16 of the store's age over the page's
// span, then log2 of the page's density), none per session.

// listPageAfterPage is how many keys each listing of metaKeysBefore asks
// for: one request's page.
const listPageAfterPage = 1000

// listPageAfter is listPageRemote with la: the ids below before in
// batches (metaKeysBefore), each read newest first, until n sessions q
// selects are read or none is left. errors.ErrUnsupported: la cannot
// list from a key; the caller lists from the start.
func (s *Store) listPageAfter(ctx context.Context, la ObjectListerAfter, q Query, before *uuid.UUID, n int) ([]listItem, listCost, error) {
	var items []listItem
	var cost listCost
	// Ids cost nothing until read (16 at a time, as the page needs
	// them): ask for more than the page, in case q rejects many.
	want := min(max(8*n, 64), listPageAfterPage*2/5)
	for matched := 0; matched < n; {
		ids, keys, all, lists, err := metaKeysBefore(ctx, la, before, want)
		cost.lists += lists
		if err != nil {
			return nil, cost, err
		}
		got, m, c, err := s.readMetasNewestFirst(ctx, q, ids, keys, n-matched)
		cost.reads += c.reads
		if err != nil {
			return nil, cost, err
		}
		items, matched = append(items, got...), matched+m
		if all || len(ids) == 0 {
			break
		}
		before = &ids[0]
		want = listPageAfterPage * 2 / 5 // the query rejects many: larger batches
	}
	return items, cost, nil
}

// metaKeysBefore returns, ascending, the ids of the metadata copies
// below before (nil: all) and the key of each one's newest copy: at
// least want of them, unless all is set (none is below the first one
// returned). lists is how many listings it made.
func metaKeysBefore(ctx context.Context, la ObjectListerAfter, before *uuid.UUID, want int) (ids []uuid.UUID, keys []string, all bool, lists int, err error) {
	hi := ^uint64(0) // the cursor's prefix: the first 8 bytes of its id
	if before != nil {
		hi = binary.BigEndian.Uint64(before[:8])
	}
	below := func(id uuid.UUID) bool {
		return before == nil || bytes.Compare(id[:], before[:]) < 0
	}
	// list(start): one listing from start's prefix on; reached: it
	// reached the cursor (or the end), and got holds every id in
	// [start, before); else it ended at a key of prefix last.
	list := func(start uint64) (got []uuid.UUID, keys []string, reached bool, first, last uint64, err error) {
		lists++
		after := metaPrefix
		if start > 0 {
			var id uuid.UUID
			binary.BigEndian.PutUint64(id[:8], start)
			after += id.String() // sorts before every key of an id >= it
		}
		infos, err := la.ListAfter(ctx, metaPrefix, after, listPageAfterPage)
		if err != nil {
			if errors.Is(err, errors.ErrUnsupported) {
				return nil, nil, false, 0, 0, err
			}
			return nil, nil, false, 0, 0, seam.RemoteErr("list", after, err)
		}
		reached = len(infos) < listPageAfterPage
		for _, o := range infos {
			id, ok := metaKeyID(o.Key)
			if !ok {
				continue
			}
			last = binary.BigEndian.Uint64(id[:8])
			if first == 0 {
				first = last
			}
			if !below(id) {
				reached = true
				break
			}
			if n := len(got); n > 0 && got[n-1] == id {
				keys[n-1] = o.Key // keys sort by id, then number: the newest last
				continue
			}
			got, keys = append(got, id), append(keys, o.Key)
		}
		return got, keys, reached, first, last, nil
	}
	// The search: starts that held too few ids (tooFew, the highest
	// bound) and too many (tooMany, the lowest), each next start guessed
	// from the density the last listing showed, for about twice want
	// ids, or halfway between the bounds when the guess is outside.
	top := hi // where the ids below the cursor end, for the guesses
	if before == nil {
		// The newest ids are about now (UUIDv7); ids above it are
		// listed all the same, only the guesses start lower.
		top = uint64(time.Now().Add(time.Hour).UnixMilli()) << 16
	}
	tooFew, tooMany, haveMany := hi, uint64(0), false
	prevLen, jumps, empties, lastFull := 0, 0, 0, false
	dens := 0.0 // ids per prefix unit in the last full page
	target := 2 * float64(want)
	step := min(top, 1<<36) // about 17 minutes of UUIDv7 time
	start := top - step
	for {
		got, gotKeys, reached, first, last, err := list(start)
		if err != nil {
			return nil, nil, false, lists, err
		}
		overflowed := lastFull
		lastFull = !reached
		var guess float64 // the span below top that should hold target ids
		next := uint64(0) // or the next start, when set (nextSet)
		nextSet := false
		switch {
		case reached && (len(got) >= want || start == 0):
			return got, gotKeys, start == 0, lists, nil
		case reached && len(got) == 0:
			// No id in [start, before): the ids end below start.
			tooFew, top = start, start
			if haveMany {
				// At the density a full page showed, wider each time
				// the ids end lower still.
				guess = target / dens * float64(uint64(1)<<min(empties, 40))
				empties++
			} else {
				step = min(step, ^uint64(0)>>4) << 4
				guess = float64(step)
			}
		case reached:
			tooFew = start
			top = binary.BigEndian.Uint64(got[len(got)-1][:8]) + 1
			span := float64(top - start)
			if len(got) <= prevLen {
				// No more ids than the last listing, in a wider span:
				// they may all be listed; the next step is far wider.
				guess = 16 * span
			} else {
				guess = max(span*target/float64(len(got)), 2*span)
			}
			prevLen = len(got)
		case first == last:
			// A listing's page of keys below the cursor whose ids share
			// their first 8 bytes (ids not made by NewV7): the caller
			// lists from the start.
			return nil, nil, false, lists, errors.ErrUnsupported
		default:
			// A full page, [first, last], below the cursor: more ids
			// above it, up to an unknown top. Jump up past it by
			// twice the last jump, at most halfway to tooFew.
			if overflowed {
				jumps++
			}
			tooMany, haveMany = start, true
			dens = listPageAfterPage / float64(last-first+1)
			jump := float64(last-first+1) * float64(uint64(1)<<min(jumps, 40))
			if float64(last)+jump < float64(tooFew) {
				next, nextSet = last+uint64(jump), true
			} else {
				next, nextSet = tooMany+(tooFew-tooMany)/2, true
			}
		}
		switch {
		case nextSet:
			start = next
		case guess >= float64(top):
			start = 0
		default:
			start = top - uint64(guess)
		}
		if haveMany && (start <= tooMany || start >= tooFew) || !haveMany && start >= tooFew {
			if !haveMany {
				start = 0 // the guess did not move down: list from the start
			} else {
				start = tooMany + (tooFew-tooMany)/2
			}
		}
		if haveMany && tooFew-tooMany <= 1 {
			// More than a listing's page of keys below the cursor whose
			// ids share their first 8 bytes (ids not made by NewV7):
			// the caller lists from the start.
			return nil, nil, false, lists, errors.ErrUnsupported
		}
	}
}

// metaKeyID returns the session id of a metadata copy's key,
// meta/<id>/<n>.
func metaKeyID(key string) (uuid.UUID, bool) {
	rest, ok := strings.CutPrefix(key, metaPrefix)
	idStr, _, cut := cutAt(rest, '/')
	if !ok || !cut {
		return uuid.Nil, false
	}
	id, err := uuid.Parse(idStr)
	return id, err == nil
}
