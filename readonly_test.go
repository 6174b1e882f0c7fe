package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// Tests of read-only stores (readonly.go) within one process: a writing
// Store and a read-only one on the same directory. xproc_test.go runs the
// writer in another process.

// roGuardFS is the filesystem of a read-only store under test: it refuses,
// and records, every operation that could change the filesystem (opening a
// file with any flag but O_RDONLY, writing, truncating or syncing a file,
// mkdir, remove, rename, directory sync, lock), and counts the files opened
// for reading, so a test can show that the store read through it.
type roGuardFS struct {
	vfs.FS
	// hook, if set before the store is used, runs at the start of every
	// OpenFile (op "open"), Read and ReadAt (op "read") and Close of a
	// file (op "close"), so a test can make a writer act at a chosen point
	// of a read. It may run on several goroutines at once.
	hook   func(op, path string)
	opens  atomic.Int64
	mu     sync.Mutex
	writes []string // "op path" of each refused operation
}

var errROGuard = errors.New("read-only guard: mutating operation refused")

func (g *roGuardFS) refuse(op, path string) error {
	g.mu.Lock()
	g.writes = append(g.writes, op+" "+path)
	g.mu.Unlock()
	return &fs.PathError{Op: op, Path: path, Err: errROGuard}
}

// mutations returns the operations refused so far.
func (g *roGuardFS) mutations() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.writes)
}

func (g *roGuardFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if g.hook != nil {
		g.hook("open", name)
	}
	if flag != os.O_RDONLY {
		return nil, g.refuse(fmt.Sprintf("open(flag %#x)", flag), name)
	}
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	g.opens.Add(1)
	return &roGuardFile{File: f, g: g}, nil
}

func (g *roGuardFS) MkdirAll(name string, _ fs.FileMode) error { return g.refuse("mkdir", name) }
func (g *roGuardFS) Remove(name string) error                  { return g.refuse("remove", name) }
func (g *roGuardFS) Rename(oldname, newname string) error {
	return g.refuse("rename", oldname+" -> "+newname)
}
func (g *roGuardFS) SyncDir(name string) error { return g.refuse("syncdir", name) }
func (g *roGuardFS) Lock(name string, _ fs.FileMode) (io.Closer, error) {
	return nil, g.refuse("lock", name)
}

type roGuardFile struct {
	vfs.File
	g *roGuardFS
}

func (f *roGuardFile) Write([]byte) (int, error)          { return 0, f.g.refuse("write", f.Name()) }
func (f *roGuardFile) WriteAt([]byte, int64) (int, error) { return 0, f.g.refuse("write", f.Name()) }
func (f *roGuardFile) Truncate(int64) error               { return f.g.refuse("truncate", f.Name()) }
func (f *roGuardFile) Sync() error                        { return f.g.refuse("sync", f.Name()) }

func (f *roGuardFile) Read(p []byte) (int, error) {
	if f.g.hook != nil {
		f.g.hook("read", f.Name())
	}
	return f.File.Read(p)
}

func (f *roGuardFile) ReadAt(p []byte, off int64) (int, error) {
	if f.g.hook != nil {
		f.g.hook("read", f.Name())
	}
	return f.File.ReadAt(p, off)
}

func (f *roGuardFile) Close() error {
	if f.g.hook != nil {
		f.g.hook("close", f.Name())
	}
	return f.File.Close()
}

// roOpen opens a read-only store on dir through a guard (around o.fs, or
// the OS filesystem) and, when the test ends, closes it and checks that
// the guard refused nothing.
func roOpen(t testing.TB, dir string, o Options) (*Store, *roGuardFS) {
	t.Helper()
	base := o.fs
	if base == nil {
		base = vfs.Default
	}
	g := &roGuardFS{FS: base}
	o.ReadOnly, o.fs = true, g
	s, err := Open(dir, &o)
	require.NoError(t, err)
	t.Cleanup(func() {
		assert.NoError(t, s.Close())
		assert.Empty(t, g.mutations(), "the read-only store tried to change the filesystem")
	})
	return s, g
}

// roChain checks that path is a path of the tree: the first event is a
// root, each next one a child of the one before, ids unique, branch_from
// empty or the parent.
func roChain(t *testing.T, path []Event) {
	t.Helper()
	seen := make(map[uuid.UUID]bool, len(path))
	for i, ev := range path {
		want := uuid.Nil
		if i > 0 {
			want = path[i-1].ID
		}
		if ev.ParentID != want || seen[ev.ID] || (ev.BranchFrom != uuid.Nil && ev.BranchFrom != ev.ParentID) {
			require.Failf(t, "not a path", "event %d of %d: %s, parent %s, branch_from %s; want parent %s (seen before: %v)",
				i, len(path), ev.ID, ev.ParentID, ev.BranchFrom, want, seen[ev.ID])
		}
		seen[ev.ID] = true
	}
}

// roChunkFiles lists the names in a session's chunk directory.
func roChunkFiles(t *testing.T, dir string, session uuid.UUID) []string {
	t.Helper()
	des, err := os.ReadDir(filepath.Join(apiSessionDir(dir, session), chunksDir))
	require.NoError(t, err)
	var out []string
	for _, de := range des {
		out = append(out, de.Name())
	}
	return out
}

func roCount(names []string, suffix string) int {
	n := 0
	for _, name := range names {
		if strings.HasSuffix(name, suffix) {
			n++
		}
	}
	return n
}

