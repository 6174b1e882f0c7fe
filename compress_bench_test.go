package sessionstore

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// codingSession returns the events of a synthetic coding-agent session:
// turns of a user request, assistant reasoning, tool calls (read a file,
// run tests, grep) and their results, in the proportions of a real one.
// Tool results repeat much of earlier ones (the same files, the same test
// suite), as they do in practice. It is generated, not recorded.
func codingSession(turns int, seed uint64) []Event {
	rng := rand.New(rand.NewPCG(seed, 11))
	files := make([]string, 12)
	for i := range files {
		files[i] = fmt.Sprintf("package p%d\n\n%s", i, toolOutput(uint64(100+i), 4000+rng.IntN(20000)))
	}
	suite := toolOutput(7, 3000)
	var out []Event
	for t := 0; t < turns; t++ {
		out = append(out, UserText(fmt.Sprintf("Turn %d: fix the failing test in p%d and explain the change.", t, rng.IntN(len(files)))))
		out = append(out, AssistantMessage(Message{Content: "I will look at the code first.", Reasoning: toolOutput(rng.Uint64(), 300), Usage: &Usage{InputTokens: int64(1000 + t*40), OutputTokens: 80}}))
		for c := 0; c < 1+rng.IntN(4); c++ {
			id := fmt.Sprintf("call_%d_%d", t, c)
			switch rng.IntN(3) {
			case 0:
				f := rng.IntN(len(files))
				out = append(out, ToolCallEvent(ToolCall{CallID: id, Name: "read_file", Arguments: []byte(fmt.Sprintf(`{"path":"p%d/p.go"}`, f))}))
				out = append(out, ToolResultEvent(ToolResult{CallID: id, Output: files[f]}))
			case 1:
				out = append(out, ToolCallEvent(ToolCall{CallID: id, Name: "run_tests", Arguments: []byte(`{"pkg":"./..."}`)}))
				out = append(out, ToolResultEvent(ToolResult{CallID: id, Output: suite + fmt.Sprintf("\nFAIL after %d runs", t), IsError: true}))
			default:
				out = append(out, ToolCallEvent(ToolCall{CallID: id, Name: "grep", Arguments: []byte(`{"pattern":"TODO"}`)}))
				out = append(out, ToolResultEvent(ToolResult{CallID: id, Output: toolOutput(rng.Uint64(), 200+rng.IntN(1500))}))
			}
		}
		out = append(out, AssistantMessage(Message{Content: toolOutput(rng.Uint64(), 400)}))
	}
	return out
}

// diskParts adds up the sizes of the regular files under dir by kind:
// "index" (index.jsonl), "sealed" (compressed chunks), "active" (plain
// chunks), "blobs" and "other" (metadata, HEAD, LOCK).
func diskParts(b *testing.B, dir string) map[string]int64 {
	parts := map[string]int64{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		kind := "other"
		switch rel, _ := filepath.Rel(dir, path); {
		case filepath.Base(path) == indexName:
			kind = "index"
		case strings.Contains(rel, string(filepath.Separator)+chunksDir+string(filepath.Separator)):
			kind = "active"
			if strings.HasSuffix(path, sealedExt) {
				kind = "sealed"
			}
		case strings.Contains(rel, string(filepath.Separator)+blobsDir+string(filepath.Separator)):
			kind = "blobs"
		}
		parts[kind] += info.Size()
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return parts
}

// writeSession appends evs to a new session in a new root and returns the
// root, the session and the plain JSONL size of the same events (one
// chunk line each, records inline).
func writeSession(b *testing.B, o Options, evs []Event) (string, uuid.UUID, int64) {
	dir := b.TempDir()
	o.fs = noSyncFS{vfs.Default}
	s, err := Open(dir, &o)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	meta, err := s.Create(ctx, Meta{Name: "coding"})
	if err != nil {
		b.Fatal(err)
	}
	var plain int64
	for _, ev := range evs {
		out, err := s.Append(ctx, meta.ID, ev)
		if err != nil {
			b.Fatal(err)
		}
		plain += int64(len(encodeEvent(nil, &out)))
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return dir, meta.ID, plain
}

// BenchmarkDiskRatio reports the bytes a session takes on disk (chunks,
// blobs, index, metadata), with compression and blobs, against the same
// events as plain JSONL lines, on a synthetic coding-agent session of
// about 11 MiB, with the default options (the session closed: every
// chunk sealed) and with 1 MiB chunks.
func BenchmarkDiskRatio(b *testing.B) {
	benchDiskRatio(b, codingSession(600, 1), DefaultChunkSize, 1<<20)
}

// BenchmarkDiskRatioRecorded is BenchmarkDiskRatio on the session recorded
// from this repository (testdata/transcripts): real file contents, grep
// matches, git logs and vet output. At 0.71 MiB it fits in one default
// chunk, which Close seals; it is also measured with 64 KiB chunks.
func BenchmarkDiskRatioRecorded(b *testing.B) {
	benchDiskRatio(b, loadTranscript(b, recordedTranscript), DefaultChunkSize, 64<<10)
}

// benchDiskRatio writes evs to a new session once per chunk size and
// reports bytes on disk / bytes as plain JSONL.
func benchDiskRatio(b *testing.B, evs []Event, chunkSizes ...int64) {
	for _, chunk := range chunkSizes {
		b.Run(fmt.Sprintf("chunk=%dKiB", chunk>>10), func(b *testing.B) {
			var (
				parts    map[string]int64
				plainMiB float64
				plain    int64
			)
			for i := 0; i < b.N; i++ {
				var dir string
				dir, _, plain = writeSession(b, Options{ChunkSize: chunk, BlobThreshold: DefaultBlobThreshold}, evs)
				parts = diskParts(b, dir)
				plainMiB = float64(plain) / (1 << 20)
			}
			var total int64
			for name, n := range parts {
				total += n
				b.ReportMetric(float64(n)/float64(plain), name+"/plain")
			}
			b.ReportMetric(float64(total)/float64(plain), "disk/plain")
			b.ReportMetric(plainMiB, "plain-MiB")
			b.ReportMetric(float64(len(evs)), "events")
		})
	}
}

// BenchmarkLoadCompressed loads the same session from a root with
// compressed sealed chunks and from one with plain chunks, alternately in
// one loop, and reports the ratio of their times (page cache warm).
func BenchmarkLoadCompressed(b *testing.B) {
	evs := codingSession(400, 2)
	o := Options{ChunkSize: 1 << 20}
	zdir, zid, _ := writeSession(b, o, evs)
	o.Compression = CompressionNone
	pdir, pid, _ := writeSession(b, o, evs)
	ctx := context.Background()
	load := func(dir string, id uuid.UUID, mode string) time.Duration {
		s, err := Open(dir, &Options{Compression: mode})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Head(ctx, id); err != nil { // open the session first
			b.Fatal(err)
		}
		t0 := time.Now()
		path, err := s.Load(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if len(path) != len(evs) {
			b.Fatalf("loaded %d of %d events", len(path), len(evs))
		}
		return time.Since(t0)
	}
	var zt, pt time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		zt += load(zdir, zid, CompressionZstd)
		pt += load(pdir, pid, CompressionNone)
	}
	b.ReportMetric(zt.Seconds()/pt.Seconds(), "zstd/plain-time")
	b.ReportMetric(float64(zt.Milliseconds())/float64(b.N), "ms/load-zstd")
	b.ReportMetric(float64(pt.Milliseconds())/float64(b.N), "ms/load-plain")
	b.ReportMetric(float64(len(evs)), "events")
}
