package remote_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
	"github.com/sessionstore/sessionstore/remote/faultproxy"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

// throughProxy returns a store of a new bucket on the shared S3 server,
// reached through a fault proxy, a store of the same bucket reached
// directly, and the proxy. attempts is the client's MaxAttempts.
func throughProxy(t *testing.T, attempts int) (proxied, direct sessionstore.ObjectStore, p *faultproxy.Proxy) {
	srv := s3test.Shared(t)
	p = faultproxy.Start(t, srv.Endpoint)
	cfg := srv.Config(srv.NewBucket(t))
	direct = remote.New(srv.Open(t, cfg))
	cfg.Endpoint = p.URL()
	cfg.MaxAttempts = attempts
	proxied = remote.New(srv.Open(t, cfg))
	return proxied, direct, p
}

// onFirst returns a rule that gives fault to the first request that match
// accepts, and passes every other request.
func onFirst(match func(r *http.Request) bool, fault faultproxy.Fault) faultproxy.Rule {
	var done atomic.Bool
	return func(_ int, r *http.Request) faultproxy.Fault {
		if match(r) && done.CompareAndSwap(false, true) {
			return fault
		}
		return faultproxy.Pass()
	}
}

func isPut(r *http.Request) bool { return r.Method == http.MethodPut }
func isGet(r *http.Request) bool { return r.Method == http.MethodGet }

// TestFaultsPass: through the proxy with no fault, every call works.
func TestFaultsPass(t *testing.T) {
	s, direct, p := throughProxy(t, 1)
	ctx := ctxFor(t)
	require.NoError(t, s.Create(ctx, "k", []byte("v")))
	assert.ErrorIs(t, s.Create(ctx, "k", []byte("w")), sessionstore.ErrObjectExists)
	got, err := direct.Get(ctx, "k", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "v", string(got))
	assert.Equal(t, 2, p.Requests())
}

// TestRetriedServerError: a 500 is retried by the client; with no retries
// it is the call's error, and no sentinel's.
func TestRetriedServerError(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		s, direct, p := throughProxy(t, 3)
		ctx := ctxFor(t)
		p.SetRule(onFirst(isPut, faultproxy.Error500()))
		require.NoError(t, s.Create(ctx, "k", []byte("v")))
		got, err := direct.Get(ctx, "k", 0, -1)
		require.NoError(t, err)
		assert.Equal(t, "v", string(got))
		assert.Equal(t, 2, p.Requests(), "the 500, then the retry")
	})
	t.Run("not retried", func(t *testing.T) {
		s, direct, p := throughProxy(t, 1)
		ctx := ctxFor(t)
		p.SetRule(onFirst(isPut, faultproxy.Error500()))
		err := s.Create(ctx, "k", []byte("v"))
		require.Error(t, err)
		assert.NotErrorIs(t, err, sessionstore.ErrObjectExists)
		assert.Contains(t, err.Error(), "remote: create k:")
		assert.Contains(t, err.Error(), "InternalError")
		_, err = direct.Stat(ctx, "k")
		assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound, "the proxy answered; the server never saw it")
		assert.Equal(t, 1, p.Requests())

		p.SetRule(onFirst(isGet, faultproxy.Error500()))
		require.NoError(t, direct.Put(ctx, "k", []byte("v")))
		_, err = s.Get(ctx, "k", 0, -1)
		require.Error(t, err)
		assert.NotErrorIs(t, err, sessionstore.ErrObjectNotFound)
	})
}

// TestConditionalConflictRetried: S3's 409 ConditionalRequestConflict
// (another conditional write of the key was in flight) makes Create try
// again, even with the client's retries off.
func TestConditionalConflictRetried(t *testing.T) {
	s, direct, p := throughProxy(t, 1)
	ctx := ctxFor(t)
	p.SetRule(onFirst(isPut, faultproxy.Error(http.StatusConflict, "ConditionalRequestConflict")))
	require.NoError(t, s.Create(ctx, "k", []byte("v")))
	got, err := direct.Get(ctx, "k", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "v", string(got))
	assert.Equal(t, 2, p.Requests())

	// When the other write won, the retry finds its object.
	p.SetRule(func(_ int, r *http.Request) faultproxy.Fault {
		if isPut(r) {
			return faultproxy.Error(http.StatusConflict, "ConditionalRequestConflict")
		}
		return faultproxy.Pass()
	})
	require.NoError(t, direct.Create(ctx, "k2", []byte("other")))
	p.SetRule(onFirst(isPut, faultproxy.Error(http.StatusConflict, "ConditionalRequestConflict")))
	assert.ErrorIs(t, s.Create(ctx, "k2", []byte("mine")), sessionstore.ErrObjectExists)

	// A conflict that lasts is an error, after a few tries.
	p.SetRule(func(_ int, r *http.Request) faultproxy.Fault {
		if isPut(r) {
			return faultproxy.Error(http.StatusConflict, "ConditionalRequestConflict")
		}
		return faultproxy.Pass()
	})
	before := p.Requests()
	err = s.Create(ctx, "k3", []byte("v"))
	require.Error(t, err)
	assert.NotErrorIs(t, err, sessionstore.ErrObjectExists)
	assert.Greater(t, p.Requests()-before, 1)
	assert.LessOrEqual(t, p.Requests()-before, 10)
}