func TestReadOnlyOpenNeedsExistingRoot(t *testing.T) {
	parent := t.TempDir()
	missing := filepath.Join(parent, "missing")
	_, err := Open(missing, &Options{ReadOnly: true})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoStore)
	assert.Equal(t, "sessionstore: no store at "+missing+" (no sessions directory)", err.Error())
	_, err = os.Stat(missing)
	assert.ErrorIs(t, err, os.ErrNotExist, "a read-only Open created the root")

	// A directory that is not a root (no sessions/) is refused too, and
	// stays empty.
	empty := t.TempDir()
	_, err = Open(empty, &Options{ReadOnly: true})
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrNoStore)
	assert.Contains(t, err.Error(), "no store at "+empty)
	des, err := os.ReadDir(empty)
	require.NoError(t, err)
	assert.Empty(t, des, "a read-only Open wrote into the directory")

	// Once a writer has made it a root, a reader opens it.
	apiOpen(t, empty, nil)
	r, _ := roOpen(t, empty, Options{})
	list, err := r.List(t.Context())
	require.NoError(t, err)
	assert.Empty(t, list)
	_, err = r.Load(t.Context(), uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)
}

// roCountingSummarizer counts its calls.
type roCountingSummarizer struct{ calls atomic.Int64 }

func (c *roCountingSummarizer) Summarize(ctx context.Context, evs []Event) (Summary, error) {
	c.calls.Add(1)
	return testSummarizer{}.Summarize(ctx, evs)
}

func TestReadOnlyWriteCallsRefused(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	w := apiOpen(t, dir, nil)
	id := apiNewSession(t, w)
	first := apiAppend(t, w, id, UserText("read two files"))
	call1 := apiAppend(t, w, id, ToolCallEvent(ToolCall{CallID: "c1", Name: "read_file", Arguments: json.RawMessage(`{"path":"a"}`)}))
	res1 := apiAppend(t, w, id, ToolResultEvent(ToolResult{CallID: "c1", Output: strings.Repeat("x", 20<<10)}))
	require.NotEmpty(t, res1.Digest, "precondition: the big result is a blob")
	call2 := apiAppend(t, w, id, ToolCallEvent(ToolCall{CallID: "c2", Name: "read_file", Arguments: json.RawMessage(`{"path":"b"}`)}))
	appended := []Event{first, call1, res1, call2}
	// A second session, with nothing to repair.
	other := apiNewSession(t, w)
	otherEv := apiAppend(t, w, other, UserText("all answered"))
	require.NoError(t, w.Close())
	// A blob no event refers to, which GC would remove.
	stray := filepath.Join(apiSessionDir(dir, id), blobsDir, "sha256", "ab", strings.Repeat("c", 62)+blobExt)
	require.NoError(t, os.MkdirAll(filepath.Dir(stray), 0o700))
	require.NoError(t, os.WriteFile(stray, []byte("stray"), 0o600))
	before := apiFiles(t, dir)

	// MaxOpenSessions 1: the two sessions evict each other, and closing a
	// read-only handle must write nothing either.
	r, g := roOpen(t, dir, Options{MaxOpenSessions: 1})
	sum := &roCountingSummarizer{}
	writes := []struct {
		name    string
		session uuid.UUID
		call    func(t *testing.T, session uuid.UUID) error
	}{
		{"Create", uuid.Nil, func(*testing.T, uuid.UUID) error { _, err := r.Create(ctx, Meta{Name: "new"}); return err }},
		{"CreateExisting", uuid.Nil, func(*testing.T, uuid.UUID) error { _, err := r.Create(ctx, Meta{ID: id}); return err }},
		{"Append", id, func(t *testing.T, s uuid.UUID) error { _, err := r.Append(ctx, s, UserText("x")); return err }},
		{"AppendOther", other, func(t *testing.T, s uuid.UUID) error { _, err := r.Append(ctx, s, UserText("x")); return err }},
		{"AppendBatch", id, func(t *testing.T, s uuid.UUID) error {
			_, err := r.AppendBatch(ctx, s, UserText("x"), UserText("y"))
			return err
		}},
		{"Branch", id, func(t *testing.T, s uuid.UUID) error { return r.Branch(ctx, s, first.ID) }},
		{"Compact", id, func(t *testing.T, s uuid.UUID) error {
			_, err := r.Compact(ctx, s, Compaction{Summary: Summary{Text: "s"}, Head: call2.ID})
			return err
		}},
		{"CompactWith", id, func(t *testing.T, s uuid.UUID) error {
			_, err := r.CompactWith(ctx, s, sum, CompactOptions{})
			assert.Zero(t, sum.calls.Load(), "CompactWith asked the summarizer (a model call) for a compaction a read-only store cannot write")
			return err
		}},
		{"AppendBranchSummary", id, func(t *testing.T, s uuid.UUID) error {
			_, err := r.AppendBranchSummary(ctx, s, first.ID, BranchSummaryRecord{Summary: Summary{Text: "s"}})
			return err
		}},
		{"UpdateMeta", id, func(t *testing.T, s uuid.UUID) error {
			_, err := r.UpdateMeta(ctx, s, func(m *Meta) { m.Name = "renamed" })
			return err
		}},
		{"GC", id, func(t *testing.T, s uuid.UUID) error { _, err := r.GC(ctx, s); return err }},
		{"Flush", id, func(t *testing.T, s uuid.UUID) error { return r.Flush(ctx, s) }},
		{"RepairInterruptedToolCalls", id, func(t *testing.T, s uuid.UUID) error {
			out, err := r.RepairInterruptedToolCalls(ctx, s)
			assert.Empty(t, out)
			return err
		}},
		// With nothing to repair it would write nothing, but it is a write
		// call: it must not depend on whether the writer is between a
		// call and its result at that moment.
		{"RepairInterruptedToolCallsNothingToRepair", other, func(t *testing.T, s uuid.UUID) error {
			out, err := r.RepairInterruptedToolCalls(ctx, s)
			assert.Empty(t, out)
			return err
		}},
	}
	for _, c := range writes {
		t.Run(c.name, func(t *testing.T) {
			assert.ErrorIs(t, c.call(t, c.session), ErrReadOnly)
		})
	}

	// Every read works, and sees the session as written.
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.ElementsMatch(t, []uuid.UUID{id, other}, []uuid.UUID{list[0].ID, list[1].ID})
	m, err := r.Meta(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, "test session", m.Name)
	assert.Equal(t, call2.ID, apiHead(t, r, id))
	parent, branching, err := r.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, call2.ID, parent)
	assert.False(t, branching)
	loaded, err := r.Load(ctx, id)
	require.NoError(t, err)
	apiSameEvents(t, appended, loaded)
	apiSameEvents(t, appended, apiLoad(t, r, id))
	lp, err := r.LoadPath(ctx, id, call1.ID)
	require.NoError(t, err)
	apiSameEvents(t, appended[:2], lp)
	ev, err := r.Event(ctx, id, res1.ID)
	require.NoError(t, err)
	assert.Nil(t, ev.Record, "Event leaves a blob unresolved")
	ev, err = r.Resolve(ctx, id, ev)
	require.NoError(t, err)
	apiSameEvent(t, res1, ev)
	assert.Equal(t, apiIDs(appended), apiNodeIDs(apiTree(t, r, id)))
	kids, err := r.Children(ctx, id, first.ID)
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{call1.ID}, apiNodeIDs(kids))
	open, err := r.InterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, []uuid.UUID{call2.ID}, apiIDs(open))
	ab, err := r.Abandoned(ctx, id, first.ID)
	require.NoError(t, err)
	assert.Equal(t, apiIDs(appended[1:]), apiIDs(ab))
	rep, err := r.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "problems: %v", rep.Problems)
	assert.Equal(t, 4, rep.Records)
	_, err = r.Revision(ctx, id)
	require.NoError(t, err)
	apiSameEvents(t, []Event{otherEv}, apiLoad(t, r, other))

	// Nothing changed on disk, and the guard refused nothing.
	assert.Equal(t, before, apiFiles(t, dir))
	assert.Empty(t, g.mutations())
	assert.Positive(t, g.opens.Load(), "the store read through the guard")

	// The reader took no lock: a writer opens the session beside it, and
	// the reader sees what it appends.
	w2 := apiOpen(t, dir, nil)
	next := apiAppend(t, w2, id, ToolResultEvent(ToolResult{CallID: "c2", Output: "b"}))
	apiSameEvents(t, append(appended, next), apiLoad(t, r, id))
	open, err = r.InterruptedToolCalls(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, open)
}

