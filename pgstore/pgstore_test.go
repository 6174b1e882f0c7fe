package pgstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/pgstore"
	"github.com/sessionstore/sessionstore/pgstore/pgtest"
	"github.com/sessionstore/sessionstore/sessiontest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// envSize returns the positive integer in the environment variable name,
// or def when it is unset: the sizes CI raises.
func envSize(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(t, err, "%s=%q", name, v)
	require.Positive(t, n, "%s=%q", name, v)
	return n
}

// newStore returns a pgstore.Store on a table of its own, with a bulk
// store on another table when bulk is set.
func newStore(t *testing.T, bulk bool) (*pgstore.Store, *pgstore.Store) {
	t.Helper()
	srv := pgtest.Shared(t)
	pool := srv.Pool(t)
	ctx := context.Background()
	var b *pgstore.Store
	opts := &pgstore.Options{Table: srv.Table()}
	if bulk {
		var err error
		b, err = pgstore.New(ctx, pool, &pgstore.Options{Table: srv.Table()})
		require.NoError(t, err)
		opts.Bulk = b
	}
	s, err := pgstore.New(ctx, pool, opts)
	require.NoError(t, err)
	return s, b
}

// TestConformance runs the ObjectStore contract (sessiontest) on a table,
// alone and with a bulk store (another table) beside it: keys the test
// writes that are not of the Store's layout stay in the first.
func TestConformance(t *testing.T) {
	for _, bulk := range []bool{false, true} {
		t.Run(fmt.Sprintf("bulk=%v", bulk), func(t *testing.T) {
			sessiontest.ObjectStoreConformance(t, func(t *testing.T) sessionstore.ObjectStore {
				s, _ := newStore(t, bulk)
				return s
			}, sessiontest.ObjectStoreConfig{ClockStep: 100 * time.Millisecond, ListAfter: true})
		})
	}
}

// TestKeysAreBytes: keys compare as bytes whatever the database's
// collation, with bytes past ASCII and ones a LIKE pattern would take as
// wildcards.
func TestKeysAreBytes(t *testing.T) {
	s, _ := newStore(t, false)
	ctx := context.Background()
	keys := []string{"a%b", "a_b", "a\\b", "a\xffz", "a\xff", "aé", "aZ", "a~"}
	for _, k := range keys {
		require.NoError(t, s.Put(ctx, k, []byte(k)))
	}
	list, err := s.List(ctx, "a", 0)
	require.NoError(t, err)
	var got []string
	for _, o := range list {
		got = append(got, o.Key)
	}
	assert.Equal(t, []string{"a%b", "aZ", "a\\b", "a_b", "a~", "aé", "a\xff", "a\xffz"}, got)
	list, err = s.List(ctx, "a_", 0)
	require.NoError(t, err)
	require.Len(t, list, 1, "_ is no wildcard")
	list, err = s.List(ctx, "a\xff", 0)
	require.NoError(t, err)
	assert.Len(t, list, 2, "a prefix ending in 0xff")
}

