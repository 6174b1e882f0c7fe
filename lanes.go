package sessionstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Lanes: named branches that survive a restart
//
// A lane is a named pointer to an event of a session. One lane is active:
// its tip is the end of the active path (what Load returns and the next
// Append extends): HEAD, the newest event, once an append followed the
// switch, so every Append moves it and the lanes file is not written per
// append. The other lanes' tips are kept in
// the session's lanes file, lanes.json:
//
//	{"v":1,"active":"<name>","head":"<uuid>","lanes":[{"name":"<name>","tip":"<uuid>","set":"<RFC 3339>"},…],"crc":"XXXXXXXX"}\n
//
// one line framed by its CRC-32C as index lines are (internal/jsonl),
// lanes sorted by name. head is the session's newest event when the file
// was written. The active lane's tip in the file is its tip at that
// moment: while the session's newest event is still head, the active
// lane's tip is the file's (a switch or a move that no append has
// followed yet: the next append becomes its child, as after Branch); once
// an append moved HEAD past head, the active lane's tip is HEAD.
//
// A session without the file has one implicit lane, DefaultLane, active,
// whose tip is HEAD: sessions written before lanes existed read the same.
// The first lane call that changes anything writes the file.
//
// Durability. Every change replaces the file atomically through the
// session's durableFiles seam (putLanes: temporary file, sync, rename,
// directory sync, and with Options.Remote a log object of the session on
// the object store) and returns only once it is durable. A crash leaves
// the old file or the new one, whole. Only published events (durable in
// their chunk, and in the object store's log with a remote) are named:
// a lane call first settles the appends in flight. Opening a session
// whose file exists loads the session's index (no lazy open) and checks
// that every lane names an event the session holds; a file that is not
// whole, or names an event the log does not hold (a hand-edited file, or
// acknowledged events lost to damage), is a *CorruptionError naming the
// file, returned by every lane call of the session, while its events stay
// readable and appendable (onto HEAD). Nothing repairs such a file on its
// own: it is the only copy of the other lanes' tips.
//
// Plain Branch keeps its meaning: an in-memory selection of the next
// append's parent. That append then moves the active lane (its tip is
// HEAD). A switch or a move of the active lane replaces a pending Branch
// selection with the lane's tip.

// The session's lanes file is lanesFile (internal/layout); a crash may
// leave its temporary file, lanesFile+".tmp", which a writer's open
// removes.

// lanesFormat is the version of the lanes file's line.
const lanesFormat = 1

// DefaultLane is the name of the implicit, active lane of a session that
// has no lanes file.
const DefaultLane = "main"

// Limits of lanes. MaxLaneName is in bytes of UTF-8.
const (
	MaxLaneName = 128
	MaxLanes    = 1024
)

// maxLanesSize bounds the lanes file: MaxLanes lanes, each with a name of
// MaxLaneName bytes escaped at most six times over, a tip and a time, are
// under 900 KiB (TestLanesFileLimit). A larger file is damage, refused
// unread.
const maxLanesSize = 1 << 20

// A Lane is a named branch pointer of a session (see Store.Lanes).
type Lane struct {
	Name string
	// Tip is the lane's newest event; uuid.Nil for the implicit lane of a
	// session without events.
	Tip uuid.UUID
	// Active: the next Append continues this lane.
	Active bool
	// SetAt is when the tip was recorded in the lanes file, or, for the
	// active lane after appends moved it, the time of its tip event.
	// Zero for the implicit lane of a session without events.
	SetAt time.Time
}

// laneTip is a lane's tip as the lanes file records it.
type laneTip struct {
	tip uuid.UUID
	set time.Time
}

// laneSet is the content of a lanes file.
type laneSet struct {
	active string
	head   uuid.UUID // the session's newest event when it was written
	lanes  map[string]laneTip
}

// laneLine is the lanes file's JSON line, before its CRC frame.
type laneLine struct {
	V      int           `json:"v"`
	Active string        `json:"active"`
	Head   uuid.UUID     `json:"head"`
	Lanes  []laneLineTip `json:"lanes"`
}

type laneLineTip struct {
	Name string    `json:"name"`
	Tip  uuid.UUID `json:"tip"`
	Set  time.Time `json:"set"`
}

// checkLaneName reports why name cannot name a lane, if it cannot.
func checkLaneName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty name", ErrInvalidLane)
	case len(name) > MaxLaneName:
		return fmt.Errorf("%w: name of %d bytes (at most %d)", ErrInvalidLane, len(name), MaxLaneName)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: name %q is not valid UTF-8", ErrInvalidLane, name)
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return fmt.Errorf("%w: name %q holds a control character", ErrInvalidLane, name)
	}
	return nil
}