func TestReadOnlySeesAcknowledgedAppends(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	// Small chunks: rotation and sealing every few events.
	wopts := &Options{ChunkSize: 2 << 10}
	w := apiOpen(t, dir, wopts)
	r, g := roOpen(t, dir, Options{})

	// A session created after the reader opened.
	id := apiNewSession(t, w)
	list, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, id, list[0].ID)
	empty, err := r.Load(ctx, id)
	require.NoError(t, err)
	assert.Empty(t, empty)
	assert.Equal(t, uuid.Nil, apiHead(t, r, id))
	assert.Empty(t, apiTree(t, r, id))

	var all []Event // in append order
	check := func(i int, ev Event) {
		t.Helper()
		// Each kind of call sees the event right after its Append
		// returned, whichever comes first after it.
		switch i % 4 {
		case 0:
			got, err := r.Event(ctx, id, ev.ID)
			require.NoError(t, err, "Event of an acknowledged event")
			apiSameEvent(t, ev, got)
		case 1:
			assert.Equal(t, ev.ID, apiHead(t, r, id), "Head")
		case 2:
			nodes := apiTree(t, r, id)
			require.Len(t, nodes, len(all), "Tree")
			assert.Equal(t, apiIDs(all), apiNodeIDs(nodes))
		case 3:
			apiSameEvents(t, apiLoad(t, w, id), apiLoad(t, r, id))
		}
		// And every view agrees with the writer's.
		got, err := r.Load(ctx, id)
		require.NoError(t, err)
		roChain(t, got)
		apiSameEvents(t, mustLoad(t, w, id), got)
		apiSameNodes(t, apiTree(t, w, id), apiTree(t, r, id))
	}
	for i := range 60 {
		if i%10 == 9 {
			// Start a branch at an older event.
			require.NoError(t, w.Branch(ctx, id, all[i/2].ID))
		}
		var ev Event
		if i%3 == 0 {
			ev = apiAppend(t, w, id, ToolResultEvent(ToolResult{CallID: fmt.Sprint(i), Output: strings.Repeat("r", 300+i*7)}))
		} else {
			ev = apiAppend(t, w, id, UserText(fmt.Sprintf("message %d", i)))
		}
		all = append(all, ev)
		check(i, ev)
	}
	// A batch is seen whole.
	batch, err := w.AppendBatch(ctx, id, AssistantText("calling"),
		ToolCallEvent(ToolCall{CallID: "b1", Name: "ls"}), ToolCallEvent(ToolCall{CallID: "b2", Name: "pwd"}))
	require.NoError(t, err)
	all = append(all, batch...)
	check(2, batch[2])
	// A compaction moves where Load starts.
	head := apiHead(t, w, id)
	comp, err := w.Compact(ctx, id, Compaction{Summary: Summary{Text: "so far"}, Head: head, FirstKept: head})
	require.NoError(t, err)
	all = append(all, comp)
	got, err := r.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, got, 2, "Load starts at the compaction and keeps its FirstKept")
	assert.Equal(t, []uuid.UUID{comp.ID, head}, apiIDs(got))

	// The writer closes (checkpointing HEAD and metadata) and another
	// Store writes on: the reader follows.
	require.NoError(t, w.Close())
	w2 := apiOpen(t, dir, wopts)
	last := apiAppend(t, w2, id, UserText("from the second writer"))
	all = append(all, last)
	assert.Equal(t, last.ID, apiHead(t, r, id))
	assert.Equal(t, apiIDs(all), apiNodeIDs(apiTree(t, r, id)))

	names := roChunkFiles(t, dir, id)
	assert.Greater(t, roCount(names, chunkExt+sealedExt), 3, "the run sealed chunks: %v", names)
	assert.Empty(t, g.mutations())
}

