package zchunk

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

var update = flag.Bool("update", false, "rewrite testdata/seed.zst from testdata/seed.jsonl and testdata/seed.meta")

const testPath = "/s/chunks/000000.zst"

var le = binary.LittleEndian

// testSize returns the size of a long test loop, read from the
// environment variable name: def when it is unset or empty, the number it
// holds (a positive integer), or all when it says "all" (the loop's full
// size). Anything else fails the test. The loops sized this way run a
// sample by default, so that go test ./... stays quick; .ci/run asks for
// their full sizes in a separate step.
func testSize(t testing.TB, name string, def, all int) int {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	switch {
	case v == "":
		return def
	case strings.EqualFold(v, "all"):
		return all
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number or \"all\"", name, v)
	}
	return n
}

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

// writeOpen compresses src with blocks of blockSize, and meta, into a new
// MemFS and opens it.
func writeOpen(t testing.TB, src, meta []byte, blockSize int) (*vfs.MemFS, *Reader) {
	t.Helper()
	m := newMemFS(t)
	require.NoError(t, write(m, testPath, src, meta, 0o600, blockSize))
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

// indexLines returns metadata like the store embeds: one index line per
// line of src, the line's members up to its record, then its location.
func indexLines(src []byte) []byte {
	var out []byte
	for _, s := range lineSpans(src) {
		line := src[s[0]:s[1]]
		head := line
		if i := bytes.Index(line, []byte(`,"record":`)); i >= 0 {
			head = line[:i]
		} else {
			head = []byte(`{"id":"none"`)
		}
		out = append(out, head...)
		out = fmt.Appendf(out, `,"size":%d,"location":{"chunk":1,"offset":%d,"length":%d},"crc":"%08x"}`+"\n",
			len(line)/2, s[0], len(line), crc32.Checksum(line, castagnoli))
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

// zstdStream decompresses data as a standard streaming zstd decoder does,
// knowing nothing of the frame table.
func zstdStream(t *testing.T, data []byte) []byte {
	t.Helper()
	dec, err := zstd.NewReader(bytes.NewReader(data))
	require.NoError(t, err)
	defer dec.Close()
	plain, err := io.ReadAll(dec)
	require.NoError(t, err)
	return plain
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
		for _, mc := range []struct {
			name string
			meta []byte
		}{
			{"no meta", nil},
			{"one byte of meta", []byte("m")},
			{"index lines as meta", append(indexLines(tc.src), "end\n"...)},
		} {
			t.Run(tc.name+", "+mc.name, func(t *testing.T) {
				m, r := writeOpen(t, tc.src, mc.meta, BlockSize)
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
				meta, err := r.Meta()
				require.NoError(t, err)
				if len(mc.meta) == 0 {
					assert.Nil(t, meta)
				} else {
					assert.Equal(t, string(mc.meta), string(meta))
				}
				// A standard zstd decoder sees the whole file as the plain
				// chunk: the meta frame is inside the skippable frame.
				data, err := vfs.ReadFile(m, testPath)
				require.NoError(t, err)
				assert.Equal(t, string(tc.src), string(zstdStream(t, data)))
			})
		}
	}

	t.Run("realistic has a line longer than BlockSize", func(t *testing.T) {
		_, r := writeOpen(t, realistic, nil, BlockSize)
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
	_, r := writeOpen(t, nil, nil, BlockSize)
	require.Zero(t, r.Size())
	require.Empty(t, r.table)
	n, err := r.ReadAt(make([]byte, 1), 0)
	require.Equal(t, 0, n)
	require.ErrorIs(t, err, io.EOF)
	meta, err := r.Meta()
	require.NoError(t, err)
	require.Nil(t, meta)
	data, err := encode(nil, nil, BlockSize)
	require.NoError(t, err)
	require.Len(t, data, skipHeaderSize+FooterSize)
	require.Len(t, data, 76, "the package comment gives this size")
}

// TestMeta covers the metadata section: its absence, its presence without
// data, its sizes, and that every call returns a fresh copy.
func TestMeta(t *testing.T) {
	src := transcript(20, 50<<10, false)

	t.Run("nil and empty are the same: no meta frame", func(t *testing.T) {
		withNil, err := encode(src, nil, 4<<10)
		require.NoError(t, err)
		withEmpty, err := encode(src, []byte{}, 4<<10)
		require.NoError(t, err)
		require.Equal(t, withNil, withEmpty)
		_, r := writeOpen(t, src, []byte{}, 4<<10)
		require.Zero(t, r.metaLen)
		meta, err := r.Meta()
		require.NoError(t, err)
		require.Nil(t, meta)
	})

	t.Run("meta reads nothing when there is none", func(t *testing.T) {
		m := newMemFS(t)
		require.NoError(t, write(m, testPath, src, nil, 0o600, 4<<10))
		c := vfs.NewCounting(m)
		r, err := Open(c, testPath)
		require.NoError(t, err)
		defer r.Close()
		before := c.Stats()[testPath]
		meta, err := r.Meta()
		require.NoError(t, err)
		require.Nil(t, meta)
		require.Equal(t, before, c.Stats()[testPath])
	})

	t.Run("MetaWith reuses its buffer and reads what Meta reads", func(t *testing.T) {
		var b MetaBuffer
		var first []byte
		for i, size := range []int{40 << 10, 42 << 10, 20 << 10} { // the second is a little longer
			meta := indexLines(transcript(20, size, false))
			_, r := writeOpen(t, src, meta, 4<<10)
			require.Equal(t, int64(len(meta)), r.MetaSize())
			got, err := r.MetaWith(&b)
			require.NoError(t, err)
			require.Equal(t, string(meta), string(got))
			if i == 0 {
				first = got[:1]
			} else {
				assert.Same(t, &first[0], &got[0], "read %d reuses the array", i)
			}
			alone, err := r.Meta()
			require.NoError(t, err)
			require.Equal(t, string(meta), string(alone))
			assert.NotSame(t, &got[0], &alone[0], "Meta returns its own slice")
		}
	})

	t.Run("meta with an empty data section", func(t *testing.T) {
		meta := indexLines(src)
		m, r := writeOpen(t, nil, meta, BlockSize)
		require.Zero(t, r.Size())
		require.Empty(t, r.table)
		n, err := r.ReadAt(make([]byte, 1), 0)
		require.Zero(t, n)
		require.ErrorIs(t, err, io.EOF)
		got, err := r.Meta()
		require.NoError(t, err)
		require.Equal(t, string(meta), string(got))
		// The file is the skippable frame alone: its header, the meta
		// frame, an empty table and the footer.
		data, err := vfs.ReadFile(m, testPath)
		require.NoError(t, err)
		require.Equal(t, int64(skipHeaderSize), r.metaOff)
		require.Len(t, data, skipHeaderSize+int(r.metaLen)+FooterSize)
		require.Empty(t, zstdStream(t, data))
	})

	rng := rand.New(rand.NewPCG(21, 22))
	random := make([]byte, 300<<10) // incompressible, several zstd blocks
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	for _, tc := range []struct {
		name string
		meta []byte
	}{
		{"one byte", []byte{0}},
		{"under 256 bytes: no content size in the zstd header", []byte(strings.Repeat("ab", 100))},
		{"incompressible, larger than a zstd block", random},
		{"compressible, larger than the zstd window", bytes.Repeat(indexLines(src), (9<<20)/len(indexLines(src))+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, r := writeOpen(t, src, tc.meta, 4<<10)
			require.Equal(t, int64(len(tc.meta)), r.metaSize)
			got, err := r.Meta()
			require.NoError(t, err)
			require.Equal(t, tc.meta, got)
			require.Equal(t, string(src), string(readAll(t, r)))
		})
	}

	t.Run("each call returns a new copy", func(t *testing.T) {
		meta := indexLines(src)
		_, r := writeOpen(t, src, meta, 4<<10)
		got, err := r.Meta()
		require.NoError(t, err)
		require.Equal(t, meta, got)
		got[0] ^= 0xff
		again, err := r.Meta()
		require.NoError(t, err)
		require.Equal(t, meta, again)
	})
}

// TestLayout checks the layout of the package comment on a file with
// metadata and one without, reading the bytes independently of Open.
func TestLayout(t *testing.T) {
	src := transcript(23, 20<<10, false)
	meta := indexLines(src)
	for _, withMeta := range []bool{false, true} {
		t.Run(fmt.Sprintf("meta %t", withMeta), func(t *testing.T) {
			var want []byte
			if withMeta {
				want = meta
			}
			data, err := encode(src, want, 2000)
			require.NoError(t, err)
			_, r := writeOpen(t, src, want, 2000)
			last := r.table[len(r.table)-1]
			framesEnd := uint64(last.compOff + last.compLen)
			f := data[len(data)-FooterSize:]
			tableOff, tableLen, size := le.Uint64(f[0:]), le.Uint64(f[8:]), le.Uint64(f[16:])
			tableCRC, metaCRC := le.Uint32(f[24:]), le.Uint32(f[28:])
			metaOff, metaLen, metaSize := le.Uint64(f[32:]), le.Uint64(f[40:]), le.Uint64(f[48:])
			assert.Equal(t, uint32(Version), le.Uint32(f[56:]))
			assert.Equal(t, Magic, string(f[60:]))
			assert.Equal(t, uint64(len(src)), size)
			assert.Equal(t, uint64(len(r.table)*EntrySize), tableLen)
			assert.Equal(t, uint64(len(data)-FooterSize), tableOff+tableLen)
			assert.Equal(t, crc32.Checksum(data[tableOff:tableOff+tableLen], castagnoli), tableCRC)
			assert.Equal(t, uint32(SkippableMagic), le.Uint32(data[framesEnd:]))
			assert.Equal(t, uint32(metaLen+tableLen+FooterSize), le.Uint32(data[framesEnd+4:]))
			if !withMeta {
				assert.Zero(t, metaOff)
				assert.Zero(t, metaLen)
				assert.Zero(t, metaSize)
				assert.Zero(t, metaCRC)
				assert.Equal(t, framesEnd+skipHeaderSize, tableOff)
				return
			}
			assert.Equal(t, framesEnd+skipHeaderSize, metaOff)
			assert.Equal(t, tableOff, metaOff+metaLen)
			assert.Equal(t, uint64(len(meta)), metaSize)
			frame := data[metaOff : metaOff+metaLen]
			assert.Equal(t, crc32.Checksum(frame, castagnoli), metaCRC)
			var h zstd.Header
			require.NoError(t, h.Decode(frame))
			assert.True(t, h.HasCheckSum)
			assert.Equal(t, uint64(len(meta)), h.FrameContentSize)
			// One zstd frame, decoded by a decoder of its own.
			dec, err := zstd.NewReader(nil)
			require.NoError(t, err)
			defer dec.Close()
			got, err := dec.DecodeAll(frame, nil)
			require.NoError(t, err)
			assert.Equal(t, string(meta), string(got))
			assert.Equal(t, int(metaLen), len(encoder().EncodeAll(meta, nil)))
		})
	}
}

// zstdBlocks is FrameBlocks, failing t on an error; it also checks the
// frame header's size (6 to 10 bytes with a checksum and a content size).
func zstdBlocks(t *testing.T, frame []byte) (headerSize int, types []int) {
	t.Helper()
	headerSize, types, err := FrameBlocks(frame)
	require.NoError(t, err)
	require.True(t, headerSize >= 6 && headerSize <= 10, "frame header of %d bytes", headerSize)
	return headerSize, types
}

// randomLines returns random bytes cut into lines of the given lengths
// (newline included, and no other newline).
func randomLines(seed uint64, lengths ...int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	var out []byte
	for _, n := range lengths {
		for range n - 1 {
			c := byte(rng.Uint32())
			if c == '\n' {
				c = 0
			}
			out = append(out, c)
		}
		out = append(out, '\n')
	}
	return out
}

// TestIncompressibleFrames: a block of random bytes is a frame of raw
// blocks holding it as it is: the block plus the frame header, 3 bytes per
// 128 KiB and the 4-byte checksum, nothing more (14 bytes for a 64 KiB
// block). Blocks that compress a little or not at all, base64 and a mix of
// random bytes and text, stay within the same bound.
func TestIncompressibleFrames(t *testing.T) {
	bound := func(n, headerSize int) int { return n + headerSize + 3*((n+128<<10-1)/(128<<10)) + 4 }
	frames := func(t *testing.T, src []byte) (data []byte, r *Reader) {
		m, r := writeOpen(t, src, nil, BlockSize)
		require.Equal(t, string(src), string(readAll(t, r)))
		data, err := vfs.ReadFile(m, testPath)
		require.NoError(t, err)
		return data, r
	}
	t.Run("random", func(t *testing.T) {
		// Lines of 300 bytes (blocks of a few hundred lines), one line of
		// exactly BlockSize, one of 300 KiB (three zstd blocks in one frame)
		// and a last short block.
		var lengths []int
		for range 500 {
			lengths = append(lengths, 300)
		}
		lengths = append(lengths, BlockSize, 300<<10, 1000, 200)
		src := randomLines(9, lengths...)
		data, r := frames(t, src)
		require.Greater(t, len(r.table), 4)
		full := 0
		for i, e := range r.table {
			frame := data[e.compOff : e.compOff+e.compLen]
			headerSize, types := zstdBlocks(t, frame)
			assert.Equal(t, bound(int(e.logLen), headerSize), len(frame), "frame %d", i)
			for j, typ := range types {
				assert.Zero(t, typ, "frame %d block %d is not raw", i, j)
			}
			if e.logLen == BlockSize {
				full++
				assert.Equal(t, BlockSize+14, len(frame))
			}
		}
		require.Equal(t, 1, full, "frames of exactly BlockSize")
	})
	t.Run("base64 and mixed", func(t *testing.T) {
		text := transcript(3, 100<<10, false)
		src := slices.Concat(base64Lines(4, 20, 30<<10), randomLines(5, 70<<10, 20<<10), text, base64Lines(6, 1, 200<<10))
		data, r := frames(t, src)
		seen := map[int]bool{}
		for i, e := range r.table {
			frame := data[e.compOff : e.compOff+e.compLen]
			headerSize, types := zstdBlocks(t, frame)
			assert.LessOrEqual(t, len(frame), bound(int(e.logLen), headerSize), "frame %d", i)
			for _, typ := range types {
				seen[typ] = true
			}
		}
		// Each block is raw or compressed, whichever is shorter.
		assert.True(t, seen[0] && seen[2], "block types %v", seen)
	})
}

// base64Lines returns n JSON lines, each a record of size bytes of base64
// of random bytes: a deterministic stand-in for the base64 images (PNG,
// JPEG: already compressed) of agent transcripts.
func base64Lines(seed uint64, n, size int) []byte {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	var out []byte
	for range n {
		raw := make([]byte, base64.StdEncoding.DecodedLen(size))
		for i := range raw {
			raw[i] = byte(rng.Uint32())
		}
		out = fmt.Appendf(out, `{"type":"image","source":{"type":"base64","media_type":"image/png","data":"%s"}}`+"\n", base64.StdEncoding.EncodeToString(raw)[:size])
	}
	return out
}

// TestBase64Compressed: sealed chunks of base64 data, which zstd's matches
// do not shorten, are stored at under 0.8 of their size, in blocks and in
// a line longer than BlockSize alike: literals are entropy coded (about 6
// bits each), not kept raw. Without WithAllLitEntropyCompression they were
// stored at 1.0.
func TestBase64Compressed(t *testing.T) {
	for _, src := range [][]byte{base64Lines(7, 40, 20<<10), base64Lines(8, 1, 1<<20)} {
		m, r := writeOpen(t, src, nil, BlockSize)
		require.Equal(t, string(src), string(readAll(t, r)))
		fi, err := m.Stat(testPath)
		require.NoError(t, err)
		assert.Less(t, float64(fi.Size())/float64(len(src)), 0.8, "stored/raw of %d bytes of base64 in %d frames", len(src), len(r.table))
	}
}

// TestZstdCLI runs "zstd -d" on compressed chunks: it must print the plain
// chunk, with or without metadata, which it skips. Without a zstd command
// it skips, except under CI (see inCI), where it fails: .ci/run installs
// Debian's zstd.
func TestZstdCLI(t *testing.T) {
	bin, err := exec.LookPath("zstd")
	if err != nil {
		if inCI() {
			t.Fatalf("no zstd command (%v): CI must run this test; install it (Debian: apt-get install zstd), as .ci/run does", err)
		}
		t.Skip("no zstd command; under CI this fails")
	}
	src := transcript(24, 200<<10, true)
	dir := t.TempDir()
	for i, tc := range []struct{ src, meta []byte }{
		{src, nil},
		{src, indexLines(src)},
		{nil, indexLines(src)},
		{nil, nil},
	} {
		path := filepath.Join(dir, fmt.Sprintf("%d.zst", i))
		require.NoError(t, Write(vfs.Default, path, tc.src, tc.meta, 0o600))
		out, err := exec.Command(bin, "-d", "-c", "-q", path).Output()
		require.NoError(t, err, "case %d", i)
		assert.Equal(t, string(tc.src), string(out), "case %d", i)
	}
}

// inCI reports whether the tests run under CI: the environment variable CI
// is set to anything but "", "0" or "false" (CI services set CI=true, and
// .ci/run exports it). Tests that skip for a missing tool fail then.
func inCI() bool {
	v := strings.TrimSpace(os.Getenv("CI"))
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// TestBlock: Block names the block that holds an offset, by the lengths
// blocks() chose, and (Size, Size) past the end.
func TestBlock(t *testing.T) {
	src := []byte("a\nabcdefgh\nb\n")
	_, r := writeOpen(t, src, nil, 4)
	ends := blocks(src, 4) // 2, 11, 13
	start := int64(0)
	for _, end := range ends {
		for off := start; off < int64(end); off++ {
			s, e := r.Block(off)
			assert.Equal(t, [2]int64{start, int64(end)}, [2]int64{s, e}, "offset %d", off)
		}
		start = int64(end)
	}
	for _, off := range []int64{13, 14, 100} {
		s, e := r.Block(off)
		assert.Equal(t, [2]int64{13, 13}, [2]int64{s, e}, "offset %d", off)
	}
}

func TestReadAtAcrossFrames(t *testing.T) {
	src := transcript(2, 200<<10, false)
	_, r := writeOpen(t, src, nil, 4<<10) // many frames
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
	_, r := writeOpen(t, src, nil, 4<<10)
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
	_, r := writeOpen(t, src, nil, BlockSize)
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
	_, r = writeOpen(t, src, nil, BlockSize)
	for _, s := range spans {
		buf := make([]byte, s[1]-s[0])
		_, err := r.ReadAt(buf, int64(s[0]))
		require.NoError(t, err)
	}
	require.Equal(t, int64(len(r.table)), r.decodes.Load())

	// The last frame holds one big line: a read of a whole frame is
	// decompressed in place, and the cache keeps the frame before it. A
	// second read inside the cached frame decompresses nothing; a second
	// read of the whole last frame decompresses it again.
	last := r.table[len(r.table)-1]
	s := spans[len(spans)-1]
	require.Equal(t, [2]int{int(last.logOff), int(last.logOff + last.logLen)}, s, "precondition: the last line is a frame")
	require.Equal(t, len(r.table)-2, r.cacheIdx)
	s = spans[len(spans)-2]
	before := r.decodes.Load()
	_, err := r.ReadAt(make([]byte, s[1]-s[0]), int64(s[0]))
	require.NoError(t, err)
	require.Equal(t, before, r.decodes.Load())
	s = spans[len(spans)-1]
	buf := make([]byte, s[1]-s[0])
	_, err = r.ReadAt(buf, int64(s[0]))
	require.NoError(t, err)
	require.Equal(t, before+1, r.decodes.Load())
	require.Equal(t, string(src[s[0]:s[1]]), string(buf))
}

// TestConcurrentReadAt reads lines, and now and then the metadata, from
// several goroutines at once.
func TestConcurrentReadAt(t *testing.T) {
	src := transcript(9, 300<<10, false)
	meta := indexLines(src)
	_, r := writeOpen(t, src, meta, 8<<10)
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
				if rng.IntN(50) == 0 {
					got, err := r.Meta()
					if err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, meta) {
						errs <- errors.New("meta differs")
						return
					}
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

// metaPart is a meta frame and what a footer says of it.
type metaPart struct {
	frame []byte // empty for none
	size  uint64 // the metadata length
	crc   uint32 // the meta frame's CRC-32C
}

// newMetaPart returns the meta frame of meta and its true length and CRC.
func newMetaPart(meta []byte) metaPart {
	frame := encoder().EncodeAll(meta, nil)
	return metaPart{frame, uint64(len(meta)), crc32.Checksum(frame, castagnoli)}
}

// metaOf returns the meta frame of data, a file whose footer is intact, and
// what the footer says of it.
func metaOf(data []byte) metaPart {
	f := data[len(data)-FooterSize:]
	off, n := le.Uint64(f[32:]), le.Uint64(f[40:])
	return metaPart{data[off : off+n], le.Uint64(f[48:]), le.Uint32(f[28:])}
}

// assemble lays out a file as the package comment describes, independently
// of encode: the frames, the skippable frame header, the meta frame if
// meta.frame is not empty, the table of entries with its CRC, and the
// footer.
func assemble(frames []byte, entries []entry, size int64, meta metaPart) []byte {
	var table []byte
	for _, e := range entries {
		table = le.AppendUint64(table, uint64(e.compOff))
		table = le.AppendUint64(table, uint64(e.compLen))
		table = le.AppendUint64(table, uint64(e.logOff))
		table = le.AppendUint64(table, uint64(e.logLen))
		table = le.AppendUint32(table, e.crc)
	}
	out := bytes.Clone(frames)
	out = le.AppendUint32(out, SkippableMagic)
	out = le.AppendUint32(out, uint32(len(meta.frame)+len(table)+FooterSize))
	metaOff := 0
	if len(meta.frame) > 0 {
		metaOff = len(out)
	}
	out = append(out, meta.frame...)
	tableOff := len(out)
	out = append(out, table...)
	out = le.AppendUint64(out, uint64(tableOff))
	out = le.AppendUint64(out, uint64(len(table)))
	out = le.AppendUint64(out, uint64(size))
	out = le.AppendUint32(out, crc32.Checksum(table, castagnoli))
	out = le.AppendUint32(out, meta.crc)
	out = le.AppendUint64(out, uint64(metaOff))
	out = le.AppendUint64(out, uint64(len(meta.frame)))
	out = le.AppendUint64(out, meta.size)
	out = le.AppendUint32(out, Version)
	return append(out, Magic...)
}

// rewrite returns data, a file whose footer is intact, with its table
// replaced by entries and its logical size by size (the footer and the
// skippable header updated to match, the table CRC recomputed), keeping
// its frames, data[:framesEnd], and its meta frame.
func rewrite(data []byte, framesEnd int, entries []entry, size int64) []byte {
	return assemble(data[:framesEnd], entries, size, metaOf(data))
}

func TestCorruptFrame(t *testing.T) {
	src := transcript(10, 300<<10, false)
	meta := indexLines(src)
	data, err := encode(src, meta, BlockSize)
	require.NoError(t, err)
	_, good := writeOpen(t, src, meta, BlockSize)
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

	// The other frames and the metadata still read.
	for i, o := range good.table {
		if i == k {
			continue
		}
		n, err := r.ReadAt(buf, o.logOff)
		require.NoError(t, err, "frame %d", i)
		require.Equal(t, string(src[o.logOff:o.logOff+int64(n)]), string(buf[:n]))
	}
	got, err := r.Meta()
	require.NoError(t, err)
	require.Equal(t, string(meta), string(got))

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

// TestCorruptMeta damages the meta frame, and the footer fields that
// describe it but that Open cannot check: Open succeeds, the data reads,
// and Meta reports the damage at the meta frame's offset.
func TestCorruptMeta(t *testing.T) {
	src := transcript(25, 100<<10, false)
	meta := indexLines(src)
	data, err := encode(src, meta, 8<<10)
	require.NoError(t, err)
	_, good := writeOpen(t, src, meta, 8<<10)
	require.Greater(t, len(good.table), 3)
	require.Greater(t, len(meta), 256, "the zstd header holds the content size")
	last := good.table[len(good.table)-1]
	framesEnd := int(last.compOff + last.compLen)
	footOff := len(data) - FooterSize
	mp := metaOf(data)
	flip := func(pos int, mask byte) []byte {
		b := bytes.Clone(data)
		b[pos] ^= mask
		return b
	}
	withMeta := func(p metaPart) []byte { return assemble(data[:framesEnd], good.table, int64(len(src)), p) }
	// The meta frame with its zstd content checksum (its last 4 bytes)
	// damaged and its CRC-32C fixed up to match.
	badSum := bytes.Clone(mp.frame)
	badSum[len(badSum)-1] ^= 0x01
	for _, tc := range []struct {
		name string
		data []byte
		want error  // wrapped as well as ErrBadMeta, if not nil
		text string // in the message
	}{
		{"a byte of the meta frame", flip(int(good.metaOff)+len(mp.frame)/2, 0x01), nil, "CRC-32C"},
		{"its first byte", flip(int(good.metaOff), 0x80), nil, "CRC-32C"},
		{"its CRC-32C in the footer", flip(footOff+28, 0x01), nil, "footer says"},
		{"metadata length one less", withMeta(metaPart{mp.frame, mp.size - 1, mp.crc}), nil, "content size"},
		{"metadata length one more", withMeta(metaPart{mp.frame, mp.size + 1, mp.crc}), nil, "content size"},
		{"content checksum, CRC-32C fixed up", withMeta(metaPart{badSum, mp.size, crc32.Checksum(badSum, castagnoli)}), zstd.ErrCRCMismatch, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := openBytes(t, tc.data)
			require.NoError(t, err, "Open does not read the meta frame")
			defer r.Close()
			require.Equal(t, string(src), string(readAll(t, r)), "the data still reads")
			got, err := r.Meta()
			assert.Nil(t, got)
			fe := formatErr(t, err)
			assert.Equal(t, good.metaOff, fe.Offset)
			assert.ErrorIs(t, err, ErrBadMeta)
			assert.NotErrorIs(t, err, ErrBadFrame)
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			assert.Contains(t, err.Error(), tc.text)
			assert.Contains(t, err.Error(), fmt.Sprintf("offset %d", good.metaOff))
		})
	}
}

// TestMetaChecks builds files that pass Open but whose meta frame lacks
// what the format requires, or disagrees with the footer.
func TestMetaChecks(t *testing.T) {
	block := []byte(strings.Repeat(`{"a":"some text here"}`+"\n", 100))
	frame := encoder().EncodeAll(block, nil)
	entries := []entry{{0, int64(len(frame)), 0, int64(len(block)), crc32.Checksum(frame, castagnoli)}}
	meta := []byte(strings.Repeat(`{"id":"x","location":{"chunk":1}}`+"\n", 30))
	small := meta[:100] // no content size in its zstd header
	noCRC, err := zstd.NewWriter(nil, zstd.WithEncoderCRC(false))
	require.NoError(t, err)
	defer noCRC.Close()
	withCRC := encoder()
	part := func(frame []byte, size int) metaPart {
		return metaPart{frame, uint64(size), crc32.Checksum(frame, castagnoli)}
	}
	skippable := le.AppendUint32(nil, 0x184D2A50)
	skippable = le.AppendUint32(skippable, 4)
	skippable = append(skippable, "abcd"...)
	for _, tc := range []struct {
		name string
		meta metaPart
		text string // in the message
	}{
		{"no checksum", part(noCRC.EncodeAll(meta, nil), len(meta)), "no content checksum"},
		{"wrong content size", part(withCRC.EncodeAll(meta[:len(meta)-1], nil), len(meta)), "content size"},
		{"no content size, longer than the footer says", part(withCRC.EncodeAll(small, nil), len(small)-1), ""},
		{"no content size, shorter than the footer says", part(withCRC.EncodeAll(small, nil), len(small)+1), "decompressed 100 bytes, footer says 101"},
		{"skippable frame", part(skippable, 10), "skippable"},
		{"a second frame", part(withCRC.EncodeAll(meta[:1], withCRC.EncodeAll(meta, nil)), len(meta)), ""},
		{"garbage", part([]byte("not zstd at all"), 5), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := openBytes(t, assemble(frame, entries, int64(len(block)), tc.meta))
			require.NoError(t, err)
			defer r.Close()
			require.Equal(t, string(block), string(readAll(t, r)))
			got, err := r.Meta()
			assert.Nil(t, got)
			fe := formatErr(t, err)
			assert.ErrorIs(t, err, ErrBadMeta)
			assert.Equal(t, int64(len(frame)+skipHeaderSize), fe.Offset)
			assert.Contains(t, err.Error(), tc.text)
		})
	}

	t.Run("a damaged length does not make Meta allocate it", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(26, 27))
		random := make([]byte, 40<<10) // compresses to more than MaxMetaSize/maxBlockPerByte
		for i := range random {
			random[i] = byte(rng.Uint32())
		}
		p := newMetaPart(random)
		p.size = MaxMetaSize + 1
		_, err := openBytes(t, assemble(frame, entries, int64(len(block)), p))
		fe := formatErr(t, err)
		require.ErrorIs(t, err, ErrBadTable)
		require.Equal(t, int64(len(frame)+skipHeaderSize+len(p.frame)+EntrySize+48), fe.Offset)
		p.size = MaxMetaSize
		r, err := openBytes(t, assemble(frame, entries, int64(len(block)), p))
		require.NoError(t, err)
		defer r.Close()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err = r.Meta()
		runtime.ReadMemStats(&after)
		formatErr(t, err)
		require.ErrorIs(t, err, ErrBadMeta)
		require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(MaxMetaSize/16))
	})
}

// flipsEnv sizes TestEveryByteFlip; by default it makes one change in
// flipsSample.
const (
	flipsEnv    = "SESSIONSTORE_FLIPS"
	flipsSample = 10
)

// TestEveryByteFlip flips the bytes of a small multi-frame file, with
// metadata and without, four ways: Open, the read of the damaged frame or
// Meta must report it, as a *FormatError at the right offset, and what
// reads without error must be right. Without metadata, Open must report
// every change outside the frames. Then it does the same with the damaged
// frame's CRC-32C (in the table, or in the footer for the meta frame)
// fixed up to match, leaving zstd's own checks alone: these may miss a
// change, but never return wrong data.
//
// SESSIONSTORE_FLIPS sets the number of changes per file: by default a
// tenth of the possible ones (every byte four ways: about 16,000 to
// 19,000), evenly spread over the file, the four ways taking turns, so
// every frame, the meta frame, the table and every field of the footer
// (each four bytes or more) are hit.
// "all", or a number at least the possible changes, flips every byte four
// ways, as .ci/run's long step does.
func TestEveryByteFlip(t *testing.T) {
	src := transcript(11, 3000, false)
	for _, meta := range [][]byte{nil, indexLines(src)} {
		t.Run(fmt.Sprintf("%d bytes of metadata", len(meta)), func(t *testing.T) {
			data, err := encode(src, meta, 700)
			require.NoError(t, err)
			_, good := writeOpen(t, src, meta, 700)
			require.Greater(t, len(good.table), 3)
			last := good.table[len(good.table)-1]
			framesEnd := last.compOff + last.compLen
			metaStart, metaEnd := good.metaOff, good.metaOff+good.metaLen // empty without metadata
			footOff := int64(len(data) - FooterSize)
			// onlyMeta reports whether pos is in one of the footer fields
			// that Open cannot check against the meta frame (the frame's
			// CRC-32C, the metadata length): Meta does.
			onlyMeta := func(pos int64) bool {
				return len(meta) > 0 && (pos >= footOff+28 && pos < footOff+32 || pos >= footOff+48 && pos < footOff+56)
			}
			frameAt := func(pos int64) (int, entry) {
				for i, e := range good.table {
					if pos >= e.compOff && pos < e.compOff+e.compLen {
						return i, e
					}
				}
				t.Fatalf("no frame at %d", pos)
				return 0, entry{}
			}
			var wantMeta []byte // what Meta returns for the file
			if len(meta) > 0 {
				wantMeta = meta
			}
			masks := []byte{0x01, 0x10, 0x80, 0xff}
			possible := len(masks) * len(data)
			// Change g of the possible ones (byte by byte, mask by mask)
			// is made if g*n mod possible < n: n changes, evenly spread.
			n := min(possible, testSize(t, flipsEnv, (possible+flipsSample-1)/flipsSample, possible))
			for _, fixCRC := range []bool{false, true} {
				missedFrames, missedMeta := 0, 0
				var made, frameChanges, metaChanges, g int
				for pos := range int64(len(data)) {
					for _, mask := range masks {
						pick := g*n%possible < n
						g++
						if !pick {
							continue
						}
						made++
						bad := bytes.Clone(data)
						bad[pos] ^= mask
						what := fmt.Sprintf("byte %d ^ %#x, CRC fixed %t", pos, mask, fixCRC)
						switch {
						case pos < framesEnd:
							frameChanges++
							i, frame := frameAt(pos)
							if fixCRC {
								entries := append([]entry(nil), good.table...)
								entries[i].crc = crc32.Checksum(bad[frame.compOff:frame.compOff+frame.compLen], castagnoli)
								bad = rewrite(bad, int(framesEnd), entries, int64(len(src)))
							}
							r, err := openBytes(t, bad)
							require.NoError(t, err, what)
							got, metaErr := r.Meta()
							buf := make([]byte, frame.logLen)
							n, err := r.ReadAt(buf, frame.logOff)
							r.Close()
							require.NoError(t, metaErr, what)
							require.Equal(t, wantMeta, got, what)
							if err == nil {
								require.True(t, fixCRC, "%s: not detected", what)
								require.Equal(t, string(src[frame.logOff:frame.logOff+frame.logLen]), string(buf[:n]), "%s: wrong data", what)
								missedFrames++
								continue
							}
							fe := formatErr(t, err, what)
							require.ErrorIs(t, err, ErrBadFrame, what)
							require.Equal(t, frame.compOff, fe.Offset, what)
							require.Zero(t, n, what)
						case pos >= metaStart && pos < metaEnd:
							metaChanges++
							if fixCRC {
								p := metaOf(bad)
								p.crc = crc32.Checksum(p.frame, castagnoli)
								bad = assemble(bad[:framesEnd], good.table, int64(len(src)), p)
							}
							r, err := openBytes(t, bad)
							require.NoError(t, err, what)
							require.Equal(t, string(src), string(readAll(t, r)), what)
							got, err := r.Meta()
							r.Close()
							if err == nil {
								require.True(t, fixCRC, "%s: not detected", what)
								require.Equal(t, string(meta), string(got), "%s: wrong metadata", what)
								missedMeta++
								continue
							}
							fe := formatErr(t, err, what)
							require.ErrorIs(t, err, ErrBadMeta, what)
							require.Equal(t, metaStart, fe.Offset, what)
							require.Nil(t, got, what)
						case fixCRC:
							continue
						case onlyMeta(pos):
							r, err := openBytes(t, bad)
							if err != nil {
								// A metadata length out of bounds.
								fe := formatErr(t, err, what)
								require.ErrorIs(t, err, ErrBadTable, what)
								require.Equal(t, footOff+48, fe.Offset, what)
								continue
							}
							require.Equal(t, string(src), string(readAll(t, r)), what)
							got, err := r.Meta()
							r.Close()
							fe := formatErr(t, err, what)
							require.ErrorIs(t, err, ErrBadMeta, what)
							require.Equal(t, metaStart, fe.Offset, what)
							require.Nil(t, got, what)
						default:
							// Skippable header, table, the other footer
							// fields: Open notices.
							_, err := openBytes(t, bad)
							formatErr(t, err, what)
						}
					}
				}
				if !fixCRC {
					t.Logf("byte changes: %d of %d possible (every byte four ways): %d in frames, %d in the meta frame, %d elsewhere",
						made, possible, frameChanges, metaChanges, made-frameChanges-metaChanges)
					if made < possible {
						t.Logf("a sample: %s=all flips every byte four ways", flipsEnv)
					}
				}
				if fixCRC {
					// zstd ignores only a few bits: a header's unused bit,
					// the window size of a frame under 1 KiB, slack in
					// entropy tables.
					t.Logf("without the CRC-32C, %d of %d frame byte changes and %d of %d meta frame byte changes go unnoticed (and harmless)",
						missedFrames, frameChanges, missedMeta, metaChanges)
					require.Less(t, missedFrames, max(1, frameChanges/100))
					require.LessOrEqual(t, missedMeta, metaChanges/100)
				}
			}
		})
	}
}

func TestTruncated(t *testing.T) {
	src := transcript(12, 20<<10, false)
	meta := indexLines(src)
	for _, m := range [][]byte{nil, meta} {
		data, err := encode(src, m, 2000)
		require.NoError(t, err)
		for n := range len(data) {
			_, err := openBytes(t, data[:n])
			fe := formatErr(t, err, "cut to %d", n)
			if n < skipHeaderSize+FooterSize {
				require.ErrorIs(t, err, ErrTruncated, "cut to %d", n)
				require.Zero(t, fe.Offset, "cut to %d", n)
			} else {
				// No magic where the footer should end.
				require.ErrorIs(t, err, ErrBadMagic, "cut to %d", n)
				require.Equal(t, int64(n-8), fe.Offset, "cut to %d", n)
			}
		}
		// Data appended after the footer.
		_, err = openBytes(t, append(bytes.Clone(data), '\n'))
		formatErr(t, err)
	}

	// A file cut after Open: the reads notice.
	m := newMemFS(t)
	require.NoError(t, write(m, testPath, src, meta, 0o600, 2000))
	r, err := Open(m, testPath)
	require.NoError(t, err)
	defer r.Close()
	fi, err := m.Stat(testPath)
	require.NoError(t, err)
	f, err := m.OpenFile(testPath, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(fi.Size()/2))
	require.NoError(t, f.Close())
	last := r.table[len(r.table)-1]
	_, err = r.ReadAt(make([]byte, 10), last.logOff)
	fe := formatErr(t, err)
	require.ErrorIs(t, err, ErrTruncated)
	require.Equal(t, last.compOff, fe.Offset)
	got, err := r.Meta()
	require.Nil(t, got)
	fe = formatErr(t, err)
	require.ErrorIs(t, err, ErrTruncated)
	require.Equal(t, r.metaOff, fe.Offset)
}

func TestBadFooterAndTable(t *testing.T) {
	src := transcript(13, 20<<10, false)
	data, err := encode(src, nil, 2000)
	require.NoError(t, err)
	_, good := writeOpen(t, src, nil, 2000)
	entries := good.table
	require.Greater(t, len(entries), 3)
	framesEnd := int(entries[len(entries)-1].compOff + entries[len(entries)-1].compLen)
	size := int64(len(src))
	footOff := len(data) - FooterSize
	tableOff := framesEnd + skipHeaderSize

	// The same chunk with metadata, the meta frame between the skippable
	// frame header and the table.
	meta := indexLines(src)
	dataM, err := encode(src, meta, 2000)
	require.NoError(t, err)
	mp := metaOf(dataM)
	footOffM := len(dataM) - FooterSize
	metaOff := framesEnd + skipHeaderSize
	tableOffM := metaOff + len(mp.frame)

	// assemble and rewrite reproduce the writer's bytes.
	require.Equal(t, data, rewrite(data, framesEnd, entries, size))
	require.Equal(t, dataM, rewrite(dataM, framesEnd, entries, size))
	require.Equal(t, dataM, assemble(data[:framesEnd], entries, size, newMetaPart(meta)))

	// Flipping bit 2 of the size lowers it by 4 when the bit is set (the
	// last block overruns the size) and raises it otherwise (the blocks
	// end early).
	sizeFlipOffset := tableOff
	if data[footOff+16]&0x04 != 0 {
		sizeFlipOffset = tableOff + (len(entries)-1)*EntrySize
	}
	flipIn := func(d []byte, pos int, mask byte) []byte {
		b := bytes.Clone(d)
		b[pos] ^= mask
		return b
	}
	flip := func(pos int) []byte { return flipIn(data, pos, 0x04) }
	with := func(f func(es []entry)) []entry {
		es := append([]entry(nil), entries...)
		f(es)
		return es
	}
	withMeta := func(f func(p *metaPart)) []byte {
		p := mp
		f(&p)
		return assemble(data[:framesEnd], entries, size, p)
	}
	// setU64 returns d with the footer field at off (from the footer's
	// start) set to v.
	setU64 := func(d []byte, off int, v uint64) []byte {
		b := bytes.Clone(d)
		le.PutUint64(b[len(b)-FooterSize+off:], v)
		return b
	}
	// The meta frame's start moved one byte on, its length one less, so
	// the two still end at the table.
	moved := setU64(setU64(dataM, 32, uint64(metaOff+1)), 40, uint64(len(mp.frame)-1))
	// The footer of dataM claiming no metadata.
	dropped := setU64(setU64(setU64(dataM, 32, 0), 40, 0), 48, 0)
	le.PutUint32(dropped[footOffM+28:], 0)

	for _, tc := range []struct {
		name   string
		data   []byte
		want   error
		offset int
	}{
		{"bad magic", flip(len(data) - 1), ErrBadMagic, footOff + 60},
		{"not a chunk", bytes.Repeat([]byte("{}\n"), 100), ErrBadMagic, 300 - FooterSize + 60},
		{"version", flip(footOff + 56), ErrUnsupportedVersion, footOff + 56},
		{"table crc in footer", flip(footOff + 25), ErrTableChecksum, tableOff},
		{"table entry", flip(tableOff + EntrySize + 3), ErrTableChecksum, tableOff},
		{"table offset", flip(footOff), ErrBadTable, footOff},
		{"table length", flip(footOff + 8), ErrBadTable, footOff},
		{"logical size", flip(footOff + 16), ErrBadTable, sizeFlipOffset},
		{"logical size top bit", flipIn(data, footOff+23, 0x80), ErrBadTable, footOff + 16},
		{"skippable magic", flip(framesEnd), ErrBadTable, framesEnd},
		{"skippable length", flip(framesEnd + 4), ErrBadTable, framesEnd},
		{"gap between frames", rewrite(data, framesEnd, with(func(es []entry) { es[1].compOff++; es[1].compLen-- }), size), ErrBadTable, tableOff + EntrySize},
		{"blocks overlap", rewrite(data, framesEnd, with(func(es []entry) { es[2].logOff-- }), size), ErrBadTable, tableOff + 2*EntrySize},
		{"empty frame", rewrite(data, framesEnd, with(func(es []entry) { es[1].logLen = 0 }), size), ErrBadTable, tableOff + EntrySize},
		{"frame past the table", rewrite(data, framesEnd, with(func(es []entry) { es[len(es)-1].compLen++ }), size), ErrBadTable, tableOff + (len(entries)-1)*EntrySize},
		{"frames end early", rewrite(data, framesEnd, with(func(es []entry) { es[len(es)-1].compLen-- }), size), ErrBadTable, tableOff},
		{"block past the size", rewrite(data, framesEnd, entries, size-1), ErrBadTable, tableOff + (len(entries)-1)*EntrySize},
		{"impossible ratio", rewrite(data, framesEnd, with(func(es []entry) { es[len(es)-1].logLen = es[len(es)-1].compLen*maxBlockPerByte + 1 }), size-entries[len(entries)-1].logLen+entries[len(entries)-1].compLen*maxBlockPerByte+1), ErrBadTable, tableOff + (len(entries)-1)*EntrySize},

		// Without metadata, every meta field must be zero.
		{"meta CRC without meta", flip(footOff + 28), ErrBadTable, footOff + 28},
		{"meta offset without meta", flip(footOff + 32), ErrBadTable, footOff + 32},
		{"meta length without meta", flip(footOff + 40), ErrBadTable, footOff + 32},
		{"meta length without meta, pointing at the start", setU64(data, 40, uint64(tableOff)), ErrBadTable, footOff + 32},
		{"metadata length without meta", flip(footOff + 48), ErrBadTable, footOff + 32},

		// With metadata.
		{"version, with meta", flipIn(dataM, footOffM+56, 0x04), ErrUnsupportedVersion, footOffM + 56},
		{"table offset, with meta", flipIn(dataM, footOffM, 0x04), ErrBadTable, footOffM},
		{"table entry, with meta", flipIn(dataM, tableOffM+3, 0x04), ErrTableChecksum, tableOffM},
		{"skippable magic, with meta", flipIn(dataM, framesEnd, 0x04), ErrBadTable, framesEnd},
		{"skippable length, with meta", flipIn(dataM, framesEnd+4, 0x04), ErrBadTable, framesEnd},
		{"meta offset", flipIn(dataM, footOffM+32, 0x04), ErrBadTable, footOffM + 32},
		{"meta offset zero", setU64(dataM, 32, 0), ErrBadTable, footOffM + 32},
		{"meta length", flipIn(dataM, footOffM+40, 0x04), ErrBadTable, footOffM + 32},
		{"meta length past the frames", setU64(setU64(dataM, 32, 0), 40, uint64(tableOffM)), ErrBadTable, footOffM + 32},
		{"meta frame start moved", moved, ErrBadTable, framesEnd + 1},
		{"meta dropped from the footer", dropped, ErrBadTable, tableOffM - skipHeaderSize},
		{"metadata length zero", withMeta(func(p *metaPart) { p.size = 0 }), ErrBadTable, footOffM + 48},
		{"metadata length top bit", flipIn(dataM, footOffM+55, 0x80), ErrBadTable, footOffM + 48},
		{"metadata length above MaxMetaSize", withMeta(func(p *metaPart) { p.size = MaxMetaSize + 1 }), ErrBadTable, footOffM + 48},
		{"metadata length beyond its frame", withMeta(func(p *metaPart) { p.size = uint64(len(p.frame))*maxBlockPerByte + 1 }), ErrBadTable, footOffM + 48},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openBytes(t, tc.data)
			fe := formatErr(t, err)
			require.ErrorIs(t, err, tc.want)
			require.Equal(t, int64(tc.offset), fe.Offset)
		})
	}

	// The largest plausible metadata lengths pass Open; Meta reports them.
	t.Run("metadata length at the bounds", func(t *testing.T) {
		for _, n := range []uint64{uint64(len(mp.frame)) * maxBlockPerByte, uint64(len(meta)) + 1} {
			r, err := openBytes(t, withMeta(func(p *metaPart) { p.size = n }))
			require.NoError(t, err, "length %d", n)
			_, err = r.Meta()
			r.Close()
			formatErr(t, err)
			require.ErrorIs(t, err, ErrBadMeta)
		}
	})
}

