//go:build unix

package claude

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A FIFO named *.jsonl in a directory, or in place of a subagent's
// .meta.json, is not opened: the import neither blocks on it nor reads
// it.
func TestImportSkipsFIFOs(t *testing.T) {
	dir := t.TempDir()
	writeLines(t, dir, "agent-x", rec("a", "", 0))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "agent-x.meta.json"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.jsonl"), 0o644))
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{dir}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, 1, rep.Files)
	assert.Equal(t, 1, rep.Sessions)
}

// A path given that is a link to a directory is walked as the directory:
// its transcripts are imported, not passed over in silence.
func TestImportLinkToDirectory(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "projects")
	require.NoError(t, os.Mkdir(real, 0o755))
	writeLines(t, real, "s", rec("a", "", 0), rec("b", "a", 1))
	link := filepath.Join(dir, "link")
	require.NoError(t, os.Symlink(real, link))
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{link}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, 1, rep.Files)
	assert.Equal(t, 2, rep.Added)
}

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

// A transcript named that is a pipe (sessionstore import claude
// <(zcat s.jsonl.gz)) can be read once: the import reads it once, and
// imports all of it.
func TestImportPipeGiven(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.jsonl")
	data := []byte(rec("a", "", 0) + "\n" + rec("b", "a", 1) + "\n")
	feedFIFO(t, path, data)
	st := openStore(t)
	rep, err := Import(context.Background(), st, []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, 2, rep.Added, "both records, read from the pipe")
	assert.Equal(t, int64(len(data)), rep.Bytes, "the bytes read, which the pipe's size is not")
}
