package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPruneKeepZero: -keep 0 keeps none by count; with -older-than that
// is a policy, without it prune refuses it and says why (it would remove
// every session the filters match) and what to give instead.
func TestPruneKeepZero(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		args   []string
		status int
		out    string // in stdout, or stderr for a refusal
	}{
		{[]string{"-dry-run", "-keep", "0"}, exitUsage, "prune: -keep 0 without -older-than would remove every session the filters match, which prune refuses: give -keep 1 or more, or -older-than (-older-than 0s selects every matching session last updated before now)\n"},
		{[]string{"-keep", "0"}, exitUsage, "prune: -keep 0 without -older-than would remove every session the filters match"},
		{[]string{"-dry-run"}, exitUsage, "prune: set -older-than or -keep (prune refuses to remove every session the filters match)\n"},
		{[]string{"-dry-run", "-keep", "-1"}, exitUsage, `invalid value "-1" for flag -keep: must be 0 or more, not -1`},
		{[]string{"-dry-run", "-keep", "0", "-older-than", "0s", "-recent", "0s"}, exitOK, "would remove 2 sessions, "},
		{[]string{"-dry-run", "-older-than", "0s", "-recent", "0s"}, exitOK, "would remove 2 sessions, "},
		// Written a moment ago: kept by -recent's default.
		{[]string{"-dry-run", "-older-than", "0s"}, exitOK, "would remove 0 sessions, 0 bytes; kept 2 sessions the policy chose"},
		{[]string{"-dry-run", "-keep", "0", "-older-than", "2000-01-01"}, exitOK, "would remove 0 sessions, 0 bytes"},
	} {
		args := append(append([]string{"prune"}, tc.args...), f.root)
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, tc.status, status, "%q: %s", tc.args, stderr)
		if tc.status == exitOK {
			assert.Contains(t, stdout, tc.out, "%q", tc.args)
			assert.Empty(t, stderr, "%q", tc.args)
		} else {
			assert.Empty(t, stdout, "%q", tc.args)
			assert.Contains(t, stderr, tc.out, "%q", tc.args)
		}
	}
	for _, id := range []string{f.session.ID.String(), f.empty.ID.String()} {
		_, err := os.Stat(filepath.Join(f.root, "sessions", id))
		require.NoError(t, err, "nothing removed")
	}
}
