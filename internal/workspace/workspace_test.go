package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

func TestCheckPath(t *testing.T) {
	for _, c := range []struct {
		p  string
		ok bool
	}{
		{"a", true}, {"a/b/c.go", true}, {".hidden", true}, {"a/.b", true}, {"...", true}, {"a b/ü", true},
		{"", false}, {"/a", false}, {"a/", false}, {"a//b", false}, {".", false}, {"..", false},
		{"a/../b", false}, {"./a", false}, {"a/.", false}, {"bad\xff", false}, {"nul\x00", false},
		{strings.Repeat("a", MaxPath), true}, {strings.Repeat("a", MaxPath+1), false},
	} {
		err := CheckPath(c.p)
		if c.ok {
			assert.NoError(t, err, "%q", c.p)
		} else {
			assert.ErrorIs(t, err, ErrInvalidPath, "%q", c.p)
		}
	}
}

func TestRules(t *testing.T) {
	var r Rules
	r.Add("", "# comment\n\n*.o\n!keep.o\n/build/\nlogs/\ndocs/**/draft\n\\#hash\nsp  \n**/tmp\na/**/z/*.txt\n[abc].bin\n")
	sub := r.child("sub", "*.go\n!main.go\n")
	for _, c := range []struct {
		p     string
		dir   bool
		rules *Rules
		want  bool
	}{
		{"x.o", false, &r, true},
		{"deep/x.o", false, &r, true},
		{"keep.o", false, &r, false},
		{"build", true, &r, true},
		{"build", false, &r, false}, // a file named build: the rule is for directories
		{"src/build", true, &r, false},
		{"logs", true, &r, true},
		{"src/logs", true, &r, true},
		{"docs/draft", false, &r, true},
		{"docs/a/b/draft", false, &r, true},
		{"other/draft", false, &r, false},
		{"#hash", false, &r, true},
		{"sp", false, &r, true},
		{"tmp", true, &r, true},
		{"x/y/tmp", false, &r, true},
		{"a/z/f.txt", false, &r, true},
		{"a/b/c/z/f.txt", false, &r, true},
		{"a/z/f.md", false, &r, false},
		{"b.bin", false, &r, true},
		{"d.bin", false, &r, false},
		{"sub/x.go", false, sub, true},
		{"sub/main.go", false, sub, false},
		{"other/x.go", false, sub, false},
		{"sub/x.o", false, sub, true},
		{"x.go", false, &r, false},
	} {
		assert.Equal(t, c.want, c.rules.Ignored(c.p, c.dir), "%q dir=%v", c.p, c.dir)
	}
	var none *Rules
	assert.False(t, none.Ignored("a", false))
	// A malformed pattern matches nothing.
	var bad Rules
	bad.Add("", "[\n")
	assert.False(t, bad.Ignored("[", false))
}

// TestMatchElemsManyStars: a pattern of many "**" against a deep path
// ends at once (dynamic programming, no backtracking).
func TestMatchElemsManyStars(t *testing.T) {
	pat := strings.Split(strings.Repeat("**/", 200)+"x", "/")
	name := strings.Split(strings.Repeat("a/", 1000)+"y", "/")
	assert.False(t, matchElems(pat, name))
	name[len(name)-1] = "x"
	assert.True(t, matchElems(pat, name))
}

