package zchunk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite testdata/seed.zst from testdata/seed.jsonl")

const testPath = "/s/chunks/000000.zst"

// newMemFS returns a MemFS holding the durable directory /s/chunks.
func newMemFS(t testing.TB) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMemFS()
	require.NoError(t, m.MkdirAll("/s/chunks", 0o700))
	for _, d := range []string{"/", "/s", "/s/chunks"} {
		require.NoError(t, m.SyncDir(d))
	}
	return m
}

// writeOpen compresses src with blocks of blockSize into a new MemFS and
// opens it.
func writeOpen(t testing.TB, src []byte, blockSize int) (*vfs.MemFS, *Reader) {
	t.Helper()
	m := newMemFS(t)
	require.NoError(t, write(m, testPath, src, 0o600, blockSize))
	r, err := Open(m, testPath)
	require.NoError(t, err)
	t.Cleanup(func() { r.Close() })
	return m, r
}

// lineSpans returns the [start, end) of every line of src, newline included.
func lineSpans(src []byte) [][2]int {
	var out [][2]int
	for start := 0; start < len(src); {
		end := len(src)
		if i := bytes.IndexByte(src[start:], '\n'); i >= 0 {
			end = start + i + 1
		}
		out = append(out, [2]int{start, end})
		start = end
	}
	return out
}

func readAll(t testing.TB, r *Reader) []byte {
	t.Helper()
	buf := make([]byte, r.Size())
	n, err := r.ReadAt(buf, 0)
	require.NoError(t, err)
	require.Equal(t, len(buf), n)
	return buf
}

// checkBlocks checks the block rule against src: blocks tile src, every
// block but the last ends with a newline, and a block longer than
// blockSize is one line.
func checkBlocks(t *testing.T, r *Reader, src []byte, blockSize int) {
	t.Helper()
	var off int64
	for i, e := range r.table {
		require.Equal(t, off, e.logOff, "block %d", i)
		block := src[e.logOff : e.logOff+e.logLen]
		if i < len(r.table)-1 {
			require.Equal(t, byte('\n'), block[len(block)-1], "block %d does not end a line", i)
		}
		if len(block) > blockSize {
			nl := bytes.IndexByte(block, '\n')
			require.True(t, nl == -1 || nl == len(block)-1, "block %d is %d bytes but not one line", i, len(block))
		}
		if i+1 < len(r.table) {
			// The block could not have taken the next line.
			next := src[e.logOff+e.logLen:]
			lineLen := len(next)
			if j := bytes.IndexByte(next, '\n'); j >= 0 {
				lineLen = j + 1
			}
			require.Greater(t, len(block)+lineLen, blockSize, "block %d could have held the next line", i)
		}
		off += e.logLen
	}
	require.Equal(t, int64(len(src)), off)
}

func TestBlocks(t *testing.T) {
	for _, tc := range []struct {
		src  string
		size int
		want []int
	}{
		{"", 4, nil},
		{"a\n", 4, []int{2}},
		{"a\nb\n", 4, []int{4}},
		{"a\nb\nc\n", 4, []int{4, 6}},
		{"abcdefgh\nb\n", 4, []int{9, 11}},
		{"a\nabcdefgh\nb\n", 4, []int{2, 11, 13}},
		{"a\nb", 4, []int{3}},
		{"abcdefgh", 4, []int{8}},
		{"\n\n\n\n\n", 4, []int{4, 5}},
	} {
		assert.Equal(t, tc.want, blocks([]byte(tc.src), tc.size), "%q", tc.src)
	}
}

