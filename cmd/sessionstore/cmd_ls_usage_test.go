package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// ls shows each session's recorded token totals: input (cache reads and
// writes included) over output, "-" for a session that records none.
func TestLsUsageColumn(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join(t.TempDir(), "store")
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	used, err := s.Create(ctx, sessionstore.Meta{Name: "used"})
	require.NoError(t, err)
	for _, u := range []sessionstore.Usage{{InputTokens: 1000, OutputTokens: 200, CacheReadTokens: 2000}, {InputTokens: 234, OutputTokens: 45}} {
		_, err := s.Append(ctx, used.ID, sessionstore.NewEvent(sessionstore.KindMessage, sessionstore.RoleAssistant,
			sessionstore.Message{Content: "ok", Model: "m", Usage: &u}))
		require.NoError(t, err)
	}
	empty, err := s.Create(ctx, sessionstore.Meta{Name: "empty"})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	status, stdout, stderr := runCmd("ls", root)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "TOKENS IN/OUT")
	for _, line := range strings.Split(stdout, "\n") {
		switch {
		case strings.HasPrefix(line, used.ID.String()):
			assert.True(t, strings.HasSuffix(strings.TrimSpace(line), " 3.2k/245"), "the used session's line: %q", line)
		case strings.HasPrefix(line, empty.ID.String()):
			assert.True(t, strings.HasSuffix(strings.TrimSpace(line), " -"), "the empty session's line: %q", line)
		}
	}
}

func TestTokens(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1.0k", 12345: "12.3k", 4_500_000: "4.5M"} {
		assert.Equal(t, want, tokens(n), "%d", n)
	}
}
