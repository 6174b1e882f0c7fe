package sessionstore

import (
	"context"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// rewriteCrashFull reports whether the crash tests of Upgrade and
// ConvertCompression run in full (SESSIONSTORE_CRASH_STATES=all, or a
// number above its default): every crash point under every crash mode.
// By default they check a sample of crash points (rewriteCrashPoints) in
// two states each (rewriteCrashStates).
func rewriteCrashFull(t *testing.T) bool {
	return testSize(t, crashStatesEnv, crashStatesDefault, math.MaxInt32) > crashStatesDefault
}

// rewriteCrashPoints returns the crash points to check of an operation
// with n mutating operations: all of them in full, else the first, the
// last two (the last rename, its directory sync) and two between.
func rewriteCrashPoints(t *testing.T, n int) []int {
	if rewriteCrashFull(t) || n <= 5 {
		out := make([]int, n)
		for i := range out {
			out[i] = i + 1
		}
		return out
	}
	return []int{1, n / 3, 2 * n / 3, n - 1, n}
}

// rewriteCrashStates returns the crash states checked at crash point k of
// m: in full, every mode once and KeepRandomSectors with dirCrashSeeds
// seeds, as dirCrashStates; by default two: what was synced, and a random
// share of the unsynced sectors and directory changes.
func rewriteCrashStates(t *testing.T, m *vfs.MemFS, k int) []dirCrashState {
	if rewriteCrashFull(t) {
		return dirCrashStates(m, k)
	}
	var out []dirCrashState
	for _, mode := range []vfs.CrashMode{vfs.KeepSynced, vfs.KeepRandomSectors} {
		out = append(out, dirCrashState{fmt.Sprintf("crash point %d, %s seed %d", k, mode, k), m.CrashClone(mode, uint64(k))})
	}
	return out
}

// mutatingOps returns how many mutating operations op makes on m.
func mutatingOps(t *testing.T, m *vfs.MemFS, op func() error) int {
	t.Helper()
	n := 0
	m.SetFault(func(o vfs.Op, path string) error {
		if vfs.Mutating(o) {
			n++
		}
		return nil
	})
	err := op()
	m.SetFault(nil)
	require.NoError(t, err)
	return n
}

// powerCutAt runs op on a store of m with the power cut at its k-th mutating
// operation (never if k is 0), and reports whether the power was cut. op's
// error must be that of the cut exactly when there is one.
func powerCutAt(t *testing.T, m *vfs.MemFS, k int, op func() error) bool {
	t.Helper()
	n := 0
	m.SetFault(func(o vfs.Op, path string) error {
		if vfs.Mutating(o) {
			n++
			if n == k {
				return vfs.ErrPowerLoss
			}
		}
		return nil
	})
	err := op()
	m.SetFault(nil)
	cut := m.PowerCut() != nil
	require.Equal(t, cut, err != nil, "crash point %d: the operation fails exactly when the power is cut (%v)", k, err)
	if cut {
		m.PowerOff()
	}
	return cut
}

// TestUpgradeCrashPoints cuts the power at every mutating operation of
// Upgrade (the session open, its close, every chunk's rewrite, index.jsonl,
// session.json) and checks each crash state: the session opens undamaged,
// every read (Load, Tree, every event, FullPath, Meta, Head) gives what it
// gave before the upgrade, Verify finds nothing wrong, the session is in
// format 1 or 2, and Upgrade called again completes it (format 2, every
// line naming its parent's location, reads unchanged). Run for the plain
// fixture and for the fixture with sealed chunks.
//
// By default a sample of crash points is checked (rewriteCrashPoints,
// rewriteCrashStates); SESSIONSTORE_CRASH_STATES=all checks every one
// under every crash mode.
func TestUpgradeCrashPoints(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other crash tests
	ctx := context.Background()
	tests := []struct {
		name string
		fsys func(t *testing.T) *vfs.MemFS
		opts Options
	}{
		{"plain chunks", func(t *testing.T) *vfs.MemFS { return memFixture(t, "format1") }, Options{Compression: CompressionNone}},
		{"sealed chunks", func(t *testing.T) *vfs.MemFS { return format1Sealed(t) }, Options{ChunkSize: 2048}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := tt.fsys(t) // closed: everything synced
			s := openMem(t, base.CrashClone(vfs.KeepSynced, 0), tt.opts)
			want := viewSession(t, s, goldenSession)
			require.NoError(t, s.Close())
			upgrade := func(m *vfs.MemFS) func() error {
				s := openMem(t, m, tt.opts)
				return func() error {
					err := s.Upgrade(ctx, goldenSession)
					s.Close() // after a power cut it fails and changes nothing
					return err
				}
			}
			m := base.CrashClone(vfs.KeepSynced, 0)
			total := mutatingOps(t, m, upgrade(m))
			require.GreaterOrEqual(t, total, 20, "every chunk's rewrite has crash points")
			points, formats := 0, map[int]int{}
			for _, k := range rewriteCrashPoints(t, total) {
				m := base.CrashClone(vfs.KeepSynced, 0)
				require.True(t, powerCutAt(t, m, k, upgrade(m)), "crash point %d of %d", k, total)
				points++
				var pe *fs.PathError
				require.ErrorAs(t, m.PowerCut(), &pe)
				for _, st := range rewriteCrashStates(t, m, k) {
					state := fmt.Sprintf("%s (cut at %s %s)", st.name, pe.Op, filepath.Base(pe.Path))
					format := sessionFormat(t, st.fs, goldenSession)
					formats[format]++
					s := openMem(t, st.fs, tt.opts)
					requireSameView(t, want, viewSession(t, s, goldenSession), "%s: the same session", state)
					r, err := s.Verify(ctx, goldenSession)
					require.NoError(t, err, state)
					require.True(t, r.OK(), "%s: %v", state, r.Problems)
					require.NoError(t, s.Upgrade(ctx, goldenSession), state)
					require.NoError(t, s.Close(), state)
					require.Equal(t, formatVersion, sessionFormat(t, st.fs, goldenSession), state)
					assertFormat2Lines(t, st.fs, goldenSession)
					s = openMem(t, st.fs, tt.opts)
					requireSameView(t, want, viewSession(t, s, goldenSession), "%s: the same session after the second Upgrade", state)
					require.NoError(t, s.Close(), state)
				}
			}
			t.Logf("%s: %d of %d crash points checked, states by format %v", tt.name, points, total, formats)
			assert.Positive(t, formats[1], "some crash states are still format 1")
			if rewriteCrashFull(t) {
				// The rename of session.json survives a cut at the
				// directory sync after it in some KeepRandomSectors states.
				assert.Positive(t, formats[formatVersion], "some crash states are in the new format already")
			}
		})
	}
}

