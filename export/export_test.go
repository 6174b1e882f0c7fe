package export

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// readAll reads an export back whole.
func readAll(t *testing.T, data []byte) (Header, []sessionstore.Event) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(data), "test")
	require.NoError(t, err)
	var evs []sessionstore.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		evs = append(evs, ev)
	}
	return r.Header(), evs
}

func ids(evs []sessionstore.Event) []uuid.UUID {
	out := make([]uuid.UUID, len(evs))
	for i, ev := range evs {
		out[i] = ev.ID
	}
	return out
}

// wantIDs is what the store says scope holds.
func wantIDs(t *testing.T, st *sessionstore.Store, s uuid.UUID, scope Scope) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	switch scope {
	case Tree:
		nodes, err := st.Tree(ctx, s)
		require.NoError(t, err)
		out := make([]uuid.UUID, len(nodes))
		for i, n := range nodes {
			out[i] = n.ID
		}
		return out
	case ActivePath:
		evs, err := st.FullPath(ctx, s, uuid.Nil)
		require.NoError(t, err)
		return ids(evs)
	default:
		evs, err := st.Load(ctx, s)
		require.NoError(t, err)
		return ids(evs)
	}
}

// checkEvents compares exported events with the store's, record by record;
// with blobDir set, blob records must be files there.
func checkEvents(t *testing.T, st *sessionstore.Store, s uuid.UUID, got []sessionstore.Event, blobDir string) (blobs int) {
	t.Helper()
	ctx := context.Background()
	for _, ev := range got {
		stored, err := st.Event(ctx, s, ev.ID)
		require.NoError(t, err)
		resolved, err := st.Resolve(ctx, s, stored)
		require.NoError(t, err)
		assert.Equal(t, stored.ParentID, ev.ParentID, "event %s", ev.ID)
		assert.Equal(t, stored.BranchFrom, ev.BranchFrom, "event %s", ev.ID)
		assert.Equal(t, stored.Kind, ev.Kind)
		assert.Equal(t, stored.Role, ev.Role)
		assert.True(t, stored.Time.Equal(ev.Time), "event %s: time %v, stored %v", ev.ID, ev.Time, stored.Time)
		assert.Equal(t, stored.Digest, ev.Digest)
		assert.Equal(t, stored.Size, ev.Size)
		if stored.Digest == "" {
			assert.JSONEq(t, string(resolved.Record), string(ev.Record), "event %s", ev.ID)
			continue
		}
		blobs++
		if blobDir == "" {
			assert.Equal(t, string(resolved.Record), string(ev.Record), "event %s: the blob inline", ev.ID)
			continue
		}
		assert.Nil(t, ev.Record, "event %s: a blob file's record is null in its line", ev.ID)
		b, err := ReadBlob(blobDir, ev)
		require.NoError(t, err)
		assert.Equal(t, string(resolved.Record), string(b))
	}
	return blobs
}

