package sessionstore

import (
	"context"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// forkBenchEnv sets the size of the large parent of the Fork benchmarks:
// 100,000 events by default (built in a few seconds, syncs skipped).
const forkBenchEnv = "SESSIONSTORE_FORK_BENCH_EVENTS"

// forkBenchEvents returns the large parent's size.
func forkBenchEvents(b *testing.B) int {
	v := os.Getenv(forkBenchEnv)
	if v == "" {
		return 100_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1000 {
		b.Fatalf("%s=%q: want a number of at least 1000", forkBenchEnv, v)
	}
	return n
}

// countingFS counts the bytes written through it.
type countingFS struct {
	vfs.FS
	written *atomic.Int64
}

type countingFile struct {
	vfs.File
	written *atomic.Int64
}

func (c countingFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return countingFile{f, c.written}, nil
}

func (f countingFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	f.written.Add(int64(n))
	return n, err
}

func (f countingFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	f.written.Add(int64(n))
	return n, err
}

// buildForkParent writes a session of n events in one line (each a child
// of the one before) to the store at dir, syncs skipped, and returns it
// and its last event.
func buildForkParent(b *testing.B, dir string, n int) (uuid.UUID, uuid.UUID) {
	b.Helper()
	s, err := Open(dir, &Options{fs: noSyncFS{vfs.Default}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	meta, err := s.Create(ctx, Meta{Name: "parent"})
	if err != nil {
		b.Fatal(err)
	}
	batch := make([]Event, 500)
	for i := range batch {
		batch[i] = benchRecord300()
	}
	var last uuid.UUID
	for done := 0; done < n; {
		k := min(len(batch), n-done)
		out, err := s.AppendBatch(ctx, meta.ID, batch[:k]...)
		if err != nil {
			b.Fatal(err)
		}
		last = out[k-1].ID
		done += k
	}
	return meta.ID, last
}

// BenchmarkFork forks a parent of 1,000 events and one of 100,000
// (SESSIONSTORE_FORK_BENCH_EVENTS) at their newest event, each open in
// the Store with its index loaded, with syncs on, and reports for each
// the time and the bytes written per fork, and their ratio, large over
// small: about 1, since a fork copies nothing.
func BenchmarkFork(b *testing.B) {
	large := forkBenchEvents(b)
	dir := b.TempDir()
	small, smallAt := buildForkParent(b, dir, 1000)
	big, bigAt := buildForkParent(b, dir, large)
	var written atomic.Int64
	s, err := Open(dir, &Options{fs: countingFS{vfs.Default, &written}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for _, id := range []uuid.UUID{small, big} {
		if _, _, err := s.NextParent(ctx, id); err != nil { // opens it, index loaded
			b.Fatal(err)
		}
	}
	var dur [2]time.Duration
	var bytes [2]int64
	b.ResetTimer()
	for range b.N {
		for k, p := range []struct{ id, at uuid.UUID }{{small, smallAt}, {big, bigAt}} {
			w0, t0 := written.Load(), time.Now()
			if _, err := s.Fork(ctx, p.id, p.at); err != nil {
				b.Fatal(err)
			}
			dur[k] += time.Since(t0)
			bytes[k] += written.Load() - w0
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(dur[0].Nanoseconds())/n, "ns/fork-1k")
	b.ReportMetric(float64(dur[1].Nanoseconds())/n, "ns/fork-large")
	b.ReportMetric(float64(bytes[0])/n, "bytes/fork-1k")
	b.ReportMetric(float64(bytes[1])/n, "bytes/fork-large")
	b.ReportMetric(dur[1].Seconds()/dur[0].Seconds(), "time-ratio")
	b.ReportMetric(float64(bytes[1])/float64(bytes[0]), "bytes-ratio")
	b.ReportMetric(float64(large), "large-events")
}

// BenchmarkForkLoad loads a fork of the large parent made at its newest
// event (so the fork's path is the parent's whole path, plus one event of
// its own) beside a Load of the parent itself:
//   - parent: Load of the parent, open in the Store;
//   - fork: Load of the fork, open in the Store (its prefix resolved);
//   - fork-open: open a Store, Load the fork, close: includes reading the
//     parent's index to resolve the prefix.
func BenchmarkForkLoad(b *testing.B) {
	large := forkBenchEvents(b)
	dir := b.TempDir()
	parent, at := buildForkParent(b, dir, large)
	ctx := context.Background()
	s, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	fork, err := s.Fork(ctx, parent, at)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Append(ctx, fork.ID, benchRecord300()); err != nil {
		b.Fatal(err)
	}
	load := func(b *testing.B, s *Store, id uuid.UUID, want int) {
		path, err := s.Load(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		if len(path) != want {
			b.Fatalf("loaded %d events, want %d", len(path), want)
		}
	}
	b.Run("parent", func(b *testing.B) {
		for range b.N {
			load(b, s, parent, large)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/load")
	})
	b.Run("fork", func(b *testing.B) {
		for range b.N {
			load(b, s, fork.ID, large+1)
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/load")
	})
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.Run("fork-open", func(b *testing.B) {
		for range b.N {
			s, err := Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			load(b, s, fork.ID, large+1)
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/open+load")
	})
}