func TestRoundTrip(t *testing.T) {
	realistic := transcript(1, 600<<10, true)
	big := bytes.Repeat([]byte("x"), 3*BlockSize+7)
	for _, tc := range []struct {
		name string
		src  []byte
	}{
		{"empty", nil},
		{"one line", []byte(`{"a":1}` + "\n")},
		{"no final newline", []byte("{\"a\":1}\n{\"b\":")},
		{"only a long line", append(append([]byte{}, big...), '\n')},
		{"long line without newline", big},
		{"tiny lines", bytes.Repeat([]byte("{}\n"), 100000)},
		{"realistic", realistic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, r := writeOpen(t, tc.src, BlockSize)
			require.Equal(t, int64(len(tc.src)), r.Size())
			require.Equal(t, string(tc.src), string(readAll(t, r)))
			checkBlocks(t, r, tc.src, BlockSize)
			for _, s := range lineSpans(tc.src) {
				buf := make([]byte, s[1]-s[0])
				n, err := r.ReadAt(buf, int64(s[0]))
				require.NoError(t, err)
				require.Equal(t, len(buf), n)
				require.Equal(t, string(tc.src[s[0]:s[1]]), string(buf), "line at %d", s[0])
			}
			// A standard zstd decoder sees the whole file as the plain chunk.
			data, err := vfs.ReadFile(m, testPath)
			require.NoError(t, err)
			dec, err := zstd.NewReader(bytes.NewReader(data))
			require.NoError(t, err)
			defer dec.Close()
			plain, err := io.ReadAll(dec)
			require.NoError(t, err)
			require.Equal(t, string(tc.src), string(plain))
		})
	}

	t.Run("realistic has a line longer than BlockSize", func(t *testing.T) {
		_, r := writeOpen(t, realistic, BlockSize)
		long := 0
		for _, e := range r.table {
			if e.logLen > BlockSize {
				long++
			}
		}
		require.Equal(t, 1, long)
		require.Greater(t, len(r.table), 5)
	})
}

func TestEmptyFile(t *testing.T) {
	_, r := writeOpen(t, nil, BlockSize)
	require.Zero(t, r.Size())
	require.Empty(t, r.table)
	n, err := r.ReadAt(make([]byte, 1), 0)
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF)
	data, err := encode(nil, BlockSize)
	require.NoError(t, err)
	require.Len(t, data, skipHeaderSize+FooterSize)
}

