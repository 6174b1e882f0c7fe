package blob

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/synth"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// put stores rec under /s in fsys and returns its digest.
func put(t *testing.T, fsys vfs.FS, rec []byte, known *Dirs) [32]byte {
	t.Helper()
	sessionDir(t, fsys)
	d := sha256.Sum256(rec)
	require.NoError(t, Put(fsys, "/s", d, rec, 0o600, 0o700, known))
	return d
}

// TestPutDurable: when Put returns, the blob survives a power cut that
// keeps only synced data and directory entries, its prefix directories'
// names included, and reads back verified.
func TestPutDurable(t *testing.T) {
	m := vfs.NewMemFS()
	var known Dirs
	rec := []byte(synth.ToolOutput(1, 40<<10))
	d := put(t, m, rec, &known)
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	got, err := Read(crashed, "/s", d, int64(len(rec)))
	require.NoError(t, err)
	assert.Equal(t, rec, got)
	stored, err := vfs.ReadFile(crashed, layout.BlobPath("/s", d))
	require.NoError(t, err)
	assert.Less(t, len(stored), len(rec)/2, "the text is stored compressed")
}

// TestPutRewritesDamaged: a blob file that exists but does not verify
// (left by a crash before its syncs ended) is written again, not reused.
func TestPutRewritesDamaged(t *testing.T) {
	m := vfs.NewMemFS()
	rec := []byte(synth.ToolOutput(2, 20<<10))
	d := sha256.Sum256(rec)
	path := layout.BlobPath("/s", d)
	writeFile(t, m, path, []byte("torn"))
	var known Dirs
	put(t, m, rec, &known)
	got, err := Read(m.CrashClone(vfs.KeepSynced, 0), "/s", d, int64(len(rec)))
	require.NoError(t, err)
	assert.Equal(t, rec, got)
}

// TestPutSyncFailure: a failed sync of the blob's file or of a directory
// its name depends on is reported as leaving the state unknown.
func TestPutSyncFailure(t *testing.T) {
	boom := errors.New("injected")
	for _, op := range []vfs.Op{vfs.OpSync, vfs.OpSyncDir} {
		t.Run(string(op), func(t *testing.T) {
			m := vfs.NewMemFS()
			m.SetFault(func(o vfs.Op, _ string) error {
				if o == op {
					return boom
				}
				return nil
			})
			rec := []byte("a record")
			err := Put(m, "/s", sha256.Sum256(rec), rec, 0o600, 0o700, &Dirs{})
			assert.ErrorIs(t, err, boom)
			assert.ErrorIs(t, err, durable.ErrUnsynced)
		})
	}
}

// TestReadDamage: a missing blob, a flipped byte, a frame of another
// size, a record whose digest differs and a size out of range are each
// a *corrupt.Error naming the blob's file; nothing is returned as the
// record.
func TestReadDamage(t *testing.T) {
	m := vfs.NewMemFS()
	rec := []byte(synth.ToolOutput(3, 10<<10))
	d := put(t, m, rec, &Dirs{})
	path := layout.BlobPath("/s", d)
	good, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	other := sha256.Sum256([]byte("other"))
	flipped := slices.Clone(good)
	flipped[len(flipped)/2] ^= 0x40
	for name, c := range map[string]struct {
		file []byte // nil: no file
		d    [32]byte
		size int64
		at   string
	}{
		"missing":       {nil, other, 5, layout.BlobPath("/s", other)},
		"flipped":       {flipped, d, int64(len(rec)), path},
		"other size":    {good, d, int64(len(rec)) - 1, path},
		"other digest":  {good, d, int64(len(rec)), ""},
		"size negative": {good, d, -1, path},
		"size too big":  {good, d, MaxRecordSize + 1, path},
	} {
		t.Run(name, func(t *testing.T) {
			fsys := vfs.NewMemFS()
			at := c.at
			if name == "other digest" {
				// The file of another digest holding this record.
				at = layout.BlobPath("/s", other)
				c.d = other
			}
			if c.file != nil {
				writeFile(t, fsys, at, c.file)
			}
			got, err := Read(fsys, "/s", c.d, c.size)
			var ce *corrupt.Error
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, at, ce.Path)
			assert.Nil(t, got)
		})
	}
	got, err := Read(m, "/s", d, int64(len(rec)))
	require.NoError(t, err, "the intact blob reads")
	assert.Equal(t, rec, got)
}

// TestReadTooLarge: a blob file larger than its record can be stored in
// is refused unread, as the file system's refusal.
func TestReadTooLarge(t *testing.T) {
	m := vfs.NewMemFS()
	d := sha256.Sum256([]byte("x"))
	path := layout.BlobPath("/s", d)
	writeFile(t, m, path, make([]byte, MaxFile(1)+1))
	_, err := Read(m, "/s", d, 1)
	assert.ErrorIs(t, err, vfs.ErrTooLarge)
}

