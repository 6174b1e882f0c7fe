package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// memTree lists every path under root in m with its size (-1 for a
// directory), for comparing what is on disk.
func memTree(t *testing.T, m vfs.FS, root string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := m.ReadDir(dir)
		require.NoError(t, err)
		for _, n := range names {
			p := filepath.Join(dir, n)
			info, err := m.Stat(p)
			require.NoError(t, err)
			if info.IsDir() {
				out[p] = -1
				walk(p)
			} else {
				out[p] = info.Size()
			}
		}
	}
	walk(root)
	return out
}

// openDeferred opens a deferring store on m.
func openDeferred(t *testing.T, m vfs.FS) *Store {
	t.Helper()
	o := deterministic(Options{fs: m, DeferCreate: true})
	s, err := Open(memRoot, &o)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// TestDeferCreateWritesNothing: a deferred Create makes no mutating file
// operation; the session is absent from every read until its first
// Append, which makes it whole; a crash before that leaves nothing.
func TestDeferCreateWritesNothing(t *testing.T) {
	ctx := t.Context()
	m := vfs.NewMemFS()
	s := openDeferred(t, m)
	_, err := s.List(ctx) // the catalogue exists before, so its rebuild is not counted below
	require.NoError(t, err)
	before := memTree(t, m, memRoot)
	mutating := 0
	m.SetFault(func(op vfs.Op, _ string) error {
		if vfs.Mutating(op) {
			mutating++
		}
		return nil
	})
	meta, err := s.Create(ctx, Meta{Name: "window", WorkingDir: "/w"})
	require.NoError(t, err)
	require.NotEqual(t, uuid.Nil, meta.ID)
	assert.Equal(t, "window", meta.Name)
	assert.False(t, meta.CreatedAt.IsZero())
	assert.Zero(t, mutating, "a deferred Create writes nothing")
	m.SetFault(nil)
	assert.Equal(t, before, memTree(t, m, memRoot))

	list, err := s.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)
	page, _, err := s.ListPage(ctx, Query{}, "")
	require.NoError(t, err)
	assert.Empty(t, page)
	_, err = s.Meta(ctx, meta.ID)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Load(ctx, meta.ID)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = s.Head(ctx, meta.ID)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.Equal(t, before, memTree(t, m, memRoot), "reads make nothing")

	// A power cut now: the clone has no session.
	clone := m.CrashClone(vfs.KeepAll, 1)
	s2 := openDeferred(t, clone)
	list, err = s2.List(ctx)
	require.NoError(t, err)
	assert.Empty(t, list)

	// The first append makes the session, with the metadata Create returned.
	ev, err := s.Append(ctx, meta.ID, UserText("hello"))
	require.NoError(t, err)
	got, err := s.Meta(ctx, meta.ID)
	require.NoError(t, err)
	written := meta
	written.UpdatedAt = ev.Time // the last write (Meta)
	assert.Equal(t, written, got)
	list, err = s.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, []Meta{written}, list)
	evs, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	require.Len(t, evs, 1)
	assert.Equal(t, ev.ID, evs[0].ID)

	// And it is durable: a power cut keeps it.
	require.NoError(t, s.Close())
	s3 := openDeferred(t, m.CrashClone(vfs.KeepSynced, 1))
	evs, err = s3.Load(ctx, meta.ID)
	require.NoError(t, err)
	assert.Len(t, evs, 1)
}

