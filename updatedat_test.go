package sessionstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// settableClock is a clock a test sets.
type settableClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *settableClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *settableClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// updatedAtEverywhere returns the UpdatedAt of session id as Meta, List,
// ListRecent, ListPage and Sessions report it.
func updatedAtEverywhere(t *testing.T, s *Store, id uuid.UUID) map[string]time.Time {
	t.Helper()
	ctx := context.Background()
	out := map[string]time.Time{}
	m, err := s.Meta(ctx, id)
	require.NoError(t, err)
	out["Meta"] = m.UpdatedAt
	find := func(name string, metas []Meta) {
		for _, m := range metas {
			if m.ID == id {
				out[name] = m.UpdatedAt
			}
		}
	}
	all, err := s.List(ctx)
	require.NoError(t, err)
	find("List", all)
	recent, err := s.ListRecent(ctx, 10)
	require.NoError(t, err)
	find("ListRecent", recent)
	page, _, err := s.ListPage(ctx, Query{}, "")
	require.NoError(t, err)
	find("ListPage", page)
	var seq []Meta
	for m, err := range s.Sessions(ctx, Query{}) {
		require.NoError(t, err)
		seq = append(seq, m)
	}
	find("Sessions", seq)
	require.Len(t, out, 5, "every listing holds the session")
	return out
}

// TestUpdatedAtIsLastWrite: a session open for appends reports its last
// write as UpdatedAt through Meta and every listing, at once, not only
// after it closes; Flush and Close record it in session.json.
func TestUpdatedAtIsLastWrite(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &settableClock{t: base}
	o := Options{}
	o.now = clock.now
	m := vfs.NewMemFS()
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{Name: "long running"})
	require.NoError(t, err)
	require.Equal(t, base, meta.UpdatedAt)

	clock.set(base.Add(40 * 24 * time.Hour))
	ev, err := s.Append(ctx, meta.ID, UserText("now"))
	require.NoError(t, err)
	require.Equal(t, clock.now(), ev.Time)
	for name, got := range updatedAtEverywhere(t, s, meta.ID) {
		assert.Equal(t, ev.Time, got, "%s of an open session reports its last write", name)
	}
	disk, _, err := readMeta(m, sessionPath(meta.ID), meta.ID)
	require.NoError(t, err)
	assert.Equal(t, base, disk.UpdatedAt, "precondition: session.json lags until Flush or Close")

	require.NoError(t, s.Flush(ctx, meta.ID))
	disk, _, err = readMeta(m, sessionPath(meta.ID), meta.ID)
	require.NoError(t, err)
	assert.Equal(t, ev.Time, disk.UpdatedAt, "Flush records the last write")

	clock.set(base.Add(41 * 24 * time.Hour))
	ev2, err := s.Append(ctx, meta.ID, UserText("later"))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s2 := openMem(t, m, o)
	defer s2.Close()
	for name, got := range updatedAtEverywhere(t, s2, meta.ID) {
		assert.Equal(t, ev2.Time, got, "%s after Close", name)
	}
}

// TestPruneKeepsSessionJustWritten: a session created long ago and
// appended to a moment ago is not older than Prune's Before, in a dry run
// or a real one, in the Store that wrote it.
func TestPruneKeepsSessionJustWritten(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := &settableClock{t: now.Add(-60 * 24 * time.Hour)}
	o := Options{}
	o.now = clock.now
	s := openMem(t, vfs.NewMemFS(), o)
	defer s.Close()
	old, err := s.Create(ctx, Meta{Name: "old and idle"})
	require.NoError(t, err)
	appendN(t, s, old.ID, 1)
	busy, err := s.Create(ctx, Meta{Name: "old and busy"})
	require.NoError(t, err)
	appendN(t, s, busy.ID, 1)
	clock.set(now)
	_, err = s.Append(ctx, busy.ID, UserText("just now"))
	require.NoError(t, err)

	policy := PrunePolicy{KeepRecent: -1, Before: now.Add(-30 * 24 * time.Hour)}
	for _, dry := range []bool{true, false} {
		policy.DryRun = dry
		res, err := s.Prune(ctx, policy)
		require.NoError(t, err)
		assert.Equal(t, []string{"old and idle"}, names(res.Removed), "dry run %v", dry)
		assert.Empty(t, res.Skipped)
	}
	path, err := s.Load(ctx, busy.ID)
	require.NoError(t, err)
	assert.Len(t, path, 2)
}

