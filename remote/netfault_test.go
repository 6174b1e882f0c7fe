package remote_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
	"github.com/sessionstore/sessionstore/remote/faultproxy"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

// Network faults at every step. A workload of one session runs against
// versitygw through a fault proxy: Create, appends single and batched
// (one with a blob), small chunks so that chunks are sealed, UpdateMeta,
// Close; a new Store on the same directory, more appends, Close; then a
// restore as on another machine (a Store on an empty directory: Load,
// which fetches the sealed chunks and blobs, appends, Close). It runs once
// clean to count its requests, then once per request number k and fault
// kind, with that fault at request k. Every error a call returns must be
// typed, a Load must return every event acknowledged before it, and a
// fresh Store on an empty directory, reaching the server directly, must
// open the session with every acknowledged event in order and nothing
// never tried, and append to it.

// netFaultsEnv selects the runs: a number of runs, or "all" for every
// fault kind at every request of the workload (netJobs).
const netFaultsEnv = "SESSIONSTORE_REMOTE_NETFAULTS"

// netDefaultRuns is the number of runs by default.
const netDefaultRuns = 20

// netRemoteTimeout is the workload's Options.RemoteTimeout, which the
// delay fault outlasts.
const netRemoteTimeout = time.Second

// netLease is the Options.LeaseTime of the checker:
// a session the workload left held is taken over after it (S3's
// Last-Modified has 1s resolution).
const netLease = 2 * time.Second

// netParallel is how many runs go at once: most of a run's time is spent
// waiting (a delay, a lease), not computing.
const netParallel = 8

// netFaults are the fault kinds, by name.
var netFaults = []struct {
	name    string
	fault   faultproxy.Fault
	retried bool // the S3 client sends the request again
}{
	{"drop-before", faultproxy.DropBefore(), true},
	{"drop-after", faultproxy.DropAfter(), true},
	{"error-500", faultproxy.Error500(), true},
	{"truncate", faultproxy.Truncate(16), false},
	{"delay", faultproxy.Delay(netRemoteTimeout + 500*time.Millisecond), false},
}

// netEvent is the workload's event n, whose record is a blob (over the
// workload's BlobThreshold) when blob is set.
func netEvent(n int, blob bool) sessionstore.Event {
	text := fmt.Sprintf("event %d %s", n, strings.Repeat("w", 100+n%4*50))
	if blob {
		text += strings.Repeat("blob", 2000)
	}
	return sessionstore.NewEvent(sessionstore.KindCustom, sessionstore.RoleNone, map[string]string{"text": text})
}

func netText(t *testing.T, ev sessionstore.Event) string {
	var r struct{ Text string }
	require.NoError(t, ev.Decode(&r))
	return r.Text
}

// netRun is what one run of the workload did.
type netRun struct {
	created bool     // Create returned nil
	acked   []string // the events whose append returned nil, in order
	tried   []string // every event it appended, in order
	names   []string // every Name it gave the session
	loads   []netLoad
	errs    []netCallErr
}

// netLoad is what a Load of the workload returned, when it had
// acknowledged and tried so many events.
type netLoad struct {
	got          []string
	acked, tried int
}

type netCallErr struct {
	call string
	err  error
}

