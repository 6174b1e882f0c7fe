//go:build unix

package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// feedFIFO makes a FIFO at path that gives data to the first reader that
// opens it and an end of file to each later one, until the test ends.
func feedFIFO(t *testing.T, path string, data []byte) {
	t.Helper()
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for first := true; ; first = false {
			f, err := os.OpenFile(path, os.O_WRONLY, 0) // waits for a reader
			if err != nil {
				return
			}
			if first {
				_, _ = f.Write(data)
			}
			f.Close()
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		for {
			select {
			case <-done:
				return
			default:
			}
			// A reader that lets the waiting writer go on.
			if f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
		}
	})
}

// A file named that is a pipe (sessionstore import pi <(zcat s.jsonl.gz))
// can be read once: the check of the formats leaves it to the import,
// which reads all of it.
func TestImportPipeGiven(t *testing.T) {
	cases := []struct {
		source, fixture, added string
	}{
		{"claude", filepath.Join(claudeFixture, "11111111-1111-4111-8111-111111111111", "subagents", "agent-abc123.jsonl"), "  events:   5 added"},
		{"pi", filepath.Join("..", "..", "importer", "pi", "testdata", "tree.jsonl"), "  events:   18 added"},
	}
	for _, tc := range cases {
		t.Run(tc.source, func(t *testing.T) {
			data, err := os.ReadFile(tc.fixture)
			require.NoError(t, err)
			dir := t.TempDir()
			pipe := filepath.Join(dir, "pipe")
			feedFIFO(t, pipe, data)
			status, stdout, stderr := runCmd("import", tc.source, "-store", filepath.Join(dir, "store"), pipe)
			assert.Equal(t, exitOK, status, "%s\n%s", stdout, stderr)
			assert.Contains(t, stdout, tc.added)
		})
	}
}
