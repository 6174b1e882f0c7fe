//go:build unix

package importer

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A FIFO or other file that is not regular, named *.jsonl in a directory,
// is not listed (opening or reading it could block); a link to a regular
// file is.
func TestFilesOnlyRegular(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.jsonl"), []byte("{}\n"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "link.jsonl")))
	require.NoError(t, os.Symlink(filepath.Join(dir, "fifo.jsonl"), filepath.Join(dir, "linkfifo.jsonl")))
	got, err := Files([]string{dir})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(dir, "a.jsonl"), filepath.Join(dir, "link.jsonl")}, got)
}

// A path given that is a link to a directory is walked as the directory
// (~/.claude/projects kept elsewhere and linked): links inside it are
// not followed into directories.
func TestFilesWalksALinkGiven(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	require.NoError(t, os.MkdirAll(filepath.Join(real, "sub"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(real, "a.jsonl"), []byte("{}\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(real, "sub", "b.jsonl"), []byte("{}\n"), 0o644))
	require.NoError(t, os.Symlink(filepath.Join(real, "sub"), filepath.Join(real, "linkdir")))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	got, err := Files([]string{link})
	require.NoError(t, err)
	assert.Equal(t, []string{filepath.Join(link, "a.jsonl"), filepath.Join(link, "sub", "b.jsonl")}, got)
}