// netWorkload runs the workload on session id in dir, through obj.
func netWorkload(t *testing.T, obj sessionstore.ObjectStore, dir string, id [16]byte, timeout time.Duration) *netRun {
	run := &netRun{}
	opts := &sessionstore.Options{
		Remote:        obj,
		ChunkSize:     2 << 10,
		BlobThreshold: 4 << 10,
		// Long, so that no sealed data object's grace ends during the
		// workload: the requests it makes do not depend on its timing.
		// (Its second round reopens the same directory, which takes its
		// own session back at once.)
		LeaseTime:     time.Hour,
		RemoteTimeout: timeout,
	}
	n := 0
	call := func(name string, err error) bool {
		if err != nil {
			run.errs = append(run.errs, netCallErr{name, err})
		}
		return err == nil
	}
	ctx := func() context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return ctx
	}
	single := func(s *sessionstore.Store, count int) {
		for range count {
			ev := netEvent(n, false)
			text := netText(t, ev)
			n++
			run.tried = append(run.tried, text)
			if _, err := s.Append(ctx(), id, ev); call(fmt.Sprintf("Append %d", n-1), err) {
				run.acked = append(run.acked, text)
			}
		}
	}
	batch := func(s *sessionstore.Store, count, blobAt int) {
		evs := make([]sessionstore.Event, count)
		texts := make([]string, count)
		for i := range evs {
			evs[i] = netEvent(n, i == blobAt)
			texts[i] = netText(t, evs[i])
			n++
		}
		run.tried = append(run.tried, texts...)
		if _, err := s.AppendBatch(ctx(), id, evs...); call(fmt.Sprintf("AppendBatch %d..%d", n-count, n-1), err) {
			run.acked = append(run.acked, texts...)
		}
	}
	rename := func(s *sessionstore.Store, name string) {
		run.names = append(run.names, name)
		_, err := s.UpdateMeta(ctx(), id, func(m *sessionstore.Meta) { m.Name = name })
		call("UpdateMeta "+name, err)
	}

	s, err := sessionstore.Open(dir, opts)
	require.NoError(t, err, "Open makes no remote call")
	run.names = append(run.names, "netfaults")
	_, err = s.Create(ctx(), sessionstore.Meta{ID: id, Name: "netfaults"})
	run.created = call("Create", err)
	single(s, 3)
	batch(s, 3, 1)
	single(s, 4)
	rename(s, "renamed")
	single(s, 3)
	call("Close", s.Close())

	s, err = sessionstore.Open(dir, opts)
	require.NoError(t, err)
	single(s, 3)
	batch(s, 4, 2)
	single(s, 3)
	call("Close (reopened)", s.Close())

	// A restore, as on another machine: a Store on an empty directory
	// loads the session, fetching its sealed chunks and blobs, and
	// appends. It waits out the lease if a Close above failed.
	opts.WaitForLock = true
	s, err = sessionstore.Open(t.TempDir(), opts)
	require.NoError(t, err)
	evs, err := s.Load(ctx(), id)
	if call("Load (restored)", err) {
		l := netLoad{acked: len(run.acked), tried: len(run.tried)}
		for _, ev := range evs {
			l.got = append(l.got, netText(t, ev))
		}
		run.loads = append(run.loads, l)
	}
	single(s, 2)
	call("Close (restored)", s.Close())
	return run
}

// netTyped reports whether err is one of the errors a remote session's
// calls may return for a network fault.
func netTyped(err error) bool {
	for _, target := range []error{
		sessionstore.ErrRemote, sessionstore.ErrSessionFailed, sessionstore.ErrFenced,
		sessionstore.ErrLocked, sessionstore.ErrNotFound, context.Canceled, context.DeadlineExceeded,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// netCheck opens session id from the bucket obj into an empty directory,
// reaching the server directly, and checks it against what the workload
// did.
func netCheck(t *testing.T, obj sessionstore.ObjectStore, id [16]byte, run *netRun) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sessionstore.Open(t.TempDir(), &sessionstore.Options{
		Remote:        obj,
		LeaseTime:     netLease,
		WaitForLock:   true, // a session the workload left held is taken over after the lease
		RemoteTimeout: 30 * time.Second,
	})
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()
	for _, l := range run.loads {
		assert.True(t, netSubsequence(run.acked[:l.acked], l.got), "the workload's Load: every event acknowledged before it, in order: loaded %s", netShort(l.got))
		assert.True(t, netSubsequence(l.got, run.tried[:l.tried]), "the workload's Load: only events tried before it: loaded %s", netShort(l.got))
	}
	evs, err := s.Load(ctx, id)
	if errors.Is(err, sessionstore.ErrNotFound) && !run.created && len(run.acked) == 0 {
		return // the Create failed, and nothing was acknowledged
	}
	require.NoError(t, err, "the session opens")
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = netText(t, ev)
	}
	assert.True(t, netSubsequence(run.acked, got), "every acknowledged event, in order: %d acknowledged, %d loaded\nacknowledged %s\nloaded       %s",
		len(run.acked), len(got), netShort(run.acked), netShort(got))
	assert.True(t, netSubsequence(got, run.tried), "only events tried, in order: loaded %s", netShort(got))

	meta, err := s.Meta(ctx, id)
	if assert.NoError(t, err, "Meta") {
		assert.Contains(t, run.names, meta.Name)
	}
	after := netEvent(1000, false)
	_, err = s.Append(ctx, id, after)
	require.NoError(t, err, "the session takes appends")
	evs, err = s.Load(ctx, id)
	require.NoError(t, err)
	if assert.Len(t, evs, len(got)+1) {
		assert.Equal(t, netText(t, after), netText(t, evs[len(evs)-1]))
	}
}

// netShort names events by their numbers.
func netShort(texts []string) string {
	nums := make([]string, len(texts))
	for i, s := range texts {
		f := strings.Fields(s)
		nums[i] = f[min(1, len(f)-1)]
	}
	return "[" + strings.Join(nums, " ") + "]"
}

// netRequest names a request by its method and object key, shortened:
// "PUT log/3", "PUT chunks/1", "GET list meta/".
func netRequest(e faultproxy.Entry) string {
	path, query, _ := strings.Cut(e.Path, "?")
	_, key, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/") // after the bucket
	if q, err := url.ParseQuery(query); err == nil && q.Has("list-type") {
		key = "list " + q.Get("prefix")
	}
	for _, r := range netShorten {
		key = r.re.ReplaceAllString(key, r.with)
	}
	return e.Method + " " + key
}

