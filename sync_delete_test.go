package sessionstore

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The directory syncs of Delete, each checked by what its loss would let
// a crash bring back:
//
//   - the root's, after creating the trash: a crash during the Delete
//     leaves every file of the session reachable (TestSyncDeleteCrashLeavesFilesReachable);
//   - the sessions directory's and the trash's, after the move: both
//     directories of the move are synced (TestSyncDeleteMoveSyncsBothDirectories);
//   - each directory's in removeTree, and the trash's after the
//     removals: once Delete returns, nothing of the session is on the
//     disk, in a directory or out of every one (TestSyncDeleteLeavesNothing);
//   - the trash's after a purge: what the purge removed stays removed
//     (TestSyncDeleteCrashLeavesFilesReachable).

// deleteWorkload opens a store on fsys with two closed sessions, the
// victim holding a blob (so its directory has chunks/, blobs/ and a
// blob's subdirectories) and the other a few events, and opens it again.
func deleteWorkload(t *testing.T, fsys vfs.FS) (s *Store, victim, other uuid.UUID) {
	t.Helper()
	ctx := context.Background()
	// The trash keeps nothing: these tests check the removal of the
	// files (trash_test.go checks a kept session's).
	o := deterministic(Options{TrashFor: NoTrash})
	s = openMem(t, fsys, o)
	v, err := s.Create(ctx, Meta{Name: "victim"})
	require.NoError(t, err)
	w, err := s.Create(ctx, Meta{Name: "other"})
	require.NoError(t, err)
	appendN(t, s, v.ID, 3)
	_, err = s.Append(ctx, v.ID, bigResult("c", 1))
	require.NoError(t, err)
	appendN(t, s, w.ID, 2)
	require.NotEmpty(t, blobFiles(t, fsys, v.ID), "precondition: the victim has a blob")
	require.NoError(t, s.Close())
	return openMem(t, fsys, o), v.ID, w.ID
}

// treePaths lists every file and directory under the root of fsys.
func treePaths(t *testing.T, fsys vfs.FS) []string {
	t.Helper()
	var out []string
	dirs := []string{"/"}
	for len(dirs) > 0 {
		d := dirs[len(dirs)-1]
		dirs = dirs[:len(dirs)-1]
		names, err := fsys.ReadDir(d)
		require.NoError(t, err)
		for _, n := range names {
			p := filepath.Join(d, n)
			out = append(out, p)
			info, err := fsys.Stat(p)
			require.NoError(t, err)
			if info.IsDir() {
				dirs = append(dirs, p)
			}
		}
	}
	return out
}

// TestSyncDeleteLeavesNothing: once Delete returns nil, a crash brings
// back nothing of the session, in every crash mode: no file or directory
// of it in the sessions directory or the trash, and none left on the disk
// out of every directory (MemFS.Orphans: what a file system check would
// gather into lost+found). The other session is untouched.
func TestSyncDeleteLeavesNothing(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s, victim, other := deleteWorkload(t, m)
	defer s.Close()
	require.NoError(t, s.Delete(ctx, victim))

	assert.Empty(t, m.Orphans(), "no file of the deleted session is left out of every directory")
	for _, mode := range vfs.CrashModes {
		seeds := 1
		if mode == vfs.KeepRandomSectors {
			seeds = 4
		}
		for seed := range seeds {
			state := fmt.Sprintf("%s seed %d", mode, seed)
			c := m.CrashClone(mode, uint64(seed))
			for _, p := range treePaths(t, c) {
				assert.NotContains(t, p, victim.String(), "%s: a crash brought back a file of the deleted session", state)
			}
			_, err := c.Stat(sessionPath(other, metaFile))
			assert.NoError(t, err, "%s: the other session stays", state)
		}
	}
}

// renameSidesFS checks the syncs of renames across directories as a file
// system that writes the two directories apart would need them (ext2;
// ext4 without its journal). MemFS takes such a rename for one change,
// made durable by a sync of either directory, as a journaling file system
// commits it in one transaction; POSIX does not say so. Written apart, a
// rename durable in its old directory only has lost its entry in both (a
// moved session's files are then on the disk out of every directory),
// and one durable in its new directory only has an entry in both (a
// deleted session back in the sessions directory). No order of syncs
// closes that window, but the two syncs can follow each other with
// nothing in between: then a crash anywhere else finds the rename durable
// in both directories or in neither.
//
// It records each rename across directories (Rename), and as the fault
// hook of the MemFS below it (observe, which fails nothing) the syncs that
// make its sides durable, and every other mutating operation made while
// a rename is durable on one side only.
type renameSidesFS struct {
	vfs.FS
	mu      sync.Mutex
	pending []*crossRename // not durable on both sides
	between []string       // operations made while one was durable on one side
}

type crossRename struct {
	from, to             string // the directories
	fromSynced, toSynced bool
}

func (f *renameSidesFS) Rename(oldname, newname string) error {
	if err := f.FS.Rename(oldname, newname); err != nil {
		return err
	}
	from, to := filepath.Dir(filepath.Clean(oldname)), filepath.Dir(filepath.Clean(newname))
	if from != to {
		f.mu.Lock()
		f.pending = append(f.pending, &crossRename{from: from, to: to})
		f.mu.Unlock()
	}
	return nil
}