// mustLoad is Load, requiring success.
func mustLoad(t *testing.T, s *Store, id uuid.UUID) []Event {
	t.Helper()
	evs, err := s.Load(t.Context(), id)
	require.NoError(t, err)
	return evs
}

func TestReadOnlyRevision(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	w := apiOpen(t, dir, &Options{ChunkSize: 1 << 10, keepPlainOnClose: true})
	r, _ := roOpen(t, dir, Options{})

	_, err := r.Revision(ctx, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = w.Revision(ctx, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)

	id := apiNewSession(t, w)
	rev := func() Revision {
		t.Helper()
		rr, err := r.Revision(ctx, id)
		require.NoError(t, err)
		rw, err := w.Revision(ctx, id)
		require.NoError(t, err)
		require.Equal(t, rw, rr, "a writing and a read-only store compute the same revision")
		return rr
	}
	cur := rev()
	assert.Equal(t, cur, rev(), "equal while nothing is appended")
	seen := map[Revision]bool{cur: true}
	chunks := map[uint32]bool{}
	var all []Event
	for i := range 40 {
		ev := apiAppend(t, w, id, UserText(fmt.Sprintf("message %d %s", i, strings.Repeat("m", i*5))))
		all = append(all, ev)
		next := rev()
		require.False(t, seen[next], "append %d: revision %v was seen before", i, next)
		seen[next] = true
		chunks[next.Chunk] = true
		assert.Equal(t, next, rev(), "equal while nothing is appended")
		// Reading changes nothing.
		got, err := r.Load(ctx, id)
		require.NoError(t, err)
		require.Len(t, got, i+1)
		assert.Equal(t, next, rev())
		cur = next
	}
	assert.Greater(t, len(chunks), 3, "the appends spanned several chunks")
	awaitSealing(w, id)
	assert.Greater(t, roCount(roChunkFiles(t, dir, id), chunkExt+sealedExt), 2, "and sealed some")

	// Calls that write no event leave it alone: a Branch (in memory), a
	// Flush (index and HEAD), a metadata update, closing the writer.
	require.NoError(t, w.Branch(ctx, id, all[3].ID))
	assert.Equal(t, cur, rev())
	require.NoError(t, w.Flush(ctx, id))
	assert.Equal(t, cur, rev())
	_, err = w.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "renamed" })
	require.NoError(t, err)
	assert.Equal(t, cur, rev())
	require.NoError(t, w.Close())
	got, err := r.Revision(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, cur, got)

	assert.Equal(t, "3.10", Revision{Chunk: 3, Size: 10}.String())
	assert.Equal(t, "3z.10", Revision{Chunk: 3, Sealed: true, Size: 10}.String())
	require.NoError(t, r.Close())
	_, err = r.Revision(ctx, id)
	assert.ErrorIs(t, err, ErrClosed)
}

// roFailCreate makes creating the file named name fail on m until the
// returned function is called.
func roFailCreate(m *vfs.MemFS, name string) (restore func()) {
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpCreate && filepath.Base(path) == name {
			return errors.New("injected create failure")
		}
		return nil
	})
	return func() { m.SetFault(nil) }
}

// roFillChunk appends events to id until the next one of size big would
// start a new chunk, and returns them.
func roFillChunk(t *testing.T, w *Store, id uuid.UUID, limit int64, big int) []Event {
	t.Helper()
	var out []Event
	for {
		rev, err := w.Revision(t.Context(), id)
		require.NoError(t, err)
		if rev.Size > 0 && rev.Size+int64(big) > limit {
			return out
		}
		out = append(out, apiAppend(t, w, id, UserText(strings.Repeat("f", 100))))
	}
}

