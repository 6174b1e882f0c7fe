package journal

import (
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// hostileFrameHeaders writes, every stride bytes from off to the end of
// d, a frame header that is valid (its hcrc matches) for a record of a
// group later than lsn, whose body reaches the end of the file and whose
// body checksum is wrong: each one passes the scan's fixed-size check and
// makes it checksum the rest of the file.
func hostileFrameHeaders(d []byte, salt uint32, off, stride int64, lsn uint64) int {
	le := binary.LittleEndian
	n := 0
	for ; off+frameHeader+bodyFixed+align <= int64(len(d)); off += stride {
		f := d[off:]
		body := (int64(len(d)) - off - frameHeader) &^ (align - 1)
		le.PutUint32(f[4:], 0)
		le.PutUint32(f[28:], uint32(body))
		sealFrame(f, salt, lsn+uint64(n), lsn+uint64(n), 1)
		n++
	}
	return n
}

// TestReadHostileFrameHeadersBounded: a journal file full of valid frame
// headers of later groups whose bodies all fail their checksum, each
// claiming the rest of the file, must not make Read checksum the file
// once per header (time quadratic in the file's size: hours for a file of
// DefaultSize). Genuine later frames do not overlap, so their bodies
// total at most the record area: past that the file is corrupt.
func TestReadHostileFrameHeadersBounded(t *testing.T) {
	m, w := newMem(t, 64<<10)
	makeFile(t, m, memRoot, "f")
	commitT(t, w, nil, Record{Op: OpWrite, Path: "f", Data: []byte("x")})
	b, err := vfs.ReadFile(m, w.Path())
	require.NoError(t, err)
	start := int64(recordsStart + 1024)
	require.Positive(t, hostileFrameHeaders(b, w.salt, start, frameHeader, 100))
	_, err = parse(w.Path(), b)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.ErrorIs(t, err, ErrLostRecord)
	assert.Equal(t, w.Path(), ce.Path)
	assert.Equal(t, int64(recordsStart+frameSize(1, 1)), ce.Offset, "where the log ended")
	require.NoError(t, w.Close())
}
