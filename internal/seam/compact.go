package seam

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/sessionstore/sessionstore/internal/parallel"
)

// Compaction. A session handed from Store to Store leaves markers
// behind (an open and a release per handoff, and voids after a holder
// that did not release), which no reader needs once a newer marker holds
// the whole state. Compact deletes them, and every other object below a
// marker that the state does not name, so that a session's object count
// stays bounded however many handoffs it sees. Deleting frees numbers,
// which fencing must survive (the root package's remote.go, "Numbers
// freed by compaction", states the argument):
//
//   - Only numbers below an older marker than the deleting Store's own
//     are freed, by a Store whose marker was confirmed the newest
//     (CheckNewestLocked); so every freed number lies below a marker
//     that is never deleted while it is the newest, and a taker whose
//     stale listing lets its marker land in a freed number finds that
//     marker above its own, or in the numbers it fills after its own.
//   - A holder that did not release may be a zombie that still Creates
//     the numbers just after what it stored: the taker records them
//     (KeepRange) in its marker's state, carried by every later marker,
//     and they are never freed.
//   - Data objects the state names (Live, Dead) are never deleted by
//     compaction: a dead one goes by its tombstone first.
//   - The create marker, number 1, is never deleted: a Create of the
//     session's id finds it taken (ErrExists), however old the session.

// CompactEvery is how many numbers between the state's Compacted and
// the marker a Store took the session from make the Store compact.
const CompactEvery = 64

// KeepRange returns the numbers a Store whose marker is at k, taking the
// session from a holder that did not release, keeps for good: those the
// holder (whose window, and its predecessors', is at most w) may still
// Create. The holder stored its objects up to some p and Creates nothing
// past p+w; the taker's marker follows the newest object, which is at
// most p+w, so p+1 >= k-w, and the holder's numbers lie within
// [k-w, k+w-1].
func KeepRange(k, w uint64) SeqRange {
	w = max(w, 1)
	from := uint64(1)
	if k > w {
		from = k - w
	}
	return SeqRange{From: from, To: k + w - 1}
}

// Keeps reports whether compaction must keep log object seq of a state
// st: a keep range holds it, or it is a data object st names.
func (st *State) Keeps(seq uint64) bool { return inRanges(st.Keep, seq) || st.names(seq) }

// names reports whether log object seq is a data object st names, live
// or dead (not replaced by its tombstone yet).
func (st *State) names(seq uint64) bool {
	return inRanges(st.Dead, seq) || slices.ContainsFunc(st.Live, func(p Piece) bool { return p.Seq == seq })
}

func inRanges(rs []SeqRange, seq uint64) bool {
	return slices.ContainsFunc(rs, func(r SeqRange) bool { return r.From <= seq && seq <= r.To })
}

// CheckNewestLocked confirms, with Mu held, that no object lies after
// the writer's newest: its marker (and the fills after it) did not land
// in a number compaction freed below a newer marker. A newer object is
// ErrLogMoved (the caller reads the log again; the marker it created
// stays, below the newer one, where no reader looks).
func (l *LogWriter) CheckNewestLocked(ctx context.Context) error {
	seqs, objs, err := l.ListLog(ctx, 1)
	if err != nil {
		return err
	}
	if len(seqs) > 0 && seqs[len(seqs)-1] > l.Seq {
		return fmt.Errorf("%w: log object %s lies after this lease's newest, %d", ErrLogMoved, objs[len(objs)-1].Key, l.Seq)
	}
	return nil
}

// CompactStats is what Compact found.
type CompactStats struct {
	Objects int   // log objects deleted (or, in a dry run, to delete)
	Bytes   int64 // their bytes
	// From is the state's CompactFrom once the deletions succeeded: the
	// oldest data object from the scan's start on that st names (it may
	// die and be deleted by a later compaction), or below.
	From uint64
}

// CompactDue reports whether a Store that took the session from the
// marker at number below, with state st, compacts: CompactEvery numbers
// since the last compaction.
func CompactDue(st *State, below uint64) bool { return below >= st.Compacted+CompactEvery }

// Compact deletes the log objects at numbers from st.CompactFrom up to
// below (the number of the marker the caller took the session from)
// that st does not keep (Keeps), 16 at a time; with dry it deletes
// nothing and counts them. The caller holds the session, its marker
// confirmed the newest (CheckNewestLocked), and st is its state. A
// failed deletion is an error, after the others were tried: the objects
// left are deleted by a later compaction, since the caller then does not
// move its state's Compacted and CompactFrom.
func (l *LogWriter) Compact(ctx context.Context, st *State, below uint64, dry bool) (CompactStats, error) {
	stats := CompactStats{From: max(st.CompactFrom, below)}
	if below <= st.CompactFrom {
		return stats, nil
	}
	seqs, objs, err := l.ListLog(ctx, 0)
	if err != nil {
		return stats, err
	}
	var doomed []ObjectInfo
	for i, seq := range seqs {
		if seq < max(st.CompactFrom, 2) || seq >= below {
			continue
		}
		if !st.Keeps(seq) {
			doomed = append(doomed, objs[i])
			stats.Bytes += objs[i].Size
		} else if st.names(seq) {
			stats.From = min(stats.From, seq)
		}
	}
	stats.Objects = len(doomed)
	if dry || len(doomed) == 0 {
		return stats, nil
	}
	errs := make([]error, len(doomed))
	var left atomic.Int64
	parallel.ForEach(len(doomed), 16, func(_, i int) {
		if err := l.Obj.Delete(ctx, doomed[i].Key); err != nil && !errors.Is(err, ErrObjectNotFound) {
			errs[i] = RemoteErr("delete", doomed[i].Key, err)
			left.Add(1)
		}
	})
	if err := errors.Join(errs...); err != nil {
		return stats, fmt.Errorf("%d of %d log objects not deleted: %w", left.Load(), len(doomed), err)
	}
	return stats, nil
}