// TestTableNames: New refuses a table name that is not plain letters,
// digits and underscores (schema.name allowed), and creates the table once
// however many News race for it.
func TestTableNames(t *testing.T) {
	srv := pgtest.Shared(t)
	pool := srv.Pool(t)
	ctx := context.Background()
	for _, bad := range []string{"a;drop", "a b", "a.b.c", "1a", `a"b`, "a-b"} {
		_, err := pgstore.New(ctx, pool, &pgstore.Options{Table: bad})
		assert.Error(t, err, bad)
	}
	_, err := pool.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS other`)
	require.NoError(t, err)
	name := "other." + srv.Table()
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { _, errs[i] = pgstore.New(ctx, pool, &pgstore.Options{Table: name}) })
	}
	wg.Wait()
	for i, err := range errs {
		assert.NoError(t, err, "New %d", i)
	}
	s, err := pgstore.New(ctx, pool, &pgstore.Options{Table: name})
	require.NoError(t, err)
	require.NoError(t, s.Create(ctx, "k", []byte("v")))
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+name).Scan(&n))
	assert.Equal(t, 1, n)
}

// TestTooLarge: an object past a bytea's limit is refused with
// ErrTooLarge before anything is sent.
func TestTooLarge(t *testing.T) {
	s, _ := newStore(t, false)
	data := make([]byte, pgstore.MaxObjectSize+1)
	err := s.Create(context.Background(), "sessions/x/big", data)
	require.ErrorIs(t, err, pgstore.ErrTooLarge)
	assert.Contains(t, err.Error(), "sessions/x/big")
	assert.ErrorIs(t, s.Put(context.Background(), "sessions/x/big", data), pgstore.ErrTooLarge)
	_, err = s.Stat(context.Background(), "sessions/x/big")
	assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound)
}

func textEv(s string) sessionstore.Event {
	return sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage(fmt.Sprintf(`{"text":%q}`, s))}
}

func loadTexts(t *testing.T, s *sessionstore.Store, id uuid.UUID) []string {
	t.Helper()
	evs, err := s.Load(context.Background(), id)
	require.NoError(t, err)
	var out []string
	for _, e := range evs {
		var r struct{ Text string }
		require.NoError(t, json.Unmarshal(e.Record, &r))
		out = append(out, r.Text)
	}
	return out
}

func storeOpts(obj sessionstore.ObjectStore) *sessionstore.Options {
	return &sessionstore.Options{Remote: obj, LeaseTime: time.Minute, RemoteTimeout: 10 * time.Second}
}

// TestSessionMovesMachines: a session written through one Store (with
// small chunks, so that some are sealed and uploaded, and a blob) opens in
// a Store on an empty directory, as after the loss of the first machine,
// whole; with a bulk store, the sealed chunks and the blob are there and
// the log in the table.
func TestSessionMovesMachines(t *testing.T) {
	for _, bulk := range []bool{false, true} {
		t.Run(fmt.Sprintf("bulk=%v", bulk), func(t *testing.T) {
			ctx := context.Background()
			obj, b := newStore(t, bulk)
			opts := storeOpts(obj)
			opts.ChunkSize = 4 << 10
			opts.BlobThreshold = 2 << 10
			a, err := sessionstore.Open(t.TempDir(), opts)
			require.NoError(t, err)
			m, err := a.Create(ctx, sessionstore.Meta{Name: "moves"})
			require.NoError(t, err)
			var want []string
			for i := range 200 {
				want = append(want, fmt.Sprintf("event %d %s", i, strings.Repeat("x", 100)))
				_, err := a.Append(ctx, m.ID, textEv(want[i]))
				require.NoError(t, err)
			}
			big := strings.Repeat("tool output ", 1000)
			want = append(want, big)
			_, err = a.Append(ctx, m.ID, textEv(big))
			require.NoError(t, err)
			require.NoError(t, a.Close())

			c, err := sessionstore.Open(t.TempDir(), opts)
			require.NoError(t, err)
			defer c.Close()
			assert.Equal(t, want, loadTexts(t, c, m.ID))
			meta, err := c.Meta(ctx, m.ID)
			require.NoError(t, err)
			assert.Equal(t, "moves", meta.Name)

			prefix := "sessions/" + m.ID.String() + "/"
			all, err := obj.List(ctx, prefix, 0)
			require.NoError(t, err)
			var sealed, blobs int
			for _, o := range all {
				if sessionstore.IsBulkKey(o.Key) {
					if strings.Contains(o.Key, "/chunks/") {
						sealed++
					} else {
						blobs++
					}
				}
			}
			assert.Positive(t, sealed, "sealed chunks are listed")
			assert.Positive(t, blobs, "the blob is listed")
			if !bulk {
				return
			}
			inBulk, err := b.List(ctx, "", 0)
			require.NoError(t, err)
			assert.Len(t, inBulk, sealed+blobs, "every bulk object is in the bulk store")
			for _, o := range inBulk {
				assert.True(t, sessionstore.IsBulkKey(o.Key), "%s in the bulk store", o.Key)
			}
			log, err := obj.List(ctx, prefix+"log/", 0)
			require.NoError(t, err)
			assert.NotEmpty(t, log, "the log is in the table")
		})
	}
}

// gated is an ObjectStore whose calls wait while it is shut: a holder
// that stalls (a long GC pause, a machine suspended) and wakes.
type gated struct {
	sessionstore.ObjectStore
	mu   sync.Mutex
	open chan struct{}
}

func newGated(o sessionstore.ObjectStore) *gated {
	g := &gated{ObjectStore: o, open: make(chan struct{})}
	close(g.open)
	return g
}

func (g *gated) wait(ctx context.Context) error {
	g.mu.Lock()
	ch := g.open
	g.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gated) shut() {
	g.mu.Lock()
	g.open = make(chan struct{})
	g.mu.Unlock()
}

func (g *gated) reopen() {
	g.mu.Lock()
	close(g.open)
	g.mu.Unlock()
}

func (g *gated) Create(ctx context.Context, key string, data []byte) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	return g.ObjectStore.Create(ctx, key, data)
}

func (g *gated) Put(ctx context.Context, key string, data []byte) error {
	if err := g.wait(ctx); err != nil {
		return err
	}
	return g.ObjectStore.Put(ctx, key, data)
}

func (g *gated) List(ctx context.Context, prefix string, limit int) ([]sessionstore.ObjectInfo, error) {
	if err := g.wait(ctx); err != nil {
		return nil, err
	}
	return g.ObjectStore.List(ctx, prefix, limit)
}

// TestZombieFenced: a holder that stalls past its lease (its calls held,
// so that it cannot renew) is taken over by another Store; when it wakes,
// its next append is refused with ErrFenced and nothing it wrote after the
// takeover is seen, while everything either acknowledged is.
func TestZombieFenced(t *testing.T) {
	ctx := context.Background()
	obj, _ := newStore(t, false)
	const lease = 2 * time.Second
	za := newGated(obj)
	optsA := &sessionstore.Options{Remote: za, LeaseTime: lease, RemoteTimeout: 20 * time.Second}
	a, err := sessionstore.Open(t.TempDir(), optsA)
	require.NoError(t, err)
	defer a.Close()
	m, err := a.Create(ctx, sessionstore.Meta{Name: "contested"})
	require.NoError(t, err)
	for i := range 3 {
		_, err := a.Append(ctx, m.ID, textEv(fmt.Sprintf("a%d", i)))
		require.NoError(t, err)
	}

	optsB := &sessionstore.Options{Remote: obj, LeaseTime: lease, RemoteTimeout: 20 * time.Second}
	b, err := sessionstore.Open(t.TempDir(), optsB)
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Load(ctx, m.ID)
	require.ErrorIs(t, err, sessionstore.ErrLocked, "a's lease is fresh")

	za.shut()
	var (
		zerr error
		done = make(chan struct{})
	)
	go func() { // the zombie's append, stalled before its log object
		defer close(done)
		_, zerr = a.Append(ctx, m.ID, textEv("zombie"))
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err = b.Load(ctx, m.ID)
		if !errors.Is(err, sessionstore.ErrLocked) || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.NoError(t, err, "b takes the session over once a's lease lapsed")
	_, err = b.Append(ctx, m.ID, textEv("b0"))
	require.NoError(t, err)
	za.reopen()
	<-done
	require.ErrorIs(t, zerr, sessionstore.ErrFenced, "the zombie's append acknowledges nothing")
	assert.Equal(t, []string{"a0", "a1", "a2", "b0"}, loadTexts(t, b, m.ID))
	require.NoError(t, b.Close())

	c, err := sessionstore.Open(t.TempDir(), optsB)
	require.NoError(t, err)
	defer c.Close()
	assert.Equal(t, []string{"a0", "a1", "a2", "b0"}, loadTexts(t, c, m.ID))
}