// TestPruneJudgesUnrecordedWrites: a writer that appended and crashed
// before recording its last write in session.json (as one in another
// process does until it closes) leaves a session whose session.json says
// it is old; Prune judges it by its newest event and keeps it, and the
// next writer's open records the write.
func TestPruneJudgesUnrecordedWrites(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := &settableClock{t: now.Add(-60 * 24 * time.Hour)}
	o := Options{}
	o.now = clock.now
	m := vfs.NewMemFS()
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{Name: "crashed writer"})
	require.NoError(t, err)
	appendN(t, s, meta.ID, 1)
	require.NoError(t, s.CloseSession(ctx, meta.ID))
	clock.set(now)
	last, err := s.Append(ctx, meta.ID, UserText("the last write"))
	require.NoError(t, err)
	crashed := m.CrashClone(vfs.KeepSynced, 0)

	s2 := openMem(t, crashed, o)
	defer s2.Close()
	disk, _, err := readMeta(crashed, sessionPath(meta.ID), meta.ID)
	require.NoError(t, err)
	require.True(t, disk.UpdatedAt.Before(now), "precondition: session.json does not hold the last write")
	policy := PrunePolicy{KeepRecent: -1, Before: now.Add(-30 * 24 * time.Hour)}
	for _, dry := range []bool{true, false} {
		policy.DryRun = dry
		res, err := s2.Prune(ctx, policy)
		require.NoError(t, err)
		assert.Empty(t, res.Removed, "dry run %v", dry)
	}
	// The next writer's open finds the newer event and records it.
	_, err = s2.Head(ctx, meta.ID)
	require.NoError(t, err)
	got, err := s2.Meta(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, last.Time, got.UpdatedAt)
	require.NoError(t, s2.CloseSession(ctx, meta.ID))
	disk, _, err = readMeta(crashed, sessionPath(meta.ID), meta.ID)
	require.NoError(t, err)
	assert.Equal(t, last.Time, disk.UpdatedAt)
}

// TestPruneRechecksUnderLock: a session written after Prune chose it is
// kept, with ErrConflict: the check is made again under its lock.
func TestPruneRechecksUnderLock(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	clock := &settableClock{t: now.Add(-60 * 24 * time.Hour)}
	o := Options{}
	o.now = clock.now
	s := openMem(t, vfs.NewMemFS(), o)
	defer s.Close()
	meta, err := s.Create(ctx, Meta{Name: "written after the plan"})
	require.NoError(t, err)
	appendN(t, s, meta.ID, 1)
	require.NoError(t, s.CloseSession(ctx, meta.ID))
	plan, err := s.Prune(ctx, PrunePolicy{KeepRecent: -1, Before: now.Add(-30 * 24 * time.Hour), DryRun: true})
	require.NoError(t, err)
	require.Len(t, plan.Removed, 1, "precondition: the plan removes it")

	clock.set(now)
	appendN(t, s, meta.ID, 1) // between the plan and the delete
	err = s.deleteSession(ctx, meta.ID, s.unchangedSince(ctx, plan.Removed[0].Meta), true)
	require.ErrorIs(t, err, ErrConflict)
	path, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	assert.Len(t, path, 2, "kept whole")
}

