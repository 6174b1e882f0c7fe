package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemFSContract(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/root", 0o755))
	testFSContract(t, m, "/root", true)
}

// durableFile creates name holding data, synced, with its directory entry
// synced: a file that survives any crash.
func durableFile(t *testing.T, m *MemFS, name, data string) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, m.SyncDir(dirOf(name)))
}

func dirOf(name string) string {
	i := strings.LastIndex(name, "/")
	if i <= 0 {
		return "/"
	}
	return name[:i]
}

// appendFile appends data to name and syncs it if sync is set.
func appendFile(t *testing.T, m *MemFS, name, data string, sync bool) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	if sync {
		require.NoError(t, f.Sync())
	}
	require.NoError(t, f.Close())
}

// content returns the file's data, or ok == false if it does not exist.
func content(t *testing.T, m *MemFS, name string) (data string, ok bool) {
	t.Helper()
	b, err := ReadFile(m, name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false
	}
	require.NoError(t, err)
	return string(b), true
}

func exists(t *testing.T, m *MemFS, name string) bool {
	t.Helper()
	_, err := m.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	require.NoError(t, err)
	return true
}

func TestMemFSOpenFileErrors(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	durableFile(t, m, "/d/f", "x")
	tests := []struct {
		name string
		path string
		flag int
		want error // nil: any error
	}{
		{"missing without O_CREATE", "/d/missing", os.O_RDONLY, fs.ErrNotExist},
		{"missing parent", "/nope/f", os.O_RDWR | os.O_CREATE, fs.ErrNotExist},
		{"parent is a file", "/d/f/g", os.O_RDWR | os.O_CREATE, nil},
		{"O_EXCL on existing", "/d/f", os.O_RDWR | os.O_CREATE | os.O_EXCL, fs.ErrExist},
		{"O_EXCL on existing directory", "/d", os.O_RDONLY | os.O_CREATE | os.O_EXCL, fs.ErrExist},
		{"directory for writing", "/d", os.O_RDWR, nil},
		{"directory write-only", "/d", os.O_WRONLY, nil},
		{"root", "/", os.O_RDONLY, fs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := m.OpenFile(tt.path, tt.flag, 0o644)
			require.Error(t, err)
			assert.Nil(t, f)
			var pe *fs.PathError
			assert.ErrorAs(t, err, &pe)
			if tt.want != nil {
				assert.ErrorIs(t, err, tt.want)
			}
		})
	}
	got, _ := content(t, m, "/d/f")
	assert.Equal(t, "x", got)
	names, err := m.ReadDir("/d")
	require.NoError(t, err)
	assert.Equal(t, []string{"f"}, names, "no failed open created anything")
}

func TestMemFSPathsAreCleaned(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("a/b", 0o755))
	writeFile(t, m, "/a/./b/../b/f", "x")
	got, ok := content(t, m, "a/b/f")
	require.True(t, ok, "relative names resolve from the root")
	assert.Equal(t, "x", got)
	names, err := m.ReadDir("/a//b/")
	require.NoError(t, err)
	assert.Equal(t, []string{"f"}, names)
}

func TestMemFSReadOnDirectory(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	f, err := m.OpenFile("/d", os.O_RDONLY, 0)
	assert.Nil(t, f)
	assert.ErrorIs(t, err, ErrFileType, "a directory is not opened as a file, as with Default")
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "/d", pe.Path)
}

func TestMemFSReadAtFullBufferAtEnd(t *testing.T) {
	// ReadAt that exactly reaches the end returns nil, like os.File; one
	// more byte asked for returns io.EOF with the bytes read.
	m := NewMemFS()
	writeFile(t, m, "/f", "abc")
	f, err := m.OpenFile("/f", os.O_RDONLY, 0)
	require.NoError(t, err)
	defer f.Close()
	buf := make([]byte, 3)
	n, err := f.ReadAt(buf, 0)
	assert.Equal(t, 3, n)
	assert.NoError(t, err)
	buf = make([]byte, 4)
	n, err = f.ReadAt(buf, 0)
	assert.Equal(t, 3, n)
	assert.ErrorIs(t, err, io.EOF)
	n, err = f.ReadAt(buf, 3)
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF)

	n, err = f.Read(make([]byte, 10))
	assert.Equal(t, 3, n)
	assert.NoError(t, err)
	n, err = f.Read(make([]byte, 10))
	assert.Equal(t, 0, n)
	assert.ErrorIs(t, err, io.EOF)
}

func TestMemFSWriteAtAppendHasNoEffect(t *testing.T) {
	m := NewMemFS()
	writeFile(t, m, "/f", "abc")
	f, err := m.OpenFile("/f", os.O_RDWR|os.O_APPEND, 0)
	require.NoError(t, err)
	defer f.Close()
	n, err := f.WriteAt([]byte("XYZW"), 0)
	assert.Zero(t, n)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "/f", pe.Path)
	got, _ := content(t, m, "/f")
	assert.Equal(t, "abc", got)
}

// The data and the synced data of a file never share memory: overwriting
// bytes in place must not change what a crash keeps.
func TestMemFSOverwriteDoesNotTouchSyncedData(t *testing.T) {
	m := NewMemFS()
	durableFile(t, m, "/f", "abcdef")
	f, err := m.OpenFile("/f", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("XY"), 1)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	got, _ := content(t, m.CrashClone(KeepSynced, 0), "/f")
	assert.Equal(t, "abcdef", got)
	got, _ = content(t, m.CrashClone(KeepAll, 0), "/f")
	assert.Equal(t, "aXYdef", got)
}

func TestCrashUnsyncedDataLost(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	durableFile(t, m, "/d/log", "synced;")
	appendFile(t, m, "/d/log", "unsynced;", false)

	// A file whose entry is durable but whose data was never synced.
	f, err := m.OpenFile("/d/empty", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte("never synced"))
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, m.SyncDir("/d"))

	tests := []struct {
		mode      CrashMode
		log, empt string
	}{
		{KeepSynced, "synced;", ""},
		{KeepAll, "synced;unsynced;", "never synced"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.mode), func(t *testing.T) {
			c := m.CrashClone(tt.mode, 1)
			got, ok := content(t, c, "/d/log")
			require.True(t, ok, "%s", c)
			assert.Equal(t, tt.log, got)
			got, ok = content(t, c, "/d/empty")
			require.True(t, ok, "the entry was synced: %s", c)
			assert.Equal(t, tt.empt, got)
		})
	}

	// The receiver is unchanged by cloning.
	got, _ := content(t, m, "/d/log")
	assert.Equal(t, "synced;unsynced;", got)

	// A synced append survives.
	appendFile(t, m, "/d/log", "more;", true)
	got, _ = content(t, m.CrashClone(KeepSynced, 0), "/d/log")
	assert.Equal(t, "synced;unsynced;more;", got)
}

