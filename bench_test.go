package sessionstore

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// benchRecord300 is a user message whose compact record is 300 bytes.
func benchRecord300() Event {
	ev := UserText("")
	pad := 300 - len(ev.Record)
	return UserText(strings.Repeat("a", pad))
}

// BenchmarkAppend measures durable appends of a 300-byte user message and,
// interleaved in the same loop on the same file system, the raw floor: a
// write of a line of the same size into preallocated, synced zeros and an
// fdatasync (rawLog), as the store writes its active chunk. ratio-vs-raw
// is store throughput / floor throughput (1.0 = no overhead). The floor is
// the least these benchmarks found a durable append to cost, not a proven
// limit of the disk. ratio-vs-growing-file is against a write+fdatasync to
// a growing O_APPEND file, whose every sync also commits the file's size.
func BenchmarkAppend(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	s, id := benchSession(b, dir, nil)
	ev := benchRecord300()
	if len(ev.Record) != 300 {
		b.Fatalf("record is %d bytes", len(ev.Record))
	}
	sample, err := s.Append(ctx, id, ev)
	if err != nil {
		b.Fatal(err)
	}
	line := encodeEvent(nil, &sample)
	// The floor: the same line written into preallocated, synced zeros
	// and fdatasynced, as the store's active chunk is written. The growing
	// file, whose every sync also commits a new size, is an extra.
	floor := newRawLog(b, filepath.Join(dir, "raw-floor.jsonl"), (b.N+1)*len(line))
	defer floor.f.Close()
	grow, err := vfs.Default.OpenFile(filepath.Join(dir, "raw-grow.jsonl"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer grow.Close()

	var storeDur, floorDur, growDur time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := s.Append(ctx, id, ev); err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := floor.append(line); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if _, err := grow.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := grow.Sync(); err != nil {
			b.Fatal(err)
		}
		growDur += time.Since(t2)
		floorDur += t2.Sub(t1)
		storeDur += t1.Sub(t0)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/storeDur.Seconds(), "appends/s")
	b.ReportMetric(float64(b.N)/floorDur.Seconds(), "raw-syncs/s")
	b.ReportMetric(floorDur.Seconds()/storeDur.Seconds(), "ratio-vs-raw")
	b.ReportMetric(growDur.Seconds()/storeDur.Seconds(), "ratio-vs-growing-file")
}

// BenchmarkAppendRotation measures the latency of durable 300-byte appends
// across chunk rotations (1 MiB chunks, so that about one append in 2,400
// fills a chunk and starts its sealing): the slowest append and the 99.9th
// percentile, in milliseconds. Sealing runs in the background, so no
// append waits for a chunk to be compressed.
func BenchmarkAppendRotation(b *testing.B) {
	ctx := context.Background()
	s, id := benchSession(b, b.TempDir(), &Options{ChunkSize: 1 << 20})
	ev := benchRecord300()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		if _, err := s.Append(ctx, id, ev); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(lat[len(lat)-1]), "max-ms")
	b.ReportMetric(ms(lat[len(lat)*999/1000]), "p999-ms")
	b.ReportMetric(ms(lat[len(lat)/2]), "p50-ms")
}

