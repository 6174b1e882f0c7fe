package remote_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

// pauseStore is an ObjectStore whose calls, once paused, wait before they
// reach the server until resumed: the Store using it is a zombie whose
// requests, its Creates of commit groups in flight among them, leave only
// after another Store took its session.
type pauseStore struct {
	sessionstore.ObjectStore
	mu      sync.Mutex
	paused  chan struct{} // closed by resume; nil while not paused
	held    atomic.Int64  // Creates that waited
	holding atomic.Int64  // calls waiting now
}

func (p *pauseStore) pause() {
	p.mu.Lock()
	p.paused = make(chan struct{})
	p.mu.Unlock()
}

func (p *pauseStore) resume() {
	p.mu.Lock()
	if p.paused != nil {
		close(p.paused)
		p.paused = nil
	}
	p.mu.Unlock()
}

func (p *pauseStore) wait(create bool) {
	p.mu.Lock()
	ch := p.paused
	p.mu.Unlock()
	if ch == nil {
		return
	}
	if create {
		p.held.Add(1)
	}

	p.holding.Add(1)
	<-ch
	p.holding.Add(-1)
}

func (p *pauseStore) Create(ctx context.Context, key string, b []byte) error {
	p.wait(true)
	return p.ObjectStore.Create(ctx, key, b)
}

func (p *pauseStore) Put(ctx context.Context, key string, b []byte) error {
	p.wait(false)
	return p.ObjectStore.Put(ctx, key, b)
}

func (p *pauseStore) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	p.wait(false)
	return p.ObjectStore.Get(ctx, key, off, n)
}

func (p *pauseStore) Stat(ctx context.Context, key string) (sessionstore.ObjectInfo, error) {
	p.wait(false)
	return p.ObjectStore.Stat(ctx, key)
}

func (p *pauseStore) List(ctx context.Context, prefix string, limit int) ([]sessionstore.ObjectInfo, error) {
	p.wait(false)
	return p.ObjectStore.List(ctx, prefix, limit)
}

func (p *pauseStore) Delete(ctx context.Context, key string) error {
	p.wait(false)
	return p.ObjectStore.Delete(ctx, key)
}

// TestZombieWithGroupsInFlight: a holder A starts an append every half
// millisecond, each on a goroutine of its own, so that several commit
// groups' log objects are in flight (the window) when its requests stop
// reaching the server (paused: a zombie whose
// Creates wait to be sent, its renewals too). After LeaseTime a Store B
// takes the session and appends; then A's requests go on: its Creates in
// flight find their numbers taken (B's voids, marker and fills), so A
// acknowledges nothing stored after the fence. Every event A
// acknowledged, before the pause or after the resume, is in B's load,
// before every event whose append started after its acknowledgement; every A event
// there was tried; B's own events follow; and a third Store's load on an
// empty directory is the same. Several sessions run side by side
// (SESSIONSTORE_REMOTE_ZOMBIES, default 4).
func TestZombieWithGroupsInFlight(t *testing.T) {
	t.Parallel()
	n := procSize(t, procZombiesEnv, 4)
	srv := s3test.Shared(t)
	bucket := srv.NewBucket(t)
	var heldAll, ackedAll, afterAll atomic.Int64
	t.Run("zombies", func(t *testing.T) {
		for i := range n {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				held, acked, after := zombieWithGroupsInFlight(t, srv, bucket, i)
				heldAll.Add(held)
				ackedAll.Add(int64(acked))
				afterAll.Add(int64(after))
			})
		}
	})
	t.Logf("%d zombies: %d Creates held in flight at their pauses, %d events acknowledged, %d of them after the resume", n, heldAll.Load(), ackedAll.Load(), afterAll.Load())
	assert.Positive(t, heldAll.Load(), "the zombies had Creates in flight when paused")
}

