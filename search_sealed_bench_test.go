package sessionstore

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// searchSealedStore builds a store of n sessions of perSession events of
// about 400 bytes each, closed (so every session's chunk is sealed,
// compressed), one event in every second session holding the rare word
// "quokka". It returns the root.
func searchSealedStore(tb testing.TB, n, perSession int) string {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(11, 11))
	dir := tb.TempDir()
	s, err := Open(dir, nil)
	require.NoError(tb, err)
	for i := range n {
		m, err := s.Create(ctx, Meta{})
		require.NoError(tb, err)
		evs := make([]Event, perSession)
		for k := range evs {
			var b strings.Builder
			for b.Len() < 400 {
				b.WriteString(randomText(rng))
				b.WriteString(". ")
			}
			text := b.String()
			if i%2 == 0 && k == perSession/2 {
				text = "the quokka " + text
			}
			if k%2 == 0 {
				evs[k] = UserText(text)
			} else {
				evs[k] = ToolResultEvent(ToolResult{CallID: "c", Output: text})
			}
		}
		_, err = s.AppendBatch(ctx, m.ID, evs...)
		require.NoError(tb, err)
	}
	require.NoError(tb, s.Close())
	return dir
}

// BenchmarkSearchSealed: queries on a store of 200 sessions of 200
// events (about 16 MB of records, every chunk sealed), opened read-only
// as an inspector would, the index caught up by a first Search; the hits
// of the rare word lie in different sessions.
func BenchmarkSearchSealed(b *testing.B) {
	ctx := context.Background()
	dir := searchSealedStore(b, 200, 200)
	s, err := Open(dir, nil) // writable: the first Search writes the index
	require.NoError(b, err)
	for range s.Search(ctx, SearchQuery{Text: "x"}) {
	}
	require.NoError(b, s.Close())
	s, err = Open(dir, &Options{ReadOnly: true})
	require.NoError(b, err)
	defer s.Close()
	for range s.Search(ctx, SearchQuery{Text: "quokka"}) {
	}
	for _, text := range []string{"quokka", "migration", `"the index"`} {
		q := SearchQuery{Text: text}
		b.Run(strings.Trim(text, `"`), func(b *testing.B) {
			c0 := cpuTime()
			defer func() { b.ReportMetric(float64(cpuTime()-c0)/1e6/float64(b.N), "cpu-ms/op") }()
			for b.Loop() {
				n := 0
				for _, err := range s.Search(ctx, q) {
					require.NoError(b, err)
					n++
				}
				require.Equal(b, DefaultSearchLimit, n)
			}
		})
	}
}

// heapSampler samples the bytes of live and unswept heap objects every
// millisecond until stop, keeping the highest: the peak of a build.
type heapSampler struct {
	done chan struct{}
	peak chan uint64
}

func sampleHeap() *heapSampler {
	h := &heapSampler{done: make(chan struct{}), peak: make(chan uint64, 1)}
	go func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		var peak uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-h.done:
				h.peak <- peak
				return
			case <-t.C:
			}
		}
	}()
	return h
}

func (h *heapSampler) stop() uint64 { close(h.done); return <-h.peak }

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkSearchFirstBuild: the first Search of a store without an index
// (200 sessions of 200 events, sealed), which indexes every session and
// writes the index; then a read-only Store's first Search, which loads
// it. Metrics: peak-MiB, the highest heap (live and not yet swept
// objects) during the build, above the heap before it; kept-MiB, the
// heap the built index keeps; loaded-MiB, the heap the loaded index
// keeps.
func BenchmarkSearchFirstBuild(b *testing.B) {
	benchFirstBuild(b, searchSealedStore(b, 200, 200))
}

// BenchmarkSearchFirstBuildClaudeCode is BenchmarkSearchFirstBuild on the
// shared transcripts (one session each, each line a custom event): real
// text, many words seen once. Skipped without the shared data.
func BenchmarkSearchFirstBuildClaudeCode(b *testing.B) {
	data := sharedDataDir()
	if data == "" {
		b.Skip("no shared data (../shared/data, $SESSIONSTORE_SHARED_DATA or /work/shared/data)")
	}
	benchFirstBuild(b, claudeCodeStore(b, data))
}

func benchFirstBuild(b *testing.B, dir string) {
	ctx := context.Background()
	var peak, kept, loaded float64
	for b.Loop() {
		require.NoError(b, os.RemoveAll(filepath.Join(dir, searchDir)))
		s, err := Open(dir, nil)
		require.NoError(b, err)
		h0 := liveHeap()
		hs := sampleHeap()
		for _, err := range s.Search(ctx, SearchQuery{Text: "quokka"}) {
			require.NoError(b, err)
		}
		p := hs.stop()
		peak += float64(p-min(h0, p)) / (1 << 20)
		kept += float64(liveHeap()-h0) / (1 << 20)
		require.NoError(b, s.Close())
		h0 = liveHeap()
		s, err = Open(dir, &Options{ReadOnly: true})
		require.NoError(b, err)
		for _, err := range s.Search(ctx, SearchQuery{Text: "quokka"}) {
			require.NoError(b, err)
		}
		loaded += float64(liveHeap()-h0) / (1 << 20)
		require.NoError(b, s.Close())
	}
	b.ReportMetric(peak/float64(b.N), "peak-MiB")
	b.ReportMetric(kept/float64(b.N), "kept-MiB")
	b.ReportMetric(loaded/float64(b.N), "loaded-MiB")
}
