package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// TestReviewTrashPurgePrefixAmbiguous: purge resolves its argument among
// the live sessions first and only then in the trash, so a prefix that
// matches one live session and one session in the trash (UUIDv7 ids of
// sessions made within a minute share their first 8 hex digits) purges
// the live one, for good and without the trash, where every other
// command refuses an ambiguous prefix. A user copying a prefix from
// `trash` to purge a deleted session destroys a live one.
func TestReviewTrashPurgePrefixAmbiguous(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	trashed := f.session.ID.String()
	// A live session whose id shares all but its last digit with it.
	b := []byte(trashed)
	if b[len(b)-1] == '0' {
		b[len(b)-1] = '1'
	} else {
		b[len(b)-1] = '0'
	}
	liveID := uuid.MustParse(string(b))
	s, err := sessionstore.Open(f.root, nil)
	require.NoError(t, err)
	_, err = s.Create(ctx, sessionstore.Meta{ID: liveID, Name: "live"})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	status, _, stderr := runCmd("rm", f.root, trashed)
	require.Equal(t, exitOK, status, stderr)
	status, stdout, stderr := runCmd("trash", f.root)
	require.Equal(t, exitOK, status, stderr)
	require.Contains(t, stdout, trashed)

	prefix := trashed[:30] // as shown by trash, shared by both ids
	status, stdout, stderr = runCmd("purge", f.root, prefix)
	_, err = os.Stat(filepath.Join(f.root, "sessions", liveID.String()))
	assert.NoError(t, err, "purge %s (status %d, %q %q) removed the live session %s for good", prefix, status, stdout, stderr, liveID)
	assert.NotEqual(t, exitOK, status, "an ambiguous prefix is refused")
}