func zombieWithGroupsInFlight(t *testing.T, srv *s3test.Server, bucket string, z int) (held int64, acked, after int) {
	ctx := context.Background()
	base := t.TempDir()
	obj := remote.New(srv.Open(t, srv.Config(bucket)))
	ps := &pauseStore{ObjectStore: obj}
	oa := procOptions(ps, false)
	a, err := sessionstore.Open(filepath.Join(base, "a"), oa)
	require.NoError(t, err)
	m, err := a.Create(ctx, sessionstore.Meta{Name: fmt.Sprintf("zombie %d", z)})
	require.NoError(t, err)

	// Appends start every half millisecond, each on its own goroutine,
	// whether the earlier ones returned or not: while A's Creates wait,
	// each new append is a commit group of its own, and the window's
	// groups are in flight at once.
	type appendRec struct {
		text       string
		start, ack int64 // on clock: an append that started after another's ack follows it in the log
	}
	var clock atomic.Int64
	var mu sync.Mutex
	var recs []*appendRec
	var resumed, failed atomic.Bool
	var afterResume, total atomic.Int64
	var wg sync.WaitGroup
	launch := func(k int) {
		r := &appendRec{text: fmt.Sprintf("z%d-%d", z, k), start: clock.Add(1)}
		mu.Lock()
		recs = append(recs, r)
		mu.Unlock()
		wg.Go(func() {
			_, err := a.Append(ctx, m.ID, sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage(fmt.Sprintf(`{"text":%q}`, r.text))})
			if err != nil {
				failed.Store(true) // fenced (or failed): A stops starting appends
				return
			}
			wasResumed := resumed.Load()
			mu.Lock()
			r.ack = clock.Add(1)
			mu.Unlock()
			total.Add(1)
			if wasResumed {
				afterResume.Add(1)
			}
		})
	}
	stopLaunch := make(chan struct{})
	launched := make(chan struct{})
	go func() {
		defer close(launched)
		for k := 0; !failed.Load(); k++ {
			select {
			case <-stopLaunch:
				return
			case <-time.After(500 * time.Microsecond):
			}
			launch(k)
		}
	}()
	for total.Load() < 40 {
		time.Sleep(time.Millisecond)
	}
	ps.pause()
	// Let the appends run into the pause: their groups' Creates wait.
	deadline := time.Now().Add(time.Second)
	for ps.held.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(procLeaseTime + 500*time.Millisecond) // A idle past its lease on the server's clock
	close(stopLaunch)
	<-launched

	b, err := sessionstore.Open(filepath.Join(base, "b"), procOptions(obj, true))
	require.NoError(t, err)
	defer b.Close()
	_, err = b.Append(ctx, m.ID, sessionstore.Event{Kind: sessionstore.KindCustom, Record: json.RawMessage(`{"text":"b0"}`)})
	require.NoError(t, err, "B takes the session over")
	resumed.Store(true)
	ps.resume()
	wg.Wait()
	tried := map[string]*appendRec{}
	for _, r := range recs {
		tried[r.text] = r
	}
	cerr := a.Close()
	assert.True(t, cerr == nil || errors.Is(cerr, sessionstore.ErrFenced) || errors.Is(cerr, sessionstore.ErrRemote), "zombie %d: A's Close: %v", z, cerr)

	check := func(s *sessionstore.Store, who string) {
		evs, err := s.Load(ctx, m.ID)
		require.NoError(t, err, "zombie %d: %s's load", z, who)
		var texts []string
		for _, e := range evs {
			var r struct{ Text string }
			require.NoError(t, json.Unmarshal(e.Record, &r))
			texts = append(texts, r.Text)
		}
		require.NotEmpty(t, texts)
		assert.Equal(t, "b0", texts[len(texts)-1], "zombie %d: %s: B's event comes last", z, who)
		pos := map[string]int{}
		for i, x := range texts[:len(texts)-1] {
			assert.NotNil(t, tried[x], "zombie %d: %s: %q was never tried", z, who, x)
			pos[x] = i
		}
		for _, r := range recs {
			if r.ack == 0 {
				continue
			}
			p, ok := pos[r.text]
			if !assert.True(t, ok, "zombie %d: %s: acknowledged %q is lost", z, who, r.text) {
				continue
			}
			for _, later := range recs {
				if q, in := pos[later.text]; in && later.start > r.ack {
					assert.Less(t, p, q, "zombie %d: %s: %q, started after %q was acknowledged, comes before it", z, who, later.text, r.text)
				}
			}
		}
	}
	check(b, "B")
	require.NoError(t, b.Close())
	c, err := sessionstore.Open(filepath.Join(base, "c"), procOptions(obj, true))
	require.NoError(t, err)
	defer c.Close()
	check(c, "a third Store")
	for _, r := range recs {
		if r.ack != 0 {
			acked++
		}
	}
	return ps.held.Load(), acked, int(afterResume.Load())
}
