package sessionstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io/fs"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/synth"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// toolOutput returns n bytes of log-like text that varies with seed (see
// internal/synth).
func toolOutput(seed uint64, n int) string { return synth.ToolOutput(seed, n) }

// BenchmarkAppendLarge appends 64 KiB tool results and 300-byte messages
// alternately in one loop on the same disk, durable, and reports the
// throughput and p99 latency of each: with the default blob threshold
// (inline: one write and sync per append) and with the 16 KiB threshold
// of earlier builds (a blob: its own file, two more sync rounds).
func BenchmarkAppendLarge(b *testing.B) {
	for _, mode := range []struct {
		name      string
		threshold int
	}{{"inline", DefaultBlobThreshold}, {"blob", 16 << 10}} {
		b.Run(mode.name, func(b *testing.B) { benchAppendLarge(b, mode.threshold) })
	}
}

func benchAppendLarge(b *testing.B, threshold int) {
	ctx := context.Background()
	s, id := benchSession(b, b.TempDir(), &Options{BlobThreshold: threshold})
	small := benchRecord300()
	base := toolOutput(1, 64<<10)
	var smallLat, largeLat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Distinct payloads: a repeated one would be deduplicated.
		n := strconv.Itoa(i)
		ev := ToolResultEvent(ToolResult{CallID: "c" + n, Output: n + base[len(n):]})
		t0 := time.Now()
		if _, err := s.Append(ctx, id, ev); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if _, err := s.Append(ctx, id, small); err != nil {
			b.Fatal(err)
		}
		largeLat = append(largeLat, t1.Sub(t0))
		smallLat = append(smallLat, time.Since(t1))
	}
	b.StopTimer()
	report := func(name string, lat []time.Duration) {
		var total time.Duration
		for _, d := range lat {
			total += d
		}
		slices.Sort(lat)
		b.ReportMetric(float64(len(lat))/total.Seconds(), "appends/s-"+name)
		b.ReportMetric(float64(lat[(len(lat)*99)/100].Microseconds())/1000, "p99-ms-"+name)
	}
	report("64KiB", largeLat)
	report("300B", smallLat)
}

// BenchmarkAppendLargeConcurrent: 8 goroutines append 64 KiB tool results
// (blobs: a 16 KiB threshold) to one session while one more appends 300-byte messages to it;
// it reports the tool results' throughput and the messages' p99 latency.
// Blobs are written outside the session's mutex, so their compression and
// syncs overlap and the messages do not queue behind them.
func BenchmarkAppendLargeConcurrent(b *testing.B) {
	const writers = 8
	ctx := context.Background()
	s, id := benchSession(b, b.TempDir(), &Options{BlobThreshold: 16 << 10})
	base := toolOutput(1, 64<<10)
	small := benchRecord300()
	var next atomic.Int64
	var wg sync.WaitGroup
	var smallLat []time.Duration
	stop := make(chan struct{})
	smallDone := make(chan struct{})
	b.ResetTimer()
	go func() {
		defer close(smallDone)
		for {
			select {
			case <-stop:
				return
			default:
			}
			t0 := time.Now()
			if _, err := s.Append(ctx, id, small); err != nil {
				b.Error(err)
				return
			}
			smallLat = append(smallLat, time.Since(t0))
		}
	}()
	t0 := time.Now()
	for range writers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				n := strconv.FormatInt(i, 10)
				ev := ToolResultEvent(ToolResult{CallID: "c" + n, Output: n + base[len(n):]})
				if _, err := s.Append(ctx, id, ev); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(t0)
	close(stop)
	<-smallDone
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s-64KiB")
	if len(smallLat) > 0 {
		slices.Sort(smallLat)
		b.ReportMetric(float64(smallLat[len(smallLat)*99/100].Microseconds())/1000, "p99-ms-300B")
	}
}

