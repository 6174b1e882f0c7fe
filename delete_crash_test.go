package sessionstore

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// deleteCrashSeedsEnv sizes TestDeleteCrashPoints. Unset, the test
// checks at every crash point the KeepSynced state and one other crash
// mode, each point the next mode in turn; set to a number n, every mode
// at every point, with n KeepRandomSectors seeds ("all": dirCrashSeeds).
const deleteCrashSeedsEnv = "SESSIONSTORE_DELETE_CRASH_SEEDS"

// TestDeleteCrashPoints cuts the power at every mutating operation of a
// Delete (the catalogue's record, the lock, the move aside and its
// directory syncs, every removal in the trash) and checks, in every crash
// mode, that the session is whole (it opens, loads every acknowledged
// event and its blob, Verify is clean, List and ListRecent show it) or
// gone (Meta and Load say ErrNotFound, List and ListRecent leave it
// out), that the other session is untouched, and that the Open after the
// crash empties the trash. Once Delete has returned, only "gone" is
// allowed.
func TestDeleteCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	seeds := testSize(t, deleteCrashSeedsEnv, 0, dirCrashSeeds)
	full := seeds > 0
	o := deterministic(Options{ChunkSize: 1 << 20})

	// run prepares two closed sessions (the victim with a blob), reopens
	// the store and deletes the victim with the power cut at its k-th
	// mutating operation (never if k is 0).
	run := func(k int) (m *vfs.MemFS, victim, other uuid.UUID, vEvs, oEvs []Event, cut bool) {
		m = vfs.NewMemFS()
		s := openMem(t, m, o)
		v, err := s.Create(ctx, Meta{Name: "victim"})
		require.NoError(t, err)
		w, err := s.Create(ctx, Meta{Name: "other"})
		require.NoError(t, err)
		vEvs = appendN(t, s, v.ID, 2)
		big, err := s.Append(ctx, v.ID, bigResult("c", 1))
		require.NoError(t, err)
		vEvs = append(vEvs, big)
		oEvs = appendN(t, s, w.ID, 2)
		require.NoError(t, s.Close())
		s = openMem(t, m, o)
		_, err = s.List(ctx) // the catalogue is current
		require.NoError(t, err)
		n := 0
		m.SetFault(func(op vfs.Op, path string) error {
			if vfs.Mutating(op) {
				n++
				if n == k {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		err = s.Delete(ctx, v.ID)
		m.SetFault(nil)
		s.Close()
		cut = m.PowerCut() != nil
		if !cut {
			require.NoError(t, err, "without a power cut Delete succeeds")
		}
		m.PowerOff()
		return m, v.ID, w.ID, vEvs, oEvs, cut
	}

	checkWhole := func(state string, s *Store, id uuid.UUID, want []Event) {
		t.Helper()
		got, err := s.Load(ctx, id)
		require.NoError(t, err, state)
		require.Len(t, got, len(want), "%s: every acknowledged event", state)
		for i := range want {
			require.Equal(t, want[i].ID, got[i].ID, state)
		}
		last, err := s.Event(ctx, id, want[len(want)-1].ID)
		require.NoError(t, err, state)
		if want[len(want)-1].Digest != "" {
			_, err = s.Resolve(ctx, id, last)
			require.NoError(t, err, "%s: the blob is there", state)
		}
		r, err := s.Verify(ctx, id)
		require.NoError(t, err, state)
		require.True(t, r.OK(), "%s: %v", state, r.Problems)
	}
	listed := func(state string, s *Store, id uuid.UUID) bool {
		t.Helper()
		list, err := s.List(ctx)
		require.NoError(t, err, state)
		recent, err := s.ListRecent(ctx, 10)
		require.NoError(t, err, state)
		inList := slices.ContainsFunc(list, func(m Meta) bool { return m.ID == id })
		inRecent := slices.ContainsFunc(recent, func(m Meta) bool { return m.ID == id })
		require.Equal(t, inList, inRecent, "%s: List and ListRecent agree", state)
		return inList
	}

	m, victim, _, _, _, cut := run(0)
	require.False(t, cut)
	synced := m.CrashClone(vfs.KeepSynced, 0)
	_, err := synced.Stat(sessionPath(victim))
	require.ErrorIs(t, err, fs.ErrNotExist, "once Delete returned, the session is durably gone")

	points, whole, gone := 0, 0, 0
	for k := 1; ; k++ {
		m, victim, other, vEvs, oEvs, cut := run(k)
		if !cut {
			break
		}
		points++
		var pe *fs.PathError
		require.ErrorAs(t, m.PowerCut(), &pe)
		for mi, mode := range vfs.CrashModes {
			n := 1
			switch {
			case mode == vfs.KeepRandomSectors && full:
				n = seeds
			case !full && mode != vfs.KeepSynced && mi != k%len(vfs.CrashModes):
				continue // the sample: KeepSynced, and one other mode in turn
			}
			for seed := range n {
				state := fmt.Sprintf("crash point %d (%s %s), %s seed %d", k, pe.Op, filepath.Base(pe.Path), mode, seed)
				c := m.CrashClone(mode, uint64(k*100+seed))
				s := openMem(t, c, Options{ChunkSize: 1 << 20})
				assert.Empty(t, trashNames(t, c), "%s: Open emptied the trash", state)
				checkWhole(state, s, other, oEvs)
				require.True(t, listed(state, s, other), state)
				meta, err := s.Meta(ctx, victim)
				if err == nil {
					whole++
					assert.Equal(t, "victim", meta.Name, state)
					require.True(t, listed(state, s, victim), "%s: a whole session is listed", state)
					checkWhole(state, s, victim, vEvs)
				} else {
					gone++
					require.ErrorIs(t, err, ErrNotFound, state)
					require.False(t, listed(state, s, victim), "%s: a gone session is not listed", state)
					_, err = s.Load(ctx, victim)
					require.ErrorIs(t, err, ErrNotFound, state)
					_, err = c.Stat(sessionPath(victim))
					require.ErrorIs(t, err, fs.ErrNotExist, state)
				}
				require.NoError(t, s.Close())
			}
		}
	}
	t.Logf("%d crash points; %d states whole, %d gone (%s=all: every mode, %d seeds)", points, whole, gone, deleteCrashSeedsEnv, dirCrashSeeds)
	require.GreaterOrEqual(t, points, 8, "the catalogue record, the move, its syncs and the removals are crash points")
	assert.NotZero(t, whole, "some crash points come before the move")
	assert.NotZero(t, gone, "some come after it")
}
