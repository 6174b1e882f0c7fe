package commit

import (
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sessionstore/sessionstore/internal/chunkwriter"
	"github.com/sessionstore/sessionstore/internal/eventline"
)

// nopChunk is a chunk that keeps nothing: the benchmark measures the
// pipeline, not a file system.
type nopChunk struct{ syncs atomic.Int64 }

func (c *nopChunk) WriteAt([]byte, int64) error { return nil }
func (c *nopChunk) Sync() error                 { c.syncs.Add(1); return nil }
func (c *nopChunk) Trim(int64)                  {}
func (c *nopChunk) Close() error                { return nil }

type nopFiles struct{ c *nopChunk }

func (f nopFiles) CreateChunk(uint32) (chunkwriter.Chunk, error)      { return f.c, nil }
func (f nopFiles) OpenChunk(uint32, int64) (chunkwriter.Chunk, error) { return f.c, nil }
func (f nopFiles) SealChunk(uint32, []eventline.Entry) error          { return nil }

// nopLog writes and syncs the chunk and publishes nothing.
type nopLog struct{}

func (nopLog) Stopped() error { return nil }
func (nopLog) Write(c chunkwriter.Chunk, data []byte, off int64) (func() error, error, error, bool) {
	if err := c.WriteAt(data, off); err != nil {
		return nil, err, nil, false
	}
	return nil, nil, c.Sync(), false
}
func (nopLog) Journaled()    {}
func (nopLog) Publish([]rec) {}
func (nopLog) Dropped([]rec) {}
func (nopLog) Stop(error)    {}

// BenchmarkPipeline measures what the pipeline adds to an append, over a
// chunk whose writes and syncs cost nothing: one writer (every append
// its own group), and 16 writers on one session sharing groups. It
// reports the records each sync covers.
func BenchmarkPipeline(b *testing.B) {
	line := []byte(lineOf(0))
	for _, bc := range []struct {
		name    string
		writers int
	}{{"1w", 1}, {"16w", 16}} {
		b.Run(bc.name, func(b *testing.B) {
			var mu sync.Mutex
			c := &nopChunk{}
			w := chunkwriter.New(chunkwriter.Config{Files: nopFiles{c}, Dir: "chunks", MaxSize: 1 << 62, Mu: &mu,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Embed: func(uint32) []eventline.Entry { return nil }})
			p := New[rec](&mu, &w, nopLog{})
			mu.Lock()
			if err := w.Rotate(); err != nil {
				b.Fatal(err)
			}
			mu.Unlock()
			appendOne := func() {
				mu.Lock()
				w.Enqueue(line)
				p.Add(rec{})
				if err := p.Commit(p.Join(1)); err != nil {
					b.Error(err)
				}
			}
			b.ReportAllocs()
			b.SetParallelism(bc.writers) // GOMAXPROCS times as many goroutines
			b.ResetTimer()
			if bc.writers == 1 {
				for b.Loop() {
					appendOne()
				}
			} else {
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						appendOne()
					}
				})
			}
			b.StopTimer()
			if s := c.syncs.Load(); s > 0 {
				b.ReportMetric(float64(b.N)/float64(s), "records/sync")
			}
		})
	}
}
