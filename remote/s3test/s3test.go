// Package s3test runs a real S3 server for tests: versitygw (v1.8.0, its
// posix backend) listening on the loopback interface only, keeping its
// buckets in a temporary directory.
//
// The binary is found as $SESSIONSTORE_VERSITYGW, else versitygw in
// $(go env GOBIN) or $(go env GOPATH)/bin, else on $PATH; install it with
//
//	go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
//
// Without it, Start skips the test, or fails it under CI (the environment
// variable CI set to anything but "", "0" or "false").
//
// A test starts a server of its own:
//
//	srv := s3test.Start(t)
//	store := srv.Store(t) // the store kept in a new, empty bucket
//
// or a package shares one, started on first use, through Shared and Main:
//
//	func TestMain(m *testing.M) { s3test.Main(m) }
//
//	func TestX(t *testing.T) { store := s3test.Shared(t).Store(t) }
//
// The server is killed when the test that started it ends (Shared's, when
// Main's tests end), even if the test panics, and with the test process
// however it ends: it runs in a process group of its own, and the kernel
// kills it when the thread that started it exits (Linux's parent-death
// signal), which is only when the test process exits.
package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"gocloud.dev/blob"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote"
)

// Version is the versitygw release these tests are written against, the
// one CI installs.
const Version = "v1.8.0"

// EnvBinary names the environment variable that gives the versitygw
// binary's path.
const EnvBinary = "SESSIONSTORE_VERSITYGW"

// ErrNoBinary is returned (wrapped) by Launch when no versitygw binary is
// found.
var ErrNoBinary = errors.New("s3test: no versitygw binary")

// Server is a running versitygw.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// AccessKey and SecretKey are the root user's credentials.
	AccessKey string
	SecretKey string
	// Region is the region the server signs for.
	Region string
	// Bucket is a bucket made at start, for tests that want one at hand;
	// NewBucket makes others.
	Bucket string
	// Dir is the directory the server keeps its buckets in, one
	// subdirectory each, an object a file under it.
	Dir string

	cmd     *exec.Cmd
	removeD bool // Close removes Dir
	log     *lockedBuffer
	exited  chan struct{} // closed when the process has been waited for
	release chan struct{} // closed to let the starting thread go
	buckets atomic.Int64
	close   sync.Once
	err     error
}

// Start starts a server for tb, which stops it when tb ends, and keeps its
// data under tb.TempDir(). Without a versitygw binary it skips tb, or
// fails it under CI.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, false)
}

// StartVersioned is Start for a server whose buckets can keep older
// versions of objects (versitygw's --versioning-dir); a bucket keeps them
// once its versioning is enabled (EnableVersioning).
func StartVersioned(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, true)
}

// EnableVersioning turns on versioning for bucket, on a server
// StartVersioned started.
func (s *Server) EnableVersioning(tb testing.TB, bucket string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.Client().PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
		Bucket:                  aws.String(bucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
	})
	if err != nil {
		tb.Fatalf("s3test: enable versioning of %s: %v", bucket, err)
	}
}

func start(tb testing.TB, versioned bool) *Server {
	tb.Helper()
	dir := tb.TempDir()
	s, err := launch(dir, false, versioned)
	if err != nil {
		Check(tb, err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("s3test: stopping versitygw: %v", err)
		}
	})
	return s
}

// Check ends tb if err, an error of Launch, is not nil: it skips tb when
// err is ErrNoBinary outside CI, and fails it otherwise.
func Check(tb testing.TB, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, ErrNoBinary) && !InCI() {
		tb.Skipf("%v; install it with go install github.com/versity/versitygw/cmd/versitygw@%s (under CI this fails)", err, Version)
	}
	if errors.Is(err, ErrNoBinary) {
		tb.Fatalf("%v: CI must run this test; install it with go install github.com/versity/versitygw/cmd/versitygw@%s, as .ci/run does", err, Version)
	}
	tb.Fatalf("s3test: %v", err)
}

