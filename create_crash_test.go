package sessionstore

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The concurrent Creates workload: createWriters goroutines of one Store
// each create createPer sessions, one after another, so that their
// catalogue records and directory syncs are shared (catalogue.go's
// batches, the Store's sessionsSync).
const (
	createWriters = 4
	createPer     = 3
)

// createID is the id of writer w's i-th session, fixed so that every run
// and every crash clone names the same sessions.
func createID(w, i int) uuid.UUID {
	return uuid.MustParse(fmt.Sprintf("01a02f3f-%04x-7000-8000-%012x", w, i))
}

// createIDs lists every id the workload creates.
func createIDs() []uuid.UUID {
	var ids []uuid.UUID
	for w := range createWriters {
		for i := range createPer {
			ids = append(ids, createID(w, i))
		}
	}
	return ids
}

// concurrentCreates runs the workload on fsys until it ends or the power
// fails (every later operation fails then, so each writer stops at its
// first error), closes the store, and returns the ids whose Create
// returned nil.
func concurrentCreates(fsys vfs.FS) []uuid.UUID {
	ctx := context.Background()
	s, err := Open(memRoot, &Options{fs: fsys})
	if err != nil {
		return nil
	}
	var mu sync.Mutex
	var acked []uuid.UUID
	var wg sync.WaitGroup
	for w := range createWriters {
		wg.Go(func() {
			for i := range createPer {
				id := createID(w, i)
				if _, err := s.Create(ctx, Meta{ID: id, Name: id.String()}); err != nil {
					return
				}
				mu.Lock()
				acked = append(acked, id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s.Close()
	return acked
}

// createCrashPointsEnv sizes TestCreateCrashPoints: by default 20 crash
// points of the workload, evenly spread, are checked under every mode (the
// README's test command runs it under the race detector); "all" checks
// every point (.ci/run's long runs), a number that many.
const createCrashPointsEnv = "SESSIONSTORE_CREATE_CRASH_POINTS"

// TestCreateCrashPoints cuts the power at every mutating operation of
// concurrent Creates and checks each crash clone, in every crash mode:
// every Create that returned is listed (by List and ListRecent alike)
// and opens for writing; no session is listed half made (List reports
// no unreadable session); and every session not listed can be created
// again under its id, so that a Create cut short blocks none after it.
//
// Which operation a crash point cuts depends on how the writers
// interleave, which changes between runs; each run checks what it cut.
func TestCreateCrashPoints(t *testing.T) {
	t.Parallel()
	for _, coarse := range []bool{false, true} {
		t.Run(fmt.Sprint("coarse clock ", coarse), func(t *testing.T) {
			t.Parallel()
			testCreateCrashPoints(t, coarse)
		})
	}
}

// testCreateCrashPoints is TestCreateCrashPoints on a MemFS, or with
// coarse on one whose clock never moves (coarseFS): only sizes tell a
// change, so that the catalogue's pending records must keep ListRecent
// right without the stamps' help.
func testCreateCrashPoints(t *testing.T, coarse bool) {
	wrap := func(m *vfs.MemFS) vfs.FS {
		if coarse {
			return coarseFS{m}
		}
		return m
	}
	m := vfs.NewMemFS()
	total := 0
	m.SetFault(func(op vfs.Op, _ string) error {
		if vfs.Mutating(op) {
			total++
		}
		return nil
	})
	require.Len(t, concurrentCreates(wrap(m)), createWriters*createPer, "the workload runs to the end without a crash")
	checkCreatesAfterCrash(t, wrap(m.CrashClone(vfs.KeepSynced, 0)), createIDs(), "no crash")

	// The number of operations changes by a few with the interleaving: a
	// run whose crash point falls past its end loses power at its end.
	points := testSize(t, createCrashPointsEnv, min(20, total+8), total+8)
	states := 0
	for p := range points {
		point := 1 + p*(total+7)/max(1, points-1)
		m := vfs.NewMemFS()
		n := 0
		m.SetFault(func(op vfs.Op, _ string) error { // called with MemFS's lock held
			if vfs.Mutating(op) {
				if n++; n == point {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		acked := concurrentCreates(wrap(m))
		cut := m.PowerCut()
		m.PowerOff()
		for i, mode := range vfs.CrashModes {
			clone := wrap(m.CrashClone(mode, uint64(point*10+i)))
			if _, err := clone.Stat(filepath.Join(memRoot, sessionsDir)); err != nil {
				continue // the store was not made yet
			}
			states++
			checkCreatesAfterCrash(t, clone, acked, fmt.Sprintf("crash point %d (%v), %s", point, cut, mode))
		}
		if t.Failed() {
			t.Fatalf("crash point %d of about %d failed", point, total)
		}
	}
	t.Logf("concurrent Creates: %d crash states checked (%d crash points of about %d operations)", states, points, total)
}

// checkCreatesAfterCrash opens the store on a crash clone and checks what
// TestCreateCrashPoints promises, acked being the ids whose Create
// returned.
func checkCreatesAfterCrash(t *testing.T, clone vfs.FS, acked []uuid.UUID, msg string) {
	t.Helper()
	ctx := context.Background()
	all := createIDs()
	s := openMem(t, clone, Options{})
	metas, err := s.List(ctx)
	require.NoError(t, err, "%s: List reports no half-made session", msg)
	listed := map[uuid.UUID]bool{}
	for _, m := range metas {
		require.Contains(t, all, m.ID, msg)
		assert.Equal(t, m.ID.String(), m.Name, "%s: session %s", msg, m.ID)
		listed[m.ID] = true
	}
	for _, id := range acked {
		assert.True(t, listed[id], "%s: the Create of %s returned, and the session is not listed", msg, id)
	}
	recent, err := s.ListRecent(ctx, len(all))
	require.NoError(t, err, msg)
	if len(metas) == 0 {
		metas = nil
	}
	if len(recent) == 0 {
		recent = nil
	}
	assert.Equal(t, newestFirst(metas, len(all)), recent, "%s: ListRecent agrees with List", msg)
	for _, id := range all {
		if listed[id] {
			_, err := s.Append(ctx, id, UserText("after the crash"))
			assert.NoError(t, err, "%s: session %s opens for writing", msg, id)
			continue
		}
		_, err := s.Create(ctx, Meta{ID: id, Name: id.String()})
		assert.NoError(t, err, "%s: session %s, not listed, is created again", msg, id)
	}
	require.NoError(t, s.Close(), msg)

	r := openMem(t, clone, Options{ReadOnly: true})
	metas, err = r.List(ctx)
	require.NoError(t, err, msg)
	assert.Len(t, metas, len(all), "%s: every session is there after the checks", msg)
	require.NoError(t, r.Close(), msg)
}
