package seam

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// newLocal returns the local files of a session at /s in a new MemFS,
// its directories made and durable, as a session's creation leaves them.
func newLocal(t *testing.T) (*vfs.MemFS, *Local) {
	t.Helper()
	m := vfs.NewMemFS()
	require.NoError(t, durable.MkdirAll(m, "/s/"+layout.ChunksDir, 0o700))
	require.NoError(t, durable.MkdirAll(m, "/s/"+layout.BlobsDir, 0o700))
	return m, &Local{FS: m, Dir: "/s", Perm: 0o600, DirPerm: 0o700, MaxChunk: 1 << 20, Log: slog.New(slog.DiscardHandler)}
}

// fileSize is the size of path in fsys, or -1 when it is absent.
func fileSize(t *testing.T, fsys vfs.FS, path string) int64 {
	t.Helper()
	info, err := fsys.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return -1
	}
	require.NoError(t, err)
	return info.Size()
}

// TestChunkSyncDurable: a new chunk's name is durable when CreateChunk
// returns, and the bytes written are durable once Sync returns, not
// before.
func TestChunkSyncDurable(t *testing.T) {
	m, l := newLocal(t)
	c, err := l.CreateChunk(1)
	require.NoError(t, err)
	assert.Equal(t, int64(0), fileSize(t, m.CrashClone(vfs.KeepSynced, 0), l.ChunkPath(1)), "the new chunk's name survives")

	first := []byte(`{"a":1}` + "\n")
	require.NoError(t, c.WriteAt(first, 0))
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	b, err := vfs.ReadFile(crashed, l.ChunkPath(1))
	require.NoError(t, err)
	assert.NotContains(t, string(b), `"a"`, "not durable before Sync")

	require.NoError(t, c.Sync())
	b, err = vfs.ReadFile(m.CrashClone(vfs.KeepSynced, 0), l.ChunkPath(1))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(b), len(first))
	assert.Equal(t, first, b[:len(first)])
	assert.Zero(t, strings.Trim(string(b[len(first):]), "\x00"), "free space is zeros")
	require.NoError(t, c.Close())
}

// TestChunkPreallocation: a small write grows the file ahead of the data,
// within the chunk's maximum size; a large one extends it by itself; Trim
// cuts the free space off; OpenChunk goes on at the data's end.
func TestChunkPreallocation(t *testing.T) {
	m, l := newLocal(t)
	c, err := l.CreateChunk(1)
	require.NoError(t, err)
	small := []byte(strings.Repeat("s", 100) + "\n")
	require.NoError(t, c.WriteAt(small, 0))
	size := fileSize(t, m, l.ChunkPath(1))
	assert.Greater(t, size, int64(len(small)), "free space follows the data")
	assert.LessOrEqual(t, size, l.MaxChunk)

	large := []byte(strings.Repeat("l", PreallocMax) + "\n")
	end := int64(len(small) + len(large))
	require.NoError(t, c.WriteAt(large, int64(len(small))))
	assert.Equal(t, end, fileSize(t, m, l.ChunkPath(1)), "a large write extends the file by itself")

	require.NoError(t, c.WriteAt(small, end))
	end += int64(len(small))
	require.Greater(t, fileSize(t, m, l.ChunkPath(1)), end)
	c.Trim(end)
	assert.Equal(t, end, fileSize(t, m, l.ChunkPath(1)))
	require.NoError(t, c.Close())

	c, err = l.OpenChunk(1, end)
	require.NoError(t, err)
	require.NoError(t, c.WriteAt(small, end))
	b, err := vfs.ReadFile(m, l.ChunkPath(1))
	require.NoError(t, err)
	assert.Equal(t, string(small)+string(large)+string(small)+string(small), strings.TrimRight(string(b), "\x00"))
	require.NoError(t, c.Close())
}

