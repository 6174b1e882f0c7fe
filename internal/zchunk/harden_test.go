package zchunk

import (
	"bytes"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestBigTable: a frame table larger than maxWholeTable is read a piece
// at a time, and reads as a small one does: every byte back, and a
// damaged entry caught by the table's checksum.
func TestBigTable(t *testing.T) {
	src := []byte(strings.Repeat("ab\n", maxWholeTable/EntrySize+1000)) // one block per line
	data, err := encode(src, []byte("meta"), 1)
	require.NoError(t, err)
	framesEnd, tableOff := bigTableOffsets(data)
	require.Greater(t, len(data)-FooterSize-tableOff, maxWholeTable)

	r, err := openBytes(t, data)
	require.NoError(t, err)
	got := make([]byte, len(src))
	_, err = r.ReadAt(got, 0)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(src, got))
	meta, err := r.Meta()
	require.NoError(t, err)
	assert.Equal(t, "meta", string(meta))
	r.Close()

	for _, at := range []int{tableOff + 3, tableOff + maxWholeTable + 5, len(data) - FooterSize - 1} {
		bad := bytes.Clone(data)
		bad[at] ^= 0x10
		_, err := openBytes(t, bad)
		fe := formatErr(t, err)
		assert.ErrorIs(t, err, ErrTableChecksum)
		assert.Equal(t, int64(tableOff), fe.Offset)
	}
	// An entry that does not hold together, its checksum right.
	_, good := writeOpen(t, src, []byte("meta"), 1)
	es := bytes.Clone(entriesBytes(good.table))
	k := maxWholeTable/EntrySize + 7          // in the second piece
	clear(es[k*EntrySize+8 : k*EntrySize+16]) // an empty frame
	bad := assemble(data[:framesEnd], decodeEntries(es), int64(len(src)), metaOf(data))
	_, err = openBytes(t, bad)
	fe := formatErr(t, err)
	assert.ErrorIs(t, err, ErrBadTable)
	assert.Equal(t, int64(tableOff+k*EntrySize), fe.Offset)
}

// bigTableOffsets returns where the frames end and the table starts, from
// an intact footer.
func bigTableOffsets(data []byte) (framesEnd, tableOff int) {
	f := data[len(data)-FooterSize:]
	tableOff = int(le.Uint64(f[0:]))
	framesEnd = tableOff - skipHeaderSize - int(le.Uint64(f[40:]))
	return framesEnd, tableOff
}

func entriesBytes(es []entry) []byte {
	var b []byte
	for _, e := range es {
		b = le.AppendUint64(b, uint64(e.compOff))
		b = le.AppendUint64(b, uint64(e.compLen))
		b = le.AppendUint64(b, uint64(e.logOff))
		b = le.AppendUint64(b, uint64(e.logLen))
		b = le.AppendUint32(b, e.crc)
	}
	return b
}

func decodeEntries(b []byte) []entry {
	var es []entry
	for ; len(b) >= EntrySize; b = b[EntrySize:] {
		es = append(es, entry{int64(le.Uint64(b)), int64(le.Uint64(b[8:])), int64(le.Uint64(b[16:])), int64(le.Uint64(b[24:])), le.Uint32(b[32:])})
	}
	return es
}

// TestFrameBounds: a frame longer than zstd can make of its block, a
// block longer than MaxBlockSize, or a meta frame longer than zstd can
// make of its metadata, is refused by Open, before anything is read for
// it.
func TestFrameBounds(t *testing.T) {
	src := transcript(4, 100<<10, false)
	meta := indexLines(src)
	data, err := encode(src, meta, BlockSize)
	require.NoError(t, err)
	framesEnd, _ := bigTableOffsets(data)
	_, good := writeOpen(t, src, meta, BlockSize)
	last := len(good.table) - 1
	with := func(f func(es []entry)) []entry {
		es := append([]entry(nil), good.table...)
		f(es)
		return es
	}
	// The last frame followed by more bytes than its block holds, all its
	// own: longer than its block can be compressed to, and the file still
	// tiles.
	mp := metaOf(data)
	extra := good.table[last].logLen + 4<<10
	grown := with(func(es []entry) { es[last].compLen += extra })
	frames := append(bytes.Clone(data[:framesEnd]), make([]byte, extra)...)
	_, err = openBytes(t, assemble(frames, grown, good.size, mp))
	formatErr(t, err)
	assert.ErrorIs(t, err, ErrBadTable)
	assert.Contains(t, err.Error(), "for a block of")

	// Metadata said to be one byte, in a frame of hundreds.
	small := mp
	small.size = 1
	_, err = openBytes(t, assemble(data[:framesEnd], good.table, good.size, small))
	fe := formatErr(t, err)
	assert.ErrorIs(t, err, ErrBadTable)
	assert.Equal(t, int64(len(data)-FooterSize+48), fe.Offset)
}

// TestSparseTable: a sparse file whose footer claims a table of 256 MiB, zeros checksummed right, is refused at the table's first
// entry, without the table's size in memory.
func TestSparseTable(t *testing.T) {
	const tableLen = (256 << 20) / EntrySize * EntrySize
	path := filepath.Join(t.TempDir(), "000000.jsonl.zst")
	f, err := os.Create(path)
	require.NoError(t, err)
	head := le.AppendUint32(nil, SkippableMagic)
	head = le.AppendUint32(head, tableLen+FooterSize)
	_, err = f.WriteAt(head, 0)
	require.NoError(t, err)
	crc := crc32.Update(0, castagnoli, nil)
	zeros := make([]byte, 1<<20)
	for left := tableLen; left > 0; left -= min(left, len(zeros)) {
		crc = crc32.Update(crc, castagnoli, zeros[:min(left, len(zeros))])
	}
	var foot []byte
	foot = le.AppendUint64(foot, skipHeaderSize) // table offset
	foot = le.AppendUint64(foot, tableLen)
	foot = le.AppendUint64(foot, 0) // logical size
	foot = le.AppendUint32(foot, crc)
	foot = le.AppendUint32(foot, 0)
	foot = le.AppendUint64(foot, 0)
	foot = le.AppendUint64(foot, 0)
	foot = le.AppendUint64(foot, 0)
	foot = le.AppendUint32(foot, Version)
	foot = append(foot, Magic...)
	_, err = f.WriteAt(foot, skipHeaderSize+tableLen)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Open(vfs.Default, path)
	runtime.ReadMemStats(&after)
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	assert.ErrorIs(t, err, ErrBadTable)
	assert.Contains(t, err.Error(), "frame 0 is empty")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "bytes allocated")
}