var netShorten = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`(sessions|meta)/[0-9a-f-]{36}/`), "$1/"},
	{regexp.MustCompile(`^sessions/`), ""},
	{regexp.MustCompile(`/0+(\d)`), "/$1"},
	{regexp.MustCompile(`chunks/(\d+)\.jsonl\.\S+`), "chunks/$1"},
	{regexp.MustCompile(`blobs/([0-9a-f]{8})[0-9a-f]+`), "blobs/$1"},
}

// netSubsequence reports whether a's elements appear in b in order.
func netSubsequence(a, b []string) bool {
	i := 0
	for _, x := range b {
		if i < len(a) && a[i] == x {
			i++
		}
	}
	return i == len(a)
}

// netSessionID returns a random version 4 UUID for Meta.ID (a uuid.UUID
// is a [16]byte).
func netSessionID(t *testing.T) [16]byte {
	var id [16]byte
	_, err := rand.Read(id[:])
	require.NoError(t, err)
	id[6] = id[6]&0x0f | 0x40 // version 4
	id[8] = id[8]&0x3f | 0x80 // RFC 4122 variant
	return id
}

// netEnv is a bucket of its own on the shared server, reached through a
// fault proxy and directly.
type netEnv struct {
	proxied, direct sessionstore.ObjectStore
	proxy           *faultproxy.Proxy
}

func newNetEnv(t *testing.T, attempts int) netEnv {
	srv := s3test.Shared(t)
	p := faultproxy.Start(t, srv.Endpoint)
	cfg := srv.Config(srv.NewBucket(t))
	direct := remote.New(srv.Open(t, cfg))
	cfg.Endpoint = p.URL()
	cfg.MaxAttempts = attempts
	return netEnv{remote.New(srv.Open(t, cfg)), direct, p}
}

// netJob is one run: the fault at request k, with the client's
// MaxAttempts.
type netJob struct {
	attempts, k int
	fault       int // in netFaults
}

// netCombos are the (retry setting, fault kind) pairs tried at each
// request number: every kind with the client's retries off (MaxAttempts
// 1), so that every fault reaches the Store, and with the SDK's default
// of 3 attempts the kinds it retries (a drop, a 500), where the retry of
// a request whose answer was lost finds its effect (a Create its own
// object). A cut body and a timeout are not retried: with 3 attempts they
// are the runs with 1 again.
var netCombos = func() []netJob {
	var out []netJob
	for f := range netFaults {
		out = append(out, netJob{attempts: 1, fault: f})
	}
	for f, nf := range netFaults {
		if nf.retried {
			out = append(out, netJob{attempts: 3, fault: f})
		}
	}
	return out
}()

// netJobs returns the runs for a workload of n requests: every request
// number with each of netCombos when $SESSIONSTORE_REMOTE_NETFAULTS is
// "all", else as many runs as it says (netDefaultRuns when unset), their
// request numbers spread from the first request to the last, each with
// the next of netCombos in turn.
func netJobs(t *testing.T, n int) []netJob {
	combos := netCombos
	var jobs []netJob
	v := os.Getenv(netFaultsEnv)
	if v == "all" {
		for k := 1; k <= n; k++ {
			for _, c := range combos {
				c.k = k
				jobs = append(jobs, c)
			}
		}
		return jobs
	}
	runs := netDefaultRuns
	if v != "" {
		var err error
		runs, err = strconv.Atoi(v)
		require.NoError(t, err, "$%s is a number of runs or \"all\"", netFaultsEnv)
		require.Positive(t, runs, "$%s", netFaultsEnv)
	}
	for i := range runs {
		c := combos[i%len(combos)]
		c.k = 1
		if runs > 1 {
			c.k = 1 + i*(n-1)/(runs-1)
		}
		jobs = append(jobs, c)
	}
	return jobs
}