// TestChunkReserve: Reserve, the journaled write's room, leaves free space
// of less than ReserveStep after the data, writes zeros where Fill then
// writes the data, and does not shrink free space a WriteAt left; a
// failed reserve cuts the file back to the data's end.
func TestChunkReserve(t *testing.T) {
	m, l := newLocal(t)
	c, err := l.CreateChunk(1)
	require.NoError(t, err)
	rec := []byte(strings.Repeat("r", 299) + "\n")
	var end int64
	var want strings.Builder
	for range 50 {
		require.NoError(t, c.Reserve(end, len(rec)))
		size := fileSize(t, m, l.ChunkPath(1))
		assert.GreaterOrEqual(t, size, end+int64(len(rec)), "room for the record")
		assert.Less(t, size, end+int64(len(rec))+ReserveStep, "less than a step of free space")
		assert.Zero(t, size%ReserveStep, "the step's multiple")
		require.NoError(t, c.Fill(rec, end))
		end += int64(len(rec))
		want.Write(rec)
	}
	b, err := vfs.ReadFile(m, l.ChunkPath(1))
	require.NoError(t, err)
	assert.Equal(t, want.String(), strings.TrimRight(string(b), "\x00"))
	assert.Zero(t, strings.Trim(string(b[end:]), "\x00"), "free space is zeros")

	// A WriteAt's larger free space stays.
	c.Trim(end)
	require.NoError(t, c.WriteAt(rec, end))
	end += int64(len(rec))
	before := fileSize(t, m, l.ChunkPath(1))
	require.Greater(t, before-end, int64(ReserveStep), "WriteAt preallocates more than a step")
	require.NoError(t, c.Reserve(end, len(rec)))
	assert.Equal(t, before, fileSize(t, m, l.ChunkPath(1)))
	c.Trim(end)

	boom := errors.New("injected")
	m.SetFault(func(op vfs.Op, _ string) error {
		if op == vfs.OpWrite {
			return boom
		}
		return nil
	})
	assert.ErrorIs(t, c.Reserve(end, len(rec)), boom)
	m.SetFault(nil)
	assert.Equal(t, end, fileSize(t, m, l.ChunkPath(1)), "cut back to the data's end")
	require.NoError(t, c.Close())
}

// TestChunkWriteFailure: a failed write cuts the file back to where the
// data ended; when the cut fails too, the state is unknown.
func TestChunkWriteFailure(t *testing.T) {
	boom := errors.New("injected")
	for _, failCut := range []bool{false, true} {
		m, l := newLocal(t)
		c, err := l.CreateChunk(1)
		require.NoError(t, err)
		first := []byte("first\n")
		require.NoError(t, c.WriteAt(first, 0))
		c.Trim(int64(len(first)))
		m.SetFault(func(op vfs.Op, _ string) error {
			if op == vfs.OpWrite || failCut && op == vfs.OpTruncate {
				return boom
			}
			return nil
		})
		err = c.WriteAt([]byte("second\n"), int64(len(first)))
		assert.ErrorIs(t, err, boom)
		assert.Equal(t, failCut, errors.Is(err, durable.ErrUnsynced), "cut failed: %v", failCut)
		m.SetFault(nil)
		if !failCut {
			assert.Equal(t, int64(len(first)), fileSize(t, m, l.ChunkPath(1)), "cut back to the data's end")
		}
		require.NoError(t, c.Close())
	}
}

// TestCreateChunkSyncFailure: a failed sync of the chunks directory
// leaves the new chunk's name in doubt, and says so.
func TestCreateChunkSyncFailure(t *testing.T) {
	m, l := newLocal(t)
	boom := errors.New("injected")
	m.SetFault(func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncDir {
			return boom
		}
		return nil
	})
	_, err := l.CreateChunk(1)
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, err, durable.ErrUnsynced)
}

