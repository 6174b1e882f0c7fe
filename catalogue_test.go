package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/catalogue"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// scanMetas is what List answered before the catalogue: every
// session.json under memRoot read, the readable ones in id order, and the
// ids of the unreadable ones.
func scanMetas(t *testing.T, fsys vfs.FS) ([]Meta, []uuid.UUID) {
	t.Helper()
	ids, err := sessionIDs(fsys, filepath.Join(memRoot, sessionsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	require.NoError(t, err)
	var out []Meta
	var bad []uuid.UUID
	for _, id := range ids {
		m, _, err := readMeta(fsys, sessionPath(id), id)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			bad = append(bad, id)
		default:
			out = append(out, m)
		}
	}
	return out, bad
}

// unreadableIDs returns the ids a *ListError names (nil for nil).
func unreadableIDs(t *testing.T, err error) []uuid.UUID {
	t.Helper()
	if err == nil {
		return nil
	}
	var le *ListError
	require.ErrorAs(t, err, &le)
	var ids []uuid.UUID
	for _, u := range le.Unreadable {
		ids = append(ids, u.ID)
	}
	return ids
}

// newestFirst returns up to n of metas (in id order), newest first.
func newestFirst(metas []Meta, n int) []Meta {
	var out []Meta
	for i := len(metas) - 1; i >= 0 && len(out) < n; i-- {
		out = append(out, metas[i])
	}
	return out
}

// checkListsAgree asserts that List and ListRecent of a store opened on
// fsys (read-only or not) say what the session.json files say.
func checkListsAgree(t *testing.T, fsys vfs.FS, readOnly bool, msg string) {
	t.Helper()
	ctx := context.Background()
	want, bad := scanMetas(t, fsys)
	s := openMem(t, fsys, Options{ReadOnly: readOnly})
	defer s.Close()
	got, err := s.List(ctx)
	assert.Equal(t, bad, unreadableIDs(t, err), "%s: unreadable sessions", msg)
	if len(want) == 0 && len(got) == 0 {
		got = nil // none either way
	}
	assert.Equal(t, want, got, "%s: List (read-only %v)", msg, readOnly)
	recent, err := s.ListRecent(ctx, 2)
	if len(bad) == 0 {
		assert.NoError(t, err, msg)
	}
	if len(recent) == 0 {
		recent = nil
	}
	assert.Equal(t, newestFirst(want, 2), recent, "%s: ListRecent (read-only %v)", msg, readOnly)
}

// The catalogue's files under the names the store's tests use.
const (
	catalogueName     = catalogue.Name
	catalogueLogName  = catalogue.LogName
	catalogueLockName = catalogue.LockName
)

// TestCatalogueMeta: a Meta with every member set goes into the
// catalogue's record and comes back equal, through the catalogue's line,
// with its times decoded as session.json's decode gives them, so that a
// List answered from the catalogue equals one that read the files
// (TestCatalogueCrashPoints); and the Meta the catalogue keeps shares
// nothing with the caller's.
func TestCatalogueMeta(t *testing.T) {
	id := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
	full := Meta{ID: id, Name: "a \"name\"", WorkingDir: "/w", Model: "m",
		CreatedAt: time.Date(2020, 1, 2, 3, 4, 5, 6, time.FixedZone("", -7200)),
		UpdatedAt: time.Date(2026, 8, 25, 17, 21, 23, 954897183, time.UTC),
		Labels:    map[string]string{"b": "2", "a": "1"},
		ForkedFrom: &ForkPoint{Session: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000001"),
			Event: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000002")},
		ParentSession: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000003"),
		SpawnedBy:     uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000004"), Depth: 2, Encrypted: true,
		Usage: &RecordedUsage{Events: 7, Through: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000005"),
			Models: []ModelUsage{{Model: "a \"model\"", Messages: 2, Usage: Usage{InputTokens: 1, OutputTokens: 2, CacheReadTokens: 3, CacheWriteTokens: 4}},
				{Model: "b", Messages: 1, Usage: Usage{OutputTokens: 9}}}}}
	// Every member of Meta is set here, and the catalogue's Meta has as
	// many: a member added to one and not the other fails this test.
	mv := reflect.ValueOf(full)
	for i := range mv.NumField() {
		require.False(t, mv.Field(i).IsZero(), "Meta.%s is set", mv.Type().Field(i).Name)
	}
	require.Equal(t, mv.NumField(), reflect.TypeFor[catalogue.Meta]().NumField(), "the catalogue records every member of Meta")

	b, err := encodeMeta(full, formatVersion)
	require.NoError(t, err)
	fromFile, _, err := decodeMeta(b, id, "session.json")
	require.NoError(t, err)
	line := catalogue.AppendRecord(nil, catalogue.Record{Kind: catalogue.KindEntry, ID: id, Meta: catMeta(fromFile)})
	r, err := catalogue.DecodeRecord(line[:len(line)-1])
	require.NoError(t, err)
	assert.Equal(t, fromFile, metaOf(r.Meta))

	kept := catMeta(full)
	full.Labels["a"] = "changed"
	full.ForkedFrom.Event = uuid.Nil
	full.Usage.Models[0].Messages = 99
	assert.Equal(t, int64(2), kept.Usage.Models[0].Messages, "the catalogue's copy keeps its usage totals")
	assert.Equal(t, "1", kept.Labels["a"], "the catalogue's copy keeps its labels")
	assert.Equal(t, uuid.MustParse("01a02f3f-a89d-7d25-b4ac-000000000002"), kept.ForkedFrom.Event, "and its fork point")
}

// catalogueWorkload is what the crash and fault tests run: Creates, an
// UpdateMeta, appends and the close that records the newest event's time,
// then a second Store that updates and closes again. It stops at the
// first error (the power cut, the injected fault).
func catalogueWorkload(fsys vfs.FS) error {
	ctx := context.Background()
	o := deterministic(Options{fs: fsys})
	s, err := Open(memRoot, &o)
	if err != nil {
		return err
	}
	defer s.Close()
	a, err := s.Create(ctx, Meta{Name: "a", Labels: map[string]string{"k": "v"}})
	if err != nil {
		return err
	}
	b, err := s.Create(ctx, Meta{Name: "b"})
	if err != nil {
		return err
	}
	if _, err := s.UpdateMeta(ctx, a.ID, func(m *Meta) { m.Name = "A" }); err != nil {
		return err
	}
	if _, err := s.Append(ctx, b.ID, UserText("hello")); err != nil {
		return err
	}
	if err := s.Close(); err != nil { // b's UpdatedAt moves to the event's time
		return err
	}
	s2, err := Open(memRoot, &o)
	if err != nil {
		return err
	}
	defer s2.Close()
	if _, err := s2.UpdateMeta(ctx, b.ID, func(m *Meta) { m.Name = "B" }); err != nil {
		return err
	}
	if _, err := s2.Create(ctx, Meta{Name: "c"}); err != nil {
		return err
	}
	return s2.Close()
}

// countMutating returns how many mutating operations catalogueWorkload
// makes.
func countMutating(t testing.TB) int {
	t.Helper()
	m := vfs.NewMemFS()
	n := 0
	m.SetFault(func(op vfs.Op, _ string) error {
		if vfs.Mutating(op) {
			n++
		}
		return nil
	})
	require.NoError(t, catalogueWorkload(m))
	return n
}

// TestCatalogueCrashPoints cuts the power at every mutating operation of
// catalogueWorkload and checks that, in every crash clone, List and
// ListRecent (read-only, then by a writer, which may rewrite the
// catalogue) say what the session.json files say.
func TestCatalogueCrashPoints(t *testing.T) {
	t.Parallel()
	for _, coarse := range []bool{false, true} {
		t.Run(fmt.Sprint("coarse clock ", coarse), func(t *testing.T) {
			wrap := func(m *vfs.MemFS) vfs.FS {
				if coarse {
					return coarseFS{m}
				}
				return m
			}
			total := countMutating(t)
			modes := []vfs.CrashMode{vfs.KeepSynced, vfs.KeepAll, vfs.KeepGarbageTail, vfs.KeepRandomSectors}
			states := 0
			for point := 1; point <= total; point++ {
				m := vfs.NewMemFS()
				n := 0
				m.SetFault(func(op vfs.Op, path string) error {
					if vfs.Mutating(op) {
						n++
						if n == point {
							return vfs.ErrPowerLoss
						}
					}
					return nil
				})
				err := catalogueWorkload(wrap(m))
				require.ErrorIs(t, err, vfs.ErrPowerLoss, "crash point %d", point)
				for i, mode := range modes {
					clone := wrap(m.CrashClone(mode, uint64(point*10+i)))
					if _, err := clone.Stat(filepath.Join(memRoot, sessionsDir)); err != nil {
						continue // the store did not exist yet
					}
					states++
					msg := fmt.Sprintf("crash point %d (%s), %s", point, m.PowerCut(), mode)
					checkListsAgree(t, clone, true, msg)
					checkListsAgree(t, clone, false, msg)
					checkListsAgree(t, clone, true, msg+", after the writer")
				}
			}
			t.Logf("catalogue crash states checked: %d (%d crash points)", states, total)
		})
	}
}

// coarseFS is a file system whose clock never moves: every file and
// directory has the same modification time, so that only sizes tell a
// change, as on a file system whose clock ticks slower than the writes
// come. The protocol (the pending records) must keep List right without
// the stamps' help.
type coarseFS struct{ vfs.FS }

func (c coarseFS) Stat(name string) (fs.FileInfo, error) {
	info, err := c.FS.Stat(name)
	if err != nil {
		return nil, err
	}
	return coarseInfo{info}, nil
}

type coarseInfo struct{ fs.FileInfo }

func (coarseInfo) ModTime() time.Time { return time.Unix(1, 0) }

// TestCatalogueFaults fails the n-th mutating operation of the workload
// (without a crash) and checks that the store that saw the failure, and a
// new one, list what the session.json files say.
func TestCatalogueFaults(t *testing.T) {
	t.Parallel()
	total := countMutating(t)
	injected := errors.New("injected fault")
	for n := 1; n <= total; n++ {
		m := vfs.NewMemFS()
		f := vfs.FailNth(n, injected, vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpTruncate, vfs.OpRename, vfs.OpRemove, vfs.OpMkdir, vfs.OpSyncDir)
		m.SetFault(f.Hook)
		err := catalogueWorkload(m)
		m.SetFault(nil)
		if !f.Fired() {
			require.NoError(t, err)
			continue
		}
		if err != nil { // a failed write of a derived file (index.jsonl) is not an error
			require.ErrorIs(t, err, injected, "fault %d", n)
		}
		if _, err := m.Stat(filepath.Join(memRoot, sessionsDir)); err != nil {
			continue
		}
		checkListsAgree(t, m, true, fmt.Sprintf("fault %d", n))
		checkListsAgree(t, m, false, fmt.Sprintf("fault %d", n))
	}
}

// catalogueStore makes a store on a MemFS with n sessions, closed.
func catalogueStore(t *testing.T, n int) (*vfs.MemFS, []Meta) {
	t.Helper()
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, deterministic(Options{}))
	var metas []Meta
	for i := range n {
		meta, err := s.Create(ctx, Meta{Name: fmt.Sprint("session ", i)})
		require.NoError(t, err)
		metas = append(metas, meta)
	}
	require.NoError(t, s.Close())
	slices.SortFunc(metas, func(a, b Meta) int { return bytes.Compare(a.ID[:], b.ID[:]) })
	return m, metas
}

// removeAll removes a directory of a MemFS and everything in it.
func removeAll(t *testing.T, fsys vfs.FS, dir string) {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	for _, name := range names {
		p := filepath.Join(dir, name)
		info, err := fsys.Stat(p)
		require.NoError(t, err)
		if info.IsDir() {
			removeAll(t, fsys, p)
		} else {
			require.NoError(t, fsys.Remove(p))
		}
	}
	require.NoError(t, fsys.Remove(dir))
}

// TestCatalogueDisagrees: the catalogue says one thing, the session.json
// files another; List and ListRecent follow the files.
func TestCatalogueDisagrees(t *testing.T) {
	ctx := context.Background()
	catPath := filepath.Join(memRoot, catalogueName)
	logPath := filepath.Join(memRoot, catalogueLogName)

	t.Run("a changed byte in the catalogue", func(t *testing.T) {
		m, metas := catalogueStore(t, 4)
		for _, path := range []string{catPath, logPath} {
			orig, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			for _, at := range []int{0, 10, len(orig) / 2, len(orig) - 12, len(orig) - 2} {
				b := bytes.Clone(orig)
				b[at] ^= 0x20
				writeMemFile(t, m, path, b)
				checkListsAgree(t, m, true, fmt.Sprintf("%s byte %d", path, at))
				checkListsAgree(t, m, false, fmt.Sprintf("%s byte %d", path, at))
				_, err := catalogue.Load(m, memRoot)
				assert.NoError(t, err, "the writer rebuilt the catalogue")
				writeMemFile(t, m, path, orig)
			}
		}
		checkListsAgree(t, m, true, "restored")
		s := openMem(t, m, Options{ReadOnly: true})
		defer s.Close()
		got, err := s.List(ctx)
		require.NoError(t, err)
		assert.Equal(t, metas, got)
	})

	t.Run("a session directory removed by hand", func(t *testing.T) {
		m, metas := catalogueStore(t, 3)
		for _, victim := range []Meta{metas[2], metas[0]} { // the newest, then the oldest
			removeAll(t, m, sessionPath(victim.ID))
			checkListsAgree(t, m, true, "removed "+victim.Name)
			checkListsAgree(t, m, false, "removed "+victim.Name)
		}
		want, _ := scanMetas(t, m)
		assert.Equal(t, metas[1:2], want)
	})

	t.Run("a session directory added by hand", func(t *testing.T) {
		m, metas := catalogueStore(t, 3)
		catBytes, err := vfs.ReadFile(m, catPath)
		require.NoError(t, err)
		logBytes, err := vfs.ReadFile(m, logPath)
		require.NoError(t, err)
		s := openMem(t, m, Options{})
		extra, err := s.Create(ctx, Meta{Name: "copied in"})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		// The catalogue as it was before: the new session is unknown to it.
		writeMemFile(t, m, catPath, catBytes)
		writeMemFile(t, m, logPath, logBytes)
		st, err := catalogue.Load(m, memRoot)
		require.NoError(t, err)
		_, known, _ := st.Lookup(extra.ID, -1)
		require.False(t, known)
		checkListsAgree(t, m, true, "added")
		r := openMem(t, m, Options{ReadOnly: true})
		recent, err := r.ListRecent(ctx, 1)
		require.NoError(t, err)
		assert.Equal(t, []Meta{extra}, recent, "the newest session, unknown to the catalogue")
		require.NoError(t, r.Close())
		checkListsAgree(t, m, false, "added")
		assert.Len(t, metas, 3)
	})

	t.Run("a pending record without its commit", func(t *testing.T) {
		m, metas := catalogueStore(t, 2)
		victim := metas[1]
		info, err := m.Stat(sessionPath(victim.ID, metaFile))
		require.NoError(t, err)
		st := catalogue.StampOf(info)
		dirInfo, err := m.Stat(filepath.Join(memRoot, sessionsDir))
		require.NoError(t, err)
		dir := catalogue.StampOf(dirInfo) // as the log's last record says
		// A commit that matches session.json's stamp but not its content,
		// then a pending record: only the pending record keeps a reader
		// from believing the commit.
		wrong := victim
		wrong.Name = "not what session.json holds"
		b, err := vfs.ReadFile(m, logPath)
		require.NoError(t, err)
		b = catalogue.AppendRecord(b, catalogue.Record{Kind: catalogue.KindCommit, Dir: dir, ID: victim.ID, File: st, Meta: catMeta(wrong)})
		writeMemFile(t, m, logPath, b)
		s := openMem(t, m, Options{ReadOnly: true})
		got, err := s.List(ctx)
		require.NoError(t, err)
		require.Equal(t, wrong, got[1], "precondition: the catalogue is believed while the stamp matches")
		require.NoError(t, s.Close())

		b = catalogue.AppendRecord(b, catalogue.Record{Kind: catalogue.KindPending, Dir: dir, ID: victim.ID})
		writeMemFile(t, m, logPath, b)
		checkListsAgree(t, m, true, "pending")
		checkListsAgree(t, m, false, "pending")
	})

	t.Run("a catalogue of another generation", func(t *testing.T) {
		m, _ := catalogueStore(t, 2)
		s := openMem(t, m, Options{})
		_, err := s.List(ctx)
		require.NoError(t, err)
		oldLog, err := vfs.ReadFile(m, logPath)
		require.NoError(t, err)
		require.NoError(t, s.cat.Compact()) // a new generation
		require.NoError(t, s.Close())
		writeMemFile(t, m, logPath, oldLog) // a crash between the two renames
		_, err = catalogue.Load(m, memRoot)
		require.ErrorIs(t, err, catalogue.ErrUnusable)
		checkListsAgree(t, m, true, "generations")
		checkListsAgree(t, m, false, "generations")
	})

	t.Run("a hand-edited session.json", func(t *testing.T) {
		m, metas := catalogueStore(t, 2)
		path := sessionPath(metas[0].ID, metaFile)
		edited := metas[0]
		edited.Name = "edited by hand, not through the store"
		b, err := encodeMeta(edited, formatVersion)
		require.NoError(t, err)
		writeMemFile(t, m, path, b)
		// While the sessions directory is as the catalogue recorded it,
		// the listings trust the catalogue: the edit is not seen (List's
		// documented promise) ...
		s := openMem(t, m, Options{ReadOnly: true})
		got, err := s.List(ctx)
		require.NoError(t, err)
		assert.Equal(t, metas, got, "a hand edit in place is not seen while the sessions directory is unchanged")
		require.NoError(t, s.Close())
		// ... and once the sessions directory changes (here a file made
		// and removed in it, as touching it does), they read the files.
		touchSessionsDir(t, m)
		checkListsAgree(t, m, true, "edited")
		writeMemFile(t, m, path, []byte(`{"id":`))
		touchSessionsDir(t, m)
		checkListsAgree(t, m, true, "damaged")
		checkListsAgree(t, m, false, "damaged")
	})
}

// touchSessionsDir changes the sessions directory's stamp, as touch(1)
// does: a file made and removed in it.
func touchSessionsDir(t *testing.T, fsys vfs.FS) {
	t.Helper()
	p := filepath.Join(memRoot, sessionsDir, "touched")
	writeMemFile(t, fsys, p, nil)
	require.NoError(t, fsys.Remove(p))
}

// TestCatalogueCompaction: past catalogue.MaxLog records the log folds
// into a new snapshot, and the answers stay.
func TestCatalogueCompaction(t *testing.T) {
	ctx := context.Background()
	m, metas := catalogueStore(t, 3)
	s := openMem(t, m, Options{})
	defer s.Close()
	gen := snapshotGen(t, m)
	for i := range catalogue.MaxLog {
		_, err := s.UpdateMeta(ctx, metas[i%3].ID, func(m *Meta) { m.Model = fmt.Sprint("model ", i) })
		require.NoError(t, err)
	}
	assert.Greater(t, snapshotGen(t, m), gen, "the log was folded into a new snapshot")
	b, err := vfs.ReadFile(m, filepath.Join(memRoot, catalogueLogName))
	require.NoError(t, err)
	assert.Less(t, bytes.Count(b, []byte("\n"))-1, catalogue.MaxLog, "the log's records after its header")
	checkListsAgree(t, m, true, "compacted")
}

// snapshotGen returns the generation of the catalogue's snapshot: its
// header line's.
func snapshotGen(t *testing.T, fsys vfs.FS) int64 {
	t.Helper()
	b, err := vfs.ReadFile(fsys, filepath.Join(memRoot, catalogueName))
	require.NoError(t, err)
	i := bytes.IndexByte(b, '\n')
	require.Positive(t, i)
	h, err := catalogue.DecodeRecord(b[:i])
	require.NoError(t, err)
	require.Equal(t, byte(catalogue.KindHeader), h.Kind)
	return h.Gen
}

// noWriteFS fails the test on any operation that would change the files.
type noWriteFS struct {
	vfs.FS
	t *testing.T
}

func (n noWriteFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_TRUNC) != 0 {
		n.t.Errorf("a read-only store opened %s for writing", name)
	}
	return n.FS.OpenFile(name, flag, perm)
}
func (n noWriteFS) Rename(a, b string) error {
	n.t.Errorf("a read-only store renamed %s", a)
	return n.FS.Rename(a, b)
}
func (n noWriteFS) Remove(name string) error {
	n.t.Errorf("a read-only store removed %s", name)
	return n.FS.Remove(name)
}
func (n noWriteFS) MkdirAll(name string, perm fs.FileMode) error {
	n.t.Errorf("a read-only store made %s", name)
	return n.FS.MkdirAll(name, perm)
}
func (n noWriteFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	n.t.Errorf("a read-only store locked %s", name)
	return n.FS.Lock(name, perm)
}

