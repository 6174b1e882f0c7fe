package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/journal"
)

// A fork is a session whose history up to an event of another session,
// its fork point (Meta.ForkedFrom), is that session's: referenced, never
// copied. The fork's own directory holds only its own events; the first
// of them names the fork point as its parent, with no parent location in
// its line (the parent is in another session's chunks). Reading a fork
// walks its own index and, where the walk leaves it, goes on in the
// parent's files, read-only and without the parent's lock, as a
// read-only store reads a session (analyze, with nothing applied).
//
// The prefix is the path from the parent's root to the fork point, and
// only that path: the parent's other branches, and events it gains
// later, are not the fork's. A parent may itself be a fork; the chain is
// followed to maxForkDepth sessions.
//
// A fork with no events of its own has no HEAD file: its HEAD (head) is
// the fork point. Its first Append writes the HEAD file as any Append
// does. A fork never opens lazily (lazy.go): the lazy open follows parent
// locations, and the first event's parent has none in the fork.

// maxForkDepth bounds the chain of ForkedFrom sessions a fork's prefix is
// read from; a longer chain, or a cycle, is ErrForkChain.
const maxForkDepth = 64

// forkPrefix is the resolved prefix of a fork: the path from the root to
// the fork point, in runs, one per session of the chain, root-most first.
type forkPrefix struct {
	at   uuid.UUID // the fork point: the last event of the prefix
	segs []prefixSeg
	pos  map[uuid.UUID]prefixPos
	// filled holds the preview texts fillPrefix made, by event id
	// ([]byte; nil for none): the entries stay as read.
	filled sync.Map
}

// prefixSeg is the part of a prefix held by one session: its entries,
// oldest first, located in that session's chunks.
type prefixSeg struct {
	session uuid.UUID
	dir     string
	path    []entry
}

type prefixPos struct{ seg, i int }

func (p *forkPrefix) has(id uuid.UUID) bool {
	_, ok := p.pos[id]
	return ok
}

func (p *forkPrefix) push(seg prefixSeg) {
	k := len(p.segs)
	p.segs = append(p.segs, seg)
	for i := range seg.path {
		p.pos[seg.path[i].ID] = prefixPos{k, i}
	}
}

// upTo returns the part of p that ends at id, an event p holds.
func (p *forkPrefix) upTo(id uuid.UUID) *forkPrefix {
	at := p.pos[id]
	q := &forkPrefix{at: id, pos: make(map[uuid.UUID]prefixPos, len(p.pos))}
	for k := 0; k <= at.seg; k++ {
		seg := p.segs[k]
		if k == at.seg {
			seg.path = seg.path[:at.i+1]
		}
		q.push(seg)
	}
	return q
}

