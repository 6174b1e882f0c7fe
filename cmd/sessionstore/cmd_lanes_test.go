package main

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

func TestLanes(t *testing.T) {
	f := newFixture(t)
	root, id := f.root, f.session.ID.String()

	// A session without lanes lists its implicit lane, active, at HEAD.
	status, out, stderr := runCmd("lanes", root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, 1, strings.Count(out, "\n"), out)
	assert.Contains(t, lineOf(t, out, sessionstore.DefaultLane), f.head.ID.String())
	assert.True(t, strings.HasPrefix(out, "* "), out)

	// create (the event by its short id), switch, list.
	short := f.firstLeaf.ID.String()[24:32]
	status, out, stderr = runCmd("lanes", root, id, "create", "approach-a", short)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, out, "done")
	status, _, stderr = runCmd("lanes", root, id, "switch", "approach-a")
	require.Equal(t, exitOK, status, stderr)
	status, out, stderr = runCmd("lanes", root, id)
	require.Equal(t, exitOK, status, stderr)
	a := lineOf(t, out, "approach-a")
	assert.True(t, strings.HasPrefix(a, "* "), "the active lane is marked: %q", a)
	assert.Contains(t, a, f.firstLeaf.ID.String())
	m := lineOf(t, out, sessionstore.DefaultLane+" ")
	assert.True(t, strings.HasPrefix(m, "  "), "%q", m)
	assert.Contains(t, m, f.head.ID.String())

	// The switch is in the store: the next append goes onto the lane.
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	e, err := s.Append(context.Background(), f.session.ID, sessionstore.UserText("on approach a"))
	require.NoError(t, err)
	assert.Equal(t, f.firstLeaf.ID, e.ParentID)
	require.NoError(t, s.Close())

	// move, delete.
	status, _, stderr = runCmd("lanes", root, id, "move", sessionstore.DefaultLane, f.ask.ID.String())
	require.Equal(t, exitOK, status, stderr)
	status, _, stderr = runCmd("lanes", root, id, "switch", sessionstore.DefaultLane)
	require.Equal(t, exitOK, status, stderr)
	status, _, stderr = runCmd("lanes", root, id, "delete", "approach-a")
	require.Equal(t, exitOK, status, stderr)
	status, out, stderr = runCmd("lanes", root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.NotContains(t, out, "approach-a")
	assert.Contains(t, lineOf(t, out, sessionstore.DefaultLane), f.ask.ID.String())

	// Errors.
	tests := []struct {
		args   []string
		status int
		msg    string
	}{
		{[]string{"lanes", root}, exitUsage, "missing arguments"},
		{[]string{"lanes", root, id, "rename", "x"}, exitUsage, "unknown lanes subcommand"},
		{[]string{"lanes", root, id, "create", "x"}, exitUsage, "missing arguments to create"},
		{[]string{"lanes", root, id, "switch", "x", "y"}, exitUsage, "too many arguments"},
		{[]string{"lanes", root, id, "switch", "nope"}, exitFail, "not found"},
		{[]string{"lanes", root, id, "delete", sessionstore.DefaultLane}, exitFail, "lane is active"},
		{[]string{"lanes", root, id, "create", "", f.ask.ID.String()}, exitFail, "invalid lane"},
		{[]string{"lanes", root, id, "create", sessionstore.DefaultLane, f.ask.ID.String()}, exitFail, "already exists"},
	}
	for _, tt := range tests {
		status, _, stderr := runCmd(tt.args...)
		assert.Equal(t, tt.status, status, "%q: %s", tt.args, stderr)
		assert.Contains(t, stderr, tt.msg, "%q", tt.args)
	}
}