// TestDroppedBeforeServer: a request lost before it reached the server is
// retried by the client; with no retries the call fails and the server
// has nothing.
func TestDroppedBeforeServer(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		s, direct, p := throughProxy(t, 3)
		ctx := ctxFor(t)
		p.SetRule(onFirst(isPut, faultproxy.DropBefore()))
		require.NoError(t, s.Create(ctx, "k", []byte("v")))
		got, err := direct.Get(ctx, "k", 0, -1)
		require.NoError(t, err)
		assert.Equal(t, "v", string(got))

		p.SetRule(onFirst(isGet, faultproxy.DropBefore()))
		got, err = s.Get(ctx, "k", 0, -1)
		require.NoError(t, err)
		assert.Equal(t, "v", string(got))
	})
	t.Run("not retried", func(t *testing.T) {
		s, direct, p := throughProxy(t, 1)
		ctx := ctxFor(t)
		p.SetRule(onFirst(isPut, faultproxy.DropBefore()))
		err := s.Put(ctx, "k", []byte("v"))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "remote: put k:")
		_, err = direct.Stat(ctx, "k")
		assert.ErrorIs(t, err, sessionstore.ErrObjectNotFound)
	})
}

// TestCreateAnswerLost is the case the package doc tells of: the server
// stored a Create's object but its answer was lost. With the client's
// retries the retry finds the object, and the Create returns
// ErrObjectExists although its data is stored; without them it returns an
// error that is neither nil nor ErrObjectExists. Never nil for an object
// it did not store, never a lost write reported as a success.
func TestCreateAnswerLost(t *testing.T) {
	t.Run("retried", func(t *testing.T) {
		s, direct, p := throughProxy(t, 3)
		ctx := ctxFor(t)
		p.SetRule(onFirst(isPut, faultproxy.DropAfter()))
		err := s.Create(ctx, "k", []byte("mine"))
		assert.ErrorIs(t, err, sessionstore.ErrObjectExists)
		got, err := direct.Get(ctx, "k", 0, -1)
		require.NoError(t, err)
		assert.Equal(t, "mine", string(got), "the Create's data is stored")
		log := p.Log()
		require.Len(t, log, 2)
		assert.Equal(t, http.StatusOK, log[0].Status, "the lost answer")
		assert.Equal(t, http.StatusPreconditionFailed, log[1].Status, "the retry's")
	})
	t.Run("not retried", func(t *testing.T) {
		s, direct, p := throughProxy(t, 1)
		ctx := ctxFor(t)
		p.SetRule(onFirst(isPut, faultproxy.DropAfter()))
		err := s.Create(ctx, "k", []byte("mine"))
		require.Error(t, err)
		assert.NotErrorIs(t, err, sessionstore.ErrObjectExists)
		got, err := direct.Get(ctx, "k", 0, -1)
		require.NoError(t, err)
		assert.Equal(t, "mine", string(got), "applied without the caller hearing of it")
	})
}

// TestPutAnswerLost: a Put is the same when sent again, so the client's
// retry makes a lost answer a success.
func TestPutAnswerLost(t *testing.T) {
	s, direct, p := throughProxy(t, 3)
	ctx := ctxFor(t)
	p.SetRule(onFirst(isPut, faultproxy.DropAfter()))
	require.NoError(t, s.Put(ctx, "k", []byte("v")))
	got, err := direct.Get(ctx, "k", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "v", string(got))
	assert.Equal(t, 2, p.Requests())
}

// TestTruncatedGet: a body cut short is an error (or, retried, the whole
// object), never a short result.
func TestTruncatedGet(t *testing.T) {
	data := []byte(strings.Repeat("sessionstore ", 10_000))
	for _, tc := range []struct {
		name           string
		offset, length int64
	}{
		{"whole", 0, -1},
		{"ranged", 1000, 50_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, direct, p := throughProxy(t, 1)
			ctx := ctxFor(t)
			require.NoError(t, direct.Put(ctx, "k", data))
			p.SetRule(onFirst(isGet, faultproxy.Truncate(100)))
			got, err := s.Get(ctx, "k", tc.offset, tc.length)
			require.Error(t, err, "got %d bytes", len(got))
			assert.Nil(t, got)
			assert.Contains(t, err.Error(), "remote: get k:")

			want := data[tc.offset:]
			if tc.length >= 0 {
				want = want[:tc.length]
			}
			got, err = s.Get(ctx, "k", tc.offset, tc.length)
			require.NoError(t, err, "the next Get is not cut")
			assert.Equal(t, string(want), string(got))
		})
	}
}

// TestSlowServerTimesOut: a call waits for the answer until its context
// ends, and then fails; the server may still apply the write.
func TestSlowServerTimesOut(t *testing.T) {
	s, direct, p := throughProxy(t, 1)
	p.SetRule(func(_ int, r *http.Request) faultproxy.Fault {
		if isPut(r) {
			return faultproxy.Delay(2 * time.Second)
		}
		return faultproxy.Pass()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := s.Put(ctx, "k", []byte("v"))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 1500*time.Millisecond, "the call gives up with its context")

	// A delay within the deadline is only slower.
	p.SetRule(func(_ int, r *http.Request) faultproxy.Fault {
		if isGet(r) {
			return faultproxy.Delay(100 * time.Millisecond)
		}
		return faultproxy.Pass()
	})
	ctx2 := ctxFor(t)
	require.NoError(t, direct.Put(ctx2, "k2", []byte("w")))
	start = time.Now()
	got, err := s.Get(ctx2, "k2", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "w", string(got))
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)
}