// TestJSONLRoundTrip: every scope, blobs inline and as files, read back,
// is what the store holds, in the store's order.
func TestJSONLRoundTrip(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	meta, err := st.Meta(ctx, s)
	require.NoError(t, err)
	head, err := st.Head(ctx, s)
	require.NoError(t, err)
	for _, tc := range []struct {
		name      string
		scope     Scope
		wantScope Scope
		files     bool
		events    int
		blobs     int
	}{
		{"default is tree", "", Tree, false, 11, 2},
		{"tree inline", Tree, Tree, false, 11, 2},
		{"tree files", Tree, Tree, true, 11, 2},
		{"path inline", ActivePath, ActivePath, false, 8, 2},
		{"path files", ActivePath, ActivePath, true, 8, 2},
		{"context", Context, Context, false, 6, 2},
		{"context files", Context, Context, true, 6, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			opts := Options{Scope: tc.scope}
			if tc.files {
				opts.BlobDir = filepath.Join(t.TempDir(), "blobs")
			}
			stats, err := JSONL(ctx, &buf, st, s, opts)
			require.NoError(t, err)
			assert.Equal(t, int64(buf.Len()), stats.Bytes)
			assert.Equal(t, tc.events, stats.Events)
			assert.Equal(t, tc.blobs, stats.Blobs)

			h, evs := readAll(t, buf.Bytes())
			assert.Equal(t, FormatName, h.Format)
			assert.Equal(t, Version, h.Version)
			assert.Equal(t, tc.wantScope, h.Scope)
			assert.Equal(t, meta.ID, h.Session.ID)
			assert.Equal(t, meta.Name, h.Session.Name)
			assert.True(t, meta.CreatedAt.Equal(h.Session.CreatedAt))
			assert.Equal(t, head, h.Head)
			assert.Empty(t, h.Lanes, "only the implicit lane")
			assert.Equal(t, tc.events, h.Events)
			assert.Equal(t, wantIDs(t, st, s, tc.wantScope), ids(evs))
			assert.Equal(t, tc.blobs, checkEvents(t, st, s, evs, opts.BlobDir))
			if !tc.files {
				assert.Equal(t, BlobsInline, h.Blobs)
				return
			}
			assert.Equal(t, BlobsFiles, h.Blobs)
			// Two events, two different records: two files, each
			// named by its content's digest, nothing else.
			assert.Equal(t, 2, stats.BlobFiles)
			entries, err := os.ReadDir(opts.BlobDir)
			require.NoError(t, err)
			require.Len(t, entries, 2)
			var total int64
			for _, e := range entries {
				b, err := os.ReadFile(filepath.Join(opts.BlobDir, e.Name()))
				require.NoError(t, err)
				sum := sha256.Sum256(b)
				assert.Equal(t, "sha256-"+hex.EncodeToString(sum[:]), e.Name())
				total += int64(len(b))
			}
			assert.Equal(t, total, stats.BlobBytes)
		})
	}
}

// TestJSONLPathPastCompaction: the active path holds the events before the
// compaction (the whole history), the context starts at it.
func TestJSONLPathPastCompaction(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	var path, loaded bytes.Buffer
	_, err := JSONL(ctx, &path, st, s, Options{Scope: ActivePath})
	require.NoError(t, err)
	_, err = JSONL(ctx, &loaded, st, s, Options{Scope: Context})
	require.NoError(t, err)
	_, pevs := readAll(t, path.Bytes())
	_, cevs := readAll(t, loaded.Bytes())
	assert.Equal(t, []uuid.UUID{eid(1), eid(5), eid(6), eid(7), eid(8), eid(9), eid(10), eid(11)}, ids(pevs))
	assert.Equal(t, []uuid.UUID{eid(8), eid(6), eid(7), eid(9), eid(10), eid(11)}, ids(cevs), "the compaction, the events it keeps, then the rest")
	assert.Equal(t, sessionstore.KindCompaction, cevs[0].Kind)
	assert.Equal(t, eid(1), pevs[1].BranchFrom, "the branch's first event")
}

// TestJSONLBlobDirReuse: a second export into the same directory verifies
// the files there and writes none; a damaged file is written again.
func TestJSONLBlobDirReuse(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	dir := filepath.Join(t.TempDir(), "blobs")
	first, err := JSONL(ctx, io.Discard, st, s, Options{BlobDir: dir})
	require.NoError(t, err)
	require.Equal(t, 2, first.BlobFiles)

	second, err := JSONL(ctx, io.Discard, st, s, Options{BlobDir: dir})
	require.NoError(t, err)
	assert.Equal(t, 0, second.BlobFiles)
	assert.Equal(t, 2, second.BlobsPresent)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2)
	damaged := filepath.Join(dir, entries[0].Name())
	require.NoError(t, os.WriteFile(damaged, []byte("not the record"), 0o600))
	third, err := JSONL(ctx, io.Discard, st, s, Options{BlobDir: dir})
	require.NoError(t, err)
	assert.Equal(t, 1, third.BlobFiles)
	assert.Equal(t, 1, third.BlobsPresent)
	b, err := os.ReadFile(damaged)
	require.NoError(t, err)
	sum := sha256.Sum256(b)
	assert.Equal(t, entries[0].Name(), "sha256-"+hex.EncodeToString(sum[:]))
	after, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, after, 2, "no temporary file left")
}

