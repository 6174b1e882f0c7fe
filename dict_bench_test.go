package sessionstore

import (
	"bytes"
	"testing"

	"github.com/klauspost/compress/dict"
	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// BenchmarkSealDictionary measures what a zstd dictionary trained on the
// store's own sealed chunks would save on the shared real transcripts,
// the direction issue 32 names for bytes on disk: each transcript's lines
// under the string threshold (longer ones are blobs, stored apart) cut
// into sealed blocks as internal/zchunk cuts them (zchunk.BlockSize, at
// line ends), each block compressed as a sealed chunk's frame is (the
// default level, literals entropy coded, checksums on), without and with
// a dictionary of 64 KiB built from all the blocks
// (klauspost/compress/dict), and with it at the next level. It reports
// each as bytes over the transcripts' raw bytes (the dictionary counted
// once) and the dictionary's gain as a fraction of the chunks' bytes.
func BenchmarkSealDictionary(b *testing.B) {
	dir := sharedDataDir()
	if dir == "" {
		b.Skip("no shared data (../shared/data, $SESSIONSTORE_SHARED_DATA or /work/shared/data)")
	}
	var raw int
	var blocks [][]byte
	files := map[string][]byte{}
	claudeCodeLines(b, dir, func(path string, line []byte) {
		raw += len(line) + 1
		if len(line) < DefaultStringThreshold {
			files[path] = append(append(files[path], line...), '\n')
		}
	})
	for _, data := range files {
		for len(data) > 0 {
			n := 0
			for n < len(data) {
				i := bytes.IndexByte(data[n:], '\n')
				if n > 0 && n+i+1 > zchunk.BlockSize {
					break
				}
				n += i + 1
			}
			blocks = append(blocks, data[:n])
			data = data[n:]
		}
	}
	d, err := dict.BuildZstdDict(blocks, dict.Options{MaxDictSize: 64 << 10, HashBytes: 6})
	if err != nil {
		b.Fatal(err)
	}
	encoder := func(opts ...zstd.EOption) *zstd.Encoder {
		e, err := zstd.NewWriter(nil, append([]zstd.EOption{zstd.WithEncoderCRC(true), zstd.WithWindowSize(zchunk.MaxWindow), zstd.WithAllLitEntropyCompression(true)}, opts...)...)
		if err != nil {
			b.Fatal(err)
		}
		return e
	}
	plain, withDict := encoder(), encoder(zstd.WithEncoderDict(d))
	better := encoder(zstd.WithEncoderDict(d), zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	size := func(e *zstd.Encoder) int {
		var n int
		var buf []byte
		for _, blk := range blocks {
			buf = e.EncodeAll(blk, buf[:0])
			n += len(buf)
		}
		return n
	}
	var none, one, two int
	b.ResetTimer()
	for b.Loop() {
		none, one, two = size(plain), size(withDict)+len(d), size(better)+len(d)
	}
	b.ReportMetric(float64(none)/float64(raw), "x-raw-no-dict")
	b.ReportMetric(float64(one)/float64(raw), "x-raw-dict")
	b.ReportMetric(float64(two)/float64(raw), "x-raw-dict-better")
	b.ReportMetric(1-float64(one)/float64(none), "dict-gain")
	b.ReportMetric(float64(len(blocks)), "blocks")
}