// The newest chunk is sealed only between sealing it and creating the
// next one. A failed create holds that state, so the test can show that
// Revision reports it and that a reader reads the sealed chunk.
func TestReadOnlyRevisionSealedNewestChunk(t *testing.T) {
	ctx := t.Context()
	const limit = 1 << 10
	m, w, id := memSession(t, Options{ChunkSize: limit})
	t.Cleanup(func() { assert.NoError(t, w.Close()) })
	r, _ := roOpen(t, memRoot, Options{fs: m})
	acked := roFillChunk(t, w, id, limit, 600)
	plain, err := r.Revision(ctx, id)
	require.NoError(t, err)
	require.False(t, plain.Sealed)

	restore := roFailCreate(m, chunkName(plain.Chunk+1))
	_, err = w.Append(ctx, id, UserText(strings.Repeat("b", 600)))
	require.Error(t, err, "precondition: starting the next chunk fails")
	awaitSealing(w, id)
	sealed, err := r.Revision(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, plain.Chunk, sealed.Chunk)
	assert.True(t, sealed.Sealed, "the newest chunk is sealed: %v", sealed)
	assert.NotEqual(t, plain, sealed)
	assert.Equal(t, fmt.Sprintf("%dz.%d", sealed.Chunk, sealed.Size), sealed.String())
	got, err := r.FullPath(ctx, id, uuid.Nil)
	require.NoError(t, err)
	apiSameEvents(t, acked, got)

	// The next append (too big for the old chunk) starts the next chunk.
	restore()
	ev := apiAppend(t, w, id, UserText(strings.Repeat("c", 600)))
	acked = append(acked, ev)
	next, err := r.Revision(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, plain.Chunk+1, next.Chunk)
	assert.False(t, next.Sealed)
	got, err = r.FullPath(ctx, id, uuid.Nil)
	require.NoError(t, err)
	apiSameEvents(t, acked, got)
}

// When starting a new chunk fails after the full one was sealed (and its
// plain file removed), a following append small enough to fit the old
// chunk must not go to the removed plain file: an acknowledged event must
// be readable, by a reader and after reopening.
func TestReadOnlyAcknowledgedAfterFailedChunkStart(t *testing.T) {
	ctx := t.Context()
	const limit = 1 << 10
	m, w, id := memSession(t, Options{ChunkSize: limit})
	t.Cleanup(func() { _ = w.Close() })
	r, _ := roOpen(t, memRoot, Options{fs: m})
	acked := roFillChunk(t, w, id, limit, 600)
	rev, err := w.Revision(ctx, id)
	require.NoError(t, err)
	restore := roFailCreate(m, chunkName(rev.Chunk+1))
	_, err = w.Append(ctx, id, UserText(strings.Repeat("b", 600)))
	require.Error(t, err, "precondition: starting the next chunk fails")
	require.LessOrEqual(t, rev.Size+300, int64(limit), "precondition: a small event fits the old chunk")
	small, err := w.Append(ctx, id, UserText("small"))
	if err == nil { // refusing is fine; acknowledging and losing is not
		acked = append(acked, small)
	}
	restore()
	// Once the next chunk can start, the writer goes on.
	acked = append(acked, apiAppend(t, w, id, UserText("after the failure")))

	got, err := r.FullPath(ctx, id, uuid.Nil)
	assert.NoError(t, err, "reader")
	assert.Equal(t, apiIDs(acked), apiIDs(got), "the reader sees every acknowledged event")
	got, err = w.FullPath(ctx, id, uuid.Nil)
	assert.NoError(t, err, "writer")
	assert.Equal(t, apiIDs(acked), apiIDs(got), "the writer reads every acknowledged event")
	require.NoError(t, w.Close())
	s := openMem(t, m, Options{ChunkSize: limit})
	defer s.Close()
	got, err = s.FullPath(ctx, id, uuid.Nil)
	assert.NoError(t, err, "after reopening")
	assert.Equal(t, apiIDs(acked), apiIDs(got), "every acknowledged event survives reopening")
}

// roCopyDir copies the regular files and directories under src to dst.
func roCopyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	require.NoError(t, err)
}

// roAppendBytes appends b to the file at path by hand.
func roAppendBytes(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func roSize(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path)
	require.NoError(t, err)
	return info.Size()
}