// TestConvertCompressionCrashPoints cuts the power at operations of
// ConvertCompression, both ways, over a root holding a format 1 session
// and a format 2 one, and checks each crash state: the root opens in the
// mode sessionstore.json records, every session reads as before, Verify
// finds nothing wrong, and ConvertCompression called again completes the
// conversion. By default a sample of crash points is checked
// (rewriteCrashPoints, rewriteCrashStates); SESSIONSTORE_CRASH_STATES=all
// checks every one under every crash mode.
func TestConvertCompressionCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// prep builds the root, deterministically, in mode from.
	prep := func(t *testing.T, from string) (*vfs.MemFS, []uuid.UUID) {
		m := memFixture(t, "format1")
		o := deterministic(Options{Compression: CompressionNone, ChunkSize: 2048})
		s := openMem(t, m, o)
		meta, err := s.Create(ctx, Meta{Name: "format 2"})
		require.NoError(t, err)
		appendN(t, s, meta.ID, 20)
		appendN(t, s, goldenSession, 6)
		require.NoError(t, s.Close())
		if from == CompressionZstd {
			require.NoError(t, ConvertCompression(ctx, memRoot, &Options{fs: m, Compression: CompressionZstd, ChunkSize: 2048}))
		}
		return m, []uuid.UUID{goldenSession, meta.ID}
	}
	for _, tc := range []struct{ from, to string }{{CompressionNone, CompressionZstd}, {CompressionZstd, CompressionNone}} {
		t.Run(tc.from+" to "+tc.to, func(t *testing.T) {
			base, ids := prep(t, tc.from)
			s := openMem(t, base.CrashClone(vfs.KeepSynced, 0), Options{Compression: tc.from})
			want := map[uuid.UUID]sessionView{}
			for _, id := range ids {
				want[id] = viewSession(t, s, id)
			}
			require.NoError(t, s.Close())
			convert := func(m *vfs.MemFS) func() error {
				return func() error {
					return ConvertCompression(ctx, memRoot, &Options{fs: m, Compression: tc.to, ChunkSize: 2048})
				}
			}
			m := base.CrashClone(vfs.KeepSynced, 0)
			total := mutatingOps(t, m, convert(m))
			require.GreaterOrEqual(t, total, 10)
			points, modes := 0, map[string]int{}
			for _, k := range rewriteCrashPoints(t, total) {
				m := base.CrashClone(vfs.KeepSynced, 0)
				require.True(t, powerCutAt(t, m, k, convert(m)), "crash point %d of %d", k, total)
				points++
				for _, st := range rewriteCrashStates(t, m, k) {
					mode, err := readRootCompression(st.fs, memRoot)
					require.NoError(t, err, st.name)
					modes[mode]++
					s := openMem(t, st.fs, Options{Compression: mode, ChunkSize: 2048})
					for _, id := range ids {
						requireSameView(t, want[id], viewSession(t, s, id), "%s: session %s reads as before", st.name, id)
						r, err := s.Verify(ctx, id)
						require.NoError(t, err, st.name)
						require.True(t, r.OK(), "%s: %v", st.name, r.Problems)
					}
					require.NoError(t, s.Close(), st.name)
					require.NoError(t, ConvertCompression(ctx, memRoot, &Options{fs: st.fs, Compression: tc.to, ChunkSize: 2048}), st.name)
					got, err := readRootCompression(st.fs, memRoot)
					require.NoError(t, err)
					require.Equal(t, tc.to, got, st.name)
					for _, id := range ids {
						_, sealed := sealedForms(t, st.fs, id)
						if tc.to == CompressionNone {
							require.Zero(t, sealed, "%s: session %s", st.name, id)
						} else {
							require.Positive(t, sealed, "%s: session %s", st.name, id)
						}
					}
					s = openMem(t, st.fs, Options{Compression: tc.to, ChunkSize: 2048})
					for _, id := range ids {
						requireSameView(t, want[id], viewSession(t, s, id), "%s: session %s after the second conversion", st.name, id)
					}
					require.NoError(t, s.Close(), st.name)
				}
			}
			t.Logf("%s to %s: %d of %d crash points checked, states by root mode %v", tc.from, tc.to, points, total, modes)
			assert.Positive(t, modes[tc.from], "some crash states keep the old mode")
		})
	}
}
