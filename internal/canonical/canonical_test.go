package canonical

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUUID(t *testing.T) {
	id := uuid.MustParse("0190f1a2-b3c4-7d5e-8f60-718293a4b5c6")
	b := AppendUUID([]byte("x"), id)
	require.Equal(t, "x"+id.String(), string(b))
	got, err := ParseUUID(b[1:])
	require.NoError(t, err)
	assert.Equal(t, id, got)

	for _, bad := range []string{
		"",
		strings.ToUpper(id.String()),             // upper case
		"{" + id.String()[1:],                    // not a digit
		id.String()[:35],                         // short
		id.String() + "0",                        // long
		strings.ReplaceAll(id.String(), "-", ""), // the 32-digit form
		"0190f1a2-b3c4-7d5e-8f60+718293a4b5c6",   // a separator changed
		"urn:uuid:" + id.String()[9:],
	} {
		_, err := ParseUUID([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestDigest(t *testing.T) {
	d := sha256.Sum256([]byte("record"))
	b := AppendDigest(nil, d)
	require.True(t, strings.HasPrefix(string(b), DigestPrefix))
	require.Len(t, b, len(DigestPrefix)+DigestHexLen)
	got, err := ParseDigestHex(b[len(DigestPrefix):])
	require.NoError(t, err)
	assert.Equal(t, d, got)

	hexPart := string(b[len(DigestPrefix):])
	for _, bad := range []string{"", hexPart[:63], hexPart + "0", strings.ToUpper(hexPart), "g" + hexPart[1:]} {
		_, err := ParseDigestHex([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

// FuzzParse checks that whatever ParseUUID and ParseDigestHex accept is
// the canonical form of what they return.
func FuzzParse(f *testing.F) {
	f.Add([]byte("0190f1a2-b3c4-7d5e-8f60-718293a4b5c6"))
	f.Add(AppendDigest(nil, sha256.Sum256(nil))[len(DigestPrefix):])
	f.Fuzz(func(t *testing.T, b []byte) {
		if id, err := ParseUUID(b); err == nil {
			assert.Equal(t, string(b), string(AppendUUID(nil, id)))
		}
		if d, err := ParseDigestHex(b); err == nil {
			assert.Equal(t, DigestPrefix+string(b), string(AppendDigest(nil, d)))
		}
	})
}
