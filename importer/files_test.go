package importer

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b/2.jsonl", "a/1.jsonl", "a/notes.txt", "3.jsonl"} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("{}\n"), 0o644))
	}
	single := filepath.Join(dir, "a", "notes.txt")
	got, err := Files([]string{dir, single})
	require.NoError(t, err)
	assert.Equal(t, []string{
		filepath.Join(dir, "3.jsonl"), filepath.Join(dir, "a", "1.jsonl"), filepath.Join(dir, "b", "2.jsonl"),
		single, // a file named is taken whatever its name
	}, got)

	_, err = Files([]string{filepath.Join(dir, "missing")})
	assert.ErrorIs(t, err, os.ErrNotExist)
}