// TestCatalogueReaderBesideWriter: a read-only store in the same process
// as a writer lists what the writer wrote at every step, and never writes,
// also while the catalogue is missing or damaged.
func TestCatalogueReaderBesideWriter(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := deterministic(Options{})
	w := openMem(t, m, o)
	defer func() { w.Close() }()
	r := openMem(t, noWriteFS{m, t}, Options{ReadOnly: true})
	defer r.Close()
	var ids []uuid.UUID
	for i := range 6 {
		meta, err := w.Create(ctx, Meta{Name: fmt.Sprint(i)})
		require.NoError(t, err)
		ids = append(ids, meta.ID)
		_, err = w.UpdateMeta(ctx, ids[i/2], func(m *Meta) { m.Model = fmt.Sprint("model ", i) })
		require.NoError(t, err)
		if i == 3 {
			require.NoError(t, m.Remove(filepath.Join(memRoot, catalogueName)))
		}
		want, err := w.List(ctx)
		require.NoError(t, err)
		got, err := r.List(ctx)
		require.NoError(t, err)
		assert.Equal(t, want, got, "step %d", i)
		recent, err := r.ListRecent(ctx, 3)
		require.NoError(t, err)
		assert.Equal(t, newestFirst(want, 3), recent, "step %d", i)
		if i == 4 {
			// A damaged catalogue the reader must read around, not repair.
			require.NoError(t, w.Close())
			writeMemFile(t, m, filepath.Join(memRoot, catalogueLogName), []byte("garbage\n"))
			got, err := r.List(ctx)
			require.NoError(t, err)
			assert.Equal(t, want, got, "damaged catalogue")
			w = openMem(t, m, o)
		}
	}
}