func TestCrashCreateWithoutSyncDir(t *testing.T) {
	for _, mode := range []CrashMode{KeepSynced, KeepAll, KeepRandom} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			m := NewMemFS()
			require.NoError(t, m.MkdirAll("/d", 0o755))
			require.NoError(t, m.SyncDir("/"))

			// Data synced, directory not.
			f, err := m.OpenFile("/d/new", os.O_RDWR|os.O_CREATE, 0o644)
			require.NoError(t, err)
			_, err = f.Write([]byte("data"))
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())

			c := m.CrashClone(mode, 7)
			assert.False(t, exists(t, c, "/d/new"), "created without SyncDir: %s", c)
			names, err := c.ReadDir("/d")
			require.NoError(t, err)
			assert.Empty(t, names)

			require.NoError(t, m.SyncDir("/d"))
			got, ok := content(t, m.CrashClone(mode, 7), "/d/new")
			require.True(t, ok)
			assert.Equal(t, "data", got)
		})
	}
}

func TestCrashDirectoryChain(t *testing.T) {
	// A new directory is itself an entry of its parent: syncing the new
	// directory is not enough, its parent must be synced too.
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/a/b", 0o755))
	durableFile(t, m, "/a/b/f", "x") // syncs /a/b only
	require.NoError(t, m.SyncDir("/a"))

	c := m.CrashClone(KeepSynced, 0)
	assert.False(t, exists(t, c, "/a"), "root was never synced: %s", c)

	require.NoError(t, m.SyncDir("/"))
	got, ok := content(t, m.CrashClone(KeepSynced, 0), "/a/b/f")
	require.True(t, ok)
	assert.Equal(t, "x", got)
}

func TestCrashRenameWithoutSyncDir(t *testing.T) {
	t.Run("replace", func(t *testing.T) {
		// The write-temp-then-rename pattern.
		m := NewMemFS()
		durableFile(t, m, "/HEAD", "old")
		durableFile(t, m, "/HEAD.tmp", "new")
		require.NoError(t, m.Rename("/HEAD.tmp", "/HEAD"))
		got, _ := content(t, m, "/HEAD")
		require.Equal(t, "new", got)
		require.False(t, exists(t, m, "/HEAD.tmp"))

		c := m.CrashClone(KeepSynced, 0)
		got, ok := content(t, c, "/HEAD")
		require.True(t, ok)
		assert.Equal(t, "old", got, "rename undone: old content under the name")
		got, ok = content(t, c, "/HEAD.tmp")
		require.True(t, ok, "rename undone: source name back")
		assert.Equal(t, "new", got)

		require.NoError(t, m.SyncDir("/"))
		c = m.CrashClone(KeepSynced, 0)
		got, _ = content(t, c, "/HEAD")
		assert.Equal(t, "new", got)
		assert.False(t, exists(t, c, "/HEAD.tmp"))
	})

	t.Run("new name", func(t *testing.T) {
		m := NewMemFS()
		durableFile(t, m, "/a", "data")
		require.NoError(t, m.Rename("/a", "/b"))

		c := m.CrashClone(KeepAll, 0)
		assert.False(t, exists(t, c, "/b"), "%s", c)
		got, ok := content(t, c, "/a")
		require.True(t, ok)
		assert.Equal(t, "data", got)

		require.NoError(t, m.SyncDir("/"))
		c = m.CrashClone(KeepAll, 0)
		assert.False(t, exists(t, c, "/a"))
		got, _ = content(t, c, "/b")
		assert.Equal(t, "data", got)
	})
}

func TestCrashRemoveWithoutSyncDir(t *testing.T) {
	m := NewMemFS()
	durableFile(t, m, "/f", "durable")
	require.NoError(t, m.Remove("/f"))
	require.False(t, exists(t, m, "/f"))

	c := m.CrashClone(KeepSynced, 0)
	got, ok := content(t, c, "/f")
	require.True(t, ok, "remove undone: %s", c)
	assert.Equal(t, "durable", got)

	require.NoError(t, m.SyncDir("/"))
	assert.False(t, exists(t, m.CrashClone(KeepSynced, 0), "/f"))
}

func TestCrashRemoveAndRecreate(t *testing.T) {
	// A name removed and created again without SyncDir still names the
	// old file after a crash.
	m := NewMemFS()
	durableFile(t, m, "/f", "first")
	require.NoError(t, m.Remove("/f"))
	f, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte("second"))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())

	got, _ := content(t, m.CrashClone(KeepAll, 0), "/f")
	assert.Equal(t, "first", got)
	require.NoError(t, m.SyncDir("/"))
	got, _ = content(t, m.CrashClone(KeepAll, 0), "/f")
	assert.Equal(t, "second", got)
}

func TestCrashKeepRandomPrefix(t *testing.T) {
	const synced = "0123456789"
	const unsynced = "abcdefghijklmnopqrst"

	m := NewMemFS()
	durableFile(t, m, "/f", synced)
	appendFile(t, m, "/f", unsynced, false)
	full := synced + unsynced

	lengths := map[int]int{}
	for seed := uint64(0); seed < 200; seed++ {
		got, ok := content(t, m.CrashClone(KeepRandom, seed), "/f")
		require.True(t, ok)
		require.True(t, strings.HasPrefix(full, got), "seed %d: %q is not a prefix of the data", seed, got)
		require.GreaterOrEqual(t, len(got), len(synced), "seed %d lost synced data", seed)
		lengths[len(got)]++

		again, _ := content(t, m.CrashClone(KeepRandom, seed), "/f")
		require.Equal(t, got, again, "seed %d is not deterministic", seed)
	}
	// 200 draws from 21 possible lengths: a fixed or nearly fixed outcome
	// means the tail is not random, and both ends must be reachable.
	assert.Greater(t, len(lengths), 15, "distinct lengths kept: %v", lengths)
	assert.Contains(t, lengths, len(synced), "never kept only the synced data")
	assert.Contains(t, lengths, len(full), "never kept the whole unsynced tail")
}

