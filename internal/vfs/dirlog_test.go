package vfs

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tree lists every directory (with a trailing slash, as "") and file (with
// its content) under the root of m.
func tree(t *testing.T, m *MemFS) map[string]string {
	t.Helper()
	out := map[string]string{}
	var walk func(dir string)
	walk = func(dir string) {
		names, err := m.ReadDir(dir)
		require.NoError(t, err)
		for _, name := range names {
			p := path.Join(dir, name)
			fi, err := m.Stat(p)
			require.NoError(t, err)
			if fi.IsDir() {
				out[p+"/"] = ""
				walk(p)
				continue
			}
			out[p] = readFile(t, m, p)
		}
	}
	walk("/")
	return out
}

// keys returns the sorted names of a tree, joined, as an outcome to count.
func keys(tr map[string]string) string {
	ks := make([]string, 0, len(tr))
	for k := range tr {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, " ")
}

// createSynced creates name (its directory entry not synced) holding data,
// synced.
func createSynced(t *testing.T, m *MemFS, name, data string) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// otherModes are the crash modes that keep no unsynced directory change.
var otherModes = []CrashMode{KeepSynced, KeepAll, KeepRandom, KeepZeroedTail, KeepGarbageTail}

// TestCrashDirKeptCreateUnsyncedData: the create of a file whose data was
// never synced, itself unsynced. KeepRandomSectors keeps the entry or not;
// a kept file holds what the mode keeps of its data: nothing (its synced
// size), or its size with each sector new or zeros. Every outcome occurs,
// and no other mode keeps the entry.
func TestCrashDirKeptCreateUnsyncedData(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	const sectors = 3
	var data []byte
	for i := range sectors {
		data = append(data, strings.Repeat(string(rune('a'+i)), sectorSize)...)
	}
	writeFile(t, m, "/d/f", string(data)) // neither data nor entry synced

	outcomes := map[string]int{}
	for seed := range uint64(256) {
		c := m.CrashClone(KeepRandomSectors, seed)
		got, ok := content(t, c, "/d/f")
		switch {
		case !ok:
			outcomes["absent"]++
		case got == "":
			outcomes["empty"]++
		case got == string(data):
			outcomes["whole"]++
		default:
			require.Len(t, got, len(data), "seed %d: a kept file has its synced size (0) or its size", seed)
			for i := range sectors {
				sec := got[i*sectorSize : (i+1)*sectorSize]
				require.Contains(t, []string{string(data[i*sectorSize : (i+1)*sectorSize]), strings.Repeat("\x00", sectorSize)}, sec,
					"seed %d sector %d: the new content or zeros", seed, i)
			}
			outcomes["torn"]++
		}
	}
	t.Logf("outcomes over 256 seeds: %v", outcomes)
	for _, o := range []string{"absent", "empty", "whole", "torn"} {
		assert.Contains(t, outcomes, o)
	}
	for _, mode := range otherModes {
		for seed := range uint64(8) {
			assert.False(t, exists(t, m.CrashClone(mode, seed), "/d/f"), "%s seed %d: an unsynced create is lost", mode, seed)
		}
	}
}

// TestCrashDirRenameUnsyncedData: the data follows the file, not the name.
// A durable file with an unsynced append, renamed without SyncDir, is
// under exactly one of its names after a crash, with its data torn as
// KeepRandomSectors tears it whichever name it is under.
func TestCrashDirRenameUnsyncedData(t *testing.T) {
	m := NewMemFS()
	durableFile(t, m, "/a", "old-a")
	appendFile(t, m, "/a", "+new", false)
	require.NoError(t, m.Rename("/a", "/b"))

	versions := []string{"old-a", "old-a+new", "old-a\x00\x00\x00\x00"}
	seen := map[string]map[string]bool{"/a": {}, "/b": {}}
	for seed := range uint64(256) {
		c := m.CrashClone(KeepRandomSectors, seed)
		tr := tree(t, c)
		require.Len(t, tr, 1, "seed %d: the file under one name: %v", seed, tr)
		for name, got := range tr {
			require.Contains(t, seen, name, "seed %d", seed)
			require.Contains(t, versions, got, "seed %d", seed)
			seen[name][got] = true
		}
	}
	for name, got := range seen {
		for _, v := range versions {
			assert.True(t, got[v], "%s never held %q", name, v)
		}
	}
	for _, mode := range otherModes {
		assert.False(t, exists(t, m.CrashClone(mode, 1), "/b"), "%s: the rename is lost", mode)
	}
}

// TestCrashDirRemoveAndRecreate: a name removed and created again without
// SyncDir holds, after a crash, the old file (both lost), nothing (the
// remove kept, the create lost) or the new file; every outcome occurs.
func TestCrashDirRemoveAndRecreate(t *testing.T) {
	m := NewMemFS()
	durableFile(t, m, "/f", "first")
	require.NoError(t, m.Remove("/f"))
	createSynced(t, m, "/f", "second")

	outcomes := map[string]int{}
	for seed := range uint64(64) {
		got, ok := content(t, m.CrashClone(KeepRandomSectors, seed), "/f")
		if !ok {
			got = "absent"
		}
		require.Contains(t, []string{"first", "absent", "second"}, got, "seed %d", seed)
		outcomes[got]++
	}
	assert.Len(t, outcomes, 3, "%v", outcomes)
}

// TestCrashDirReplace: the write-temp-then-rename replace. Synced before
// the rename, the name holds the old file or the new one, whole, whatever
// the crash keeps. Renamed before the sync, a crash can keep the rename
// and lose the data: the name holds the new file empty or zeroed.
func TestCrashDirReplace(t *testing.T) {
	const old, new = "old HEAD content", "new HEAD content"
	tests := []struct {
		name      string
		syncFirst bool
	}{
		{"synced, then renamed", true},
		{"renamed, then synced", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemFS()
			durableFile(t, m, "/HEAD", old)
			f, err := m.OpenFile("/HEAD.tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
			require.NoError(t, err)
			_, err = f.Write([]byte(new))
			require.NoError(t, err)
			if tt.syncFirst {
				require.NoError(t, f.Sync())
			}
			require.NoError(t, m.Rename("/HEAD.tmp", "/HEAD"))
			// The power fails here, before the sync that would follow.
			require.NoError(t, f.Close())

			outcomes := map[string]int{}
			for seed := range uint64(64) {
				c := m.CrashClone(KeepRandomSectors, seed)
				got, ok := content(t, c, "/HEAD")
				require.True(t, ok, "seed %d: the name is never lost", seed)
				tmp, tmpOK := content(t, c, "/HEAD.tmp")
				if tmpOK {
					require.Equal(t, old, got, "seed %d: the temporary file stays only if the rename is lost", seed)
					if tt.syncFirst {
						require.Equal(t, new, tmp, "seed %d", seed)
					}
				}
				switch got {
				case old, new:
					outcomes[got]++
				default:
					require.False(t, tt.syncFirst, "seed %d: %q is neither version", seed, got)
					require.Contains(t, []string{"", strings.Repeat("\x00", len(new))}, got, "seed %d", seed)
					outcomes["lost data"]++
				}
			}
			t.Logf("outcomes: %v", outcomes)
			assert.Contains(t, outcomes, old)
			assert.Contains(t, outcomes, new)
			if !tt.syncFirst {
				assert.Contains(t, outcomes, "lost data", "the rename kept, the data lost")
			}
		})
	}
}

// TestCrashDirUnsyncedMkdir: directories MkdirAll made, whose entries in
// their parents were never synced. A file durable inside such a directory
// (its own SyncDir done) is there only if the directory's entry, and its
// parent's, are kept: a change kept under a lost entry is dropped with it,
// never shown elsewhere.
func TestCrashDirUnsyncedMkdir(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/a/b", 0o755))
	durableFile(t, m, "/a/b/f", "f") // syncs /a/b only
	require.NoError(t, m.MkdirAll("/a/c", 0o755))
	createSynced(t, m, "/a/c/g", "g") // nothing synced but its data

	allowed := map[string]bool{}
	for _, a := range []bool{false, true} {
		for _, b := range []bool{false, true} {
			for _, c := range []bool{false, true} {
				for _, g := range []bool{false, true} {
					if !a && (b || c) || !c && g {
						continue
					}
					var tr []string
					if a {
						tr = append(tr, "/a/")
					}
					if b {
						tr = append(tr, "/a/b/", "/a/b/f")
					}
					if c {
						tr = append(tr, "/a/c/")
					}
					if g {
						tr = append(tr, "/a/c/g")
					}
					sort.Strings(tr)
					allowed[strings.Join(tr, " ")] = true
				}
			}
		}
	}
	outcomes := map[string]int{}
	for seed := range uint64(256) {
		c := m.CrashClone(KeepRandomSectors, seed)
		k := keys(tree(t, c))
		require.True(t, allowed[k], "seed %d: %q", seed, k)
		outcomes[k]++
	}
	t.Logf("outcomes: %v", outcomes)
	assert.Len(t, outcomes, len(allowed), "every combination of kept entries occurs")
	assert.Contains(t, outcomes, "", "/a lost: nothing under it shows, /a/b/f neither")
	for _, mode := range otherModes {
		assert.Empty(t, tree(t, m.CrashClone(mode, 3)), "%s", mode)
	}

	// With the parents synced, the durable file is always there.
	require.NoError(t, m.SyncDir("/a"))
	require.NoError(t, m.SyncDir("/"))
	for seed := range uint64(32) {
		got, ok := content(t, m.CrashClone(KeepRandomSectors, seed), "/a/b/f")
		require.True(t, ok, "seed %d", seed)
		assert.Equal(t, "f", got)
	}
}

// TestCrashDirChangesIndependent: KeepRandomSectors keeps each of several
// unsynced changes of one directory (creates, a remove, a rename) or loses
// it independently: over the seeds it keeps none, some and all of them,
// and most of the possible sets. The same seed keeps the same ones; a
// clone has nothing unsynced left; SyncDir makes every change durable.
func TestCrashDirChangesIndependent(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	durableFile(t, m, "/d/gone", "gone")
	durableFile(t, m, "/d/moved", "moved")
	const creates = 4
	for i := range creates {
		createSynced(t, m, fmt.Sprintf("/d/new%d", i), fmt.Sprint("new", i))
	}
	require.NoError(t, m.Remove("/d/gone"))
	require.NoError(t, m.Rename("/d/moved", "/d/renamed"))
	const changes = creates + 2

	// kept returns which changes c shows, as a bit set.
	kept := func(t *testing.T, c *MemFS) int {
		tr := tree(t, c)
		set, entries := 0, 2 // /d/, and the renamed file under one name or the other
		for i := range creates {
			if got, ok := tr[fmt.Sprintf("/d/new%d", i)]; ok {
				require.Equal(t, fmt.Sprint("new", i), got)
				set |= 1 << i
				entries++
			}
		}
		if got, ok := tr["/d/gone"]; ok {
			require.Equal(t, "gone", got)
			entries++
		} else {
			set |= 1 << creates
		}
		old, atOld := tr["/d/moved"]
		new, atNew := tr["/d/renamed"]
		require.NotEqual(t, atOld, atNew, "the renamed file is under one name: %v", tr)
		require.Equal(t, "moved", old+new)
		if atNew {
			set |= 1 << (creates + 1)
		}
		require.Len(t, tr, entries, "nothing else: %v", tr)
		return set
	}
	counts := map[int]int{} // changes kept: seeds
	sets := map[int]bool{}
	for seed := range uint64(512) {
		c := m.CrashClone(KeepRandomSectors, seed)
		set := kept(t, c)
		require.Equal(t, set, kept(t, m.CrashClone(KeepRandomSectors, seed)), "seed %d is not deterministic", seed)
		counts[popcount(set)]++
		sets[set] = true
		if seed < 8 {
			assert.Equal(t, tree(t, c), tree(t, c.CrashClone(KeepRandomSectors, seed+1)), "seed %d: a clone's entries are durable", seed)
		}
	}
	t.Logf("changes kept: seeds %v; %d of %d sets", counts, len(sets), 1<<changes)
	assert.Contains(t, counts, 0, "some seed keeps none")
	assert.Contains(t, counts, changes, "some seed keeps all")
	strict := 0
	for n, c := range counts {
		if 0 < n && n < changes {
			strict += c
		}
	}
	assert.Positive(t, strict, "some seed keeps some")
	assert.GreaterOrEqual(t, len(sets), 3<<(changes-2), "the changes are kept independently")
	for _, mode := range otherModes {
		assert.Equal(t, 0, kept(t, m.CrashClone(mode, 5)), "%s keeps no unsynced change", mode)
	}

	require.NoError(t, m.SyncDir("/d"))
	for seed := range uint64(16) {
		assert.Equal(t, 1<<changes-1, kept(t, m.CrashClone(KeepRandomSectors, seed)), "seed %d: synced", seed)
		assert.Equal(t, 1<<changes-1, kept(t, m.CrashClone(KeepSynced, seed)), "seed %d: synced", seed)
	}
}

func popcount(x int) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// TestCrashDirRenameAcrossDirectories: a rename from one directory to
// another is one change: after a crash the file is under its old name or
// its new one, never both or neither. A SyncDir of either directory makes
// it durable, with the changes before it in the other directory's log
// that it rests on (the create of its source name), and not the later
// ones.
func TestCrashDirRenameAcrossDirectories(t *testing.T) {
	for _, syncDir := range []string{"/a", "/b"} {
		t.Run("sync "+syncDir, func(t *testing.T) {
			m := NewMemFS()
			require.NoError(t, m.MkdirAll("/a", 0o755))
			require.NoError(t, m.MkdirAll("/b", 0o755))
			require.NoError(t, m.SyncDir("/"))
			durableFile(t, m, "/a/f", "f")
			require.NoError(t, m.Rename("/a/f", "/b/g"))

			where := map[string]int{}
			for seed := range uint64(64) {
				tr := tree(t, m.CrashClone(KeepRandomSectors, seed))
				_, old := tr["/a/f"]
				_, new := tr["/b/g"]
				require.NotEqual(t, old, new, "seed %d: under one name: %v", seed, tr)
				where[fmt.Sprint(new)]++
			}
			assert.Len(t, where, 2, "both outcomes occur: %v", where)

			createSynced(t, m, "/a/h", "h") // in /a's log, then moved out
			require.NoError(t, m.Rename("/a/h", "/b/h"))
			createSynced(t, m, "/a/later", "later")
			createSynced(t, m, "/b/later", "later")
			require.NoError(t, m.SyncDir(syncDir))
			later := map[string]int{}
			for seed := range uint64(64) {
				for _, mode := range CrashModes {
					tr := tree(t, m.CrashClone(mode, seed))
					assert.Equal(t, "f", tr["/b/g"], "%s seed %d: %v", mode, seed, tr)
					assert.Equal(t, "h", tr["/b/h"], "%s seed %d: %v", mode, seed, tr)
					assert.NotContains(t, tr, "/a/f")
					assert.NotContains(t, tr, "/a/h")
					if mode == KeepRandomSectors {
						_, ok := tr["/a/later"]
						later[fmt.Sprint("/a ", ok)]++
						_, ok = tr["/b/later"]
						later[fmt.Sprint("/b ", ok)]++
					}
				}
			}
			// The later create in the synced directory is durable, the one
			// in the other directory is not.
			other := map[string]string{"/a": "/b", "/b": "/a"}[syncDir]
			assert.Equal(t, 64, later[syncDir+" true"], "%v", later)
			assert.Positive(t, later[other+" true"], "%v", later)
			assert.Positive(t, later[other+" false"], "%v", later)
		})
	}
}

// TestCrashDirRandomOps runs random creates, removes, renames (within and
// across directories, over existing names too) and directory syncs, each
// file with content of its own, synced. Every crash clone shows each file
// under one name at most, and only files that were made; once every
// directory is synced, every clone is the current tree: the log the
// syncs applied to the durable entries led to the state the operations
// left.
func TestCrashDirRandomOps(t *testing.T) {
	dirs := []string{"/x", "/x/y", "/z"}
	for trial := range uint64(40) {
		rng := rand.New(rand.NewPCG(trial, 3))
		m := NewMemFS()
		made := map[string]bool{}
		for i := range 30 {
			dir := dirs[rng.IntN(len(dirs))]
			if rng.IntN(6) == 0 {
				require.NoError(t, m.MkdirAll(dir, 0o755))
			}
			if _, err := m.Stat(dir); err != nil {
				continue
			}
			names, err := m.ReadDir(dir)
			require.NoError(t, err)
			var files []string
			for _, n := range names {
				if fi, err := m.Stat(path.Join(dir, n)); err == nil && !fi.IsDir() {
					files = append(files, path.Join(dir, n))
				}
			}
			name := path.Join(dir, fmt.Sprint("f", rng.IntN(4)))
			switch op := rng.IntN(10); {
			case op < 4:
				if !exists(t, m, name) {
					data := fmt.Sprint("file ", trial, " ", i)
					createSynced(t, m, name, data)
					made[data] = true
				}
			case op < 5 && len(files) > 0:
				require.NoError(t, m.Remove(files[rng.IntN(len(files))]))
			case op < 8 && len(files) > 0:
				to := dirs[rng.IntN(len(dirs))]
				if _, err := m.Stat(to); err == nil {
					require.NoError(t, m.Rename(files[rng.IntN(len(files))], path.Join(to, fmt.Sprint("f", rng.IntN(4)))))
				}
			default:
				if d := slices.Concat([]string{"/"}, dirs)[rng.IntN(len(dirs)+1)]; exists(t, m, d) {
					require.NoError(t, m.SyncDir(d))
				}
			}
		}
		for seed := range uint64(16) {
			tr := tree(t, m.CrashClone(KeepRandomSectors, seed))
			contents := map[string]string{}
			for name, data := range tr {
				if strings.HasSuffix(name, "/") {
					continue
				}
				require.True(t, made[data], "trial %d seed %d: %s holds %q", trial, seed, name, data)
				require.NotContains(t, contents, data, "trial %d seed %d: one file under %s and %s", trial, seed, contents[data], name)
				contents[data] = name
			}
		}
		// Deepest first, so that no SyncDir persists a parent's change
		// after its child's: any order gives the same durable tree.
		for _, d := range []string{"/x/y", "/x", "/z", "/"} {
			if _, err := m.Stat(d); err == nil {
				require.NoError(t, m.SyncDir(d))
			}
		}
		want := tree(t, m)
		for _, mode := range CrashModes {
			assert.Equal(t, want, tree(t, m.CrashClone(mode, trial)), "trial %d %s: all synced", trial, mode)
		}
		for _, c := range m.unsynced {
			assert.True(t, c.durable, "trial %d: a change left unsynced", trial)
		}
	}
}
