package zchunk

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// FuzzOpenRead opens arbitrary bytes as a compressed chunk and reads them:
// it must never panic, every failure must be a *FormatError, and reads
// that succeed must agree with each other.
func FuzzOpenRead(f *testing.F) {
	seed, err := os.ReadFile("testdata/seed.zst")
	require.NoError(f, err)
	empty, err := encode(nil, BlockSize)
	require.NoError(f, err)
	f.Add(seed)
	f.Add(empty)
	f.Add([]byte{})
	f.Add([]byte(Magic))
	for _, n := range []int{1, 8, FooterSize, FooterSize + 8, len(seed) / 2, len(seed) - FooterSize, len(seed) - 1} {
		f.Add(seed[:n])           // truncated
		f.Add(seed[len(seed)-n:]) // front cut off
	}
	for _, pos := range []int{0, 5, 40, len(seed) / 3, len(seed) - FooterSize - 20, len(seed) - FooterSize + 2, len(seed) - 12, len(seed) - 1} {
		b := bytes.Clone(seed)
		b[pos] ^= 0x5a // garbled
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m := vfs.NewMemFS()
		w, err := m.OpenFile("/c.zst", os.O_RDWR|os.O_CREATE, 0o600)
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())

		r, err := Open(m, "/c.zst")
		if err != nil {
			var fe *FormatError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, "/c.zst", fe.Path)
			require.True(t, fe.Offset >= 0 && fe.Offset <= int64(len(data)), "offset %d", fe.Offset)
			return
		}
		defer r.Close()
		size := r.Size()
		require.GreaterOrEqual(t, size, int64(0))
		if size > 64<<20 {
			return
		}
		whole := make([]byte, size)
		n, wholeErr := r.ReadAt(whole, 0)
		checkReadErr(t, wholeErr)
		// Read again in small pieces through a fresh reader.
		r2, err := Open(m, "/c.zst")
		require.NoError(t, err)
		defer r2.Close()
		piece := make([]byte, 97)
		var pieces []byte
		var piecesErr error
		for off := int64(0); off < size; off += int64(len(piece)) {
			k, err := r2.ReadAt(piece, off)
			pieces = append(pieces, piece[:k]...)
			if err != nil && !errors.Is(err, io.EOF) {
				piecesErr = err
				break
			}
		}
		checkReadErr(t, piecesErr)
		if wholeErr == nil && piecesErr == nil {
			require.Equal(t, size, int64(n))
			require.Equal(t, string(whole), string(pieces))
		}
		k, err := r.ReadAt(piece, size)
		require.Zero(t, k)
		require.Equal(t, io.EOF, err)
	})
}

func checkReadErr(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	require.ErrorIs(t, err, ErrBadFrame)
}
