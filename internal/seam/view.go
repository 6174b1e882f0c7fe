package seam

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/parallel"
)

// View is the log as a Store opening a session reads it: its newest
// object and the state after it.
type View struct {
	Newest     ObjectInfo
	NewestSeq  uint64
	NewestHead *Header
	Marker     *Header // the newest marker: the log's state before the objects applied
	MarkerSeq  uint64  // the newest marker's number
	State      *State
	Meta       []byte
	Payloads   map[uint64][]byte // data objects read on the way
	// Applied is the newest object the state holds (0 for the marker's
	// alone); Gaps are the free numbers after the marker of a create or
	// open marker, which Creates of its lease in flight may still take:
	// a Store taking the session fills them (FillGaps) before its marker.
	Applied uint64
	Gaps    []uint64

	// after is what the view was built from: the log objects from the
	// newest marker on, as read (ExtendView reads only newer ones).
	after *viewObjects
}

// viewObjects are the log objects from a view's newest marker on: their
// numbers and keys, oldest first, the header and payload of each one read
// (a data object's payload only until a view built from them was
// returned: ExtendView drops them), and those a read did not find or
// found replaced by a tombstone.
type viewObjects struct {
	seqs    []uint64
	objs    []ObjectInfo
	read    map[uint64]readObject
	missing []lostObject
}

// readObject is a log object's header and payload, as read.
type readObject struct {
	h       *Header
	payload []byte
}

// Deleted reports whether the view's newest marker is a delete marker.
func (v *View) Deleted() bool { return v.Marker != nil && v.Marker.Kind == KindDelete }

// Clean reports whether the log ends with a release marker: the lease
// that released waited for its Creates, so a Store taking the session
// need not fill numbers after its own marker (FillLocked).
func (v *View) Clean() bool { return v.NewestHead != nil && v.NewestHead.Kind == KindRelease }

// FillGaps creates a void of the writer's lease (its next lease, not yet
// holding) at each of v's Gaps, so that no Create of the previous holder
// still in flight can land there: nil once all are taken by voids.
// A number found taken means the log moved (ErrLogMoved): the caller
// reads it again.
func (l *LogWriter) FillGaps(ctx context.Context, v *View, lease uuid.UUID) error {
	b, err := EncodeObject(&Header{Kind: KindVoid, Lease: lease, Store: l.Store}, nil)
	if err != nil {
		return err
	}
	for _, n := range v.Gaps {
		key := LogKey(l.ID, n)
		err := l.Obj.Create(ctx, key, b)
		if errors.Is(err, ErrObjectExists) {
			return fmt.Errorf("%w: log object %s was created while a Store filled the numbers free before it", ErrLogMoved, key)
		}
		if err != nil {
			return RemoteErr("create", key, err)
		}
	}
	return nil
}

// ViewPage is how many of the newest log objects an open lists first.
const ViewPage = 32

// ListLog lists the newest limit log objects (all with limit <= 0),
// returning them oldest first.
func (l *LogWriter) ListLog(ctx context.Context, limit int) ([]uint64, []ObjectInfo, error) {
	prefix := LogPrefix(l.ID)
	infos, err := l.Obj.List(ctx, prefix, limit)
	if err != nil {
		return nil, nil, RemoteErr("list", prefix, err)
	}
	var seqs []uint64
	var objs []ObjectInfo
	for i := len(infos) - 1; i >= 0; i-- {
		if seq, ok := ParseLogKey(prefix, infos[i].Key); ok {
			seqs, objs = append(seqs, seq), append(objs, infos[i])
		}
	}
	return seqs, objs, nil
}

