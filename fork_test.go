package sessionstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// forkTexts appends user texts to session, returning the stored events.
func forkTexts(t *testing.T, s *Store, session uuid.UUID, texts ...string) []Event {
	t.Helper()
	out := make([]Event, len(texts))
	for i, txt := range texts {
		out[i] = apiAppend(t, s, session, UserText(txt))
	}
	return out
}

// forkIDs returns the ids of evs.
func forkIDs(evs []Event) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// forkNodeIDs returns the ids of ns.
func forkNodeIDs(ns []Node) []uuid.UUID {
	out := make([]uuid.UUID, len(ns))
	for i, n := range ns {
		out[i] = n.ID
	}
	return out
}

// forkTree lists the files under dir with their contents.
func forkTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if d.Name() == lockName {
			return nil
		}
		b, err := os.ReadFile(p)
		out[strings.TrimPrefix(p, dir)] = string(b)
		return err
	}))
	return out
}

func TestForkReadsParentPrefix(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, nil)
	parent, err := s.Create(ctx, Meta{Name: "parent", Model: "m1", WorkingDir: "/w", Labels: map[string]string{"team": "core"}})
	require.NoError(t, err)
	pev := forkTexts(t, s, parent.ID, "p0", "p1", "p2", "p3")
	// A branch of the parent off p1: not on the fork's prefix.
	require.NoError(t, s.Branch(ctx, parent.ID, pev[1].ID))
	side := apiAppend(t, s, parent.ID, UserText("side"))

	before := forkTree(t, s.sessionDir(parent.ID))
	fork, err := s.Fork(ctx, parent.ID, pev[2].ID)
	require.NoError(t, err)
	assert.NotEqual(t, parent.ID, fork.ID)
	require.NotNil(t, fork.ForkedFrom)
	assert.Equal(t, ForkPoint{Session: parent.ID, Event: pev[2].ID}, *fork.ForkedFrom)
	assert.Equal(t, "parent", fork.Name)
	assert.Equal(t, "m1", fork.Model)
	assert.Equal(t, "/w", fork.WorkingDir)
	assert.Equal(t, map[string]string{"team": "core"}, fork.Labels)
	assert.Equal(t, before, forkTree(t, s.sessionDir(parent.ID)), "Fork wrote to the parent")

	// Nothing of the parent was copied: the fork holds session.json and
	// an empty index (made by its open), no chunk, no blob, no HEAD.
	files := forkTree(t, s.sessionDir(fork.ID))
	assert.ElementsMatch(t, []string{"/" + metaFile, "/" + indexName}, keys(files))
	assert.Empty(t, files["/"+indexName])

	// Before its own events, the fork's HEAD is the fork point.
	head, err := s.Head(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, pev[2].ID, head)
	loaded, err := s.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, forkIDs(pev[:3]), forkIDs(loaded))
	assert.Equal(t, "p2", forkText(loaded[2]))

	own := forkTexts(t, s, fork.ID, "f0", "f1")
	assert.Equal(t, pev[2].ID, own[0].ParentID, "the fork's first event is a child of the fork point")
	assert.Equal(t, own[0].ID, own[1].ParentID)

	// The parent goes on; its later events are not the fork's.
	later := apiAppend(t, s, parent.ID, UserText("p4"))

	want := append(forkIDs(pev[:3]), forkIDs(own)...)
	loaded, err = s.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, want, forkIDs(loaded))
	full, err := s.FullPath(ctx, fork.ID, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, want, forkIDs(full))
	lp, err := s.LoadPath(ctx, fork.ID, pev[1].ID)
	require.NoError(t, err)
	assert.Equal(t, forkIDs(pev[:2]), forkIDs(lp))

	tree, err := s.Tree(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, want, forkNodeIDs(tree), "Tree: the prefix path, then the fork's own events")

	ev, err := s.Event(ctx, fork.ID, pev[0].ID)
	require.NoError(t, err)
	assert.Equal(t, "p0", forkText(ev))
	for _, off := range []uuid.UUID{side.ID, pev[3].ID, later.ID} {
		_, err = s.Event(ctx, fork.ID, off)
		assert.ErrorIs(t, err, ErrNotFound, "a parent event off the prefix is not the fork's")
		_, err = s.LoadPath(ctx, fork.ID, off)
		assert.ErrorIs(t, err, ErrNotFound)
	}
	kids, err := s.Children(ctx, fork.ID, pev[2].ID)
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{own[0].ID}, forkNodeIDs(kids))
	roots, err := s.Children(ctx, fork.ID, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{pev[0].ID}, forkNodeIDs(roots))

	// After a reopen, the same.
	require.NoError(t, s.Close())
	s = apiOpen(t, dir, nil)
	loaded, err = s.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, want, forkIDs(loaded))
	rep, err := s.Verify(ctx, fork.ID)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "Verify of a fork: %v", rep.Problems)
	pl, err := s.Load(ctx, parent.ID)
	require.NoError(t, err)
	assert.Equal(t, append(forkIDs(pev[:2]), side.ID, later.ID), forkIDs(pl), "the parent is unchanged")
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestForkBranchIntoPrefix(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, nil)
	parent := apiNewSession(t, s)
	pev := forkTexts(t, s, parent, "p0", "p1", "p2")
	fork, err := s.Fork(ctx, parent, pev[2].ID)
	require.NoError(t, err)
	forkTexts(t, s, fork.ID, "f0")

	require.NoError(t, s.Branch(ctx, fork.ID, pev[0].ID))
	next, branching, err := s.NextParent(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, pev[0].ID, next)
	assert.True(t, branching)
	b := apiAppend(t, s, fork.ID, UserText("b"))
	assert.Equal(t, pev[0].ID, b.ParentID)
	assert.Equal(t, pev[0].ID, b.BranchFrom)

	require.NoError(t, s.Close())
	s = apiOpen(t, dir, nil)
	loaded, err := s.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{pev[0].ID, b.ID}, forkIDs(loaded))
	tree, err := s.Tree(ctx, fork.ID)
	require.NoError(t, err)
	assert.Len(t, tree, 3+2)

	err = s.Branch(ctx, fork.ID, uuid.Must(uuid.NewV7()))
	assert.ErrorIs(t, err, ErrNotFound)
}