// resolveFork reads the prefix of a fork whose fork point is fp, from the
// files of fp.Session (under root, the sessions directory) and of the
// sessions it forked from, read-only: it takes no lock and repairs
// nothing. depth counts the sessions of the chain below this one.
//
// Errors: ErrNotFound when fp.Session does not exist or does not hold
// fp.Event on the durable part of its log (the valid prefix of a damaged
// one); ErrForkChain; a *CorruptionError for a parent whose files
// disagree with the chain; an I/O error.
func resolveFork(src prefixSource, fp ForkPoint, depth int) (*forkPrefix, error) {
	if depth > maxForkDepth {
		return nil, fmt.Errorf("%w: more than %d sessions from %s", ErrForkChain, maxForkDepth, fp.Session)
	}
	dir, err := src.restore(fp.Session)
	if err != nil {
		return nil, err
	}
	unlock := src.lock()
	meta, _, err := readMeta(src.opts.fs, dir, fp.Session)
	unlock()
	if err != nil {
		return nil, err
	}
	var up *forkPrefix
	if meta.ForkedFrom != nil {
		if up, err = resolveFork(src, *meta.ForkedFrom, depth+1); err != nil {
			return nil, err
		}
	}
	var outside func(uuid.UUID) bool
	if up != nil {
		outside = up.has
	}
	unlock = src.lock()
	fsys := src.opts.fs
	if ov := journal.Overlay(fsys, filepath.Dir(filepath.Dir(dir)), dir); ov != nil {
		fsys = ov // a dead writer's records still only in its journal
	}
	plan, err := analyze(fsys, dir, true, outside)
	unlock()
	if err != nil {
		return nil, err
	}
	x := &plan.index
	i, ok := x.ByID[fp.Event]
	if !ok {
		if up != nil && up.has(fp.Event) {
			return up.upTo(fp.Event), nil
		}
		return nil, fmt.Errorf("%w: event %s in session %s", ErrNotFound, fp.Event, fp.Session)
	}
	var path []entry // newest first
	cross := uuid.Nil
	for {
		e := x.Entries[i]
		path = append(path, e)
		if e.ParentID == uuid.Nil {
			break
		}
		j, ok := x.ByID[e.ParentID]
		if !ok {
			cross = e.ParentID // in the prefix up holds: analyze checked
			break
		}
		i = j
	}
	slices.Reverse(path)
	out := &forkPrefix{pos: make(map[uuid.UUID]prefixPos, len(path))}
	if cross != uuid.Nil {
		out = up.upTo(cross)
	}
	out.push(prefixSeg{session: fp.Session, dir: dir, path: path})
	out.at = fp.Event
	return out, nil
}

// prefix returns the session's prefix, resolving it on first use; nil
// for a session that is not a fork. h.mu is held.
func (h *openSession) prefix() (*forkPrefix, error) {
	f := h.meta.ForkedFrom
	if f == nil {
		return nil, nil
	}
	if h.fork == nil || h.fork.at != f.Event {
		p, err := resolveFork(prefixSource{h.opts, filepath.Dir(h.dir)}, *f, 1)
		if err != nil {
			return nil, fmt.Errorf("sessionstore: fork %s: reading its prefix from session %s: %w", h.id, f.Session, err)
		}
		h.fork = p
	}
	return h.fork, nil
}

// outside is the memIndex's Outside check of a parent outside the
// session's own log: for a fork, an event of its prefix; nil for any
// other session.
// h.mu is held when the index calls it.
func (h *openSession) outside() func(uuid.UUID) bool {
	if h.meta.ForkedFrom == nil {
		return nil
	}
	return func(id uuid.UUID) bool {
		p, err := h.prefix()
		return err == nil && p.has(id)
	}
}

// inPrefix reports whether id is an event of the session's prefix (never
// for a session that is not a fork). h.mu is held.
func (h *openSession) inPrefix(id uuid.UUID) bool {
	p, err := h.prefix()
	return err == nil && p != nil && p.has(id)
}

