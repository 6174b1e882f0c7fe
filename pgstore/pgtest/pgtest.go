// Package pgtest starts a PostgreSQL server on loopback for tests, from
// the binaries of Debian's postgresql package (or any PostgreSQL install):
// initdb into a new directory, postgres on a free port of 127.0.0.1 and a
// socket in that directory, stopped and removed at the end.
//
// The binaries are looked for in $SESSIONSTORE_POSTGRES_BIN, then in
// /usr/lib/postgresql/<newest>/bin, then on $PATH. Without them, Shared
// skips the test, or fails it under CI (the environment variable CI set to
// anything but "", "0" or "false"): .ci/modules installs the package.
// Run as root, the server runs as the user postgres (PostgreSQL refuses
// root).
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrNoBinary is returned by Start when no PostgreSQL binaries are found.
var ErrNoBinary = errors.New("pgtest: no PostgreSQL binaries (initdb, postgres)")

// Server is a running PostgreSQL server.
type Server struct {
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	log  string
	dsn  string
	n    atomic.Int64
}

// DSN is the server's connection string (user sessionstore, database
// postgres, on 127.0.0.1).
func (s *Server) DSN() string { return s.dsn }

// bindir finds the directory of initdb and postgres.
func bindir() (string, error) {
	if d := os.Getenv("SESSIONSTORE_POSTGRES_BIN"); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", ErrNoBinary
}

// Start initializes and starts a server; Stop stops it and removes its
// directory.
func Start() (*Server, error) {
	bin, err := bindir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, done: make(chan struct{}), log: filepath.Join(dir, "server.log")}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: running as root needs the user postgres: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	run := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
		// A test binary killed (a timeout, SIGKILL) runs no Stop: on
		// Linux the server then gets SIGQUIT, its immediate shutdown,
		// rather than outliving the tests.
		setParentDeathSignal(cmd.SysProcAttr)
		cmd.Dir = dir
		return cmd
	}
	data := filepath.Join(dir, "data")
	if out, err := run("initdb", "-D", data, "-U", "sessionstore", "--auth=trust", "-E", "UTF8", "--locale=C", "-N").CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(s.log)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.cmd = run("postgres", "-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(port), "-k", dir,
		"-c", "max_connections=300", "-c", "fsync=on", "-c", "synchronous_commit=on")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		logf.Close()
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: postgres: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		logf.Close()
		close(s.done)
	}()
	s.dsn = fmt.Sprintf("postgres://sessionstore@127.0.0.1:%d/postgres?sslmode=disable", port)
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		pool, err := pgxpool.New(ctx, s.dsn)
		if err == nil {
			err = pool.Ping(ctx)
			pool.Close()
		}
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			out, _ := os.ReadFile(s.log)
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: postgres exited: %s", out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(s.log)
			s.Stop()
			return nil, fmt.Errorf("pgtest: postgres not ready after 60 s: %w\n%s", err, out)
		}
	}
}

// freePort returns a port of 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop stops the server (a fast shutdown) and removes its directory.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(30 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	_ = os.RemoveAll(s.dir)
}

// Pool opens a pool to the server, closed when tb ends.
func (s *Server) Pool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	pool, err := pgxpool.New(context.Background(), s.dsn)
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// Table returns a table name not given before by this Server, for a test
// that wants objects of its own.
func (s *Server) Table() string {
	return fmt.Sprintf("t%d_%d", os.Getpid(), s.n.Add(1))
}

var (
	shared    *Server
	sharedErr error
	sharedMu  sync.Mutex
	inMain    bool
)

// Main runs a package's tests and stops the shared server after them: call
// it from TestMain.
func Main(m *testing.M) {
	sharedMu.Lock()
	inMain = true
	sharedMu.Unlock()
	code := m.Run()
	sharedMu.Lock()
	if shared != nil {
		shared.Stop()
	}
	sharedMu.Unlock()
	os.Exit(code)
}

// Shared returns the package's server, started by its first call. Without
// binaries it skips tb, or fails it under CI.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if !inMain {
		tb.Fatal("pgtest.Shared needs the package's TestMain to call pgtest.Main(m), which stops the server")
	}
	if shared == nil && sharedErr == nil {
		shared, sharedErr = Start()
	}
	if sharedErr != nil {
		if errors.Is(sharedErr, ErrNoBinary) && !InCI() {
			tb.Skipf("%v; install Debian's postgresql package (under CI this fails)", sharedErr)
		}
		tb.Fatalf("%v", sharedErr)
	}
	return shared
}

// InCI reports whether the tests run under CI: the environment variable
// CI is set to anything but "", "0" or "false".
func InCI() bool {
	v := strings.TrimSpace(os.Getenv("CI"))
	return v != "" && v != "0" && !strings.EqualFold(v, "false")
}
