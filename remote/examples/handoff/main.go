// Command handoff shows worker processes handing one session off through
// an object store: a local S3 server (versitygw, on loopback), the only
// thing the workers share. Each worker is a separate process with its own
// empty directory, as on separate machines.
//
//  1. Handoff: worker 1 creates the session, appends a few events and
//     closes its Store, which releases the session; worker 2 opens it at
//     once, loads the history from the bucket and goes on.
//  2. Takeover: worker 3 appends and is killed without closing, so the
//     session stays held; worker 4 waits (Options.WaitForLock) until the
//     lease runs out (Options.LeaseTime, 2s here) and takes it over, with
//     every event worker 3 had acknowledged.
//
// It ends by listing the session's log in the bucket, object by object.
// It needs the versitygw binary (see remote/s3test):
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//	go run ./examples/handoff    # from remote/
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

// leaseTime is every worker's Options.LeaseTime: how long a session's
// newest log object must be idle before another Store may take it over.
// The default is 30s; 2s keeps the example short (S3 times objects to the
// second, so less would be too coarse).
const leaseTime = 2 * time.Second

// sessionName is how workers 2 to 4 find the session: List reads the
// bucket.
const sessionName = "fix the build"

// readyLine is what worker 3 prints once it holds the session with an
// acknowledged event, to be killed.
const readyLine = "holding the session; waiting to be killed"

func main() {
	os.Exit(mainStatus(os.Args[1:], os.Stdout, os.Stderr))
}

// mainStatus is main: it runs the example, or with the arguments
// "worker N DIR" one of its workers, and returns the exit status.
func mainStatus(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "worker" {
		return workerMain(args[1:], stderr)
	}
	srv, err := s3test.Launch()
	if errors.Is(err, s3test.ErrNoBinary) {
		fmt.Fprintf(stderr, "handoff needs the versitygw S3 server: %v\ninstall it with\n\n\tgo install github.com/versity/versitygw/cmd/versitygw@%s\n", err, s3test.Version)
		return 2
	}
	if err != nil {
		fmt.Fprintln(stderr, "handoff:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	err = run(ctx, stdout, srv)
	cancel()
	if cerr := srv.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintln(stderr, "handoff:", err)
		return 1
	}
	return 0
}

// run shows the handoff and the takeover on srv, writing to out.
func run(ctx context.Context, out io.Writer, srv *s3test.Server) error {
	w := &lockedWriter{w: out}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	base, err := os.MkdirTemp("", "handoff-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(base)
	env := append(os.Environ(),
		"HANDOFF_ENDPOINT="+srv.Endpoint, "HANDOFF_REGION="+srv.Region, "HANDOFF_BUCKET="+srv.Bucket,
		"HANDOFF_ACCESS_KEY="+srv.AccessKey, "HANDOFF_SECRET_KEY="+srv.SecretKey)
	dirs := map[int]string{}
	start := func(n int) (*child, error) {
		dirs[n] = filepath.Join(base, fmt.Sprintf("worker-%d", n))
		return startWorker(ctx, w, exe, env, n, dirs[n])
	}
	runWorker := func(n int) error {
		c, err := start(n)
		if err != nil {
			return err
		}
		return c.wait()
	}

	w.printf("S3 server: versitygw at %s, bucket %s. Each worker is a process with\n", srv.Endpoint, srv.Bucket)
	w.printf("its own empty directory; the bucket is all they share.\n")

	w.printf("\n1. Handoff: worker 1 writes and closes, worker 2 goes on.\n")
	if err := runWorker(1); err != nil {
		return err
	}
	if err := runWorker(2); err != nil {
		return err
	}

	w.printf("\n2. Takeover: worker 3 dies holding the session, worker 4 takes it over.\n")
	c, err := start(3)
	if err != nil {
		return err
	}
	select {
	case <-c.ready:
	case err := <-c.done:
		return fmt.Errorf("worker 3 ended before holding the session: %v: %s", err, bytes.TrimSpace(c.stderr.Bytes()))
	}
	if err := c.cmd.Process.Kill(); err != nil {
		return err
	}
	<-c.done
	w.printf("killed worker 3 (SIGKILL): no Close, so the session stays held by its lease.\n")
	if err := runWorker(4); err != nil {
		return err
	}

	w.printf("\nThe session's log in the bucket, one immutable object per step:\n")
	return printLog(ctx, w, srv, dirs)
}

// child is a running worker process.
type child struct {
	cmd    *exec.Cmd
	ready  chan struct{} // closed when it prints readyLine
	done   chan error    // its exit, once its output is copied
	stderr bytes.Buffer  // where it tells why it failed
}

// startWorker runs "handoff worker n dir", copying its output to w, each
// line prefixed with its name.
func startWorker(ctx context.Context, w *lockedWriter, exe string, env []string, n int, dir string) (*child, error) {
	cmd := exec.CommandContext(ctx, exe, "worker", strconv.Itoa(n), dir)
	cmd.Env = env
	c := &child{cmd: cmd, ready: make(chan struct{}), done: make(chan error, 1)}
	cmd.Stderr = &c.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			w.printf("  worker %d | %s\n", n, sc.Text())
			if sc.Text() == readyLine {
				close(c.ready)
			}
		}
		c.done <- cmd.Wait()
	}()
	return c, nil
}

