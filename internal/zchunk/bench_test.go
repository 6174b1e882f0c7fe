package zchunk

import (
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// benchChunk is a full-size (8 MiB, the store's default chunk size) chunk
// of a realistic agent transcript.
var benchChunk = sync.OnceValue(func() []byte { return transcript(42, 8<<20, true) })

// benchMeta is the metadata of benchChunk: its index lines.
var benchMeta = sync.OnceValue(func() []byte { return indexLines(benchChunk()) })

// BenchmarkWrite compresses a chunk without metadata and reports the
// compression ratio (plain size / compressed size).
func BenchmarkWrite(b *testing.B) {
	src := benchChunk()
	m := newMemFS(b)
	b.SetBytes(int64(len(src)))
	for b.Loop() {
		require.NoError(b, Write(m, testPath, src, nil, 0o600))
	}
	fi, err := m.Stat(testPath)
	require.NoError(b, err)
	b.ReportMetric(float64(len(src))/float64(fi.Size()), "ratio")
	b.ReportMetric(float64(fi.Size()), "compressed-bytes")
}

// BenchmarkMeta reads the metadata of a chunk, its index lines, and
// reports their compression ratio.
func BenchmarkMeta(b *testing.B) {
	meta := benchMeta()
	_, r := writeOpen(b, benchChunk(), meta, BlockSize)
	b.SetBytes(int64(len(meta)))
	for b.Loop() {
		if _, err := r.Meta(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(meta))/float64(r.metaLen), "ratio")
}

// BenchmarkReadAtRandomLine reads one random line of the chunk per
// operation, so nearly every read decompresses a frame; the Plain variant
// reads the same lines from the uncompressed file for comparison.
func BenchmarkReadAtRandomLine(b *testing.B) {
	src := benchChunk()
	spans := lineSpans(src)
	b.Run("zstd", func(b *testing.B) {
		_, r := writeOpen(b, src, nil, BlockSize)
		rng := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 0, 1<<20)
		before := r.decodes.Load()
		for b.Loop() {
			s := spans[rng.IntN(len(spans))]
			p := buf[:s[1]-s[0]]
			if _, err := r.ReadAt(p, int64(s[0])); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(r.decodes.Load()-before)/float64(b.N), "frames/op")
	})
	b.Run("plain", func(b *testing.B) {
		m := newMemFS(b)
		f, err := m.OpenFile("/s/chunks/000000.jsonl", os.O_RDWR|os.O_CREATE, 0o600)
		require.NoError(b, err)
		_, err = f.Write(src)
		require.NoError(b, err)
		rng := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 0, 1<<20)
		for b.Loop() {
			s := spans[rng.IntN(len(spans))]
			p := buf[:s[1]-s[0]]
			if _, err := f.ReadAt(p, int64(s[0])); err != nil {
				b.Fatal(err)
			}
		}
	})
}
