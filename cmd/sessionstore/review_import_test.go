package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A path that does not exist: exit status 1, a message that names it, no
// summary claiming an import, and no store made for nothing.
func TestReviewImportMissingPath(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, "store")
	missing := filepath.Join(dir, "nope")
	status, stdout, stderr := runCmd("import", "claude", "-store", root, claudeFixture, missing)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, missing)
	assert.Contains(t, stderr, "no such file or directory")
	assert.NotContains(t, stderr, "importing again completes the rest", "importing again does not help")
	assert.Empty(t, stdout, "nothing was imported")
	_, err := os.Stat(root)
	assert.ErrorIs(t, err, os.ErrNotExist, "no store made")
}
