package eino

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// claudeData returns the directory of real Claude Code transcripts:
// $SESSIONSTORE_SHARED_DATA/claude-code, or shared/data/claude-code in a
// directory above the package's. Without it the test skips, and fails
// under CI.
func claudeData(t *testing.T) string {
	var dirs []string
	if d := os.Getenv("SESSIONSTORE_SHARED_DATA"); d != "" {
		dirs = append(dirs, filepath.Join(d, "claude-code"))
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	for d := wd; ; d = filepath.Dir(d) {
		dirs = append(dirs, filepath.Join(d, "shared", "data", "claude-code"))
		if filepath.Dir(d) == d {
			break
		}
	}
	dirs = append(dirs, "/work/shared/data/claude-code")
	for _, d := range dirs {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "0" && ci != "false" {
		t.Fatal("no shared/data/claude-code above the package (or $SESSIONSTORE_SHARED_DATA)")
	}
	t.Skip("no shared/data/claude-code")
	return ""
}
