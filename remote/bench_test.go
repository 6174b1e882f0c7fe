package remote_test

// Benchmarks of sessions kept in object storage, against versitygw on
// loopback (s3test), beside the same work on the local disk only: what
// issue #20 asks for. remote/README.md, "Figures and cost", has a run's
// table and what each figure means. Run them with
//
//	SESSIONSTORE_VERSITYGW=/root/go/bin/versitygw go test -run=NONE -bench=. -benchtime=5s -v .
//
// (-v shows the fixtures' counts, which the benchmarks log), or once each
// (CI) with -benchtime=1x.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

// callCounts are the calls a countingStore saw, and their bytes.
type callCounts struct {
	Creates, Puts, Gets, Stats, Lists, Deletes int64
	CreateBytes, PutBytes, GetBytes            int64
	Listed                                     int64 // keys the Lists returned
	// InCalls is the time spent in calls, summed over the calls; InList
	// the part in Lists.
	InCalls, InList time.Duration
	// ListPages is the LIST requests S3 bills for the Lists: one per
	// 1,000 keys returned (ListObjectsV2's page), at least one a List.
	ListPages int64
	// Creates of log objects, by kind (data, seal, meta, create, open,
	// release), and their bytes.
	LogCreates map[string]int64
	LogBytes   map[string]int64
	// GETs of sealed chunk objects (sessions/<id>/chunks/).
	ChunkGets, ChunkGetBytes int64
	// DataCreate is when each Create of a data log object started and
	// ended, in order (not kept by sub or add).
	DataCreate []span
}

// span is a call's start and end.
type span struct{ start, end time.Time }

// writes is the PUT-priced calls: Create and Put.
func (c callCounts) writes() int64 { return c.Creates + c.Puts }

// sub returns c less o, c being later.
func (c callCounts) sub(o callCounts) callCounts {
	d := callCounts{
		Creates: c.Creates - o.Creates, Puts: c.Puts - o.Puts, Gets: c.Gets - o.Gets,
		Stats: c.Stats - o.Stats, Lists: c.Lists - o.Lists, Deletes: c.Deletes - o.Deletes,
		CreateBytes: c.CreateBytes - o.CreateBytes, PutBytes: c.PutBytes - o.PutBytes, GetBytes: c.GetBytes - o.GetBytes,
		Listed: c.Listed - o.Listed, ListPages: c.ListPages - o.ListPages, InCalls: c.InCalls - o.InCalls, InList: c.InList - o.InList,
		ChunkGets: c.ChunkGets - o.ChunkGets, ChunkGetBytes: c.ChunkGetBytes - o.ChunkGetBytes,
		LogCreates: map[string]int64{}, LogBytes: map[string]int64{},
	}
	for k, v := range c.LogCreates {
		d.LogCreates[k] = v - o.LogCreates[k]
	}
	for k, v := range c.LogBytes {
		d.LogBytes[k] = v - o.LogBytes[k]
	}
	return d
}

// countingStore is an ObjectStore that counts the calls it passes on to
// another, and shows each successful Create to observe, if set.
type countingStore struct {
	sessionstore.ObjectStore
	observe func(key string, data []byte)
	// delay, when set, is added before each Create, as the round trip
	// of an object store in another building (remote-16-wan).
	delay time.Duration

	mu sync.Mutex
	c  callCounts
}

func newCounting(obj sessionstore.ObjectStore) *countingStore {
	return &countingStore{ObjectStore: obj, c: callCounts{LogCreates: map[string]int64{}, LogBytes: map[string]int64{}}}
}

// lastData returns the span of the newest data log object's Create.
func (s *countingStore) lastData() span {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.DataCreate[len(s.c.DataCreate)-1]
}

func (s *countingStore) counts() callCounts {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.c.sub(callCounts{}) // a copy
	c.DataCreate = slices.Clone(s.c.DataCreate)
	return c
}

// logKind returns the kind of the log object data, if key names one.
func logKind(key string, data []byte) (logHeader, bool) {
	if !strings.HasPrefix(key, "sessions/") || !strings.Contains(key, "/log/") {
		return logHeader{}, false
	}
	line, _, _ := bytes.Cut(data, []byte("\n"))
	var h logHeader
	return h, json.Unmarshal(line, &h) == nil
}

// logHeader is the part of a log object's header line (remote.go) the
// benchmarks read.
type logHeader struct {
	Kind  string `json:"kind"`
	Chunk uint32 `json:"chunk"`
	Key   string `json:"key"`
}

func (s *countingStore) Create(ctx context.Context, key string, data []byte) error {
	t0 := time.Now()
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	err := s.ObjectStore.Create(ctx, key, data)
	sp := span{t0, time.Now()}
	s.mu.Lock()
	s.c.InCalls += sp.end.Sub(sp.start)
	s.c.Creates++
	s.c.CreateBytes += int64(len(data))
	if h, ok := logKind(key, data); ok {
		s.c.LogCreates[h.Kind]++
		s.c.LogBytes[h.Kind] += int64(len(data))
		if h.Kind == "data" {
			s.c.DataCreate = append(s.c.DataCreate, sp)
		}
	}
	s.mu.Unlock()
	if err == nil && s.observe != nil {
		s.observe(key, data)
	}
	return err
}

func (s *countingStore) Put(ctx context.Context, key string, data []byte) error {
	t0 := time.Now()
	err := s.ObjectStore.Put(ctx, key, data)
	s.mu.Lock()
	s.c.InCalls += time.Since(t0)
	s.c.Puts++
	s.c.PutBytes += int64(len(data))
	s.mu.Unlock()
	return err
}

func (s *countingStore) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	t0 := time.Now()
	b, err := s.ObjectStore.Get(ctx, key, offset, length)
	s.mu.Lock()
	s.c.InCalls += time.Since(t0)
	s.c.Gets++
	s.c.GetBytes += int64(len(b))
	if strings.Contains(key, "/chunks/") {
		s.c.ChunkGets++
		s.c.ChunkGetBytes += int64(len(b))
	}
	s.mu.Unlock()
	return b, err
}