func TestReadAtAcrossFrames(t *testing.T) {
	src := transcript(2, 200<<10, false)
	_, r := writeOpen(t, src, 4<<10) // many frames
	require.Greater(t, len(r.table), 30)
	for i, e := range r.table[1:] {
		b := e.logOff
		for _, span := range [][2]int64{{b - 1, b + 1}, {b - 100, b + 100}, {b - 1, b + 9000}, {b, b + 1}, {b - 1, b}} {
			lo, hi := max(span[0], 0), min(span[1], int64(len(src)))
			buf := make([]byte, hi-lo)
			n, err := r.ReadAt(buf, lo)
			require.NoError(t, err, "frame %d, [%d,%d)", i+1, lo, hi)
			require.Equal(t, len(buf), n)
			require.Equal(t, string(src[lo:hi]), string(buf), "frame %d, [%d,%d)", i+1, lo, hi)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		lo := rng.Int64N(int64(len(src)))
		hi := lo + rng.Int64N(min(int64(len(src))-lo, 20000)+1)
		buf := make([]byte, hi-lo)
		n, err := r.ReadAt(buf, lo)
		require.NoError(t, err)
		require.Equal(t, len(buf), n)
		require.Equal(t, string(src[lo:hi]), string(buf))
	}
}

func TestReadAtPastEnd(t *testing.T) {
	src := transcript(5, 100<<10, false)
	_, r := writeOpen(t, src, 4<<10)
	size := int64(len(src))

	n, err := r.ReadAt(make([]byte, 10), size)
	assert.Equal(t, 0, n)
	assert.Equal(t, io.EOF, err)

	n, err = r.ReadAt(make([]byte, 10), size+1000)
	assert.Equal(t, 0, n)
	assert.Equal(t, io.EOF, err)

	buf := make([]byte, 10000)
	n, err = r.ReadAt(buf, size-5000) // spans frames, then the end
	assert.Equal(t, 5000, n)
	assert.Equal(t, io.EOF, err)
	assert.Equal(t, string(src[size-5000:]), string(buf[:n]))

	n, err = r.ReadAt(nil, size+5)
	assert.Equal(t, 0, n)
	assert.NoError(t, err)

	n, err = r.ReadAt(make([]byte, 1), -1)
	assert.Equal(t, 0, n)
	assert.Error(t, err)
	assert.NotErrorIs(t, err, io.EOF)

	// io.SectionReader drives ReadAt as the io package expects.
	got, err := io.ReadAll(io.NewSectionReader(r, 0, size+100))
	require.NoError(t, err)
	assert.Equal(t, string(src), string(got))
}

func TestReadLineDecodesOneFrame(t *testing.T) {
	src := transcript(6, 400<<10, true)
	_, r := writeOpen(t, src, BlockSize)
	spans := lineSpans(src)
	rng := rand.New(rand.NewPCG(7, 8))
	for range 300 {
		s := spans[rng.IntN(len(spans))]
		before := r.decodes.Load()
		buf := make([]byte, s[1]-s[0])
		_, err := r.ReadAt(buf, int64(s[0]))
		require.NoError(t, err)
		require.LessOrEqual(t, r.decodes.Load()-before, int64(1), "line at %d", s[0])
		require.Equal(t, string(src[s[0]:s[1]]), string(buf))
	}

	// Reading every line in order decompresses every frame exactly once.
	_, r = writeOpen(t, src, BlockSize)
	for _, s := range spans {
		buf := make([]byte, s[1]-s[0])
		_, err := r.ReadAt(buf, int64(s[0]))
		require.NoError(t, err)
	}
	require.Equal(t, int64(len(r.table)), r.decodes.Load())

	// A second read inside the cached frame decompresses nothing.
	s := spans[len(spans)-1]
	before := r.decodes.Load()
	_, err := r.ReadAt(make([]byte, s[1]-s[0]), int64(s[0]))
	require.NoError(t, err)
	require.Equal(t, before, r.decodes.Load())
}

func TestConcurrentReadAt(t *testing.T) {
	src := transcript(9, 300<<10, false)
	_, r := writeOpen(t, src, 8<<10)
	spans := lineSpans(src)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 0))
			for range 500 {
				s := spans[rng.IntN(len(spans))]
				buf := make([]byte, s[1]-s[0])
				if _, err := r.ReadAt(buf, int64(s[0])); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf, src[s[0]:s[1]]) {
					errs <- fmt.Errorf("line at %d differs", s[0])
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// formatErr asserts that err is a *FormatError naming testPath, and
// returns it.
func formatErr(t *testing.T, err error, msgAndArgs ...any) *FormatError {
	t.Helper()
	var fe *FormatError
	require.ErrorAs(t, err, &fe, msgAndArgs...)
	require.Equal(t, testPath, fe.Path, msgAndArgs...)
	return fe
}

// openBytes writes data as testPath of a new MemFS and opens it.
func openBytes(t testing.TB, data []byte) (*Reader, error) {
	t.Helper()
	m := newMemFS(t)
	f, err := m.OpenFile(testPath, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	_, err = f.Write(data)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	return Open(m, testPath)
}

func TestCorruptFrame(t *testing.T) {
	src := transcript(10, 300<<10, false)
	data, err := encode(src, BlockSize)
	require.NoError(t, err)
	_, good := writeOpen(t, src, BlockSize)
	require.Greater(t, len(good.table), 3)
	k := 2
	e := good.table[k]

	bad := bytes.Clone(data)
	bad[e.compOff+e.compLen/2] ^= 0x01
	r, err := openBytes(t, bad)
	require.NoError(t, err, "the table is intact")
	defer r.Close()

	buf := make([]byte, 100)
	_, err = r.ReadAt(buf, e.logOff+10)
	fe := formatErr(t, err)
	require.Equal(t, e.compOff, fe.Offset)
	require.ErrorIs(t, err, ErrBadFrame)
	require.Contains(t, err.Error(), fmt.Sprintf("offset %d", e.compOff))

	// The other frames still read.
	for i, o := range good.table {
		if i == k {
			continue
		}
		n, err := r.ReadAt(buf, o.logOff)
		require.NoError(t, err, "frame %d", i)
		require.Equal(t, string(src[o.logOff:o.logOff+int64(n)]), string(buf[:n]))
	}

	// The frame CRC catches the change first. With it fixed up to match,
	// zstd's content checksum catches a change to itself.
	bad = bytes.Clone(data)
	bad[e.compOff+e.compLen-2] ^= 0x80
	framesEnd := good.table[len(good.table)-1].compOff + good.table[len(good.table)-1].compLen
	entries := append([]entry(nil), good.table...)
	entries[k].crc = crc32.Checksum(bad[e.compOff:e.compOff+e.compLen], castagnoli)
	bad = rewrite(bad, int(framesEnd), entries, int64(len(src)))
	r2, err := openBytes(t, bad)
	require.NoError(t, err)
	defer r2.Close()
	_, err = r2.ReadAt(buf, e.logOff)
	fe = formatErr(t, err)
	require.Equal(t, e.compOff, fe.Offset)
	require.ErrorIs(t, err, ErrBadFrame)
	require.ErrorIs(t, err, zstd.ErrCRCMismatch)
}

// TestEveryByteFlip flips every byte of a small multi-frame file, four
// ways, and checks that Open or the read of the damaged frame reports it,
// as a *FormatError at the right offset. Then it does the same with the
// frame's CRC-32C in the table fixed up to match, leaving zstd's own checks
// alone: these may miss a change, but never return wrong data.
func TestEveryByteFlip(t *testing.T) {
	src := transcript(11, 3000, false)
	data, err := encode(src, 700)
	require.NoError(t, err)
	_, good := writeOpen(t, src, 700)
	require.Greater(t, len(good.table), 3)
	last := good.table[len(good.table)-1]
	framesEnd := last.compOff + last.compLen
	frameAt := func(pos int) (int, entry) {
		for i, e := range good.table {
			if int64(pos) >= e.compOff && int64(pos) < e.compOff+e.compLen {
				return i, e
			}
		}
		t.Fatalf("no frame at %d", pos)
		return 0, entry{}
	}
	for _, fixCRC := range []bool{false, true} {
		missed := 0
		for pos := range data {
			for _, mask := range []byte{0x01, 0x10, 0x80, 0xff} {
				bad := bytes.Clone(data)
				bad[pos] ^= mask
				what := fmt.Sprintf("byte %d ^ %#x, CRC fixed %t", pos, mask, fixCRC)
				if int64(pos) >= framesEnd {
					if fixCRC {
						continue
					}
					// Skippable header, table, footer: Open notices.
					_, err := openBytes(t, bad)
					formatErr(t, err, what)
					continue
				}
				i, frame := frameAt(pos)
				if fixCRC {
					entries := append([]entry(nil), good.table...)
					entries[i].crc = crc32.Checksum(bad[frame.compOff:frame.compOff+frame.compLen], castagnoli)
					bad = rewrite(bad, int(framesEnd), entries, int64(len(src)))
				}
				r, err := openBytes(t, bad)
				require.NoError(t, err, what)
				buf := make([]byte, frame.logLen)
				n, err := r.ReadAt(buf, frame.logOff)
				r.Close()
				if err == nil {
					require.True(t, fixCRC, "%s: not detected", what)
					require.Equal(t, string(src[frame.logOff:frame.logOff+frame.logLen]), string(buf[:n]), "%s: wrong data", what)
					missed++
					continue
				}
				fe := formatErr(t, err, what)
				require.ErrorIs(t, err, ErrBadFrame, what)
				require.Equal(t, frame.compOff, fe.Offset, what)
				require.Zero(t, n, what)
			}
		}
		if fixCRC {
			// zstd ignores only a few bits: a header's unused bit, the
			// window size of a frame under 1 KiB, slack in entropy tables.
			t.Logf("without the frame CRC, %d of %d frame byte changes go unnoticed (and harmless)", missed, 4*framesEnd)
			require.Less(t, missed, int(4*framesEnd)/100)
		}
	}
}

func TestTruncated(t *testing.T) {
	src := transcript(12, 20<<10, false)
	data, err := encode(src, 2000)
	require.NoError(t, err)
	for n := range len(data) {
		_, err := openBytes(t, data[:n])
		fe := formatErr(t, err, "cut to %d", n)
		if n < skipHeaderSize+FooterSize {
			require.ErrorIs(t, err, ErrTruncated)
			require.Zero(t, fe.Offset)
		}
	}
	// Data appended after the footer.
	_, err = openBytes(t, append(bytes.Clone(data), '\n'))
	formatErr(t, err)

	// A file cut after Open: the read notices.
	m := newMemFS(t)
	require.NoError(t, write(m, testPath, src, 0o600, 2000))
	r, err := Open(m, testPath)
	require.NoError(t, err)
	defer r.Close()
	f, err := m.OpenFile(testPath, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(int64(len(data)/2)))
	require.NoError(t, f.Close())
	last := r.table[len(r.table)-1]
	_, err = r.ReadAt(make([]byte, 10), last.logOff)
	fe := formatErr(t, err)
	require.ErrorIs(t, err, ErrTruncated)
	require.Equal(t, last.compOff, fe.Offset)
}

// rewrite returns data with its table replaced by entries (and the footer
// and skippable header updated to match, the CRC recomputed).
func rewrite(data []byte, framesEnd int, entries []entry, size int64) []byte {
	var table []byte
	for _, e := range entries {
		table = binary.LittleEndian.AppendUint64(table, uint64(e.compOff))
		table = binary.LittleEndian.AppendUint64(table, uint64(e.compLen))
		table = binary.LittleEndian.AppendUint64(table, uint64(e.logOff))
		table = binary.LittleEndian.AppendUint64(table, uint64(e.logLen))
		table = binary.LittleEndian.AppendUint32(table, e.crc)
	}
	out := bytes.Clone(data[:framesEnd])
	out = binary.LittleEndian.AppendUint32(out, SkippableMagic)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(table)+FooterSize))
	tableOff := len(out)
	out = append(out, table...)
	out = binary.LittleEndian.AppendUint64(out, uint64(tableOff))
	out = binary.LittleEndian.AppendUint64(out, uint64(len(table)))
	out = binary.LittleEndian.AppendUint64(out, uint64(size))
	out = binary.LittleEndian.AppendUint32(out, crc32.Checksum(table, castagnoli))
	out = binary.LittleEndian.AppendUint32(out, Version)
	return append(out, Magic...)
}

