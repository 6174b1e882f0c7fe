package sessionstore

import (
	"context"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/blob"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

// goldenSession is the id of the session in testdata/golden.
var goldenSession = uuid.MustParse("01a02f3f-a89d-7d25-b4ac-ac89a183258d")

// writeGoldenWorkload records a small session with a branch, every event
// kind and two chunks, and returns the events of its active path.
func writeGoldenWorkload(t *testing.T, dir string) []Event {
	return writeGoldenWorkloadWith(t, dir, nil)
}

// writeGoldenWorkloadWith is writeGoldenWorkload in a Store with keys
// (Options.Keys), nil for none.
func writeGoldenWorkloadWith(t *testing.T, dir string, keys KeyProvider) []Event {
	t.Helper()
	ctx := context.Background()
	// Plain chunks keep the fixture readable; compressed chunks have their
	// own tests.
	// Strings of 256 bytes and more are stored apart (split blobs), so
	// that the fixture holds them small.
	o := deterministic(Options{ChunkSize: 1024, Compression: CompressionNone, StringThreshold: 256, Keys: keys})
	s, err := Open(dir, &o)
	require.NoError(t, err)
	meta, err := s.Create(ctx, Meta{ID: goldenSession, Name: "golden", WorkingDir: "/workspace", Model: "model-name", Labels: map[string]string{"team": "core"}})
	require.NoError(t, err)
	add := func(ev Event) Event {
		t.Helper()
		out, err := s.Append(ctx, meta.ID, ev)
		require.NoError(t, err)
		return out
	}
	first := add(UserText("Try approach A."))
	add(AssistantMessage(Message{Content: "Approach A has a problem.", Reasoning: "A breaks the build.", Model: "model-name", Usage: &Usage{InputTokens: 120, OutputTokens: 12}}))
	add(ToolCallEvent(ToolCall{CallID: "call_1", Name: "run_tests", Arguments: json.RawMessage(`{"pkg":"./..."}`)}))
	add(ToolResultEvent(ToolResult{CallID: "call_1", Output: "FAIL\tpkg\t0.01s\n\"quoted\" \\ and unicode: é ✓", IsError: true}))
	require.NoError(t, s.Branch(ctx, meta.ID, first.ID))
	add(UserText("Try approach B instead."))
	add(NewEvent(KindCustom, RoleNone, map[string]any{"type": "model_change", "model": "other-model"}))
	add(AssistantText("Approach B works."))
	// A record over the blob threshold: stored in blobs/, referenced by
	// digest from its chunk line.
	add(ToolResultEvent(ToolResult{CallID: "call_2", Output: strings.Repeat("PASS\tpkg/module\t0.01s\n", 1000)}))
	// The same long string in two records (a screenshot sent twice):
	// each record a split blob, the string one string blob.
	shot := goldenScreenshot()
	add(ToolResultEvent(ToolResult{CallID: "call_3", Output: shot}))
	add(NewEvent(KindCustom, RoleUser, map[string]any{"type": "screenshot", "media_type": "image/png", "data": shot}))
	path, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	return path
}

// goldenScreenshot is a stand-in for a base64 image: 300 bytes that
// compress poorly.
func goldenScreenshot() string {
	var b strings.Builder
	x := uint32(2463534242)
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	for range 300 {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b.WriteByte(alphabet[x%64])
	}
	return b.String()
}

// readTree maps every regular file under dir to its content.
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	require.NoError(t, err)
	return out
}

// TestGoldenFiles pins the on-disk format: the same workload must write the
// same bytes as testdata/golden holds. Run with -update after a deliberate
// format change (and bump formatVersion).
func TestGoldenFiles(t *testing.T) {
	dir := t.TempDir()
	path := writeGoldenWorkload(t, dir)
	got := readTree(t, dir)
	// The catalogue records files' modification times, which differ run to
	// run; its format is pinned by TestCatalogueCodec.
	require.Contains(t, got, catalogueName)
	for _, name := range []string{catalogueName, catalogueLogName, catalogueLockName} {
		delete(got, name)
	}
	golden := filepath.Join("testdata", "golden")
	pathFile := filepath.Join("testdata", "golden-active-path.json")
	if *update {
		require.NoError(t, os.RemoveAll(golden))
		for name, content := range got {
			p := filepath.Join(golden, filepath.FromSlash(name))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
		}
		b, err := json.MarshalIndent(path, "", "  ")
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(pathFile, append(b, '\n'), 0o644))
	}
	want := readTree(t, golden)
	assert.Equal(t, want, got)
	// The workload spans two chunks and writes a blob, so rotation and
	// blobs are part of the golden.
	assert.Contains(t, got, "sessions/"+goldenSession.String()+"/chunks/000001.jsonl")
	// The three records over the string threshold are split blobs; the
	// screenshot both name is stored once, beside the test log's string.
	blobs, split := 0, 0
	for name, content := range got {
		if strings.Contains(name, "/blobs/sha256/") && strings.HasSuffix(name, blobExt) {
			blobs++
			if blob.IsSplit([]byte(content)) {
				split++
			}
		}
	}
	assert.Equal(t, 5, blobs)
	assert.Equal(t, 3, split)
}