func TestForkOfForkDepth3(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, nil)
	s0 := apiNewSession(t, s)
	e0 := forkTexts(t, s, s0, "a0", "a1", "a2")
	f1, err := s.Fork(ctx, s0, e0[1].ID)
	require.NoError(t, err)
	e1 := forkTexts(t, s, f1.ID, "b0", "b1")
	// f2 forks f1 at an event of f1's own prefix (a0), f3 forks f2 at its own event.
	f2, err := s.Fork(ctx, f1.ID, e1[1].ID)
	require.NoError(t, err)
	e2 := forkTexts(t, s, f2.ID, "c0")
	f3, err := s.Fork(ctx, f2.ID, e2[0].ID)
	require.NoError(t, err)
	e3 := forkTexts(t, s, f3.ID, "d0")
	fa, err := s.Fork(ctx, f2.ID, e0[0].ID)
	require.NoError(t, err, "forking at an event of the parent's prefix")

	want := slicesConcat(forkIDs(e0[:2]), forkIDs(e1), forkIDs(e2), forkIDs(e3))
	check := func(s *Store) {
		t.Helper()
		loaded, err := s.Load(ctx, f3.ID)
		require.NoError(t, err)
		assert.Equal(t, want, forkIDs(loaded))
		tree, err := s.Tree(ctx, f3.ID)
		require.NoError(t, err)
		assert.Equal(t, want, forkNodeIDs(tree))
		for i, id := range want {
			ev, err := s.Event(ctx, f3.ID, id)
			require.NoError(t, err, "event %d", i)
			assert.Equal(t, id, ev.ID)
		}
		loaded, err = s.Load(ctx, fa.ID)
		require.NoError(t, err)
		assert.Equal(t, []uuid.UUID{e0[0].ID}, forkIDs(loaded))
	}
	check(s)
	require.NoError(t, s.Close())
	check(apiOpen(t, dir, nil))
	ro := apiOpen(t, dir, &Options{ReadOnly: true})
	check(ro)
}