// TestJSONLFork: a fork's tree export is the prefix path from the parent,
// then the fork's own events; its header names the fork point; blobs of
// the prefix are read from the parent.
func TestJSONLFork(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	parent := fixture(t, st)
	fork, err := st.Fork(ctx, parent, eid(7))
	require.NoError(t, err)
	add(t, st, fork.ID, 20, sessionstore.AssistantText("In the fork."))
	forkOfFork, err := st.Fork(ctx, fork.ID, eid(20))
	require.NoError(t, err)
	add(t, st, forkOfFork.ID, 21, sessionstore.UserText("In the fork of the fork."))

	for _, tc := range []struct {
		session uuid.UUID
		from    sessionstore.ForkPoint
		want    []uuid.UUID
	}{
		{fork.ID, sessionstore.ForkPoint{Session: parent, Event: eid(7)}, []uuid.UUID{eid(1), eid(5), eid(6), eid(7), eid(20)}},
		{forkOfFork.ID, sessionstore.ForkPoint{Session: fork.ID, Event: eid(20)}, []uuid.UUID{eid(1), eid(5), eid(6), eid(7), eid(20), eid(21)}},
	} {
		for _, scope := range []Scope{Tree, ActivePath} {
			var buf bytes.Buffer
			dir := t.TempDir()
			stats, err := JSONL(ctx, &buf, st, tc.session, Options{Scope: scope, BlobDir: dir})
			require.NoError(t, err)
			h, evs := readAll(t, buf.Bytes())
			require.NotNil(t, h.Session.ForkedFrom)
			assert.Equal(t, tc.from, *h.Session.ForkedFrom)
			assert.Equal(t, tc.want, ids(evs), "scope %s", scope)
			assert.Equal(t, tc.want[len(tc.want)-1], h.Head)
			assert.Equal(t, 1, stats.BlobFiles, "the prefix's blob, from the parent")
			assert.Equal(t, 1, checkEvents(t, st, tc.session, evs, dir))
		}
	}
}

// TestJSONLLanes: named lanes are in the header.
func TestJSONLLanes(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	require.NoError(t, st.CreateLane(ctx, s, "approach-a", eid(4)))
	var buf bytes.Buffer
	_, err := JSONL(ctx, &buf, st, s, Options{})
	require.NoError(t, err)
	h, _ := readAll(t, buf.Bytes())
	require.Len(t, h.Lanes, 2)
	assert.Equal(t, "approach-a", h.Lanes[0].Name)
	assert.Equal(t, eid(4), h.Lanes[0].Tip)
	assert.False(t, h.Lanes[0].Active)
	assert.Equal(t, sessionstore.DefaultLane, h.Lanes[1].Name)
	assert.Equal(t, eid(11), h.Lanes[1].Tip)
	assert.True(t, h.Lanes[1].Active)
}

// TestEmptySession: a session without events exports a header alone, and
// a transcript with its title.
func TestEmptySession(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "empty"})
	require.NoError(t, err)
	var buf bytes.Buffer
	stats, err := JSONL(ctx, &buf, st, meta.ID, Options{})
	require.NoError(t, err)
	assert.Equal(t, 0, stats.Events)
	h, evs := readAll(t, buf.Bytes())
	assert.Equal(t, uuid.Nil, h.Head)
	assert.Empty(t, evs)
	buf.Reset()
	_, err = Markdown(ctx, &buf, st, meta.ID, Options{})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(buf.String(), "# empty\n"), buf.String())
}

// failingWriter fails every write from the after-th byte on, and counts
// the writes it was asked for after the first failure.
type failingWriter struct {
	after      int
	n          int
	failed     bool
	lateWrites int
}

var errDiskFull = errors.New("disk full")

func (w *failingWriter) Write(p []byte) (int, error) {
	if w.failed {
		w.lateWrites++
		return 0, errDiskFull
	}
	if w.n+len(p) > w.after {
		k := w.after - w.n
		w.n = w.after
		w.failed = true
		return k, errDiskFull
	}
	w.n += len(p)
	return len(p), nil
}

