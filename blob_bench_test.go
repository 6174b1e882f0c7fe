package sessionstore

import (
	"context"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/internal/synth"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// toolOutput returns n bytes of log-like text that varies with seed (see
// internal/synth).
func toolOutput(seed uint64, n int) string { return synth.ToolOutput(seed, n) }

// BenchmarkAppendLarge appends 64 KiB tool results (stored as blobs) and
// 300-byte messages alternately in one loop on the same disk, durable,
// and reports the throughput and p99 latency of each.
func BenchmarkAppendLarge(b *testing.B) {
	ctx := context.Background()
	s, id := benchSession(b, b.TempDir(), nil)
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
// (blobs) to one session while one more appends 300-byte messages to it;
// it reports the tool results' throughput and the messages' p99 latency.
// Blobs are written outside the session's mutex, so their compression and
// syncs overlap and the messages do not queue behind them.
func BenchmarkAppendLargeConcurrent(b *testing.B) {
	const writers = 8
	ctx := context.Background()
	s, id := benchSession(b, b.TempDir(), nil)
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