// Launch starts a server outside of any test, keeping its data in a new
// temporary directory; the caller must Close it, which removes the
// directory. With no versitygw binary it returns an error matching
// ErrNoBinary.
func Launch() (*Server, error) {
	dir, err := os.MkdirTemp("", "s3test-")
	if err != nil {
		return nil, err
	}
	s, err := launch(dir, true, false)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

var shared struct {
	once sync.Once
	srv  *Server
	err  error
	used atomic.Bool // Main is in charge of stopping it
}

// Shared returns the package's shared server, started by the first call;
// Main stops it once the package's tests have run. Without a versitygw
// binary it skips tb, or fails it under CI. Tests that share a server
// keep apart by using a bucket each (Store, NewBucket).
func Shared(tb testing.TB) *Server {
	tb.Helper()
	if !shared.used.Load() {
		tb.Fatal("s3test.Shared needs the package's TestMain to call s3test.Main(m), which stops the server")
	}
	shared.once.Do(func() { shared.srv, shared.err = Launch() })
	Check(tb, shared.err)
	return shared.srv
}

// Main runs m's tests and exits with their status, stopping the server
// Shared started, if any. Call it from TestMain.
func Main(m *testing.M) {
	shared.used.Store(true)
	code := m.Run()
	if shared.srv != nil {
		if err := shared.srv.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "s3test: stopping versitygw: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// InCI reports whether the tests run under CI: the environment variable
// CI is set to anything but "", "0" or "false".
func InCI() bool {
	v := strings.TrimSpace(os.Getenv("CI"))
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}

// Binary returns the path of the versitygw binary: $SESSIONSTORE_VERSITYGW
// (which must then exist), else versitygw in $(go env GOBIN) or
// $(go env GOPATH)/bin, else on $PATH. An error matches ErrNoBinary.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: $%s: %v", ErrNoBinary, EnvBinary, err)
		}
		return p, nil
	}
	var tried []string
	for _, dir := range goBinDirs() {
		p := filepath.Join(dir, "versitygw")
		tried = append(tried, p)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("versitygw")
	if err != nil {
		return "", fmt.Errorf("%w: $%s is not set, and no %s, nor versitygw on $PATH", ErrNoBinary, EnvBinary, strings.Join(tried, " or "))
	}
	return p, nil
}

// goBinDirs returns where go install puts binaries: $(go env GOBIN) if
// set, and each $(go env GOPATH)'s bin.
func goBinDirs() []string {
	gobin, gopath := os.Getenv("GOBIN"), os.Getenv("GOPATH")
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
		if len(lines) == 2 {
			gobin, gopath = lines[0], lines[1]
		}
	}
	if gopath == "" {
		gopath = build.Default.GOPATH
	}
	var dirs []string
	if gobin != "" {
		dirs = append(dirs, gobin)
	}
	for _, p := range filepath.SplitList(gopath) {
		if p != "" {
			dirs = append(dirs, filepath.Join(p, "bin"))
		}
	}
	return dirs
}

// launch starts versitygw with its buckets in dir/root, tries a few ports
// if one is taken between picking and binding it, and makes the first
// bucket.
func launch(dir string, removeDir, versioned bool) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	root := filepath.Join(dir, "root")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, err
	}
	var versions string // versitygw keeps older versions here
	if versioned {
		versions = filepath.Join(dir, "versions")
		if err := os.MkdirAll(versions, 0o755); err != nil {
			return nil, err
		}
	}
	var lastErr error
	for range 5 {
		s, err := startOnce(bin, root, versions)
		if err != nil {
			lastErr = err
			if errors.Is(err, errExited) {
				continue // most likely the port was taken since it was picked
			}
			break
		}
		s.Dir = root
		s.removeD = removeDir
		if s.Bucket, err = s.makeBucket(context.Background()); err != nil {
			_ = s.Close()
			return nil, err
		}
		return s, nil
	}
	return nil, lastErr
}

var errExited = errors.New("versitygw exited")

