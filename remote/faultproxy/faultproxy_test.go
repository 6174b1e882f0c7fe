package faultproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/remote/faultproxy"
)

// backend is a plain server that counts the requests it handled, keeps
// the last body it was sent, and answers GET /data with 1,000 bytes.
type backend struct {
	*httptest.Server
	handled  atomic.Int64
	mu       sync.Mutex
	lastBody string
	lastHost string
}

var payload = strings.Repeat("0123456789", 100)

func newBackend(t *testing.T) *backend {
	b := &backend{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.lastBody, b.lastHost = string(body), r.Host
		b.mu.Unlock()
		b.handled.Add(1)
		w.Header().Set("X-Backend", "yes")
		if r.URL.Path == "/data" {
			w.Header().Set("Content-Length", "1000")
			_, _ = io.WriteString(w, payload)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "stored "+string(body))
	}))
	t.Cleanup(b.Close)
	return b
}

func (b *backend) last() (body, host string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lastBody, b.lastHost
}

// client sends one request at a time, on a new connection each, and does
// not retry.
func client() *http.Client {
	return &http.Client{
		Transport: &http.Transport{DisableKeepAlives: true},
		Timeout:   10 * time.Second,
	}
}

func TestPass(t *testing.T) {
	b := newBackend(t)
	p := faultproxy.Start(t, b.URL)
	resp, err := client().Get(p.URL() + "/data?x=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, payload, string(body))
	assert.Equal(t, "yes", resp.Header.Get("X-Backend"))
	assert.EqualValues(t, 1, b.handled.Load())
	assert.Equal(t, 1, p.Requests())
	log := p.Log()
	require.Len(t, log, 1)
	assert.Equal(t, faultproxy.Entry{N: 1, Method: "GET", Path: "/data?x=1", Fault: faultproxy.Pass(), Status: 200}, log[0])
}

// TestPassKeepsHostAndBody: the server sees the Host the client sent (a
// signature over it holds) and the request body.
func TestPassKeepsHostAndBody(t *testing.T) {
	b := newBackend(t)
	p := faultproxy.Start(t, b.URL)
	resp, err := client().Post(p.URL()+"/obj", "text/plain", strings.NewReader("hello"))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, "stored hello", string(body))
	gotBody, gotHost := b.last()
	assert.Equal(t, "hello", gotBody)
	assert.Equal(t, strings.TrimPrefix(p.URL(), "http://"), gotHost)
}

func TestDelay(t *testing.T) {
	b := newBackend(t)
	p := faultproxy.Start(t, b.URL)
	p.SetRule(func(n int, r *http.Request) faultproxy.Fault {
		if n == 2 {
			return faultproxy.Delay(300 * time.Millisecond)
		}
		return faultproxy.Pass()
	})
	for n := 1; n <= 2; n++ {
		start := time.Now()
		resp, err := client().Get(p.URL() + "/data")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		took := time.Since(start)
		assert.Equal(t, payload, string(body))
		if n == 2 {
			assert.GreaterOrEqual(t, took, 300*time.Millisecond, "the delayed request")
		} else {
			assert.Less(t, took, 300*time.Millisecond, "the request before it")
		}
	}
	assert.EqualValues(t, 2, b.handled.Load())
}

// TestDelayGivesUpWithClient: a client that stops waiting during the delay
// stops the request, which never reaches the server.
func TestDelayGivesUpWithClient(t *testing.T) {
	b := newBackend(t)
	p := faultproxy.Start(t, b.URL)
	p.SetRule(func(int, *http.Request) faultproxy.Fault { return faultproxy.Delay(time.Minute) })
	c := client()
	c.Timeout = 100 * time.Millisecond
	_, err := c.Get(p.URL() + "/data")
	require.Error(t, err)
	assert.Eventually(t, func() bool {
		log := p.Log()
		return len(log) == 1 && log[0].Err != nil
	}, 5*time.Second, 10*time.Millisecond, "the proxy gives up the request")
	assert.EqualValues(t, 0, b.handled.Load())
}

