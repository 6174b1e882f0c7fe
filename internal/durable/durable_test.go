package durable

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// cutAt runs op on a MemFS prepared by prep, with the power cut at op's
// k-th mutating operation (never if k is 0), and returns the frozen file
// system and whether the power was cut.
func cutAt(t *testing.T, k int, prep func(*vfs.MemFS), op func(vfs.FS) error) (*vfs.MemFS, bool) {
	t.Helper()
	m := vfs.NewMemFS()
	prep(m)
	n := 0
	m.SetFault(func(o vfs.Op, path string) error {
		if vfs.Mutating(o) {
			if n++; n == k {
				return vfs.ErrPowerLoss
			}
		}
		return nil
	})
	err := op(m)
	m.SetFault(nil)
	cut := m.PowerCut() != nil
	require.Equal(t, cut, err != nil, "crash point %d: the call fails exactly when the power is cut (%v)", k, err)
	m.PowerOff()
	return m, cut
}

func content(t *testing.T, fsys vfs.FS, path string) string {
	t.Helper()
	b, err := vfs.ReadFile(fsys, path)
	if errors.Is(err, fs.ErrNotExist) {
		return "absent"
	}
	require.NoError(t, err)
	return string(b)
}

// TestReplaceFileCrashPoints: after a power cut at any operation of
// ReplaceFile, in every crash mode, the file holds its old content or its
// new one, whole; once it returned nil, the new one.
func TestReplaceFileCrashPoints(t *testing.T) {
	const old, new = "the old content\n", "the new content, longer than the old\n"
	prep := func(m *vfs.MemFS) {
		require.NoError(t, m.MkdirAll("/d", 0o700))
		require.NoError(t, m.SyncDir("/"))
		require.NoError(t, ReplaceFile(m, "/d", "f", []byte(old), 0o600))
	}
	op := func(fsys vfs.FS) error { return ReplaceFile(fsys, "/d", "f", []byte(new), 0o600) }

	m, cut := cutAt(t, 0, prep, op)
	require.False(t, cut)
	assert.Equal(t, new, content(t, m.CrashClone(vfs.KeepSynced, 0), "/d/f"), "durable on return")

	points := 0
	for k := 1; ; k++ {
		m, cut := cutAt(t, k, prep, op)
		if !cut {
			break
		}
		points++
		for _, mode := range vfs.CrashModes {
			for seed := range uint64(8) {
				got := content(t, m.CrashClone(mode, seed), "/d/f")
				assert.Contains(t, []string{old, new}, got, "crash point %d, %s seed %d", k, mode, seed)
			}
		}
	}
	assert.GreaterOrEqual(t, points, 4, "the replace's writes, sync, rename and directory sync are crash points")
}

// TestMkdirAllDurable: once MkdirAll returned nil, every directory it made
// survives a power cut, in every crash mode.
func TestMkdirAllDurable(t *testing.T) {
	prep := func(m *vfs.MemFS) {
		require.NoError(t, m.MkdirAll("/root", 0o700))
		require.NoError(t, m.SyncDir("/"))
	}
	m, cut := cutAt(t, 0, prep, func(fsys vfs.FS) error { return MkdirAll(fsys, "/root/a/b/c", 0o700) })
	require.False(t, cut)
	for _, mode := range vfs.CrashModes {
		c := m.CrashClone(mode, 1)
		for _, d := range []string{"/root/a", "/root/a/b", "/root/a/b/c"} {
			info, err := c.Stat(d)
			if assert.NoError(t, err, "%s after a crash (%s)", d, mode) {
				assert.True(t, info.IsDir())
			}
		}
	}
	m, cut = cutAt(t, 0, prep, func(fsys vfs.FS) error { return MkdirAll(fsys, "/root", 0o700) })
	assert.False(t, cut, "an existing directory is no error")
	_, err := m.CrashClone(vfs.KeepSynced, 0).Stat("/root")
	assert.NoError(t, err)
}

// TestSyncFileAndRemoveFileDurable: what SyncFile synced and what
// RemoveFile removed survive a power cut in every crash mode; a file
// already absent is no error to RemoveFile.
func TestSyncFileAndRemoveFileDurable(t *testing.T) {
	prep := func(m *vfs.MemFS) {
		require.NoError(t, m.MkdirAll("/d", 0o700))
		require.NoError(t, m.SyncDir("/"))
		for _, name := range []string{"/d/f", "/d/g"} {
			f, err := m.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o600)
			require.NoError(t, err)
			require.NoError(t, f.Sync())
			require.NoError(t, f.Close())
		}
		require.NoError(t, m.SyncDir("/d"))
		f, err := m.OpenFile("/d/f", os.O_WRONLY, 0)
		require.NoError(t, err)
		_, err = f.Write([]byte("data")) // not synced
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	m, cut := cutAt(t, 0, prep, func(fsys vfs.FS) error {
		return errors.Join(SyncFile(fsys, "/d/f"), RemoveFile(fsys, "/d/g"), RemoveFile(fsys, "/d/none"))
	})
	require.False(t, cut)
	for _, mode := range vfs.CrashModes {
		c := m.CrashClone(mode, 1)
		assert.Equal(t, "data", content(t, c, "/d/f"), "synced data after a crash (%s)", mode)
		assert.Equal(t, "absent", content(t, c, "/d/g"), "a removal after a crash (%s)", mode)
	}
}
