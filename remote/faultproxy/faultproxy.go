// Package faultproxy is an HTTP reverse proxy on the loopback interface
// for network fault tests: it stands between a client and a server (such
// as s3test's) and, request by request, passes a request on, delays it,
// answers it with an error itself, drops the connection before or after
// the server handled it, or cuts the response body short.
//
// A Rule, which a test can change at any time, decides each request's
// Fault from its number (1 for the proxy's first request) and the request:
//
//	p := faultproxy.Start(t, srv.Endpoint)
//	p.SetRule(func(n int, r *http.Request) faultproxy.Fault {
//		if r.Method == http.MethodPut {
//			return faultproxy.DropAfter() // the server stores it, the client never hears
//		}
//		return faultproxy.Pass()
//	})
//
// The proxy keeps the request's Host header, so a client's signature over
// it (S3's SigV4) still holds at the server.
package faultproxy

import (
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Kind is what the proxy does with a request.
type Kind int

const (
	// KindPass forwards the request and the whole response.
	KindPass Kind = iota
	// KindError answers the request itself with an S3-style XML error
	// (Fault.Status, Fault.Code), without forwarding it.
	KindError
	// KindDropBefore closes the client's connection (with a TCP reset)
	// without forwarding the request or answering it.
	KindDropBefore
	// KindDropAfter forwards the request, reads the server's whole
	// response (the server has handled the request), and closes the
	// client's connection (with a TCP reset) without answering.
	KindDropAfter
	// KindTruncate forwards the request and answers with the server's
	// status and headers (Content-Length included) but only the first
	// Fault.Keep bytes of its body, then closes the connection.
	KindTruncate
)

func (k Kind) String() string {
	switch k {
	case KindPass:
		return "pass"
	case KindError:
		return "error"
	case KindDropBefore:
		return "drop-before"
	case KindDropAfter:
		return "drop-after"
	case KindTruncate:
		return "truncate"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Fault is what the proxy does with one request: it waits Delay first
// (giving up if the client does), then acts as Kind says.
type Fault struct {
	Kind  Kind
	Delay time.Duration
	// Status and Code are KindError's HTTP status (500 if 0) and S3 error
	// code ("InternalError" if empty).
	Status int
	Code   string
	// Keep is how many bytes of the body KindTruncate sends.
	Keep int64
}

// Pass forwards the request and the whole response.
func Pass() Fault { return Fault{Kind: KindPass} }

// Delay forwards the request after d.
func Delay(d time.Duration) Fault { return Fault{Kind: KindPass, Delay: d} }

// Error500 answers with 500 InternalError, as S3 does, without forwarding.
func Error500() Fault {
	return Fault{Kind: KindError, Status: http.StatusInternalServerError, Code: "InternalError"}
}

// Error answers with status and the S3 error code, without forwarding.
func Error(status int, code string) Fault { return Fault{Kind: KindError, Status: status, Code: code} }

// DropBefore closes the connection without forwarding the request.
func DropBefore() Fault { return Fault{Kind: KindDropBefore} }

// DropAfter forwards the request, so that the server handles it, and
// closes the connection without answering.
func DropAfter() Fault { return Fault{Kind: KindDropAfter} }

// Truncate forwards the request and sends only the first keep bytes of
// the response body.
func Truncate(keep int64) Fault { return Fault{Kind: KindTruncate, Keep: keep} }

func (f Fault) String() string {
	s := f.Kind.String()
	switch f.Kind {
	case KindError:
		s += fmt.Sprintf(" %d %s", f.status(), f.code())
	case KindTruncate:
		s += fmt.Sprintf(" after %d bytes", f.Keep)
	}
	if f.Delay > 0 {
		s += fmt.Sprintf(" after %v", f.Delay)
	}
	return s
}

func (f Fault) status() int {
	if f.Status == 0 {
		return http.StatusInternalServerError
	}
	return f.Status
}

func (f Fault) code() string {
	if f.Code == "" {
		return "InternalError"
	}
	return f.Code
}

// Rule decides the fault of request number n (1 for the proxy's first).
// It must not read r's body. It may be called from many goroutines at
// once.
type Rule func(n int, r *http.Request) Fault

// Entry records one request the proxy handled.
type Entry struct {
	N      int
	Method string
	// Path is the request's path and query, as the client sent it.
	Path  string
	Fault Fault
	// Status is the server's status for a forwarded request (0 if it was
	// not forwarded, or the server could not be reached).
	Status int
	// Err is why forwarding failed, if it did.
	Err error
}

// Proxy is a running fault proxy.
type Proxy struct {
	target    *url.URL
	transport *http.Transport
	server    *http.Server
	listener  net.Listener
	url       string

	mu   sync.Mutex
	rule Rule
	n    int
	log  []*Entry
	done chan struct{}
}

// New starts a proxy on 127.0.0.1 in front of target (a base URL such as
// http://127.0.0.1:7070), passing every request until SetRule. The caller
// must Close it.
func New(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("faultproxy: target %q: %w", target, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q is not an http(s) base URL", target)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("faultproxy: %w", err)
	}
	p := &Proxy{
		target: u,
		transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 64,
			IdleConnTimeout:     30 * time.Second,
			// Pass bodies on as they are: no gzip of the proxy's own.
			DisableCompression: true,
		},
		listener: l,
		url:      "http://" + l.Addr().String(),
		done:     make(chan struct{}),
	}
	p.server = &http.Server{Handler: p, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		defer close(p.done)
		_ = p.server.Serve(l)
	}()
	return p, nil
}

// Start starts a proxy in front of target for tb, which closes it when tb
// ends.
func Start(tb testing.TB, target string) *Proxy {
	tb.Helper()
	p, err := New(target)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// URL returns the proxy's base URL, http://127.0.0.1:PORT.
func (p *Proxy) URL() string { return p.url }

// SetRule makes rule decide the faults of the requests from now on; nil
// passes every request.
func (p *Proxy) SetRule(rule Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rule = rule
}

// Requests returns how many requests the proxy has received.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

// Log returns a record of every request the proxy has received, in the
// order it received them. A request's Status is there before the client
// gets any of the answer, and before the connection is dropped.
func (p *Proxy) Log() []Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Entry, len(p.log))
	for i, e := range p.log {
		out[i] = *e
	}
	return out
}

// Close stops the proxy and closes every connection through it.
func (p *Proxy) Close() error {
	err := p.server.Close()
	<-p.done
	p.transport.CloseIdleConnections()
	return err
}

// next numbers a request, picks its fault and logs it.
func (p *Proxy) next(r *http.Request) *Entry {
	p.mu.Lock()
	p.n++
	e := &Entry{N: p.n, Method: r.Method, Path: r.URL.RequestURI()}
	rule := p.rule
	p.log = append(p.log, e)
	p.mu.Unlock()
	f := Pass()
	if rule != nil {
		f = rule(e.N, r)
	}
	p.update(func() { e.Fault = f })
	return e
}

// update changes a logged entry.
func (p *Proxy) update(change func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	change()
}

// ServeHTTP handles one request as its fault says.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	e := p.next(r)
	n, f := e.N, e.Fault

	if f.Delay > 0 {
		t := time.NewTimer(f.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			p.update(func() { e.Err = r.Context().Err() })
			return
		}
	}

	switch f.Kind {
	case KindError:
		writeS3Error(w, r, n, f)
		return
	case KindDropBefore:
		drop(w, true)
		return
	}

	resp, err := p.forward(r)
	if err != nil {
		p.update(func() { e.Err = err })
		http.Error(w, "faultproxy: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	p.update(func() { e.Status = resp.StatusCode })

	if f.Kind == KindDropAfter {
		// The server has answered, so it has handled the request; read
		// the rest so that it is done with it too.
		_, _ = io.Copy(io.Discard, resp.Body)
		drop(w, true)
		return
	}

	h := w.Header()
	for k, vs := range resp.Header {
		if !hopByHop(k) {
			h[k] = vs
		}
	}
	w.WriteHeader(resp.StatusCode)
	if f.Kind == KindTruncate {
		_, _ = io.CopyN(w, resp.Body, f.Keep)
		drop(w, false)
		return
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		p.update(func() { e.Err = err })
	}
}

// forward sends r to the target, keeping its Host header, and returns the
// server's response.
func (p *Proxy) forward(r *http.Request) (*http.Response, error) {
	out := r.Clone(context.WithoutCancel(r.Context()))
	out.RequestURI = ""
	out.URL.Scheme = p.target.Scheme
	out.URL.Host = p.target.Host
	out.Host = r.Host
	if r.ContentLength == 0 {
		out.Body = nil
	}
	for k := range out.Header {
		if hopByHop(k) {
			out.Header.Del(k)
		}
	}
	// A client that goes away mid-request does not stop the server's
	// handling of it, as on a real network: the request goes on unless
	// the body can no longer be read.
	return p.transport.RoundTrip(out)
}

// drop closes the client's connection without finishing the response:
// with a reset, or (for a truncated body, which the client is to read up
// to the cut) in order, after sending whatever the handler wrote so far.
func drop(w http.ResponseWriter, reset bool) {
	rc := http.NewResponseController(w)
	if !reset {
		// Hijack sends the header written, but not the body bytes the
		// response still buffers.
		_ = rc.Flush()
	}
	conn, buf, err := rc.Hijack()
	if err != nil {
		// Without a connection to take over, abort the response: the
		// server closes the connection.
		panic(http.ErrAbortHandler)
	}
	_ = buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// writeS3Error answers with an S3-style XML error document.
func writeS3Error(w http.ResponseWriter, r *http.Request, n int, f Fault) {
	body := fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s</Message><Resource>%s</Resource><RequestId>faultproxy-%d</RequestId></Error>`,
		html.EscapeString(f.code()), html.EscapeString("faultproxy: injected "+f.String()), html.EscapeString(r.URL.Path), n)
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Amz-Request-Id", fmt.Sprintf("faultproxy-%d", n))
	w.WriteHeader(f.status())
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, body)
	}
}

// hopByHop reports whether header k belongs to one connection and is not
// passed on.
func hopByHop(k string) bool {
	switch strings.ToLower(k) {
	case "connection", "keep-alive", "proxy-connection", "proxy-authenticate",
		"proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade":
		return true
	}
	return false
}