// benchSession opens a store in dir with a new session, closed when the
// benchmark ends.
func benchSession(b *testing.B, dir string, o *Options) (*Store, uuid.UUID) {
	b.Helper()
	s, err := Open(dir, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	meta, err := s.Create(context.Background(), Meta{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	return s, meta.ID
}

// noSyncFS drops syncs: it builds large benchmark fixtures quickly. Never
// used where durability is measured.
type noSyncFS struct{ vfs.FS }

type noSyncFile struct{ vfs.File }

func (noSyncFile) Sync() error        { return nil }
func (noSyncFS) SyncDir(string) error { return nil }
func (n noSyncFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	f, err := n.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return noSyncFile{f}, nil
}

const (
	fixtureTrunk    = 1000
	fixtureBranches = 10
	fixtureBranch   = 9900
	fixtureEvents   = fixtureTrunk + fixtureBranches*fixtureBranch
	fixturePath     = fixtureTrunk + fixtureBranch
)

// buildBranchyFixture writes a session of 100,000 events to dir: a trunk of
// 1,000 and ten branches of 9,900 forking from its end, HEAD on the last
// branch. Syncs are skipped to build it quickly.
func buildBranchyFixture(b *testing.B, dir string) uuid.UUID {
	o := Options{fs: noSyncFS{vfs.Default}}
	s, err := Open(dir, &o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	meta, err := s.Create(ctx, Meta{Name: "branchy"})
	if err != nil {
		b.Fatal(err)
	}
	msg := benchRecord300()
	var fork uuid.UUID
	for i := 0; i < fixtureTrunk; i++ {
		ev, err := s.Append(ctx, meta.ID, msg)
		if err != nil {
			b.Fatal(err)
		}
		fork = ev.ID
	}
	for br := 0; br < fixtureBranches; br++ {
		if err := s.Branch(ctx, meta.ID, fork); err != nil {
			b.Fatal(err)
		}
		for i := 0; i < fixtureBranch; i++ {
			if _, err := s.Append(ctx, meta.ID, msg); err != nil {
				b.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	return meta.ID
}

// BenchmarkOpenLoad works on a 100,000-event session with ten branches
// (page cache warm):
//   - load: open the store and the session (without its index: see
//     Opening in the package doc) and load the active path of 10,900
//     events through the parent locations;
//   - open: open the store and the session (without its index) and
//     close it;
//   - load-indexed: the same with the index loaded first (parse
//     index.jsonl into the id->location map, reconcile);
//   - load-readonly: load in a read-only store;
//   - index: open the store and the session and load its index;
//   - tree: the payload-free tree of all 100,000 events from an open
//     session;
//   - resume: open, load, append one event and close, as a harness
//     resuming a session does.
func BenchmarkOpenLoad(b *testing.B) {
	dir := b.TempDir()
	id := buildBranchyFixture(b, dir)
	ctx := context.Background()
	// load opens the session without its index (lazy.go) and follows the
	// parent locations; load-indexed loads the index first, as every open
	// did before format 2; load-readonly is load in a read-only store.
	openLoad := func(b *testing.B, indexed bool, o *Options) {
		for i := 0; i < b.N; i++ {
			s, err := Open(dir, o)
			if err != nil {
				b.Fatal(err)
			}
			if indexed {
				if _, _, err := s.NextParent(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
			path, err := s.Load(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if len(path) != fixturePath {
				b.Fatalf("loaded %d events", len(path))
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/open+load")
		b.ReportMetric(fixturePath, "events-loaded")
	}
	// open: open the store and the session, without its index, as Head
	// does (lazy.go), and close: what doc.go's "about 1 ms" measures.
	b.Run("open", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s, err := Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Head(ctx, id); err != nil {
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/open")
	})
	b.Run("load", func(b *testing.B) { openLoad(b, false, nil) })
	b.Run("load-indexed", func(b *testing.B) { openLoad(b, true, nil) })
	b.Run("load-readonly", func(b *testing.B) { openLoad(b, false, &Options{ReadOnly: true}) })
	b.Run("index", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s, err := Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			if _, _, err := s.NextParent(ctx, id); err != nil { // loads the index
				b.Fatal(err)
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/open")
		b.ReportMetric(fixtureEvents, "index-entries")
	})
	b.Run("tree", func(b *testing.B) {
		s, err := Open(dir, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Tree(ctx, id); err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			nodes, err := s.Tree(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if len(nodes) != fixtureEvents {
				b.Fatalf("%d nodes", len(nodes))
			}
		}
	})
	// resume is what a harness does to go on with a session: open, load
	// the active path, append one event (durable), close. The session
	// grows by one event per iteration, so this runs last.
	resumed := 0
	b.Run("resume", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			s, err := Open(dir, nil)
			if err != nil {
				b.Fatal(err)
			}
			path, err := s.Load(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			if len(path) != fixturePath+resumed {
				b.Fatalf("loaded %d events", len(path))
			}
			if _, err := s.Append(ctx, id, UserText("go on")); err != nil {
				b.Fatal(err)
			}
			resumed++
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/resume")
	})
}

// BenchmarkDecodeIndexLine measures the index line decoder on its own.
func BenchmarkDecodeIndexLine(b *testing.B) {
	e := entry{Header: header{ID: uuid.Must(uuid.NewV7()), ParentID: uuid.Must(uuid.NewV7()), Kind: 1, Role: 1, Time: time.Now().UnixNano()}, Size: 300, Loc: location{Chunk: 3, Offset: 123456, Length: 512}}
	line := eventline.AppendIndex(nil, &e)
	line = line[:len(line)-1]
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := eventline.DecodeIndex(line); err != nil {
			b.Fatal(err)
		}
	}
}