// TestWriteError: the first failed write stops the export, which returns
// it; nothing more is written.
func TestWriteError(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "long"})
	require.NoError(t, err)
	const total = 400
	batch := make([]sessionstore.Event, total)
	for i := range batch {
		batch[i] = sessionstore.AssistantText(strings.Repeat("x", 400))
	}
	_, err = st.AppendBatch(ctx, meta.ID, batch...)
	require.NoError(t, err)
	for _, tc := range []struct {
		name  string
		after int
		run   func(io.Writer) (Stats, error)
	}{
		{"jsonl, first write", 0, func(w io.Writer) (Stats, error) { return JSONL(ctx, w, st, meta.ID, Options{}) }},
		{"jsonl, later write", 70 << 10, func(w io.Writer) (Stats, error) { return JSONL(ctx, w, st, meta.ID, Options{}) }},
		{"markdown, first write", 0, func(w io.Writer) (Stats, error) { return Markdown(ctx, w, st, meta.ID, Options{}) }},
		{"markdown, later write", 70 << 10, func(w io.Writer) (Stats, error) { return Markdown(ctx, w, st, meta.ID, Options{}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &failingWriter{after: tc.after}
			stats, err := tc.run(w)
			require.ErrorIs(t, err, errDiskFull)
			assert.True(t, w.failed)
			assert.Zero(t, w.lateWrites, "no write after the failed one")
			assert.Less(t, stats.Events, total, "stopped before the end")
			assert.Equal(t, int64(tc.after), stats.Bytes)
		})
	}
}

// TestUnknownSession: ErrNotFound passes through.
func TestUnknownSession(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	missing := uuid.Must(uuid.NewV7())
	_, err := JSONL(ctx, io.Discard, st, missing, Options{})
	assert.ErrorIs(t, err, sessionstore.ErrNotFound)
	_, err = Markdown(ctx, io.Discard, st, missing, Options{})
	assert.ErrorIs(t, err, sessionstore.ErrNotFound)
}

// TestScopeErrors: Markdown takes no Tree scope; an unknown scope is
// refused by both.
func TestScopeErrors(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	var buf bytes.Buffer
	_, err := Markdown(ctx, &buf, st, s, Options{Scope: Tree})
	assert.ErrorIs(t, err, ErrScope)
	_, err = JSONL(ctx, &buf, st, s, Options{Scope: "everything"})
	assert.ErrorIs(t, err, ErrScope)
	assert.Zero(t, buf.Len(), "nothing written")
}

// TestReadOnlyStore: an export through a read-only store beside the
// writer holds every event appended before it.
func TestReadOnlyStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w, err := sessionstore.Open(dir, &sessionstore.Options{BlobThreshold: blobThreshold})
	require.NoError(t, err)
	defer w.Close()
	s := fixture(t, w)
	r, err := sessionstore.Open(dir, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	defer r.Close()
	var buf bytes.Buffer
	_, err = JSONL(ctx, &buf, r, s, Options{})
	require.NoError(t, err)
	_, evs := readAll(t, buf.Bytes())
	assert.Len(t, evs, 11)
	checkEvents(t, w, s, evs, "")
}

// TestMarkdownGolden: the transcripts of the fixture, byte for byte (run
// with -update to rewrite them after a deliberate change).
func TestMarkdownGolden(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	fork, err := st.Fork(ctx, s, eid(4))
	require.NoError(t, err)
	add(t, st, fork.ID, 30, sessionstore.AssistantText("Found it: a missing import.\n\n```go\nimport \"os\"\n```"))
	for _, tc := range []struct {
		file    string
		session uuid.UUID
		opts    Options
	}{
		{"path.md", s, Options{MaxOutput: 200}},
		{"path-full.md", s, Options{Full: true}},
		{"context.md", s, Options{Scope: Context, MaxOutput: 100}},
		{"fork.md", fork.ID, Options{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			var buf bytes.Buffer
			stats, err := Markdown(ctx, &buf, st, tc.session, tc.opts)
			require.NoError(t, err)
			assert.Equal(t, int64(buf.Len()), stats.Bytes)
			got := buf.String()
			if tc.session == fork.ID {
				// Fork chooses the fork's id and creation time.
				got = strings.ReplaceAll(got, fork.ID.String(), "<fork id>")
				got = strings.ReplaceAll(got, "- Created: "+stamp(fork.CreatedAt)+"\n", "- Created: <fork time>\n")
			}
			golden := filepath.Join("testdata", tc.file)
			if *update {
				require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), got)

			var again bytes.Buffer
			_, err = Markdown(ctx, &again, st, tc.session, tc.opts)
			require.NoError(t, err)
			assert.Equal(t, buf.String(), again.String(), "deterministic")
		})
	}
}

