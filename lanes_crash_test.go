package sessionstore

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// laneCrashSeedsEnv sizes TestLaneCrashPoints: set, every crash mode is
// checked at every crash point, KeepRandomSectors with that many seeds
// ("all": laneCrashSeedsAll); unset, a sample of modes (laneSampleModes).
const (
	laneCrashSeedsEnv = "SESSIONSTORE_LANE_CRASH_SEEDS"
	laneCrashSeedsAll = 32
)

// laneSampleModes are the crash modes checked by default: what was synced
// only, and unsynced sectors and directory changes kept or lost at random.
var laneSampleModes = []vfs.CrashMode{vfs.KeepSynced, vfs.KeepRandomSectors}

// laneState is what a reopened session says of its lanes and where its
// next event goes.
type laneState struct {
	active string
	tips   map[string]uuid.UUID
	parent uuid.UUID
}

func (ls laneState) String() string {
	return fmt.Sprintf("active %q, tips %v, next parent %s", ls.active, ls.tips, ls.parent)
}

func readLaneState(t *testing.T, s *Store, id uuid.UUID) laneState {
	t.Helper()
	tips, active := laneTips(t, s, id)
	parent, _, err := s.NextParent(context.Background(), id)
	require.NoError(t, err)
	return laneState{active: active, tips: tips, parent: parent}
}

