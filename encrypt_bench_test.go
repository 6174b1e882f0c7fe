package sessionstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// BenchmarkEncryptedTree renders the Tree of a session of 20,000 messages
// held open, plain and encrypted side by side: the encrypted one opens a
// sealed preview per node (AES-GCM of at most 48 bytes). It reports the
// time per node.
func BenchmarkEncryptedTree(b *testing.B) {
	const events = 20000
	for _, enc := range []bool{false, true} {
		name := "plain"
		o := Options{fs: noSyncFS{vfs.Default}}
		if enc {
			name, o.Keys = "encrypted", testKeys(b, "local:1", 7)
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(b.TempDir(), &o)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			meta, err := s.Create(ctx, Meta{})
			if err != nil {
				b.Fatal(err)
			}
			batch := make([]Event, 100)
			for i := 0; i < events; i += len(batch) {
				for k := range batch {
					batch[k] = UserText(fmt.Sprintf("message %d: please look at the failing test in the parser package", i+k))
				}
				if _, err := s.AppendBatch(ctx, meta.ID, batch...); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				nodes, err := s.Tree(ctx, meta.ID)
				if err != nil || len(nodes) != events || nodes[events-1].Preview == "" {
					b.Fatalf("%d nodes, last preview %q: %v", len(nodes), nodes[len(nodes)-1].Preview, err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/events, "ns/node")
		})
	}
}