func slicesConcat(parts ...[]uuid.UUID) []uuid.UUID {
	var out []uuid.UUID
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func TestForkRefuses(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, nil)
	parent := apiNewSession(t, s)
	pev := forkTexts(t, s, parent, "p0")
	other := apiNewSession(t, s)
	oev := forkTexts(t, s, other, "o0")
	tests := []struct {
		name       string
		parent, at uuid.UUID
		want       error
	}{
		{"unknown parent", uuid.Must(uuid.NewV7()), pev[0].ID, ErrNotFound},
		{"unknown event", parent, uuid.Must(uuid.NewV7()), ErrNotFound},
		{"event of another session", parent, oev[0].ID, ErrNotFound},
		{"nil event", parent, uuid.Nil, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := s.List(ctx)
			require.NoError(t, err)
			_, err = s.Fork(ctx, tt.parent, tt.at)
			assert.ErrorIs(t, err, tt.want)
			after, err := s.List(ctx)
			require.NoError(t, err)
			assert.Len(t, after, len(before), "a refused Fork creates nothing")
		})
	}
	t.Run("not open in this store", func(t *testing.T) {
		require.NoError(t, s.CloseSession(ctx, parent))
		_, err := s.Fork(ctx, parent, oev[0].ID)
		assert.ErrorIs(t, err, ErrNotFound)
		f, err := s.Fork(ctx, parent, pev[0].ID)
		require.NoError(t, err)
		assert.Equal(t, pev[0].ID, f.ForkedFrom.Event)
	})
	t.Run("read-only", func(t *testing.T) {
		ro := apiOpen(t, dir, &Options{ReadOnly: true})
		_, err := ro.Fork(ctx, parent, pev[0].ID)
		assert.ErrorIs(t, err, ErrReadOnly)
	})
}

// A chain of ForkedFrom that loops (written by hand) is refused, not
// followed forever.
func TestForkChainCycle(t *testing.T) {
	ctx := context.Background()
	s, _ := apiNewStore(t, nil)
	a := apiNewSession(t, s)
	ev := forkTexts(t, s, a, "x")
	f, err := s.Fork(ctx, a, ev[0].ID)
	require.NoError(t, err)
	require.NoError(t, s.CloseSession(ctx, a))
	// Make a a fork of f: a cycle a -> f -> a.
	m, format, err := readMeta(s.opts.fs, s.sessionDir(a), a)
	require.NoError(t, err)
	m.ForkedFrom = &ForkPoint{Session: f.ID, Event: ev[0].ID}
	b, err := encodeMeta(m, format)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(s.sessionDir(a), metaFile), b, 0o644))
	require.NoError(t, s.CloseSession(ctx, f.ID))

	_, err = s.Load(ctx, f.ID)
	assert.ErrorIs(t, err, ErrForkChain)
	_, err = s.Fork(ctx, f.ID, ev[0].ID)
	assert.ErrorIs(t, err, ErrForkChain)
}

// The parent may be held by another writer (another Store: its lock is
// taken): the fork's prefix is read without the parent's lock.
func TestForkParentLockedElsewhere(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, nil)
	parent := apiNewSession(t, s)
	pev := forkTexts(t, s, parent, "p0", "p1")

	other := apiOpen(t, dir, nil)
	fork, err := other.Fork(ctx, parent, pev[1].ID)
	require.NoError(t, err)
	_, err = other.Append(ctx, parent, UserText("x"))
	require.ErrorIs(t, err, ErrLocked, "precondition: s holds the parent")
	own := forkTexts(t, other, fork.ID, "f0")
	forkTexts(t, s, parent, "p2") // the parent's writer goes on meanwhile
	loaded, err := other.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, append(forkIDs(pev), own[0].ID), forkIDs(loaded))
}