func TestError500(t *testing.T) {
	b := newBackend(t)
	p := faultproxy.Start(t, b.URL)
	p.SetRule(func(int, *http.Request) faultproxy.Fault { return faultproxy.Error500() })
	resp, err := client().Post(p.URL()+"/bucket/key", "text/plain", strings.NewReader("x"))
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusInternalServerError, resp.StatusCode)
	assert.Equal(t, "application/xml", resp.Header.Get("Content-Type"))
	assert.Contains(t, string(body), "<Error><Code>InternalError</Code>")
	assert.Contains(t, string(body), "<Resource>/bucket/key</Resource>")
	assert.EqualValues(t, 0, b.handled.Load(), "an injected error is not forwarded")

	p.SetRule(func(int, *http.Request) faultproxy.Fault {
		return faultproxy.Error(http.StatusServiceUnavailable, "SlowDown")
	})
	resp, err = client().Get(p.URL() + "/data")
	require.NoError(t, err)
	body, err = io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	assert.Contains(t, string(body), "<Code>SlowDown</Code>")
	assert.EqualValues(t, 0, b.handled.Load())
}

func TestDropBefore(t *testing.T) {
	b := newBackend(t)
	p := faultproxy.Start(t, b.URL)
	p.SetRule(func(int, *http.Request) faultproxy.Fault { return faultproxy.DropBefore() })
	_, err := client().Post(p.URL()+"/obj", "text/plain", strings.NewReader("lost"))
	require.Error(t, err, "the client gets no answer")
	assert.EqualValues(t, 0, b.handled.Load(), "the server never saw the request")
}

// TestDropAfter: the server handled the request, the client heard nothing.
func TestDropAfter(t *testing.T) {
	b := newBackend(t)
	p := faultproxy.Start(t, b.URL)
	p.SetRule(func(int, *http.Request) faultproxy.Fault { return faultproxy.DropAfter() })
	_, err := client().Post(p.URL()+"/obj", "text/plain", strings.NewReader("applied"))
	require.Error(t, err, "the client gets no answer")
	assert.EqualValues(t, 1, b.handled.Load(), "the server handled the request")
	gotBody, _ := b.last()
	assert.Equal(t, "applied", gotBody)
	log := p.Log()
	require.Len(t, log, 1)
	assert.Equal(t, http.StatusCreated, log[0].Status, "the answer the client never got")
}

// TestTruncate: the client gets the status and Content-Length, and a body
// cut short, which it can tell from the length.
func TestTruncate(t *testing.T) {
	b := newBackend(t)
	p := faultproxy.Start(t, b.URL)
	p.SetRule(func(int, *http.Request) faultproxy.Fault { return faultproxy.Truncate(100) })
	resp, err := client().Get(p.URL() + "/data")
	require.NoError(t, err)
	defer resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.EqualValues(t, 1000, resp.ContentLength)
	body, err := io.ReadAll(resp.Body)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
	assert.Equal(t, payload[:100], string(body))
	assert.EqualValues(t, 1, b.handled.Load())
}

// TestRuleSeesEachRequest: the rule gets each request's number and can be
// changed between requests; many at once are counted once each.
func TestRuleSeesEachRequest(t *testing.T) {
	b := newBackend(t)
	p := faultproxy.Start(t, b.URL)
	var seen sync.Map
	p.SetRule(func(n int, r *http.Request) faultproxy.Fault {
		seen.Store(n, r.Method)
		if n%2 == 0 {
			return faultproxy.Error500()
		}
		return faultproxy.Pass()
	})
	const requests = 20
	var wg sync.WaitGroup
	var ok, failed atomic.Int64
	for range requests {
		wg.Go(func() {
			resp, err := client().Get(p.URL() + "/data")
			if !assert.NoError(t, err) {
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusInternalServerError:
				failed.Add(1)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, requests, p.Requests())
	assert.EqualValues(t, requests/2, ok.Load())
	assert.EqualValues(t, requests/2, failed.Load())
	assert.EqualValues(t, requests/2, b.handled.Load())
	for n := 1; n <= requests; n++ {
		m, found := seen.Load(n)
		assert.True(t, found, "request %d", n)
		assert.Equal(t, "GET", m)
	}

	p.SetRule(nil)
	resp, err := client().Get(p.URL() + "/data")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "nil passes every request")
}
