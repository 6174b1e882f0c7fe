//go:build unix

package vfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestOSOpenFileDescriptor: files are opened close-on-exec and blocking
// (not registered with the runtime's poller), with the permission asked
// for, and a failed open is a *fs.PathError naming the file.
func TestOSOpenFileDescriptor(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "f")
	f, err := Default.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	require.NoError(t, err)
	defer f.Close()
	fd := f.(osFile).File.Fd()
	flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFD, 0)
	require.Zero(t, errno)
	assert.NotZero(t, flags&syscall.FD_CLOEXEC, "close-on-exec")
	fl, _, errno := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	require.Zero(t, errno)
	assert.Zero(t, fl&syscall.O_NONBLOCK, "blocking")
	info, err := os.Stat(name)
	require.NoError(t, err)
	assert.Equal(t, fs.FileMode(0o600), info.Mode().Perm())

	_, err = Default.OpenFile(filepath.Join(dir, "missing"), os.O_RDONLY, 0)
	var pe *fs.PathError
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, "open", pe.Op)
	assert.Equal(t, filepath.Join(dir, "missing"), pe.Path)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestLockReleasedWhileDescriptionShared: a lock closed while another
// descriptor shares its open file description (a child process between
// its fork and its exec; here a dup) is free again at once.
func TestLockReleasedWhileDescriptionShared(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	lk, err := Default.Lock(name, 0o644)
	require.NoError(t, err)
	lf, ok := lk.(lockedFile)
	require.True(t, ok, "a lock is a lockedFile, got %T", lk)
	dup, err := syscall.Dup(int(lf.f.Fd()))
	require.NoError(t, err)
	defer syscall.Close(dup)
	require.NoError(t, lk.Close())
	again, err := Default.Lock(name, 0o644)
	require.NoError(t, err, "the shared description still held the lock")
	assert.NoError(t, again.Close())
}