// TestLaneCrashPoints cuts the power at every mutating operation of each
// lane change (and of the first append after a switch) and checks every
// crash state: the lanes file is its old content or its new one, whole;
// the session opens with every acknowledged event, Verify clean; its
// lanes and next parent are exactly the old ones or exactly the new ones;
// and every lane names an event the session holds.
//
// Every crash point is checked. By default each gets two states
// (laneSampleModes, one seed); SESSIONSTORE_LANE_CRASH_SEEDS=N checks
// every crash mode, KeepRandomSectors with N seeds ("all" is 32).
func TestLaneCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	modes, seeds := laneSampleModes, 1
	if os.Getenv(laneCrashSeedsEnv) != "" {
		modes, seeds = vfs.CrashModes, testSize(t, laneCrashSeedsEnv, 1, laneCrashSeedsAll)
	}
	type step func(s *Store, id uuid.UUID, evs []Event) error
	tests := []struct {
		name string
		prep step // before the power may be cut
		op   step
	}{
		{"first CreateLane", nil, func(s *Store, id uuid.UUID, evs []Event) error {
			return s.CreateLane(ctx, id, "new", evs[1].ID)
		}},
		{"CreateLane", withLane, func(s *Store, id uuid.UUID, evs []Event) error {
			return s.CreateLane(ctx, id, "new", evs[1].ID)
		}},
		{"MoveLane inactive", withLane, func(s *Store, id uuid.UUID, evs []Event) error {
			return s.MoveLane(ctx, id, "alt", evs[2].ID)
		}},
		{"MoveLane active", withLane, func(s *Store, id uuid.UUID, evs []Event) error {
			return s.MoveLane(ctx, id, DefaultLane, evs[1].ID)
		}},
		{"SwitchLane", withLane, func(s *Store, id uuid.UUID, evs []Event) error {
			return s.SwitchLane(ctx, id, "alt")
		}},
		{"SwitchLane back", func(s *Store, id uuid.UUID, evs []Event) error {
			if err := withLane(s, id, evs); err != nil {
				return err
			}
			if err := s.SwitchLane(ctx, id, "alt"); err != nil {
				return err
			}
			_, err := s.Append(ctx, id, UserText("on alt"))
			return err
		}, func(s *Store, id uuid.UUID, evs []Event) error {
			return s.SwitchLane(ctx, id, DefaultLane)
		}},
		{"DeleteLane", withLane, func(s *Store, id uuid.UUID, evs []Event) error {
			return s.DeleteLane(ctx, id, "alt")
		}},
		{"Append after SwitchLane", func(s *Store, id uuid.UUID, evs []Event) error {
			if err := withLane(s, id, evs); err != nil {
				return err
			}
			return s.SwitchLane(ctx, id, "alt")
		}, func(s *Store, id uuid.UUID, evs []Event) error {
			_, err := s.Append(ctx, id, UserText("on alt"))
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			// run makes a session of three events, runs prep, closes and
			// reopens the store, then runs op with the power cut at its
			// k-th mutating operation (never if k is 0). It returns the
			// frozen filesystem, the session, the lanes file before op,
			// the events acknowledged before op, and whether the power
			// was cut.
			run := func(k int) (*vfs.MemFS, uuid.UUID, string, []Event, bool, error) {
				m := vfs.NewMemFS()
				o := deterministic(Options{ChunkSize: 1 << 20})
				s := openMem(t, m, o)
				meta, err := s.Create(ctx, Meta{Name: "lanes"})
				require.NoError(t, err)
				evs := appendN(t, s, meta.ID, 3)
				if tt.prep != nil {
					require.NoError(t, tt.prep(s, meta.ID, evs))
				}
				require.NoError(t, s.Close())
				before := readRaw(t, m, sessionPath(meta.ID, lanesFile))
				s = openMem(t, m, o)
				head, err := s.Head(ctx, meta.ID)
				require.NoError(t, err)
				acked, err := s.LoadPath(ctx, meta.ID, head) // every event, HEAD last (Load ends at a switched lane's tip)
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
				opErr := tt.op(s, meta.ID, evs)
				if tt.name == "Append after SwitchLane" {
					// The derived files an append writes after its sync
					// (index line; HEAD and session.json at Close) are
					// crash points too.
					s.Close()
				}
				m.SetFault(nil)
				cut := m.PowerCut() != nil
				if tt.name != "Append after SwitchLane" {
					require.Equal(t, cut, opErr != nil, "crash point %d: the operation fails exactly when the power is cut (%v)", k, opErr)
				}
				if !cut {
					require.NoError(t, s.Close())
				}
				m.PowerOff()
				return m, meta.ID, before, acked, cut, opErr
			}

			// The states before and after the operation, as a reopened
			// store sees them.
			m, id, before, _, _, _ := run(0)
			synced := m.CrashClone(vfs.KeepSynced, 0)
			after := readRaw(t, synced, sessionPath(id, lanesFile))
			s := openMem(t, synced, Options{})
			stAfter := readLaneState(t, s, id)
			require.NoError(t, s.Close())
			m, id, _, _, cut, _ := run(1)
			require.True(t, cut, "the operation writes")
			pre := m.CrashClone(vfs.KeepSynced, 0)
			s = openMem(t, pre, Options{})
			stBefore := readLaneState(t, s, id)
			require.NoError(t, s.Close())
			if tt.name != "Append after SwitchLane" {
				require.NotEqual(t, before, after, "the lanes file changes")
			}
			require.NotEqual(t, stBefore.String(), stAfter.String(), "the operation changes the lanes or the next parent")

			points, states := 0, 0
			for k := 1; ; k++ {
				m, id, _, acked, cut, opErr := run(k)
				if !cut {
					break
				}
				points++
				var pe *fs.PathError
				require.ErrorAs(t, m.PowerCut(), &pe)
				for _, st := range laneCrashStates(m, k, modes, seeds) {
					states++
					name, c := st.name, st.fs
					where := fmt.Sprintf("%s (cut at %s %s)", name, pe.Op, filepath.Base(pe.Path))
					if tt.name != "Append after SwitchLane" {
						got := readRaw(t, c, sessionPath(id, lanesFile))
						require.Contains(t, []string{before, after}, got, "%s: lanes.json is neither old nor new, whole", where)
					}
					s := openMem(t, c, Options{})
					for _, e := range acked {
						_, err := s.Event(ctx, id, e.ID)
						require.NoError(t, err, "%s: every acknowledged event", where)
					}
					head, err := s.Head(ctx, id)
					require.NoError(t, err, where)
					appended := head != acked[len(acked)-1].ID
					state := readLaneState(t, s, id)
					for name, tip := range state.tips {
						_, err := s.Event(ctx, id, tip)
						require.NoError(t, err, "%s: lane %q names a durable event", where, name)
					}
					if opErr == nil || appended {
						// Acknowledged, or an append that reached the disk
						// though unacknowledged (it continues alt): the new
						// state.
						require.Equal(t, stAfter.String(), state.String(), "%s: acknowledged (%v) or appended (%v)", where, opErr == nil, appended)
					} else {
						require.Contains(t, []string{stBefore.String(), stAfter.String()}, state.String(), "%s: lanes old or new", where)
					}
					r, err := s.Verify(ctx, id)
					require.NoError(t, err, where)
					require.True(t, r.OK(), "%s: %v", where, r.Problems)
					require.NoError(t, s.Close())
				}
			}
			t.Logf("%s: %d crash points, %d states", tt.name, points, states)
			if tt.name != "Append after SwitchLane" {
				require.GreaterOrEqual(t, points, 5, "every operation of the replace is a crash point")
			}
		})
	}
}

// withLane adds lane "alt" at the first event.
func withLane(s *Store, id uuid.UUID, evs []Event) error {
	return s.CreateLane(context.Background(), id, "alt", evs[0].ID)
}

// laneCrashStates is dirCrashStates for modes, with seeds
// KeepRandomSectors states.
func laneCrashStates(m *vfs.MemFS, k int, modes []vfs.CrashMode, seeds int) []dirCrashState {
	var out []dirCrashState
	for _, mode := range modes {
		n := 1
		if mode == vfs.KeepRandomSectors {
			n = seeds
		}
		for seed := range n {
			name := fmt.Sprintf("crash point %d, %s seed %d", k, mode, seed)
			out = append(out, dirCrashState{name, m.CrashClone(mode, uint64(k*100+seed))})
		}
	}
	return out
}