// encodeLanes returns the lanes file's bytes for ls.
func encodeLanes(ls *laneSet) ([]byte, error) {
	l := laneLine{V: lanesFormat, Active: ls.active, Head: ls.head}
	for name, t := range ls.lanes {
		l.Lanes = append(l.Lanes, laneLineTip{Name: name, Tip: t.tip, Set: t.set.UTC()})
	}
	slices.SortFunc(l.Lanes, func(a, b laneLineTip) int { return strings.Compare(a.Name, b.Name) })
	b, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	return jsonl.Seal(nil, b), nil
}

// decodeLanes parses a lanes file read from path.
func decodeLanes(b []byte, path string) (*laneSet, error) {
	line, ok := bytes.CutSuffix(b, []byte{'\n'})
	if !ok || bytes.IndexByte(line, '\n') >= 0 {
		return nil, corruptf(path, int64(len(b)), "lanes file is not one line and a newline")
	}
	if err := jsonl.Verify(line); err != nil {
		return nil, corruptf(path, 0, "lanes file: %w", err)
	}
	var l laneLine
	if err := json.Unmarshal(line, &l); err != nil {
		return nil, corruptf(path, 0, "lanes file: %w", err)
	}
	if l.V != lanesFormat {
		return nil, fmt.Errorf("%w: %s has version %d", ErrUnsupportedFormat, path, l.V)
	}
	ls := &laneSet{active: l.Active, head: l.Head, lanes: make(map[string]laneTip, len(l.Lanes))}
	if len(l.Lanes) > MaxLanes {
		return nil, corruptf(path, 0, "lanes file holds %d lanes (at most %d)", len(l.Lanes), MaxLanes)
	}
	for _, t := range l.Lanes {
		if err := checkLaneName(t.Name); err != nil {
			return nil, corruptf(path, 0, "lanes file: %w", err)
		}
		if _, dup := ls.lanes[t.Name]; dup {
			return nil, corruptf(path, 0, "lanes file names lane %q twice", t.Name)
		}
		if t.Tip == uuid.Nil {
			return nil, corruptf(path, 0, "lane %q has no tip", t.Name)
		}
		ls.lanes[t.Name] = laneTip{tip: t.Tip, set: t.Set}
	}
	if _, ok := ls.lanes[ls.active]; !ok {
		return nil, corruptf(path, 0, "active lane %q is not among the lanes", ls.active)
	}
	if ls.head == uuid.Nil {
		return nil, corruptf(path, 0, "lanes file names no head")
	}
	return ls, nil
}

// readLanes reads and decodes dir's lanes file; nil, nil when there is
// none.
func readLanes(fsys vfs.FS, dir string) (*laneSet, error) {
	path := filepath.Join(dir, lanesFile)
	b, err := readFile(fsys, path, nil, maxLanesSize)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return decodeLanes(b, path)
}

// The open session's lanes. Its fields lanes (nil: no file, the implicit
// lane) and lanesErr (the damage of the file) are set by openLanes when a
// writer opens the session and changed by putLaneSet only, with h.mu
// held.

// openLanes reads the lanes file of a writer's session just opened, with
// h.mu held. With a file, it loads the index, checks that every lane
// names an event the session holds, and, when no append followed the
// file's last write, makes the active lane's tip the pending parent of
// the next append. A damaged file is kept in h.lanesErr and logged; the
// session opens.
func (h *openSession) openLanes() error {
	// A crash during a replace may leave its temporary file (durable.ReplaceFile
	// truncates it when it writes the next one). Stat first: an open
	// without one changes nothing.
	tmp := filepath.Join(h.dir, lanesFile+".tmp")
	if _, err := h.opts.fs.Stat(tmp); err == nil {
		if err := removeIfExists(h.opts.fs, tmp); err != nil {
			return err
		}
	}
	ls, err := h.files.readLanes()
	if err == nil && ls == nil {
		return nil
	}
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return err
	}
	if err == nil {
		if err := h.materialize(); err != nil {
			return err
		}
		err = h.checkLanes(ls)
	}
	if err != nil {
		h.lanesErr = err
		h.opts.Logger.Error("sessionstore: lanes file is damaged; lane calls fail until it is fixed, and appends go onto HEAD", "session", h.id, "err", err)
		return nil
	}
	h.lanes = ls
	if t := ls.lanes[ls.active].tip; ls.head == h.head() && t != h.head() {
		h.pending = t
	}
	return nil
}