// ReadView lists the log and reads back from its newest object to the
// newest marker, a batch of objects at a time. It returns a nil view for
// a session the object store does not hold. An object after the newest
// marker that a read does not find, or a number the listing skips that a
// later object proves stored, is a *corrupt.Error naming its key
// (missingObject; the window rule below); a number the listing skips
// otherwise ends the view (a Create in flight: View.Gaps); a tombstone
// (KindDead) is skipped, as any kind the view does not apply.
func (l *LogWriter) ReadView(ctx context.Context) (*View, error) {
	// The newest objects come first (logKey): a page of them holds the
	// newest marker unless many objects came after it (a holder that died
	// after many appends), and then the whole listing is read.
	seqs, objs, err := l.ListLog(ctx, ViewPage)
	if err != nil {
		return nil, err
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	full := len(seqs) < ViewPage
	listed := seqs[len(seqs)-1] // the first listing's newest
	anyGone := false
	read := map[uint64]readObject{}
	var missing []lostObject // listed, then not found
	marker := -1
	// The newest object first: after a clean Close it is the release
	// marker, and nothing else is needed. Then batches of 16.
	const batch = 16
	for end, n := len(seqs), 1; marker < 0; end, n = end-n, batch {
		if end <= 0 {
			if full {
				break
			}
			// Past the first page without a marker: list it all, and go
			// on below what was read.
			low := seqs[0]
			pageSeqs, pageObjs := seqs, objs
			if seqs, objs, err = l.ListLog(ctx, 0); err != nil {
				return nil, err
			}
			full, end = true, sort.Search(len(seqs), func(i int) bool { return seqs[i] >= low })
			// From low on, the page as listed and read: objects created
			// since (the holder appended) were not read, and must not
			// stand in the view unapplied (its NewestSeq past its
			// state); ones deleted since were read.
			seqs, objs = append(seqs[:end:end], pageSeqs...), append(objs[:end:end], pageObjs...)
			if end == 0 {
				break
			}
		}
		start := max(0, end-n)
		res, gone, err := l.readObjects(ctx, objs[start:end])
		if err != nil {
			return nil, err
		}
		for i := len(res) - 1; i >= 0; i-- {
			if gone[i] || res[i].h != nil && res[i].h.Kind == KindDead {
				// Not found, or a tombstone: either is explained only by
				// a seal record after it (missingObject).
				missing = append(missing, lostObject{objs[start+i].Key, seqs[start+i]})
			}
			anyGone = anyGone || gone[i]
			if res[i].h == nil {
				continue
			}
			read[seqs[start+i]] = res[i]
			if IsMarker(res[i].h.Kind) && marker < 0 {
				marker = start + i
			}
		}
	}
	if marker < 0 {
		// Compaction (Compact) may have deleted the markers of a listing
		// this old: damage only if the log did not move.
		err := corrupt.Errorf(objs[0].Key, 0, "the log has no create, open or release marker")
		return nil, l.movedErr(ctx, listed, err)
	}
	if anyGone && l.Moved(ctx, listed) {
		// An object listed, then gone, in a log that moved since: a
		// compaction below a newer marker may have deleted the newest
		// marker the listing held (and what follows it), so that the
		// marker found is an older one; a seal record read before the
		// deletion must not explain those as an earlier build's
		// deletions (missingObject). Read the log again.
		return nil, fmt.Errorf("%w: log objects listed were deleted while the log was read", ErrLogMoved)
	}
	return l.buildView(ctx, &viewObjects{seqs: seqs[marker:], objs: objs[marker:], read: read, missing: missing})
}

// readObjects reads the log objects objs, 16 at a time, reporting those
// not found (gone).
func (l *LogWriter) readObjects(ctx context.Context, objs []ObjectInfo) ([]readObject, []bool, error) {
	res := make([]readObject, len(objs))
	errs := make([]error, len(objs))
	gone := make([]bool, len(objs))
	parallel.ForEach(len(objs), 16, func(_, i int) {
		key := objs[i].Key
		b, err := l.Obj.Get(ctx, key, 0, -1)
		if err != nil {
			if errors.Is(err, ErrObjectNotFound) {
				gone[i] = true // settled by the caller (missingObject)
				return
			}
			errs[i] = RemoteErr("get", key, err)
			return
		}
		h, payload, err := DecodeObject(key, b)
		res[i], errs[i] = readObject{h, payload}, err
	})
	return res, gone, errors.Join(errs...)
}

// ExtendView returns the log's view now, as ReadView would, given prev, a
// view the caller read earlier (ReadView or ExtendView), reading only the
// objects listed since: one listing of the newest objects and a read of
// each new one, however many objects came after the newest marker. A
// follower polling a session that another Store holds and appends to for
// hours so pays for what is new, not for the whole lease. A new marker
// among the new objects (a handoff, a release, a Delete) reads the log
// from it instead (ReadView). It returns prev itself when nothing is
// new. The objects prev read are not read again: one replaced by a
// tombstone since (a sealed chunk's data object) keeps its data header,
// which the seal record after it explains (the state's pieces of a
// sealed chunk go with the seal).
func (l *LogWriter) ExtendView(ctx context.Context, prev *View) (*View, error) {
	if prev == nil || prev.after == nil {
		return l.ReadView(ctx)
	}
	seqs, objs, err := l.ListLog(ctx, ViewPage)
	if err != nil {
		return nil, err
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	old := prev.after
	switch newest := seqs[len(seqs)-1]; {
	case newest == prev.NewestSeq && len(prev.Gaps) == 0:
		return prev, nil
	case newest < prev.NewestSeq:
		return l.ReadView(ctx) // not a log that grew: read it anew
	}
	// Below the page's oldest lie only objects prev listed, unless the
	// page is all new (or starts above a free number prev had).
	low := prev.NewestSeq
	if len(prev.Gaps) > 0 {
		low = prev.Gaps[0]
	}
	if len(seqs) == ViewPage && seqs[0] > low {
		if seqs, objs, err = l.ListLog(ctx, 0); err != nil {
			return nil, err
		}
	}
	first := old.seqs[0] // the marker
	var fresh []int
	for i, seq := range seqs {
		if _, seen := old.read[seq]; seq > first && !seen && !slices.ContainsFunc(old.missing, func(o lostObject) bool { return o.seq == seq }) {
			fresh = append(fresh, i)
		}
	}
	freshObjs := make([]ObjectInfo, len(fresh))
	for j, i := range fresh {
		freshObjs[j] = objs[i]
	}
	res, gone, err := l.readObjects(ctx, freshObjs)
	if err != nil {
		return nil, err
	}
	next := &viewObjects{read: make(map[uint64]readObject, len(old.read)+len(fresh)), missing: slices.Clone(old.missing)}
	for seq, o := range old.read {
		if o.h.Kind == KindData && seq <= prev.Applied {
			o.payload = nil // in prev's state: the caller has it
		}
		next.read[seq] = o
	}
	if slices.Contains(gone, true) && l.Moved(ctx, seqs[len(seqs)-1]) {
		return l.ReadView(ctx) // deleted under the reading (see ReadView)
	}
	for j, i := range fresh {
		if gone[j] || res[j].h != nil && res[j].h.Kind == KindDead {
			next.missing = append(next.missing, lostObject{objs[i].Key, seqs[i]})
		}
		if res[j].h == nil {
			continue
		}
		if IsMarker(res[j].h.Kind) {
			return l.ReadView(ctx) // a new marker: the log from it
		}
		next.read[seqs[i]] = res[j]
	}
	// Every number from the marker on that either listing named.
	at := sort.Search(len(seqs), func(i int) bool { return seqs[i] >= first })
	next.seqs, next.objs = slices.Clone(old.seqs), slices.Clone(old.objs)
	for i := at; i < len(seqs); i++ {
		if j, found := slices.BinarySearch(next.seqs, seqs[i]); !found {
			next.seqs = slices.Insert(next.seqs, j, seqs[i])
			next.objs = slices.Insert(next.objs, j, objs[i])
		}
	}
	return l.buildView(ctx, next)
}

// buildView is the view of the log objects o, from the newest marker
// (o.seqs[0], read) on.
func (l *LogWriter) buildView(ctx context.Context, o *viewObjects) (*View, error) {
	seqs, objs, read, missing := o.seqs, o.objs, o.read, o.missing
	const marker = 0
	var maxSeal uint64 // the newest seal record after the marker
	for seq, g := range read {
		if g.h.Kind == KindSeal && seq > seqs[marker] {
			maxSeal = max(maxSeal, seq)
		}
	}
	if err := missingObject(missing, seqs[marker], maxSeal); err != nil {
		// A Store that wrote since the listing may have sealed the
		// chunk and replaced its data objects: the seal record is then
		// newer than the listing. Only a log that did not move is
		// damaged.
		return nil, l.movedErr(ctx, seqs[len(seqs)-1], err)
	}
	mh := read[seqs[marker]].h
	v := &View{Newest: objs[len(objs)-1], NewestSeq: seqs[len(seqs)-1], Marker: mh, MarkerSeq: seqs[marker], Payloads: map[uint64][]byte{}, after: o}
	if mh.State == nil {
		v.State = &State{}
	} else {
		v.State = mh.State.Clone()
	}
	v.Meta = read[seqs[marker]].payload
	v.NewestHead = read[v.NewestSeq].h
	if mh.Kind != KindCreate && mh.Kind != KindOpen {
		// After a release or delete marker its lease writes nothing:
		// an object there is a Create of an earlier holder that landed
		// late, never acknowledged.
		return v, nil
	}
	// The marker's lease (LogWriter.PutData) has up to its window of
	// Creates in flight: a number the listing skips after the marker is
	// one of them, not landed yet, or one that will never land; a void of
	// another lease is a number a Store taking the session filled, which
	// the lease's Create then failed to take. Its objects are applied up
	// to the first such number (gap); the free numbers from there on are
	// the view's Gaps, for a Store taking the session to fill. Its own
	// voids (FillLocked) and other leases' objects among the numbers its
	// marker says it filled (late Creates of an earlier holder, never
	// acknowledged) are skipped; another lease's object past them stops
	// it as a void does. An object of the lease issued after the gap's
	// object was stored (its Acked at least the gap; or a window or more
	// after it) proves the gap damage. A number below the newest seal
	// record is explained by it (missingObject).
	var gap uint64
	for i := marker + 1; i < len(seqs); i++ {
		from, to := max(seqs[i-1]+1, maxSeal), seqs[i]-1
		if from > to {
			continue
		}
		if gap == 0 {
			gap = from
		}
		if to-from >= maxGaps || uint64(len(v.Gaps))+to-from >= maxGaps {
			return nil, corrupt.Errorf(LogKey(l.ID, from), 0, "log objects %d to %d are missing after marker %d", from, to, seqs[marker])
		}
		for n := from; n <= to; n++ {
			v.Gaps = append(v.Gaps, n)
		}
	}
	for i := marker + 1; i < len(seqs); i++ {
		seq := seqs[i]
		g, ok := read[seq]
		if ok && g.h.Lease != mh.Lease && g.h.Kind != KindDead && (gap == 0 || seq < gap) &&
			(g.h.Kind == KindVoid || seq > seqs[marker]+uint64(mh.Fills)) {
			// Another Store filled this number to take the session, or an
			// earlier lease's late Create took it past the numbers the
			// marker's Store filled: the lease's Create of it failed, so
			// nothing of the lease from here on was acknowledged.
			gap = seq
		}
		if !ok || g.h.Lease != mh.Lease || g.h.Kind == KindVoid || g.h.Kind == KindDead {
			// Not found or a tombstone (explained: missingObject), a
			// void, or another lease's late Create: nothing to apply.
			continue
		}
		if gap != 0 && seq > gap {
			if seq >= gap+mh.MaxInFlight() || g.h.Acked >= gap {
				err := corrupt.Errorf(LogKey(l.ID, gap), 0, "log object %d is missing, and log object %d of the same lease, created after it was stored (window %d, acked %d), is there", gap, seq, mh.MaxInFlight(), g.h.Acked)
				return nil, l.movedErr(ctx, v.NewestSeq, err)
			}
			continue // after a Create in flight: not acknowledged
		}
		switch g.h.Kind {
		case KindData:
			if g.payload != nil { // nil: an earlier view's, applied (ExtendView)
				v.Payloads[seq] = g.payload
			}
		case KindMeta:
			v.Meta = g.payload
		case KindLanes:
			v.State.Lanes = g.payload
		}
		v.State.Apply(seq, g.h)
		v.Applied = seq
	}
	return v, nil
}

// maxGaps bounds the free numbers a view accepts after its marker: a
// holder leaves at most its window free.
const maxGaps = 1 << 12

// movedErr returns err, the damage found reading a log whose newest object
// was newest, wrapped in ErrLogMoved if the log moved since.
func (l *LogWriter) movedErr(ctx context.Context, newest uint64, err error) error {
	if l.Moved(ctx, newest) {
		return fmt.Errorf("%w: %w", ErrLogMoved, err)
	}
	return err
}

// ErrLogMoved reports a log read while another Store wrote to it, so
// that what looked like damage (a tombstone or a missing object where
// the listing promised data) may be its writes: the caller reads the log
// again. It wraps the damage found, for a caller that gives up.
var ErrLogMoved = errors.New("sessionstore: the log changed while it was read")

// Moved reports whether the log holds an object newer than newest (false
// when the listing fails: the caller keeps the error it has).
func (l *LogWriter) Moved(ctx context.Context, newest uint64) bool {
	seqs, _, err := l.ListLog(ctx, 1)
	return err == nil && len(seqs) > 0 && seqs[len(seqs)-1] > newest
}

// lostObject is a log object a listing named and a read did not find, or
// found replaced by a tombstone.
type lostObject struct {
	key string
	seq uint64
}

// missingObject returns a *corrupt.Error naming the first of missing
// after the newest marker (at number marker), unless a seal record read
// after it (seals: their numbers) explains it: builds before tombstones
// (KindDead) deleted the data objects of sealed chunks, after their seal
// record, and one may have deleted it between the listing and the read.
// This build deletes log objects only below the newest marker
// (compaction: compact.go) and replaces dead ones by tombstones, so an
// object missing after the newest marker was lost by the object store (a
// lifecycle rule, an operator), unless the log moved (the caller's
// movedErr): skipping it would cut acknowledged events silently.
func missingObject(missing []lostObject, marker, maxSeal uint64) error {
	slices.SortFunc(missing, func(a, b lostObject) int { return cmp.Compare(a.seq, b.seq) })
	for _, o := range missing {
		if o.seq > marker && o.seq >= maxSeal {
			return corrupt.Errorf(o.key, 0, "log object %d is missing: the log frees no number after its newest marker, and no seal record after it explains it", o.seq)
		}
	}
	return nil
}

// StoreClock returns the object store's current time: the modification
// time of a probe object it writes.
func (l *LogWriter) StoreClock(ctx context.Context) (time.Time, error) {
	key := ClockKey(l.ID)
	if err := l.Obj.Put(ctx, key, []byte(l.Lease.String())); err != nil {
		return time.Time{}, RemoteErr("put", key, err)
	}
	info, err := l.Obj.Stat(ctx, key)
	if err != nil {
		return time.Time{}, RemoteErr("stat", key, err)
	}
	return info.ModTime, nil
}