// observe is a fault hook for the MemFS below f.
func (f *renameSidesFS) observe(op vfs.Op, path string) error {
	if !vfs.Mutating(op) {
		return nil
	}
	path = filepath.Clean(path)
	f.mu.Lock()
	defer f.mu.Unlock()
	kept := f.pending[:0]
	for _, r := range f.pending {
		sync := op == vfs.OpSyncDir && (path == r.from || path == r.to)
		if r.fromSynced != r.toSynced && !sync {
			f.between = append(f.between, fmt.Sprintf("%s %s while %s -> %s is durable in %s only", op, path, r.from, r.to, map[bool]string{true: r.from, false: r.to}[r.fromSynced]))
		}
		if sync {
			r.fromSynced = r.fromSynced || path == r.from
			r.toSynced = r.toSynced || path == r.to
		}
		if !r.fromSynced || !r.toSynced {
			kept = append(kept, r)
		}
	}
	f.pending = kept
	return nil
}

// unsynced describes the renames across directories not durable in both.
func (f *renameSidesFS) unsynced() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, r := range f.pending {
		var sides []string
		if !r.fromSynced {
			sides = append(sides, r.from)
		}
		if !r.toSynced {
			sides = append(sides, r.to)
		}
		out = append(out, fmt.Sprintf("%s -> %s: %s not synced", r.from, r.to, strings.Join(sides, " and ")))
	}
	return out
}

// TestSyncDeleteMoveSyncsBothDirectories: Delete's move of the session
// into the trash is synced in both directories, one sync right after the
// other (see renameSidesFS): on a file system that writes the two
// directories apart, a crash at any other point finds the session whole
// in the sessions directory or in the trash, and once Delete returns nil
// gone from the sessions directory for good.
func TestSyncDeleteMoveSyncsBothDirectories(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	fsys := &renameSidesFS{FS: m}
	s, victim, _ := deleteWorkload(t, fsys)
	defer s.Close()
	m.SetFault(fsys.observe)
	require.NoError(t, s.Delete(ctx, victim))
	m.SetFault(nil)
	assert.Empty(t, fsys.between, "operations while the move was durable in one directory only")
	assert.Empty(t, fsys.unsynced(), "the move is not durable in both directories")
}

// TestSyncDeleteCrashLeavesFilesReachable cuts the power at every
// mutating operation of a Delete (the first of the store, which creates
// the trash) and checks that no file of the session is left out of every
// directory (MemFS.Orphans): it is whole where it was, or in the trash.
// Then the Open after the crash empties the trash, and a second crash
// right after it brings nothing back into the trash, nor leaves anything
// out of every directory.
func TestSyncDeleteCrashLeavesFilesReachable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	points, inTrash := 0, 0
	for k := 1; ; k++ {
		m := vfs.NewMemFS()
		s, victim, _ := deleteWorkload(t, m)
		n := 0
		m.SetFault(func(op vfs.Op, path string) error {
			if vfs.Mutating(op) {
				if n++; n == k {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		err := s.Delete(ctx, victim)
		m.SetFault(nil)
		s.Close()
		if m.PowerCut() == nil {
			require.NoError(t, err)
			break
		}
		points++
		state := fmt.Sprintf("crash point %d (%v)", k, m.PowerCut())
		assert.Empty(t, m.Orphans(), "%s: files of the session out of every directory", state)

		c := m.CrashClone(vfs.KeepSynced, uint64(k))
		if len(trashNames(t, c)) > 0 {
			inTrash++
		}
		s = openMem(t, c, Options{})
		require.NoError(t, s.Close())
		assert.Empty(t, c.Orphans(), "%s: the purge left files out of every directory", state)
		after := c.CrashClone(vfs.KeepSynced, 0)
		assert.Empty(t, trashNames(t, after), "%s: a crash after the purge brought files back into the trash", state)
	}
	t.Logf("%d crash points, %d with the session in the trash", points, inTrash)
	require.GreaterOrEqual(t, points, 8, "the catalogue record, the move, its syncs and the removals are crash points")
	assert.NotZero(t, inTrash, "some crash points leave the session in the trash, for the purge")
}

// BenchmarkDeleteBlobs deletes closed sessions of five events and
// deleteBenchBlobs blobs each (in as many blob directories, nearly) from
// a store on the OS file system, one per iteration: with the directory
// syncs of removeTree, one for each directory of the session.
func BenchmarkDeleteBlobs(b *testing.B) {
	ctx := context.Background()
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	n := 0
	for b.Loop() {
		b.StopTimer()
		m, err := s.Create(ctx, Meta{})
		if err != nil {
			b.Fatal(err)
		}
		for i := range 5 + deleteBenchBlobs {
			ev := UserText("a message of the session")
			if i >= 5 {
				n++
				ev = ToolResultEvent(ToolResult{CallID: fmt.Sprint(n), Output: strings.Repeat(fmt.Sprintf("output %d\n", n), 4000)})
			}
			if _, err := s.Append(ctx, m.ID, ev); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.CloseSession(ctx, m.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if err := s.Delete(ctx, m.ID); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/delete")
}

// deleteBenchBlobs is the number of blobs of BenchmarkDeleteBlobs's sessions.
const deleteBenchBlobs = 32

// TestSyncBadHEADKeptAsideDurably: a repair that keeps a bad HEAD aside
// is synced when Repair returns, as every repair is, also when it writes
// no new HEAD (a session without events): a power cut after it finds
// nothing left to repair.
func TestSyncBadHEADKeptAsideDurably(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	require.NoError(t, s.Close())
	writeMemFile(t, m, sessionPath(id, headfile.Name), []byte("not an id\n"))
	require.NoError(t, m.SyncDir(sessionPath(id)))

	s = openMem(t, m, Options{})
	done, err := s.Repair(ctx, id)
	require.NoError(t, err)
	require.NotEmpty(t, done, "precondition: the bad HEAD is a repair")
	require.NoError(t, s.Close())

	c := openMem(t, m.CrashClone(vfs.KeepSynced, 0), Options{})
	defer c.Close()
	r, err := c.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Empty(t, r.Repairs, "the repair survives a power cut")
}