// hasLanesFile reports whether the session's lanes file exists: a read-only
// store's session then loads its index, whose path may end at a lane's
// tip (pendingParent).
func (h *openSession) hasLanesFile() bool {
	_, err := h.opts.fs.Stat(filepath.Join(h.dir, lanesFile))
	return err == nil
}

// checkLanes reports a lane of ls that names an event the session does
// not hold (its own, or, for a fork, one of its prefix).
func (h *openSession) checkLanes(ls *laneSet) error {
	names := slices.Sorted(maps.Keys(ls.lanes))
	for _, name := range names {
		if t := ls.lanes[name].tip; !h.known(t) && !h.inPrefix(t) {
			return corruptf(filepath.Join(h.dir, lanesFile), 0, "lane %q names event %s, which the session does not hold", name, t)
		}
	}
	return nil
}

// verifyLanes adds to r the damage of dir's lanes file, if any: a file
// that is not whole, or a lane naming an event that is not among the
// valid records seen.
func verifyLanes(fsys vfs.FS, dir string, seen map[uuid.UUID]location, r *VerifyReport) error {
	ls, err := readLanes(fsys, dir)
	var ce *CorruptionError
	switch {
	case errors.As(err, &ce):
		r.problem(ce)
		return nil
	case err != nil:
		return err
	case ls == nil:
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(ls.lanes)) {
		if t := ls.lanes[name].tip; !hasKey(seen, t) {
			r.problem(&CorruptionError{Path: filepath.Join(dir, lanesFile), Err: fmt.Errorf("lane %q names event %s, which the session does not hold", name, t)})
			return nil
		}
	}
	return nil
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}

// laneView is the lanes of a session as of now: ls with the active lane's
// tip brought up to HEAD if appends moved it. ls nil means the implicit
// lane.
func (h *openSession) laneView(ls *laneSet) *laneSet {
	head := h.head()
	out := &laneSet{head: head, lanes: map[string]laneTip{}}
	if ls == nil {
		out.active = DefaultLane
		out.lanes[DefaultLane] = laneTip{tip: head, set: h.eventTime(head)}
		return out
	}
	out.active = ls.active
	maps.Copy(out.lanes, ls.lanes)
	if ls.head != head {
		out.lanes[ls.active] = laneTip{tip: head, set: h.eventTime(head)}
	}
	return out
}

// eventTime is the time of event id, zero if the session does not hold it.
func (h *openSession) eventTime(id uuid.UUID) time.Time {
	if i, ok := h.ByID[id]; ok {
		return time.Unix(0, h.Entries[i].Time).UTC()
	}
	return time.Time{}
}

// currentLanes returns the session's lanes as of now, with h.mu held and
// the index loaded. A read-only store's session reads the file each time
// (another process writes it), then brings its index up to date, so that
// the events the file names are in it.
func (h *openSession) currentLanes() (*laneSet, error) {
	if h.opts.ReadOnly {
		ls, err := h.files.readLanes()
		if err != nil {
			return nil, err
		}
		if ls != nil {
			// The file names only events made durable before it was
			// written: the session as of after reading it holds them
			// all, while the index loaded by this call's start may
			// predate them.
			if err := h.refresh(); err != nil {
				return nil, err
			}
			if err := h.checkLanes(ls); err != nil {
				return nil, err
			}
		}
		return h.laneView(ls), nil
	}
	if h.lanesErr != nil {
		return nil, h.lanesErr
	}
	return h.laneView(h.lanes), nil
}

// changeLanes runs a lane change with h.mu held and the index loaded:
// it settles the appends in flight (lanes name only published events),
// lets change edit the lanes as of now, then writes the result durably
// (putLaneSet). change reports whether it changed the active lane or its
// tip, which then becomes the next append's parent.
func (h *openSession) changeLanes(change func(ls *laneSet) (activeMoved bool, err error)) error {
	if err := h.writable(); err != nil {
		return err
	}
	if err := h.settle(); err != nil {
		return err
	}
	// settle may have waited for a sync, releasing the mutex.
	if err := h.writable(); err != nil {
		return err
	}
	ls, err := h.currentLanes()
	if err != nil {
		return err
	}
	moved, err := change(ls)
	if err != nil {
		return err
	}
	return h.putLaneSet(ls, moved)
}