// TestUpdatedAtSurvivesIndexLoad: a session opened without its index
// and appended to, first at the clock's time and then with an older
// time (AppendOptions.KeepTime), keeps reporting its newest append as
// UpdatedAt once a call loads its index, and Close records that one.
func TestUpdatedAtSurvivesIndexLoad(t *testing.T) {
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := &settableClock{t: base}
	o := Options{}
	o.now = clock.now
	m := vfs.NewMemFS()
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{Name: "resumed"})
	require.NoError(t, err)
	appendN(t, s, meta.ID, 3)
	require.NoError(t, s.Close())

	s = openMem(t, m, o)
	_, err = s.Load(ctx, meta.ID)
	require.NoError(t, err)
	h := s.reg.lookup(meta.ID)
	require.NotNil(t, h)
	h.mu.Lock()
	lazy := h.state == stateLazy
	h.mu.Unlock()
	require.True(t, lazy, "precondition: the session opened without its index")

	clock.set(base.Add(40 * 24 * time.Hour))
	newest, err := s.Append(ctx, meta.ID, UserText("newest"))
	require.NoError(t, err)
	imported := UserText("imported")
	imported.Time = base.Add(10 * 24 * time.Hour)
	_, err = s.AppendWith(ctx, meta.ID, AppendOptions{KeepTime: true}, imported)
	require.NoError(t, err)
	_, err = s.Tree(ctx, meta.ID) // loads the index
	require.NoError(t, err)
	h.mu.Lock()
	indexed := h.state == stateIndexed
	h.mu.Unlock()
	require.True(t, indexed, "precondition: Tree loaded the index")

	for name, got := range updatedAtEverywhere(t, s, meta.ID) {
		assert.Equal(t, newest.Time, got, "%s after the index was loaded", name)
	}
	require.NoError(t, s.Close())
	disk, _, err := readMeta(m, sessionPath(meta.ID), meta.ID)
	require.NoError(t, err)
	assert.Equal(t, newest.Time, disk.UpdatedAt, "Close records the newest append")
}

// TestUpdatedAtAfterCrashInFlushOrClose cuts the power at every mutating
// operation of a Flush and of a Close that record a session's last write,
// and checks that the next open finds the write in every crash state:
// Meta reports it, and Close records it in session.json. A cut after
// HEAD is written and before session.json leaves files a lazy open takes
// (lazy.go): that open must find it too.
func TestUpdatedAtAfterCrashInFlushOrClose(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	ctx := context.Background()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, op := range []string{"Flush", "Close"} {
		t.Run(op, func(t *testing.T) {
			points := 0
			for k := 1; ; k++ {
				clock := &settableClock{t: base}
				o := Options{}
				o.now = clock.now
				m := vfs.NewMemFS()
				s := openMem(t, m, o)
				meta, err := s.Create(ctx, Meta{Name: "cut"})
				require.NoError(t, err)
				appendN(t, s, meta.ID, 3)
				clock.set(base.Add(40 * 24 * time.Hour))
				last, err := s.Append(ctx, meta.ID, UserText("the last write"))
				require.NoError(t, err)
				n := 0
				m.SetFault(func(o vfs.Op, _ string) error {
					if vfs.Mutating(o) {
						if n++; n == k {
							return vfs.ErrPowerLoss
						}
					}
					return nil
				})
				if op == "Flush" {
					_ = s.Flush(ctx, meta.ID)
				}
				_ = s.Close()
				m.SetFault(nil)
				cut := m.PowerCut()
				if cut == nil {
					break
				}
				points++
				for _, mode := range vfs.CrashModes {
					state := fmt.Sprintf("crash point %d (%v), %s", k, cut, mode)
					c := m.CrashClone(mode, uint64(k))
					s2 := openMem(t, c, o)
					path, err := s2.Load(ctx, meta.ID)
					require.NoError(t, err, state)
					require.Equal(t, last.ID, path[len(path)-1].ID, "%s: the acknowledged append is there", state)
					got, err := s2.Meta(ctx, meta.ID)
					require.NoError(t, err, state)
					assert.Equal(t, last.Time, got.UpdatedAt, "%s: the open finds the last write", state)
					require.NoError(t, s2.Close(), state)
					disk, _, err := readMeta(c, sessionPath(meta.ID), meta.ID)
					require.NoError(t, err, state)
					assert.Equal(t, last.Time, disk.UpdatedAt, "%s: Close records it", state)
				}
			}
			require.Greater(t, points, 4, "HEAD's and session.json's replaces are crash points")
		})
	}
}