// TestCatalogueWritersAtOnce: several Stores on one directory (each
// lock file taken through its own descriptor, as another process's would
// be) write their own sessions at once; every List agrees with the files.
func TestCatalogueWritersAtOnce(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	const writers, each = 3, 8
	first, err := Open(dir, nil) // the root, made once
	require.NoError(t, err)
	require.NoError(t, first.Close())
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			s, err := Open(dir, nil)
			if err != nil {
				errs <- err
				return
			}
			defer s.Close()
			for i := range each {
				meta, err := s.Create(ctx, Meta{Name: fmt.Sprint(w, "/", i)})
				if err != nil {
					errs <- err
					return
				}
				if _, err := s.UpdateMeta(ctx, meta.ID, func(m *Meta) { m.Model = "updated" }); err != nil {
					errs <- err
					return
				}
				if _, err := s.List(ctx); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	s, err := Open(dir, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer s.Close()
	got, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, got, writers*each)
	ids, err := sessionIDs(vfs.Default, filepath.Join(dir, sessionsDir))
	require.NoError(t, err)
	for i, id := range ids {
		m, _, err := readMeta(vfs.Default, filepath.Join(dir, sessionsDir, id.String()), id)
		require.NoError(t, err)
		assert.Equal(t, m, got[i])
		assert.Equal(t, "updated", got[i].Model)
	}
	// And the catalogue says so by itself: every entry current.
	st, err := catalogue.Load(vfs.Default, dir)
	require.NoError(t, err)
	assert.Zero(t, st.PendingLen(), "every pending record has its commit")
	for _, id := range ids {
		e, ok, usable := st.Lookup(id, -1)
		require.True(t, ok && usable)
		assert.Equal(t, "updated", e.Meta.Model)
	}
}

// TestCatalogueXproc: two writer processes and this one create and update
// sessions at once, each under its own session locks, all through the one
// catalogue; then the catalogue holds every session as its session.json
// does, with no pending record left open.
func TestCatalogueXproc(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(dir, nil)
	require.NoError(t, err)
	defer s.Close()
	exe, err := os.Executable()
	require.NoError(t, err)
	var wg sync.WaitGroup
	outs := make([]string, 2)
	for i := range outs {
		cmd := exec.CommandContext(t.Context(), exe, "-test.run=^$")
		gorace := strings.TrimSpace(os.Getenv("GORACE") + " atexit_sleep_ms=0")
		cmd.Env = append(os.Environ(), apiHelperEnv+"=catalogue-writes", apiDirEnv+"="+dir, apiSessionEnv+"="+uuid.Nil.String(), "GORACE="+gorace)
		wg.Go(func() {
			out, err := cmd.CombinedOutput()
			outs[i] = fmt.Sprintf("%s%v", out, err) // "ok<nil>" when all went well
		})
	}
	for i := range 10 {
		meta, err := s.Create(ctx, Meta{Name: fmt.Sprint("parent ", i)})
		require.NoError(t, err)
		_, err = s.UpdateMeta(ctx, meta.ID, func(m *Meta) { m.Model = "updated" })
		require.NoError(t, err)
	}
	wg.Wait()
	assert.Equal(t, []string{"ok<nil>", "ok<nil>"}, outs)
	require.NoError(t, s.Close())

	st, err := catalogue.Load(vfs.Default, dir)
	require.NoError(t, err)
	assert.Zero(t, st.PendingLen(), "every pending record has its commit")
	r, err := Open(dir, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer r.Close()
	got, err := r.List(ctx)
	require.NoError(t, err)
	require.Len(t, got, 30)
	for _, m := range got {
		onDisk, _, err := readMeta(vfs.Default, filepath.Join(dir, sessionsDir, m.ID.String()), m.ID)
		require.NoError(t, err)
		assert.Equal(t, onDisk, m)
		assert.Equal(t, "updated", m.Model)
		e, ok, usable := st.Lookup(m.ID, -1)
		require.True(t, ok && usable, "the catalogue knows %s", m.Name)
		assert.Equal(t, onDisk, metaOf(e.Meta))
	}
}

// statCountFS counts the Stat and ReadDir calls below a directory.
type statCountFS struct {
	vfs.FS
	under          string
	stats, readDir atomic.Int64
}

func (c *statCountFS) Stat(name string) (fs.FileInfo, error) {
	if strings.HasPrefix(name, c.under+string(filepath.Separator)) {
		c.stats.Add(1)
	}
	return c.FS.Stat(name)
}

func (c *statCountFS) ReadDir(name string) ([]string, error) {
	if name == c.under {
		c.readDir.Add(1)
	}
	return c.FS.ReadDir(name)
}

// TestListTrustsCurrentCatalogue: while the sessions directory is as the
// catalogue last recorded it, List, ListRecent and ListPage answer from
// the catalogue alone: no listing of the sessions directory, no stat or
// read of a session.json, except the one with a write in progress; once
// the directory changed, List lists it and stats every session.json.
func TestListTrustsCurrentCatalogue(t *testing.T) {
	ctx := context.Background()
	m, metas := catalogueStore(t, 5)
	sessions := filepath.Join(memRoot, sessionsDir)
	count := &statCountFS{FS: m, under: sessions}
	s := openMem(t, count, Options{ReadOnly: true})
	count.stats.Store(0)
	got, err := s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, metas, got)
	recent, err := s.ListRecent(ctx, 2)
	require.NoError(t, err)
	assert.Equal(t, newestFirst(metas, 2), recent)
	page, _, err := s.ListPage(ctx, Query{Limit: 3}, "")
	require.NoError(t, err)
	assert.Equal(t, newestFirst(metas, 3), page)
	assert.Zero(t, count.stats.Load(), "stats below the sessions directory")
	assert.Zero(t, count.readDir.Load(), "listings of the sessions directory")
	require.NoError(t, s.Close())

	// A pending record without its commit (a write in progress): that
	// session alone is read.
	b, err := vfs.ReadFile(m, filepath.Join(memRoot, catalogueLogName))
	require.NoError(t, err)
	dirInfo, err := m.Stat(sessions)
	require.NoError(t, err)
	b = catalogue.AppendRecord(b, catalogue.Record{Kind: catalogue.KindPending, Dir: catalogue.StampOf(dirInfo), ID: metas[1].ID})
	writeMemFile(t, m, filepath.Join(memRoot, catalogueLogName), b)
	reads := vfs.NewCounting(count)
	s = openMem(t, reads, Options{ReadOnly: true})
	got, err = s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, metas, got)
	for _, meta := range metas {
		opens := reads.Stats()[sessionPath(meta.ID, metaFile)].Opens
		if meta.ID == metas[1].ID {
			assert.Equal(t, 1, opens, "the session being written is read")
		} else {
			assert.Zero(t, opens, "session %s is not read", meta.Name)
		}
	}
	require.NoError(t, s.Close())

	touchSessionsDir(t, m)
	count.stats.Store(0)
	count.readDir.Store(0)
	s = openMem(t, count, Options{ReadOnly: true})
	defer s.Close()
	got, err = s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, metas, got)
	assert.GreaterOrEqual(t, count.stats.Load(), int64(len(metas)-1), "a changed directory: every session.json the catalogue vouches for is stat'ed (the pending one is read)")
	assert.Equal(t, int64(1), count.readDir.Load(), "a changed directory is listed")
}