// TestVersion1 checks that files of the pre-release Version 1 (no
// metadata, a 40-byte footer) and of a later version are refused as such,
// even when shorter than a Version 2 file can be.
func TestVersion1(t *testing.T) {
	// testdata/v1.zst is the Version 1 seed file.
	v1, err := os.ReadFile("testdata/v1.zst")
	require.NoError(t, err)
	// An empty chunk in Version 1: the skippable header, an empty table
	// and the 40-byte footer, 48 bytes.
	empty := le.AppendUint32(nil, SkippableMagic)
	empty = le.AppendUint32(empty, 40)
	empty = le.AppendUint64(empty, skipHeaderSize) // table offset
	empty = le.AppendUint64(empty, 0)              // table length
	empty = le.AppendUint64(empty, 0)              // logical size
	empty = le.AppendUint32(empty, 0)              // table CRC
	empty = le.AppendUint32(empty, 1)              // version
	empty = append(empty, Magic...)
	require.Less(t, len(empty), skipHeaderSize+FooterSize)
	current, err := encode([]byte("{}\n"), []byte("m"), BlockSize)
	require.NoError(t, err)
	v3 := bytes.Clone(current)
	le.PutUint32(v3[len(v3)-12:], 3)
	// Only the version and the magic of a file too short for a footer.
	short := append(le.AppendUint32(make([]byte, 20), Version), Magic...)
	for _, tc := range []struct {
		name string
		data []byte
		want error
		text string
	}{
		{"version 1", v1, ErrUnsupportedVersion, "1 (want 2)"},
		{"empty version 1", empty, ErrUnsupportedVersion, "1 (want 2)"},
		{"version 3", v3, ErrUnsupportedVersion, "3 (want 2)"},
		{"too short for the current version", short, ErrTruncated, "32 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openBytes(t, tc.data)
			fe := formatErr(t, err)
			require.ErrorIs(t, err, tc.want)
			require.Contains(t, err.Error(), tc.text)
			if tc.want == ErrUnsupportedVersion {
				require.Equal(t, int64(len(tc.data)-12), fe.Offset)
			} else {
				require.Zero(t, fe.Offset)
			}
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
		return assemble(frame, []entry{{0, int64(len(frame)), 0, logLen, crc32.Checksum(frame, castagnoli)}}, logLen, metaPart{})
	}
	skippable := le.AppendUint32(nil, 0x184D2A50)
	skippable = le.AppendUint32(skippable, 4)
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
	meta := indexLines(src)
	m := newMemFS(t)
	require.NoError(t, Write(m, testPath, src, meta, 0o640))

	for _, mode := range vfs.CrashModes {
		c := m.CrashClone(mode, 1)
		names, err := c.ReadDir("/s/chunks")
		require.NoError(t, err)
		require.Equal(t, []string{"000000.zst"}, names, mode)
		r, err := Open(c, testPath)
		require.NoError(t, err, mode)
		require.Equal(t, string(src), string(readAll(t, r)), mode)
		got, err := r.Meta()
		require.NoError(t, err, mode)
		require.Equal(t, string(meta), string(got), mode)
		require.NoError(t, r.Close())
	}
	fi, err := m.Stat(testPath)
	require.NoError(t, err)
	require.Equal(t, fs.FileMode(0o640), fi.Mode().Perm())

	// Replacing the file: the new content, durably.
	src2 := transcript(15, 10<<10, false)
	require.NoError(t, Write(m, testPath, src2, nil, 0o640))
	r, err := Open(m.CrashClone(vfs.KeepSynced, 0), testPath)
	require.NoError(t, err)
	require.Equal(t, string(src2), string(readAll(t, r)))
	got, err := r.Meta()
	require.NoError(t, err)
	require.Nil(t, got)
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
// always holds the old or the new content, whole, with its metadata.
func TestWriteCrash(t *testing.T) {
	old := transcript(16, 50<<10, false)
	src := transcript(17, 150<<10, false)
	c := &crashFS{MemFS: newMemFS(t)}
	oldMeta, srcMeta := indexLines(old), indexLines(src)
	require.NoError(t, Write(c.MemFS, testPath, old, oldMeta, 0o600))
	require.NoError(t, Write(c, testPath, src, srcMeta, 0o600))
	c.crash()
	require.Greater(t, len(c.clones), 5*len(vfs.CrashModes))
	sawNew := false
	for i, clone := range c.clones {
		r, err := Open(clone, testPath)
		require.NoError(t, err, "clone %d", i)
		got := string(readAll(t, r))
		meta, err := r.Meta()
		require.NoError(t, err, "clone %d", i)
		require.NoError(t, r.Close())
		require.True(t, got == string(old) && string(meta) == string(oldMeta) || got == string(src) && string(meta) == string(srcMeta), "clone %d holds neither version", i)
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
		meta, err := r.Meta()
		require.NoError(t, err)
		require.Equal(t, string(srcMeta), string(meta))
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
			err := Write(m, testPath, src, indexLines(src), 0o600)
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
// (go test -run TestSeedFile -update rewrites it) from testdata/seed.jsonl,
// with testdata/seed.meta as its metadata: it must still read back as
// both, which keeps the reader compatible with files already on disk. It
// also seeds FuzzOpenRead.
func TestSeedFile(t *testing.T) {
	src, err := os.ReadFile("testdata/seed.jsonl")
	require.NoError(t, err)
	meta, err := os.ReadFile("testdata/seed.meta")
	require.NoError(t, err)
	require.NotEmpty(t, meta)
	if *update {
		require.NoError(t, write(vfs.Default, "testdata/seed.zst", src, meta, 0o644, 512))
	}
	r, err := Open(vfs.Default, "testdata/seed.zst")
	require.NoError(t, err)
	defer r.Close()
	require.Greater(t, len(r.table), 3)
	require.Equal(t, string(src), string(readAll(t, r)))
	got, err := r.Meta()
	require.NoError(t, err)
	require.Equal(t, string(meta), string(got))

	// A plain streaming zstd decoder, which knows nothing of the frame
	// table, reads the whole file as the plain chunk (the meta frame, the
	// table and the footer sit in a skippable frame). "zstd -d" does the
	// same (TestZstdCLI).
	file, err := os.ReadFile(filepath.Join("testdata", "seed.zst"))
	require.NoError(t, err)
	require.Equal(t, string(src), string(zstdStream(t, file)))
}
