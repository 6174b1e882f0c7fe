package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/export"
)

// readExport reads a JSONL export back with the export package's reader.
func readExport(t *testing.T, data string) (export.Header, []sessionstore.Event) {
	t.Helper()
	r, err := export.NewReader(strings.NewReader(data), "stdout")
	require.NoError(t, err)
	var evs []sessionstore.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return r.Header(), evs
		}
		require.NoError(t, err)
		evs = append(evs, ev)
	}
}

func eventIDs(evs []sessionstore.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// TestExport: the export command writes the session in each format and
// scope, by short id, to stdout or a file, blobs inline or as files.
func TestExport(t *testing.T) {
	f := newFixture(t)
	id := f.session.ID.String()
	short := sessionstore.ShortID(f.session.ID)

	// The whole tree, by default, blobs inline.
	status, stdout, stderr := runCmd("export", f.root, short)
	require.Equal(t, exitOK, status, stderr)
	h, evs := readExport(t, stdout)
	assert.Equal(t, export.Tree, h.Scope)
	assert.Equal(t, f.session.ID, h.Session.ID)
	assert.Equal(t, f.head.ID, h.Head)
	assert.Equal(t, eventIDs(f.all), eventIDs(evs), "every event, in append order")
	for _, ev := range evs {
		if ev.ID == f.blob.ID {
			assert.Equal(t, f.blob.Digest, ev.Digest)
			assert.Equal(t, string(f.blob.Record), string(ev.Record), "the blob inline")
		}
	}

	// -store takes the root as a flag.
	status, stdout2, stderr := runCmd("export", "-store", f.root, short)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, stdout, stdout2)

	// The tree into a file, blobs as files.
	out := filepath.Join(t.TempDir(), "session.jsonl")
	blobs := filepath.Join(t.TempDir(), "blobs")
	status, stdout, stderr = runCmd("export", "-blobs", blobs, "-o", out, f.root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Regexp(t, `^`+regexpQuote(out)+`: 8 events, \d+ bytes; 1 blob files written to `+regexpQuote(blobs)+` \(\d+ bytes\), 0 there already\n$`, stdout)
	data, err := os.ReadFile(out)
	require.NoError(t, err)
	h, evs = readExport(t, string(data))
	assert.Equal(t, export.BlobsFiles, h.Blobs)
	assert.Equal(t, eventIDs(f.all), eventIDs(evs))
	b, err := os.ReadFile(filepath.Join(blobs, "sha256-"+strings.TrimPrefix(f.blob.Digest, "sha256:")))
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	assert.Equal(t, f.blob.Digest, "sha256:"+hex.EncodeToString(sum[:]))
	assert.Equal(t, string(f.blob.Record), string(b))
	entries, err := os.ReadDir(filepath.Dir(out))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left beside the output")

	// Again into the same directory: the blob file is there already.
	status, stdout, stderr = runCmd("export", "-blobs", blobs, "-o", out, f.root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "; 0 blob files written to "+blobs+" (0 bytes), 1 there already\n")

	// The active path, past the compaction.
	status, stdout, stderr = runCmd("export", "-scope", "path", f.root, short)
	require.Equal(t, exitOK, status, stderr)
	h, evs = readExport(t, stdout)
	assert.Equal(t, export.ActivePath, h.Scope)
	assert.Equal(t, []uuid.UUID{f.ask.ID, f.branch.ID, f.compaction.ID, f.head.ID}, eventIDs(evs))

	// The context Load gives.
	status, stdout, stderr = runCmd("export", "-scope", "context", f.root, short)
	require.Equal(t, exitOK, status, stderr)
	_, evs = readExport(t, stdout)
	assert.Equal(t, []uuid.UUID{f.compaction.ID, f.head.ID}, eventIDs(evs))

	// Markdown of the active path.
	status, stdout, stderr = runCmd("export", "-format", "md", f.root, short)
	require.Equal(t, exitOK, status, stderr)
	assert.True(t, strings.HasPrefix(stdout, "# inspect me\n"), stdout)
	assert.Contains(t, stdout, "- Model: test-model\n")
	assert.Contains(t, stdout, "Approach B: a new package.")
	assert.NotContains(t, stdout, "Approach A: rewrite main.go.", "on the other branch")
	assert.Contains(t, stdout, "> **Compaction**")

	// A long tool result on the path is cut, unless -full.
	ctx := context.Background()
	st, err := sessionstore.Open(f.root, nil)
	require.NoError(t, err)
	long, err := st.Create(ctx, sessionstore.Meta{Name: "long output"})
	require.NoError(t, err)
	_, err = st.AppendBatch(ctx, long.ID,
		sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "run_tests", Arguments: []byte(`{"pkg":"./..."}`)}),
		sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: bigOutput}))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	status, stdout, stderr = runCmd("export", "-format", "md", f.root, long.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "### Tool call: `run_tests`")
	assert.Contains(t, stdout, fmt.Sprintf("*Output cut: 4096 of %d bytes shown.*", len(bigOutput)))
	assert.False(t, strings.Contains(stdout, bigOutput), "cut")
	status, full, stderr := runCmd("export", "-format", "md", "-full", f.root, long.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.True(t, strings.Contains(full, bigOutput), "whole with -full")
	assert.NotContains(t, full, "Output cut")
}