func (s *countingStore) Stat(ctx context.Context, key string) (sessionstore.ObjectInfo, error) {
	t0 := time.Now()
	info, err := s.ObjectStore.Stat(ctx, key)
	s.mu.Lock()
	s.c.InCalls += time.Since(t0)
	s.c.Stats++
	s.mu.Unlock()
	return info, err
}

func (s *countingStore) List(ctx context.Context, prefix string, limit int) ([]sessionstore.ObjectInfo, error) {
	t0 := time.Now()
	infos, err := s.ObjectStore.List(ctx, prefix, limit)
	s.mu.Lock()
	s.c.InCalls += time.Since(t0)
	s.c.InList += time.Since(t0)
	s.c.Lists++
	s.c.Listed += int64(len(infos))
	s.c.ListPages += max(1, (int64(len(infos))+999)/1000)
	s.mu.Unlock()
	return infos, err
}

func (s *countingStore) Delete(ctx context.Context, key string) error {
	t0 := time.Now()
	err := s.ObjectStore.Delete(ctx, key)
	s.mu.Lock()
	s.c.InCalls += time.Since(t0)
	s.c.Deletes++
	s.mu.Unlock()
	return err
}

// benchRemoteOpts are the options of a Store kept in obj.
func benchRemoteOpts(obj sessionstore.ObjectStore, lease time.Duration) *sessionstore.Options {
	return &sessionstore.Options{Remote: obj, LeaseTime: lease, RemoteTimeout: time.Minute}
}

// words make the prose of the benchmarks' messages: text that compresses
// as text does (a few times), not as a repeated byte.
var words = strings.Fields(`the a of to and in is it that for on with as this be
	function test file error value return type package import change fix build run
	result call line check read write open close session event store append chunk
	log object remote local sync commit group writer reader branch path head index
	should would could first then next because when where which while after before`)

// message1K returns assistant message i, whose record is about 1 KiB of
// compact JSON: prose content, a model name and token usage.
func message1K(i int) sessionstore.Event {
	rng := rand.New(rand.NewPCG(uint64(i), 20))
	var sb strings.Builder
	for sb.Len() < 880 {
		if sb.Len() > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(words[rng.IntN(len(words))])
	}
	return sessionstore.AssistantMessage(sessionstore.Message{
		Content: sb.String(),
		Model:   "bench-model-1",
		Usage:   &sessionstore.Usage{InputTokens: int64(1000 + i), OutputTokens: int64(200 + i%50), CacheReadTokens: 900},
	})
}

// messages is a pool of distinct 1 KiB messages, cycled through.
var messages = sync.OnceValue(func() []sessionstore.Event {
	out := make([]sessionstore.Event, 256)
	for i := range out {
		out[i] = message1K(i)
	}
	return out
})

// percentile returns the p-th percentile (0 < p < 1) of ds, sorted.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

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

// BenchmarkAppend: durable appends of a 1 KiB message to one session, on
// the local disk only and kept in the object store, with one writer and
// with 16 (goroutines appending to the one session, which group commit
// shares syncs and log objects among); then the PUT alone of one such
// append's log object. An op is one append (one PUT for put-alone).
//
// The side-by-side benchmarks measure what the targets compare in the
// same stretch of time, so that the load of a shared machine weighs on
// both sides alike: side-by-side-1 makes, per op, one local append, one
// remote append and one PUT of that append's log object bytes (at a fresh
// key); side-by-side-16 alternates rounds of 1,000 appends by 16 writers
// to the local and to the remote session (an op is one append to each);
// side-by-side-16-ack-local the same with the remote session's appends
// acknowledged after the local sync (DurableLocal).
func BenchmarkAppend(b *testing.B) {
	require.NotEmpty(b, messages())
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("local-%d", writers), func(b *testing.B) { benchAppend(b, writers, false) })
		b.Run(fmt.Sprintf("remote-%d", writers), func(b *testing.B) { benchAppend(b, writers, true) })
	}
	// The 16 writers again with 20 ms added before each Create: an
	// object store whose latency is a network's round trip, not the
	// loopback server's CPU (S3 from another region's machines).
	b.Run("remote-16-wan", func(b *testing.B) { benchAppendDelayed(b, 16, true, 20*time.Millisecond) })
	b.Run("put-alone", benchPutAlone)
	b.Run("side-by-side-1", benchSideBySide1)
	b.Run("side-by-side-16", benchSideBySide16)
	// The same, acknowledged after the local sync (DurableLocal): the
	// Creates follow, at most RemoteWindow groups behind.
	b.Run("side-by-side-16-ack-local", func(b *testing.B) { benchSideBySide16At(b, sessionstore.DurableLocal) })
}

// appendTarget is a session to append to, in a store of its own on the
// local disk (b.TempDir), kept in a new bucket of the shared server when
// cs is not nil.
type appendTarget struct {
	st *sessionstore.Store
	id uuid.UUID
	cs *countingStore
	i  atomic.Int64 // messages appended, to pick the next
}

func newAppendTarget(b *testing.B, kept bool) *appendTarget {
	return newAppendTargetAt(b, kept, sessionstore.DurableRemote)
}

// newAppendTargetAt is newAppendTarget with a kept session's appends
// acknowledged at durability d.
func newAppendTargetAt(b *testing.B, kept bool, d sessionstore.Durability) *appendTarget {
	ctx := context.Background()
	t := &appendTarget{}
	var opts *sessionstore.Options
	if kept {
		t.cs = newCounting(s3test.Shared(b).Store(b))
		opts = benchRemoteOpts(t.cs, sessionstore.DefaultLeaseTime)
		opts.RemoteDurability = d
	}
	st, err := sessionstore.Open(b.TempDir(), opts)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, st.Close()) })
	m, err := st.Create(ctx, sessionstore.Meta{Name: "append bench"})
	require.NoError(b, err)
	t.st, t.id = st, m.ID
	t.append(b) // opens the chunk
	return t
}

// append appends the next message and returns how long it took.
func (t *appendTarget) append(b *testing.B) time.Duration {
	msgs := messages()
	i := t.i.Add(1) - 1
	t0 := time.Now()
	_, err := t.st.Append(context.Background(), t.id, msgs[int(i)%len(msgs)])
	d := time.Since(t0)
	require.NoError(b, err)
	return d
}