// TestCrashKeepRandomSectors: an unsynced overwrite of preallocated space
// keeps each sector's new or old content independently, so holes appear;
// synced sectors are never lost.
func TestCrashKeepRandomSectors(t *testing.T) {
	const sectors = 4
	old := strings.Repeat("\x00", sectors*sectorSize)
	m := NewMemFS()
	durableFile(t, m, "/f", "head"+old[4:]) // synced: "head", then zeros
	f, err := m.OpenFile("/f", os.O_RDWR, 0)
	require.NoError(t, err)
	now := []byte("head" + strings.Repeat("n", sectors*sectorSize-4))
	_, err = f.WriteAt(now[4:], 4) // unsynced
	require.NoError(t, err)
	require.NoError(t, f.Close())

	holes := 0
	kept := map[int]bool{}
	for seed := uint64(0); seed < 64; seed++ {
		got, ok := content(t, m.CrashClone(KeepRandomSectors, seed), "/f")
		require.True(t, ok)
		require.Len(t, got, sectors*sectorSize)
		require.True(t, strings.HasPrefix(got, "head"), "seed %d lost synced data", seed)
		newAt := make([]bool, sectors)
		for i := range sectors {
			sec := got[i*sectorSize : (i+1)*sectorSize]
			isNew := sec == string(now[i*sectorSize:(i+1)*sectorSize])
			isOld := i > 0 && sec == old[i*sectorSize:(i+1)*sectorSize] || i == 0 && sec == "head"+old[4:sectorSize]
			require.True(t, isNew || isOld, "seed %d sector %d is neither version", seed, i)
			newAt[i] = isNew
			kept[i] = kept[i] || isNew
		}
		for i := 1; i < sectors; i++ {
			if !newAt[i-1] && newAt[i] {
				holes++
				break
			}
		}
		again, _ := content(t, m.CrashClone(KeepRandomSectors, seed), "/f")
		require.Equal(t, got, again, "seed %d is not deterministic", seed)
	}
	assert.Positive(t, holes, "a lost sector before a kept one (a hole) happens")
	assert.Len(t, kept, sectors, "every sector's new content is kept sometimes")
}

// The same seed gives the same clone even with many files, whatever order
// the directory maps are walked in.
func TestCrashKeepRandomDeterministicManyFiles(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/a/b", 0o755))
	require.NoError(t, m.SyncDir("/"))
	require.NoError(t, m.SyncDir("/a"))
	var names []string
	for i := 0; i < 40; i++ {
		dir := "/a"
		if i%2 == 1 {
			dir = "/a/b"
		}
		name := fmt.Sprintf("%s/f%02d", dir, i)
		names = append(names, name)
		durableFile(t, m, name, "s")
		appendFile(t, m, name, strings.Repeat("u", 50), false)
	}
	snapshot := func(c *MemFS) map[string]string {
		out := map[string]string{}
		for _, n := range names {
			got, ok := content(t, c, n)
			require.True(t, ok)
			out[n] = got
		}
		return out
	}
	for seed := uint64(0); seed < 5; seed++ {
		first := snapshot(m.CrashClone(KeepRandom, seed))
		for i := 0; i < 10; i++ {
			require.Equal(t, first, snapshot(m.CrashClone(KeepRandom, seed)), "seed %d, clone %d", seed, i)
		}
	}
}

func TestCrashKeepRandomRewrittenSyncedData(t *testing.T) {
	// When synced bytes were rewritten or cut, a crash keeps one version
	// whole: never a mix.
	tests := []struct {
		name   string
		mutate func(t *testing.T, f File)
		after  string
	}{
		{"overwrite", func(t *testing.T, f File) {
			_, err := f.WriteAt([]byte("XX"), 2)
			require.NoError(t, err)
		}, "abXXefgh"},
		{"truncate", func(t *testing.T, f File) { require.NoError(t, f.Truncate(3)) }, "abc"},
		{"truncate and append", func(t *testing.T, f File) {
			require.NoError(t, f.Truncate(3))
			_, err := f.WriteAt([]byte("ZZZZZZZZZZ"), 3)
			require.NoError(t, err)
		}, "abcZZZZZZZZZZ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemFS()
			durableFile(t, m, "/f", "abcdefgh")
			f, err := m.OpenFile("/f", os.O_RDWR, 0)
			require.NoError(t, err)
			tt.mutate(t, f)
			require.NoError(t, f.Close())
			seen := map[string]bool{}
			for seed := uint64(0); seed < 64; seed++ {
				got, _ := content(t, m.CrashClone(KeepRandom, seed), "/f")
				require.Contains(t, []string{"abcdefgh", tt.after}, got, "seed %d", seed)
				seen[got] = true
			}
			assert.Len(t, seen, 2, "both versions occur over 64 seeds")
		})
	}
}

func TestCrashCloneIsIndependent(t *testing.T) {
	m := NewMemFS()
	durableFile(t, m, "/f", "abc")
	c := m.CrashClone(KeepSynced, 0)

	appendFile(t, c, "/f", "clone", true)
	writeFile(t, c, "/g", "only in clone")
	got, _ := content(t, m, "/f")
	assert.Equal(t, "abc", got, "writing the clone changed the original")
	assert.False(t, exists(t, m, "/g"))

	appendFile(t, m, "/f", "orig", true)
	got, _ = content(t, c, "/f")
	assert.Equal(t, "abcclone", got, "writing the original changed the clone")
}

