package sessionstore

import (
	"context"
	"testing"
	"time"
)

// BenchmarkDelete deletes closed sessions of five events each from a
// store on the OS file system, one per iteration: the catalogue record,
// the move into the trash with its two directory syncs, and (NoTrash)
// the removals. It also pays Delete's fork check, which reads every
// session.json: the store holds deleteBenchSessions others.
func BenchmarkDelete(b *testing.B) {
	for _, tc := range []struct {
		name     string
		trashFor time.Duration
	}{{"trash", 0}, {"notrash", NoTrash}} {
		b.Run(tc.name, func(b *testing.B) { benchDelete(b, tc.trashFor) })
	}
}

func benchDelete(b *testing.B, trashFor time.Duration) {
	ctx := context.Background()
	s, err := Open(b.TempDir(), &Options{TrashFor: trashFor})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for range deleteBenchSessions {
		if _, err := s.Create(ctx, Meta{}); err != nil {
			b.Fatal(err)
		}
	}
	var elapsed time.Duration
	for b.Loop() {
		b.StopTimer()
		m, err := s.Create(ctx, Meta{})
		if err != nil {
			b.Fatal(err)
		}
		for range 5 {
			if _, err := s.Append(ctx, m.ID, UserText("a message of the session")); err != nil {
				b.Fatal(err)
			}
		}
		if err := s.CloseSession(ctx, m.ID); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		if err := s.Delete(ctx, m.ID); err != nil {
			b.Fatal(err)
		}
		elapsed += time.Since(start)
	}
	b.ReportMetric(float64(elapsed.Microseconds())/1000/float64(b.N), "ms/delete")
}

// deleteBenchSessions is the number of other sessions in BenchmarkDelete's
// and BenchmarkPruneDryRun's store.
const deleteBenchSessions = 1000

// BenchmarkPruneDryRun plans a prune over deleteBenchSessions sessions:
// List, every session.json read for its fork, and the size of each
// session chosen (half of them).
func BenchmarkPruneDryRun(b *testing.B) {
	ctx := context.Background()
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	for range deleteBenchSessions {
		if _, err := s.Create(ctx, Meta{}); err != nil {
			b.Fatal(err)
		}
	}
	p := PrunePolicy{KeepRecent: -1, KeepNewest: deleteBenchSessions / 2, DryRun: true}
	for b.Loop() {
		res, err := s.Prune(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Removed) != deleteBenchSessions/2 {
			b.Fatalf("%d sessions chosen, want %d", len(res.Removed), deleteBenchSessions/2)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/deleteBenchSessions, "µs/session")
}