// startOnce starts versitygw on a free loopback port and waits until it
// answers.
func startOnce(bin, root, versions string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  "http://" + port,
		AccessKey: "s3test-access",
		SecretKey: "s3test-secret-key",
		Region:    "us-east-1",
		log:       &lockedBuffer{},
		exited:    make(chan struct{}),
		release:   make(chan struct{}),
	}
	args := []string{
		"--port", port,
		"--access", s.AccessKey,
		"--secret", s.SecretKey,
		"--region", s.Region,
		"--quiet",
		"posix",
	}
	if versions != "" {
		args = append(args, "--versioning-dir", versions)
	}
	cmd := exec.Command(bin, append(args, root)...)
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	cmd.Env = serverEnv()
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	s.cmd = cmd

	// The parent-death signal fires when the thread that forked the child
	// exits, not the process: start it from a thread locked to a goroutine
	// that stays until Close, so that it fires only when the test process
	// ends.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			runtime.UnlockOSThread()
			close(s.exited)
			return
		}
		started <- nil
		go func() {
			_ = cmd.Wait()
			close(s.exited)
		}()
		<-s.release
		// Unlocking lets the thread go back to the scheduler; it does not
		// exit, and the process group is killed by then.
		runtime.UnlockOSThread()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("s3test: start %s: %w", bin, err)
	}
	if err := s.waitReady(30 * time.Second); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// serverEnv is the environment versitygw runs in: this process's, less
// the variables that versitygw reads for settings, so that only the
// command line configures it.
func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "VGW_") || strings.HasPrefix(k, "ROOT_") || k == "LOGFILE" || k == "WEBHOOK" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// freePort returns a loopback address with a port nothing listens on.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// waitReady waits until the server answers an HTTP request, its process
// exits, or timeout passes.
func (s *Server) waitReady(timeout time.Duration) error {
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.exited:
			return fmt.Errorf("%w before answering (%s); its output:\n%s", errExited, s.cmd.ProcessState, s.log.String())
		default:
		}
		resp, err := client.Get(s.Endpoint + "/")
		if err == nil {
			_ = resp.Body.Close()
			return nil // any answer, even 403 to an unsigned request
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("s3test: versitygw did not answer at %s within %v: %v; its output:\n%s", s.Endpoint, timeout, err, s.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Close kills the server's process group and waits for it, then removes
// its directory if Launch made it. It may be called more than once.
func (s *Server) Close() error {
	s.close.Do(func() {
		if s.cmd.Process != nil {
			select {
			case <-s.exited:
			default:
				_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
			}
		}
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.err = fmt.Errorf("versitygw (pid %d) still running 10s after SIGKILL", s.cmd.Process.Pid)
		}
		close(s.release)
		if s.removeD && s.Dir != "" {
			if err := os.RemoveAll(filepath.Dir(s.Dir)); err != nil && s.err == nil {
				s.err = err
			}
		}
	})
	return s.err
}

// PID returns the server's process id.
func (s *Server) PID() int {
	return s.cmd.Process.Pid
}

// Output returns what the server printed so far.
func (s *Server) Output() string {
	return s.log.String()
}

// Config returns the S3Config of bucket on this server, for remote.OpenS3.
func (s *Server) Config(bucket string) remote.S3Config {
	return remote.S3Config{
		Endpoint:  s.Endpoint,
		Region:    s.Region,
		Bucket:    bucket,
		AccessKey: s.AccessKey,
		SecretKey: s.SecretKey,
	}
}

// Client returns an S3 client for this server.
func (s *Server) Client() *s3.Client {
	return remote.NewS3Client(s.Config(""))
}

// NewBucket makes a new, empty bucket and returns its name.
func (s *Server) NewBucket(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name, err := s.makeBucket(ctx)
	if err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	return name
}

func (s *Server) makeBucket(ctx context.Context) (string, error) {
	name := fmt.Sprintf("s3test-%d", s.buckets.Add(1))
	_, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("create bucket %s at %s: %w", name, s.Endpoint, err)
	}
	return name, nil
}

// OpenBucket opens a new, empty bucket of this server, which tb's end
// closes.
func (s *Server) OpenBucket(tb testing.TB) *blob.Bucket {
	tb.Helper()
	return s.Open(tb, s.Config(s.NewBucket(tb)))
}

// Open opens the bucket cfg names (such as Config's, changed to go
// through a proxy), which tb's end closes.
func (s *Server) Open(tb testing.TB, cfg remote.S3Config) *blob.Bucket {
	tb.Helper()
	b, err := remote.OpenS3(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("s3test: %v", err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b
}

// Store returns the store kept in a new, empty bucket of this server.
func (s *Server) Store(tb testing.TB) sessionstore.ObjectStore {
	tb.Helper()
	return remote.New(s.OpenBucket(tb))
}

// lockedBuffer collects the process's output.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() > 1<<20 {
		return len(p), nil // enough to tell what went wrong
	}
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
