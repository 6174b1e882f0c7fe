package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestKeptAsideDigests: the scan of kept-aside bytes finds every digest
// that appears, at any position and however the bytes around it are
// damaged, and the leading digits of one cut short.
func TestKeptAsideDigests(t *testing.T) {
	d1 := [32]byte{0xab, 0xcd, 1}
	d2 := [32]byte{0xbe, 0xef, 2}
	h1, h2 := hex.EncodeToString(d1[:]), hex.EncodeToString(d2[:])
	full, partial := map[[32]byte]bool{}, []string(nil)
	b := []byte("garbage\x00\x00" + canonical.DigestPrefix + h1 + `","size":3` + "\n" + `{"digest":"` + canonical.DigestPrefix + strings.ToUpper(h2[:10]) + " " + canonical.DigestPrefix + h2[:17])
	KeptAsideDigests(b, full, &partial)
	assert.Equal(t, map[[32]byte]bool{d1: true}, full)
	assert.Equal(t, []string{h2[:17]}, partial, "an upper-case digit is no digit of a digest; the torn end's digits are kept")
	assert.True(t, KeptAsidePrefix(d2, partial))
	assert.False(t, KeptAsidePrefix(d1, partial))
}

// TestKeptAsideFiles: KeptAside reads the ".broken" files of the session
// and chunks directories, of any size: a digest that straddles the end of
// a read block is found whole, a digest in any other file is not.
func TestKeptAsideFiles(t *testing.T) {
	m := vfs.NewMemFS()
	dA, dB, dC := sha256.Sum256([]byte("a")), sha256.Sum256([]byte("b")), sha256.Sum256([]byte("c"))
	digest := func(d [32]byte) string { return canonical.DigestPrefix + hex.EncodeToString(d[:]) }
	chunks := filepath.Join("/s", layout.ChunksDir)
	require.NoError(t, m.MkdirAll(chunks, 0o700))
	// dA straddles the first 1 MiB block of the scan.
	big := strings.Repeat("x", 1<<20-30) + digest(dA) + strings.Repeat("y", 100)
	writeFile(t, m, filepath.Join(chunks, "00000001.jsonl.broken-7"), []byte(big))
	writeFile(t, m, filepath.Join("/s", "HEAD.broken"), []byte(digest(dB)[:40]))
	writeFile(t, m, filepath.Join(chunks, "00000001.jsonl"), []byte(digest(dC)))
	full := map[[32]byte]bool{}
	partial, err := KeptAside(m, "/s", full)
	require.NoError(t, err)
	assert.Equal(t, map[[32]byte]bool{dA: true}, full)
	assert.True(t, KeptAsidePrefix(dB, partial))
	assert.False(t, KeptAsidePrefix(dC, partial))

	partial, err = KeptAside(m, "/none", map[[32]byte]bool{})
	require.NoError(t, err, "a session without kept-aside files")
	assert.Empty(t, partial)
}

// TestSweep: Sweep keeps the blobs keep names and the temporary files of
// blobs busy names, removes everything else, and the removals survive a
// power cut once it returns.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	var known Dirs
	kept := put(t, m, []byte("kept"), &known)
	orphan := put(t, m, []byte("orphan"), &known)
	busy := sha256.Sum256([]byte("busy"))
	busyTemp := temp(layout.BlobPath("/s", busy))
	staleTemp := temp(layout.BlobPath("/s", orphan))
	for _, p := range []string{busyTemp, staleTemp} {
		writeFile(t, m, p, []byte("partial"))
		require.NoError(t, m.SyncDir(filepath.Dir(filepath.Dir(p))))
	}
	keep, isBusy := func(d [32]byte) bool { return d == kept }, func(d [32]byte) bool { return d == busy }
	dry, err := Sweep(ctx, m, "/s", keep, isBusy, true)
	require.NoError(t, err)
	for _, p := range []string{layout.BlobPath("/s", orphan), staleTemp} {
		_, err := m.Stat(p)
		assert.NoError(t, err, "a dry run removes nothing: %s", p)
	}
	rep, err := Sweep(ctx, m, "/s", keep, isBusy, false)
	require.NoError(t, err)
	assert.Equal(t, rep, dry, "a dry run reports what the sweep removes")
	assert.Equal(t, 1, rep.Kept)
	assert.Equal(t, 2, rep.Removed, "the orphan and the stale temporary file")
	assert.Positive(t, rep.Bytes)
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	for p, want := range map[string]bool{
		layout.BlobPath("/s", kept):   true,
		busyTemp:                      true,
		layout.BlobPath("/s", orphan): false,
		staleTemp:                     false,
	} {
		_, err := crashed.Stat(p)
		assert.Equal(t, want, err == nil, p)
	}

	rep, err = Sweep(ctx, vfs.NewMemFS(), "/s", nil, nil, false)
	require.NoError(t, err, "a session without blobs")
	assert.Equal(t, Report{}, rep)
}

// TestSweepSyncFailure: a failed sync of a directory Sweep removed from
// leaves the state unknown, and says so.
func TestSweepSyncFailure(t *testing.T) {
	m := vfs.NewMemFS()
	put(t, m, []byte("orphan"), &Dirs{})
	boom := errors.New("injected")
	m.SetFault(func(op vfs.Op, _ string) error {
		if op == vfs.OpSyncDir {
			return boom
		}
		return nil
	})
	rep, err := Sweep(context.Background(), m, "/s", func([32]byte) bool { return false }, func([32]byte) bool { return false }, false)
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, err, durable.ErrUnsynced)
	assert.Equal(t, 1, rep.Removed)
}