func TestBadFooterAndTable(t *testing.T) {
	src := transcript(13, 20<<10, false)
	data, err := encode(src, 2000)
	require.NoError(t, err)
	_, good := writeOpen(t, src, 2000)
	entries := good.table
	require.Greater(t, len(entries), 3)
	framesEnd := int(entries[len(entries)-1].compOff + entries[len(entries)-1].compLen)
	size := int64(len(src))
	footOff := len(data) - FooterSize
	tableOff := framesEnd + skipHeaderSize

	// rewrite reproduces the writer's bytes.
	require.Equal(t, data, rewrite(data, framesEnd, entries, size))

	// Flipping bit 2 of the size lowers it by 4 when the bit is set (the
	// last block overruns the size) and raises it otherwise (the blocks
	// end early).
	sizeFlipOffset := tableOff
	if data[footOff+16]&0x04 != 0 {
		sizeFlipOffset = tableOff + (len(entries)-1)*EntrySize
	}
	flip := func(pos int) []byte {
		b := bytes.Clone(data)
		b[pos] ^= 0x04
		return b
	}
	with := func(f func(es []entry)) []entry {
		es := append([]entry(nil), entries...)
		f(es)
		return es
	}
	for _, tc := range []struct {
		name   string
		data   []byte
		want   error
		offset int
	}{
		{"bad magic", flip(len(data) - 1), ErrBadMagic, footOff + 32},
		{"not a chunk", bytes.Repeat([]byte("{}\n"), 100), ErrBadMagic, 300 - FooterSize + 32},
		{"version", flip(footOff + 28), ErrUnsupportedVersion, footOff + 28},
		{"table crc in footer", flip(footOff + 25), ErrTableChecksum, tableOff},
		{"table entry", flip(tableOff + EntrySize + 3), ErrTableChecksum, tableOff},
		{"table offset", flip(footOff), ErrBadTable, footOff},
		{"table length", flip(footOff + 8), ErrBadTable, footOff},
		{"logical size", flip(footOff + 16), ErrBadTable, sizeFlipOffset},
		{"logical size top bit", func() []byte { b := bytes.Clone(data); b[footOff+23] ^= 0x80; return b }(), ErrBadTable, footOff + 16},
		{"skippable magic", flip(framesEnd), ErrBadTable, framesEnd},
		{"skippable length", flip(framesEnd + 4), ErrBadTable, framesEnd},
		{"gap between frames", rewrite(data, framesEnd, with(func(es []entry) { es[1].compOff++; es[1].compLen-- }), size), ErrBadTable, tableOff + EntrySize},
		{"blocks overlap", rewrite(data, framesEnd, with(func(es []entry) { es[2].logOff-- }), size), ErrBadTable, tableOff + 2*EntrySize},
		{"empty frame", rewrite(data, framesEnd, with(func(es []entry) { es[1].logLen = 0 }), size), ErrBadTable, tableOff + EntrySize},
		{"frame past the table", rewrite(data, framesEnd, with(func(es []entry) { es[len(es)-1].compLen++ }), size), ErrBadTable, tableOff + (len(entries)-1)*EntrySize},
		{"frames end early", rewrite(data, framesEnd, with(func(es []entry) { es[len(es)-1].compLen-- }), size), ErrBadTable, tableOff},
		{"block past the size", rewrite(data, framesEnd, entries, size-1), ErrBadTable, tableOff + (len(entries)-1)*EntrySize},
		{"impossible ratio", rewrite(data, framesEnd, with(func(es []entry) { es[len(es)-1].logLen = es[len(es)-1].compLen*maxBlockPerByte + 1 }), size-entries[len(entries)-1].logLen+entries[len(entries)-1].compLen*maxBlockPerByte+1), ErrBadTable, tableOff + (len(entries)-1)*EntrySize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openBytes(t, tc.data)
			fe := formatErr(t, err)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, int64(tc.offset), fe.Offset)
		})
	}
}

