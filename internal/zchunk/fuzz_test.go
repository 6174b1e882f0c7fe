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

// FuzzOpenRead opens arbitrary bytes as a compressed chunk and reads its
// data and its metadata: it must never panic, every failure must be a
// *FormatError, and reads that succeed must agree with each other.
func FuzzOpenRead(f *testing.F) {
	seed, err := os.ReadFile("testdata/seed.zst") // with metadata
	require.NoError(f, err)
	seedSrc, err := os.ReadFile("testdata/seed.jsonl")
	require.NoError(f, err)
	seedMeta, err := os.ReadFile("testdata/seed.meta")
	require.NoError(f, err)
	noMeta, err := encode(seedSrc, nil, 512)
	require.NoError(f, err)
	empty, err := encode(nil, nil, BlockSize)
	require.NoError(f, err)
	onlyMeta, err := encode(nil, seedMeta, BlockSize)
	require.NoError(f, err)
	v1, err := os.ReadFile("testdata/v1.zst")
	require.NoError(f, err)
	for _, b := range [][]byte{seed, noMeta, empty, onlyMeta, v1, {}, []byte(Magic)} {
		f.Add(b)
	}
	for _, n := range []int{1, 8, FooterSize, FooterSize + 8, len(seed) / 2, len(seed) - FooterSize, len(seed) - 1} {
		f.Add(seed[:n])           // truncated
		f.Add(seed[len(seed)-n:]) // front cut off
	}
	mp := metaOf(seed)
	metaOff := bytes.Index(seed, mp.frame)
	require.Positive(f, metaOff)
	for _, pos := range []int{0, 5, 40, len(seed) / 3, metaOff, metaOff + len(mp.frame)/2, len(seed) - FooterSize - 20, len(seed) - FooterSize + 2,
		len(seed) - FooterSize + 29, len(seed) - FooterSize + 33, len(seed) - FooterSize + 41, len(seed) - FooterSize + 49, len(seed) - 12, len(seed) - 1} {
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
		require.True(t, r.metaOff >= 0 && r.metaLen >= 0 && r.metaOff+r.metaLen <= int64(len(data)), "meta frame at %d, %d bytes", r.metaOff, r.metaLen)
		r2, err := Open(m, "/c.zst")
		require.NoError(t, err)
		defer r2.Close()

		// The metadata, twice, through both readers.
		if r.metaSize <= 64<<20 {
			meta, metaErr := r.Meta()
			checkMetaErr(t, r, metaErr)
			meta2, metaErr2 := r2.Meta()
			checkMetaErr(t, r2, metaErr2)
			require.Equal(t, metaErr == nil, metaErr2 == nil)
			if metaErr == nil {
				require.Equal(t, r.metaSize, int64(len(meta)))
				require.Equal(t, string(meta), string(meta2))
				if r.metaLen == 0 {
					require.Nil(t, meta)
				}
			}
		}

		if size > 64<<20 {
			return
		}
		whole := make([]byte, size)
		n, wholeErr := r.ReadAt(whole, 0)
		checkReadErr(t, wholeErr)
		// Read again in small pieces through the other reader.
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

// checkMetaErr checks an error from r.Meta: nil, or a damaged meta frame
// reported at its offset.
func checkMetaErr(t *testing.T, r *Reader, err error) {
	t.Helper()
	if err == nil {
		return
	}
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	require.ErrorIs(t, err, ErrBadMeta)
	require.Equal(t, r.metaOff, fe.Offset)
	require.Positive(t, r.metaLen)
}