// run makes n appends by writers goroutines and returns the time they
// took and each one's latency.
func (t *appendTarget) run(b *testing.B, writers, n int) (time.Duration, []time.Duration) {
	ctx := context.Background()
	msgs := messages()
	lats := make([][]time.Duration, writers)
	var next atomic.Int64
	var firstErr atomic.Pointer[error]
	var wg sync.WaitGroup
	start := time.Now()
	for w := range writers {
		wg.Go(func() {
			lat := make([]time.Duration, 0, n/writers+1)
			for next.Add(1) <= int64(n) {
				i := t.i.Add(1) - 1
				t0 := time.Now()
				_, err := t.st.Append(ctx, t.id, msgs[int(i)%len(msgs)])
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

// check requires that the session's active path holds every append.
func (t *appendTarget) check(b *testing.B) {
	evs, err := t.st.Load(context.Background(), t.id)
	require.NoError(b, err)
	require.Len(b, evs, int(t.i.Load()), "every acknowledged append is on the path")
}

// reportLatency reports the p50 and p99 of ds (sorted here) as
// prefix+"p50-µs" and prefix+"p99-µs", and returns the p50.
func reportLatency(b *testing.B, prefix string, ds []time.Duration) time.Duration {
	slices.Sort(ds)
	b.ReportMetric(micros(percentile(ds, 0.50)), prefix+"p50-µs")
	b.ReportMetric(micros(percentile(ds, 0.99)), prefix+"p99-µs")
	return percentile(ds, 0.50)
}

// reportCalls reports the object store calls made since before per one
// of n appends, and how long the Creates of their data log objects took:
// log-PUT-p50-µs, beside put-alone's, is what the group's bytes and the
// load of the run add to a PUT; log-PUT-mean-µs and gap-mean-µs (from the
// end of one data object's Create to the start of the next) split the
// time between two log objects, which bounds the throughput, into the
// PUT and the rest of the commit cycle.
//
// It returns the mean and p99 of those Creates, for the 16-writer
// targets (an append's mean latency within 0.5 ms of the loaded PUT's
// mean, its p99 within 1.3x the PUT's).
func reportCalls(b *testing.B, cs *countingStore, before callCounts, n int) (putMean, putP99 time.Duration) {
	now := cs.counts()
	c := now.sub(before)
	if spans := now.DataCreate[len(before.DataCreate):]; len(spans) > 0 {
		var puts, gaps []time.Duration
		for i, sp := range spans {
			puts = append(puts, sp.end.Sub(sp.start))
			if i > 0 {
				gaps = append(gaps, sp.start.Sub(spans[i-1].end))
			}
		}
		putMean = mean(puts)
		b.ReportMetric(micros(putMean), "log-PUT-mean-µs")
		reportLatency(b, "log-PUT-", puts)
		putP99 = percentile(puts, 0.99)
		if len(gaps) > 0 {
			b.ReportMetric(micros(mean(gaps)), "gap-mean-µs")
		}
	}
	b.ReportMetric(float64(c.writes())/float64(n), "PUTs/append")
	b.ReportMetric(float64(c.Gets+c.Lists)/float64(n), "GETs+LISTs/append")
	b.ReportMetric(float64(c.CreateBytes+c.PutBytes)/float64(n), "B-put/append")
	if d := c.LogCreates["data"]; d > 0 {
		b.ReportMetric(float64(c.LogBytes["data"])/float64(d), "B/log-object")
	}
	return putMean, putP99
}

// reportAgainstPUT reports the appends' latencies ds against their log
// objects' Creates: mean-µs, mean-minus-PUT-mean-µs (target <= 500) and
// p99/PUT-p99 (target <= 1.3).
func reportAgainstPUT(b *testing.B, prefix string, ds []time.Duration, putMean, putP99 time.Duration) {
	if putMean == 0 || len(ds) == 0 {
		return
	}
	m := mean(ds)
	sorted := slices.Sorted(slices.Values(ds))
	b.ReportMetric(micros(m), prefix+"mean-µs")
	b.ReportMetric(micros(m-putMean), prefix+"mean-minus-PUT-mean-µs")
	b.ReportMetric(float64(percentile(sorted, 0.99))/float64(putP99), prefix+"p99/PUT-p99")
}

func benchAppend(b *testing.B, writers int, kept bool) {
	benchAppendDelayed(b, writers, kept, 0)
}

// benchAppendDelayed is benchAppend, kept in the object store when kept
// or delay is set, with delay added before each Create.
func benchAppendDelayed(b *testing.B, writers int, kept bool, delay time.Duration) {
	t := newAppendTarget(b, kept)
	if t.cs != nil {
		t.cs.delay = delay
	}
	var before callCounts
	if t.cs != nil {
		before = t.cs.counts()
	}
	b.ResetTimer()
	elapsed, lats := t.run(b, writers, b.N)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	if t.cs != nil {
		pm, p99 := reportCalls(b, t.cs, before, b.N)
		reportAgainstPUT(b, "", lats, pm, p99)
	}
	reportLatency(b, "", lats)
	t.check(b)
}

func benchSideBySide1(b *testing.B) {
	ctx := context.Background()
	local, kept := newAppendTarget(b, false), newAppendTarget(b, true)
	var mu sync.Mutex
	var last []byte
	kept.cs.observe = func(key string, data []byte) {
		if h, ok := logKind(key, data); ok && h.Kind == "data" {
			mu.Lock()
			last = slices.Clone(data)
			mu.Unlock()
		}
	}
	obj := s3test.Shared(b).Store(b)
	prefix := "sessions/" + uuid.NewString() + "/log/"
	var l, r, p, pre, post []time.Duration
	before := kept.cs.counts()
	b.ResetTimer()
	for i := range b.N {
		l = append(l, local.append(b))
		t0 := time.Now()
		r = append(r, kept.append(b))
		t1 := t0.Add(r[len(r)-1])
		sp := kept.cs.lastData()
		pre, post = append(pre, sp.start.Sub(t0)), append(post, t1.Sub(sp.end))
		mu.Lock()
		data := last
		mu.Unlock()
		t0 = time.Now()
		err := obj.Create(ctx, fmt.Sprintf("%s%020d", prefix, i+1), data)
		p = append(p, time.Since(t0))
		require.NoError(b, err)
	}
	b.StopTimer()
	reportCalls(b, kept.cs, before, b.N)
	lp := reportLatency(b, "local-", l)
	rp := reportLatency(b, "remote-", r)
	pp := reportLatency(b, "put-", p)
	// Where a remote append's time goes beside its PUT: before the PUT
	// starts (encoding, the local write) and after it ends (the local
	// fdatasync if it is slower, publishing).
	reportLatency(b, "pre-PUT-", pre)
	reportLatency(b, "post-PUT-", post)
	// The target: remote p50 <= local p50 + put p50, met when <= 1.
	b.ReportMetric(float64(rp)/float64(lp+pp), "remote/(local+put)-p50")
	local.check(b)
	kept.check(b)
}

func benchSideBySide16(b *testing.B) { benchSideBySide16At(b, sessionstore.DurableRemote) }

// benchSideBySide16At is side-by-side-16 with the kept session's appends
// acknowledged at durability d.
func benchSideBySide16At(b *testing.B, d sessionstore.Durability) {
	const writers, round = 16, 1000
	local, kept := newAppendTarget(b, false), newAppendTargetAt(b, true, d)
	var lt, rt time.Duration
	var ll, rl []time.Duration
	before := kept.cs.counts()
	b.ResetTimer()
	for done := 0; done < b.N; done += round {
		n := min(round, b.N-done)
		d, lats := local.run(b, writers, n)
		lt, ll = lt+d, append(ll, lats...)
		d, lats = kept.run(b, writers, n)
		rt, rl = rt+d, append(rl, lats...)
	}
	b.StopTimer()
	pm, p99 := reportCalls(b, kept.cs, before, b.N)
	reportAgainstPUT(b, "remote-", rl, pm, p99)
	lr, rr := float64(b.N)/lt.Seconds(), float64(b.N)/rt.Seconds()
	b.ReportMetric(lr, "local-appends/s")
	b.ReportMetric(rr, "remote-appends/s")
	// The target: at least 0.8 with DurableLocal.
	b.ReportMetric(rr/lr, "remote/local-throughput")
	reportLatency(b, "local-", ll)
	reportLatency(b, "remote-", rl)
	local.check(b)
	kept.check(b)
}

// appendLogObject returns the bytes of the data log object of one append
// of a 1 KiB message by one writer to a session kept in versitygw, as the
// store created it.
func appendLogObject(b *testing.B) []byte {
	ctx := context.Background()
	var mu sync.Mutex
	var last []byte
	cs := newCounting(s3test.Shared(b).Store(b))
	cs.observe = func(key string, data []byte) {
		if h, ok := logKind(key, data); ok && h.Kind == "data" {
			mu.Lock()
			last = slices.Clone(data)
			mu.Unlock()
		}
	}
	st, err := sessionstore.Open(b.TempDir(), benchRemoteOpts(cs, sessionstore.DefaultLeaseTime))
	require.NoError(b, err)
	defer func() { require.NoError(b, st.Close()) }()
	m, err := st.Create(ctx, sessionstore.Meta{Name: "log object size"})
	require.NoError(b, err)
	for i := range 3 {
		_, err := st.Append(ctx, m.ID, messages()[i])
		require.NoError(b, err)
	}
	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(b, last, "an append created a data log object")
	return last
}

// benchPutAlone: ObjectStore.Create of a fresh key with the bytes of one
// append's data log object.
func benchPutAlone(b *testing.B) {
	ctx := context.Background()
	data := appendLogObject(b)
	obj := s3test.Shared(b).Store(b)
	prefix := "sessions/" + uuid.NewString() + "/log/"
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		err := obj.Create(ctx, fmt.Sprintf("%s%020d", prefix, i+1), data)
		lat = append(lat, time.Since(t0))
		require.NoError(b, err)
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(micros(percentile(lat, 0.50)), "p50-µs")
	b.ReportMetric(micros(percentile(lat, 0.99)), "p99-µs")
	b.ReportMetric(float64(len(data)), "B/log-object")
}

// The restore fixture is the session of the bench module's openload
// workload (bench/workloads.go): a trunk of 1,000 events, then 10
// branches of 10,000 events each forking from the trunk's last event,
// HEAD on the last branch, appended with AppendBatch in batches of 500,
// every record bench's 300-byte user message. SESSIONSTORE_BENCH_RESTORE=small
// selects bench's quick sizes (100, then 10 x 1,000).
func restoreSizes() (trunk, branches, branchLen int) {
	if os.Getenv("SESSIONSTORE_BENCH_RESTORE") == "small" {
		return 100, 10, 1000
	}
	return 1000, 10, 10000
}

// message300 is bench's message300: a user message whose record is 300
// bytes.
func message300() sessionstore.Event {
	pad := 300 - len(sessionstore.UserText("").Record)
	return sessionstore.UserText(strings.Repeat("a", pad))
}

// restoreFixture is the session kept in a bucket of the shared server,
// and the same session in a local-only store.
type restoreFixture struct {
	obj      sessionstore.ObjectStore // the bucket, not counted
	localDir string                   // the local-only store
	id       uuid.UUID
	localID  uuid.UUID
	head     uuid.UUID
	localEnd uuid.UUID // the local session's HEAD
	events   int       // on the active path
	total    int       // in the session
	build    time.Duration

	chunks      int   // sealed chunks
	chunkBytes  int64 // their objects' bytes
	pathChunks  int   // sealed chunks that hold events of the active path
	pathBytes   int64 // their objects' bytes
	markerBytes int64 // the newest log object (the release marker: the log's state and session.json)
	objects     int   // under sessions/<id>/ after the build, tombstones not counted
	prefixBytes int64
	dataLeft    int             // data log objects left after the build (replaced by tombstones LeaseTime after their sealing)
	tombs       map[string]bool // the tombstones' keys: objects a restore never reads
}

// need is the bytes a restore and load of the active path cannot do
// without: the chunks holding the path's events, the newest marker, and
// the blobs the path names (none: every record is inline).
func (f *restoreFixture) need() int64 { return f.pathBytes + f.markerBytes }

// appendBranchy appends the fixture's session to st and returns the ids
// of the trunk and of the last branch (the active path).
func appendBranchy(ctx context.Context, st *sessionstore.Store, id uuid.UUID) (trunkIDs, last []uuid.UUID, err error) {
	trunk, branches, branchLen := restoreSizes()
	msg := message300()
	chain := func(n int) ([]uuid.UUID, error) {
		var ids []uuid.UUID
		for n > 0 {
			k := min(n, 500)
			evs, err := st.AppendBatch(ctx, id, slices.Repeat([]sessionstore.Event{msg}, k)...)
			if err != nil {
				return nil, err
			}
			for _, ev := range evs {
				ids = append(ids, ev.ID)
			}
			n -= k
		}
		return ids, nil
	}
	if trunkIDs, err = chain(trunk); err != nil {
		return nil, nil, err
	}
	for range branches {
		if err := st.Branch(ctx, id, trunkIDs[len(trunkIDs)-1]); err != nil {
			return nil, nil, err
		}
		if last, err = chain(branchLen); err != nil {
			return nil, nil, err
		}
	}
	return trunkIDs, last, nil
}

// buildRestoreFixture appends the session through a Store kept in obj and
// closes it, and appends it again to a local-only store in localDir.
//
// Which sealed chunk holds which event is read from what the Store wrote,
// not from how it reads: each data log object names the chunk its lines
// belong to and holds the lines (each starting with its event's id), and
// each seal record names the object of its chunk. Then a second Store
// opens the session, waits the lease (2s) and closes it, so that the data
// objects the seals made unneeded are deleted, as they are once a session
// has been held for LeaseTime: the bucket then holds what a session holds
// at rest.
func buildRestoreFixture(b *testing.B, obj sessionstore.ObjectStore, localDir string) *restoreFixture {
	ctx := context.Background()
	var mu sync.Mutex
	chunkOf := map[uuid.UUID]uint32{}
	sealKey := map[uint32]string{}
	objSize := map[string]int64{}
	cs := newCounting(obj)
	cs.observe = func(key string, data []byte) {
		mu.Lock()
		defer mu.Unlock()
		objSize[key] = int64(len(data))
		h, ok := logKind(key, data)
		if !ok {
			return
		}
		switch h.Kind {
		case "data":
			_, payload, _ := bytes.Cut(data, []byte("\n"))
			for line := range bytes.Lines(payload) {
				var ev struct {
					ID uuid.UUID `json:"id"`
				}
				if json.Unmarshal(line, &ev) == nil && ev.ID != uuid.Nil {
					chunkOf[ev.ID] = h.Chunk
				}
			}
		case "seal":
			sealKey[h.Chunk] = h.Key
		}
	}

	const lease = 2 * time.Second
	start := time.Now()
	st, err := sessionstore.Open(b.TempDir(), benchRemoteOpts(cs, lease))
	require.NoError(b, err)
	defer st.Close()
	m, err := st.Create(ctx, sessionstore.Meta{Name: "branchy"})
	require.NoError(b, err)
	trunkIDs, last, err := appendBranchy(ctx, st, m.ID)
	require.NoError(b, err)
	require.NoError(b, st.Close())
	trunk, branches, branchLen := restoreSizes()
	f := &restoreFixture{obj: obj, localDir: localDir, id: m.ID, head: last[len(last)-1], events: trunk + branchLen, total: trunk + branches*branchLen, build: time.Since(start)}

	// Let the data objects of the sealed chunks go.
	st2, err := sessionstore.Open(b.TempDir(), benchRemoteOpts(obj, lease))
	require.NoError(b, err)
	defer st2.Close()
	_, err = st2.Head(ctx, m.ID)
	require.NoError(b, err)
	time.Sleep(lease + 500*time.Millisecond)
	require.NoError(b, st2.Close())

	mu.Lock()
	defer mu.Unlock()
	path := map[uint32]bool{}
	for _, id := range slices.Concat(trunkIDs, last) {
		c, ok := chunkOf[id]
		require.True(b, ok, "event %s of the active path is in a data log object", id)
		path[c] = true
	}
	for c := range path {
		require.Contains(b, sealKey, c, "chunk %d of the active path was sealed", c)
	}
	for c, key := range sealKey {
		f.chunks++
		f.chunkBytes += objSize[key]
		if path[c] {
			f.pathChunks++
			f.pathBytes += objSize[key]
		}
	}
	infos, err := obj.List(ctx, "sessions/"+m.ID.String()+"/", 0)
	require.NoError(b, err)
	var newest *sessionstore.ObjectInfo
	f.tombs = map[string]bool{}
	for _, o := range infos {
		if strings.Contains(o.Key, "/log/") {
			if newest == nil || o.Key < newest.Key {
				newest = &o // log keys count down: the newest sorts first
			}
			data, err := obj.Get(ctx, o.Key, 0, -1)
			require.NoError(b, err)
			h, ok := logKind(o.Key, data)
			require.True(b, ok, "log object %s has a header", o.Key)
			if o.Key == newest.Key {
				require.Equal(b, "release", h.Kind, "the newest log object is the release marker")
			}
			if h.Kind == "data" {
				f.dataLeft++
			}
			if h.Kind == "dead" {
				f.tombs[o.Key] = true
				continue
			}
		}
		f.objects++
		f.prefixBytes += o.Size
	}
	require.NotNil(b, newest)
	f.markerBytes = newest.Size

	ls, err := sessionstore.Open(localDir, nil)
	require.NoError(b, err)
	defer ls.Close()
	lm, err := ls.Create(ctx, sessionstore.Meta{Name: "branchy"})
	require.NoError(b, err)
	_, llast, err := appendBranchy(ctx, ls, lm.ID)
	require.NoError(b, err)
	require.NoError(b, ls.Close())
	f.localID, f.localEnd = lm.ID, llast[len(llast)-1]
	return f
}

// BenchmarkRestore: the session of the bench module's openload workload
// (101,000 events, 11,000 on the active path). cold-load: a Store on a
// new, empty directory opens it from the object store and loads its
// active path. Beside it: local-load, a new Store on a local-only copy of
// the session (page cache warm) opening and loading it; and the download
// of every object under the session's prefix, one at a time and 16 at a
// time, into memory. An op is one restore (load, download). The fixture
// is built once, before the sub-benchmarks.
func BenchmarkRestore(b *testing.B) {
	srv := s3test.Shared(b)
	f := buildRestoreFixture(b, remote.New(srv.OpenBucket(b)), b.TempDir())
	b.Logf("fixture: %d events (%d on the active path), built in %v; %d sealed chunks, %d bytes; the path's %d chunks %d bytes, newest marker %d bytes; %d objects, %d bytes under the session's prefix, %d data objects left, %d tombstones (not counted, not downloaded)",
		f.total, f.events, f.build.Round(time.Millisecond), f.chunks, f.chunkBytes, f.pathChunks, f.pathBytes, f.markerBytes, f.objects, f.prefixBytes, f.dataLeft, len(f.tombs))
	b.Run("local-load", func(b *testing.B) { benchLocalLoad(b, f) })
	b.Run("download-all-seq", func(b *testing.B) { benchDownloadAll(b, f, 1) })
	b.Run("download-all-16", func(b *testing.B) { benchDownloadAll(b, f, 16) })
	b.Run("cold-load", func(b *testing.B) { benchColdLoad(b, f) })
}

func benchLocalLoad(b *testing.B, f *restoreFixture) {
	ctx := context.Background()
	for range b.N {
		st, err := sessionstore.Open(f.localDir, nil)
		require.NoError(b, err)
		evs, err := st.Load(ctx, f.localID)
		b.StopTimer()
		require.NoError(b, err)
		require.Len(b, evs, f.events)
		require.Equal(b, f.localEnd, evs[len(evs)-1].ID)
		require.NoError(b, st.Close())
		b.StartTimer()
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/restore")
}

func benchColdLoad(b *testing.B, f *restoreFixture) {
	ctx := context.Background()
	var sum callCounts
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		dir, err := os.MkdirTemp("", "restore-")
		require.NoError(b, err)
		cs := newCounting(f.obj)
		b.StartTimer()

		st, err := sessionstore.Open(dir, benchRemoteOpts(cs, sessionstore.DefaultLeaseTime))
		require.NoError(b, err)
		evs, err := st.Load(ctx, f.id)

		b.StopTimer()
		require.NoError(b, err)
		require.Len(b, evs, f.events)
		require.Equal(b, f.head, evs[len(evs)-1].ID)
		sum = add(sum, cs.counts())
		require.NoError(b, st.Close())
		require.NoError(b, os.RemoveAll(dir))
		b.StartTimer()
	}
	b.StopTimer()
	n := float64(b.N)
	fetched := float64(sum.GetBytes) / n
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/n, "ms/restore")
	b.ReportMetric(fetched, "B-fetched/op")
	b.ReportMetric(float64(f.need()), "B-needed")
	b.ReportMetric(fetched/float64(f.need()), "fetched/needed")
	b.ReportMetric(float64(sum.ChunkGets)/n, "chunks-fetched/op")
	b.ReportMetric(float64(f.pathChunks), "path-chunks")
	b.ReportMetric(float64(f.chunks), "chunks")
	b.ReportMetric(float64(sum.Gets)/n, "GETs/op")
	b.ReportMetric(float64(sum.Lists)/n, "LISTs/op")
	b.ReportMetric(float64(sum.Listed)/n, "keys-listed/op")
	b.ReportMetric(float64(sum.writes())/n, "PUTs/op")
	// The time in object store calls (one at a time in a restore): the
	// rest of ms/restore is local work (checking and writing the chunks,
	// the load).
	b.ReportMetric(float64(sum.InCalls.Microseconds())/1000/n, "in-calls-ms/op")
}

// benchDownloadAll: list the session's prefix and get every object under
// it into memory, parallel at a time.
func benchDownloadAll(b *testing.B, f *restoreFixture, parallel int) {
	ctx := context.Background()
	prefix := "sessions/" + f.id.String() + "/"
	var bytesGot, objects int64
	for range b.N {
		infos, err := f.obj.List(ctx, prefix, 0)
		require.NoError(b, err)
		var got atomic.Int64
		var firstErr atomic.Pointer[error]
		work := make(chan string)
		var wg sync.WaitGroup
		for range parallel {
			wg.Go(func() {
				for key := range work {
					data, err := f.obj.Get(ctx, key, 0, -1)
					if err != nil {
						firstErr.CompareAndSwap(nil, &err)
						continue
					}
					got.Add(int64(len(data)))
				}
			})
		}
		n := 0
		for _, o := range infos {
			if !f.tombs[o.Key] { // the session's objects, not the tombstones of its dead ones
				work <- o.Key
				n++
			}
		}
		close(work)
		wg.Wait()
		if p := firstErr.Load(); p != nil {
			require.NoError(b, *p)
		}
		bytesGot += got.Load()
		objects += int64(n)
	}
	n := float64(b.N)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/n, "ms/restore")
	b.ReportMetric(float64(bytesGot)/n, "B-fetched/op")
	b.ReportMetric(float64(objects)/n, "objects/op")
}

// costSession is a session of 1,000 messages of 1 KiB appended by some
// writers (goroutines, to the one session), kept in the object store;
// the counts of its building are the cost of 1,000 appends.
type costSession struct {
	id      uuid.UUID
	writers int
	appends int
	// The calls of Create, of the appends alone, of the Close after them
	// (which seals the chunk and releases the session), and of the next
	// holder's open, load and close once LeaseTime passed, which deletes
	// the data objects the seal made unneeded.
	create, append, close, settle callCounts
	sealed                        int64 // bytes of the sealed chunk's object
	rest                          int64 // bytes under the session's prefix and of its metadata copies, at rest
	restObjects                   int
}

func buildCostSession(b *testing.B, obj sessionstore.ObjectStore, writers int) *costSession {
	ctx := context.Background()
	s := &costSession{writers: writers, appends: 1000}
	var sealedKey atomic.Pointer[string]
	cs := newCounting(obj)
	cs.observe = func(key string, data []byte) {
		if h, ok := logKind(key, data); ok && h.Kind == "seal" {
			sealedKey.Store(&h.Key)
		}
	}
	const lease = 2 * time.Second
	dir := b.TempDir()
	st, err := sessionstore.Open(dir, benchRemoteOpts(cs, lease))
	require.NoError(b, err)
	defer st.Close()
	c0 := cs.counts()
	m, err := st.Create(ctx, sessionstore.Meta{Name: fmt.Sprintf("cost, %d writers", writers)})
	require.NoError(b, err)
	s.id = m.ID
	c1 := cs.counts()
	var next atomic.Int64
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := next.Add(1) - 1; i < int64(s.appends); i = next.Add(1) - 1 {
				if _, err := st.Append(ctx, m.ID, messages()[int(i)%len(messages())]); err != nil {
					errs[w] = err
					return
				}
			}
		})
	}
	wg.Wait()
	require.NoError(b, errors.Join(errs...))
	c2 := cs.counts()
	require.NoError(b, st.Close())
	c3 := cs.counts()
	s.create, s.append, s.close = c1.sub(c0), c2.sub(c1), c3.sub(c2)
	key := sealedKey.Load()
	require.NotNil(b, key, "closing the session sealed its chunk")
	info, err := obj.Stat(ctx, *key)
	require.NoError(b, err)
	s.sealed = info.Size

	// The next holder deletes the data objects once LeaseTime passed.
	st2, err := sessionstore.Open(dir, benchRemoteOpts(cs, lease))
	require.NoError(b, err)
	defer st2.Close()
	c4 := cs.counts()
	evs, err := st2.Load(ctx, m.ID)
	require.NoError(b, err)
	require.Len(b, evs, s.appends)
	time.Sleep(lease + 500*time.Millisecond)
	require.NoError(b, st2.Close())
	s.settle = cs.counts().sub(c4)
	for _, prefix := range []string{"sessions/" + m.ID.String() + "/", "meta/" + m.ID.String() + "/"} {
		infos, err := obj.List(ctx, prefix, 0)
		require.NoError(b, err)
		for _, o := range infos {
			s.rest += o.Size
			s.restObjects++
		}
	}
	return s
}