// BenchmarkTreeHeap builds a session holding SESSIONSTORE_BENCH_TREE_BYTES
// of tool results (default 1 GiB, in at least 10,000 events), opens it in a
// new Store and renders its payload-free tree, reporting the heap in use
// with the tree alive. The tree reads only the index, so the heap follows
// the number of events, not the bytes of their payloads.
func BenchmarkTreeHeap(b *testing.B) {
	total := int64(1 << 30)
	if v := os.Getenv("SESSIONSTORE_BENCH_TREE_BYTES"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		total = n
	}
	const events = 10000
	per := int(total / events)
	dir := b.TempDir()
	ctx := context.Background()
	o := Options{fs: noSyncFS{vfs.Default}}
	s, err := Open(dir, &o)
	if err != nil {
		b.Fatal(err)
	}
	meta, err := s.Create(ctx, Meta{Name: "heavy"})
	if err != nil {
		b.Fatal(err)
	}
	base := toolOutput(1, per)
	for i := 0; i < events; i++ {
		// Each output differs (no dedup) but shares most bytes with base,
		// like successive runs of a test suite.
		out := strconv.Itoa(i) + base[len(strconv.Itoa(i)):]
		if _, err := s.Append(ctx, meta.ID, ToolResultEvent(ToolResult{CallID: "c" + strconv.Itoa(i), Output: out})); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var heap uint64
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		s, err := Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		nodes, err := s.Tree(ctx, meta.ID)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		if len(nodes) != events {
			b.Fatalf("%d nodes", len(nodes))
		}
		heap = after.HeapAlloc - min(before.HeapAlloc, after.HeapAlloc)
		runtime.KeepAlive(nodes)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(int64(per)*events)/(1<<30), "payload-GiB")
	b.ReportMetric(events, "events")
}

// base64Result is a tool result whose output is n bytes of base64 of
// random bytes: a deterministic stand-in for the base64 images (PNG, JPEG:
// already compressed) of agent transcripts, which zstd cannot shorten by
// matches, only by coding the 64 symbols in about 6 bits each.
func base64Result(callID string, seed uint64, n int) Event {
	rng := rand.New(rand.NewPCG(seed, 3))
	raw := make([]byte, base64.StdEncoding.DecodedLen(n))
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	return ToolResultEvent(ToolResult{CallID: callID, Output: base64.StdEncoding.EncodeToString(raw)[:n]})
}

// sharedDataDir returns the directory of the project's shared real data
// (../shared/data beside the project, or $SESSIONSTORE_SHARED_DATA, or
// /work/shared/data), or "" if there is none.
func sharedDataDir() string {
	for _, dir := range []string{os.Getenv("SESSIONSTORE_SHARED_DATA"), filepath.Join("..", "shared", "data"), "/work/shared/data"} {
		if dir == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(dir, "claude-code")); err == nil && fi.IsDir() {
			return dir
		}
	}
	return ""
}

// claudeCodeBlobs returns the lines of the shared Claude Code transcripts
// whose compact JSON is over 16 KiB (testBlobThreshold), as records a
// harness storing each line with that threshold would write as blobs
// (with the 1 MiB default none of them is one): those holding base64
// image data, and the others (mostly large tool results).
func claudeCodeBlobs(tb testing.TB, dir string) (images, others [][]byte) {
	tb.Helper()
	claudeCodeLines(tb, dir, func(_ string, line []byte) {
		var rec bytes.Buffer
		if err := json.Compact(&rec, line); err != nil || rec.Len() <= testBlobThreshold {
			return
		}
		if bytes.Contains(rec.Bytes(), []byte(`"type":"base64"`)) {
			images = append(images, rec.Bytes())
		} else {
			others = append(others, rec.Bytes())
		}
	})
	return images, others
}

// claudeCodeLines calls fn with every line of the shared Claude Code
// transcripts under dir (sharedDataDir) and the file it is in.
func claudeCodeLines(tb testing.TB, dir string, fn func(path string, line []byte)) {
	tb.Helper()
	err := filepath.WalkDir(filepath.Join(dir, "claude-code"), func(path string, d fs.DirEntry, err error) error {
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
			fn(path, sc.Bytes())
		}
		return sc.Err()
	})
	if err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkBlobEncode compresses blob records as a blob write does, with