func (c *child) wait() error {
	if err := <-c.done; err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(c.cmd.Args[1:], " "), err, bytes.TrimSpace(c.stderr.Bytes()))
	}
	return nil
}

// workerMain is a worker process: "worker N DIR", with the bucket in the
// environment. It returns the exit status.
func workerMain(args []string, stderr io.Writer) int {
	n := 0
	if len(args) == 2 {
		n, _ = strconv.Atoi(args[0])
	}
	if n < 1 || n > 4 {
		fmt.Fprintln(stderr, "usage: handoff worker 1|2|3|4 DIR")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := work(ctx, n, args[1]); err != nil {
		fmt.Fprintf(stderr, "worker %d: %v\n", n, err)
		return 1
	}
	return 0
}

// work is worker n's part, with its Store in dir.
func work(ctx context.Context, n int, dir string) error {
	bucket, err := remote.OpenS3(ctx, remote.S3Config{
		Endpoint:  os.Getenv("HANDOFF_ENDPOINT"),
		Region:    os.Getenv("HANDOFF_REGION"),
		Bucket:    os.Getenv("HANDOFF_BUCKET"),
		AccessKey: os.Getenv("HANDOFF_ACCESS_KEY"),
		SecretKey: os.Getenv("HANDOFF_SECRET_KEY"),
	})
	if err != nil {
		return err
	}
	defer bucket.Close()
	opts := &sessionstore.Options{
		Remote:    remote.New(bucket), // the system of record; dir is its cache
		LeaseTime: leaseTime,
		// Only worker 4 expects to find the session held, and waits.
		WaitForLock: n == 4,
	}
	store, err := sessionstore.Open(dir, opts)
	if err != nil {
		return err
	}
	defer store.Close() // worker 3 never gets there
	fmt.Printf("directory %s (empty)\n", dir)

	if n == 1 {
		meta, err := store.Create(ctx, sessionstore.Meta{Name: sessionName})
		if err != nil {
			return err
		}
		fmt.Printf("created session %q (%s)\n", meta.Name, meta.ID)
		if err := appendAll(ctx, store, meta,
			sessionstore.UserText("The build fails. Can you fix it?"),
			sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "call-1", Name: "run_tests"}),
			sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "call-1", Output: "FAIL: TestParse (parse.go:42: unexpected EOF)"}),
			sessionstore.AssistantText("parse.go reads past the end of its input; I will fix the bounds check."),
		); err != nil {
			return err
		}
		fmt.Println("each Append returned once its log object was stored in the bucket")
		return closeStore(store)
	}

	meta, err := find(ctx, store)
	if err != nil {
		return err
	}
	fmt.Printf("found session %q in the bucket (List reads the bucket)\n", meta.Name)
	switch n {
	case 2:
		// Worker 1 released the session: the first call that needs it
		// (this Load) takes it at once, with no WaitForLock.
		if err := printHistory(ctx, store, meta, "opened it at once, since worker 1 released it; history from the bucket:"); err != nil {
			return err
		}
		if err := appendAll(ctx, store, meta,
			sessionstore.UserText("Thanks. Run the linter too."),
		); err != nil {
			return err
		}
		return closeStore(store)
	case 3:
		// An acknowledged tool call, then the process dies before the
		// tool's result: the crash a harness must expect.
		if err := appendAll(ctx, store, meta,
			sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "call-2", Name: "run_linter"}),
		); err != nil {
			return err
		}
		fmt.Println(readyLine)
		time.Sleep(time.Minute) // killed long before this ends
		return errors.New("was not killed")
	default: // 4
		fmt.Printf("worker 3 never released it: WaitForLock waits until the session's newest log\n")
		fmt.Printf("object is %v old on the bucket's clock (without WaitForLock: ErrLocked until then)\n", leaseTime)
		start := time.Now()
		// The first call that needs the session waits for it.
		if _, err := store.Head(ctx, meta.ID); err != nil {
			return err
		}
		fmt.Printf("took the session over after %.1fs; had worker 3 lived, its next write would get ErrFenced\n", time.Since(start).Seconds())
		if err := printHistory(ctx, store, meta, "history, with every event worker 3 acknowledged:"); err != nil {
			return err
		}
		calls, err := store.InterruptedToolCalls(ctx, meta.ID)
		if err != nil {
			return err
		}
		for _, ev := range calls {
			c, err := ev.ToolCall()
			if err != nil {
				return err
			}
			fmt.Printf("tool call %s has no result: worker 3 died running it; the linter is read-only, so run it again\n", c.Name)
			if err := appendAll(ctx, store, meta,
				sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: c.CallID, Output: "no issues"}),
				sessionstore.AssistantText("Fixed the bounds check in parse.go; the tests and the linter pass."),
			); err != nil {
				return err
			}
		}
		return closeStore(store)
	}
}