// TestMarkdownContent: what each kind of event turns into, checked apart
// from the golden files.
func TestMarkdownContent(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	var cut, full bytes.Buffer
	_, err := Markdown(ctx, &cut, st, s, Options{MaxOutput: 100})
	require.NoError(t, err)
	_, err = Markdown(ctx, &full, st, s, Options{Full: true})
	require.NoError(t, err)
	c, f := cut.String(), full.String()
	assert.Contains(t, c, "# fix the build\n")
	assert.Contains(t, c, "- Model: model-x\n")
	assert.Contains(t, c, "- Working directory: `/src/app`\n")
	assert.Contains(t, c, "The build fails. Fix it.")
	assert.NotContains(t, c, "Let me run the tests.", "on the branch left behind")
	assert.Contains(t, c, "## User\n")
	assert.Contains(t, c, "### Tool call: `run_tests`")
	assert.Contains(t, c, "\"pkg\": \"./b\"")
	assert.Contains(t, c, "<details>\n<summary>Tool result: `run_tests` (call <code>c2</code>, 953 bytes)</summary>")
	assert.Contains(t, c, "*Output cut: 100 of 953 bytes shown.*")
	assert.NotContains(t, f, "Output cut")
	assert.Contains(t, f, "````text\n"+bigOutput+"````\n", "a fence longer than the output's")
	assert.Contains(t, c, "> **Compaction**")
	assert.Contains(t, c, "> - approach B\n")
	assert.Contains(t, c, "The path branches at `"+sessionstore.ShortID(eid(1))+"`: this is branch 2 of 2; the others start at `"+sessionstore.ShortID(eid(2))+"`.")
	assert.Contains(t, c, "### custom event\n")
}

// TestMarkdownBranchSummary: a branch summary is a quoted block.
func TestMarkdownBranchSummary(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	_, err := st.AppendBranchSummary(ctx, s, eid(4), sessionstore.BranchSummaryRecord{Summary: sessionstore.Summary{Text: "A failed on pkg."}})
	require.NoError(t, err)
	var buf bytes.Buffer
	_, err = Markdown(ctx, &buf, st, s, Options{})
	require.NoError(t, err)
	assert.Contains(t, buf.String(), "> **Branch summary**")
	assert.Contains(t, buf.String(), "> A failed on pkg.\n")
}

// TestJSONLManyBranches: a tree with branches at many depths (and a second
// root) exports in Tree's order with every record, and its active path as
// FullPath has it.
func TestJSONLManyBranches(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	meta, err := st.Create(ctx, sessionstore.Meta{Name: "branches"})
	require.NoError(t, err)
	var all []uuid.UUID
	state := uint32(7)
	for i := range 300 {
		state = state*1664525 + 1013904223
		if len(all) > 0 && state%7 == 0 {
			require.NoError(t, st.Branch(ctx, meta.ID, all[int(state>>8)%len(all)]))
		}
		ev := sessionstore.UserText(fmt.Sprintf("event %d", i))
		if i%50 == 49 {
			ev = sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: fmt.Sprint(i), Output: strings.Repeat("big ", 200)})
		}
		got, err := st.Append(ctx, meta.ID, ev)
		require.NoError(t, err)
		all = append(all, got.ID)
	}
	for _, scope := range []Scope{Tree, ActivePath} {
		var buf bytes.Buffer
		stats, err := JSONL(ctx, &buf, st, meta.ID, Options{Scope: scope})
		require.NoError(t, err)
		_, evs := readAll(t, buf.Bytes())
		assert.Equal(t, wantIDs(t, st, meta.ID, scope), ids(evs), "scope %s", scope)
		blobs := checkEvents(t, st, meta.ID, evs, "")
		assert.Equal(t, blobs, stats.Blobs)
		if scope == Tree {
			assert.Equal(t, all, ids(evs))
			branches := 0
			for _, ev := range evs {
				if ev.BranchFrom != uuid.Nil {
					branches++
				}
			}
			assert.Greater(t, branches, 20, "the tree branches often")
			assert.Equal(t, 6, blobs)
		}
	}
}

// TestCancelled: a cancelled context stops an export with its error.
func TestCancelled(t *testing.T) {
	st := openStore(t)
	s := fixture(t, st)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := JSONL(ctx, io.Discard, st, s, Options{})
	assert.ErrorIs(t, err, context.Canceled)
	_, err = Markdown(ctx, io.Discard, st, s, Options{})
	assert.ErrorIs(t, err, context.Canceled)
}
