package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// startServe runs serve on a free loopback port and returns the URL it
// printed, and a channel that gets its exit status.
func startServe(t *testing.T, ctx context.Context, root string) (string, <-chan int) {
	t.Helper()
	pr, pw := io.Pipe()
	var stderr strings.Builder
	c := &cmdEnv{name: "serve", stdout: bufio.NewWriter(pw), stderr: &stderr}
	done := make(chan int, 1)
	go func() {
		status := cmdServe(ctx, c, []string{"-addr", "127.0.0.1:0", "-poll", "50ms", root})
		c.stdout.Flush()
		pw.Close()
		done <- status
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err, "serve printed no URL; stderr: %s", stderr.String())
	go io.Copy(io.Discard, pr)
	m := regexp.MustCompile(`^serving (.+) at (http://127\.0\.0\.1:\d+/) \(Ctrl-C stops\)\n$`).FindStringSubmatch(line)
	require.NotNil(t, m, "line %q", line)
	assert.Equal(t, root, m[1])
	return m[2], done
}

func TestServe(t *testing.T) {
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url, done := startServe(t, ctx, f.root)

	resp, err := http.Get(url + "api/sessions")
	require.NoError(t, err)
	var list struct {
		Sessions []struct {
			Name   string `json:"name"`
			Events int    `json:"events"`
		} `json:"sessions"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	resp.Body.Close()
	require.Len(t, list.Sessions, 2)
	assert.Equal(t, "empty", list.Sessions[0].Name, "newest first")
	assert.Equal(t, "inspect me", list.Sessions[1].Name)
	assert.Equal(t, len(f.all), list.Sessions[1].Events)

	resp, err = http.Get(url)
	require.NoError(t, err)
	page, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Contains(t, string(page), "/static/app.js")

	// An open live stream does not hold the shutdown up.
	streamCtx, stopStream := context.WithCancel(context.Background())
	defer stopStream()
	req, err := http.NewRequestWithContext(streamCtx, "GET", url+"api/sessions/"+f.session.ID.String()+"/live", nil)
	require.NoError(t, err)
	stream, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer stream.Body.Close()
	require.Equal(t, "text/event-stream", stream.Header.Get("Content-Type"))

	cancel()
	select {
	case status := <-done:
		assert.Equal(t, exitOK, status)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop when its context ended")
	}
	_, err = http.Get(url)
	assert.Error(t, err, "the server should be gone")
}

func TestServeStopsOnSIGINT(t *testing.T) {
	f := newFixture(t)
	url, done := startServe(t, context.Background(), f.root)
	resp, err := http.Get(url + "api/sessions")
	require.NoError(t, err)
	resp.Body.Close()
	require.NoError(t, syscall.Kill(syscall.Getpid(), syscall.SIGINT))
	select {
	case status := <-done:
		assert.Equal(t, exitOK, status)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not stop on SIGINT")
	}
}

func TestServeRefuses(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct {
		args   []string
		status int
		want   string
	}{
		{[]string{"serve", "-addr", "0.0.0.0:8080", f.root}, exitUsage, `-addr "0.0.0.0:8080" is not a loopback address`},
		{[]string{"serve", "-addr", ":8080", f.root}, exitUsage, `-addr ":8080" is not a loopback address`},
		{[]string{"serve", "-addr", "example.com:80", f.root}, exitUsage, "not a loopback address"},
		{[]string{"serve", "-addr", "[::]:80", f.root}, exitUsage, "not a loopback address"},
		{[]string{"serve", "-addr", "127.0.0.1", f.root}, exitUsage, `bad -addr "127.0.0.1"`},
		{[]string{"serve"}, exitUsage, "missing arguments"},
		{[]string{"serve", f.root, "extra"}, exitUsage, "too many arguments"},
		{[]string{"serve", "-addr", "127.0.0.1:0", t.TempDir() + "/none"}, exitFail, "no store at"},
	} {
		status, stdout, stderr := runCmd(tc.args...)
		assert.Equal(t, tc.status, status, "args %q", tc.args)
		assert.Empty(t, stdout, "args %q", tc.args)
		assert.Contains(t, stderr, tc.want, "args %q", tc.args)
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0", "127.1.2.3:9"} {
		assert.NoError(t, checkLoopback(addr), addr)
	}
}