// TestFrameHeaderChecks builds tables that pass Open but whose frames lack
// what the format requires.
func TestFrameHeaderChecks(t *testing.T) {
	block := []byte(strings.Repeat(`{"a":"some text here"}`+"\n", 100))
	noCRC, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(false))
	require.NoError(t, err)
	defer noCRC.Close()
	withCRC := encoder()
	one := func(frame []byte, logLen int64) []byte {
		return rewrite(frame, len(frame), []entry{{0, int64(len(frame)), 0, logLen, crc32.Checksum(frame, castagnoli)}}, logLen)
	}
	skippable := binary.LittleEndian.AppendUint32(nil, 0x184D2A50)
	skippable = binary.LittleEndian.AppendUint32(skippable, 4)
	skippable = append(skippable, "abcd"...)
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"no checksum", one(noCRC.EncodeAll(block, nil), int64(len(block)))},
		{"wrong content size", one(withCRC.EncodeAll(block[:len(block)-1], nil), int64(len(block)))},
		{"skippable frame", one(skippable, 10)},
		{"a second frame", one(withCRC.EncodeAll(block[:1], withCRC.EncodeAll(block, nil)), int64(len(block)))},
		{"garbage", one([]byte("not zstd at all"), 5)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := openBytes(t, tc.data)
			require.NoError(t, err)
			defer r.Close()
			_, err = r.ReadAt(make([]byte, 1), 0)
			fe := formatErr(t, err)
			require.ErrorIs(t, err, ErrBadFrame)
			require.Zero(t, fe.Offset)
		})
	}
}

