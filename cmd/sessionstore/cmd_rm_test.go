package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

func TestRm(t *testing.T) {
	f := newFixture(t)
	id := f.session.ID.String()

	// Refused while another process (here a Store) holds it.
	s, err := sessionstore.Open(f.root, nil)
	require.NoError(t, err)
	_, err = s.Head(context.Background(), f.session.ID)
	require.NoError(t, err)
	status, _, stderr := runCmd("rm", f.root, id)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "another process holds the session open for writing")
	require.NoError(t, s.Close())

	status, stdout, stderr := runCmd("rm", f.root, id[24:32]) // the short id
	require.Equal(t, exitOK, status, stderr)
	assert.Regexp(t, "^"+id+` \("inspect me"\): moved to the trash until \S+ \(sessionstore undelete \S+ `+id+" brings it back\\)\n$", stdout)
	_, err = os.Stat(filepath.Join(f.root, "sessions", id))
	assert.ErrorIs(t, err, os.ErrNotExist)

	status, stdout, _ = runCmd("ls", f.root)
	require.Equal(t, exitOK, status)
	assert.NotContains(t, stdout, id)
	assert.Contains(t, stdout, f.empty.ID.String())

	status, _, stderr = runCmd("rm", f.root, id)
	assert.Equal(t, exitFail, status, "a session that is gone is not found")
	assert.Contains(t, stderr, "not found")

	status, _, _ = runCmd("rm", f.root)
	assert.Equal(t, exitUsage, status)
}

func TestRmRefusesForkedSession(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	s, err := sessionstore.Open(f.root, nil)
	require.NoError(t, err)
	fork, err := s.Create(ctx, sessionstore.Meta{ForkedFrom: &sessionstore.ForkPoint{Session: f.session.ID, Event: f.ask.ID}})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	status, _, stderr := runCmd("rm", f.root, f.session.ID.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, fork.ID.String())
	assert.Contains(t, stderr, "remove the forks first")
}

func TestPrune(t *testing.T) {
	f := newFixture(t)
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)

	status, stdout, stderr := runCmd("prune", "--dry-run", "-older-than", future, "-recent", "0", "-dir", "/src/app", f.root)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "would remove  "+f.session.ID.String())
	assert.NotContains(t, stdout, f.empty.ID.String(), "another working directory")
	assert.Contains(t, stdout, "would remove 1 session, ")
	lines := strings.Split(strings.TrimSpace(stdout), "\n")
	require.Len(t, lines, 2)
	_, err := os.Stat(filepath.Join(f.root, "sessions", f.session.ID.String()))
	require.NoError(t, err, "a dry run removes nothing")

	status, stdout, stderr = runCmd("prune", "-keep", "1", "-recent", "0", f.root)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "removed  "+f.session.ID.String(), "the older of the two")
	assert.Contains(t, stdout, "removed 1 session, ")
	_, err = os.Stat(filepath.Join(f.root, "sessions", f.session.ID.String()))
	assert.ErrorIs(t, err, os.ErrNotExist)
	_, err = os.Stat(filepath.Join(f.root, "sessions", f.empty.ID.String()))
	assert.NoError(t, err)

	for _, args := range [][]string{
		{"prune", f.root}, // no policy
		{"prune", "-older-than", "yesterday", f.root}, // bad time
		{"prune", "-label", "novalue", "-keep", "1", f.root},
		{"prune", "-keep", "1"}, // no root
	} {
		status, _, _ := runCmd(args...)
		assert.Equal(t, exitUsage, status, "%q", args)
	}
}

// TestTrashCommands: rm moves a session to the trash, trash lists it,
// undelete (by a prefix) brings it back whole, purge removes it for good
// from the store or from the trash.
func TestTrashCommands(t *testing.T) {
	f := newFixture(t)
	id := f.session.ID.String()
	status, stdout, stderr := runCmd("trash", f.root)
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "is empty")

	status, _, stderr = runCmd("rm", f.root, id)
	require.Equal(t, exitOK, status, stderr)
	status, stdout, stderr = runCmd("trash", f.root)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "PURGED AFTER")
	assert.Regexp(t, id+` +inspect me +\S+ +\S+ +[1-9][0-9]*\n`, stdout)

	status, stdout, stderr = runCmd("undelete", f.root, id[:8])
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, id+": back from the trash\n", stdout)
	status, stdout, _ = runCmd("tree", f.root, id)
	require.Equal(t, exitOK, status)
	assert.Contains(t, stdout, f.ask.ID.String()[24:32], "its events are back")
	status, _, stderr = runCmd("undelete", f.root, id)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "not found")

	// purge: a live session, then one in the trash.
	status, stdout, stderr = runCmd("purge", f.root, id[24:32])
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, id+": purged\n", stdout)
	_, err := os.Stat(filepath.Join(f.root, "sessions", id))
	assert.ErrorIs(t, err, os.ErrNotExist)
	status, _, _ = runCmd("undelete", f.root, id)
	assert.Equal(t, exitFail, status, "purged for good")

	other := f.empty.ID.String()
	status, _, stderr = runCmd("rm", f.root, other)
	require.Equal(t, exitOK, status, stderr)
	status, stdout, stderr = runCmd("purge", f.root, other[:8])
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, other+": purged\n", stdout)
	status, _, stderr = runCmd("trash", f.root)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stderr, "is empty")
	entries, err := os.ReadDir(filepath.Join(f.root, "trash"))
	require.NoError(t, err)
	assert.Empty(t, entries, "no file of either is left")

	for _, args := range [][]string{{"undelete", f.root}, {"purge", f.root}, {"trash"}} {
		status, _, _ := runCmd(args...)
		assert.Equal(t, exitUsage, status, "%q", args)
	}
}