// Fork creates a session whose history up to and including the event at
// of session parent is parent's, referenced and not copied, and returns
// its metadata: a new id, Name, WorkingDir, Model and Labels copied from
// parent, and ForkedFrom set to (parent, at). at may be any durable event
// of parent, also one of parent's own prefix when parent is a fork (a
// fork of a fork). The fork's first Append is a child of at; Load,
// LoadPath, FullPath, Event, Tree, Head, NextParent and Branch of the fork
// see the prefix, the path from parent's root to at, read from parent's
// files (and its chain's) without parent's lock, so parent may be open
// for writing, here or by another process, meanwhile. Tree lists the
// prefix path, then the fork's own events; parent's other branches and
// events appended to parent later are not the fork's. Resolve of a prefix
// event reads parent's blob.
//
// Fork writes the new session's directory: its chunks and blobs
// directories and session.json (with ForkedFrom), as Create does (no
// HEAD: the fork's HEAD is at until its first Append), and the marker
// below; parent's files are never written. Its cost does not
// grow with the parent's size when parent is open in this Store with its
// index loaded; otherwise checking at reads parent's index, read-only.
// Opening the fork (its first use, and after each reopen) reads the
// index of every session of its chain, read-only, and keeps the prefix
// path's entries in memory while the fork is open.
//
// Durability: when Fork returns nil, the fork's session.json and its
// directory entry are durable, as after Create; a crash before leaves no
// session (at most an empty directory that List ignores) or the whole
// fork; parent's files are never written. With Options.Remote the fork is
// created in the object store as Create does, and its prefix is read from
// parent's local files (restored from the object store when this Store
// opened parent); another Store sees the fork once Fork returns.
//
// Delete of parent is refused (ErrHasForks) while this fork exists, from
// the moment Fork returns (under Options.DeferCreate too, where the fork
// has no files yet), whatever Store on this root deletes (forklock.go): a
// Fork and a Delete of its parent that run at once never both succeed.
// With Options.Remote that holds across roots (machines) too: the fork
// registers in the object store and reads the parent's delete intent
// (remote_forks.go).
// Fork takes the root's forks.lock briefly and writes an empty marker,
// forks/<parent>/<fork>, at the root; it takes no lock on parent, and a
// second writer of parent (ErrLocked on parent) does not stop it.
// parent's events are never rewritten, so the prefix stays readable
// while others append to parent.
//
// Errors: ErrNotFound when parent does not exist, is deleted while Fork
// runs (no fork is left then), or at is not one of its durable events;
// with Options.Remote, ErrLocked while a Delete of parent is under way on
// another root (no fork is left; retry); ErrForkChain when parent's chain
// of forks is longer than 64 sessions or loops; ErrReadOnly; ErrClosed;
// as Create.
func (s *Store) Fork(ctx context.Context, parent, at uuid.UUID) (Meta, error) {
	if err := s.begin(ctx); err != nil {
		return Meta{}, err
	}
	pm, err := s.forkParent(ctx, parent, at)
	s.end()
	if err != nil {
		return Meta{}, err
	}
	meta := Meta{Name: pm.Name, WorkingDir: pm.WorkingDir, Model: pm.Model, Labels: pm.clone().Labels,
		ForkedFrom: &ForkPoint{Session: parent, Event: at}}
	return s.Create(ctx, meta)
}

// forkParent checks that at is a durable event of parent and returns
// parent's metadata: through parent's handle when this Store has it open
// with its index (no read of parent's files), else by reading parent's
// files read-only.
func (s *Store) forkParent(ctx context.Context, parent, at uuid.UUID) (Meta, error) {
	if s.opts.ReadOnly {
		return Meta{}, ErrReadOnly
	}
	if at == uuid.Nil {
		return Meta{}, fmt.Errorf("%w: the nil uuid is not an event", ErrNotFound)
	}
	if h := s.reg.lookup(parent); h != nil {
		h.mu.Lock()
		ok := h.usable() == nil && h.headEntry == nil && !h.Partial
		var m Meta
		if ok {
			m = h.meta.clone()
			_, own := h.ByID[at]
			ok = own || h.inPrefix(at)
		}
		rf, _ := h.files.(*remoteFiles)
		h.mu.Unlock()
		if ok && rf != nil {
			// Acknowledged after the local sync (DurableLocal), the fork
			// point may not be stored yet: the fork, which reads its
			// prefix from the log, waits until it is.
			if err := rf.settleLocal(); err != nil {
				return Meta{}, fmt.Errorf("sessionstore: fork of session %s at %s: %w", parent, at, err)
			}
		}
		if ok {
			return m, nil
		}
	}
	// A Delete of parent may move its directory away while its files are
	// read: a file gone then means the parent is, which is ErrNotFound
	// (the Delete won), not a damaged session.
	deleted := func(err error) error {
		if err == nil || errors.Is(err, ErrNotFound) {
			return err
		}
		if _, serr := s.opts.fs.Stat(filepath.Join(s.sessionDir(parent), metaFile)); errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("%w: session %s, deleted while Fork read it (%v)", ErrNotFound, parent, err)
		}
		return err
	}
	src := prefixSource{&s.opts, filepath.Join(s.dir, sessionsDir)}
	if _, err := resolveFork(src, ForkPoint{Session: parent, Event: at}, 1); err != nil {
		return Meta{}, deleted(err)
	}
	dir, err := src.restore(parent)
	if err != nil {
		return Meta{}, deleted(err)
	}
	defer src.lock()()
	m, _, err := readMeta(s.opts.fs, dir, parent)
	return m, deleted(err)
}

