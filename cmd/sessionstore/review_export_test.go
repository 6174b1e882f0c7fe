package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// TestReviewExportFailsMidway: a tree export that fails after it has written
// part of its output (a blob of the store damaged) exits with exitFail,
// says why on stderr, prints nothing on stdout, and leaves the -o file as
// it was, with no temporary file beside it.
func TestReviewExportFailsMidway(t *testing.T) {
	f := newFixture(t)
	hexs := strings.TrimPrefix(f.blob.Digest, "sha256:")
	var blob string
	require.NoError(t, filepath.Walk(f.root, func(path string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && filepath.Base(path) == hexs[2:]+".zst" {
			blob = path
		}
		return err
	}))
	require.NotEmpty(t, blob, "the blob's file in the store")
	require.NoError(t, os.Chmod(blob, 0o600))
	require.NoError(t, os.WriteFile(blob, []byte("damaged"), 0o600))

	short := sessionstore.ShortID(f.session.ID)
	for _, blobs := range []string{"inline", filepath.Join(t.TempDir(), "blobs")} {
		t.Run(filepath.Base(blobs), func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "out")
			require.NoError(t, os.WriteFile(out, []byte("old"), 0o644))
			status, stdout, stderr := runCmd("export", "-blobs", blobs, "-o", out, f.root, short)
			assert.Equal(t, exitFail, status, "stderr: %s", stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, f.session.ID.String())
			b, err := os.ReadFile(out)
			require.NoError(t, err)
			assert.Equal(t, "old", string(b))
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			assert.Len(t, entries, 1, "no temporary file left")
		})
	}
}
