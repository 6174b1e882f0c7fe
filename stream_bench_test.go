//go:build unix

package sessionstore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// BenchmarkDeltaPublish is the cost of Publish per token batch (eight
// tokens, 40 bytes) on a real disk: live only, and durable (a write per
// batch, a sync per DeltaSyncInterval), side by side. An Append every 64
// batches settles them, as an answer's message does.
func BenchmarkDeltaPublish(b *testing.B) {
	batch := strings.Repeat("tok, ", 8)
	for _, durable := range []bool{false, true} {
		name := "live"
		if durable {
			name = "durable"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(b.TempDir(), &Options{DurableDeltas: durable})
			require.NoError(b, err)
			defer s.Close()
			meta, err := s.Create(ctx, Meta{})
			require.NoError(b, err)
			sub, err := s.Subscribe(ctx, meta.ID)
			require.NoError(b, err)
			defer sub.Close()
			go func() {
				for range sub.C {
				}
			}()
			b.SetBytes(int64(len(batch)))
			b.ResetTimer()
			for i := range b.N {
				if err := s.Publish(ctx, meta.ID, Delta{Kind: DeltaText, Data: batch}); err != nil {
					b.Fatal(err)
				}
				if i%64 == 63 {
					b.StopTimer()
					if _, err := s.Append(ctx, meta.ID, AssistantText("settled")); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
			}
		})
	}
}

// BenchmarkTailLatencyCrossProcess is the time from Publish in a writer
// process to the delta's arrival through Tail in this process, with the
// default TailInterval: p50 and p99 in microseconds (b.N deltas, a
// millisecond apart).
func BenchmarkTailLatencyCrossProcess(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	s, err := Open(dir, nil)
	require.NoError(b, err)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(b, err)
	require.NoError(b, s.Close())
	r, err := Open(dir, &Options{ReadOnly: true})
	require.NoError(b, err)
	defer r.Close()
	tl, err := r.Tail(ctx, meta.ID, "")
	require.NoError(b, err)
	defer tl.Close()

	n := max(b.N, 50)
	b.ResetTimer()
	child := startStreamChild(b, "latency", dir, meta.ID, strconv.Itoa(n))
	lat := make([]time.Duration, 0, n)
	timeout := time.After(streamSafety + time.Duration(n)*5*time.Millisecond)
	for len(lat) < n {
		select {
		case u, ok := <-tl.C:
			if !ok {
				b.Fatalf("tail ended: %v", tl.Err())
			}
			if u.Delta == nil {
				continue
			}
			ns, err := strconv.ParseInt(u.Delta.Data, 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(time.Unix(0, ns)))
		case <-timeout:
			b.Fatalf("%d of %d deltas arrived; child: %s", len(lat), n, child.stderr.String())
		}
	}
	b.StopTimer()
	_ = child.cmd.Wait()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