// TestDeferCreateFirstWrites: each first write makes the session; a bad
// event makes nothing; Create refuses an id held deferred or stored.
func TestDeferCreateFirstWrites(t *testing.T) {
	ctx := t.Context()
	tests := []struct {
		name  string
		write func(s *Store, id uuid.UUID) error
		// events the session has after write
		events int
	}{
		{"Append", func(s *Store, id uuid.UUID) error { _, err := s.Append(ctx, id, UserText("a")); return err }, 1},
		{"AppendBatch", func(s *Store, id uuid.UUID) error {
			_, err := s.AppendBatch(ctx, id, UserText("a"), UserText("b"))
			return err
		}, 2},
		{"UpdateMeta", func(s *Store, id uuid.UUID) error {
			_, err := s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "renamed" })
			return err
		}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := vfs.NewMemFS()
			s := openDeferred(t, m)
			meta, err := s.Create(ctx, Meta{Name: "n"})
			require.NoError(t, err)
			_, err = s.Create(ctx, Meta{ID: meta.ID})
			assert.ErrorIs(t, err, ErrExists, "the id is held deferred")

			_, err = s.Append(ctx, meta.ID, Event{}) // invalid: no kind
			require.ErrorIs(t, err, ErrInvalidEvent)
			_, err = s.Meta(ctx, meta.ID)
			require.ErrorIs(t, err, ErrNotFound, "a refused event makes nothing")

			require.NoError(t, tt.write(s, meta.ID))
			got, err := s.Meta(ctx, meta.ID)
			require.NoError(t, err)
			assert.Equal(t, meta.ID, got.ID)
			evs, err := s.Load(ctx, meta.ID)
			require.NoError(t, err)
			assert.Len(t, evs, tt.events)
			_, err = s.Create(ctx, Meta{ID: meta.ID})
			assert.ErrorIs(t, err, ErrExists, "the id is stored")
		})
	}
}

// TestDeferCreateConcurrentFirstAppends: many first appends at once make
// the session once and all land in it.
func TestDeferCreateConcurrentFirstAppends(t *testing.T) {
	ctx := t.Context()
	s := openDeferred(t, vfs.NewMemFS())
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { _, errs[i] = s.Append(ctx, meta.ID, UserText("x")) })
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	evs, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	assert.Len(t, evs, n)
}

// TestDeferCreateCollision: two Stores defer one id; the first append
// makes it, the other's writes get ErrExists and never land in it,
// whether the winner still holds the session open or not.
func TestDeferCreateCollision(t *testing.T) {
	ctx := t.Context()
	for _, winnerOpen := range []bool{true, false} {
		t.Run(map[bool]string{true: "winner open", false: "winner closed"}[winnerOpen], func(t *testing.T) {
			m := vfs.NewMemFS()
			a, b := openDeferred(t, m), openDeferred(t, m)
			id := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
			_, err := a.Create(ctx, Meta{ID: id, Name: "a"})
			require.NoError(t, err)
			_, err = b.Create(ctx, Meta{ID: id, Name: "b"})
			require.NoError(t, err, "neither knows of the other yet")
			_, err = a.Append(ctx, id, UserText("from a"))
			require.NoError(t, err)
			if !winnerOpen {
				require.NoError(t, a.Close())
			}
			_, err = b.Append(ctx, id, UserText("from b"))
			assert.ErrorIs(t, err, ErrExists)
			_, err = b.Append(ctx, id, UserText("from b, again"))
			assert.ErrorIs(t, err, ErrExists, "a retry does not merge either")
			_, err = b.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "b" })
			assert.ErrorIs(t, err, ErrExists)

			require.NoError(t, a.Close())
			r := openDeferred(t, m)
			got, err := r.Meta(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, "a", got.Name)
			evs, err := r.Load(ctx, id)
			require.NoError(t, err)
			require.Len(t, evs, 1)
			assert.JSONEq(t, `{"content":"from a"}`, string(evs[0].Record))
		})
	}
}

// TestDeferCreateSubagent: a subagent's first write makes its deferred
// parent first.
func TestDeferCreateSubagent(t *testing.T) {
	ctx := t.Context()
	s := openDeferred(t, vfs.NewMemFS())
	parent, err := s.Create(ctx, Meta{Name: "parent"})
	require.NoError(t, err)
	child, err := s.Create(ctx, Meta{Name: "child", ParentSession: parent.ID})
	require.NoError(t, err)
	assert.Equal(t, 1, child.Depth)
	_, err = s.Append(ctx, child.ID, UserText("sub"))
	require.NoError(t, err)
	list, err := s.List(ctx)
	require.NoError(t, err)
	ids := make([]uuid.UUID, len(list))
	for i, m := range list {
		ids[i] = m.ID
	}
	assert.True(t, slices.Contains(ids, parent.ID) && slices.Contains(ids, child.ID), "both made: %v", ids)
}