// find returns the session named sessionName.
func find(ctx context.Context, store *sessionstore.Store) (sessionstore.Meta, error) {
	metas, err := store.List(ctx)
	if err != nil {
		return sessionstore.Meta{}, err
	}
	for _, m := range metas {
		if m.Name == sessionName {
			return m, nil
		}
	}
	return sessionstore.Meta{}, fmt.Errorf("no session %q in the bucket", sessionName)
}

func appendAll(ctx context.Context, store *sessionstore.Store, meta sessionstore.Meta, evs ...sessionstore.Event) error {
	for _, ev := range evs {
		got, err := store.Append(ctx, meta.ID, ev)
		if err != nil {
			return err
		}
		fmt.Printf("appended  %s\n", describe(got))
	}
	return nil
}

func printHistory(ctx context.Context, store *sessionstore.Store, meta sessionstore.Meta, title string) error {
	evs, err := store.Load(ctx, meta.ID)
	if err != nil {
		return err
	}
	fmt.Println(title)
	for i, ev := range evs {
		fmt.Printf("  %d. %s\n", i+1, describe(ev))
	}
	return nil
}

func closeStore(store *sessionstore.Store) error {
	if err := store.Close(); err != nil {
		return err
	}
	fmt.Println("closed the Store: it wrote a release marker, so the next worker need not wait")
	return nil
}

// describe is one line for an event: who, what, and its text.
func describe(ev sessionstore.Event) string {
	text := string(ev.Record)
	switch ev.Kind {
	case sessionstore.KindMessage:
		if m, err := ev.Message(); err == nil {
			text = m.Content
		}
	case sessionstore.KindToolCall:
		if c, err := ev.ToolCall(); err == nil {
			text = c.Name + "()"
		}
	case sessionstore.KindToolResult:
		if r, err := ev.ToolResult(); err == nil {
			text = r.Output
		}
	}
	return fmt.Sprintf("%-9s %-11s %s", ev.Role, ev.Kind, text)
}

// printLog lists the session's log objects with their kind and the
// worker whose Store wrote each: its header line names the Store, whose
// id is the holder.id file in the worker's directory.
func printLog(ctx context.Context, w *lockedWriter, srv *s3test.Server, dirs map[int]string) error {
	workers := map[string]int{}
	for n, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "holder.id"))
		if err != nil {
			return err
		}
		workers[strings.TrimSpace(string(b))] = n
	}
	bucket, err := remote.OpenS3(ctx, srv.Config(srv.Bucket))
	if err != nil {
		return err
	}
	defer bucket.Close()
	obj := remote.New(bucket)
	objs, err := obj.List(ctx, "sessions/", 0)
	if err != nil {
		return err
	}
	// Log keys count down from the largest uint64 (newest first in a
	// listing); print the log oldest first, by number.
	slices.Reverse(objs)
	for _, o := range objs {
		if !strings.Contains(o.Key, "/log/") {
			continue
		}
		b, err := obj.Get(ctx, o.Key, 0, -1)
		if err != nil {
			return err
		}
		header, _, _ := bytes.Cut(b, []byte("\n"))
		var h struct{ Kind, Store string }
		if err := json.Unmarshal(header, &h); err != nil {
			return fmt.Errorf("%s: %w", o.Key, err)
		}
		_, num, _ := strings.Cut(o.Key, "/log/")
		inv, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return fmt.Errorf("%s: %w", o.Key, err)
		}
		w.printf("  log object %-3d %-8s worker %d\n", uint64(math.MaxUint64)-inv, h.Kind, workers[h.Store])
	}
	w.printf("create, open and release are markers; data holds a commit group's events; meta a\n")
	w.printf("session.json (Close records the time of the last append). Worker 3 wrote no release:\n")
	w.printf("worker 4's open marker follows its data once the lease ran out, and its voids take the\n")
	w.printf("numbers worker 3's Creates still in flight could have taken (none were, here).\n")
	return nil
}

// lockedWriter serializes the lines of the workers and of run.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}
