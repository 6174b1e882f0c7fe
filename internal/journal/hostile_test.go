package journal

import (
	"encoding/binary"
	"io"
	"io/fs"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// hostileFrameHeaders writes, every stride bytes from off to the end of
// d, a frame header that is valid (its hcrc matches) for a record of a
// group later than lsn, whose body reaches the end of the file and whose
// body checksum is wrong: each one passes the scan's fixed-size check and
// makes it checksum the rest of the file.
func hostileFrameHeaders(d []byte, salt uint32, off, stride int64, lsn uint64) int {
	le := binary.LittleEndian
	n := 0
	for ; off+frameHeader+bodyFixed+align <= int64(len(d)); off += stride {
		f := d[off:]
		body := (int64(len(d)) - off - frameHeader) &^ (align - 1)
		le.PutUint32(f[4:], 0)
		le.PutUint32(f[28:], uint32(body))
		sealFrame(f, salt, lsn+uint64(n), lsn+uint64(n), 1)
		n++
	}
	return n
}

// TestReadHostileFrameHeadersBounded: a journal file full of valid frame
// headers of later groups whose bodies all fail their checksum, each
// claiming the rest of the file, must not make Read checksum the file
// once per header (time quadratic in the file's size: hours for a file of
// DefaultSize). Genuine later frames do not overlap, so their bodies
// total at most the record area: past that the file is corrupt.
func TestReadHostileFrameHeadersBounded(t *testing.T) {
	m, w := newMem(t, 64<<10)
	makeFile(t, m, memRoot, "f")
	commitT(t, w, nil, Record{Op: OpWrite, Path: "f", Data: []byte("x")})
	b, err := vfs.ReadFile(m, w.Path())
	require.NoError(t, err)
	start := int64(recordsStart + 1024)
	require.Positive(t, hostileFrameHeaders(b, w.salt, start, frameHeader, 100))
	_, err = parse(w.Path(), b)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, ErrLostRecord)
	assert.Equal(t, w.Path(), ce.Path)
	assert.Equal(t, int64(recordsStart+frameSize(1, 1)), ce.Offset, "where the log ended")
	require.NoError(t, w.Close())
}

// TestCreateFailureLeavesNothing: a Create that fails while it
// preallocates (a full disk) or syncs removes the journal file it began
// and its lock file: a retry on a full disk must not leak a partial
// journal each time, nor leave a file without a header for a replay to
// find.
func TestCreateFailureLeavesNothing(t *testing.T) {
	tests := []struct {
		name string
		op   vfs.Op
		nth  int
	}{
		{"second chunk of zeros", vfs.OpWrite, 2},
		{"header", vfs.OpWrite, 4},
		{"sync", vfs.OpSync, 1},
		{"directory sync", vfs.OpSyncDir, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := vfs.NewMemFS()
			require.NoError(t, m.MkdirAll(memRoot, 0o755))
			f := vfs.FailNth(tt.nth, syscall.ENOSPC, tt.op)
			m.SetFault(f.Hook)
			_, err := Create(m, memRoot, &Options{Size: 3 << 20})
			require.ErrorIs(t, err, syscall.ENOSPC)
			require.True(t, f.Fired())
			m.SetFault(nil)
			names, err := m.ReadDir(filepath.Join(memRoot, Dir))
			require.NoError(t, err)
			assert.Empty(t, names, "what the failed Create began")
		})
	}
}

// removeHookFS runs before, once, when the lock file named is about to
// be removed: what another process does at that moment.
type removeHookFS struct {
	vfs.FS
	name   string
	before func()
	once   sync.Once
}

func (r *removeHookFS) Remove(name string) error {
	if name == r.name {
		r.once.Do(r.before)
	}
	return r.FS.Remove(name)
}

// TestCloseRacingRemove: another process that finds the owner dead
// while Close removes its files (Alive false, then Remove) must not make
// a clean Close fail; Close removes its lock file while it still holds
// the lock, so the other process sees it alive or finds nothing.
func TestCloseRacingRemove(t *testing.T) {
	m := vfs.NewMemFS()
	require.NoError(t, m.MkdirAll(memRoot, 0o755))
	hook := &removeHookFS{FS: m}
	w, err := Create(hook, memRoot, &Options{Size: 64 << 10, small: true})
	require.NoError(t, err)
	makeFile(t, m, memRoot, "f")
	commitT(t, w, nil, Record{Op: OpWrite, Path: "f", Data: []byte("x")})
	var otherErr error
	hook.name = LockPath(memRoot, w.Owner())
	hook.before = func() { otherErr = Remove(m, memRoot, w.Owner()) }
	assert.NoError(t, w.Close())
	if otherErr != nil {
		assert.ErrorIs(t, otherErr, ErrOwnerAlive, "the other process")
	}
	names, err := m.ReadDir(filepath.Join(memRoot, Dir))
	require.NoError(t, err)
	assert.Empty(t, names)
}

// unlinkAfterLockFS removes the lock file's name right after Lock took
// it: the state of a process that opened the lock file before its
// owner's Close unlinked it, and locked it after Close released it.
type unlinkAfterLockFS struct{ vfs.FS }

func (u unlinkAfterLockFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	l, err := u.FS.Lock(name, perm)
	if err == nil {
		err = u.FS.Remove(name)
	}
	return l, err
}

// TestRemoveAfterOwnerUnlinkedLock: Remove holding the lock of a file
// whose name its owner's Close removed meanwhile succeeds: there is
// nothing left to remove.
func TestRemoveAfterOwnerUnlinkedLock(t *testing.T) {
	m, w := newMem(t, 64<<10)
	owner := w.Owner()
	require.NoError(t, w.f.Close())
	require.NoError(t, m.Remove(w.Path()))
	require.NoError(t, w.lock.Close())
	assert.NoError(t, Remove(unlinkAfterLockFS{m}, memRoot, owner))
	names, err := m.ReadDir(filepath.Join(memRoot, Dir))
	require.NoError(t, err)
	assert.Empty(t, names)
}
