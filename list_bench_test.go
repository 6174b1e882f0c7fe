package sessionstore

import (
	"context"
	"os"
	"strconv"
	"testing"

	"github.com/google/uuid"
)

// benchSessions is the store size of BenchmarkListPage:
// SESSIONSTORE_BENCH_SESSIONS, or 10,000 (building 100,000 session.json
// files takes tens of seconds; the full size is
// SESSIONSTORE_BENCH_SESSIONS=100000).
func benchSessions(b *testing.B) int {
	v := os.Getenv("SESSIONSTORE_BENCH_SESSIONS")
	if v == "" {
		return 10_000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 100 {
		b.Fatalf("SESSIONSTORE_BENCH_SESSIONS=%q: want a number of at least 100", v)
	}
	return n
}

// BenchmarkListPage lists pages of 50 from a store of benchSessions
// sessions, beside a full List: the newest page, a page from the middle
// (a cursor), a filter that matches none (the whole catalogue read from
// its end, no session.json stat'ed), the first 50 of Sessions, and List.
// Each reports ns per page and the catalogue entries decoded and the
// session.json files stat'ed or read per page.
func BenchmarkListPage(b *testing.B) {
	n := benchSessions(b)
	dir := catalogueFixture(b, n)
	s, err := Open(dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	all, err := s.List(ctx)
	if err != nil || len(all) != n {
		b.Fatalf("List: %d sessions, %v", len(all), err)
	}
	middle := all[n/2].ID.String()
	report := func(b *testing.B, q Query, cursor string, size int) {
		before, err := parseCursor(cursor)
		if err != nil {
			b.Fatal(err)
		}
		_, _, cost, err := s.listPage(ctx, q, before, size)
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/page")
		b.ReportMetric(float64(cost.entries), "entries/page")
		b.ReportMetric(float64(cost.reads), "sessions-read/page")
	}
	pages := []struct {
		name   string
		q      Query
		cursor string
		want   int
	}{
		{"newest", Query{}, "", 50},
		{"middle", Query{}, middle, 50},
		{"filter-none", Query{ParentSession: uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")}, "", 0},
	}
	for _, p := range pages {
		b.Run("ListPage/"+p.name, func(b *testing.B) {
			for b.Loop() {
				page, _, err := s.ListPage(ctx, p.q, p.cursor)
				if err != nil || len(page) != p.want {
					b.Fatalf("%d sessions, %v", len(page), err)
				}
			}
			report(b, p.q, p.cursor, 50)
		})
	}
	b.Run("Sessions/first50", func(b *testing.B) {
		for b.Loop() {
			got := 0
			for _, err := range s.Sessions(ctx, Query{}) {
				if err != nil {
					b.Fatal(err)
				}
				if got++; got == 50 {
					break
				}
			}
		}
		report(b, Query{}, "", sessionsBatch) // Sessions reads a batch at a time
	})
	b.Run("List/all", func(b *testing.B) {
		for b.Loop() {
			if got, err := s.List(ctx); err != nil || len(got) != n {
				b.Fatalf("%d sessions, %v", len(got), err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N), "ns/page")
		b.ReportMetric(float64(n), "sessions-read/page")
	})
}