// Everything in a crash clone is durable: crashing it again loses nothing,
// while its own later unsynced changes follow the usual rules.
func TestCrashCloneOfClone(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	durableFile(t, m, "/d/f", "abcdef")
	appendFile(t, m, "/d/f", "ghi", false)

	c := m.CrashClone(KeepAll, 0)
	c2 := c.CrashClone(KeepSynced, 0)
	got, _ := content(t, c2, "/d/f")
	assert.Equal(t, "abcdefghi", got, "data kept by the first crash is durable")
	assert.Equal(t, c.String(), c2.String())

	// An unsynced in-place overwrite in the clone is lost by the next crash.
	f, err := c.OpenFile("/d/f", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt([]byte("XYZ"), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	got, _ = content(t, c.CrashClone(KeepSynced, 0), "/d/f")
	assert.Equal(t, "abcdefghi", got)
}

func TestMemFSLock(t *testing.T) {
	m := NewMemFS()
	l1, err := m.Lock("/LOCK", 0o644)
	require.NoError(t, err)
	assert.True(t, exists(t, m, "/LOCK"), "Lock creates the file")

	_, err = m.Lock("/LOCK", 0o644)
	require.ErrorIs(t, err, ErrLocked)
	var pe *fs.PathError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, "lock", pe.Op)
	assert.Equal(t, "/LOCK", pe.Path)

	_, err = m.Lock("/./LOCK", 0o644)
	assert.ErrorIs(t, err, ErrLocked, "another spelling of the same path")

	other, err := m.Lock("/OTHER", 0o644)
	require.NoError(t, err, "locks are per file")
	require.NoError(t, other.Close())

	require.NoError(t, l1.Close())
	l2, err := m.Lock("/LOCK", 0o644)
	require.NoError(t, err, "released on Close")

	// Closing the first lock again must not release the second holder's.
	require.NoError(t, l1.Close())
	_, err = m.Lock("/LOCK", 0o644)
	assert.ErrorIs(t, err, ErrLocked, "a second Close released someone else's lock")
	require.NoError(t, l2.Close())

	_, err = m.Lock("/missing/LOCK", 0o644)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

func TestMemFSLockFollowsTheFile(t *testing.T) {
	// Like flock, a lock belongs to the file, not the name: a file removed
	// and recreated under the same name is a different file.
	m := NewMemFS()
	l, err := m.Lock("/LOCK", 0o644)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, m.Rename("/LOCK", "/MOVED"))
	_, err = m.Lock("/MOVED", 0o644)
	assert.ErrorIs(t, err, ErrLocked, "the renamed file is still locked")
	l2, err := m.Lock("/LOCK", 0o644)
	require.NoError(t, err, "a new file under the old name is not locked")
	require.NoError(t, l2.Close())
}

func TestCrashCloneDropsLocks(t *testing.T) {
	m := NewMemFS()
	l, err := m.Lock("/LOCK", 0o644)
	require.NoError(t, err)
	defer l.Close()
	require.NoError(t, m.SyncDir("/"))

	c := m.CrashClone(KeepSynced, 0)
	require.True(t, exists(t, c, "/LOCK"))
	lc, err := c.Lock("/LOCK", 0o644)
	require.NoError(t, err, "a crash drops the dead process's locks")
	require.NoError(t, lc.Close())

	_, err = m.Lock("/LOCK", 0o644)
	assert.ErrorIs(t, err, ErrLocked, "the original keeps its lock")
}

// TestMemFSFault fails one operation through SetFault and checks that the
// error is the injected one wrapped in an *fs.PathError naming the op and
// the path, and that the operation had no effect.
func TestMemFSFault(t *testing.T) {
	injected := errors.New("injected")

	// setup builds: /d (durable) holding /d/f = "abc" (synced, durable),
	// /d/f open read-write as f.
	type env struct {
		m *MemFS
		f File
	}
	setup := func(t *testing.T) env {
		m := NewMemFS()
		require.NoError(t, m.MkdirAll("/d", 0o755))
		require.NoError(t, m.SyncDir("/"))
		durableFile(t, m, "/d/f", "abc")
		f, err := m.OpenFile("/d/f", os.O_RDWR, 0)
		require.NoError(t, err)
		t.Cleanup(func() { f.Close() })
		return env{m, f}
	}
	check := func(t *testing.T, e env, file string, crashFile string) {
		t.Helper()
		got, ok := content(t, e.m, "/d/f")
		require.True(t, ok)
		assert.Equal(t, file, got, "current data")
		got, _ = content(t, e.m.CrashClone(KeepSynced, 0), "/d/f")
		assert.Equal(t, crashFile, got, "synced data")
	}

	tests := []struct {
		op     Op
		path   string
		run    func(t *testing.T, e env) error
		effect func(t *testing.T, e env)
	}{
		{OpCreate, "/d/new", func(t *testing.T, e env) error {
			_, err := e.m.OpenFile("/d/new", os.O_RDWR|os.O_CREATE, 0o644)
			return err
		}, func(t *testing.T, e env) {
			assert.False(t, exists(t, e.m, "/d/new"))
		}},
		{OpOpen, "/d/f", func(t *testing.T, e env) error {
			_, err := e.m.OpenFile("/d/f", os.O_RDWR|os.O_TRUNC, 0)
			return err
		}, func(t *testing.T, e env) {
			check(t, e, "abc", "abc") // not truncated
		}},
		{OpTruncate, "/d/f", func(t *testing.T, e env) error {
			_, err := e.m.OpenFile("/d/f", os.O_RDWR|os.O_TRUNC, 0)
			return err
		}, func(t *testing.T, e env) {
			check(t, e, "abc", "abc") // the truncating open failed whole
		}},
		{OpRead, "/d/f", func(t *testing.T, e env) error {
			_, err := e.f.Read(make([]byte, 2))
			return err
		}, func(t *testing.T, e env) {
			buf := make([]byte, 2)
			_, err := io.ReadFull(e.f, buf)
			require.NoError(t, err)
			assert.Equal(t, "ab", string(buf), "a failed Read does not move the position")
		}},
		{OpRead, "/d/f", func(t *testing.T, e env) error {
			_, err := e.f.ReadAt(make([]byte, 2), 0)
			return err
		}, func(t *testing.T, e env) {}},
		{OpWrite, "/d/f", func(t *testing.T, e env) error {
			_, err := e.f.Write([]byte("XYZW"))
			return err
		}, func(t *testing.T, e env) {
			check(t, e, "abc", "abc")
			fi, err := e.f.Stat()
			require.NoError(t, err)
			assert.Equal(t, int64(3), fi.Size())
		}},
		{OpWrite, "/d/f", func(t *testing.T, e env) error {
			_, err := e.f.WriteAt([]byte("XYZW"), 1)
			return err
		}, func(t *testing.T, e env) { check(t, e, "abc", "abc") }},
		{OpSync, "/d/f", func(t *testing.T, e env) error {
			_, err := e.f.WriteAt([]byte("def"), 3)
			require.NoError(t, err)
			return e.f.Sync()
		}, func(t *testing.T, e env) {
			check(t, e, "abcdef", "abc") // written, not synced
		}},
		{OpTruncate, "/d/f", func(t *testing.T, e env) error { return e.f.Truncate(1) },
			func(t *testing.T, e env) { check(t, e, "abc", "abc") }},
		{OpRename, "/d/g", func(t *testing.T, e env) error { return e.m.Rename("/d/f", "/d/g") },
			func(t *testing.T, e env) {
				assert.False(t, exists(t, e.m, "/d/g"))
				check(t, e, "abc", "abc")
			}},
		{OpRemove, "/d/f", func(t *testing.T, e env) error { return e.m.Remove("/d/f") },
			func(t *testing.T, e env) { check(t, e, "abc", "abc") }},
		{OpMkdir, "/d/x/y", func(t *testing.T, e env) error { return e.m.MkdirAll("/d/x/y", 0o755) },
			func(t *testing.T, e env) {
				assert.False(t, exists(t, e.m, "/d/x"))
			}},
		{OpSyncDir, "/d", func(t *testing.T, e env) error {
			writeFile(t, e.m, "/d/new", "n")
			return e.m.SyncDir("/d")
		}, func(t *testing.T, e env) {
			assert.True(t, exists(t, e.m, "/d/new"))
			assert.False(t, exists(t, e.m.CrashClone(KeepAll, 0), "/d/new"), "entry not made durable")
		}},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			e := setup(t)
			var calls []string
			e.m.SetFault(func(op Op, path string) error {
				calls = append(calls, string(op)+" "+path)
				if op == tt.op {
					return injected
				}
				return nil
			})
			err := tt.run(t, e)
			require.Error(t, err)
			assert.ErrorIs(t, err, injected)
			var pe *fs.PathError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, string(tt.op), pe.Op)
			assert.Equal(t, tt.path, pe.Path)
			assert.Contains(t, calls, string(tt.op)+" "+tt.path, "the hook saw the op and its path")

			// Without the hook: the failed call left no trace, and the same
			// call now succeeds.
			e.m.SetFault(nil)
			tt.effect(t, e)
			assert.NoError(t, tt.run(t, e))
		})
	}
}