// BenchmarkOpenClose: first the cost of 1,000 appends of a 1 KiB message,
// by one writer and by 16 (goroutines, to one session), with the close
// that seals the session's chunk (logged, from the counts of building the
// sessions). Then one open and close of the one-writer session: a new
// Store opens it and loads its active path, then closes. same-dir reopens
// the directory the last close left (its files match the log); empty-dir
// starts from a new, empty directory each time (a restore). An op is one
// cycle.
func BenchmarkOpenClose(b *testing.B) {
	obj := remote.New(s3test.Shared(b).OpenBucket(b))
	var sessions []*costSession
	for _, writers := range []int{1, 16} {
		s := buildCostSession(b, obj, writers)
		b.Logf("a session of 1,000 appends, writers %d: create: %s; the appends: %s; close (seal, release): %s; the next holder's open, load and close after LeaseTime (deleting the data objects): %s; sealed chunk %d bytes; at rest %d objects, %d bytes",
			s.writers, describe(s.create, 1), describe(s.append, 1), describe(s.close, 1), describe(s.settle, 1), s.sealed, s.restObjects, s.rest)
		sessions = append(sessions, s)
	}
	b.Run("same-dir", func(b *testing.B) { benchOpenClose(b, obj, sessions[0], true) })
	b.Run("empty-dir", func(b *testing.B) { benchOpenClose(b, obj, sessions[0], false) })
}