// putLaneSet durably replaces the lanes file with ls, with h.mu held.
// With activeMoved it makes the active lane's tip the next append's
// parent (a pending selection, as Branch's) when it is not HEAD, and
// cancels a pending selection when it is; otherwise a pending selection
// stays. A failed write stops the session's writes: which file a crash
// would keep is unknown.
func (h *openSession) putLaneSet(ls *laneSet, activeMoved bool) error {
	ls.head = h.head()
	b, err := encodeLanes(ls)
	if err != nil {
		return err
	}
	if err := h.files.putLanes(b); err != nil {
		h.becomeFailed(err)
		return fmt.Errorf("sessionstore: write %s: %w", filepath.Join(h.dir, lanesFile), err)
	}
	h.lanes = ls
	if !activeMoved {
		return nil
	}
	if t := ls.lanes[ls.active].tip; t != ls.head {
		h.pending = t
	} else {
		h.pending = uuid.Nil
	}
	return nil
}

// lanesOf returns the lanes of ls sorted by name.
func lanesOf(ls *laneSet) []Lane {
	out := make([]Lane, 0, len(ls.lanes))
	for name, t := range ls.lanes {
		out = append(out, Lane{Name: name, Tip: t.tip, Active: name == ls.active, SetAt: t.set})
	}
	slices.SortFunc(out, func(a, b Lane) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// laneEvent checks that id is an event of the session a lane may name:
// one of its own or, for a fork, of its prefix (which Lanes reports as
// the implicit lane's tip of a fork without events of its own).
func (h *openSession) laneEvent(id uuid.UUID) error {
	if id == uuid.Nil {
		return fmt.Errorf("%w: a lane needs an event (uuid.Nil given)", ErrNotFound)
	}
	if _, err := h.lookup(id); err != nil && !h.inPrefix(id) { // a fork's prefix (fork.go), as Branch
		return err
	}
	return nil
}

func unknownLane(name string, id uuid.UUID) error {
	return fmt.Errorf("%w: lane %q in session %s", ErrNotFound, name, id)
}

// Lanes returns the session's lanes sorted by name, the active one
// marked. A session that never had a lane call has one, DefaultLane,
// active, with HEAD as its tip. The active lane's tip is the parent the
// next Append takes unless a Branch selection is pending.
//
// It writes nothing. On a read-only store it reads the lanes file as it
// is now, which another process's writer may replace at any time (each
// replace is atomic).
//
// Errors: ErrNotFound for an unknown session; a *CorruptionError naming
// lanes.json when the file is damaged or names an event the session does
// not hold; ErrUnsupportedFormat for a lanes file of a newer version
// (opening the session for writing fails with it too: a writer never
// replaces a file it cannot read); ErrLocked; ErrClosed.
func (s *Store) Lanes(ctx context.Context, session uuid.UUID) ([]Lane, error) {
	var out []Lane
	err := s.withHandle(ctx, session, func(h *openSession) error {
		ls, err := h.currentLanes()
		if err != nil {
			return err
		}
		out = lanesOf(ls)
		return nil
	})
	return out, err
}

// ActiveLane returns the session's active lane: the one the next Append
// continues (see Lanes). It writes nothing.
//
// Errors: as Lanes.
func (s *Store) ActiveLane(ctx context.Context, session uuid.UUID) (Lane, error) {
	var out Lane
	err := s.withHandle(ctx, session, func(h *openSession) error {
		ls, err := h.currentLanes()
		if err != nil {
			return err
		}
		t := ls.lanes[ls.active]
		out = Lane{Name: ls.active, Tip: t.tip, Active: true, SetAt: t.set}
		return nil
	})
	return out, err
}

// CreateLane adds lane name with tip at, an event of the session (for a
// fork, also one of its prefix, as Branch takes). The active lane does
// not change. The first lane call of a session also
// records the implicit lane, DefaultLane, with HEAD as its tip.
//
// Durability: appends in flight are made durable first; when CreateLane
// returns nil, the lanes file naming the new lane is durable (synced,
// renamed, directory synced; with Options.Remote, also stored in the
// session's log on the object store, so that another Store opening the
// session after this one released it sees the lane). A crash before that
// leaves the lanes as they were, or with the new lane, whole. Another
// process cannot change the lanes meanwhile: it gets ErrLocked (with a
// remote, another Store cannot take the session until it is released or
// its lease ran out, and this Store's write then fails with ErrFenced).
//
// Errors: ErrInvalidLane for a bad name; ErrExists if the session has a
// lane of that name; ErrNotFound for an unknown session or event at;
// ErrInvalidLane when the session has MaxLanes lanes; a *CorruptionError
// for a damaged lanes file; ErrReadOnly; ErrSessionFailed; ErrLocked;
// ErrClosed. A failed write of the file stops the session's writes, as a
// failed sync does.
func (s *Store) CreateLane(ctx context.Context, session uuid.UUID, name string, at uuid.UUID) error {
	if err := checkLaneName(name); err != nil {
		return err
	}
	return s.withHandle(ctx, session, func(h *openSession) error {
		return h.changeLanes(func(ls *laneSet) (bool, error) {
			if _, ok := ls.lanes[name]; ok {
				return false, fmt.Errorf("%w: lane %q in session %s", ErrExists, name, session)
			}
			if len(ls.lanes) >= MaxLanes {
				return false, fmt.Errorf("%w: session %s has %d lanes already", ErrInvalidLane, session, MaxLanes)
			}
			if err := h.laneEvent(at); err != nil {
				return false, err
			}
			ls.lanes[name] = laneTip{tip: at, set: h.opts.now().UTC()}
			return false, nil
		})
	})
}

// MoveLane points lane name at event to. Moving the active lane makes to
// the parent of the next Append and the end of the path Load returns (the
// next append starts a branch from it, with BranchFrom set, when to
// already has a child), replacing a pending Branch selection; HEAD moves
// only with that append.
//
// Durability: as CreateLane. After a crash or a Close, the move and, for
// the active lane, the next append's parent are still in effect.
//
// Errors: ErrInvalidLane for a bad name; ErrNotFound for an unknown
// session, lane or event to; otherwise as CreateLane.
func (s *Store) MoveLane(ctx context.Context, session uuid.UUID, name string, to uuid.UUID) error {
	if err := checkLaneName(name); err != nil {
		return err
	}
	return s.withHandle(ctx, session, func(h *openSession) error {
		return h.changeLanes(func(ls *laneSet) (bool, error) {
			if _, ok := ls.lanes[name]; !ok {
				return false, unknownLane(name, session)
			}
			if err := h.laneEvent(to); err != nil {
				return false, err
			}
			ls.lanes[name] = laneTip{tip: to, set: h.opts.now().UTC()}
			return name == ls.active, nil
		})
	})
}

// DeleteLane removes lane name. The events stay; only the name goes.
//
// Durability: as CreateLane.
//
// Errors: ErrInvalidLane for a bad name; ErrActiveLane for the active
// lane (switch away first); ErrNotFound for an unknown session or lane;
// otherwise as CreateLane.
func (s *Store) DeleteLane(ctx context.Context, session uuid.UUID, name string) error {
	if err := checkLaneName(name); err != nil {
		return err
	}
	return s.withHandle(ctx, session, func(h *openSession) error {
		return h.changeLanes(func(ls *laneSet) (bool, error) {
			if _, ok := ls.lanes[name]; !ok {
				return false, unknownLane(name, session)
			}
			if name == ls.active {
				return false, fmt.Errorf("%w: lane %q in session %s", ErrActiveLane, name, session)
			}
			delete(ls.lanes, name)
			return false, nil
		})
	})
}

// SwitchLane makes lane name the active one. The lane left keeps its tip
// (HEAD as of now); lane name's tip becomes the parent of the next
// Append and the end of the path Load returns, at once (a harness that
// switches and then loads sends the lane's context), replacing a pending
// Branch selection. The next append goes on from the tip, and starts a
// branch (BranchFrom set) only when the tip already has a child. HEAD
// moves only with that append, as after Branch, but unlike Branch the
// switch is durable.
// Switching to the active lane changes nothing and writes nothing.
//
// Durability: as CreateLane. After a crash or a Close the new lane is
// still active and the next append still goes onto its tip; a crash
// before SwitchLane returns leaves the old lane active with its tip, or
// the new one, whole.
//
// Errors: ErrInvalidLane for a bad name; ErrNotFound for an unknown
// session or lane; otherwise as CreateLane.
func (s *Store) SwitchLane(ctx context.Context, session uuid.UUID, name string) error {
	if err := checkLaneName(name); err != nil {
		return err
	}
	return s.withHandle(ctx, session, func(h *openSession) error {
		if err := h.writable(); err != nil {
			return err
		}
		if h.lanesErr == nil && h.lanes == nil && name == DefaultLane {
			return nil // the implicit lane is active
		}
		if h.lanesErr == nil && h.lanes != nil && h.lanes.active == name {
			return nil
		}
		return h.changeLanes(func(ls *laneSet) (bool, error) {
			if _, ok := ls.lanes[name]; !ok {
				return false, unknownLane(name, session)
			}
			ls.active = name
			return true, nil
		})
	})
}
