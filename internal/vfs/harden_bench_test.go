package vfs

import (
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkReadSmallFile reads a small file (a session.json, say, three
// directories below the root) whole, side by side: with os.ReadFile, with
// ReadFileInto on Default (O_NOFOLLOW, O_NONBLOCK, the fstat type check)
// and on a confined Default (below the root, openat2 with
// RESOLVE_NO_SYMLINKS); and opens and closes it with os.Open and through
// the confined Default. Each of the seam's cases reports its time as a
// ratio to the os package's, measured just before in the same run.
func BenchmarkReadSmallFile(b *testing.B) {
	root := b.TempDir()
	name := filepath.Join(root, "sessions", "0195b4e2-7d3a-7000-8000-000000000001", "session.json")
	if err := os.MkdirAll(filepath.Dir(name), 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(name, make([]byte, 400), 0o600); err != nil {
		b.Fatal(err)
	}
	perOp := func(b *testing.B) float64 { return float64(b.Elapsed().Nanoseconds()) / float64(b.N) }
	var readBase, openBase float64
	b.Run("os.ReadFile", func(b *testing.B) {
		for b.Loop() {
			if _, err := os.ReadFile(name); err != nil {
				b.Fatal(err)
			}
		}
		readBase = perOp(b)
	})
	confined := Confine(Default, root)
	for _, tc := range []struct {
		name string
		fs   FS
	}{{"default", Default}, {"confined", confined}} {
		b.Run(tc.name, func(b *testing.B) {
			buf := make([]byte, 0, 1024)
			for b.Loop() {
				if _, err := ReadFileInto(tc.fs, name, buf, 1<<20); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(perOp(b)/readBase, "x-os.ReadFile")
		})
	}
	b.Run("os.Open", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(name)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		openBase = perOp(b)
	})
	b.Run("confined-open", func(b *testing.B) {
		for b.Loop() {
			f, err := confined.OpenFile(name, os.O_RDONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
		b.ReportMetric(perOp(b)/openBase, "x-os.Open")
	})
}