func benchOpenClose(b *testing.B, obj sessionstore.ObjectStore, s *costSession, sameDir bool) {
	ctx := context.Background()
	dir := b.TempDir()
	cycleOnce := func(cs *countingStore, dir string) (callCounts, callCounts) {
		st, err := sessionstore.Open(dir, benchRemoteOpts(cs, sessionstore.DefaultLeaseTime))
		require.NoError(b, err)
		evs, err := st.Load(ctx, s.id)
		require.NoError(b, err)
		require.Len(b, evs, s.appends)
		c := cs.counts()
		require.NoError(b, st.Close())
		return c, cs.counts().sub(c)
	}
	if sameDir {
		cycleOnce(newCounting(obj), dir) // the directory then matches the log
	}
	var open, closing callCounts
	cycles := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		d := dir
		if !sameDir {
			b.StopTimer()
			var err error
			d, err = os.MkdirTemp("", "cycle-")
			require.NoError(b, err)
			b.StartTimer()
		}
		o, c := cycleOnce(newCounting(obj), d)
		cycles = append(cycles, time.Since(t0))
		open, closing = add(open, o), add(closing, c)
		if !sameDir {
			b.StopTimer()
			require.NoError(b, os.RemoveAll(d))
			b.StartTimer()
		}
	}
	b.StopTimer()
	n := float64(b.N)
	per := func(v int64) float64 { return float64(v) / n }
	all := add(open, closing)
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/n, "ms/cycle")
	b.ReportMetric(per(all.writes()), "PUTs/op")
	b.ReportMetric(per(closing.writes()), "close-PUTs/op")
	b.ReportMetric(per(all.Gets), "GETs/op")
	b.ReportMetric(per(all.Lists), "LISTs/op")
	b.ReportMetric(per(all.Listed), "keys-listed/op")
	b.ReportMetric(per(all.Stats), "STATs/op")
	b.ReportMetric(per(all.Deletes), "DELETEs/op")
	b.ReportMetric(per(all.CreateBytes+all.PutBytes), "B-put/op")
	b.ReportMetric(per(all.GetBytes), "B-fetched/op")
	b.ReportMetric(float64(all.InCalls.Microseconds())/1000/n, "in-calls-ms/op")
	b.ReportMetric(float64(all.InList.Microseconds())/1000/n, "in-LIST-ms/op")
	// An open lists the whole log, which grows by two markers a cycle
	// (markers are never deleted): the first and the last cycles of the
	// run, and the log's length at its end.
	k := max(1, len(cycles)/10)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(mean(cycles[:k])), "first10%-ms/cycle")
	b.ReportMetric(ms(mean(cycles[len(cycles)-k:])), "last10%-ms/cycle")
	infos, err := obj.List(ctx, "sessions/"+s.id.String()+"/log/", 0)
	require.NoError(b, err)
	b.ReportMetric(float64(len(infos)), "log-objects")
}

