package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// BenchmarkCommit measures durable 300-byte commits from 1, 16, 64 and
// 256 concurrent committers on the real disk, side by side with the
// baseline of today's per-session cost: each committer writing to its
// own preallocated file and fdatasyncing it for every record. Each
// committer's journal records are applied to its own preallocated file
// (written, not synced), as a session's chunk lines are. With a journal
// of MinSize, checkpoints (syncing those files) run inside the timing
// every few thousand commits; with DefaultSize, rarely.
//
// The two sides run in alternating rounds. Metrics: commits/s and p99
// latency of each side, the throughput ratio
// journal/baseline, and the journal's syncs (groups and checkpoint
// headers) per commit. The timer covers both sides; setup
// (preallocation) and the journal's Close are outside it.
//
//	go test -run XXX -bench BenchmarkCommit -benchtime 4000x ./internal/journal
func BenchmarkCommit(b *testing.B) {
	for _, size := range []int64{MinSize, DefaultSize} {
		for _, c := range []int{1, 16, 64, 256} {
			b.Run(fmt.Sprintf("size=%dMiB/committers=%d", size>>20, c), func(b *testing.B) { benchCommit(b, c, size) })
		}
	}
}

const benchRecord = 300

func benchCommit(b *testing.B, committers int, size int64) {
	per := max(1, b.N/committers)
	total := per * committers
	dir := b.TempDir()
	data := make([]byte, benchRecord)
	for i := range data {
		data[i] = 'a' + byte(i%26)
	}
	ctx := context.Background()

	b.StopTimer()
	jfiles := preallocFiles(b, filepath.Join(dir, "j"), committers, int64(per*benchRecord))
	bfiles := preallocFiles(b, filepath.Join(dir, "base"), committers, int64(per*benchRecord))
	w, err := Create(vfs.Default, dir, &Options{Size: size})
	if err != nil {
		b.Fatal(err)
	}
	b.StartTimer()

	// The two sides alternate in rounds, so that the noise of a shared
	// disk falls on both alike.
	commitJ := func(g, i int) error {
		off := int64(i * benchRecord)
		_, err := w.Commit(ctx, []Record{{Op: OpWrite, Path: fmt.Sprintf("j/%d", g), Offset: off, Data: data}}, func() error {
			_, err := jfiles[g].WriteAt(data, off)
			return err
		})
		return err
	}
	// The baseline: one write and one fdatasync per record, per file.
	commitB := func(g, i int) error {
		if _, err := bfiles[g].WriteAt(data, int64(i*benchRecord)); err != nil {
			return err
		}
		return bfiles[g].Sync()
	}
	var jlat, blat []time.Duration
	var jtime, btime time.Duration
	const rounds = 8
	for r := range rounds {
		from, to := per*r/rounds, per*(r+1)/rounds
		lat, d := runCommitters(committers, from, to, commitJ)
		jlat, jtime = append(jlat, lat...), jtime+d
		lat, d = runCommitters(committers, from, to, commitB)
		blat, btime = append(blat, lat...), btime+d
	}
	st := w.Stats()

	b.StopTimer()
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	for _, f := range append(jfiles, bfiles...) {
		f.Close()
	}
	jrate := float64(total) / jtime.Seconds()
	brate := float64(total) / btime.Seconds()
	b.ReportMetric(jrate, "journal-commits/s")
	b.ReportMetric(brate, "base-commits/s")
	b.ReportMetric(jrate/brate, "ratio")
	b.ReportMetric(p99(jlat), "journal-p99-ms")
	b.ReportMetric(p99(blat), "base-p99-ms")
	b.ReportMetric(float64(st.Syncs)/float64(st.Commits), "syncs/commit")
	b.ReportMetric(float64(st.Checkpoints), "checkpoints")
}

// preallocFiles creates n files of size bytes under dir, zeros written
// and synced, as a session's active chunk is.
func preallocFiles(b *testing.B, dir string, n int, size int64) []vfs.File {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	zeros := make([]byte, size)
	files := make([]vfs.File, n)
	for g := range n {
		f, err := vfs.Default.OpenFile(filepath.Join(dir, fmt.Sprint(g)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.WriteAt(zeros, 0); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		files[g] = f
	}
	if err := vfs.Default.SyncDir(dir); err != nil {
		b.Fatal(err)
	}
	return files
}

// runCommitters runs op(g, i) for i in [from, to) in each of n
// goroutines g and returns every call's latency and the wall time.
func runCommitters(n, from, to int, op func(g, i int) error) ([]time.Duration, time.Duration) {
	lat := make([][]time.Duration, n)
	var wg sync.WaitGroup
	var failed sync.Once
	var ferr error
	start := time.Now()
	for g := range n {
		lat[g] = make([]time.Duration, 0, to-from)
		wg.Go(func() {
			for i := from; i < to; i++ {
				t0 := time.Now()
				if err := op(g, i); err != nil {
					failed.Do(func() { ferr = err })
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if ferr != nil {
		panic(ferr)
	}
	return slices.Concat(lat...), elapsed
}

// p99 is the 99th percentile of d, in milliseconds.
func p99(d []time.Duration) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return float64(d[len(d)*99/100]) / float64(time.Millisecond)
}
