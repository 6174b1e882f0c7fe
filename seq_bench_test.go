package sessionstore

import (
	"context"
	"runtime"
	"strings"
	"testing"

	"github.com/google/uuid"
)

// BenchmarkLoadSeqPeakHeap loads a session of 64 events with records of
// 256 KiB each (16 MiB, inline: no blobs) with Load and with LoadSeq, and
// reports the peak of the live heap (sampled after a forced collection
// at every event) and the live heap before the call (the store, and the
// read buffers it keeps for reuse): Load holds every record at once,
// LoadSeq one batch.
func BenchmarkLoadSeqPeakHeap(b *testing.B) {
	const events, size = 64, 256 << 10
	dir := b.TempDir()
	ctx := context.Background()
	o := &Options{BlobThreshold: -1, Compression: CompressionNone}
	s, err := Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	meta, err := s.Create(ctx, Meta{})
	if err != nil {
		b.Fatal(err)
	}
	text := strings.Repeat("x", size)
	for range events {
		if _, err := s.Append(ctx, meta.ID, UserText(text)); err != nil {
			b.Fatal(err)
		}
	}
	live := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	run := func(b *testing.B, load func(id uuid.UUID, sample func()) int) {
		var peak, base int64
		for b.Loop() {
			base = max(base, live())
			sample := func() { peak = max(peak, live()) }
			if n := load(meta.ID, sample); n != events {
				b.Fatalf("%d events", n)
			}
		}
		b.ReportMetric(float64(peak), "peak-heap-bytes")
		b.ReportMetric(float64(base), "heap-before-bytes")
		b.ReportMetric(float64(events*size), "record-bytes")
	}
	b.Run("Load", func(b *testing.B) {
		run(b, func(id uuid.UUID, sample func()) int {
			evs, err := s.Load(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			sample()
			n := len(evs)
			runtime.KeepAlive(evs)
			return n
		})
	})
	b.Run("LoadSeq", func(b *testing.B) {
		run(b, func(id uuid.UUID, sample func()) int {
			n := 0
			for _, err := range s.LoadSeq(ctx, id) {
				if err != nil {
					b.Fatal(err)
				}
				n++
				sample()
			}
			return n
		})
	})
}

// BenchmarkIndexEntryMemory reports the memory one index entry costs a
// session held in memory: the entries of 100,000 events added to a
// memIndex (its array and its id map), divided by their number.
func BenchmarkIndexEntryMemory(b *testing.B) {
	const n = 100_000
	var perEntry float64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := &memIndex{ByID: map[uuid.UUID]int32{}}
		parent := uuid.Nil
		for i := range n {
			e := entry{Header: header{ID: uuid.UUID{byte(i >> 16), byte(i >> 8), byte(i), 1}, ParentID: parent, Kind: 1, Role: 1}, Size: 100, Loc: location{Offset: int64(i) * 300, Length: 300}}
			if err := x.Add(&e); err != nil {
				b.Fatal(err)
			}
			parent = e.ID
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perEntry = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(x)
	}
	b.ReportMetric(perEntry, "bytes/entry")
}
