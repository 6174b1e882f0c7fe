package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/sessionstore/sessionstore/cmd/web"
)

// defaultServeAddr is where serve listens unless -addr says otherwise.
const defaultServeAddr = "127.0.0.1:8080"

// cmdServe serves the web view of a root (package web) through a
// read-only store until ctx ends or the process gets SIGINT or SIGTERM.
// It listens on a loopback address only: the view has no authentication,
// and every session's transcript is readable through it.
func cmdServe(ctx context.Context, c *cmdEnv, args []string) int {
	fs := c.newFlags("[-addr host:port] [-poll d] <root>")
	addr := fs.String("addr", defaultServeAddr, "listen on `host:port`, a loopback address (127.0.0.1, [::1], localhost); port 0 picks a free one")
	poll := fs.Duration("poll", web.DefaultPollInterval, "how often an open page looks for new events (kept within 50ms..10s)")
	pos, status, ok := c.parseArgs(fs, args, 1, 1)
	if !ok {
		return status
	}
	if err := checkLoopback(*addr); err != nil {
		return c.usagef(fs, "%v", err)
	}
	s, err := c.openReadOnly(pos[0])
	if err != nil {
		return c.failf("%v", err)
	}
	defer s.Close()

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return c.failf("listen on %s: %v", *addr, err)
	}
	if err := checkListener(ln); err != nil {
		ln.Close()
		return c.failf("%v", err)
	}
	// Live streams end with the server's context, so Shutdown does not
	// wait for open pages.
	serveCtx, cancelServe := context.WithCancel(context.Background())
	defer cancelServe()
	srv := &http.Server{
		Handler:           web.New(s, web.Options{PollInterval: *poll}),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return serveCtx },
	}
	fmt.Fprintf(c.stdout, "serving %s at http://%s/ (Ctrl-C stops)\n", pos[0], ln.Addr())
	if err := c.stdout.Flush(); err != nil {
		ln.Close()
		return c.failf("write output: %v", err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return c.failf("serve: %v", err)
	case <-ctx.Done():
	}
	cancelServe()
	shutCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		srv.Close()
		return c.failf("stop the server: %v", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return c.failf("serve: %v", err)
	}
	return exitOK
}

// checkLoopback refuses an address that is not a loopback one: an empty
// host (every interface), another IP, or a host name other than localhost
// (a name is resolved when listening: what it names may change; localhost
// is resolved too, and checkListener checks what it named).
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad -addr %q: %v", addr, err)
	}
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-addr %q is not a loopback address: serve listens on 127.0.0.1, [::1] or localhost only, since the view has no authentication (put a proxy that authenticates in front of it to share it)", addr)
}

// checkListener refuses a listener whose address is not a loopback one:
// localhost resolved (through /etc/hosts or DNS) to another address.
func checkListener(ln net.Listener) error {
	if a, ok := ln.Addr().(*net.TCPAddr); ok && a.IP.IsLoopback() {
		return nil
	}
	return fmt.Errorf("-addr named %s, not a loopback address: serve listens on loopback addresses only", ln.Addr())
}
