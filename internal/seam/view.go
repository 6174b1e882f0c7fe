package seam

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/parallel"
)

// View is the log as a Store opening a session reads it: its newest
// object and the state after it.
type View struct {
	Newest     ObjectInfo
	NewestSeq  uint64
	NewestHead *Header
	State      *State
	Meta       []byte
	Payloads   map[uint64][]byte // data objects read on the way
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
// marker that the listing skips or a read does not find is a
// *corrupt.Error naming its key (missingObject); a tombstone (KindDead)
// is skipped, as any kind the view does not apply.
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
	type got struct {
		h       *Header
		payload []byte
	}
	read := map[uint64]got{}
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
			if seqs, objs, err = l.ListLog(ctx, 0); err != nil {
				return nil, err
			}
			full, end = true, sort.Search(len(seqs), func(i int) bool { return seqs[i] >= low })
			if end == 0 {
				break
			}
		}
		start := max(0, end-n)
		res := make([]got, end-start)
		errs := make([]error, end-start)
		gone := make([]bool, end-start)
		parallel.ForEach(end-start, batch, func(_, i int) {
			key := objs[start+i].Key
			b, err := l.Obj.Get(ctx, key, 0, -1)
			if err != nil {
				if errors.Is(err, ErrObjectNotFound) {
					gone[i] = true // settled below (missingObject)
					return
				}
				errs[i] = RemoteErr("get", key, err)
				return
			}
			h, payload, err := DecodeObject(key, b)
			res[i], errs[i] = got{h, payload}, err
		})
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		for i := len(res) - 1; i >= 0; i-- {
			if gone[i] || res[i].h != nil && res[i].h.Kind == KindDead {
				// Not found, or a tombstone: either is explained only by
				// a seal record after it (missingObject).
				missing = append(missing, lostObject{objs[start+i].Key, seqs[start+i]})
			}
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
		return nil, corrupt.Errorf(objs[0].Key, 0, "the log has no create, open or release marker")
	}
	// The objects after the marker are the log's numbers without a gap:
	// one the listing skipped is missing too (the first and the last of
	// each gap stand for it).
	for i := marker + 1; i < len(seqs); i++ {
		if from, to := seqs[i-1]+1, seqs[i]-1; from <= to {
			missing = append(missing, lostObject{LogKey(l.ID, from), from}, lostObject{LogKey(l.ID, to), to})
		}
	}
	var seals []uint64
	for seq, g := range read {
		if g.h.Kind == KindSeal {
			seals = append(seals, seq)
		}
	}
	if err := missingObject(missing, seqs[marker], seals); err != nil {
		// A Store that wrote since the listing may have sealed the
		// chunk and replaced its data objects: the seal record is then
		// newer than the listing. Only a log that did not move is
		// damaged.
		if l.Moved(ctx, seqs[len(seqs)-1]) {
			return nil, fmt.Errorf("%w: %w", ErrLogMoved, err)
		}
		return nil, err
	}
	v := &View{Newest: objs[len(objs)-1], NewestSeq: seqs[len(seqs)-1], Payloads: map[uint64][]byte{}}
	m := read[seqs[marker]]
	if m.h.State == nil {
		v.State = &State{}
	} else {
		v.State = m.h.State.Clone()
	}
	v.Meta = m.payload
	for i := marker + 1; i < len(seqs); i++ {
		g, ok := read[seqs[i]]
		if !ok {
			continue
		}
		switch g.h.Kind {
		case KindData:
			v.Payloads[seqs[i]] = g.payload
		case KindMeta:
			v.Meta = g.payload
		case KindLanes:
			v.State.Lanes = g.payload
		}
		v.State.Apply(seqs[i], g.h)
	}
	v.NewestHead = read[v.NewestSeq].h
	return v, nil
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
// record, and one may have deleted it between the listing and the read. This build never deletes a log object (a
// tombstone replaces it), so an object missing otherwise was lost by the
// object store (a lifecycle rule, an operator): skipping it would cut
// acknowledged events silently.
func missingObject(missing []lostObject, marker uint64, seals []uint64) error {
	slices.SortFunc(missing, func(a, b lostObject) int { return cmp.Compare(a.seq, b.seq) })
	for _, o := range missing {
		if o.seq > marker && !slices.ContainsFunc(seals, func(seq uint64) bool { return seq > o.seq }) {
			return corrupt.Errorf(o.key, 0, "log object %d is missing: the log never frees a number, and no seal record after it explains it", o.seq)
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
