package vfs

import (
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writeSynced creates name holding synced data, without syncing its
// directory.
func writeSynced(t *testing.T, m *MemFS, name string) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// TestMemFSOrphans: Orphans lists what a durable entry names in a
// directory the durable entries do not reach, and the files holding
// synced data under a name that is not durable, and nothing else; a
// crash clone shows none of it.
func TestMemFSOrphans(t *testing.T) {
	mkdir := func(t *testing.T, m *MemFS, dir string, syncParent bool) {
		t.Helper()
		require.NoError(t, m.MkdirAll(dir, 0o755))
		if syncParent {
			require.NoError(t, m.SyncDir(dirOf(dir)))
		}
	}
	tests := []struct {
		name string
		ops  func(t *testing.T, m *MemFS)
		want []string
	}{
		{"a durable tree", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/a", true)
			mkdir(t, m, "/a/b", true)
			durableFile(t, m, "/a/b/f", "data")
		}, nil},
		{"a file made durable in a directory whose entry is not", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/a", false)
			durableFile(t, m, "/a/f", "data")
		}, []string{"/a/f"}},
		{"a tree under a directory whose entry is not durable", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/a", false)
			mkdir(t, m, "/a/b", true)
			durableFile(t, m, "/a/b/f", "data")
		}, []string{"/a/b", "/a/b/f"}},
		{"a rename into a directory whose entry is not durable", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/s", true)
			durableFile(t, m, "/s/f", "data")
			mkdir(t, m, "/t", false)
			require.NoError(t, m.Rename("/s/f", "/t/f"))
			require.NoError(t, m.SyncDir("/s"))
		}, []string{"/t/f"}},
		{"that rename with the directory's entry durable", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/s", true)
			durableFile(t, m, "/s/f", "data")
			mkdir(t, m, "/t", true)
			require.NoError(t, m.Rename("/s/f", "/t/f"))
			require.NoError(t, m.SyncDir("/s"))
		}, nil},
		{"a directory's removal durable before its entry's", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/d", true)
			durableFile(t, m, "/d/f", "data")
			require.NoError(t, m.Remove("/d/f"))
			require.NoError(t, m.Remove("/d"))
			require.NoError(t, m.SyncDir("/"))
		}, []string{"/d/f"}},
		{"a directory's entries' removal durable first", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/d", true)
			durableFile(t, m, "/d/f", "data")
			require.NoError(t, m.Remove("/d/f"))
			require.NoError(t, m.SyncDir("/d"))
			require.NoError(t, m.Remove("/d"))
			require.NoError(t, m.SyncDir("/"))
		}, nil},
		{"removals not durable yet", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/d", true)
			durableFile(t, m, "/d/f", "data")
			require.NoError(t, m.Remove("/d/f"))
			require.NoError(t, m.Remove("/d"))
		}, nil},
		{"a synced file whose entry is not durable", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/a", true)
			writeSynced(t, m, "/a/f")
		}, []string{"/a/f"}},
		{"a durable file renamed, its old entry still durable", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/a", true)
			durableFile(t, m, "/a/f", "data")
			require.NoError(t, m.Rename("/a/f", "/a/g"))
		}, nil},
		{"a file whose entry is not durable and holds no synced data", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/a", true)
			f, err := m.OpenFile("/a/f", os.O_RDWR|os.O_CREATE, 0o644)
			require.NoError(t, err)
			_, err = f.Write([]byte("data"))
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}, nil},
		{"a synced file removed before its entry became durable", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/a", true)
			writeSynced(t, m, "/a/f")
			require.NoError(t, m.Remove("/a/f"))
		}, nil},
		{"a synced file durably removed", func(t *testing.T, m *MemFS) {
			mkdir(t, m, "/a", true)
			durableFile(t, m, "/a/f", "data")
			require.NoError(t, m.Remove("/a/f"))
			require.NoError(t, m.SyncDir("/a"))
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemFS()
			tt.ops(t, m)
			got := m.Orphans()
			assert.Equal(t, tt.want, got)
			c := m.CrashClone(KeepSynced, 0)
			for _, p := range got {
				_, err := c.Stat(p)
				assert.ErrorIs(t, err, fs.ErrNotExist, "a crash clone does not show orphan %s", p)
			}
			assert.Empty(t, c.Orphans(), "a crash clone's entries are all durable")
		})
	}
}
