package sessionstore

import (
	"context"
	"testing"
)

// BenchmarkSwitchLane measures a durable lane switch on the real file
// system: one atomic replace of lanes.json (write, fdatasync, rename,
// directory sync), then the append that continues the lane, which is an
// ordinary append (the lanes file is not written per append). The
// "append" case is the same appends without switching, for comparison.
func BenchmarkSwitchLane(b *testing.B) {
	b.Run("switch+append", func(b *testing.B) { benchSwitchLane(b, true) })
	b.Run("append", func(b *testing.B) { benchSwitchLane(b, false) })
}

func benchSwitchLane(b *testing.B, switching bool) {
	ctx := context.Background()
	s, err := Open(b.TempDir(), nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	meta, err := s.Create(ctx, Meta{Name: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	root, err := s.Append(ctx, meta.ID, UserText("root"))
	if err != nil {
		b.Fatal(err)
	}
	if err := s.CreateLane(ctx, meta.ID, "other", root.ID); err != nil {
		b.Fatal(err)
	}
	lanes := []string{"other", DefaultLane}
	for i := 0; b.Loop(); i++ {
		if switching {
			if err := s.SwitchLane(ctx, meta.ID, lanes[i%2]); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := s.Append(ctx, meta.ID, UserText("on the lane")); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rounds/s")
}
