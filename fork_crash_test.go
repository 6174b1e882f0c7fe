package sessionstore

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// forkCrashSeedsEnv sets how many KeepRandomSectors seeds
// TestForkCrashPoints checks at each crash point (every other crash mode
// gets one): 4 by default, "all" for dirCrashSeeds (16).
const forkCrashSeedsEnv = "SESSIONSTORE_FORK_CRASH_SEEDS"

// memFiles returns every file under dir in m with its bytes, "" keyed
// paths relative to dir; LOCK is left out (its content is nothing).
func memFiles(t *testing.T, m vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(d string)
	walk = func(d string) {
		names, err := m.ReadDir(d)
		require.NoError(t, err)
		for _, n := range names {
			p := filepath.Join(d, n)
			info, err := m.Stat(p)
			require.NoError(t, err)
			if info.IsDir() {
				out[p[len(dir):]+"/"] = "dir"
				walk(p)
				continue
			}
			if n == lockName {
				continue
			}
			b, err := vfs.ReadFile(m, p)
			require.NoError(t, err)
			out[p[len(dir):]] = string(b)
		}
	}
	walk(dir)
	return out
}

// TestForkCrashPoints cuts the power at every mutating operation of Fork,
// with the parent open in the Store (Fork checks the fork point through
// its handle) and with the parent closed (Fork reads the parent's files),
// and checks every crash state: the fork is absent, or whole (its
// metadata names the fork point and it loads the prefix, also after
// appending to it); the parent's files are byte for byte what they were;
// and the parent opens with every event.
func TestForkCrashPoints(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other crash tests
	ctx := context.Background()
	seeds := testSize(t, forkCrashSeedsEnv, 4, dirCrashSeeds)
	parent := uuid.MustParse("01a02f3f-0000-7000-8000-0000000f0a11")
	for _, parentOpen := range []bool{true, false} {
		t.Run(fmt.Sprintf("parent open %v", parentOpen), func(t *testing.T) {
			o := deterministic(Options{JournalSize: -1, ChunkSize: 1 << 10, BlobThreshold: 200})
			// run builds the parent (events over two chunks, one a blob),
			// then forks it at its third event with the power cut at
			// the fork's k-th mutating operation (never if k is 0). It
			// returns the frozen filesystem, the parent's events, the
			// parent's synced files before the fork, the fork's id if
			// Fork returned it, and whether the power was cut.
			run := func(k int) (*vfs.MemFS, []Event, map[string]string, uuid.UUID, bool) {
				m := vfs.NewMemFS()
				s := openMem(t, m, o)
				_, err := s.Create(ctx, Meta{ID: parent, Name: "parent"})
				require.NoError(t, err)
				evs := appendN(t, s, parent, 12)
				big, err := s.Append(ctx, parent, UserText(fmt.Sprintf("%0300d", 7)))
				require.NoError(t, err)
				require.NotEmpty(t, big.Digest, "precondition: a blob in the prefix")
				evs = append(evs, big)
				require.NoError(t, s.Flush(ctx, parent))
				if !parentOpen {
					require.NoError(t, s.CloseSession(ctx, parent))
				}
				before := memFiles(t, m.CrashClone(vfs.KeepSynced, 0), sessionPath(parent))
				live := memFiles(t, m, sessionPath(parent))
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
				meta, err := s.Fork(ctx, parent, evs[len(evs)-1].ID)
				m.SetFault(nil)
				cut := m.PowerCut() != nil
				if !cut { // after a cut, the crash states are compared with before
					require.Equal(t, live, memFiles(t, m, sessionPath(parent)), "Fork wrote to the parent")
				}
				require.Equal(t, cut, err != nil, "crash point %d: Fork fails exactly when the power is cut (%v)", k, err)
				s.Close() // after a power cut it fails and changes nothing
				m.PowerOff()
				return m, evs, before, meta.ID, cut
			}

			m, evs, _, forkID, cut := run(0)
			require.False(t, cut)
			require.NotEqual(t, uuid.Nil, forkID)
			// check checks a crash state; before, if not nil, is what the
			// parent's files must hold (after a power cut, nothing but
			// Fork ran since they were synced).
			check := func(t *testing.T, c *vfs.MemFS, state string, evs []Event, before map[string]string, fork uuid.UUID) {
				if before != nil {
					require.Equal(t, before, memFiles(t, c, sessionPath(parent)), "%s: the parent's files changed", state)
				}
				s := openMem(t, c, Options{JournalSize: -1, ChunkSize: 1 << 10, BlobThreshold: 200})
				defer func() { assert.NoError(t, s.Close(), state) }()
				got, err := s.Load(ctx, parent)
				require.NoError(t, err, state)
				require.Len(t, got, len(evs), state)
				metas, err := s.List(ctx)
				require.NoError(t, err, state)
				var forks []Meta
				for _, mt := range metas {
					if mt.ID != parent {
						forks = append(forks, mt)
					}
				}
				require.LessOrEqual(t, len(forks), 1, "%s: at most the one fork", state)
				if len(forks) == 0 {
					return // absent
				}
				id := forks[0].ID
				if fork != uuid.Nil {
					require.Equal(t, fork, id, state)
				}
				meta, err := s.Meta(ctx, id)
				require.NoError(t, err, state)
				require.NotNil(t, meta.ForkedFrom, "%s: a listed fork is whole", state)
				require.Equal(t, ForkPoint{Session: parent, Event: evs[len(evs)-1].ID}, *meta.ForkedFrom, state)
				got, err = s.Load(ctx, id)
				require.NoError(t, err, state)
				require.Equal(t, forkIDs(evs), forkIDs(got), "%s: the fork loads the prefix", state)
				require.Equal(t, evs[len(evs)-1].Record, got[len(got)-1].Record, "%s: the prefix's blob", state)
				own, err := s.Append(ctx, id, UserText("after the crash"))
				require.NoError(t, err, state)
				require.Equal(t, evs[len(evs)-1].ID, own.ParentID, state)
				r, err := s.Verify(ctx, id)
				require.NoError(t, err, state)
				require.True(t, r.OK(), "%s: %v", state, r.Problems)
			}
			check(t, m.CrashClone(vfs.KeepSynced, 0), "no crash", evs, nil, forkID) // Close sealed the parent's chunk

			points, states := 0, 0
			for k := 1; ; k++ {
				m, evs, before, fork, cut := run(k)
				if !cut {
					break
				}
				points++
				var pe *fs.PathError
				require.ErrorAs(t, m.PowerCut(), &pe)
				for _, mode := range vfs.CrashModes {
					n := 1
					if mode == vfs.KeepRandomSectors {
						n = seeds
					}
					for seed := range n {
						state := fmt.Sprintf("crash point %d (%s %s), %s seed %d", k, pe.Op, filepath.Base(pe.Path), mode, seed)
						check(t, m.CrashClone(mode, uint64(k*100+seed)), state, evs, before, fork)
						states++
					}
				}
			}
			t.Logf("%d crash points, %d states", points, states)
			require.GreaterOrEqual(t, points, 5, "Fork's directory, session.json replace and catalogue writes are crash points")
		})
	}
}
