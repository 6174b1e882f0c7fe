//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// asCommandEnv makes the test binary run main() as the sessionstore
// command, so that a test can send it a real signal.
const asCommandEnv = "SESSIONSTORE_TEST_AS_COMMAND"

func TestMain(m *testing.M) {
	if os.Getenv(asCommandEnv) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// TestImportSIGINT: Ctrl-C (SIGINT) during an import stops it between
// sessions; the command closes the store, says the import was interrupted
// and exits 1, instead of dying with the store open.
func TestImportSIGINT(t *testing.T) {
	dir := t.TempDir()
	for i := range 400 {
		sid := fmt.Sprintf("s%03d", i)
		rec := `{"type":"user","uuid":"` + sid + `-1","parentUuid":null,"sessionId":"` + sid + `","timestamp":"2026-01-01T00:00:00Z","message":{"role":"user","content":"hello"}}` + "\n"
		require.NoError(t, os.WriteFile(filepath.Join(dir, sid+".jsonl"), []byte(rec), 0o644))
	}
	root := filepath.Join(t.TempDir(), "store")
	cmd := exec.Command(os.Args[0], "import", "claude", "-store", root, "-progress", "1", dir)
	cmd.Env = append(os.Environ(), asCommandEnv+"=1")
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	lines := bufio.NewScanner(stderr)
	require.True(t, lines.Scan(), "a first progress line")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	err = cmd.Wait()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "exit status 1, not a kill: %s", rest.String())
	assert.Equal(t, exitFail, exit.ExitCode())
	assert.Contains(t, rest.String(), "import interrupted")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := sessionstore.Open(root, nil) // a writer: the lock was released
	require.NoError(t, err)
	metas, err := s.List(ctx)
	require.NoError(t, err)
	assert.Less(t, len(metas), 400, "stopped before the end")
	for _, m := range metas {
		r, err := s.Verify(ctx, m.ID)
		require.NoError(t, err)
		assert.True(t, r.OK(), "session %s verifies clean", m.ID)
	}
	require.NoError(t, s.Close())
}

// TestUpgradeFIFOSessionJSON: a FIFO in place of a session.json does not
// block the upgrade command: it reports the session damaged and ends.
func TestUpgradeFIFOSessionJSON(t *testing.T) {
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	meta, err := s.Create(context.Background(), sessionstore.Meta{Name: "fifo"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	path := filepath.Join(root, "sessions", meta.ID.String(), "session.json")
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o600))

	done := make(chan int, 1)
	go func() {
		status, _, _ := runCmd("upgrade", root, meta.ID.String())
		done <- status
	}()
	select {
	case status := <-done:
		assert.Equal(t, exitFail, status)
	case <-time.After(time.Minute): // a hang detector, not a timing check
		// Unblock the reader so that the test can end.
		if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		t.Fatal("upgrade blocked on a FIFO")
	}
}
