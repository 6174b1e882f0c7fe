package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// format1Session is the session of the library's testdata/format1 root.
var format1Session = uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")

// copyFormat1 copies the library's format 1 fixture root into a new
// directory and returns it.
func copyFormat1(t *testing.T) string {
	t.Helper()
	src := filepath.Join("..", "..", "testdata", "format1")
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o700)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o600)
	})
	require.NoError(t, err)
	return dst
}

// TestUpgradeCommand upgrades the format 1 fixture's session by its short
// id: it reports the upgrade, session.json says format 3, the active path
// prints as before, and a second run says there is nothing to do.
func TestUpgradeCommand(t *testing.T) {
	root := copyFormat1(t)
	id := sessionstore.ShortID(format1Session)
	status, before, stderr := runCmd("path", root, id)
	require.Equal(t, exitOK, status, stderr)

	status, stdout, stderr := runCmd("upgrade", root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, format1Session.String()+": upgraded from format 1 to format 3\n", stdout)
	assert.Equal(t, 3, sessionFormat(root, format1Session))

	status, after, stderr := runCmd("path", root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, before, after, "the active path is unchanged")
	status, stdout, stderr = runCmd("verify", root, id)
	assert.Equal(t, exitOK, status, "%s%s", stdout, stderr)

	status, stdout, stderr = runCmd("upgrade", root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, format1Session.String()+": format 3 already, nothing to do\n", stdout)
}

// TestUpgradeAllAndCompression upgrades every session of a root holding a
// format 1 session and a format 3 one, converting the root to zstd in the
// same run, then back to none: the report names each session, the root
// opens in the new mode only, and the sessions read as before.
func TestUpgradeAllAndCompression(t *testing.T) {
	ctx := context.Background()
	root := copyFormat1(t)
	s, err := sessionstore.Open(root, &sessionstore.Options{Compression: sessionstore.CompressionNone, ChunkSize: 1024})
	require.NoError(t, err)
	meta, err := s.Create(ctx, sessionstore.Meta{Name: "new"})
	require.NoError(t, err)
	for i := range 20 {
		_, err := s.Append(ctx, meta.ID, sessionstore.UserText(strings.Repeat("words ", 10+i)))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	paths := map[uuid.UUID]string{}
	for _, id := range []uuid.UUID{format1Session, meta.ID} {
		status, out, stderr := runCmd("path", root, id.String())
		require.Equal(t, exitOK, status, stderr)
		paths[id] = out
	}

	status, stdout, stderr := runCmd("upgrade", "-all", "-compression", "zstd", root)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, format1Session.String()+": upgraded from format 1 to format 3\n")
	assert.Contains(t, stdout, meta.ID.String()+": format 3 already, nothing to do\n")
	assert.Contains(t, stdout, "chunks stored with compression zstd\n")
	zst, err := filepath.Glob(filepath.Join(root, "sessions", meta.ID.String(), "chunks", "*.jsonl.zst"))
	require.NoError(t, err)
	assert.NotEmpty(t, zst, "full chunks are sealed")
	_, err = sessionstore.Open(root, &sessionstore.Options{Compression: sessionstore.CompressionNone})
	assert.ErrorIs(t, err, sessionstore.ErrCompressionMismatch)
	for id, want := range paths {
		status, out, stderr := runCmd("path", root, id.String())
		require.Equal(t, exitOK, status, stderr)
		assert.Equal(t, want, out)
	}

	status, stdout, stderr = runCmd("upgrade", root, "-compression", "none")
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, "root "+root+": chunks stored with compression none\n", stdout)
	zst, err = filepath.Glob(filepath.Join(root, "sessions", "*", "chunks", "*.zst"))
	require.NoError(t, err)
	assert.Empty(t, zst)
	s, err = sessionstore.Open(root, &sessionstore.Options{Compression: sessionstore.CompressionNone})
	require.NoError(t, err)
	require.NoError(t, s.Close())
}

// TestUpgradeCommandErrors: bad command lines exit 2; a session held by
// another writer exits 1 and stays format 1.
func TestUpgradeCommandErrors(t *testing.T) {
	root := copyFormat1(t)
	for _, args := range [][]string{
		{"upgrade"},
		{"upgrade", root},
		{"upgrade", "-all", root, format1Session.String()},
		{"upgrade", "-compression", "lz4", root},
		{"upgrade", root, "not-an-id"},
	} {
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, exitUsage, status, "%q: %s", args, stderr)
		assert.Empty(t, stdout, "%q", args)
		assert.Contains(t, stderr, "usage: sessionstore upgrade", "%q", args)
	}

	s, err := sessionstore.Open(root, &sessionstore.Options{Compression: sessionstore.CompressionNone})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Head(context.Background(), format1Session)
	require.NoError(t, err)
	status, _, stderr := runCmd("upgrade", root, format1Session.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "not upgraded, left as it was")
	assert.Contains(t, stderr, "another process holds the session")
	assert.Equal(t, 1, sessionFormat(root, format1Session))
}
