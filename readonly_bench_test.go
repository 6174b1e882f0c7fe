package sessionstore

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Knobs of BenchmarkReaderBesideWriter.
const (
	roBenchEvents    = 3000      // events in the session before the benchmark
	roBenchChunkSize = 256 << 10 // small enough that the writer seals chunks during a run
	roBenchSoloCount = 200       // appends timed without the reader, for comparison
)

// roBenchEvent is event i of the benchmark's workload: mostly short
// messages, every fourth a tool result of 1-4 KiB.
func roBenchEvent(i int) Event {
	if i%4 == 3 {
		return ToolResultEvent(ToolResult{CallID: fmt.Sprint("call-", i), Output: strings.Repeat(string(rune('a'+i%26)), 1<<10+(i*97)%(3<<10))})
	}
	return UserText(fmt.Sprintf("message %d: %s", i, strings.Repeat("words ", 10+i%40)))
}

// BenchmarkReaderBesideWriter measures a read-only Load of a session's
// active path (a few thousand events) while another Store appends to the
// same session as fast as it can, and reports:
//
//	ms/load        a Load beside the writer (each sees a new revision, so it
//	               also reloads the session's index)
//	quiet-ms/load  the same Load with the writer stopped, b.N loads in the
//	               same run, half before and half after the writer ran
//	slowdown       ms/load over quiet-ms/load
//	appends/s      the writer's appends during the timed loads
//	solo-appends/s the writer's appends with no reader, measured after
//	events/load    the length of the loaded path at the end
func BenchmarkReaderBesideWriter(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	w, err := Open(dir, &Options{ChunkSize: roBenchChunkSize})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	m, err := w.Create(ctx, Meta{Name: "reader beside writer"})
	if err != nil {
		b.Fatal(err)
	}
	id := m.ID
	batch := make([]Event, 0, 100)
	for i := 0; i < roBenchEvents; {
		batch = batch[:0]
		for ; len(batch) < cap(batch) && i < roBenchEvents; i++ {
			batch = append(batch, roBenchEvent(i))
		}
		if _, err := w.AppendBatch(ctx, id, batch...); err != nil {
			b.Fatal(err)
		}
	}
	r, err := Open(dir, &Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	var loaded int
	load := func() {
		evs, err := r.Load(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		loaded = len(evs)
	}
	quiet := func(n int) time.Duration {
		start := time.Now()
		for range n {
			load()
		}
		return time.Since(start)
	}
	load() // open the session in the reader
	quietTime := quiet((b.N + 1) / 2)

	var appends atomic.Int64
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for i := roBenchEvents; ; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := w.Append(ctx, id, roBenchEvent(i)); err != nil {
				done <- err
				return
			}
			appends.Add(1)
		}
	}()
	for appends.Load() == 0 {
		time.Sleep(100 * time.Microsecond)
	}

	b.ResetTimer()
	start, before := time.Now(), appends.Load()
	for range b.N {
		load()
	}
	beside, during := time.Since(start), appends.Load()-before
	b.StopTimer()
	close(stop)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	load() // see the writer's last events before the quiet loads
	quietTime += quiet(b.N / 2)

	// The writer alone.
	start = time.Now()
	for i := range roBenchSoloCount {
		if _, err := w.Append(ctx, id, roBenchEvent(i)); err != nil {
			b.Fatal(err)
		}
	}
	solo := time.Since(start)

	perLoad := beside.Seconds() * 1e3 / float64(b.N)
	quietPerLoad := quietTime.Seconds() * 1e3 / float64((b.N+1)/2+b.N/2)
	b.ReportMetric(perLoad, "ms/load")
	b.ReportMetric(quietPerLoad, "quiet-ms/load")
	b.ReportMetric(perLoad/quietPerLoad, "slowdown")
	b.ReportMetric(float64(during)/beside.Seconds(), "appends/s")
	b.ReportMetric(roBenchSoloCount/solo.Seconds(), "solo-appends/s")
	b.ReportMetric(float64(loaded), "events/load")
}
