package vfs

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadFileLimit: ReadFileInto reads a file of up to limit bytes and
// refuses a larger one with a *fs.PathError naming it, wrapping a
// *LimitError that matches ErrTooLarge, on both file systems and through
// a reused buffer.
func TestReadFileLimit(t *testing.T) {
	for _, fsys := range []struct {
		name string
		fs   FS
		dir  string
	}{{"memfs", NewMemFS(), "/"}, {"os", Default, t.TempDir()}} {
		t.Run(fsys.name, func(t *testing.T) {
			data := bytes.Repeat([]byte("x"), 1000)
			name := filepath.Join(fsys.dir, "f")
			writeFile(t, fsys.fs, name, string(data))
			for _, tc := range []struct {
				limit int64
				ok    bool
			}{{1000, true}, {1 << 20, true}, {999, false}, {0, false}} {
				for _, buf := range [][]byte{nil, make([]byte, 0, 4096), make([]byte, 0, 10)} {
					got, err := ReadFileInto(fsys.fs, name, buf, tc.limit)
					if tc.ok {
						require.NoError(t, err, "limit %d", tc.limit)
						assert.Equal(t, data, got)
						continue
					}
					assert.Nil(t, got)
					assert.ErrorIs(t, err, ErrTooLarge, "limit %d", tc.limit)
					var pe *fs.PathError
					require.ErrorAs(t, err, &pe)
					assert.Equal(t, name, pe.Path)
					var le *LimitError
					require.ErrorAs(t, err, &le)
					assert.Equal(t, tc.limit, le.Limit)
					assert.Greater(t, le.Size, tc.limit)
				}
			}
		})
	}
}

// TestFileTypeRefusals: on both file systems a directory is not opened as
// a file (OpenFile, Lock, ReadFile), nor a file as a directory (ReadDir,
// SyncDir, MkdirAll): each fails with ErrFileType in a *fs.PathError.
func TestFileTypeRefusals(t *testing.T) {
	for _, fsys := range []struct {
		name string
		fs   FS
		dir  string
	}{{"memfs", NewMemFS(), "/"}, {"os", Default, t.TempDir()}} {
		t.Run(fsys.name, func(t *testing.T) {
			d, f := filepath.Join(fsys.dir, "d"), filepath.Join(fsys.dir, "f")
			require.NoError(t, fsys.fs.MkdirAll(d, 0o755))
			writeFile(t, fsys.fs, f, "x")
			checks := map[string]error{}
			for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_CREATE | os.O_TRUNC} {
				_, err := fsys.fs.OpenFile(d, flag, 0o600)
				checks["OpenFile(dir)"] = err
				assert.ErrorIs(t, err, ErrFileType, "flag %#x", flag)
			}
			_, checks["Lock(dir)"] = fsys.fs.Lock(d, 0o600)
			_, checks["ReadFile(dir)"] = ReadFileLimit(fsys.fs, d, testLimit)
			_, checks["ReadDir(file)"] = fsys.fs.ReadDir(f)
			checks["SyncDir(file)"] = fsys.fs.SyncDir(f)
			checks["MkdirAll(file/sub)"] = fsys.fs.MkdirAll(filepath.Join(f, "sub"), 0o755)
			for what, err := range checks {
				assert.ErrorIs(t, err, ErrFileType, what)
				var pe *fs.PathError
				assert.True(t, errors.As(err, &pe), "%s: %v", what, err)
			}
			got := readFile(t, fsys.fs, f)
			assert.Equal(t, "x", got)
		})
	}
}

// TestMapRefusals: the errors that wrap ErrFileType or ErrTooLarge, from
// the FS's calls and from ReadFile through it, are what the function
// makes of them; others pass as they are.
func TestMapRefusals(t *testing.T) {
	m := NewMemFS()
	require.NoError(t, m.MkdirAll("/d", 0o755))
	writeFile(t, m, "/f", "0123456789")
	mapped := errors.New("mapped")
	var seen []error
	r := MapRefusals(m, func(err error) error {
		seen = append(seen, err)
		return mapped
	})
	_, err := r.OpenFile("/d", os.O_RDONLY, 0)
	assert.ErrorIs(t, err, mapped)
	_, err = ReadFileLimit(r, "/f", 5)
	assert.ErrorIs(t, err, mapped)
	_, err = r.ReadDir("/f")
	assert.ErrorIs(t, err, mapped)
	require.Len(t, seen, 3)
	assert.ErrorIs(t, seen[1], ErrTooLarge)

	_, err = r.OpenFile("/missing", os.O_RDONLY, 0)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	b, err := ReadFileLimit(r, "/f", 10)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(b))
	assert.Len(t, seen, 3)
}
