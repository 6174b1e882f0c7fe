package export

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// sharedData returns the directory holding the project's shared real
// transcripts (claude-code/): $SESSIONSTORE_SHARED_DATA, or shared/data in
// the package's directory or one above it, or /work/shared/data. Without
// it the test is skipped, except under CI=true, where it fails.
func sharedData(t *testing.T) string {
	t.Helper()
	dirs := []string{os.Getenv("SESSIONSTORE_SHARED_DATA")}
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dirs = append(dirs, filepath.Join(d, "shared", "data"))
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	dirs = append(dirs, "/work/shared/data")
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, "claude-code")); err == nil && fi.IsDir() {
			return d
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no shared data: set SESSIONSTORE_SHARED_DATA to the directory holding claude-code/")
	}
	t.Skip("no shared data (SESSIONSTORE_SHARED_DATA, shared/data above the package, /work/shared/data)")
	return ""
}

// importTranscript stores the lines of a Claude Code transcript as one
// session: a line whose message content is a string as a user or
// assistant message, any other as a custom event holding the line.
func importTranscript(t *testing.T, st *sessionstore.Store, path string) (sessionstore.Meta, map[sessionstore.Role]int) {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var evs []sessionstore.Event
	roles := map[sessionstore.Role]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var l struct {
			Type    string `json:"type"`
			Message struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		require.NoError(t, json.Unmarshal(line, &l), path)
		var text string
		if (l.Type == "user" || l.Type == "assistant") && json.Unmarshal(l.Message.Content, &text) == nil {
			if l.Type == "user" {
				evs = append(evs, sessionstore.UserText(text))
				roles[sessionstore.RoleUser]++
			} else {
				evs = append(evs, sessionstore.AssistantText(text))
				roles[sessionstore.RoleAssistant]++
			}
			continue
		}
		evs = append(evs, sessionstore.NewEvent(sessionstore.KindCustom, sessionstore.RoleNone, json.RawMessage(bytes.Clone(line))))
	}
	require.NoError(t, sc.Err())
	meta, err := st.Create(context.Background(), sessionstore.Meta{Name: filepath.Base(path), WorkingDir: filepath.Dir(path)})
	require.NoError(t, err)
	if len(evs) > 0 {
		_, err = st.AppendBatch(context.Background(), meta.ID, evs...)
		require.NoError(t, err)
	}
	return meta, roles
}

// TestRealTranscripts: the shared real transcripts, stored and exported,
// read back as they were stored (their large lines as blob files), and
// their transcripts hold a section per message.
func TestRealTranscripts(t *testing.T) {
	data := sharedData(t)
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sessionstore.Open(filepath.Join(dir, "store"), &sessionstore.Options{BlobThreshold: 16 << 10})
	require.NoError(t, err)
	defer st.Close()
	var files []string
	require.NoError(t, filepath.WalkDir(filepath.Join(data, "claude-code"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".jsonl" {
			files = append(files, p)
		}
		return err
	}))
	require.NotEmpty(t, files)
	// The largest transcripts: most of the bytes and every kind of line,
	// at a fifth of the cost of storing all (a session's creation and
	// append are synced).
	sizes := map[string]int64{}
	for _, p := range files {
		fi, err := os.Stat(p)
		require.NoError(t, err)
		sizes[p] = fi.Size()
	}
	slices.SortFunc(files, func(a, b string) int { return cmp.Compare(sizes[b], sizes[a]) })
	files = files[:min(len(files), 16)]
	blobDir := filepath.Join(dir, "blobs")
	var events, blobs int
	for _, p := range files {
		meta, roles := importTranscript(t, st, p)
		var buf bytes.Buffer
		stats, err := JSONL(ctx, &buf, st, meta.ID, Options{BlobDir: blobDir})
		require.NoError(t, err, p)
		h, evs := readAll(t, buf.Bytes())
		assert.Equal(t, meta.ID, h.Session.ID)
		assert.Equal(t, wantIDs(t, st, meta.ID, Tree), ids(evs), p)
		blobs += checkEvents(t, st, meta.ID, evs, blobDir)
		events += stats.Events

		var md bytes.Buffer
		_, err = Markdown(ctx, &md, st, meta.ID, Options{})
		require.NoError(t, err, p)
		out := md.String()
		assert.True(t, strings.HasPrefix(out, "# "+filepath.Base(p)+"\n"), p)
		assert.Equal(t, roles[sessionstore.RoleUser], strings.Count(out, "\n## User\n"), p)
		assert.Equal(t, roles[sessionstore.RoleAssistant], strings.Count(out, "\n## Assistant\n"), p)
	}
	t.Logf("%d transcripts, %d events, %d blob records", len(files), events, blobs)
	assert.Positive(t, blobs, "some lines are over the blob threshold")
}