// Prefix events' blobs are in the parent's blob directory.
func TestForkBlobsOfPrefix(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, &Options{BlobThreshold: 64})
	parent := apiNewSession(t, s)
	big := strings.Repeat("large record ", 50)
	pev := forkTexts(t, s, parent, big, "small")
	require.NotEmpty(t, pev[0].Digest, "precondition: the record is a blob")
	fork, err := s.Fork(ctx, parent, pev[1].ID)
	require.NoError(t, err)
	own := forkTexts(t, s, fork.ID, big+"own")
	require.NotEmpty(t, own[0].Digest)

	loaded, err := s.Load(ctx, fork.ID)
	require.NoError(t, err)
	require.Len(t, loaded, 3)
	assert.Equal(t, big, forkText(loaded[0]))
	assert.Equal(t, big+"own", forkText(loaded[2]))

	ev, err := s.Event(ctx, fork.ID, pev[0].ID)
	require.NoError(t, err)
	require.Nil(t, ev.Record, "precondition: Event leaves a blob unresolved")
	ev, err = s.Resolve(ctx, fork.ID, ev)
	require.NoError(t, err)
	assert.Equal(t, big, forkText(ev))

	require.NoError(t, s.Close())
	s = apiOpen(t, dir, &Options{BlobThreshold: 64})
	loaded, err = s.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, big, forkText(loaded[0]))
}

// Compact in a fork may keep events of the prefix verbatim, and a
// compaction in the parent's prefix bounds the fork's Load.
func TestForkCompactAcrossBoundary(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, nil)
	parent := apiNewSession(t, s)
	pev := forkTexts(t, s, parent, "p0", "p1", "p2")
	fork, err := s.Fork(ctx, parent, pev[2].ID)
	require.NoError(t, err)
	own := forkTexts(t, s, fork.ID, "f0")

	c, err := s.Compact(ctx, fork.ID, Compaction{Summary: Summary{Text: "so far"}, Head: own[0].ID, FirstKept: pev[1].ID})
	require.NoError(t, err)
	after := apiAppend(t, s, fork.ID, UserText("f1"))
	want := []uuid.UUID{c.ID, pev[1].ID, pev[2].ID, own[0].ID, after.ID}
	check := func(s *Store) {
		t.Helper()
		loaded, err := s.Load(ctx, fork.ID)
		require.NoError(t, err)
		assert.Equal(t, want, forkIDs(loaded))
		full, err := s.FullPath(ctx, fork.ID, uuid.Nil)
		require.NoError(t, err)
		assert.Len(t, full, 6)
	}
	check(s)
	require.NoError(t, s.Close())
	s = apiOpen(t, dir, nil)
	check(s)

	_, err = s.Compact(ctx, fork.ID, Compaction{Summary: Summary{Text: "x"}, Head: after.ID, FirstKept: uuid.Must(uuid.NewV7())})
	assert.ErrorIs(t, err, ErrInvalidEvent, "FirstKept off the path is still refused")

	// A compaction in the parent, on the prefix of a second fork.
	pc, err := s.Compact(ctx, parent, Compaction{Summary: Summary{Text: "parent"}, Head: pev[2].ID})
	require.NoError(t, err)
	f2, err := s.Fork(ctx, parent, pc.ID)
	require.NoError(t, err)
	o2 := forkTexts(t, s, f2.ID, "g0")
	loaded, err := s.Load(ctx, f2.ID)
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{pc.ID, o2[0].ID}, forkIDs(loaded))
}

