package headfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
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