// forkStep is one event of a fork's path: its entry and where its record
// is: seg -1 for the fork's own chunks, else the prefix's segment.
type forkStep struct {
	e   entry
	seg int
}

// stepOf finds id in the session's own index or its prefix. h.mu is held.
func (h *openSession) stepOf(pre *forkPrefix, id uuid.UUID) (forkStep, bool) {
	if i, ok := h.ByID[id]; ok {
		return forkStep{h.Entries[i], -1}, true
	}
	if pre != nil {
		if at, ok := pre.pos[id]; ok {
			return forkStep{pre.segs[at.seg].path[at.i], at.seg}, true
		}
	}
	return forkStep{}, false
}

// parentOf returns the parent of id, an event of the session or of its
// prefix. h.mu is held.
func (h *openSession) parentOf(id uuid.UUID) (uuid.UUID, bool) {
	pre, _ := h.prefix()
	st, ok := h.stepOf(pre, id)
	return st.e.ParentID, ok
}

// resolveForkPath is resolvePath for a fork, with h acquired (it releases
// it): the path to leaf through the fork's own index and on through its
// prefix, in runs, each to be read from the chunks and blobs of the
// session that holds it (readRun).
func (s *Store) resolveForkPath(h *openSession, leaf uuid.UUID, boundaries bool) (*resolvedPath, error) {
	pre, err := h.prefix()
	if err != nil {
		s.reg.release(h)
		return nil, err
	}
	var path []forkStep // newest first
	if leaf != uuid.Nil {
		st, ok := h.stepOf(pre, leaf)
		if !ok {
			s.reg.release(h)
			return nil, fmt.Errorf("%w: event %s in session %s", ErrNotFound, leaf, h.id)
		}
		for {
			path = append(path, st)
			if st.e.ParentID == uuid.Nil || (boundaries && st.e.Kind == eventline.KindCompaction) {
				break
			}
			parent := st.e.ParentID
			if st, ok = h.stepOf(pre, parent); !ok {
				s.reg.release(h)
				return nil, fmt.Errorf("sessionstore: fork %s: event %s names parent %s, in neither the fork nor its prefix", h.id, path[len(path)-1].e.ID, parent)
			}
		}
	}
	slices.Reverse(path)
	damaged := h.damage()
	s.reg.release(h)
	if boundaries && len(path) > 0 && path[0].e.Kind == eventline.KindCompaction {
		kept, err := s.forkKept(h, pre, path[0])
		if err != nil {
			return nil, err
		}
		path = slices.Concat(path[:1], kept, path[1:])
	}
	p := &resolvedPath{h: h, pre: pre, damaged: damaged}
	for k := 0; k < len(path); {
		end := k + 1
		for end < len(path) && path[end].seg == path[k].seg {
			end++
		}
		run := make([]entry, end-k)
		for i := range run {
			run[i] = path[k+i].e
		}
		p.runs = append(p.runs, pathRun{seg: path[k].seg, entries: run})
		k = end
	}
	return p, nil
}

// readRun reads the events of run, entries of one session of a fork's
// chain (seg, as in forkStep), with their records resolved.
func (s *Store) readRun(ctx context.Context, h *openSession, pre *forkPrefix, seg int, run []entry) ([]Event, error) {
	holder := h.id
	if seg >= 0 {
		holder = pre.segs[seg].session // a fork's prefix: its parent's records, under its key
	}
	evs, err := s.readRunSealed(ctx, h, pre, seg, run)
	if len(evs) > 0 {
		if oerr := s.unsealEvents(ctx, holder, evs); oerr != nil {
			return nil, oerr
		}
	}
	return evs, err
}