// InterruptedToolCalls sees a call of the prefix the fork has not
// answered, and the repair answers it in the fork, not in the parent.
func TestForkInterruptedAcrossBoundary(t *testing.T) {
	ctx := context.Background()
	s, _ := apiNewStore(t, nil)
	parent := apiNewSession(t, s)
	forkTexts(t, s, parent, "go")
	call := apiAppend(t, s, parent, ToolCallEvent(ToolCall{CallID: "c1", Name: "deploy"}))
	fork, err := s.Fork(ctx, parent, call.ID)
	require.NoError(t, err)

	calls, err := s.InterruptedToolCalls(ctx, fork.ID)
	require.NoError(t, err)
	require.Len(t, calls, 1)
	assert.Equal(t, call.ID, calls[0].ID)
	repaired, err := s.RepairInterruptedToolCalls(ctx, fork.ID)
	require.NoError(t, err)
	require.Len(t, repaired, 1)
	assert.Equal(t, call.ID, repaired[0].ParentID)
	calls, err = s.InterruptedToolCalls(ctx, fork.ID)
	require.NoError(t, err)
	assert.Empty(t, calls)
	pcalls, err := s.InterruptedToolCalls(ctx, parent)
	require.NoError(t, err)
	assert.Len(t, pcalls, 1, "the parent is not repaired by the fork's repair")
}

func TestForkListAndMeta(t *testing.T) {
	ctx := context.Background()
	s, dir := apiNewStore(t, nil)
	parent := apiNewSession(t, s)
	pev := forkTexts(t, s, parent, "p0")
	fork, err := s.Fork(ctx, parent, pev[0].ID)
	require.NoError(t, err)
	_, err = s.Load(ctx, fork.ID) // opens it
	require.NoError(t, err)
	require.NoError(t, s.Close())
	_, err = os.Stat(filepath.Join(s.sessionDir(fork.ID), headfile.Name))
	assert.ErrorIs(t, err, os.ErrNotExist, "a fork without events of its own has no HEAD file, also after Close")
	s = apiOpen(t, dir, nil)
	rep, err := s.Verify(ctx, fork.ID)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	head, err := s.Head(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, pev[0].ID, head)
	m, err := s.Meta(ctx, fork.ID)
	require.NoError(t, err)
	require.NotNil(t, m.ForkedFrom)
	assert.Equal(t, ForkPoint{Session: parent, Event: pev[0].ID}, *m.ForkedFrom)
	all, err := s.List(ctx)
	require.NoError(t, err)
	found := false
	for _, l := range all {
		if l.ID == fork.ID {
			found = true
		}
	}
	assert.True(t, found, fmt.Sprintf("fork %s listed", fork.ID))
}

// forkText returns the text of a message event, "" if it has none.
func forkText(ev Event) string {
	m, err := ev.Message()
	if err != nil {
		return ""
	}
	return m.Content
}

// With a Remote, another Store (another machine: its own root) opens the
// fork and reads its prefix from the parent's objects, while the
// parent's holder goes on appending; the parent's lease is not taken.
func TestForkRemote(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	parent, err := a.Create(ctx, Meta{Name: "remote parent"})
	require.NoError(t, err)
	big := strings.Repeat("large ", 40)
	pev := forkTexts(t, a, parent.ID, "p0", big, "p2")
	fork, err := a.Fork(ctx, parent.ID, pev[2].ID)
	require.NoError(t, err)
	own := forkTexts(t, a, fork.ID, "f0")
	require.NoError(t, a.CloseSession(ctx, fork.ID))
	forkTexts(t, a, parent.ID, "p3") // a holds the parent and goes on

	b, _ := apiNewStore(t, remoteOpts(obj))
	loaded, err := b.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, append(forkIDs(pev), own[0].ID), forkIDs(loaded))
	assert.Equal(t, big, forkText(loaded[1]))
	ev, err := b.Event(ctx, fork.ID, pev[1].ID)
	require.NoError(t, err)
	ev, err = b.Resolve(ctx, fork.ID, ev)
	require.NoError(t, err)
	assert.Equal(t, big, forkText(ev))
	more := apiAppend(t, b, fork.ID, UserText("f1 on b"))
	assert.Equal(t, own[0].ID, more.ParentID)

	_, err = b.Append(ctx, parent.ID, UserText("x"))
	assert.ErrorIs(t, err, ErrLocked, "a still holds the parent: b read it without its lease")
	forkTexts(t, a, parent.ID, "p4")

	// b forks the parent at an event a appended after b's first read.
	p5 := apiAppend(t, a, parent.ID, UserText("p5"))
	f2, err := b.Fork(ctx, parent.ID, p5.ID)
	require.NoError(t, err)
	loaded, err = b.Load(ctx, f2.ID)
	require.NoError(t, err)
	require.NotEmpty(t, loaded)
	assert.Equal(t, p5.ID, loaded[len(loaded)-1].ID)
	_, err = b.Fork(ctx, parent.ID, uuid.Must(uuid.NewV7()))
	assert.ErrorIs(t, err, ErrNotFound)

	// A third Store sees both forks.
	require.NoError(t, b.CloseSession(ctx, fork.ID))
	c, _ := apiNewStore(t, remoteOpts(obj))
	m, err := c.Meta(ctx, f2.ID)
	require.NoError(t, err)
	require.NotNil(t, m.ForkedFrom)
	assert.Equal(t, p5.ID, m.ForkedFrom.Event)
	loaded, err = c.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Len(t, loaded, 5)
}

