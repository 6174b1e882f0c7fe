package export

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// BenchmarkJSONL exports a session of 10,000 events (messages, tool calls
// and results of a few hundred bytes, one branch every 100 events) as a
// whole tree, and reports events/s and MB/s of output.
func BenchmarkJSONL(b *testing.B) {
	ctx := context.Background()
	st := openStore(b)
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "bench"})
	require.NoError(b, err)
	const total, batch = 10000, 500
	for i := 0; i < total; i += batch {
		evs := make([]sessionstore.Event, 0, batch)
		for j := i; j < i+batch; j++ {
			switch j % 3 {
			case 0:
				evs = append(evs, sessionstore.UserText(fmt.Sprintf("message %d: please look at the failing test in pkg/%d and tell me why", j, j)))
			case 1:
				evs = append(evs, sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: fmt.Sprint("c", j), Name: "run_tests", Arguments: []byte(`{"pkg":"./...","flags":["-race","-count=1"]}`)}))
			default:
				evs = append(evs, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: fmt.Sprint("c", j-1), Output: fmt.Sprintf("ok  \tpkg/%d\t0.%03ds\n", j, j%1000)}))
			}
		}
		_, err := st.AppendBatch(ctx, meta.ID, evs...)
		require.NoError(b, err)
	}
	var stats Stats
	b.ResetTimer()
	for b.Loop() {
		stats, err = JSONL(ctx, io.Discard, st, meta.ID, Options{})
		if err != nil {
			b.Fatal(err)
		}
	}
	require.Equal(b, total, stats.Events)
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(stats.Events)/sec, "events/s")
	b.ReportMetric(float64(stats.Bytes)/1e6/sec, "MB/s")
}
