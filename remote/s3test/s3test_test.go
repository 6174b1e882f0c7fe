package s3test_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/remote/s3test"
)

func TestStart(t *testing.T) {
	srv := s3test.Start(t)
	assert.True(t, strings.HasPrefix(srv.Endpoint, "http://127.0.0.1:"), "loopback only: %s", srv.Endpoint)
	assert.True(t, strings.HasPrefix(srv.Dir, os.TempDir()), "data under the test's temporary directory: %s", srv.Dir)
	require.NotEmpty(t, srv.Bucket)
	fi, err := os.Stat(filepath.Join(srv.Dir, srv.Bucket))
	require.NoError(t, err, "a bucket is a directory under Dir")
	assert.True(t, fi.IsDir())

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s := srv.Store(t)
	require.NoError(t, s.Create(ctx, "a/b", []byte("hello")))
	assert.ErrorIs(t, s.Create(ctx, "a/b", nil), sessionstore.ErrObjectExists)
	got, err := s.Get(ctx, "a/b", 0, -1)
	require.NoError(t, err)
	assert.Equal(t, "hello", string(got))

	// Each Store is a bucket of its own.
	other := srv.Store(t)
	list, err := other.List(ctx, "", 0)
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.NoError(t, other.Create(ctx, "a/b", nil))
}

// TestClose: Close kills the server and can be called again.
func TestClose(t *testing.T) {
	srv, err := s3test.Launch()
	s3test.Check(t, err)
	pid, dir := srv.PID(), srv.Dir
	require.True(t, alive(pid))
	require.NoError(t, srv.Close())
	assert.False(t, alive(pid), "the process is gone")
	assert.NoError(t, srv.Close(), "a second Close")
	_, err = net.DialTimeout("tcp", strings.TrimPrefix(srv.Endpoint, "http://"), time.Second)
	assert.Error(t, err, "nothing listens at the endpoint")
	_, err = os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "Launch's directory is removed")
}

// TestServerDiesWithTest runs itself in a child process that starts a
// server and then panics, exits without its cleanups, or is killed: the
// server must end with it each way.
func TestServerDiesWithTest(t *testing.T) {
	if mode := os.Getenv("S3TEST_CHILD"); mode != "" {
		child(t, mode)
		return
	}
	if _, err := s3test.Binary(); err != nil {
		s3test.Check(t, err)
	}
	for _, mode := range []string{"panic", "exit", "sigkill"} {
		t.Run(mode, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTest$", "-test.count=1", "-test.v")
			tmp := t.TempDir() // what the child leaves behind
			cmd.Env = append(os.Environ(), "S3TEST_CHILD="+mode, "TMPDIR="+tmp)
			var out, errOut bytes.Buffer // stdout's lines as read; stderr
			cmd.Stderr = &errOut
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			pid := 0
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				line := sc.Text()
				fmt.Fprintln(&out, line)
				if v, ok := strings.CutPrefix(line, "server pid "); ok {
					pid, err = strconv.Atoi(v)
					require.NoError(t, err)
					if mode == "sigkill" {
						require.NoError(t, cmd.Process.Kill())
					}
				}
			}
			err = cmd.Wait()
			out.Write(errOut.Bytes())
			require.Error(t, err, "the child ends in failure; its output:\n%s", out.String())
			require.NotZero(t, pid, "the child started no server; its output:\n%s", out.String())
			assert.Eventually(t, func() bool { return !alive(pid) }, 10*time.Second, 10*time.Millisecond,
				"server %d outlived the test process that started it", pid)
			if alive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
}

func child(t *testing.T, mode string) {
	srv := s3test.Start(t)
	fmt.Printf("server pid %d\n", srv.PID())
	switch mode {
	case "panic":
		panic("the test panics")
	case "exit":
		os.Exit(3) // no cleanups
	case "sigkill":
		time.Sleep(time.Minute) // until the parent kills this process
	}
	t.Fatalf("unknown mode %q", mode)
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

func TestBinary(t *testing.T) {
	t.Setenv(s3test.EnvBinary, filepath.Join(t.TempDir(), "nonexistent"))
	_, err := s3test.Binary()
	assert.ErrorIs(t, err, s3test.ErrNoBinary, "a path that names nothing")
	_, err = s3test.Launch()
	assert.ErrorIs(t, err, s3test.ErrNoBinary)

	fake := filepath.Join(t.TempDir(), "versitygw")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755))
	t.Setenv(s3test.EnvBinary, fake)
	got, err := s3test.Binary()
	require.NoError(t, err)
	assert.Equal(t, fake, got)

	// Without the variable: GOBIN, then GOPATH/bin.
	t.Setenv(s3test.EnvBinary, "")
	gobin, gopath := t.TempDir(), t.TempDir()
	t.Setenv("GOBIN", gobin)
	t.Setenv("GOPATH", gopath)
	t.Setenv("GOFLAGS", "")
	t.Setenv("GOENV", "off")
	t.Setenv("PATH", filepath.Dir(goCommand(t)))
	_, err = s3test.Binary()
	assert.ErrorIs(t, err, s3test.ErrNoBinary, "an empty GOBIN and GOPATH, no versitygw on PATH")
	require.NoError(t, os.MkdirAll(filepath.Join(gopath, "bin"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(gopath, "bin", "versitygw"), []byte("#!/bin/sh\n"), 0o755))
	got, err = s3test.Binary()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(gopath, "bin", "versitygw"), got, "GOPATH/bin")
	require.NoError(t, os.WriteFile(filepath.Join(gobin, "versitygw"), []byte("#!/bin/sh\n"), 0o755))
	got, err = s3test.Binary()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(gobin, "versitygw"), got, "GOBIN before GOPATH/bin")

	// Last, PATH.
	require.NoError(t, os.Remove(filepath.Join(gobin, "versitygw")))
	require.NoError(t, os.Remove(filepath.Join(gopath, "bin", "versitygw")))
	onPath := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(onPath, "versitygw"), []byte("#!/bin/sh\n"), 0o755))
	t.Setenv("PATH", filepath.Dir(goCommand(t))+string(filepath.ListSeparator)+onPath)
	got, err = s3test.Binary()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(onPath, "versitygw"), got, "PATH")
}