// The hook sees only the operations that reach it: it can target one path
// and leave the rest alone.
func TestMemFSFaultSelectsPath(t *testing.T) {
	m := NewMemFS()
	injected := errors.New("disk full")
	m.SetFault(func(op Op, path string) error {
		if op == OpWrite && path == "/bad" {
			return injected
		}
		return nil
	})
	writeFile(t, m, "/good", "ok")
	f, err := m.OpenFile("/bad", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte("x"))
	assert.ErrorIs(t, err, injected)
	require.NoError(t, f.Close())
	got, _ := content(t, m, "/good")
	assert.Equal(t, "ok", got)
	got, _ = content(t, m, "/bad")
	assert.Empty(t, got)
}

// A failing write at the k-th write: the Pebble-style loop the store's
// crash tests use, in miniature. Writes before the k-th take effect, the
// k-th and later fail.
func TestMemFSFaultNthWrite(t *testing.T) {
	for k := 0; k < 5; k++ {
		t.Run(fmt.Sprint(k), func(t *testing.T) {
			m := NewMemFS()
			n := 0
			m.SetFault(func(op Op, path string) error {
				if op != OpWrite {
					return nil
				}
				n++
				if n > k {
					return errors.New("fail")
				}
				return nil
			})
			f, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
			require.NoError(t, err)
			written := 0
			for i := 0; i < 5; i++ {
				if _, err := f.Write([]byte{'0' + byte(i)}); err != nil {
					break
				}
				written++
			}
			require.NoError(t, f.Close())
			assert.Equal(t, k, written)
			got, _ := content(t, m, "/f")
			assert.Equal(t, "01234"[:k], got)
		})
	}
}

func TestMemFSNegativeWriteAt(t *testing.T) {
	m := NewMemFS()
	writeFile(t, m, "/f", "abc")
	f, err := m.OpenFile("/f", os.O_RDWR, 0)
	require.NoError(t, err)
	defer f.Close()
	assert.NotPanics(t, func() {
		_, err = f.WriteAt([]byte("x"), -1)
	})
	assert.ErrorIs(t, err, fs.ErrInvalid)
	got, _ := content(t, m, "/f")
	assert.Equal(t, "abc", got)
}

func TestMemFSString(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d/e", 0o755))
	durableFile(t, m, "/d/f", "abc")
	appendFile(t, m, "/d/f", "de", false)
	lines := strings.Split(strings.TrimSuffix(m.String(), "\n"), "\n")
	require.Len(t, lines, 3, "%s", m)
	assert.Equal(t, "/d/", lines[0])
	assert.Equal(t, "/d/e/", lines[1])
	assert.True(t, strings.HasPrefix(lines[2], "/d/f (5 bytes, 3 synced"), "%q", lines[2])
}

func TestMemFSStatName(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	writeFile(t, m, "/d/f", "abc")
	fi, err := m.Stat("/d/f")
	require.NoError(t, err)
	assert.Equal(t, "f", fi.Name())
	assert.Equal(t, fs.FileMode(0o644), fi.Mode().Perm())
	assert.Nil(t, fi.Sys())
	fi, err = m.Stat("/d")
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsDir())
	fi, err = m.Stat("/")
	require.NoError(t, err)
	assert.True(t, fi.IsDir())
}

// Concurrent use is safe (run with -race): writers on different files,
// readers, locks and crash clones at once.
func TestMemFSConcurrent(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("/d/f%d", w)
			f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o644)
			if !assert.NoError(t, err) {
				return
			}
			defer f.Close()
			for i := 0; i < 100; i++ {
				_, err := f.Write([]byte("0123456789"))
				assert.NoError(t, err)
				if i%10 == 0 {
					assert.NoError(t, f.Sync())
					assert.NoError(t, m.SyncDir("/d"))
				}
				_, err = f.ReadAt(make([]byte, 5), 0)
				assert.NoError(t, err)
			}
		}()
	}
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				clone := m.CrashClone(KeepRandom, uint64(i))
				_, err := clone.ReadDir("/d")
				assert.NoError(t, err)
				if l, err := m.Lock("/d/LOCK", 0o644); err == nil {
					assert.NoError(t, l.Close())
				} else {
					assert.ErrorIs(t, err, ErrLocked)
				}
			}
		}()
	}
	wg.Wait()
	for w := 0; w < 8; w++ {
		got, _ := content(t, m, fmt.Sprintf("/d/f%d", w))
		assert.Len(t, got, 1000)
	}
}

func TestMemFSCrashTailModes(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o700))
	f, err := m.OpenFile("/d/f", os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.Write([]byte("synced"))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, m.SyncDir("/d"))
	require.NoError(t, m.SyncDir("/"))
	_, err = f.Write([]byte("-unsynced-tail"))
	require.NoError(t, err)

	zero := m.CrashClone(KeepZeroedTail, 1)
	b, err := ReadFile(zero, "/d/f")
	require.NoError(t, err)
	assert.Equal(t, append([]byte("synced"), make([]byte, len("-unsynced-tail"))...), b)

	garbage := m.CrashClone(KeepGarbageTail, 1)
	b, err = ReadFile(garbage, "/d/f")
	require.NoError(t, err)
	require.Len(t, b, len("synced-unsynced-tail"))
	assert.Equal(t, "synced", string(b[:6]))
	assert.NotEqual(t, "-unsynced-tail", string(b[6:]))
	again, err := ReadFile(m.CrashClone(KeepGarbageTail, 1), "/d/f")
	require.NoError(t, err)
	assert.Equal(t, b, again, "same seed, same garbage")

	for _, mode := range CrashModes {
		assert.NotContains(t, mode.String(), "CrashMode(")
	}
}