func TestReadOnlyTornTail(t *testing.T) {
	ctx := t.Context()
	// A session of three events, copied before a fourth is appended: the
	// fourth's line is a real frame to tear.
	src, dir := t.TempDir(), t.TempDir()
	w := apiOpen(t, src, nil)
	id := apiNewSession(t, w)
	var three []Event
	for i := range 3 {
		three = append(three, apiAppend(t, w, id, UserText(fmt.Sprintf("event %d", i))))
	}
	require.NoError(t, w.Close())
	roCopyDir(t, src, dir)
	chunkA := filepath.Join(apiSessionDir(src, id), chunksDir, chunkName(0))
	chunk := filepath.Join(apiSessionDir(dir, id), chunksDir, chunkName(0))
	size3 := roSize(t, chunkA)
	w = apiOpen(t, src, nil)
	fourth := apiAppend(t, w, id, AssistantText("a reply long enough to tear in two"))
	require.NoError(t, w.Close())
	b, err := os.ReadFile(chunkA)
	require.NoError(t, err)
	line := b[size3:]
	require.Equal(t, 1, strings.Count(string(line), "\n"), "precondition: one line")
	require.Equal(t, byte('\n'), line[len(line)-1])

	r, g := roOpen(t, dir, Options{})
	seesThree := func(what string, torn bool) {
		t.Helper()
		size := roSize(t, chunk)
		before := apiFiles(t, dir)
		got, err := r.Load(ctx, id)
		require.NoError(t, err, what)
		apiSameEvents(t, three, got)
		assert.Equal(t, apiIDs(three), apiNodeIDs(apiTree(t, r, id)), what)
		assert.Equal(t, three[2].ID, apiHead(t, r, id), what)
		_, err = r.Event(ctx, id, fourth.ID)
		assert.ErrorIs(t, err, ErrNotFound, what)
		rep, err := r.Verify(ctx, id)
		require.NoError(t, err, what)
		assert.True(t, rep.OK(), "%s: a torn tail is not corruption: %v", what, rep.Problems)
		assert.Equal(t, 3, rep.Records, what)
		assert.Equal(t, torn, slices.ContainsFunc(rep.Repairs, func(s string) bool { return strings.Contains(s, "torn tail") }),
			"%s: Verify lists cutting a torn tail as a repair exactly when there is one: %v", what, rep.Repairs)
		// Nothing was cut, copied or written.
		assert.Equal(t, size, roSize(t, chunk), "%s: the chunk keeps its size", what)
		assert.Equal(t, before, apiFiles(t, dir), what)
		assert.Zero(t, roCount(roChunkFiles(t, dir, id), ".broken-"+fmt.Sprint(size3)), what)
	}
	seesThree("before tearing", false)
	rev0, err := r.Revision(ctx, id)
	require.NoError(t, err)

	// The first half of the fourth frame, as a writer in the middle of its
	// write would leave it.
	half := len(line) / 2
	roAppendBytes(t, chunk, line[:half])
	rev1, err := r.Revision(ctx, id)
	require.NoError(t, err)
	assert.NotEqual(t, rev0, rev1, "the revision follows the bytes")
	seesThree("half a frame", true)

	// The rest arrives: the reader sees the event.
	roAppendBytes(t, chunk, line[half:])
	got, err := r.Load(ctx, id)
	require.NoError(t, err)
	apiSameEvents(t, append(slices.Clone(three), fourth), got)
	four := append(slices.Clone(three), fourth)

	// A complete line that is not a valid frame, then one whose checksum
	// fails (a record byte changed): neither is shown, nothing is cut.
	for _, tail := range [][]byte{
		[]byte(`{"id":"not a frame"}` + "\n"),
		[]byte(strings.Replace(string(line), "long enough", "LONG enough", 1)),
	} {
		roAppendBytes(t, chunk, tail)
		size := roSize(t, chunk)
		got, err := r.Load(ctx, id)
		require.NoError(t, err)
		apiSameEvents(t, four, got)
		rep, err := r.Verify(ctx, id)
		require.NoError(t, err)
		assert.True(t, rep.OK(), "problems: %v", rep.Problems)
		// The repair a writer would make: cut everything after the
		// fourth event's line, the tails so far.
		cut := size3 + int64(len(line))
		require.NotEmpty(t, rep.Repairs)
		assert.True(t, strings.HasPrefix(rep.Repairs[0], fmt.Sprintf("cut the torn tail of %s at offset %d (%d bytes, kept in %s.broken-%d)", chunk, cut, size-cut, chunk, cut)),
			"the first repair cuts the tails: %q", rep.Repairs)
		assert.Equal(t, size, roSize(t, chunk), "the chunk keeps its size")
	}
	assert.Empty(t, g.mutations())

	// A writer cuts the tail when it opens the session; the reader follows.
	w2 := apiOpen(t, dir, nil)
	fifth := apiAppend(t, w2, id, UserText("after the repair"))
	assert.Equal(t, 1, roCount(roChunkFiles(t, dir, id), ".broken-"+fmt.Sprint(size3+int64(len(line)))), "the writer kept the cut tail")
	got, err = r.Load(ctx, id)
	require.NoError(t, err)
	apiSameEvents(t, append(four, fifth), got)
}

func TestReadOnlyIgnoresCompressionMode(t *testing.T) {
	ctx := t.Context()
	for _, mode := range []string{CompressionNone, CompressionZstd} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			w := apiOpen(t, dir, &Options{Compression: mode, ChunkSize: 1 << 10})
			id := apiNewSession(t, w)
			var all []Event
			for i := range 30 {
				all = append(all, apiAppend(t, w, id, UserText(fmt.Sprintf("message %d %s", i, strings.Repeat("z", 100)))))
			}
			require.NoError(t, w.Close())
			names := roChunkFiles(t, dir, id)
			other := CompressionZstd
			if mode == CompressionZstd {
				other = CompressionNone
				require.Positive(t, roCount(names, sealedExt), "precondition: sealed chunks: %v", names)
			} else {
				require.Zero(t, roCount(names, sealedExt), "precondition: no sealed chunks: %v", names)
			}
			_, err := Open(dir, &Options{Compression: other})
			require.ErrorIs(t, err, ErrCompressionMismatch, "precondition: a writer in the other mode is refused")
			before := apiFiles(t, dir)

			for _, c := range []string{"", other} {
				r, _ := roOpen(t, dir, Options{Compression: c})
				got, err := r.Load(ctx, id)
				require.NoError(t, err, "reader with Compression %q", c)
				apiSameEvents(t, all, got)
				rep, err := r.Verify(ctx, id)
				require.NoError(t, err)
				assert.True(t, rep.OK(), "problems: %v", rep.Problems)
				assert.Empty(t, rep.Repairs)
			}
			assert.Equal(t, before, apiFiles(t, dir))
		})
	}
}

// roRotate appends events with w until a new chunk starts, and one more
// after that, and returns them.
func roRotate(t *testing.T, w *Store, id uuid.UUID) []Event {
	t.Helper()
	rev0, err := w.Revision(t.Context(), id)
	require.NoError(t, err)
	var out []Event
	for {
		out = append(out, apiAppend(t, w, id, UserText(strings.Repeat("r", 200))))
		rev, err := w.Revision(t.Context(), id)
		require.NoError(t, err)
		if rev.Chunk > rev0.Chunk {
			return append(out, apiAppend(t, w, id, UserText("first of the new chunk")))
		}
	}
}