// readRunSealed is readRun before the records are opened.
func (s *Store) readRunSealed(ctx context.Context, h *openSession, pre *forkPrefix, seg int, run []entry) ([]Event, error) {
	if seg < 0 {
		r := h.files.chunkReader()
		defer r.close()
		return s.readEntries(ctx, h.dir, r, run)
	}
	evs, err := s.readPrefixRun(ctx, pre.segs[seg].dir, run)
	if err == nil || ctx.Err() != nil {
		return evs, err
	}
	// The parent's lines may have moved since the prefix was read (an
	// Upgrade rewrote its chunks, here or in another process): read the
	// prefix again and, if it still holds the run, read it from there.
	fresh, ok := h.refreshPrefix(pre)
	if !ok {
		return nil, err
	}
	moved := make([]entry, len(run))
	for i := range run {
		at, ok := fresh.pos[run[i].ID]
		if !ok || at.seg != seg {
			return nil, err
		}
		moved[i] = fresh.segs[at.seg].path[at.i]
	}
	return s.readPrefixRun(ctx, fresh.segs[seg].dir, moved)
}

// readPrefixRun reads run, entries of the session whose directory is dir.
func (s *Store) readPrefixRun(ctx context.Context, dir string, run []entry) ([]Event, error) {
	r := newChunkReader(s.opts.fs, filepath.Join(dir, chunksDir), s.opts.frames)
	defer r.close()
	return s.readEntries(ctx, dir, r, run)
}

// refreshPrefix reads the session's prefix again and, if h still holds
// pre, replaces it: after a parent's chunks were rewritten (Upgrade), the
// entries of pre name their lines' old places. ok is false when the
// prefix cannot be read (the error is the caller's to report); h keeps
// pre then. h.mu is not held.
func (h *openSession) refreshPrefix(pre *forkPrefix) (*forkPrefix, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fork != pre {
		return h.fork, h.fork != nil // read again meanwhile
	}
	h.fork = nil
	p, err := h.prefix()
	if err != nil || p == nil {
		h.fork = pre
		return nil, false
	}
	return p, true
}

