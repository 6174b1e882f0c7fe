package zchunk

import (
	"bufio"
	"bytes"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
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

// claudeCodeLines returns the lines of the shared Claude Code transcripts
// (../shared/data beside the project, or $SESSIONSTORE_SHARED_DATA, or
// /work/shared/data), newline included, in file order; nil if there are
// none.
func claudeCodeLines(tb testing.TB) [][]byte {
	tb.Helper()
	var root string
	for _, dir := range []string{os.Getenv("SESSIONSTORE_SHARED_DATA"), filepath.Join("..", "..", "..", "shared", "data"), "/work/shared/data"} {
		if fi, err := os.Stat(filepath.Join(dir, "claude-code")); dir != "" && err == nil && fi.IsDir() {
			root = filepath.Join(dir, "claude-code")
			break
		}
	}
	if root == "" {
		return nil
	}
	var lines [][]byte
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".jsonl" {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 0, 1<<20), 64<<20)
		for sc.Scan() {
			lines = append(lines, append(bytes.Clone(sc.Bytes()), '\n'))
		}
		return sc.Err()
	})
	require.NoError(tb, err)
	return lines
}

// BenchmarkWriteClaudeCode compresses the shared Claude Code transcripts
// as sealed chunks, their lines as chunk lines (records inline, as with
// blobs off), and reports stored/raw: for all of them in one chunk, and
// for a chunk of the lines holding base64 images alone. It is skipped
// without the shared data.
func BenchmarkWriteClaudeCode(b *testing.B) {
	lines := claudeCodeLines(b)
	if lines == nil {
		b.Skip("no shared data (../shared/data, $SESSIONSTORE_SHARED_DATA or /work/shared/data)")
	}
	var all, images []byte
	for _, l := range lines {
		all = append(all, l...)
		if bytes.Contains(l, []byte(`"type":"base64"`)) {
			images = append(images, l...)
		}
	}
	require.NotEmpty(b, images)
	for _, c := range []struct {
		name string
		src  []byte
	}{{"all", all}, {"images", images}} {
		b.Run(c.name, func(b *testing.B) {
			m := newMemFS(b)
			b.SetBytes(int64(len(c.src)))
			for b.Loop() {
				require.NoError(b, Write(m, testPath, c.src, nil, 0o600))
			}
			fi, err := m.Stat(testPath)
			require.NoError(b, err)
			b.ReportMetric(float64(fi.Size())/float64(len(c.src)), "stored/raw")
			b.ReportMetric(float64(len(c.src)), "raw-bytes")
			b.ReportMetric(float64(fi.Size()), "stored-bytes")
		})
	}
}
