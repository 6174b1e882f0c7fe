package seal

import (
	"bytes"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func testCipher(t testing.TB) *Cipher {
	t.Helper()
	k, err := NewKey()
	require.NoError(t, err)
	c, err := NewCipher(k)
	require.NoError(t, err)
	return c
}

func TestSealOpen(t *testing.T) {
	c := testCipher(t)
	session := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
	aad := AAD(KindRecord, session, 3, 1024)
	for _, plain := range [][]byte{nil, []byte("x"), bytes.Repeat([]byte("record "), 1000)} {
		sealed := c.Seal([]byte("prefix"), plain, aad)
		require.Equal(t, "prefix", string(sealed[:6]), "Seal appends to dst")
		assert.Len(t, sealed, 6+len(plain)+Overhead)
		if len(plain) > 16 {
			assert.False(t, bytes.Contains(sealed, plain), "the plaintext does not show")
		}
		got, err := c.Open([]byte("out:"), sealed[6:], aad)
		require.NoError(t, err)
		assert.Equal(t, "out:"+string(plain), string(got))
	}
	a, b := c.Seal(nil, []byte("same"), aad), c.Seal(nil, []byte("same"), aad)
	assert.NotEqual(t, a[:NonceSize], b[:NonceSize], "a nonce per Seal")
}

// TestOpenRefuses: every changed byte, another key, another place and a
// short piece fail to open, with dst unchanged.
func TestOpenRefuses(t *testing.T) {
	c := testCipher(t)
	session := uuid.New()
	aad := AAD(KindBlock, session, 7, 2)
	sealed := c.Seal(nil, []byte("a block of a sealed chunk"), aad)
	for i := range sealed {
		for _, mask := range []byte{0x01, 0x80, 0xff} {
			bad := bytes.Clone(sealed)
			bad[i] ^= mask
			got, err := c.Open([]byte("dst"), bad, aad)
			require.ErrorIs(t, err, ErrAuth, "byte %d ^ %#x", i, mask)
			require.Equal(t, "dst", string(got))
		}
	}
	other := testCipher(t)
	_, err := other.Open(nil, sealed, aad)
	assert.ErrorIs(t, err, ErrAuth, "another key")
	for name, place := range map[string][]byte{
		"kind":    AAD(KindBlob, session, 7, 2),
		"session": AAD(KindBlock, uuid.New(), 7, 2),
		"a":       AAD(KindBlock, session, 8, 2),
		"b":       AAD(KindBlock, session, 7, 3),
		"none":    nil,
	} {
		_, err := c.Open(nil, sealed, place)
		assert.ErrorIs(t, err, ErrAuth, name)
	}
	for n := range Overhead {
		_, err := c.Open(nil, sealed[:n], aad)
		assert.ErrorIs(t, err, ErrShort, "%d bytes", n)
	}
	_, err = c.Open(nil, sealed[:Overhead], aad)
	assert.ErrorIs(t, err, ErrAuth, "a truncated piece of Overhead bytes")
}

func TestNewCipherKeySize(t *testing.T) {
	for _, n := range []int{0, 16, 24, 31, 33} {
		_, err := NewCipher(make([]byte, n))
		assert.Error(t, err, "%d bytes", n)
	}
	k1, err := NewKey()
	require.NoError(t, err)
	k2, err := NewKey()
	require.NoError(t, err)
	assert.Len(t, k1, KeySize)
	assert.NotEqual(t, k1, k2)
}

func TestAAD(t *testing.T) {
	s := uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")
	got := AAD(KindBlob, s, 0x0102030405060708, 0xff)
	require.Len(t, got, AADSize)
	assert.Equal(t, byte(KindBlob), got[0])
	assert.Equal(t, s[:], got[1:17])
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8}, got[17:25])
	assert.Equal(t, []byte{0, 0, 0, 0, 0, 0, 0, 0xff}, got[25:33])
}

func BenchmarkSeal(b *testing.B) {
	c := testCipher(b)
	aad := AAD(KindBlock, uuid.New(), 1, 1)
	for _, size := range []int{256, 64 << 10} {
		plain := bytes.Repeat([]byte{'x'}, size)
		dst := make([]byte, 0, size+Overhead)
		b.Run(map[int]string{256: "256B", 64 << 10: "64KiB"}[size], func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				dst = c.Seal(dst[:0], plain, aad)
			}
		})
	}
}

func BenchmarkOpen(b *testing.B) {
	c := testCipher(b)
	aad := AAD(KindBlock, uuid.New(), 1, 1)
	plain := bytes.Repeat([]byte{'x'}, 64<<10)
	sealed := c.Seal(nil, plain, aad)
	dst := make([]byte, 0, len(plain))
	b.SetBytes(int64(len(plain)))
	for b.Loop() {
		var err error
		if dst, err = c.Open(dst[:0], sealed, aad); err != nil {
			b.Fatal(err)
		}
	}
}
