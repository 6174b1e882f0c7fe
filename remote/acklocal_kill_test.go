//go:build linux

package remote_test

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
	"github.com/sessionstore/sessionstore/remote"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

// TestKillDurableLocal kills writer children that acknowledge appends
// after the local sync (DurableLocal), each on the same directory, with
// SIGKILL while they append (their Creates in flight): the next child,
// opening the session there (the same Store: no lease to wait out),
// loads every event an earlier child acknowledged, in order, and stores
// those the object store lacked before it appends; at the end a Store of
// the parent's on another directory loads every acknowledged event from
// the bucket. The number of kills is a quarter of
// SESSIONSTORE_REMOTE_KILLS (default 5; CI 50).
func TestKillDurableLocal(t *testing.T) {
	t.Parallel()
	kills := max(1, procSize(t, procKillsEnv, 20)/4)
	seed := procSeed(t, procSeedEnv)
	rng := rand.New(rand.NewPCG(seed, 0x6c6f63616c))
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	obj := remote.New(srv.Open(t, srv.Config(bucket)))
	tmpl := procTemplate(srv, bucket)
	tmpl.Dir, tmpl.Local = t.TempDir(), true

	var acked, tried []procEv
	session := ""
	for i := range kills + 1 {
		c := tmpl
		c.Session, c.Prefix, c.Seed = session, fmt.Sprintf("k%d", i), seed+uint64(i)
		last := i == kills
		if last {
			c.Max = 3
		}
		p, err := startProc(c)
		require.NoError(t, err)
		t.Cleanup(p.cleanup)
		want := 1 + rng.IntN(40)
		if !last {
			p.readUntil(time.Now().Add(procGate), func(r *procRun) bool { return len(r.acks) >= want || len(r.errs) > 0 })
			time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
			require.NoError(t, p.kill(), "child %d", i)
		} else {
			require.NoError(t, p.finish(false), "child %d", i)
		}
		r := p.run
		require.Empty(t, r.errs, "child %d: %s", i, p.report())
		if session == "" {
			require.NotZero(t, r.created, "child %d created the session: %s", i, p.report())
			session = r.created.String()
		} else {
			require.True(t, r.loadDone, "child %d loaded the session before it was killed: %s", i, p.report())
			assert.True(t, procSubsequence(acked, r.loaded), "child %d: every event acknowledged before it, in order", i)
			assert.True(t, procSubsequence(r.loaded, tried), "child %d: only events tried", i)
		}
		require.Positive(t, len(r.acks), "child %d acknowledged something: %s", i, p.report())
		acked = append(acked, r.acks...)
		for _, tr := range r.tries {
			tried = append(tried, procEv{text: tr.text, sum: tr.sum})
		}
	}
	s, err := sessionstore.Open(t.TempDir(), procOptions(obj, true))
	require.NoError(t, err)
	defer s.Close()
	got, _, err := procLoad(context.Background(), s, uuid.MustParse(session))
	require.NoError(t, err)
	assert.True(t, procSubsequence(acked, got), "another Store loads every acknowledged event, in order")
	assert.True(t, procSubsequence(got, tried), "only events tried")
	t.Logf("%d kills, %d events acknowledged, %d loaded from the bucket", kills, len(acked), len(got))
}

// procSubsequence reports whether a's events (text and record) appear in
// b in order.
func procSubsequence(a, b []procEv) bool {
	i := 0
	for _, x := range b {
		if i < len(a) && a[i].text == x.text && a[i].sum == x.sum {
			i++
		}
	}
	return i == len(a)
}
