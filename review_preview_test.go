package sessionstore

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestReviewTornIndexLineInPreview: an index line cut inside its preview
// member (a crash) is rebuilt from its chunk line, with its preview.
func TestReviewTornIndexLineInPreview(t *testing.T) {
	ctx := context.Background()
	o := Options{Compression: CompressionNone}
	m, s, id := memSession(t, o)
	for _, text := range []string{"first message", "second message", `the "last" one, \ long enough to cut`} {
		_, err := s.Append(ctx, id, UserText(text))
		require.NoError(t, err)
	}
	want, err := s.Tree(ctx, id)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	path := sessionPath(id, indexName)
	b, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	at := strings.LastIndex(string(b), `"preview":"the \"last`)
	require.Positive(t, at)
	f, err := m.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(at+len(`"preview":"the \"la`))))
	require.NoError(t, f.Close())

	s = openMem(t, m, o)
	defer s.Close()
	got, err := s.Tree(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, `the "last" one, \ long enough to cut`, got[2].Preview)
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}
