package export

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// benchSession writes a session of total events (user messages, tool
// calls and results of a few hundred bytes) into a store at dir, closes
// the store (which seals the chunks, as a session at rest is), and
// returns the session's id.
func benchSession(b *testing.B, dir string, total int) uuid.UUID {
	ctx := context.Background()
	st, err := sessionstore.Open(dir, &sessionstore.Options{ChunkSize: 1 << 20})
	require.NoError(b, err)
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "bench"})
	require.NoError(b, err)
	const batch = 500
	for i := 0; i < total; i += batch {
		evs := make([]sessionstore.Event, 0, batch)
		for j := i; j < i+batch && j < total; j++ {
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
	require.NoError(b, st.Close())
	return meta.ID
}

// BenchmarkJSONL exports a closed session of 10,000 events through a
// read-only store, as the whole tree and as the active path, and reports
// events/s and MB/s of output.
func BenchmarkJSONL(b *testing.B) {
	const total = 10000
	dir := b.TempDir()
	session := benchSession(b, dir, total)
	st, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true})
	require.NoError(b, err)
	defer st.Close()
	for _, scope := range []Scope{Tree, ActivePath} {
		b.Run(string(scope), func(b *testing.B) {
			ctx := context.Background()
			var stats Stats
			for b.Loop() {
				stats, err = JSONL(ctx, io.Discard, st, session, Options{Scope: scope})
				if err != nil {
					b.Fatal(err)
				}
			}
			require.Equal(b, total, stats.Events)
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(float64(stats.Events)/sec, "events/s")
			b.ReportMetric(float64(stats.Bytes)/1e6/sec, "MB/s")
		})
	}
}
