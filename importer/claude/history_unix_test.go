//go:build unix

package claude

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// hostileFiles makes, in the session's file-history directory sdir, a
// link to the secret beside it (link@v1) and a FIFO (fifo@v1): neither is
// a regular file of the directory, and neither is read.
func hostileFiles(t *testing.T, sdir string) {
	t.Helper()
	require.NoError(t, os.Symlink(filepath.Join("..", "secret.txt"), filepath.Join(sdir, "link@v1")))
	require.NoError(t, syscall.Mkfifo(filepath.Join(sdir, "fifo@v1"), 0o644))
}