func TestWriteDurable(t *testing.T) {
	src := transcript(14, 300<<10, true)
	m := newMemFS(t)
	require.NoError(t, Write(m, testPath, src, 0o640))

	for _, mode := range vfs.CrashModes {
		c := m.CrashClone(mode, 1)
		names, err := c.ReadDir("/s/chunks")
		require.NoError(t, err)
		require.Equal(t, []string{"000000.zst"}, names, mode)
		r, err := Open(c, testPath)
		require.NoError(t, err, mode)
		require.Equal(t, string(src), string(readAll(t, r)), mode)
		require.NoError(t, r.Close())
	}
	fi, err := m.Stat(testPath)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o640), fi.Mode().Perm())

	// Replacing the file: the new content, durably.
	src2 := transcript(15, 10<<10, false)
	require.NoError(t, Write(m, testPath, src2, 0o640))
	r, err := Open(m.CrashClone(vfs.KeepSynced, 0), testPath)
	require.NoError(t, err)
	require.Equal(t, string(src2), string(readAll(t, r)))
	require.NoError(t, r.Close())
}

// crashFS takes a crash clone of a MemFS before every mutating operation.
type crashFS struct {
	*vfs.MemFS
	clones []*vfs.MemFS
}

func (c *crashFS) crash() {
	for i, mode := range vfs.CrashModes {
		c.clones = append(c.clones, c.MemFS.CrashClone(mode, uint64(len(c.clones)+i)))
	}
}

func (c *crashFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	c.crash()
	f, err := c.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &crashFile{File: f, c: c}, nil
}
func (c *crashFS) Rename(o, n string) error               { c.crash(); return c.MemFS.Rename(o, n) }
func (c *crashFS) Remove(name string) error               { c.crash(); return c.MemFS.Remove(name) }
func (c *crashFS) SyncDir(name string) error              { c.crash(); return c.MemFS.SyncDir(name) }
func (c *crashFS) MkdirAll(n string, p fs.FileMode) error { c.crash(); return c.MemFS.MkdirAll(n, p) }

type crashFile struct {
	vfs.File
	c *crashFS
}