func TestTempName(t *testing.T) {
	d := sha256.Sum256([]byte("x"))
	path := layout.BlobPath("", d)
	sub, name := filepath.Base(filepath.Dir(path)), filepath.Base(path)
	got, ok := TempName(sub, filepath.Base(temp(path)))
	require.True(t, ok)
	assert.Equal(t, d, got)
	for _, bad := range []string{name, name + ".tmp", name + ".x.tmp", "stale.tmp", name + ".1", "." + name + ".1.tmp"} {
		_, ok := TempName(sub, bad)
		assert.False(t, ok, bad)
	}
	got, ok = Name(sub, name)
	require.True(t, ok)
	assert.Equal(t, d, got)
	for _, bad := range []string{name + ".tmp", "x" + name[1:], name[:10] + layout.BlobExt} {
		_, ok := Name(sub, bad)
		assert.False(t, ok, bad)
	}
}

// zstdBlocks is zchunk.FrameBlocks, failing t on an error; it also checks the
// frame header's size (6 to 10 bytes with a checksum and a content size).
func zstdBlocks(t *testing.T, frame []byte) (headerSize int, types []int) {
	t.Helper()
	headerSize, types, err := zchunk.FrameBlocks(frame)
	require.NoError(t, err)
	require.True(t, headerSize >= 6 && headerSize <= 10, "frame header of %d bytes", headerSize)
	return headerSize, types
}

// TestBlobIncompressible: a blob of random bytes is a frame of raw blocks
// holding the record as it is: the record plus the frame header, 3 bytes
// per 128 KiB block and the 4-byte checksum, nothing more (37 bytes for
// 1 MiB). Records that compress a little or not at all, base64 and a mix
// of random bytes and text, stay within the same bound, and every blob
// reads back.
func TestBlobIncompressible(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	bound := func(n, headerSize int) int { return n + headerSize + 3*((n+128<<10-1)/(128<<10)) + 4 }
	fsys := vfs.NewMemFS()
	var known Dirs
	store := func(rec []byte) []byte {
		t.Helper()
		d := put(t, fsys, rec, &known)
		got, err := Read(fsys, "/s", d, int64(len(rec)))
		require.NoError(t, err)
		require.Equal(t, rec, got)
		frame, err := vfs.ReadFile(fsys, layout.BlobPath("/s", d))
		require.NoError(t, err)
		return frame
	}
	for _, n := range []int{200, 1000, 16<<10 + 1, 100 << 10, 128 << 10, 1 << 20, 1<<20 + 1, 9 << 20} {
		t.Run(fmt.Sprintf("random-%d", n), func(t *testing.T) {
			frame := store(random(n))
			headerSize, types := zstdBlocks(t, frame)
			assert.Equal(t, bound(n, headerSize), len(frame))
			for i, typ := range types {
				assert.Zero(t, typ, "block %d is not raw", i)
			}
			if n == 1<<20 {
				assert.Equal(t, n+37, len(frame))
			}
		})
	}
	text := []byte(synth.ToolOutput(3, 300<<10))
	mixed := slices.Concat(random(200<<10), text, random(5000), text[:70<<10])
	b64 := `{"output":"` + base64.StdEncoding.EncodeToString(random(450<<10)) + `"}`
	for name, rec := range map[string][]byte{
		"base64": []byte(b64),
		"mixed":  mixed,
	} {
		t.Run(name, func(t *testing.T) {
			frame := store(rec)
			headerSize, types := zstdBlocks(t, frame)
			assert.LessOrEqual(t, len(frame), bound(len(rec), headerSize))
			if name == "mixed" {
				// Each block is raw or compressed, whichever is shorter.
				assert.Contains(t, types, 0)
				assert.Contains(t, types, 2)
			}
			if name == "base64" {
				assert.Less(t, float64(len(frame))/float64(len(rec)), 0.8, "base64's literals are entropy coded")
			}
		})
	}
}

// writeFile writes data to path in fsys, durably, its directory made.
func writeFile(t *testing.T, fsys vfs.FS, path string, data []byte) {
	t.Helper()
	require.NoError(t, fsys.MkdirAll(filepath.Dir(path), 0o700))
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, fsys.SyncDir(filepath.Dir(path)))
}

// sessionDir makes /s and /s/blobs in fsys, durable, as a session's
// creation does.
func sessionDir(t *testing.T, fsys vfs.FS) {
	t.Helper()
	require.NoError(t, fsys.MkdirAll("/s/"+layout.BlobsDir, 0o700))
	require.NoError(t, fsys.SyncDir("/"))
	require.NoError(t, fsys.SyncDir("/s"))
}