// TestListCatalogueDamagedTail: a damaged byte that joins the catalogue
// log's last two lines (the pending record and the commit of an
// UpdateMeta) reads as an unsynced tail, which leaves the entry before
// the update in the catalogue; the listings must not take it for
// current, and read the updated session.json.
func TestListCatalogueDamagedTail(t *testing.T) {
	ctx := context.Background()
	m, metas := catalogueStore(t, 3)
	s := openMem(t, m, deterministic(Options{}))
	updated, err := s.UpdateMeta(ctx, metas[1].ID, func(m *Meta) { m.Model = "updated" })
	require.NoError(t, err)
	require.NoError(t, s.Close())
	metas[1] = updated

	path := filepath.Join(memRoot, catalogueLogName)
	b, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	lines := bytes.SplitAfter(b, []byte("\n"))
	require.GreaterOrEqual(t, len(lines), 3)
	nl := len(b) - len(lines[len(lines)-2]) - 1 // the newline before the last line
	require.Equal(t, byte('\n'), b[nl])
	b[nl] ^= 0x01
	writeMemFile(t, m, path, b)

	s = openMem(t, m, Options{ReadOnly: true})
	defer s.Close()
	got, err := s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, metas, got, "List")
	recent, err := s.ListRecent(ctx, 3)
	require.NoError(t, err)
	assert.Equal(t, newestFirst(metas, 3), recent, "ListRecent")
	page, _, err := s.ListPage(ctx, Query{Limit: 3}, "")
	require.NoError(t, err)
	assert.Equal(t, newestFirst(metas, 3), page, "ListPage")
}