// TestDeferCreateRemote: with a Remote, a deferred Create puts no object;
// the first append does; another Store deferring the same id gets
// ErrExists at its first append.
func TestDeferCreateRemote(t *testing.T) {
	ctx := t.Context()
	obj := newMemObjects()
	open := func() *Store {
		o := remoteOpts(obj)
		o.DeferCreate = true
		s, err := Open(t.TempDir(), o)
		require.NoError(t, err)
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	meta, err := a.Create(ctx, Meta{Name: "a"})
	require.NoError(t, err)
	_, err = b.Create(ctx, Meta{ID: meta.ID, Name: "b"})
	require.NoError(t, err)
	assert.Empty(t, obj.keys(""), "no object before the first append")
	assert.Zero(t, obj.count("create")+obj.count("put"))

	_, err = a.Append(ctx, meta.ID, textEv("a"))
	require.NoError(t, err)
	assert.NotEmpty(t, obj.keys(""))
	_, err = b.Append(ctx, meta.ID, textEv("b"))
	assert.ErrorIs(t, err, ErrExists)
	_, err = b.Create(ctx, Meta{ID: meta.ID})
	assert.ErrorIs(t, err, ErrExists, "the object store has it")
	require.NoError(t, a.Close())
	c := open()
	assert.Equal(t, []string{"a"}, loadTexts(t, c, meta.ID))
}

// deferWorkload defers two sessions on a store on fsys, appends to the
// first, and closes. ready is called once the store is open and its
// catalogue built (what the crash points count from); appended once the
// Append returned nil.
func deferWorkload(fsys vfs.FS, ready, appended func()) (used, unused Meta, err error) {
	ctx := context.Background()
	o := deterministic(Options{fs: fsys, DeferCreate: true})
	s, err := Open(memRoot, &o)
	if err != nil {
		return used, unused, err
	}
	defer s.Close()
	if _, err := s.List(ctx); err != nil {
		return used, unused, err
	}
	ready()
	if used, err = s.Create(ctx, Meta{Name: "used"}); err != nil {
		return used, unused, err
	}
	if unused, err = s.Create(ctx, Meta{Name: "unused"}); err != nil {
		return used, unused, err
	}
	if _, err = s.Append(ctx, used.ID, UserText("first")); err != nil {
		return used, unused, err
	}
	appended()
	return used, unused, s.Close()
}

// TestDeferCreateCrashPoints cuts the power at every mutating operation
// of deferWorkload after the store is open (a sample by default, every
// one with SESSIONSTORE_CRASH_STATES=all): in every crash state the
// unused session does not exist, and the used one either does not exist
// or has the metadata Create returned and at most its one event (exactly
// one once Append returned).
func TestDeferCreateCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	counting := false
	total := 0
	m0 := vfs.NewMemFS()
	m0.SetFault(func(op vfs.Op, _ string) error {
		if counting && vfs.Mutating(op) {
			total++
		}
		return nil
	})
	_, _, err := deferWorkload(m0, func() { counting = true }, func() {})
	require.NoError(t, err)
	require.Positive(t, total)
	// SESSIONSTORE_CRASH_STATES=all checks every crash point; by default
	// about 18 of them, evenly spread, the first and the last included.
	want := testSize(t, crashStatesEnv, 36, 2*total)
	stride := max(1, (2*total+want-1)/want)
	states := 0
	for point := 1; point <= total; point = nextPoint(point, stride, total) {
		m := vfs.NewMemFS()
		armed, n, done := false, 0, false
		m.SetFault(func(op vfs.Op, _ string) error {
			if armed && vfs.Mutating(op) {
				if n++; n == point {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		used, unused, err := deferWorkload(m, func() { armed = true }, func() { done = true })
		require.ErrorIs(t, err, vfs.ErrPowerLoss, "crash point %d", point)
		for i, mode := range []vfs.CrashMode{vfs.KeepSynced, vfs.KeepAll} {
			states++
			msg := fmt.Sprintf("crash point %d of %d, %s", point, total, mode)
			o := deterministic(Options{fs: m.CrashClone(mode, uint64(point*10+i))})
			s, err := Open(memRoot, &o)
			require.NoError(t, err, msg)
			list, err := s.List(ctx)
			require.NoError(t, err, msg)
			require.LessOrEqual(t, len(list), 1, msg)
			_, err = s.Meta(ctx, unused.ID)
			assert.ErrorIs(t, err, ErrNotFound, msg)
			if len(list) == 0 {
				assert.False(t, done && mode == vfs.KeepSynced, "%s: lost after Append returned", msg)
				require.NoError(t, s.Close())
				continue
			}
			assert.Equal(t, used, withUpdated(list[0], used.UpdatedAt), msg)
			evs, err := s.Load(ctx, used.ID)
			require.NoError(t, err, msg)
			assert.LessOrEqual(t, len(evs), 1, msg)
			if done && mode == vfs.KeepSynced {
				assert.Len(t, evs, 1, msg)
			}
			require.NoError(t, s.Close())
		}
	}
	t.Logf("deferred create crash states checked: %d (%d crash points)", states, total)
}

// nextPoint is the crash point after point, stride on, ending on total.
func nextPoint(point, stride, total int) int {
	if point < total && point+stride > total {
		return total
	}
	return point + stride
}

// TestDeferCreateFaults fails the n-th mutating operation of the first
// append: the append fails (unless only a derived file failed), nothing
// stored is damaged, and a retry on the
// same Store either writes the event into a whole session or, if the
// failure came after session.json was made, reports the stopped session
// (ErrSessionFailed), as an immediate Create does.
func TestDeferCreateFaults(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	injected := errors.New("injected fault")
	for n := 1; ; n++ {
		m := vfs.NewMemFS()
		s := openDeferred(t, m)
		_, err := s.List(ctx)
		require.NoError(t, err)
		meta, err := s.Create(ctx, Meta{Name: "n"})
		require.NoError(t, err)
		f := vfs.FailNth(n, injected, vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpTruncate, vfs.OpRename, vfs.OpRemove, vfs.OpMkdir, vfs.OpSyncDir)
		m.SetFault(f.Hook)
		_, err = s.Append(ctx, meta.ID, UserText("x"))
		m.SetFault(nil)
		if !f.Fired() {
			require.NoError(t, err)
			require.Greater(t, n, 1)
			return
		}
		if err != nil { // a failed write of a derived file (index.jsonl) is not an error
			require.ErrorIs(t, err, injected, "fault %d", n)
		}
		_, err = s.Append(ctx, meta.ID, UserText("retry"))
		if err != nil {
			require.ErrorIs(t, err, ErrSessionFailed, "fault %d: retry", n)
		}
		require.NoError(t, s.Close())
		r := openDeferred(t, m)
		list, err := r.List(ctx)
		require.NoError(t, err, "fault %d", n)
		for _, got := range list {
			assert.Equal(t, meta, withUpdated(got, meta.UpdatedAt), "fault %d", n)
			evs, err := r.Load(ctx, meta.ID)
			require.NoError(t, err, "fault %d", n)
			assert.LessOrEqual(t, len(evs), 2, "fault %d", n)
		}
	}
}

// withUpdated is m with UpdatedAt at: the metadata as Create made it,
// when a later write (the first append's) may have moved UpdatedAt on.
func withUpdated(m Meta, at time.Time) Meta {
	if !m.UpdatedAt.Before(at) {
		m.UpdatedAt = at
	}
	m.Usage = nil // the totals of the events appended since (usage.go)
	return m
}