// roBesideWriter is a session with sealed chunks, written by w, and a
// read-only store r on it.
func roBesideWriter(t *testing.T) (w *Store, id uuid.UUID, acked []Event, r *Store, g *roGuardFS) {
	t.Helper()
	dir := t.TempDir()
	w = apiOpen(t, dir, &Options{ChunkSize: 1 << 10})
	id = apiNewSession(t, w)
	for range 3 {
		acked = append(acked, roRotate(t, w, id)...)
	}
	awaitSealing(w, id)
	require.Positive(t, roCount(roChunkFiles(t, dir, id), chunkExt+sealedExt), "precondition: sealed chunks")
	r, g = roOpen(t, dir, Options{})
	apiSameEvents(t, acked, mustLoad(t, r, id))
	return w, id, acked, r, g
}

// A writer that starts a new chunk while a reader opens the session (the
// full read, which a reader makes on first use), after the reader listed
// the chunks and before it read index.jsonl (the writer seals the full
// chunk, drops its lines from index.jsonl and indexes the new chunk's
// records there), must not make the session look damaged. The reader
// retries a load during which the log changed; a writer that rotates
// during every attempt must not defeat it.
func TestReadOnlyLoadWhileWriterStartsChunks(t *testing.T) {
	for _, times := range []int{1, 8} {
		t.Run(fmt.Sprintf("%d rotations", times), func(t *testing.T) {
			ctx := t.Context()
			w, id, acked, _, _ := roBesideWriter(t)
			r, g := roOpen(t, w.Dir(), Options{}) // has not opened the session yet
			before := len(acked)
			fired := 0
			g.hook = func(op, path string) {
				// On the test's goroutine: the index is read by the call.
				if op == "open" && filepath.Base(path) == indexName && fired < times {
					fired++
					acked = append(acked, roRotate(t, w, id)...)
				}
			}
			apiAppend(t, w, id, UserText("the reader reloads"))
			got, err := r.Load(ctx, id)
			g.hook = nil
			require.Positive(t, fired, "precondition: the writer started a chunk during the load")
			require.NoError(t, err, "a writer starting chunks is not damage (it started %d during the load)", fired)
			roChain(t, got)
			require.GreaterOrEqual(t, len(got), before+1)
			assert.Equal(t, apiIDs(mustLoad(t, w, id))[:len(got)], apiIDs(got), "a prefix of the log")
			apiSameEvents(t, mustLoad(t, w, id), mustLoad(t, r, id))
		})
	}
}

// Verify takes no lock and is documented to work beside a writer, in a
// read-only store and in a writing Store that does not hold the session
// (another process's, say). What the writer does meanwhile (starting a
// chunk, which seals the full one and rewrites index.jsonl; replacing HEAD
// in Flush) must not show up as corruption or fail the check, even when
// the writer does it during every attempt of a check that retries.
func TestReadOnlyVerifyBesideWriter(t *testing.T) {
	type trigger func(t *testing.T, w *Store, id uuid.UUID, op, path string) bool
	cases := []struct {
		name string
		// trigger returns a function that makes the writer act, and
		// returns true, at the chosen operations of the verifier.
		trigger func(t *testing.T, w *Store, id uuid.UUID) trigger
	}{
		{"index rewritten while read", func(*testing.T, *Store, uuid.UUID) trigger {
			return func(t *testing.T, w *Store, id uuid.UUID, op, path string) bool {
				if op == "open" && filepath.Base(path) == indexName {
					roRotate(t, w, id)
					return true
				}
				return false
			}
		}},
		{"HEAD replaced while read", func(*testing.T, *Store, uuid.UUID) trigger {
			return func(t *testing.T, w *Store, id uuid.UUID, op, path string) bool {
				if op == "open" && (filepath.Base(path) == headfile.Name || filepath.Base(path) == headfile.Temp) {
					apiAppend(t, w, id, UserText("flushed"))
					require.NoError(t, w.Flush(t.Context(), id))
					return true
				}
				return false
			}
		}},
		{"chunk sealed while read", func(t *testing.T, w *Store, id uuid.UUID) trigger {
			// After the analysis that opens each check (which reads
			// index.jsonl first), at the check's own read of the index
			// and then of the newest chunk, still plain.
			newest := func() string {
				rev, err := w.Revision(t.Context(), id)
				require.NoError(t, err)
				require.False(t, rev.Sealed)
				return chunkName(rev.Chunk)
			}
			name, indexOpens, armed := newest(), 0, false
			return func(t *testing.T, w *Store, id uuid.UUID, op, path string) bool {
				if op == "open" && filepath.Base(path) == indexName {
					indexOpens++
					armed = indexOpens%2 == 0
				}
				if armed && op == "read" && filepath.Base(path) == name {
					roRotate(t, w, id)
					name, armed = newest(), false
					return true
				}
				return false
			}
		}},
	}
	for _, readOnly := range []bool{true, false} {
		for _, c := range cases {
			for _, times := range []int{1, 8} {
				name := fmt.Sprintf("read-only %v/%s/%d times", readOnly, c.name, times)
				t.Run(name, func(t *testing.T) {
					w, id, _, r, g := roBesideWriter(t)
					verifier := r
					if !readOnly {
						// A writing Store, through the same guard: Verify
						// writes nothing either.
						o := Options{fs: g}
						var err error
						verifier, err = Open(w.Dir(), &o)
						require.NoError(t, err)
						defer func() { assert.NoError(t, verifier.Close()) }()
					}
					trig := c.trigger(t, w, id)
					fired := 0
					var mu sync.Mutex // the hook may run on several goroutines
					g.hook = func(op, path string) {
						mu.Lock()
						defer mu.Unlock()
						if fired < times && trig(t, w, id, op, path) {
							fired++
						}
					}
					rep, err := verifier.Verify(t.Context(), id)
					g.hook = nil
					require.Positive(t, fired, "precondition: the writer acted during Verify")
					require.NoError(t, err, "the writer acted %d times during Verify", fired)
					assert.True(t, rep.OK(), "Verify reports the writer's work (done %d times during the check) as corruption: %v", fired, rep.Problems)
					// Once the writer is quiet, the session verifies clean.
					rep, err = verifier.Verify(t.Context(), id)
					require.NoError(t, err)
					assert.True(t, rep.OK(), "problems: %v", rep.Problems)
					assert.Empty(t, g.mutations())
				})
			}
		}
	}
}