// add returns the sum of the plain counts of a and c (not by log kind).
func add(a, c callCounts) callCounts {
	return callCounts{
		Creates: a.Creates + c.Creates, Puts: a.Puts + c.Puts, Gets: a.Gets + c.Gets,
		Stats: a.Stats + c.Stats, Lists: a.Lists + c.Lists, Deletes: a.Deletes + c.Deletes,
		CreateBytes: a.CreateBytes + c.CreateBytes, PutBytes: a.PutBytes + c.PutBytes, GetBytes: a.GetBytes + c.GetBytes,
		Listed: a.Listed + c.Listed, ListPages: a.ListPages + c.ListPages, InCalls: a.InCalls + c.InCalls, InList: a.InList + c.InList,
		ChunkGets: a.ChunkGets + c.ChunkGets, ChunkGetBytes: a.ChunkGetBytes + c.ChunkGetBytes,
	}
}

// describe says what c counted, per one of n.
func describe(c callCounts, n int) string {
	per := func(v int64) string {
		if n == 1 {
			return strconv.FormatInt(v, 10)
		}
		return fmt.Sprintf("%.4g", float64(v)/float64(n))
	}
	s := fmt.Sprintf("%s Create (%s B), %s Put (%s B), %s Get (%s B), %s List (%s keys, %s pages), %s Stat, %s Delete",
		per(c.Creates), per(c.CreateBytes), per(c.Puts), per(c.PutBytes), per(c.Gets), per(c.GetBytes), per(c.Lists), per(c.Listed), per(c.ListPages), per(c.Stats), per(c.Deletes))
	var kinds []string
	for k, v := range c.LogCreates {
		if v != 0 {
			kinds = append(kinds, fmt.Sprintf("%s %s (%s B)", per(v), k, per(c.LogBytes[k])))
		}
	}
	if len(kinds) > 0 {
		slices.Sort(kinds)
		s += "; log objects: " + strings.Join(kinds, ", ")
	}
	return s
}