// TestSealChunk: the sealed chunk holds the records (not the free space
// after them) and the embedded index lines, durable, and the plain chunk
// is gone; when writing the sealed file fails, the plain chunk stays.
func TestSealChunk(t *testing.T) {
	records := []byte("{\"r\":1}\n{\"r\":2}\n")
	lines := []byte("{\"i\":1}\n")
	write := func(t *testing.T, m *vfs.MemFS, l *Local) {
		c, err := l.CreateChunk(1)
		require.NoError(t, err)
		require.NoError(t, c.WriteAt(records, 0))
		require.NoError(t, c.Sync())
		require.NoError(t, c.Close())
		require.Greater(t, fileSize(t, m, l.ChunkPath(1)), int64(len(records)), "free space to leave out")
	}
	t.Run("sealed", func(t *testing.T) {
		m, l := newLocal(t)
		write(t, m, l)
		require.NoError(t, l.SealChunk(1, int64(len(records)), lines))
		crashed := m.CrashClone(vfs.KeepSynced, 0)
		assert.Equal(t, int64(-1), fileSize(t, crashed, l.ChunkPath(1)))
		r, err := zchunk.Open(crashed, l.ChunkPath(1)+layout.SealedExt)
		require.NoError(t, err)
		defer r.Close()
		assert.Equal(t, int64(len(records)), r.Size())
		got, err := io.ReadAll(io.NewSectionReader(r, 0, r.Size()))
		require.NoError(t, err)
		assert.Equal(t, records, got)
		meta, err := r.Meta()
		require.NoError(t, err)
		assert.Equal(t, lines, meta)
	})
	t.Run("failed", func(t *testing.T) {
		m, l := newLocal(t)
		write(t, m, l)
		boom := errors.New("injected")
		m.SetFault(func(op vfs.Op, path string) error {
			if op == vfs.OpRename {
				return boom
			}
			return nil
		})
		assert.ErrorIs(t, l.SealChunk(1, int64(len(records)), lines), boom)
		m.SetFault(nil)
		b, err := vfs.ReadFile(m.CrashClone(vfs.KeepSynced, 0), l.ChunkPath(1))
		require.NoError(t, err)
		assert.Equal(t, string(records), strings.TrimRight(string(b), "\x00"), "the plain chunk stays whole")
	})
}

// TestPutReplacesWhole: session.json, HEAD and the lanes file are
// replaced whole: a power cut during a replace leaves the old content,
// and the new one survives once the call returns.
func TestPutReplacesWhole(t *testing.T) {
	id1, id2 := uuid.New(), uuid.New()
	for name, c := range map[string]struct {
		file     string
		put      func(l *Local, n int) error
		contents func(n int) string
	}{
		"meta":  {layout.MetaFile, func(l *Local, n int) error { return l.PutMeta([]byte(meta(n))) }, meta},
		"lanes": {layout.LanesFile, func(l *Local, n int) error { return l.PutLanes([]byte(meta(n))) }, meta},
		"head": {headfile.Name, func(l *Local, n int) error { return l.PutHead([]uuid.UUID{id1, id2}[n-1]) }, func(n int) string {
			return []uuid.UUID{id1, id2}[n-1].String()
		}},
	} {
		t.Run(name, func(t *testing.T) {
			m, l := newLocal(t)
			require.NoError(t, c.put(l, 1))
			m.SetFault(func(op vfs.Op, _ string) error {
				if op == vfs.OpWrite {
					return vfs.ErrPowerLoss
				}
				return nil
			})
			require.Error(t, c.put(l, 2))
			crashed := m.CrashClone(vfs.KeepAll, 0)
			b, err := vfs.ReadFile(crashed, filepath.Join("/s", c.file))
			require.NoError(t, err)
			assert.Contains(t, string(b), c.contents(1), "the old content, whole")

			m2, l2 := newLocal(t)
			require.NoError(t, c.put(l2, 1))
			require.NoError(t, c.put(l2, 2))
			b, err = vfs.ReadFile(m2.CrashClone(vfs.KeepSynced, 0), filepath.Join("/s", c.file))
			require.NoError(t, err)
			assert.Contains(t, string(b), c.contents(2), "the new content, durable")
			if name == "head" {
				got, ok, err := headfile.Read(m2, filepath.Join("/s", c.file))
				require.NoError(t, err)
				require.True(t, ok)
				assert.Equal(t, id2, got)
			}
		})
	}
}

// meta is the n-th content of a replaced file in TestPutReplacesWhole.
func meta(n int) string { return `{"content":` + strings.Repeat("1", n) + `}` }