// blob.Encode (internal/blob) and, alternately in the same loop, with the encoder blobs
// had before literals were entropy coded (SpeedDefault alone), and reports
// for each the stored/raw size ratio and the time per record: for a
// 64 KiB text tool result (the hot path of blob writes) and a 1 MiB base64
// tool result (an image's stand-in).
func BenchmarkBlobEncode(b *testing.B) {
	text := ToolResultEvent(ToolResult{CallID: "c1", Output: toolOutput(1, 64<<10)})
	benchBlobEncode(b, map[string][][]byte{
		"text-64KiB":  {text.Record},
		"base64-1MiB": {base64Result("c2", 1, 1<<20).Record},
	})
}

// BenchmarkBlobEncodeClaudeCode is BenchmarkBlobEncode on the records over
// 16 KiB in the shared Claude Code transcripts (see
// claudeCodeBlobs): the lines with base64 images (one of them the 1 MB
// screenshot) and the others. It is skipped without the shared data.
func BenchmarkBlobEncodeClaudeCode(b *testing.B) {
	dir := sharedDataDir()
	if dir == "" {
		b.Skip("no shared data (../shared/data, $SESSIONSTORE_SHARED_DATA or /work/shared/data)")
	}
	images, others := claudeCodeBlobs(b, dir)
	if len(images) == 0 || len(others) == 0 {
		b.Fatalf("%d image records and %d others over 16 KiB", len(images), len(others))
	}
	largest := slices.MaxFunc(images, func(x, y []byte) int { return len(x) - len(y) })
	benchBlobEncode(b, map[string][][]byte{
		"images":        images,
		"largest-image": {largest},
		"others":        others,
	})
}

// benchBlobEncode runs BenchmarkBlobEncode's measurement on each named set
// of records: both encoders compress the whole set once per iteration,
// taking turns at going first.
func benchBlobEncode(b *testing.B, sets map[string][][]byte) {
	prev, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	defer prev.Close()
	names := slices.Sorted(maps.Keys(sets))
	for _, name := range names {
		recs := sets[name]
		b.Run(name, func(b *testing.B) {
			raw := 0
			for _, r := range recs {
				raw += len(r)
			}
			buf := make([]byte, 0, raw+raw/8)
			encode := func(enc func(rec, dst []byte) []byte) (int, time.Duration) {
				t0 := time.Now()
				n := 0
				for _, r := range recs {
					n += len(enc(r, buf[:0]))
				}
				return n, time.Since(t0)
			}
			var stored, storedPrev int
			var t, tPrev time.Duration
			i := 0
			for b.Loop() {
				var d, dPrev time.Duration
				if i%2 == 0 {
					stored, d = encode(blob.Encode)
					storedPrev, dPrev = encode(prev.EncodeAll)
				} else {
					storedPrev, dPrev = encode(prev.EncodeAll)
					stored, d = encode(blob.Encode)
				}
				t, tPrev = t+d, tPrev+dPrev
				i++
			}
			b.ReportMetric(float64(stored)/float64(raw), "stored/raw")
			b.ReportMetric(float64(storedPrev)/float64(raw), "stored/raw-prev")
			b.ReportMetric(float64(raw)*float64(i)/t.Seconds()/1e6, "MB/s")
			b.ReportMetric(float64(raw)*float64(i)/tPrev.Seconds()/1e6, "MB/s-prev")
			b.ReportMetric(t.Seconds()/tPrev.Seconds(), "time/prev")
			b.ReportMetric(float64(len(recs)), "records")
			b.ReportMetric(float64(raw), "raw-bytes")
			b.ReportMetric(float64(stored), "stored-bytes")
			b.ReportMetric(float64(storedPrev), "stored-bytes-prev")
		})
	}
}
