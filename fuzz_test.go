package sessionstore

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzDecodeMeta feeds arbitrary bytes to the session.json decoder, seeded
// with the golden session.json.
func FuzzDecodeMeta(f *testing.F) {
	golden, err := os.ReadFile(filepath.Join("testdata", "golden", "sessions", goldenSession.String(), metaFile))
	require.NoError(f, err)
	f.Add(golden)
	f.Add(bytes.Replace(golden, []byte(`"format": 2`), []byte(`"format": 3`), 1))
	f.Add(bytes.Replace(golden, []byte(`"format": 2`), []byte(`"format": 0`), 1))
	f.Add([]byte(`{"format":1,"id":"` + goldenSession.String() + `"}`))
	f.Add([]byte(`{"format":1,"id":"` + goldenSession.String() + `","labels":{"a":"b"},"created_at":"2026-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, format, err := decodeMeta(b, goldenSession, "session.json")
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				require.ErrorIs(t, err, ErrUnsupportedFormat)
			}
			return
		}
		require.Equal(t, goldenSession, m.ID)
		require.True(t, format >= oldestFormat && format <= formatVersion, "format %d", format)
		enc, err := encodeMeta(m, format)
		require.NoError(t, err)
		again, againFormat, err := decodeMeta(enc, goldenSession, "session.json")
		require.NoError(t, err)
		assert.Equal(t, format, againFormat)
		assert.Equal(t, m.Name, again.Name)
		assert.Equal(t, m.Labels, again.Labels)
		assert.True(t, m.CreatedAt.Equal(again.CreatedAt))
	})
}
