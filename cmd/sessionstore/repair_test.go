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

// TestRepairLostTail: the last record of the session is damaged although
// the index names it (acknowledged events lost at the end of the log).
// verify reports the loss and lists the cut; repair says what is lost and
// makes it.
func TestRepairLostTail(t *testing.T) {
	f := newFixture(t)
	chunk := newestChunk(t, f.root, f.session.ID)
	damage(t, chunk, "Go on after the summary.")
	id := sessionstore.ShortID(f.session.ID)

	status, stdout, _ := runCmd("verify", f.root, id)
	require.Equal(t, exitFail, status)
	require.Contains(t, stdout, "acknowledged events lost")
	require.Contains(t, stdout, "repair on next open for writing: cut the torn tail of "+chunk)

	status, stdout, stderr := runCmd("repair", f.root, id)
	assert.NotContains(t, stderr, "damaged beyond repair", "verify lists this repair, and the library makes it")
	assert.Equal(t, exitOK, status, stderr)
	assert.True(t, strings.HasPrefix(stdout, "repaired: cut the torn tail of "+chunk), stdout)
}

// TestRootIsAFile: a root that is a regular file holds no store, and
// every command says so.
func TestRootIsAFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o600))

	_, err := sessionstore.Open(file, &sessionstore.Options{ReadOnly: true})
	assert.ErrorIs(t, err, sessionstore.ErrNoStore)

	status, stdout, stderr := runCmd("ls", file)
	assert.Equal(t, exitFail, status)
	assert.Empty(t, stdout)
	assert.Equal(t, "ls: no store at \""+file+"\": it is not a directory\n", stderr)
}