func TestScan(t *testing.T) {
	dir := t.TempDir()
	for p, c := range map[string]string{"a.txt": "a", "d/b.txt": "bb", "d/e/c.txt": "ccc", "ign/x": "x", ".git/HEAD": "h", "d/.gitignore": "*.log\n", "d/skip.log": "l"} {
		full := filepath.Join(dir, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
	require.NoError(t, os.Chmod(filepath.Join(dir, "a.txt"), 0o755))
	require.NoError(t, os.Symlink("/etc", filepath.Join(dir, "d/link")))
	var r Rules
	r.Add("", "ign/\n")
	files, skipped, err := Scan(context.Background(), vfs.Default, dir, ScanOptions{Rules: &r, GitIgnore: true})
	require.NoError(t, err)
	var paths []string
	for _, f := range files {
		paths = append(paths, f.Path)
	}
	assert.Equal(t, []string{"a.txt", "d/.gitignore", "d/b.txt", "d/e/c.txt"}, paths)
	assert.Equal(t, os.FileMode(0o755), files[0].Mode)
	assert.Equal(t, int64(3), files[3].Size)
	require.Len(t, skipped, 1)
	assert.Equal(t, "d/link", skipped[0].Path)

	_, _, err = Scan(context.Background(), vfs.Default, dir, ScanOptions{MaxFiles: 2})
	assert.ErrorIs(t, err, ErrTooMany)
	_, _, err = Scan(context.Background(), vfs.Default, filepath.Join(dir, "missing"), ScanOptions{})
	assert.Error(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = Scan(ctx, vfs.Default, dir, ScanOptions{})
	assert.True(t, errors.Is(err, context.Canceled))
}

func TestWriter(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "sub")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file-as-dir"), []byte("x"), 0o644))
	w := NewWriter(vfs.Default, dir, true)
	require.NoError(t, w.Write("sub/a/b.txt", []byte("b"), 0o644))
	require.NoError(t, w.Write("file-as-dir/c", []byte("c"), 0o600))
	require.NoError(t, w.Write("x.sh", []byte("#!"), 0o755))
	assert.ErrorIs(t, w.Write("../escape", []byte("no"), 0o644), ErrInvalidPath)
	require.NoError(t, w.Finish())
	entries, err := os.ReadDir(outside)
	require.NoError(t, err)
	assert.Empty(t, entries, "nothing written through the link")
	b, err := os.ReadFile(filepath.Join(dir, "sub/a/b.txt"))
	require.NoError(t, err)
	assert.Equal(t, "b", string(b))
	info, err := os.Stat(filepath.Join(dir, "x.sh"))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), info.Mode().Perm())
	require.NoError(t, w.Remove("sub/a/b.txt"))
	w.RemoveEmpty("sub/a")
	_, err = os.Stat(filepath.Join(dir, "sub"))
	assert.ErrorIs(t, err, os.ErrNotExist, "emptied directories go")
	assert.NoError(t, w.Remove("never-was"))
	names, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		assert.NotContains(t, n.Name(), TempMark)
	}
}

// TestWriteNew: without sync, a new file is written under its name; a
// name that exists (a file or a link) is replaced as Write replaces it,
// never written through.
func TestWriteNew(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	require.NoError(t, os.WriteFile(victim, []byte("keep"), 0o644))
	require.NoError(t, os.Symlink(victim, filepath.Join(dir, "link")))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "old"), []byte("old"), 0o644))
	w := NewWriter(vfs.Default, dir, false)
	require.NoError(t, w.WriteNew("a/new", []byte("new"), 0o644))
	require.NoError(t, w.WriteNew("old", []byte("replaced"), 0o644))
	require.NoError(t, w.WriteNew("link", []byte("file now"), 0o644))
	for p, want := range map[string]string{"a/new": "new", "old": "replaced", "link": "file now"} {
		b, err := os.ReadFile(filepath.Join(dir, p))
		require.NoError(t, err)
		assert.Equal(t, want, string(b), p)
	}
	b, err := os.ReadFile(victim)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(b))
	assert.ErrorIs(t, w.WriteNew("../x", nil, 0o644), ErrInvalidPath)
}

func FuzzRules(f *testing.F) {
	f.Add("*.o\n!k.o\n/b/\n**/x\n[a-", "a/b/x.o")
	f.Fuzz(func(t *testing.T, text, p string) {
		var r Rules
		r.Add("", text)
		if CheckPath(p) == nil {
			_ = r.Ignored(p, false)
			_ = r.Ignored(p, true)
		}
	})
}
