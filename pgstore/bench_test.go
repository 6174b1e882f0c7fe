package pgstore_test

// Benchmarks of sessions kept in PostgreSQL (a pgstore table of the pgtest
// server, on loopback) beside the same work on the local disk only, in
// one run, so that the load of a shared machine weighs on every row
// alike. Run them with
//
//	go test -run=NONE -bench=. .
//
// or once each (CI) with -benchtime=1x. An op is one append of a small
// event (a 200-byte JSON record) to one session: by one writer
// (BenchmarkAppend), or by 16 goroutines appending to the one session,
// which the Store groups into commit groups (BenchmarkAppend16). Each has
// the rows local (no Remote), postgres (Options.Remote a pgstore table)
// and postgres-bulk (the same, with Options.Bulk another table).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/pgstore"
	"github.com/sessionstore/sessionstore/pgstore/pgtest"
)

// benchBackends are the rows of each benchmark, in order.
var benchBackends = []string{"local", "postgres", "postgres-bulk"}

// benchObj is newStore for a benchmark (newStore takes a *testing.T): a
// pgstore.Store on a table of its own of the shared server, with a bulk
// store on another table when bulk is set.
func benchObj(tb testing.TB, bulk bool) *pgstore.Store {
	tb.Helper()
	srv := pgtest.Shared(tb)
	pool := srv.Pool(tb)
	ctx := context.Background()
	opts := &pgstore.Options{Table: srv.Table()}
	if bulk {
		b, err := pgstore.New(ctx, pool, &pgstore.Options{Table: srv.Table()})
		require.NoError(tb, err)
		opts.Bulk = b
	}
	s, err := pgstore.New(ctx, pool, opts)
	require.NoError(tb, err)
	return s
}

// countingObj is an ObjectStore that counts the requests it passes on.
type countingObj struct {
	sessionstore.ObjectStore
	creates, puts, reads atomic.Int64 // reads: Get, Stat, List, ListAfter
}

var _ sessionstore.ObjectListerAfter = (*countingObj)(nil)

// objCounts is a countingObj's counts at a moment.
type objCounts struct{ creates, puts, reads int64 }

func (c *countingObj) counts() objCounts {
	if c == nil {
		return objCounts{}
	}
	return objCounts{c.creates.Load(), c.puts.Load(), c.reads.Load()}
}

func (c *countingObj) Create(ctx context.Context, key string, data []byte) error {
	c.creates.Add(1)
	return c.ObjectStore.Create(ctx, key, data)
}

func (c *countingObj) Put(ctx context.Context, key string, data []byte) error {
	c.puts.Add(1)
	return c.ObjectStore.Put(ctx, key, data)
}

func (c *countingObj) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	c.reads.Add(1)
	return c.ObjectStore.Get(ctx, key, offset, length)
}

func (c *countingObj) Stat(ctx context.Context, key string) (sessionstore.ObjectInfo, error) {
	c.reads.Add(1)
	return c.ObjectStore.Stat(ctx, key)
}

func (c *countingObj) List(ctx context.Context, prefix string, limit int) ([]sessionstore.ObjectInfo, error) {
	c.reads.Add(1)
	return c.ObjectStore.List(ctx, prefix, limit)
}

// ListAfter passes on to the wrapped store's, as the Store would call it
// without the wrapper.
func (c *countingObj) ListAfter(ctx context.Context, prefix, after string, limit int) ([]sessionstore.ObjectInfo, error) {
	la, ok := c.ObjectStore.(sessionstore.ObjectListerAfter)
	if !ok {
		return nil, errors.ErrUnsupported
	}
	c.reads.Add(1)
	return la.ListAfter(ctx, prefix, after, limit)
}

// benchEvents are distinct events whose records are 200 bytes of compact
// JSON, cycled through.
var benchEvents = sync.OnceValue(func() []sessionstore.Event {
	const prose = "the agent read the file, ran the tests and found the error in the commit group; " +
		"then it wrote the fix, built the package and checked the result of the session's append. "
	out := make([]sessionstore.Event, 256)
	for i := range out {
		// textEv's record is {"text":"<s>"}: 11 bytes and s.
		s := fmt.Sprintf("event %03d: ", i)
		s += strings.Repeat(prose[i%40:], 2)[:189-len(s)]
		out[i] = textEv(s)
	}
	return out
})

// appendTarget is a session in a Store of its own on b.TempDir(), kept in
// a new pgstore table (counted by obj) unless the backend is local.
type appendTarget struct {
	st  *sessionstore.Store
	id  uuid.UUID
	obj *countingObj // nil for local
	n   atomic.Int64 // events appended, to pick the next
}