// forkKept is keptTail for a compaction c on a fork's path: the events
// it keeps verbatim, which may be in the prefix.
func (s *Store) forkKept(h *openSession, pre *forkPrefix, c forkStep) ([]forkStep, error) {
	evs, err := s.readRun(context.Background(), h, pre, c.seg, []entry{c.e})
	if err != nil {
		return nil, err
	}
	rec, err := evs[0].Compaction()
	if err != nil || rec.FirstKept == uuid.Nil {
		return nil, nil // a compaction appended by hand with another record keeps nothing
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var kept []forkStep
	for cur := c.e.ParentID; cur != uuid.Nil; {
		st, ok := h.stepOf(pre, cur)
		if !ok {
			return nil, nil
		}
		kept = append(kept, st)
		if cur == rec.FirstKept {
			slices.Reverse(kept)
			return kept, nil
		}
		cur = st.e.ParentID
	}
	return nil, nil // FirstKept is not on the path
}

// forkEvent is Event for an event of a fork's prefix, with h acquired:
// found reports whether the prefix holds id; h is released only then.
func (s *Store) forkEvent(ctx context.Context, h *openSession, id uuid.UUID) (ev Event, found bool, err error) {
	if h.meta.ForkedFrom == nil {
		return Event{}, false, nil
	}
	pre, err := h.prefix()
	if err != nil {
		return Event{}, false, nil // Event reports the lookup's error
	}
	st, ok := h.stepOf(pre, id)
	if !ok || st.seg < 0 {
		return Event{}, false, nil
	}
	s.reg.release(h)
	read := func(pre *forkPrefix, e *entry) (Event, error) {
		r := newChunkReader(s.opts.fs, filepath.Join(pre.segs[st.seg].dir, chunksDir), s.opts.frames)
		defer r.close()
		ev, err := readEntry(r, e)
		if err != nil || ev.Record == nil {
			return ev, err
		}
		evs := []Event{ev} // the parent's record, under its key
		err = s.unsealEvents(ctx, pre.segs[st.seg].session, evs)
		return evs[0], err
	}
	if ev, err = read(pre, &st.e); err == nil {
		return ev, true, nil
	}
	// The line may have moved (see readRun): look it up again.
	if fresh, ok := h.refreshPrefix(pre); ok {
		if at, ok := fresh.pos[id]; ok && at.seg == st.seg {
			ev, err = read(fresh, &fresh.segs[at.seg].path[at.i])
		}
	}
	return ev, true, err
}

// prefixNodes returns the nodes of session's fork prefix, root first,
// for Tree and Children; none for a session that is not a fork. It holds
// the session's mutex only to take the prefix, an immutable snapshot,
// and shows each part's previews under its own session's key
// (segPreviews) without it: asking for a parent's key may take the
// parent's mutex (the registry) or call the KeyProvider. A damaged
// session's prefix is returned all the same (the caller's next use of
// the session reports the damage).
func (s *Store) prefixNodes(ctx context.Context, session uuid.UUID) ([]Node, error) {
	for again := true; ; again = false {
		var pre *forkPrefix
		ran := false
		err := s.withHandle(ctx, session, func(h *openSession) error {
			var err error
			pre, err = h.prefix()
			ran = err == nil
			return err
		})
		if !ran {
			return nil, err
		}
		if pre == nil {
			return nil, nil
		}
		var out []Node
		stale := false
		for k := range pre.segs {
			v := s.segPreviews(ctx, pre, &pre.segs[k])
			stale = stale || v.stale(pre.segs[k].path)
			out = nodes(out, pre.segs[k].path, v)
		}
		if !stale || !again {
			return out, nil
		}
		// A parent re-encrypted since the prefix was read (Reencrypt):
		// its entries' previews are sealed under a generation its key
		// no longer holds. The prefix is read again, once.
		_ = s.withHandle(ctx, session, func(h *openSession) error {
			if h.fork == pre {
				h.fork = nil
			}
			return nil
		})
	}
}

// segPreviews returns how the previews of pre's part seg are shown:
// under its session's key (a parent's own, as its records are read:
// readRun), those its entries lost made again (fillPrefix).
func (s *Store) segPreviews(ctx context.Context, pre *forkPrefix, seg *prefixSeg) previews {
	v := previewsOf(s.recordKey(ctx, seg.session))
	if v.key != nil {
		s.fillPrefix(pre, seg, v.key)
		v.lost = &pre.filled
	}
	return v
}

// fillPrefix is fillPreviews for seg, a part of the fork prefix pre: the
// previews its entries have none of (an encrypted parent's entries
// rebuilt from its chunk lines: a parent recovered, open in another Store
// or process, or restored from the object store) made from their records,
// once per prefix, into pre.filled; the entries, which readers use
// without the fork's mutex, are not changed.
func (s *Store) fillPrefix(pre *forkPrefix, seg *prefixSeg, key *sessionKey) {
	var r *chunkReader
	for i := range seg.path {
		e := &seg.path[i]
		if e.Blob || e.Preview.Sealed() {
			continue
		}
		if _, ok := pre.filled.Load(e.ID); ok {
			continue
		}
		if r == nil {
			r = newChunkReader(s.opts.fs, filepath.Join(seg.dir, chunksDir), s.opts.frames)
			defer r.close()
		}
		pv := recordPreview(r, key, e).Cut(sealedPreviewText)
		pre.filled.Store(e.ID, slices.Clone(pv.Bytes()))
	}
}

// forkBlob reads the blob d of an event of session's prefix, from the
// sessions of its fork chain, for Resolve: found is false when none of
// them holds it.
func (s *Store) forkBlob(ctx context.Context, session uuid.UUID, d [32]byte, size int64) (rec []byte, holder uuid.UUID, found bool) {
	src := prefixSource{&s.opts, filepath.Join(s.dir, sessionsDir)}
	id, dir := session, s.sessionDir(session)
	for range maxForkDepth {
		m, _, err := readMeta(s.opts.fs, dir, id)
		if err != nil || m.ForkedFrom == nil {
			return nil, uuid.Nil, false
		}
		id = m.ForkedFrom.Session
		if dir, err = src.restore(id); err != nil {
			return nil, uuid.Nil, false
		}
		rec, err := readBlob(s.opts.fs, dir, d, size)
		if err != nil {
			if again, _ := s.fetchMissingBlob(ctx, dir, d, size); again {
				rec, err = readBlob(s.opts.fs, dir, d, size)
			}
		}
		if err == nil {
			return rec, id, true
		}
	}
	return nil, uuid.Nil, false
}

// verifyPrefix resolves the prefix of a fork for Verify; nil for a
// session that is not a fork.
func verifyPrefix(opts *Options, dir string, m Meta) (*forkPrefix, error) {
	if m.ForkedFrom == nil {
		return nil, nil
	}
	return resolveFork(prefixSource{opts, filepath.Dir(dir)}, *m.ForkedFrom, 1)
}

// prefixSource is where the sessions of a fork's chain are read: root,
// the sessions directory, for a local store. With Options.Remote, each
// is restored from the object store, read-only (no lease), into a copy
// of its own under forkCacheDir at the store root, which only the
// reading of prefixes uses: the session's own directory is its holder's
// (this Store's, when it opens it), and another Store may hold it.
type prefixSource struct {
	opts *Options
	root string
}

// forkCacheDir (internal/layout), at the store root, holds the copies of
// remote sessions that forks' prefixes are read from (prefixSource). It is
// derived from the object store and may be removed while the Store is
// closed.

// lock is held while a copy is restored or read; it returns the unlock.
func (src prefixSource) lock() func() {
	if src.opts.Remote == nil {
		return func() {}
	}
	src.opts.fetch.prefixMu.Lock()
	return src.opts.fetch.prefixMu.Unlock
}

// restore returns the directory to read session id from: its own, or
// with a Remote, its copy brought up to date with the object store's log
// (reconcileLocal, without a lease).
//
// Errors: ErrNotFound for a session the object store does not hold (or
// holds deleted); ErrRemote; a *CorruptionError naming an object's key.
func (src prefixSource) restore(id uuid.UUID) (string, error) {
	if src.opts.Remote == nil {
		return filepath.Join(src.root, id.String()), nil
	}
	o := src.opts
	dir := filepath.Join(filepath.Dir(src.root), forkCacheDir, id.String())
	defer src.lock()()
	if err := durable.MkdirAll(o.fs, dir, o.DirMode); err != nil {
		return "", err
	}
	local := newLocalFiles(o.fs, dir, o.FileMode, o.DirMode, o.ChunkSize, o.Logger.With("session", id), o.frames)
	rf := newRemoteFiles(local, o, id)
	ctx, cancel := context.WithTimeout(context.Background(), o.RemoteTimeout)
	defer cancel()
	// The log moved while it was read (errLogMoved: another Store wrote
	// to it): read it again, a few times, pausing between; then the
	// damage it wraps is the answer.
	for try := 1; ; try++ {
		v, err := rf.readView(ctx)
		if err == nil {
			if v == nil || v.Deleted() {
				// A deleted session's log ends with its delete marker,
				// which holds no metadata: its copy here, if any, is not
				// brought to that.
				return "", fmt.Errorf("%w: session %s", ErrNotFound, id)
			}
			err = rf.reconcileLocal(ctx, v, nil)
		}
		if !errors.Is(err, errLogMoved) || try == forkRestoreTries {
			if err != nil {
				return "", err
			}
			return dir, nil
		}
		select {
		case <-ctx.Done():
			return "", errors.Join(ctx.Err(), err)
		case <-time.After(time.Duration(try) * 20 * time.Millisecond):
		}
	}
}

// forkRestoreTries bounds the reads of a fork's prefix log that another
// Store writes to meanwhile.
const forkRestoreTries = 5