// goCommand returns the go command's path; its directory holds no
// versitygw.
func goCommand(t *testing.T) string {
	p, err := exec.LookPath("go")
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(filepath.Dir(p), "versitygw"))
	require.ErrorIs(t, err, os.ErrNotExist)
	return p
}

// TestLaunchReportsExit: a binary that exits at once is reported with its
// output.
func TestLaunchReportsExit(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "versitygw")
	require.NoError(t, os.WriteFile(fake, []byte("#!/bin/sh\necho no such flag >&2\nexit 2\n"), 0o755))
	t.Setenv(s3test.EnvBinary, fake)
	_, err := s3test.Launch()
	require.Error(t, err)
	assert.NotErrorIs(t, err, s3test.ErrNoBinary)
	assert.Contains(t, err.Error(), "no such flag")
}

// fakeTB records how Check ends a test.
type fakeTB struct {
	testing.TB
	ended string
}

type ended struct{}

func (f *fakeTB) Helper() {}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.ended = "skip: " + fmt.Sprintf(format, args...)
	panic(ended{})
}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.ended = "fail: " + fmt.Sprintf(format, args...)
	panic(ended{})
}

func check(tb testing.TB, err error) (result string) {
	f := &fakeTB{TB: tb}
	defer func() {
		if r := recover(); r != nil && r != (ended{}) {
			panic(r)
		}
		result = f.ended
	}()
	s3test.Check(f, err)
	return ""
}

func TestCheck(t *testing.T) {
	missing := fmt.Errorf("%w: nowhere", s3test.ErrNoBinary)
	for _, tc := range []struct {
		ci   string
		err  error
		want string
	}{
		{"", nil, ""},
		{"true", nil, ""},
		{"", missing, "skip: "},
		{"0", missing, "skip: "},
		{"false", missing, "skip: "},
		{"FALSE", missing, "skip: "},
		{"true", missing, "fail: "},
		{"1", missing, "fail: "},
		{"", errors.New("other"), "fail: "},
	} {
		t.Setenv("CI", tc.ci)
		got := check(t, tc.err)
		if tc.want == "" {
			assert.Empty(t, got, "CI=%q err=%v", tc.ci, tc.err)
		} else {
			assert.True(t, strings.HasPrefix(got, tc.want), "CI=%q err=%v: %q", tc.ci, tc.err, got)
		}
		if tc.err == missing {
			assert.Contains(t, got, "go install github.com/versity/versitygw/cmd/versitygw@v1.8.0")
		}
	}
}