func newAppendTarget(b *testing.B, backend string) *appendTarget {
	ctx := context.Background()
	t := &appendTarget{}
	var opts *sessionstore.Options
	switch backend {
	case "local":
	case "postgres", "postgres-bulk":
		t.obj = &countingObj{ObjectStore: benchObj(b, backend == "postgres-bulk")}
		opts = storeOpts(t.obj)
	default:
		b.Fatalf("unknown backend %q", backend)
	}
	st, err := sessionstore.Open(b.TempDir(), opts)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, st.Close()) })
	m, err := st.Create(ctx, sessionstore.Meta{Name: "append bench"})
	require.NoError(b, err)
	t.st, t.id = st, m.ID
	t.append(b) // opens the chunk, before the measured appends
	return t
}

// append appends the next event and returns how long it took.
func (t *appendTarget) append(b *testing.B) time.Duration {
	evs := benchEvents()
	i := t.n.Add(1) - 1
	t0 := time.Now()
	_, err := t.st.Append(context.Background(), t.id, evs[int(i)%len(evs)])
	d := time.Since(t0)
	require.NoError(b, err)
	return d
}

// run makes n appends by writers goroutines and returns the time they
// took and each one's latency.
func (t *appendTarget) run(b *testing.B, writers, n int) (time.Duration, []time.Duration) {
	ctx := context.Background()
	evs := benchEvents()
	lats := make([][]time.Duration, writers)
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, n/writers+1)
			for next.Add(1) <= int64(n) {
				i := t.n.Add(1) - 1
				t0 := time.Now()
				_, err := t.st.Append(ctx, t.id, evs[int(i)%len(evs)])
				lat = append(lat, time.Since(t0))
				if err != nil {
					firstErr.CompareAndSwap(nil, &err)
					break
				}
			}
			lats[w] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if p := firstErr.Load(); p != nil {
		require.NoError(b, *p)
	}
	all := slices.Concat(lats...)
	require.Len(b, all, n)
	return elapsed, all
}

// check requires that the session holds every append.
func (t *appendTarget) check(b *testing.B) {
	evs, err := t.st.Load(context.Background(), t.id)
	require.NoError(b, err)
	require.Len(b, evs, int(t.n.Load()), "every acknowledged append is in the session")
}

// reportRequests reports the object store requests made since before per
// one of n appends: creates/append, puts/append, INSERTs/append (their
// sum: each is one INSERT of a row, or a bulk store's write) and
// reads/append (Get, Stat, List). Nothing for a local target.
func (t *appendTarget) reportRequests(b *testing.B, before objCounts, n int) {
	if t.obj == nil || n == 0 {
		return
	}
	c := t.obj.counts()
	creates, puts := c.creates-before.creates, c.puts-before.puts
	per := func(v int64) float64 { return float64(v) / float64(n) }
	b.ReportMetric(per(creates), "creates/append")
	b.ReportMetric(per(puts), "puts/append")
	b.ReportMetric(per(creates+puts), "INSERTs/append")
	b.ReportMetric(per(c.reads-before.reads), "reads/append")
}

// percentile returns the p-th percentile (0 < p < 1) of ds, sorted.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// mean returns the mean of ds.
func mean(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	var t time.Duration
	for _, d := range ds {
		t += d
	}
	return t / time.Duration(len(ds))
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkAppend: one writer appending a 200-byte event to one session,
// each append acknowledged once durable (on the local disk; and for the
// postgres rows, committed by the server, which syncs its WAL: one
// INSERT of a log object an append). Reports appends/s, the p50 and p99
// of an append's latency and the object store requests per append.
func BenchmarkAppend(b *testing.B) {
	for _, backend := range benchBackends {
		b.Run(backend, func(b *testing.B) { benchAppend1(b, backend) })
	}
}

func benchAppend1(b *testing.B, backend string) {
	t := newAppendTarget(b, backend)
	before := t.obj.counts()
	var lats []time.Duration
	for b.Loop() {
		lats = append(lats, t.append(b))
	}
	n := len(lats)
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "appends/s")
	slices.Sort(lats)
	b.ReportMetric(micros(percentile(lats, 0.50)), "p50-us")
	b.ReportMetric(micros(percentile(lats, 0.99)), "p99-us")
	t.reportRequests(b, before, n)
	t.check(b)
}

// BenchmarkAppend16: 16 goroutines appending 200-byte events to one
// session; the Store groups the appends that wait together into a commit
// group (one local sync and, for the postgres rows, one INSERT of its log
// object), so INSERTs/append is about one over the groups' mean size. An
// op is one append; reports appends/s, the mean and p99 of an append's
// latency, and the object store requests per append.
func BenchmarkAppend16(b *testing.B) {
	const writers = 16
	for _, backend := range benchBackends {
		b.Run(backend, func(b *testing.B) {
			t := newAppendTarget(b, backend)
			before := t.obj.counts()
			b.ResetTimer()
			elapsed, lats := t.run(b, writers, b.N)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
			slices.Sort(lats)
			b.ReportMetric(micros(mean(lats)), "mean-us")
			b.ReportMetric(micros(percentile(lats, 0.50)), "p50-us")
			b.ReportMetric(micros(percentile(lats, 0.99)), "p99-us")
			t.reportRequests(b, before, b.N)
			t.check(b)
		})
	}
}
