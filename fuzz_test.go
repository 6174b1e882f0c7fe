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

// FuzzDecodeIndexLine feeds arbitrary lines to the index decoder, seeded
// with the lines of testdata/golden, with and without their previews. A line it accepts must survive an
// encode/decode round trip unchanged.
func FuzzDecodeIndexLine(f *testing.F) {
	for _, line := range goldenLines(f, "index.jsonl") {
		f.Add(line)
		f.Add(line[:len(line)/2])
		f.Add(bytes.Replace(line, []byte(`"chunk":`), []byte(`"chunk":-`), 1))
		f.Add(bytes.Replace(line, []byte(`,"preview":"`), []byte(`,"preview":"\\\"`), 1))
		if e, err := decodeIndexLine(line); err == nil {
			// The same line as a build before previews wrote it.
			e.Preview = preview{}
			old := encodeIndexLine(nil, &e)
			f.Add(old[:len(old)-1])
		}
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"id":"x","crc":"00000000"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := decodeIndexLine(line)
		if err != nil {
			return
		}
		enc := encodeIndexLine(nil, &e)
		require.Equal(t, byte('\n'), enc[len(enc)-1])
		again, err := decodeIndexLine(enc[:len(enc)-1])
		require.NoError(t, err)
		assert.Equal(t, e, again)
		assert.NotZero(t, e.Loc.Length)
	})
}

// FuzzDecodeEvent feeds arbitrary lines to the chunk record decoder, seeded
// with the lines of the golden chunks.
func FuzzDecodeEvent(f *testing.F) {
	for _, line := range goldenLines(f, ".jsonl") {
		f.Add(line)
		f.Add(line[:len(line)-3])
	}
	f.Add([]byte(`{"record":{"a":[1,2,{"b":"}"}]},"crc":"00000000"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		h, p, err := decodeEventLine(line)
		if err != nil {
			return
		}
		require.NotZero(t, h.Kind, "a known kind")
		require.Equal(t, p.Blob, p.Record == nil)
		if !p.Blob {
			require.Equal(t, int64(len(p.Record)), p.Size)
		}
		enc := encodeEventLine(nil, &h, p)
		h2, p2, err := decodeEventLine(enc[:len(enc)-1])
		require.NoError(t, err)
		assert.Equal(t, h, h2)
		assert.Equal(t, p.Blob, p2.Blob)
		assert.Equal(t, p.Digest, p2.Digest)
		assert.Equal(t, p.Size, p2.Size)
		assert.Equal(t, p.ParentAt, p2.ParentAt)
		assert.Equal(t, string(p.Record), string(p2.Record))
		ev, err := decodeEvent(line)
		require.NoError(t, err)
		assert.Equal(t, p.Blob, ev.Digest != "")
	})
}

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