func TestFailNth(t *testing.T) {
	m := NewMemFS()
	f := FailNth(3, syscall.ENOSPC, OpWrite)
	m.SetFault(f.Hook)
	w, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	for i := 1; i <= 5; i++ {
		_, err := w.Write([]byte{byte('0' + i)})
		if i == 3 {
			assert.ErrorIs(t, err, syscall.ENOSPC)
			assert.True(t, f.Fired())
		} else {
			assert.NoError(t, err, "write %d", i)
		}
	}
	require.NoError(t, w.Sync(), "syncs are not counted")
	assert.Equal(t, 5, f.Count())
	b, err := ReadFile(m, "/f")
	require.NoError(t, err)
	assert.Equal(t, "1245", string(b), "the failed write had no effect")
	assert.True(t, Mutating(OpSync))
	assert.True(t, Mutating(OpTruncate))
	assert.False(t, Mutating(OpRead))
}

// memState describes everything a crash clone of m is made from: the
// current tree and the clones keeping every write and only synced ones.
func memState(m *MemFS) string {
	return m.String() + "-- keep-all:\n" + m.CrashClone(KeepAll, 0).String() + "-- keep-synced:\n" + m.CrashClone(KeepSynced, 0).String()
}

// TestMemFSPowerCut: a hook returning ErrPowerLoss (here wrapped) cuts the
// power at that operation. From then on every operation fails with
// ErrPowerLoss and changes nothing, also with the hook removed, and crash
// clones come from the state at the cut.
func TestMemFSPowerCut(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	durableFile(t, m, "/d/f", "synced;")
	appendFile(t, m, "/d/f", "unsynced;", false)
	f, err := m.OpenFile("/d/f", os.O_RDWR, 0)
	require.NoError(t, err)
	g, err := m.OpenFile("/d/g", os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, m.PowerCut())

	m.SetFault(func(op Op, path string) error {
		if op == OpWrite && path == "/d/g" {
			return fmt.Errorf("cut at %s: %w", path, ErrPowerLoss)
		}
		return nil
	})
	_, err = g.Write([]byte("lost"))
	require.ErrorIs(t, err, ErrPowerLoss)
	cut := m.PowerCut()
	var pe *fs.PathError
	require.ErrorAs(t, cut, &pe)
	assert.Equal(t, "write", pe.Op)
	assert.Equal(t, "/d/g", pe.Path)

	before := memState(m)
	m.SetFault(nil) // does not bring the power back
	buf := make([]byte, 4)
	ops := []struct {
		name string
		run  func() error
	}{
		{"create", func() error { _, err := m.OpenFile("/d/new", os.O_RDWR|os.O_CREATE, 0o644); return err }},
		{"open", func() error { _, err := m.OpenFile("/d/f", os.O_RDONLY, 0); return err }},
		{"open O_TRUNC", func() error { _, err := m.OpenFile("/d/f", os.O_RDWR|os.O_TRUNC, 0); return err }},
		{"mkdir", func() error { return m.MkdirAll("/d/x", 0o755) }},
		{"mkdir existing", func() error { return m.MkdirAll("/d", 0o755) }},
		{"remove", func() error { return m.Remove("/d/f") }},
		{"rename", func() error { return m.Rename("/d/f", "/d/h") }},
		{"readdir", func() error { _, err := m.ReadDir("/d"); return err }},
		{"stat", func() error { _, err := m.Stat("/d/f"); return err }},
		{"syncdir", func() error { return m.SyncDir("/d") }},
		{"lock", func() error { _, err := m.Lock("/d/LOCK", 0o644); return err }},
		{"read", func() error { _, err := f.Read(buf); return err }},
		{"readat", func() error { _, err := f.ReadAt(buf, 0); return err }},
		{"write", func() error { _, err := f.Write([]byte("more")); return err }},
		{"writeat", func() error { _, err := f.WriteAt([]byte("XY"), 0); return err }},
		{"sync", f.Sync},
		{"truncate", func() error { return f.Truncate(0) }},
		{"file stat", func() error { _, err := f.Stat(); return err }},
		{"close", g.Close},
	}
	for _, op := range ops {
		err := op.run()
		assert.ErrorIs(t, err, ErrPowerLoss, op.name)
		assert.ErrorAs(t, err, &pe, op.name)
	}
	assert.Equal(t, before, memState(m), "nothing changed after the power cut")
	m.PowerOff()
	assert.Equal(t, cut, m.PowerCut(), "the first cut stays")

	c := m.CrashClone(KeepAll, 0)
	require.NoError(t, c.PowerCut(), "a clone is a machine rebooted: powered")
	got, ok := content(t, c, "/d/f")
	require.True(t, ok)
	assert.Equal(t, "synced;unsynced;", got, "the clone holds the state at the cut")
	appendFile(t, c, "/d/f", "after reboot;", true)
	assert.Equal(t, before, memState(m), "the clone is independent")
}

// TestMemFSPowerOff: PowerOff cuts the power at once, for a program that
// is still running (a store whose goroutines still write): a concurrent
// writer's writes fail from then on, and nothing changes any more.
func TestMemFSPowerOff(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	require.NoError(t, m.SyncDir("/"))
	durableFile(t, m, "/d/f", "synced;")
	f, err := m.OpenFile("/d/f", os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	var writeErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for writeErr == nil {
			_, writeErr = f.Write([]byte("w"))
		}
	}()
	m.PowerOff()
	wg.Wait()
	assert.ErrorIs(t, writeErr, ErrPowerLoss, "the writer stops at the cut")
	before := memState(m)
	_, err = f.Write([]byte("x"))
	assert.ErrorIs(t, err, ErrPowerLoss)
	require.Error(t, m.SyncDir("/d"))
	assert.Equal(t, before, memState(m))
	var pe *fs.PathError
	require.ErrorAs(t, m.PowerCut(), &pe)
	assert.Equal(t, "poweroff", pe.Op)
}

