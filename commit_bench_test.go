package sessionstore

import (
	"context"
	"os"
	"path/filepath"
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
//
// Each iteration also runs the same two phases on rawLog, the least a
// group commit can do: the same lines written to a preallocated file and
// made durable by fdatasync, with no encoding, index or HEAD. Its ratio
// (raw-ratio-16/1) is what the machine allows; vs-raw-16 is the store's
// 16-writer throughput over rawLog's.
func BenchmarkGroupCommit(b *testing.B) {
	const appends = 1600
	ctx := context.Background()
	var syncs atomic.Int64
	dir := b.TempDir()
	s, id := benchSession(b, dir, &Options{fs: slowSyncFS{vfs.Default, 0, &syncs}})
	ev := benchRecord300()
	sample, err := s.Append(ctx, id, ev)
	if err != nil {
		b.Fatal(err)
	}
	line := encodeEvent(nil, &sample)
	timed := func(writers int, append func() error) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for range writers {
			wg.Go(func() {
				for range appends / writers {
					if err := append(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	phase := func(writers int) time.Duration {
		return timed(writers, func() error {
			_, err := s.Append(ctx, id, ev)
			return err
		})
	}
	rawPhase := func(writers int) time.Duration {
		l := newRawLog(b, filepath.Join(dir, "raw.log"), appends*len(line))
		defer l.f.Close()
		return timed(writers, func() error { return l.append(line) })
	}
	var one, many, rawOne, rawMany time.Duration
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
		rawOne += rawPhase(1)
		rawMany += rawPhase(16)
	}
	b.ReportMetric(syncOne.Seconds()/one.Seconds(), "sync-share-1")
	b.ReportMetric(syncMany.Seconds()/many.Seconds(), "sync-share-16")
	b.StopTimer()
	n := float64(appends * b.N)
	b.ReportMetric(n/one.Seconds(), "appends/s-1")
	b.ReportMetric(n/many.Seconds(), "appends/s-16")
	b.ReportMetric(one.Seconds()/many.Seconds(), "ratio-16/1")
	b.ReportMetric(n/float64(syncsMany), "appends/sync-16")
	b.ReportMetric(n/rawOne.Seconds(), "raw-appends/s-1")
	b.ReportMetric(n/rawMany.Seconds(), "raw-appends/s-16")
	b.ReportMetric(rawOne.Seconds()/rawMany.Seconds(), "raw-ratio-16/1")
	b.ReportMetric(rawMany.Seconds()/many.Seconds(), "vs-raw-16")
}

// rawLog is BenchmarkGroupCommit's baseline: lines written at the end of a
// file whose space was preallocated with synced zeros (as the store's
// active chunk is, so a sync need not change the file's size), made durable
// by fdatasync in the simplest group commit. A writer queues its line; if
// no sync is in flight it writes the queue and syncs it, otherwise it waits
// for a sync that covers its line.
type rawLog struct {
	f              vfs.File
	mu             sync.Mutex
	cond           *sync.Cond
	queue, spare   []byte
	off            int64 // file offset of queue[0]
	queued, synced int   // lines
	syncing        bool
}

// newRawLog creates path with size bytes of synced zeros.
func newRawLog(b *testing.B, path string, size int) *rawLog {
	b.Helper()
	f, err := vfs.Default.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := f.Write(make([]byte, size)); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	l := &rawLog{f: f}
	l.cond = sync.NewCond(&l.mu)
	return l
}

// append returns once line is durable.
func (l *rawLog) append(line []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue = append(l.queue, line...)
	l.queued++
	mine := l.queued
	for l.synced < mine {
		if l.syncing {
			l.cond.Wait()
			continue
		}
		l.syncing = true
		data, off, upto := l.queue, l.off, l.queued
		l.queue, l.spare = l.spare[:0], nil
		l.off += int64(len(data))
		l.mu.Unlock()
		_, err := l.f.WriteAt(data, off)
		if err == nil {
			err = l.f.Sync()
		}
		l.mu.Lock()
		l.syncing, l.spare = false, data
		l.cond.Broadcast()
		if err != nil {
			return err
		}
		l.synced = upto
	}
	return nil
}
