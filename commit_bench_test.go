package sessionstore

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// BenchmarkGroupCommit measures durable 300-byte appends to one session by
// one goroutine and by 16 at once, alternating the two in each iteration
// on the same disk, and reports the throughput ratio (16 / 1). Each
// iteration appends 1,600 events in each phase (100 per writer in the
// second), long enough to measure the steady state rather than the ramp.
func BenchmarkGroupCommit(b *testing.B) {
	const appends = 1600
	ctx := context.Background()
	var syncs atomic.Int64
	s, id := benchSession(b, b.TempDir(), &Options{fs: slowSyncFS{vfs.Default, 0, &syncs}})
	ev := benchRecord300()
	phase := func(writers int) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range appends / writers {
					if _, err := s.Append(ctx, id, ev); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	var one, many time.Duration
	var syncsMany int64
	b.ResetTimer()
	var syncOne, syncMany time.Duration
	for range b.N {
		ns := syncNanos.Load()
		one += phase(1)
		syncOne += time.Duration(syncNanos.Load() - ns)
		before := syncs.Load()
		ns = syncNanos.Load()
		many += phase(16)
		syncMany += time.Duration(syncNanos.Load() - ns)
		syncsMany += syncs.Load() - before
	}
	b.ReportMetric(syncOne.Seconds()/one.Seconds(), "sync-share-1")
	b.ReportMetric(syncMany.Seconds()/many.Seconds(), "sync-share-16")
	b.StopTimer()
	n := float64(appends * b.N)
	b.ReportMetric(n/one.Seconds(), "appends/s-1")
	b.ReportMetric(n/many.Seconds(), "appends/s-16")
	b.ReportMetric(one.Seconds()/many.Seconds(), "ratio-16/1")
	b.ReportMetric(n/float64(syncsMany), "appends/sync-16")
}