// Once a reader holds a session's index, a refresh reads only what was
// written since: not index.jsonl, and not the chunks before the newest
// event it holds, across rotations and sealing.
func TestReadOnlyRefreshReadsTheTail(t *testing.T) {
	w, id, _, r, g := roBesideWriter(t)
	_, err := r.Tree(t.Context(), id) // loads the index
	require.NoError(t, err)
	var opened []string
	hook := func(op, path string) {
		if op == "open" {
			opened = append(opened, filepath.Base(path))
		}
	}
	for range 3 {
		roRotate(t, w, id)
		// Head reads no record: what it opens is the refresh's doing.
		g.hook = hook
		head, err := r.Head(t.Context(), id)
		g.hook = nil
		require.NoError(t, err)
		whead, err := w.Head(t.Context(), id)
		require.NoError(t, err)
		assert.Equal(t, whead, head)
		tree, err := r.Tree(t.Context(), id)
		require.NoError(t, err)
		wtree, err := w.Tree(t.Context(), id)
		require.NoError(t, err)
		assert.Equal(t, wtree, tree)
		apiSameEvents(t, mustLoad(t, w, id), mustLoad(t, r, id))
	}
	require.NotEmpty(t, opened, "precondition: the refreshes read files")
	assert.NotContains(t, opened, indexName, "a refresh does not read the index")
	assert.NotContains(t, opened, chunkName(0), "nor the chunks before the newest event it holds")
	assert.NotContains(t, opened, chunkName(0)+sealedExt)
}

// TestReadOnlyTornTailReplacedBySameLength: a reader opened on a session
// whose newest chunk ends in a torn tail holds the records before it. The
// writer's next open cuts the tail, then appends an event whose line is
// exactly as long: the revision is the same again, and the reader must
// still see the acknowledged event.
func TestReadOnlyTornTailReplacedBySameLength(t *testing.T) {
	ctx := context.Background()
	m, w, id := memSession(t, deterministic(Options{}))
	appendN(t, w, id, 3)
	require.NoError(t, w.Close())
	chunk := sessionPath(id, chunksDir, chunkName(0))
	size, err := plainDataEnd(m, chunk)
	require.NoError(t, err)
	// later's ids and times come after those of the session so far.
	later := func() Options {
		c := newFakeClock()
		c.now = c.now.Add(time.Hour)
		c.seq = 1 << 20
		return Options{now: c.Now, newID: c.NewID}
	}

	// How long the next event's line is: append it on a copy.
	probe := m.CrashClone(vfs.KeepAll, 0)
	pw := openMem(t, probe, later())
	_, err = pw.Append(ctx, id, UserText("after the crash"))
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	grown, err := plainDataEnd(probe, chunk)
	require.NoError(t, err)

	// The torn tail: that many bytes of an incomplete line.
	f, err := m.OpenFile(chunk, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte(strings.Repeat("x", int(grown-size))), size)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())

	r, _ := roOpen(t, memRoot, Options{fs: m})
	before, err := r.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, before, 3)
	revBefore, err := r.Revision(ctx, id)
	require.NoError(t, err)

	w2 := openMem(t, m, later())
	defer w2.Close()
	ev, err := w2.Append(ctx, id, UserText("after the crash"))
	require.NoError(t, err)
	revAfter, err := r.Revision(ctx, id)
	require.NoError(t, err)
	require.Equal(t, revBefore, revAfter, "precondition: the same revision again")
	got, err := r.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, got, 4, "the reader sees the acknowledged event")
	assert.Equal(t, ev.ID, got[3].ID)
}

// deleteOnList is an FS that runs del once, just before the first listing
// of a directory named chunks: a Delete landing between Revision's look at
// session.json and its listing of the chunks.
type deleteOnList struct {
	vfs.FS
	once sync.Once
	del  func()
}

func (d *deleteOnList) ReadDir(name string) ([]string, error) {
	if filepath.Base(name) == chunksDir {
		d.once.Do(d.del)
	}
	return d.FS.ReadDir(name)
}

// TestRevisionOfSessionDeletedMeanwhile: a session deleted while Revision
// reads it is ErrNotFound, as it is once the delete is over, not the
// error of the listing that found its directory gone.
func TestRevisionOfSessionDeletedMeanwhile(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	w, err := Open("/store", &Options{fs: m})
	require.NoError(t, err)
	defer w.Close()
	s, err := w.Create(ctx, Meta{Name: "short-lived"})
	require.NoError(t, err)
	_, err = w.Append(ctx, s.ID, UserText("x"))
	require.NoError(t, err)
	require.NoError(t, w.Flush(ctx, s.ID))

	fired := false
	d := &deleteOnList{FS: m, del: func() {
		fired = true
		require.NoError(t, w.Delete(ctx, s.ID))
	}}
	r, err := Open("/store", &Options{ReadOnly: true, fs: d})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.Revision(ctx, s.ID)
	require.True(t, fired, "the delete ran inside Revision")
	assert.ErrorIs(t, err, ErrNotFound)
}