// regexpQuote quotes s for a regexp.
func regexpQuote(s string) string {
	var b bytes.Buffer
	for _, r := range s {
		if strings.ContainsRune(`\.+*?()|[]{}^$`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// TestExportErrors: bad command lines are refused before anything is
// read; an unknown session fails; a failed export leaves no file.
func TestExportErrors(t *testing.T) {
	f := newFixture(t)
	short := sessionstore.ShortID(f.session.ID)
	for _, args := range [][]string{
		{"export", f.root},
		{"export", f.root, short, "extra"},
		{"export", f.root, "not-hex"},
		{"export", "-format", "pdf", f.root, short},
		{"export", "-scope", "all", f.root, short},
		{"export", "-format", "md", "-scope", "tree", f.root, short},
		{"export", "-format", "md", "-blobs", t.TempDir(), f.root, short},
		{"export", "-full", f.root, short},
		{"export", "-blobs", "", f.root, short},
		{"export", "-store", f.root, f.root, short},
	} {
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, exitUsage, status, "args %q: %s", args, stderr)
		assert.Empty(t, stdout, "args %q", args)
	}

	status, _, stderr := runCmd("export", f.root, "0123abcd")
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "no session")

	status, _, stderr = runCmd("export", filepath.Join(t.TempDir(), "nowhere"), short)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "no store at")

	// A blob directory that cannot be made: the export fails and leaves
	// no output file.
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600))
	out := filepath.Join(dir, "out.jsonl")
	status, _, stderr = runCmd("export", "-blobs", filepath.Join(blocker, "blobs"), "-o", out, f.root, short)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "cannot write a blob file")
	_, err := os.Stat(out)
	assert.ErrorIs(t, err, os.ErrNotExist)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file left")
}

// TestExportFileMode: export -o creates its file with the permissions of
// the session's files less the umask, never more open than either (it
// made every file 0644).
func TestExportFileMode(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		store, umask, want os.FileMode
	}{
		{sessionstore.DefaultFileMode, 0o022, 0o600}, // the default store: private
		{0o644, 0o077, 0o600},                        // a private umask
		{0o640, 0o002, 0o640},
		{0o664, 0o022, 0o644},
		{0o666, 0o000, 0o666},
	} {
		t.Run(fmt.Sprintf("store %04o umask %04o", tc.store, tc.umask), func(t *testing.T) {
			// The store's files get tc.store exactly (no umask), the
			// export tc.umask.
			old := syscall.Umask(0)
			defer syscall.Umask(old)
			root := t.TempDir()
			st, err := sessionstore.Open(root, &sessionstore.Options{FileMode: tc.store})
			require.NoError(t, err)
			meta, err := st.Create(ctx, sessionstore.Meta{Name: "mode"})
			require.NoError(t, err)
			_, err = st.Append(ctx, meta.ID, sessionstore.UserText("private"))
			require.NoError(t, err)
			require.NoError(t, st.Close())
			info, err := os.Stat(filepath.Join(root, "sessions", meta.ID.String(), "session.json"))
			require.NoError(t, err)
			require.Equal(t, tc.store, info.Mode().Perm())

			syscall.Umask(int(tc.umask))
			dir := t.TempDir()
			for _, format := range []string{"jsonl", "md"} {
				out := filepath.Join(dir, "session."+format)
				status, _, stderr := runCmd("export", "-format", format, "-o", out, root, meta.ID.String())
				require.Equal(t, exitOK, status, stderr)
				info, err := os.Stat(out)
				require.NoError(t, err)
				assert.Equal(t, tc.want, info.Mode().Perm(), "-format %s", format)
			}
		})
	}
}