// BenchmarkFollow: a follower (a read-only Store with the same Remote, in
// a directory of its own) beside a Store appending 1 KiB messages to a
// session kept in versitygw. An op is one append, then the wait until the
// follower sees it:
//
//   - subscribe-<interval>: through a Subscribe on the follower, which
//     polls the log every FollowInterval; each append comes at a random
//     point of the period (a sleep before it); seen-p50-µs and
//     seen-p99-µs are from the Append's return to the update's arrival
//     (at best half the period and one look, at the median), and
//     GETs+LISTs/poll what one look at the log costs (one listing, a
//     read of each new object);
//   - call: a Head on the follower right after the Append returns (a
//     dashboard's call), which looks at the log itself: seen-p50-µs is
//     that call's time, and it must name the appended event.
func BenchmarkFollow(b *testing.B) {
	for _, every := range []time.Duration{10 * time.Millisecond, 100 * time.Millisecond} {
		b.Run(fmt.Sprintf("subscribe-%v", every), func(b *testing.B) { benchFollowSubscribe(b, every) })
	}
	b.Run("call", benchFollowCall)
}

// newFollowPair returns a writer's session and a follower of its bucket,
// the follower's object store calls counted.
func newFollowPair(b *testing.B, every time.Duration) (*appendTarget, *sessionstore.Store, *countingStore) {
	w := newAppendTarget(b, true)
	fcs := newCounting(w.cs.ObjectStore)
	fopts := benchRemoteOpts(fcs, sessionstore.DefaultLeaseTime)
	fopts.ReadOnly, fopts.FollowInterval = true, every
	f, err := sessionstore.Open(b.TempDir(), fopts)
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, f.Close()) })
	return w, f, fcs
}