// TestGoldenLoad opens a copy of the committed fixture, as a harness would
// after an upgrade, and loads it.
func TestGoldenLoad(t *testing.T) {
	dir := copyFixture(t, "golden")
	s, err := Open(dir, &Options{Compression: CompressionNone})
	require.NoError(t, err)
	defer s.Close()
	ctx := context.Background()

	want := activePathFixture(t, "golden-active-path.json")
	got, err := s.Load(ctx, goldenSession)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].ID, got[i].ID)
		assert.Equal(t, want[i].ParentID, got[i].ParentID)
		assert.Equal(t, want[i].BranchFrom, got[i].BranchFrom)
		assert.Equal(t, want[i].Kind, got[i].Kind)
		assert.Equal(t, want[i].Role, got[i].Role)
		assert.True(t, want[i].Time.Equal(got[i].Time))
		assert.JSONEq(t, string(want[i].Record), string(got[i].Record))
	}
	tree, err := s.Tree(ctx, goldenSession)
	require.NoError(t, err)
	assert.Len(t, tree, 10)
	metas, err := s.List(ctx)
	require.NoError(t, err)
	require.Len(t, metas, 1)
	assert.Equal(t, "golden", metas[0].Name)
	assert.Equal(t, map[string]string{"team": "core"}, metas[0].Labels)
}

// activePathFixture reads the events of an active path a golden test wrote
// to testdata/<name>.
func activePathFixture(t *testing.T, name string) []Event {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var want []Event
	require.NoError(t, json.Unmarshal(b, &want))
	return want
}

// copyFixture copies testdata/<name> to a temporary directory, since
// opening a session takes its lock and may repair it.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range readTree(t, filepath.Join("testdata", name)) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	}
	return dir
}

// TestFormat2Fixture opens a copy of a session written in format 2
// (testdata/format2, the golden workload of the build before split
// blobs): it loads as it was written, appends to it store no string
// apart (a build reading format 2 at most must still read it), and after
// Upgrade, which says format 3 and rewrites no chunk, a record's long
// string is stored apart.
func TestFormat2Fixture(t *testing.T) {
	ctx := context.Background()
	dir := copyFixture(t, "format2")
	chunk0 := filepath.Join(dir, "sessions", goldenSession.String(), "chunks", "000000.jsonl")
	before, err := os.ReadFile(chunk0)
	require.NoError(t, err)
	s, err := Open(dir, &Options{Compression: CompressionNone, StringThreshold: 64})
	require.NoError(t, err)
	defer s.Close()

	want := activePathFixture(t, "format2-active-path.json")
	got, err := s.Load(ctx, goldenSession)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].ID, got[i].ID)
		assert.JSONEq(t, string(want[i].Record), string(got[i].Record))
	}

	sdir := filepath.Join(dir, "sessions", goldenSession.String())
	splitBlobs := func() (all, split int) {
		t.Helper()
		err := filepath.WalkDir(filepath.Join(sdir, blobsDir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, blobExt) {
				return err
			}
			b, err := os.ReadFile(p)
			if err == nil {
				all++
				if blob.IsSplit(b) {
					split++
				}
			}
			return err
		})
		require.NoError(t, err)
		return all, split
	}
	shot := ToolResultEvent(ToolResult{CallID: "call_9", Output: goldenScreenshot()})
	_, err = s.Append(ctx, goldenSession, shot)
	require.NoError(t, err)
	all, split := splitBlobs()
	assert.Equal(t, 1, all, "format 2: the short record stays inline")
	assert.Zero(t, split)
	_, format, err := readMeta(s.opts.fs, sdir, goldenSession)
	require.NoError(t, err)
	assert.Equal(t, 2, format)

	require.NoError(t, s.Upgrade(ctx, goldenSession))
	_, format, err = readMeta(s.opts.fs, sdir, goldenSession)
	require.NoError(t, err)
	assert.Equal(t, formatVersion, format)
	after, err := os.ReadFile(chunk0)
	require.NoError(t, err)
	assert.Equal(t, before, after, "the upgrade from format 2 rewrites no chunk")
	out, err := s.Append(ctx, goldenSession, shot)
	require.NoError(t, err)
	all, split = splitBlobs()
	assert.Equal(t, 3, all, "format 3: the record a split blob, its string a blob")
	assert.Equal(t, 1, split)
	ev, err := s.Event(ctx, goldenSession, out.ID)
	require.NoError(t, err)
	ev, err = s.Resolve(ctx, goldenSession, ev)
	require.NoError(t, err)
	assert.Equal(t, string(shot.Record), string(ev.Record), "read back byte for byte")
	r, err := s.Verify(ctx, goldenSession)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}