func (f *crashFile) Write(p []byte) (int, error)            { f.c.crash(); return f.File.Write(p) }
func (f *crashFile) WriteAt(p []byte, o int64) (int, error) { f.c.crash(); return f.File.WriteAt(p, o) }
func (f *crashFile) Sync() error                            { f.c.crash(); return f.File.Sync() }
func (f *crashFile) Truncate(n int64) error                 { f.c.crash(); return f.File.Truncate(n) }
func (f *crashFile) Close() error                           { f.c.crash(); return f.File.Close() }

// TestWriteCrash loses power before every operation of a Write that
// replaces an existing compressed chunk, and after it: the final name
// always holds the old or the new content, whole.
func TestWriteCrash(t *testing.T) {
	old := transcript(16, 50<<10, false)
	src := transcript(17, 150<<10, false)
	c := &crashFS{MemFS: newMemFS(t)}
	require.NoError(t, Write(c.MemFS, testPath, old, 0o600))
	require.NoError(t, Write(c, testPath, src, 0o600))
	c.crash()
	require.Greater(t, len(c.clones), 5*len(vfs.CrashModes))
	sawNew := false
	for i, clone := range c.clones {
		r, err := Open(clone, testPath)
		require.NoError(t, err, "clone %d", i)
		got := string(readAll(t, r))
		require.NoError(t, r.Close())
		require.True(t, got == string(old) || got == string(src), "clone %d holds neither version", i)
		sawNew = sawNew || got == string(src)
	}
	require.True(t, sawNew)
	// After the last operation every crash keeps the new file and no
	// temporary one.
	for _, clone := range c.clones[len(c.clones)-len(vfs.CrashModes):] {
		names, err := clone.ReadDir("/s/chunks")
		require.NoError(t, err)
		require.Equal(t, []string{"000000.zst"}, names)
		r, err := Open(clone, testPath)
		require.NoError(t, err)
		require.Equal(t, string(src), string(readAll(t, r)))
		require.NoError(t, r.Close())
	}
}

func TestWriteErrors(t *testing.T) {
	src := transcript(18, 20<<10, false)
	injected := errors.New("injected")
	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir} {
		t.Run(string(op), func(t *testing.T) {
			m := newMemFS(t)
			m.SetFault(func(o vfs.Op, path string) error {
				if o == op {
					return injected
				}
				return nil
			})
			err := Write(m, testPath, src, 0o600)
			require.ErrorIs(t, err, injected)
			m.SetFault(nil)
			names, err := m.ReadDir("/s/chunks")
			require.NoError(t, err)
			if op == vfs.OpSyncDir {
				// Renamed, but not known durable.
				require.Equal(t, []string{"000000.zst"}, names)
				require.Empty(t, mustReadDir(t, m.CrashClone(vfs.KeepSynced, 0), "/s/chunks"))
			} else {
				require.Empty(t, names, "the temporary file is removed")
			}
		})
	}
}

func mustReadDir(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	return names
}

func TestOpenMissing(t *testing.T) {
	_, err := Open(newMemFS(t), testPath)
	require.ErrorIs(t, err, fs.ErrNotExist)
	var fe *FormatError
	require.False(t, errors.As(err, &fe))
}

// TestSeedFile checks testdata/seed.zst, a file in the format written once
// (go test -run TestSeedFile -update rewrites it): it must still read back
// as testdata/seed.jsonl, which keeps the reader compatible with files
// already on disk. It also seeds FuzzOpenRead.
func TestSeedFile(t *testing.T) {
	src, err := os.ReadFile("testdata/seed.jsonl")
	require.NoError(t, err)
	if *update {
		require.NoError(t, write(vfs.Default, "testdata/seed.zst", src, 0o644, 512))
	}
	r, err := Open(vfs.Default, "testdata/seed.zst")
	require.NoError(t, err)
	defer r.Close()
	require.Greater(t, len(r.table), 3)
	require.Equal(t, string(src), string(readAll(t, r)))

	// A plain streaming zstd decoder, which knows nothing of the frame
	// table, reads the whole file as the plain chunk (the table and footer
	// sit in a skippable frame). "zstd -d" does the same.
	file, err := os.ReadFile(filepath.Join("testdata", "seed.zst"))
	require.NoError(t, err)
	dec, err := zstd.NewReader(bytes.NewReader(file))
	require.NoError(t, err)
	defer dec.Close()
	out, err := io.ReadAll(dec)
	require.NoError(t, err)
	require.Equal(t, string(src), string(out))
}
