package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/pgstore"
	"github.com/sessionstore/sessionstore/pgstore/pgtest"
)

// cutter is a TCP proxy on loopback to the server whose cut closes every
// connection through it at once: a network that fails in the middle of
// queries, before, during or after the server committed them.
type cutter struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  map[net.Conn]bool
	cuts   int
}

func newCutter(t *testing.T, target string) *cutter {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c := &cutter{ln: ln, target: target, conns: map[net.Conn]bool{}}
	go c.serve()
	t.Cleanup(func() { ln.Close(); c.cut() })
	return c
}

func (c *cutter) serve() {
	for {
		in, err := c.ln.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", c.target)
		if err != nil {
			in.Close()
			continue
		}
		c.mu.Lock()
		c.conns[in], c.conns[out] = true, true
		c.mu.Unlock()
		go func() { _, _ = io.Copy(out, in); out.Close(); in.Close() }()
		go func() { _, _ = io.Copy(in, out); out.Close(); in.Close() }()
	}
}

func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn := range c.conns {
		conn.Close()
	}
	c.conns = map[net.Conn]bool{}
	c.cuts++
}

// TestConnectionsCut: a writer whose connections to PostgreSQL are all cut
// every few appends, in the middle of its queries, goes on: each
// append either is acknowledged or fails with ErrRemote, and a Store on an
// empty directory then loads every acknowledged event, each once and in
// order; none is lost, none is damaged.
//
//	SESSIONSTORE_PG_NETFAULT_EVENTS  appends (default 300; CI 1000)
func TestConnectionsCut(t *testing.T) {
	events := envSize(t, "SESSIONSTORE_PG_NETFAULT_EVENTS", 300)
	srv := pgtest.Shared(t)
	ctx := context.Background()
	u, err := url.Parse(srv.DSN())
	require.NoError(t, err)
	cut := newCutter(t, u.Host)
	u.Host = cut.ln.Addr().String()
	cfg, err := pgxpool.ParseConfig(u.String())
	require.NoError(t, err)
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	flaky, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(flaky.Close)
	table := srv.Table()
	obj, err := pgstore.New(ctx, flaky, &pgstore.Options{Table: table})
	require.NoError(t, err)
	opts := &sessionstore.Options{Remote: obj, LeaseTime: time.Minute, RemoteTimeout: 5 * time.Second, ChunkSize: 8 << 10}
	s, err := sessionstore.Open(t.TempDir(), opts)
	require.NoError(t, err)
	m, err := s.Create(ctx, sessionstore.Meta{Name: "cut"})
	require.NoError(t, err)

	// Every 2-11 appends, the connections are cut 0-2 ms into one: by
	// appends rather than by time, so that a slow machine sees as many
	// faults per append as a fast one.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
	var wg sync.WaitGroup
	var acked []string
	failed := 0
	next := 1 + rng.IntN(10)
	for i := range events {
		if i == next {
			next = i + 2 + rng.IntN(10)
			delay := time.Duration(rng.IntN(2000)) * time.Microsecond
			wg.Go(func() {
				time.Sleep(delay)
				cut.cut()
			})
		}
		text := fmt.Sprintf("e%d", i)
		_, err := s.Append(ctx, m.ID, textEv(text))
		if err != nil {
			require.ErrorIs(t, err, sessionstore.ErrRemote, "append %d", i)
			failed++
			continue
		}
		acked = append(acked, text)
	}
	wg.Wait()
	// The network back, the next append opens the session again (settling
	// what the failed ones left) and the Close releases it.
	// (A pooled connection cut at the last moment may fail one more.)
	var last string
	for try := 0; ; try++ {
		last = fmt.Sprintf("e%d", events+try)
		_, err = s.Append(ctx, m.ID, textEv(last))
		if err == nil || try == 3 {
			break
		}
		require.ErrorIs(t, err, sessionstore.ErrRemote)
	}
	require.NoError(t, err, "the append after the cuts")
	acked = append(acked, last)
	require.NoError(t, s.Close())
	assert.Positive(t, failed, "the cuts made appends fail")
	assert.NotEmpty(t, acked)

	direct, err := pgstore.New(ctx, srv.Pool(t), &pgstore.Options{Table: table})
	require.NoError(t, err)
	r, err := sessionstore.Open(t.TempDir(), &sessionstore.Options{Remote: direct, LeaseTime: time.Minute, RemoteTimeout: 10 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	evs, err := r.Load(ctx, m.ID)
	require.NoError(t, err)
	var got []string
	prev := -1
	for _, e := range evs {
		var rec struct{ Text string }
		require.NoError(t, json.Unmarshal(e.Record, &rec))
		got = append(got, rec.Text)
		var n int
		_, err := fmt.Sscanf(rec.Text, "e%d", &n)
		require.NoError(t, err)
		assert.Greater(t, n, prev, "in order, each once")
		prev = n
	}
	j := 0
	for _, text := range got {
		if j < len(acked) && text == acked[j] {
			j++
		}
	}
	assert.Equal(t, len(acked), j, "every acknowledged event is loaded, in order")
	rep, err := r.Verify(ctx, m.ID)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "Verify: %v", rep.Problems)
	t.Logf("%d appends, %d acknowledged, %d failed with ErrRemote, %d cuts; %d loaded, 0 lost", events, len(acked), failed, cut.cuts, len(got))
}
