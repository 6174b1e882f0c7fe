package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The workspaces of the crash tests: B changes x and sub/z, keeps y,
// removes gone and adds new/n.
var (
	crashWSA = map[string]string{"x": "x-one", "y": "y-same", "gone": "g-one", "sub/z": "z-one"}
	crashWSB = map[string]string{"x": "x-two, longer", "y": "y-same", "sub/z": "z-two", "new/n": "n-two"}
)

const crashStore, crashWork = "/store", "/work"

func crashWrites(m map[string]string) []FileWrite {
	var out []FileWrite
	for p, c := range m {
		out = append(out, FileWrite{Path: p, Data: []byte(c)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// memTree reads the regular files below dir in m (path -> content).
func memWorkTree(t testing.TB, m vfs.FS, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	stack := []string{""}
	for len(stack) > 0 {
		rel := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		names, err := m.ReadDir(path.Join(dir, rel))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		for _, n := range names {
			p := path.Join(rel, n)
			info, err := m.Stat(path.Join(dir, p))
			require.NoError(t, err)
			if info.IsDir() {
				stack = append(stack, p)
				continue
			}
			b, err := vfs.ReadFile(m, path.Join(dir, p))
			require.NoError(t, err)
			out[p] = string(b)
		}
	}
	return out
}

// crashWSBase builds a store on a MemFS with one session holding
// snapshots A and B, restores A into /work, closes the store and returns
// the file system, every change synced, with the session and the events.
func crashWSBase(t *testing.T) (*vfs.MemFS, uuid.UUID, uuid.UUID, uuid.UUID) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := deterministic(Options{fs: m})
	s, err := Open(crashStore, &o)
	require.NoError(t, err)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	a, err := s.RecordFiles(ctx, meta.ID, "A", crashWrites(crashWSA)...)
	require.NoError(t, err)
	var bw []FileWrite
	for _, f := range crashWrites(crashWSB) {
		if crashWSA[f.Path] != string(f.Data) {
			bw = append(bw, f)
		}
	}
	bw = append(bw, FileWrite{Path: "gone", Deleted: true})
	b, err := s.RecordFiles(ctx, meta.ID, "B", bw...)
	require.NoError(t, err)
	_, err = s.Restore(ctx, meta.ID, a.ID, crashWork, RestoreOptions{})
	require.NoError(t, err)
	require.Equal(t, crashWSA, memWorkTree(t, m, crashWork))
	require.NoError(t, s.Close())
	return m, meta.ID, a.ID, b.ID
}

// TestWorkspaceRestoreCrash cuts the power at every mutating operation of
// a Restore from A to B and checks, in every crash mode, that each file
// of the target is A's or B's, whole (a file only one of them has may be
// absent), that a Restore run again after the crash gives B exactly, and
// that a Restore that returned leaves B exactly after a crash that keeps
// only what was synced.
func TestWorkspaceRestoreCrash(t *testing.T) {
	ctx := context.Background()
	base, id, _, b := crashWSBase(t)
	points := 0
	for k := 1; ; k++ {
		m, done, rerr := crashWSPoint(t, base, k, func(s *Store) error {
			_, err := s.Restore(ctx, id, b, crashWork, RestoreOptions{})
			return err
		})
		if done {
			require.NoError(t, rerr, "no crash: Restore succeeds")
		}
		for mi, mode := range vfs.CrashModes {
			c := m.CrashClone(mode, uint64(k*10+mi))
			got := memWorkTree(t, c, crashWork)
			if done && mode == vfs.KeepSynced {
				assert.Equal(t, crashWSB, got, "point %d: a Restore that returned is durable", k)
			}
			for p, content := range got {
				if isTemp(p) {
					continue
				}
				a, inA := crashWSA[p]
				bb, inB := crashWSB[p]
				assert.True(t, (inA && content == a) || (inB && content == bb), "point %d %v: %s holds %q, neither A's nor B's", k, mode, p, content)
			}
			for p := range crashWSA {
				if _, inB := crashWSB[p]; inB && crashWSA[p] == crashWSB[p] {
					assert.Contains(t, got, p, "point %d %v: %s, the same in A and B, is gone", k, mode, p)
				}
			}
			// A second Restore finishes the job.
			o := deterministic(Options{fs: c})
			s2, err := Open(crashStore, &o)
			require.NoError(t, err, "point %d %v", k, mode)
			_, err = s2.Restore(ctx, id, b, crashWork, RestoreOptions{})
			require.NoError(t, err, "point %d %v", k, mode)
			assert.Equal(t, crashWSB, memWorkTree(t, c, crashWork), "point %d %v: the second Restore", k, mode)
			require.NoError(t, s2.Close())
		}
		points++
		if done {
			break
		}
	}
	assert.Greater(t, points, 8, "Restore makes a dozen changes or more")
}

// TestWorkspaceSnapshotCrash cuts the power at every mutating operation
// of a RecordFiles and checks, in every crash mode, that the store opens,
// that the workspace at the end of the path is the one before or, if the
// call returned, the new one, readable whole, and that GC then removes
// only contents no manifest names.
func TestWorkspaceSnapshotCrash(t *testing.T) {
	ctx := context.Background()
	base, id, _, b := crashWSBase(t)
	next := []FileWrite{{Path: "x", Data: []byte("x-three")}, {Path: "big", Data: []byte(fmt.Sprintf("%02000d", 7))}}
	want := map[string]string{"x": "x-three", "big": fmt.Sprintf("%02000d", 7)}
	for p, c := range crashWSB {
		if _, ok := want[p]; !ok {
			want[p] = c
		}
	}
	for k := 1; ; k++ {
		m, done, rerr := crashWSPoint(t, base, k, func(s *Store) error {
			_, err := s.RecordFiles(ctx, id, "C", next...)
			return err
		})
		if done {
			require.NoError(t, rerr)
		}
		for mi, mode := range vfs.CrashModes {
			c := m.CrashClone(mode, uint64(k*10+mi))
			o := deterministic(Options{fs: c})
			s2, err := Open(crashStore, &o)
			require.NoError(t, err, "point %d %v", k, mode)
			_, err = s2.GC(ctx, id)
			require.NoError(t, err, "point %d %v", k, mode)
			ws, err := s2.Files(ctx, id, uuid.Nil)
			require.NoError(t, err, "point %d %v", k, mode)
			got := wsContents(t, s2, id, ws)
			if done || ws.Snapshot != b {
				assert.Equal(t, want, got, "point %d %v: the new workspace, whole", k, mode)
			} else {
				assert.Equal(t, crashWSB, got, "point %d %v: the workspace before", k, mode)
			}
			require.NoError(t, s2.Close())
		}
		if done {
			break
		}
	}
}

// crashWSPoint runs op on a store opened on a copy of base whose power
// is cut at its k-th mutating operation, and returns the frozen file
// system, whether op ended before the cut (done), and op's error.
func crashWSPoint(t *testing.T, base *vfs.MemFS, k int, op func(s *Store) error) (*vfs.MemFS, bool, error) {
	t.Helper()
	m := base.CrashClone(vfs.KeepAll, 0)
	o := deterministic(Options{fs: m})
	s, err := Open(crashStore, &o)
	require.NoError(t, err)
	n := 0
	m.SetFault(func(op vfs.Op, path string) error {
		if !vfs.Mutating(op) {
			return nil
		}
		if n++; n == k {
			return vfs.ErrPowerLoss
		}
		return nil
	})
	err = op(s)
	done := n < k
	m.PowerOff()
	_ = s.Close()
	return m, done, err
}