// TestCrashTornOverwrite: an unsynced write into synced zeros (a
// preallocated chunk's free space) is torn sector by sector in every mode
// that tears. KeepRandom, KeepZeroedTail and KeepGarbageTail keep a
// prefix of its sectors in file order, KeepRandomSectors any of them;
// over the seeds each keeps none, some but not all, and all of them. A
// sector not kept holds its synced content (KeepGarbageTail: garbage
// instead of the bytes the write changed), and bytes the write did not
// change are kept.
func TestCrashTornOverwrite(t *testing.T) {
	const sectors = 6
	size := sectors * sectorSize
	synced := append([]byte("head"), make([]byte, size-4)...)
	end := (sectors-1)*sectorSize + 100 // the write ends inside the last sector
	now := bytes.Clone(synced)
	for i := 4; i < end; i++ {
		now[i] = 'a' + byte(i%26)
	}
	m := NewMemFS()
	durableFile(t, m, "/f", string(synced))
	f, err := m.OpenFile("/f", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(now[4:end], 4)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	sec := func(b []byte, i int) string { return string(b[i*sectorSize : (i+1)*sectorSize]) }
	for _, mode := range CrashModes {
		t.Run(mode.String(), func(t *testing.T) {
			kept := map[int]int{} // sectors with the new content: seeds
			for seed := range uint64(128) {
				b, err := ReadFile(m.CrashClone(mode, seed), "/f")
				require.NoError(t, err)
				require.Len(t, b, size, "seed %d: the size is unchanged", seed)
				require.Equal(t, "head", string(b[:4]), "seed %d: synced bytes the write did not change are kept", seed)
				require.Equal(t, string(synced[end:]), string(b[end:]), "seed %d: bytes past the write are kept", seed)
				n, lead := 0, -1
				for i := range sectors {
					if sec(b, i) == sec(now, i) {
						n++
						require.Equal(t, -1, lead, "seed %d: sector %d kept after sector %d was lost", seed, i, lead)
						continue
					}
					if lead < 0 && mode != KeepRandomSectors {
						lead = i // every later sector must be lost too
					}
					if mode == KeepGarbageTail {
						require.NotEqual(t, sec(synced, i), sec(b, i), "seed %d: sector %d not kept holds garbage", seed, i)
					} else {
						require.Equal(t, sec(synced, i), sec(b, i), "seed %d: sector %d not kept holds its synced content", seed, i)
					}
				}
				kept[n]++
			}
			t.Logf("%s: sectors of the write kept: seeds %v", mode, kept)
			switch mode {
			case KeepSynced:
				assert.Equal(t, map[int]int{0: 128}, kept)
			case KeepAll:
				assert.Equal(t, map[int]int{sectors: 128}, kept)
			default:
				strict := 0
				for n, c := range kept {
					if 0 < n && n < sectors {
						strict += c
					}
				}
				assert.Positive(t, strict, "some seed keeps some sectors of the write, not all")
				assert.Contains(t, kept, 0, "some seed keeps none of the write")
				assert.Contains(t, kept, sectors, "some seed keeps all of the write")
			}
		})
	}
}

// TestCrashTornWriteAcrossSyncedEnd: a write that starts inside the
// synced size and goes past it. KeepRandom keeps a prefix in file order:
// the new content up to a sector boundary inside the synced size and the
// synced content after it, or all of that and a prefix (in bytes) of what
// lies past the synced size. KeepZeroedTail keeps the current size, with
// zeros past the synced size.
func TestCrashTornWriteAcrossSyncedEnd(t *testing.T) {
	const syncedSize = 2 * sectorSize
	synced := append([]byte("head"), make([]byte, syncedSize-4)...)
	const start, end = 300, syncedSize + 400
	now := append(bytes.Clone(synced), make([]byte, end-syncedSize)...)
	for i := start; i < end; i++ {
		now[i] = 'a' + byte(i%26)
	}
	m := NewMemFS()
	durableFile(t, m, "/f", string(synced))
	f, err := m.OpenFile("/f", os.O_RDWR, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(now[start:], start)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	torn, partTail := 0, 0
	for seed := range uint64(128) {
		b, err := ReadFile(m.CrashClone(KeepRandom, seed), "/f")
		require.NoError(t, err)
		p := 0
		for p < len(b) && b[p] == now[p] {
			p++
		}
		if p < len(b) {
			// Torn inside the synced size, at a sector boundary: from
			// there on, the synced content.
			require.Len(t, b, syncedSize, "seed %d", seed)
			q := p / sectorSize * sectorSize
			require.Equal(t, string(synced[q:]), string(b[q:]), "seed %d: a prefix in file order, torn at %d", seed, q)
			torn++
		} else {
			require.GreaterOrEqual(t, len(b), syncedSize, "seed %d: a prefix of the new content, past the synced size", seed)
			if len(b) < end {
				partTail++
			}
		}

		z, err := ReadFile(m.CrashClone(KeepZeroedTail, seed), "/f")
		require.NoError(t, err)
		require.Len(t, z, end, "seed %d: zeroed-tail keeps the size", seed)
		require.Equal(t, string(make([]byte, end-syncedSize)), string(z[syncedSize:]), "seed %d: zeros past the synced size", seed)
	}
	assert.Positive(t, torn, "KeepRandom tears inside the synced size for some seed")
	assert.Positive(t, partTail, "KeepRandom keeps part of the tail for some seed")
}

// TestMemFSOpenTruncIsATruncate: an open with O_TRUNC of an existing file
// truncates it, so the fault hook sees it as OpTruncate, a mutating
// operation (a crash point), which fails or cuts the power like another;
// an open without O_TRUNC changes nothing, and one that creates the file
// is a create.
func TestMemFSOpenTruncIsATruncate(t *testing.T) {
	m := NewMemFS()
	durableFile(t, m, "/f", "old content")
	var mutating []string
	hook := func(cut bool) FaultFunc {
		return func(op Op, path string) error {
			if Mutating(op) {
				mutating = append(mutating, string(op)+" "+path)
				if cut && op == OpTruncate {
					return ErrPowerLoss
				}
			}
			return nil
		}
	}
	m.SetFault(hook(false))
	open := func(name string, flag int) {
		t.Helper()
		mutating = nil
		f, err := m.OpenFile(name, flag, 0o644)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	open("/f", os.O_RDWR)
	assert.Empty(t, mutating, "an open without O_TRUNC")
	open("/g", os.O_RDWR|os.O_CREATE|os.O_TRUNC)
	assert.Equal(t, []string{"create /g"}, mutating, "an open that creates the file")
	open("/f", os.O_WRONLY|os.O_CREATE|os.O_TRUNC)
	assert.Equal(t, []string{"truncate /f"}, mutating, "an open that truncates an existing file")
	got, _ := content(t, m, "/f")
	assert.Empty(t, got)

	// The power cut at the truncating open: nothing is truncated.
	m = NewMemFS()
	durableFile(t, m, "/f", "old content")
	m.SetFault(hook(true))
	_, err := m.OpenFile("/f", os.O_RDWR|os.O_TRUNC, 0)
	require.ErrorIs(t, err, ErrPowerLoss)
	var pe *fs.PathError
	require.ErrorAs(t, m.PowerCut(), &pe)
	assert.Equal(t, string(OpTruncate), pe.Op)
	for _, mode := range CrashModes {
		got, _ := content(t, m.CrashClone(mode, 1), "/f")
		assert.Equal(t, "old content", got, "%s", mode)
	}
}

// TestCrashCutBeforeSync: a truncation below the synced size (an open
// with O_TRUNC, or Truncate) followed by unsynced writes is not durable
// before the file is synced. A crash keeps the synced file whole, or the
// cut: the current content (KeepRandom, KeepRandomSectors), or the
// current size holding the synced bytes up to the cut and zeros or
// garbage after it (KeepZeroedTail, KeepGarbageTail). Never synced bytes
// past the cut under the new size, and after the sync, the new content.
func TestCrashCutBeforeSync(t *testing.T) {
	const old = "old synced content, long enough to cut"
	tests := []struct {
		name  string
		cut   func(t *testing.T, m *MemFS) File
		cutTo int
	}{
		{"O_TRUNC", func(t *testing.T, m *MemFS) File {
			f, err := m.OpenFile("/f", os.O_RDWR|os.O_TRUNC, 0)
			require.NoError(t, err)
			return f
		}, 0},
		{"Truncate", func(t *testing.T, m *MemFS) File {
			f, err := m.OpenFile("/f", os.O_RDWR, 0)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(10))
			return f
		}, 10},
		{"Truncate, grow, Truncate", func(t *testing.T, m *MemFS) File {
			f, err := m.OpenFile("/f", os.O_RDWR, 0)
			require.NoError(t, err)
			require.NoError(t, f.Truncate(20))
			require.NoError(t, f.Truncate(6))
			require.NoError(t, f.Truncate(15))
			return f
		}, 6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemFS()
			durableFile(t, m, "/f", old)
			f := tt.cut(t, m)
			_, err := f.WriteAt([]byte("NEW"), int64(tt.cutTo))
			require.NoError(t, err)
			current, _ := content(t, m, "/f")
			require.NotEqual(t, old[:len(current)], current)
			for _, mode := range CrashModes {
				outcomes := map[string]int{}
				for seed := range uint64(64) {
					got, ok := content(t, m.CrashClone(mode, seed), "/f")
					require.True(t, ok)
					switch {
					case got == old:
						outcomes["synced"]++
						continue
					case mode == KeepSynced:
						require.Fail(t, "keep-synced keeps the synced file", "seed %d: %q", seed, got)
					case mode == KeepZeroedTail || mode == KeepGarbageTail:
						require.Len(t, got, len(current), "%s seed %d: the new size", mode, seed)
						require.Equal(t, old[:tt.cutTo], got[:tt.cutTo], "%s seed %d: the synced bytes up to the cut", mode, seed)
						rest := got[tt.cutTo:]
						require.NotEqual(t, old[tt.cutTo:len(current)], rest, "%s seed %d: synced bytes past the cut under the new size", mode, seed)
						if mode == KeepZeroedTail {
							require.Equal(t, strings.Repeat("\x00", len(rest)), rest, "seed %d", seed)
						} else {
							require.NotEqual(t, current[tt.cutTo:], rest, "seed %d: garbage, not the new data", seed)
						}
					default:
						require.Equal(t, current, got, "%s seed %d: the cut file whole", mode, seed)
					}
					outcomes["cut"]++
				}
				switch mode {
				case KeepSynced:
					assert.Equal(t, map[string]int{"synced": 64}, outcomes, "%s", mode)
				case KeepAll:
					assert.Equal(t, map[string]int{"cut": 64}, outcomes, "%s", mode)
				default:
					assert.Len(t, outcomes, 2, "%s: both the synced file and the cut occur: %v", mode, outcomes)
				}
			}

			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())
			for _, mode := range CrashModes {
				got, _ := content(t, m.CrashClone(mode, 1), "/f")
				assert.Equal(t, current, got, "%s: synced", mode)
			}
		})
	}
}

