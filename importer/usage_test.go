package importer

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// usageSession is a transcript with branches whose assistant messages
// report usage, and the input tokens they report in all.
func usageSession(rng *rand.Rand, n int) (*Session, int64) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	s := &Session{Meta: sessionstore.Meta{ID: ID("usage-session", t0), Name: "usage", CreatedAt: t0}, Path: "usage.jsonl"}
	var total int64
	var ids []uuid.UUID
	for i := range n {
		at := t0.Add(time.Duration(i+1) * time.Second)
		ev := sessionstore.NewEvent(sessionstore.KindMessage, sessionstore.RoleUser, sessionstore.Message{Content: "q"})
		if i%2 == 1 {
			in := rng.Int64N(10_000)
			total += in
			ev = sessionstore.NewEvent(sessionstore.KindMessage, sessionstore.RoleAssistant,
				sessionstore.Message{Content: "a", Model: "m", Usage: &sessionstore.Usage{InputTokens: in, OutputTokens: 1}})
		}
		ev.ID, ev.Time = ID(fmt.Sprint("usage-event-", i), at), at
		if len(ids) > 0 {
			ev.ParentID = ids[len(ids)-1]
			if rng.IntN(5) == 0 {
				ev.ParentID = ids[rng.IntN(len(ids))] // a branch
			}
		}
		ids = append(ids, ev.ID)
		s.Events = append(s.Events, ev)
	}
	return s, total
}

// Importing a transcript again, whole or after it grew, adds nothing to
// the usage totals it already counted: they equal what the transcript
// reports, and the totals session.json records after the close too.
func TestReimportUsage(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(36, 1))
	full, total := usageSession(rng, 60)
	dir := t.TempDir()
	st, err := sessionstore.Open(dir, nil)
	require.NoError(t, err)
	part := *full
	part.Events = full.Events[:30]
	var partTotal int64
	for _, ev := range part.Events {
		var m sessionstore.Message
		require.NoError(t, ev.Decode(&m))
		if m.Usage != nil {
			partTotal += m.Usage.InputTokens
		}
	}
	_, err = Write(ctx, st, &part)
	require.NoError(t, err)
	u, err := st.Usage(ctx, full.Meta.ID, sessionstore.UsageScope{Kind: sessionstore.UsageSession})
	require.NoError(t, err)
	assert.Equal(t, partTotal, u.InputTokens, "the first half")

	for round := range 3 { // the grown transcript, then the same again, across reopens
		res, err := Write(ctx, st, full)
		require.NoError(t, err)
		if round > 0 {
			assert.Zero(t, res.Added, "round %d adds nothing", round)
		}
		u, err := st.Usage(ctx, full.Meta.ID, sessionstore.UsageScope{Kind: sessionstore.UsageSession})
		require.NoError(t, err)
		assert.Equal(t, total, u.InputTokens, "round %d", round)
		require.NoError(t, st.Close())
		if st, err = sessionstore.Open(dir, nil); err != nil {
			require.NoError(t, err)
		}
		m, err := st.Meta(ctx, full.Meta.ID)
		require.NoError(t, err)
		require.NotNil(t, m.Usage, "round %d: recorded at the close", round)
		assert.Equal(t, total, m.Usage.Totals(m.Model, nil).InputTokens, "round %d: recorded", round)
	}
	require.NoError(t, st.Close())
}
