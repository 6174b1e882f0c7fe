package sessionstore

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// BenchmarkCreate: durable Creates into a store on the disk of the
// temporary directory, from one goroutine and from 32 at once, as bench/
// measures them (its create workload), reporting creates/s. From 32
// goroutines, the Creates share the catalogue's batches and syncs and
// the sessions directory's syncs.
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	for _, writers := range []int{1, 32} {
		b.Run(fmt.Sprint("writers=", writers), func(b *testing.B) {
			s, err := Open(b.TempDir(), nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			b.SetParallelism(max(1, writers/runtime.GOMAXPROCS(0)))
			if writers == 1 {
				for b.Loop() {
					if _, err := s.Create(ctx, Meta{Name: "bench"}); err != nil {
						b.Fatal(err)
					}
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := s.Create(ctx, Meta{Name: "bench"}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "creates/s")
		})
	}
}

// BenchmarkCatalogueFold: the catalogue's compaction (fold) with a
// snapshot of 2,000 and 10,000 sessions and a log holding only its
// header, on a MemFS: the CPU the snapshot's part takes (its lines
// checked and copied, the files replaced), without the disk's writes and
// syncs, reporting ms/fold.
func BenchmarkCatalogueFold(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{2000, 10000} {
		b.Run(fmt.Sprint("sessions=", n), func(b *testing.B) {
			s, err := Open(memRoot, &Options{fs: vfs.NewMemFS()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for range n {
				if _, err := s.Create(ctx, Meta{Name: "bench", Labels: map[string]string{"team": "core"}}); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if err := s.cat.Compact(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/fold")
		})
	}
}
