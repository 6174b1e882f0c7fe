package headfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEncodeDecode(t *testing.T) {
	id := uuid.MustParse("0190f1a2-b3c4-7d5e-8f60-718293a4b5c6")
	b := Encode(id)
	require.Equal(t, id.String()+"\n", string(b))
	require.Len(t, b, Size)
	got, err := Decode(b)
	require.NoError(t, err)
	assert.Equal(t, id, got)

	for name, bad := range map[string]string{
		"empty":           "",
		"no newline":      id.String(),
		"two newlines":    id.String() + "\n\n",
		"upper case":      "0190F1A2-b3c4-7d5e-8f60-718293a4b5c6\n",
		"nil id":          uuid.Nil.String() + "\n",
		"a space":         id.String() + " ",
		"a leading space": " " + id.String()[1:] + "\n",
	} {
		_, err := Decode([]byte(bad))
		assert.Error(t, err, name)
	}
}

// The golden session's HEAD file (the root package's testdata) decodes,
// and encodes back to its bytes.
func TestGolden(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("..", "..", "testdata", "golden", "sessions", "*", Name))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		id, err := Decode(b)
		require.NoError(t, err, p)
		assert.Equal(t, b, Encode(id))
	}
}

// FuzzDecode checks the decoder accepts exactly a canonical non-nil id
// and a newline.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("0190f1a2-b3c4-7d5e-8f60-718293a4b5c6\n"))
	f.Add([]byte("0190f1a2-b3c4-7d5e-8f60-718293a4b5c6"))
	f.Add([]byte("00000000-0000-0000-0000-000000000000\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := Decode(b)
		if err != nil {
			return
		}
		assert.Equal(t, b, Encode(id))
	})
}

// TestReadWrite: Read of what Write wrote, of no file, of bytes that are
// no HEAD (damage at offset 0) and of a file past Size (refused unread).
func TestReadWrite(t *testing.T) {
	id := uuid.MustParse("0190a2b4-7c1d-7000-8000-000000000001")
	m := vfs.NewMemFS()
	require.NoError(t, m.MkdirAll("/s", 0o700))
	path := filepath.Join("/s", Name)

	_, exists, err := Read(m, path)
	require.NoError(t, err)
	assert.False(t, exists, "no HEAD")

	require.NoError(t, Write(m, "/s", id, 0o600))
	got, exists, err := Read(m, path)
	require.NoError(t, err)
	assert.True(t, exists)
	assert.Equal(t, id, got)

	for _, tc := range []struct {
		name    string
		data    []byte
		corrupt bool
		is      error
	}{
		{"not an id", []byte("0190a2b4-7c1d-7000-8000-00000000000x\n"), true, nil},
		{"short", []byte("0190a2b4\n"), true, nil},
		{"too large", append(Encode(id), 'x'), false, vfs.ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := m.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			require.NoError(t, err)
			_, err = f.Write(tc.data)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			_, exists, err := Read(m, path)
			assert.True(t, exists)
			if tc.corrupt {
				var ce *corrupt.Error
				require.ErrorAs(t, err, &ce)
				assert.Equal(t, path, ce.Path)
				assert.Zero(t, ce.Offset)
			}
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
}