func benchFollowSubscribe(b *testing.B, every time.Duration) {
	ctx := context.Background()
	w, f, fcs := newFollowPair(b, every)
	sub, err := f.Subscribe(ctx, w.id)
	require.NoError(b, err)
	defer sub.Close()
	before := fcs.counts()
	start := time.Now()
	var seen []time.Duration
	b.ResetTimer()
	for range b.N {
		// At a random point of the poll period, as a writer's appends
		// fall: a loop that appended right after each delivery would
		// wait a whole period every time.
		time.Sleep(rand.N(every))
		w.append(b)
		t0 := time.Now()
		select {
		case u, ok := <-sub.C:
			require.True(b, ok, "subscription ended: %v", sub.Err())
			require.NotNil(b, u.Event)
		case <-time.After(time.Minute):
			b.Fatal("the follower did not see the append within a minute")
		}
		seen = append(seen, time.Since(t0))
	}
	b.StopTimer()
	c := fcs.counts().sub(before)
	polls := max(1, float64(time.Since(start))/float64(every))
	reportLatency(b, "seen-", seen)
	b.ReportMetric(float64(c.Gets+c.Lists)/polls, "GETs+LISTs/poll")
	b.ReportMetric(float64(c.writes()), "follower-PUTs")
}

func benchFollowCall(b *testing.B) {
	ctx := context.Background()
	w, f, fcs := newFollowPair(b, sessionstore.DefaultFollowInterval)
	_, err := f.Head(ctx, w.id) // the session's first look: its restore
	require.NoError(b, err)
	before := fcs.counts()
	var seen []time.Duration
	b.ResetTimer()
	for range b.N {
		w.append(b)
		want, err := w.st.Head(ctx, w.id)
		require.NoError(b, err)
		t0 := time.Now()
		head, err := f.Head(ctx, w.id)
		seen = append(seen, time.Since(t0))
		require.NoError(b, err)
		require.Equal(b, want, head, "the follower's call sees the append that returned before it")
	}
	b.StopTimer()
	c := fcs.counts().sub(before)
	reportLatency(b, "seen-", seen)
	b.ReportMetric(float64(c.Gets+c.Lists)/float64(b.N), "GETs+LISTs/call")
	b.ReportMetric(float64(c.writes()), "follower-PUTs")
}
