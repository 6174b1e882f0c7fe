package sessionstore

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// BenchmarkAppendCallerID measures, side by side in one loop on one file
// system, a durable append of a 300-byte message without an id (the
// common path, which the id checks must not slow down) and one with a
// caller-chosen id (a new UUIDv7 each time: the id lookup, then the
// write), and a retry of an event already stored (the lookup and the read
// and comparison of its record, no write). On "disk" an fdatasync
// dominates; "nosync" (the disk without syncs) shows the CPU cost alone.
func BenchmarkAppendCallerID(b *testing.B) {
	for _, fsName := range []string{"disk", "nosync"} {
		b.Run(fsName, func(b *testing.B) {
			ctx := context.Background()
			o := &Options{}
			dir := b.TempDir()
			if fsName == "nosync" {
				o.fs = noSyncFS{vfs.Default}
			}
			s, id := benchSession(b, dir, o)
			ev := benchRecord300()
			stored := ev
			stored.ID = uuid.Must(uuid.NewV7())
			if _, err := s.Append(ctx, id, stored); err != nil {
				b.Fatal(err)
			}
			var plain, withID, retry time.Duration
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := s.Append(ctx, id, ev); err != nil {
					b.Fatal(err)
				}
				t1 := time.Now()
				e := ev
				e.ID = uuid.Must(uuid.NewV7())
				if _, err := s.Append(ctx, id, e); err != nil {
					b.Fatal(err)
				}
				t2 := time.Now()
				if _, err := s.Append(ctx, id, stored); err != nil {
					b.Fatal(err)
				}
				retry += time.Since(t2)
				withID += t2.Sub(t1)
				plain += t1.Sub(t0)
			}
			b.StopTimer()
			n := float64(b.N)
			b.ReportMetric(float64(plain.Nanoseconds())/n, "ns/append")
			b.ReportMetric(float64(withID.Nanoseconds())/n, "ns/append-with-id")
			b.ReportMetric(float64(retry.Nanoseconds())/n, "ns/retry-stored")
			b.ReportMetric(withID.Seconds()/plain.Seconds(), "ratio-id-vs-none")
		})
	}
}

// BenchmarkLazyFirstAppendCallerID measures what a caller id costs the
// first append after opening a session of 20,000 events: without an id
// the session appends without its index (lazy); with one, the append
// loads the index to look the id up. Each iteration opens the store,
// appends once without an id, reopens it and appends once with one.
func BenchmarkLazyFirstAppendCallerID(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	fsys := noSyncFS{vfs.Default}
	s, id := benchSession(b, dir, &Options{fs: fsys})
	batch := make([]Event, 100)
	for i := range batch {
		batch[i] = benchRecord300()
	}
	for range 200 {
		if _, err := s.AppendBatch(ctx, id, batch...); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	first := func(withID bool) time.Duration {
		s, err := Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		ev := benchRecord300()
		if withID {
			ev.ID = uuid.Must(uuid.NewV7())
		}
		t0 := time.Now()
		if _, err := s.Append(ctx, id, ev); err != nil {
			b.Fatal(err)
		}
		return time.Since(t0)
	}
	var plain, withID time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain += first(false)
		withID += first(true)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(plain.Microseconds())/n, "µs/first-append")
	b.ReportMetric(float64(withID.Microseconds())/n, "µs/first-append-with-id")
}
