package sessionstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
)

// catalogueFixture writes n sessions' session.json files straight into a
// new store under a temporary directory (as n Creates would leave them,
// without their syncs), lets a writer build the catalogue, and returns
// the directory.
func catalogueFixture(b *testing.B, n int) string {
	b.Helper()
	dir := b.TempDir()
	s, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range n {
		var id uuid.UUID
		ms := uint64(base.UnixMilli()) + uint64(i)
		binary.BigEndian.PutUint64(id[:8], ms<<16|0x7000)
		binary.BigEndian.PutUint64(id[8:], 0x8000000000000000|uint64(i))
		at := base.Add(time.Duration(i) * time.Millisecond)
		meta := Meta{ID: id, Name: fmt.Sprint("session ", i), WorkingDir: "/home/user/project", Model: "model-name",
			CreatedAt: at, UpdatedAt: at.Add(time.Minute), Labels: map[string]string{"team": "core"}}
		b2, err := encodeMeta(meta, formatVersion)
		if err != nil {
			b.Fatal(err)
		}
		sdir := filepath.Join(dir, sessionsDir, id.String())
		if err := os.MkdirAll(sdir, 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sdir, metaFile), b2, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	s, err = Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if got, err := s.List(context.Background()); err != nil || len(got) != n { // builds the catalogue
		b.Fatalf("List: %d sessions, %v", len(got), err)
	}
	return dir
}

// benchBothWays runs run as sub-benchmarks "catalogue" (the store's
// catalogue in place) and "scan" (the catalogue moved away: a read-only
// store reads every session.json, as List did before the catalogue).
func benchBothWays(b *testing.B, dir string, run func(b *testing.B)) {
	cat := filepath.Join(dir, catalogueName)
	b.Run("catalogue", run)
	if err := os.Rename(cat, cat+".away"); err != nil {
		b.Fatal(err)
	}
	defer os.Rename(cat+".away", cat)
	b.Run("scan", run)
}

// BenchmarkList: open a read-only store and list 1,000 sessions, with the
// catalogue and by scanning every session.json.
func BenchmarkList(b *testing.B) {
	const n = 1000
	dir := catalogueFixture(b, n)
	ctx := context.Background()
	benchBothWays(b, dir, func(b *testing.B) {
		for b.Loop() {
			s, err := Open(dir, &Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			got, err := s.List(ctx)
			if err != nil || len(got) != n {
				b.Fatalf("List: %d sessions, %v", len(got), err)
			}
			s.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/open+list")
	})
}

// BenchmarkListRecent: open a read-only store and list the 50 newest of
// 10,000 sessions, with the catalogue and by scanning.
func BenchmarkListRecent(b *testing.B) {
	const n, recent = 10000, 50
	dir := catalogueFixture(b, n)
	ctx := context.Background()
	benchBothWays(b, dir, func(b *testing.B) {
		for b.Loop() {
			s, err := Open(dir, &Options{ReadOnly: true})
			if err != nil {
				b.Fatal(err)
			}
			got, err := s.ListRecent(ctx, recent)
			if err != nil || len(got) != recent {
				b.Fatalf("ListRecent: %d sessions, %v", len(got), err)
			}
			s.Close()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/open+list")
	})
}
