//go:build unix

package claude

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A FIFO named *.jsonl in a directory, or in place of a subagent's
// .meta.json, is not opened: the import neither blocks on it nor reads
// it.
func TestImportSkipsFIFOs(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, "agent-x", rec("a", "", 0))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "agent-x.meta.json"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o644))
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{dir}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, 1, rep.Files)
	assert.Equal(t, 1, rep.Sessions)
}

// A path given that is a link to a directory is walked as the directory:
// its transcripts are imported, not passed over in silence.
func TestImportLinkToDirectory(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "projects")
	require.NoError(t, os.Mkdir(real, 0o755))
	writeLines(t, real, "s", rec("a", "", 0), rec("b", "a", 1))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{link}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, 1, rep.Files)
	assert.Equal(t, 2, rep.Added)
}