// A fork's own events fill and seal chunks of its own (their embedded
// indexes name the prefix event as a parent); the fork reopens, for
// writing and in a read-only store, with every event.
func TestForkOwnSealedChunks(t *testing.T) {
	ctx := context.Background()
	o := &Options{ChunkSize: 1 << 10}
	s, dir := apiNewStore(t, o)
	parent := apiNewSession(t, s)
	pev := forkTexts(t, s, parent, "p0", "p1")
	fork, err := s.Fork(ctx, parent, pev[1].ID)
	require.NoError(t, err)
	var own []Event
	for i := range 30 {
		own = append(own, apiAppend(t, s, fork.ID, UserText(fmt.Sprintf("own %d %s", i, strings.Repeat("x", 100)))))
	}
	require.NoError(t, s.Close())
	names, err := os.ReadDir(filepath.Join(s.sessionDir(fork.ID), chunksDir))
	require.NoError(t, err)
	require.Greater(t, len(names), 2, "precondition: the fork has several chunks")
	assert.Contains(t, names[0].Name(), sealedExt, "precondition: its first chunk is sealed")

	want := append(forkIDs(pev), forkIDs(own)...)
	for _, opts := range []*Options{o, {ChunkSize: 1 << 10, ReadOnly: true}} {
		s := apiOpen(t, dir, opts)
		loaded, err := s.Load(ctx, fork.ID)
		require.NoError(t, err)
		assert.Equal(t, want, forkIDs(loaded))
		tree, err := s.Tree(ctx, fork.ID)
		require.NoError(t, err)
		assert.Equal(t, want, forkNodeIDs(tree))
		rep, err := s.Verify(ctx, fork.ID)
		require.NoError(t, err)
		assert.True(t, rep.OK(), "%v", rep.Problems)
		require.NoError(t, s.Close())
	}
}

// TestForkCallerIDInPrefix: an append to a fork carrying the id of one of
// its prefix events (its parent's) is a conflict, and writes nothing.
func TestForkCallerIDInPrefix(t *testing.T) {
	ctx := context.Background()
	st, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	defer st.Close()
	parent, err := st.Create(ctx, Meta{Name: "parent"})
	require.NoError(t, err)
	root, err := st.Append(ctx, parent.ID, UserText("first"))
	require.NoError(t, err)
	at, err := st.Append(ctx, parent.ID, AssistantText("second"))
	require.NoError(t, err)
	fork, err := st.Fork(ctx, parent.ID, at.ID)
	require.NoError(t, err)

	again := UserText("first")
	again.ID = root.ID
	_, err = st.Append(ctx, fork.ID, again)
	assert.ErrorIs(t, err, ErrConflict)
	path, err := st.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Len(t, path, 2, "the fork holds only its prefix")
}