// TestNetFaultAtEveryRequest runs the workload with each fault kind at
// each request number, with the client's retries off and on (netCombos;
// a sample by default, every combination with
// SESSIONSTORE_REMOTE_NETFAULTS=all).
func TestNetFaultAtEveryRequest(t *testing.T) {
	start := time.Now()
	clean := newNetEnv(t, 1)
	id := netSessionID(t)
	run := netWorkload(t, clean.proxied, t.TempDir(), id, 30*time.Second)
	for _, e := range run.errs {
		require.NoError(t, e.err, "clean run: %s", e.call)
	}
	require.Len(t, run.acked, 25)
	require.Len(t, run.loads, 1)
	require.Equal(t, run.acked[:23], run.loads[0].got, "the restore loads every event")
	requests := clean.proxy.Requests()
	netCheck(t, clean.direct, id, run)
	objs, err := clean.direct.List(ctxFor(t), "sessions/", 0)
	require.NoError(t, err)
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	all := strings.Join(keys, " ")
	require.Contains(t, all, "/chunks/", "the workload seals a chunk")
	require.Contains(t, all, "/blobs/", "the workload stores a blob")
	var calls []string
	for _, e := range clean.proxy.Log() {
		calls = append(calls, netRequest(e))
	}
	t.Logf("the workload's %d requests: %s", requests, strings.Join(calls, ", "))
	jobs := netJobs(t, requests)

	var mu sync.Mutex
	faulted, withErrors := 0, 0
	sem := make(chan struct{}, netParallel)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			fault := netFaults[j.fault]
			t.Run(fmt.Sprintf("attempts=%d/k=%02d/%s", j.attempts, j.k, fault.name), func(t *testing.T) {
				env := newNetEnv(t, j.attempts)
				env.proxy.SetRule(func(n int, _ *http.Request) faultproxy.Fault {
					if n == j.k {
						return fault.fault
					}
					return faultproxy.Pass()
				})
				id := netSessionID(t)
				run := netWorkload(t, env.proxied, t.TempDir(), id, netRemoteTimeout)
				for _, e := range run.errs {
					assert.True(t, netTyped(e.err), "%s: untyped error: %v", e.call, e.err)
				}
				log := env.proxy.Log()
				hit := len(log) >= j.k && log[j.k-1].Fault == fault.fault
				assert.True(t, hit, "request %d was faulted (the workload made %d requests)", j.k, len(log))
				if !hit {
					t.Logf("requests: %v", log)
				} else {
					t.Logf("faulted %s; %d calls failed", netRequest(log[j.k-1]), len(run.errs))
				}
				netCheck(t, env.direct, id, run)
				mu.Lock()
				faulted++
				if len(run.errs) > 0 {
					withErrors++
				}
				mu.Unlock()
			})
		}()
	}
	wg.Wait()
	t.Logf("%d requests in the workload, %d runs with a fault (%d of them saw errors of calls) in %v",
		requests, faulted, withErrors, time.Since(start).Round(time.Second))
}

// TestNetBlobFetchFault: a restored session's blob is fetched when a read
// needs it; when that fetch fails in the network, the read returns
// ErrRemote (the object store could not be read), not a
// *CorruptionError saying the blob is missing, and the next read, with
// the network back, has the record. (TestNetFaultAtEveryRequest found
// this at the restore's blob GETs.)
func TestNetBlobFetchFault(t *testing.T) {
	for _, f := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"error-500", faultproxy.Error500()},
		{"truncate", faultproxy.Truncate(16)},
		{"drop-before", faultproxy.DropBefore()},
	} {
		for _, read := range []string{"Load", "Resolve"} {
			t.Run(f.name+"/"+read, func(t *testing.T) {
				env := newNetEnv(t, 1)
				ctx := ctxFor(t)
				opts := &sessionstore.Options{Remote: env.direct, BlobThreshold: 4 << 10, LeaseTime: netLease}
				w, err := sessionstore.Open(t.TempDir(), opts)
				require.NoError(t, err)
				meta, err := w.Create(ctx, sessionstore.Meta{Name: "blob"})
				require.NoError(t, err)
				blob, err := w.Append(ctx, meta.ID, netEvent(0, true))
				require.NoError(t, err)
				require.NotEmpty(t, blob.Digest, "the record is a blob")
				require.NoError(t, w.Close())

				ropts := *opts
				ropts.Remote = env.proxied
				r, err := sessionstore.Open(t.TempDir(), &ropts) // empty: the blob is fetched
				require.NoError(t, err)
				defer r.Close()
				get := func() (sessionstore.Event, error) {
					if read == "Load" {
						evs, err := r.Load(ctx, meta.ID)
						if err != nil {
							return sessionstore.Event{}, err
						}
						require.Len(t, evs, 1)
						return evs[0], nil
					}
					ev, err := r.Event(ctx, meta.ID, blob.ID)
					require.NoError(t, err)
					require.Nil(t, ev.Record, "Event leaves a blob unresolved")
					return r.Resolve(ctx, meta.ID, ev)
				}
				env.proxy.SetRule(func(_ int, req *http.Request) faultproxy.Fault {
					if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
						return f.fault
					}
					return faultproxy.Pass()
				})
				_, err = get()
				require.Error(t, err)
				assert.ErrorIs(t, err, sessionstore.ErrRemote)
				assert.NotErrorIs(t, err, sessionstore.ErrCorrupt, "a network fault is not corruption")

				env.proxy.SetRule(nil)
				ev, err := get()
				require.NoError(t, err)
				assert.Equal(t, netText(t, netEvent(0, true)), netText(t, ev))
			})
		}
	}
}
