package sessionstore

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// BenchmarkUsage measures Usage over a session of 1,000 events, half of
// them messages reporting usage: UsageSession while the writer knows the
// totals (no record read), UsageSession folding every message record (a
// store whose session.json records none, as after a crash or in an old
// store), and UsageBranch on the active path (every message record on it).
func BenchmarkUsage(b *testing.B) {
	ctx := context.Background()
	s, err := Open(memRoot, &Options{fs: vfs.NewMemFS()})
	require.NoError(b, err)
	defer s.Close()
	m, err := s.Create(ctx, Meta{Model: "m"})
	require.NoError(b, err)
	for i := range 500 {
		_, err := s.AppendBatch(ctx, m.ID,
			NewEvent(KindMessage, RoleAssistant, Message{Content: "an answer of some length", Usage: &Usage{InputTokens: int64(i), OutputTokens: 3}}),
			NewEvent(KindToolResult, RoleTool, ToolResult{CallID: "c", Output: "output"}))
		require.NoError(b, err)
	}
	run := func(b *testing.B, scope UsageScope, before func(h *openSession)) {
		var in int64
		for b.Loop() {
			if before != nil {
				b.StopTimer()
				require.NoError(b, s.withHandle(ctx, m.ID, func(h *openSession) error { before(h); return nil }))
				b.StartTimer()
			}
			u, err := s.Usage(ctx, m.ID, scope)
			if err != nil {
				b.Fatal(err)
			}
			in = u.InputTokens
		}
		require.Equal(b, int64(499*500/2), in)
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1000, "ns/event")
	}
	b.Run("session-known", func(b *testing.B) { run(b, UsageScope{Kind: UsageSession}, nil) })
	b.Run("session-fold", func(b *testing.B) {
		run(b, UsageScope{Kind: UsageSession}, func(h *openSession) { h.usage, h.meta.Usage = sessionUsage{}, nil })
	})
	b.Run("branch", func(b *testing.B) { run(b, UsageScope{Kind: UsageBranch, Leaf: uuid.Nil}, nil) })
}