// TestMemFSSyncKeepsExactlyTheContent: a sync copies only what changed
// since the last one; after random writes (inside and past the synced
// size), truncations and syncs, a KeepSynced clone holds exactly the
// content at the last sync. Now and then the work goes on in a KeepAll
// crash clone (whose file shares one array for its content and its synced
// content until a write): what the clone's writes change is seen neither
// in the filesystem it was cloned from nor in the clone's synced content.
func TestMemFSSyncKeepsExactlyTheContent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for round := range 200 {
		m := NewMemFS()
		f, err := m.OpenFile("/f", os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		require.NoError(t, m.SyncDir("/"))
		var model, atSync []byte
		type left struct {
			fs           *MemFS
			data, synced []byte
		}
		var before []left // the filesystems cloned from, and their content then
		for range 40 {
			switch rng.IntN(7) {
			case 6:
				require.NoError(t, f.Close())
				before = append(before, left{m, append([]byte(nil), model...), append([]byte(nil), atSync...)})
				m = m.CrashClone(KeepAll, 1)
				f, err = m.OpenFile("/f", os.O_RDWR, 0)
				require.NoError(t, err)
				atSync = append([]byte(nil), model...)
			case 0, 1, 2:
				off := rng.IntN(len(model) + 64)
				p := make([]byte, 1+rng.IntN(100))
				for i := range p {
					p[i] = byte(1 + rng.IntN(255))
				}
				_, err := f.WriteAt(p, int64(off))
				require.NoError(t, err)
				if end := off + len(p); end > len(model) {
					model = append(model, make([]byte, end-len(model))...)
				}
				copy(model[off:], p)
			case 3:
				size := rng.IntN(len(model) + 64)
				require.NoError(t, f.Truncate(int64(size)))
				if size <= len(model) {
					model = model[:size]
				} else {
					model = append(model, make([]byte, size-len(model))...)
				}
			default:
				require.NoError(t, f.Sync())
				atSync = append([]byte(nil), model...)
			}
		}
		c := m.CrashClone(KeepSynced, 1)
		got, err := ReadFile(c, "/f")
		require.NoError(t, err)
		if !assert.Equal(t, atSync, got, "round %d", round) {
			return
		}
		for i, b := range before {
			got, err := ReadFile(b.fs, "/f")
			require.NoError(t, err)
			assert.Equal(t, string(b.data), string(got), "round %d, filesystem %d cloned from", round, i)
			got, err = ReadFile(b.fs.CrashClone(KeepSynced, 1), "/f")
			require.NoError(t, err)
			assert.Equal(t, string(b.synced), string(got), "round %d, filesystem %d cloned from: synced", round, i)
		}
	}
}
