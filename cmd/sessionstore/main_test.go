package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// fixture is a store built by newFixture, with the ids the tests look for.
type fixture struct {
	root       string
	session    sessionstore.Meta
	empty      sessionstore.Meta // a second session, without events
	ask        sessionstore.Event
	call       sessionstore.Event
	blob       sessionstore.Event // a tool result stored as a blob
	firstLeaf  sessionstore.Event // the end of the abandoned branch
	branch     sessionstore.Event // starts the second branch, from ask
	compaction sessionstore.Event
	head       sessionstore.Event
	all        []sessionstore.Event // in append order
}

// bigOutput is a tool output over the 16 KiB blob threshold.
var bigOutput = strings.Repeat("line of test output\n", 1200)

// newFixture builds a closed store in a temporary directory: a session
// with a tool call whose result is a blob, a branch from the first
// message and a compaction on the active branch; and an empty session.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{root: t.TempDir()}
	s, err := sessionstore.Open(f.root, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()

	f.session, err = s.Create(ctx, sessionstore.Meta{Name: "inspect me", WorkingDir: "/src/app", Model: "test-model"})
	require.NoError(t, err)
	id := f.session.ID
	appendEv := func(ev sessionstore.Event) sessionstore.Event {
		t.Helper()
		got, err := s.Append(ctx, id, ev)
		require.NoError(t, err)
		f.all = append(f.all, got)
		return got
	}
	f.ask = appendEv(sessionstore.UserText("Build the feature."))
	appendEv(sessionstore.AssistantText("Running the tests first."))
	f.call = appendEv(sessionstore.ToolCallEvent(sessionstore.ToolCall{CallID: "c1", Name: "run_tests"}))
	f.blob = appendEv(sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: "c1", Output: bigOutput}))
	require.NotEmpty(t, f.blob.Digest, "the tool result should be stored as a blob")
	f.firstLeaf = appendEv(sessionstore.AssistantText("Approach A: rewrite main.go."))

	require.NoError(t, s.Branch(ctx, id, f.ask.ID))
	f.branch = appendEv(sessionstore.AssistantText("Approach B: a new package."))
	require.Equal(t, f.ask.ID, f.branch.BranchFrom)
	f.compaction, err = s.CompactWith(ctx, id, sessionstore.TestSummarizer{}, sessionstore.CompactOptions{})
	require.NoError(t, err)
	f.all = append(f.all, f.compaction)
	f.head = appendEv(sessionstore.UserText("Go on after the summary."))

	f.empty, err = s.Create(ctx, sessionstore.Meta{Name: "empty"})
	require.NoError(t, err)
	return f
}

// runCmd runs the tool and returns its exit status, stdout and stderr.
func runCmd(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	status := run(args, &stdout, &stderr)
	return status, stdout.String(), stderr.String()
}

// lineOf returns the line of out that contains s.
func lineOf(t *testing.T, out, s string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, s) {
			return line
		}
	}
	require.Failf(t, "line not found", "no line holds %q in:\n%s", s, out)
	return ""
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"help"}, {"-h"}, {"frobnicate"}} {
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, exitUsage, status, "args %q", args)
		assert.Empty(t, stdout, "args %q", args)
		assert.Contains(t, stderr, "usage: sessionstore <command>", "args %q", args)
		for name := range commands {
			assert.Contains(t, stderr, "  "+name+" ", "args %q", args)
		}
	}
	_, _, stderr := runCmd("frobnicate")
	assert.Contains(t, stderr, `unknown command "frobnicate"`)
}

func TestBadCommandLines(t *testing.T) {
	root := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ls"}, "missing arguments"},
		{[]string{"ls", root, "extra"}, "too many arguments: extra"},
		{[]string{"tree", root}, "missing arguments"},
		{[]string{"show", root, "s"}, "missing arguments"},
		{[]string{"ls", "-nosuchflag", root}, "flag provided but not defined: -nosuchflag"},
		{[]string{"path", "-width", "-1", root, "s"}, `invalid value "-1" for flag -width: must be 0 or more`},
		{[]string{"gc", root}, "missing arguments"},
	} {
		status, stdout, stderr := runCmd(tc.args...)
		assert.Equal(t, exitUsage, status, "args %q", tc.args)
		assert.Empty(t, stdout, "args %q", tc.args)
		assert.Contains(t, stderr, tc.want, "args %q", tc.args)
		assert.Contains(t, stderr, "usage: sessionstore "+tc.args[0], "args %q", tc.args)
	}
}

func TestNotAStore(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nothing-here")
	for _, args := range [][]string{
		{"ls", dir},
		{"tree", dir, uuid.NewString()},
		{"verify", dir},
		{"gc", dir, uuid.NewString()},
	} {
		status, _, stderr := runCmd(args...)
		assert.Equal(t, exitFail, status, "args %q", args)
		assert.Contains(t, stderr, args[0]+": open store \""+dir+"\"", "args %q", args)
	}
	_, err := os.Stat(dir)
	assert.ErrorIs(t, err, os.ErrNotExist, "no command may create the root")
}

func TestLs(t *testing.T) {
	f := newFixture(t)
	status, stdout, stderr := runCmd("ls", f.root)
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3, stdout)
	assert.Regexp(t, `^ID +NAME +CREATED +UPDATED +WORKING DIR +MODEL$`, lines[0])
	line := lineOf(t, stdout, f.session.ID.String())
	assert.Regexp(t, `^`+f.session.ID.String()+` +inspect me +20\d\d-\d\d-\d\dT[0-9:]+Z +20\d\d-\d\d-\d\dT[0-9:]+Z +/src/app +test-model$`, line)
	assert.Regexp(t, `^`+f.empty.ID.String()+` +empty +\S+ +\S+ +- +-$`, lineOf(t, stdout, f.empty.ID.String()))

	status, stdout, stderr = runCmd("ls", "-json", f.root)
	require.Equal(t, exitOK, status, stderr)
	var metas []sessionstore.Meta
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var m sessionstore.Meta
		require.NoError(t, json.Unmarshal(sc.Bytes(), &m), sc.Text())
		metas = append(metas, m)
	}
	require.Len(t, metas, 2)
	assert.Equal(t, f.session.ID, metas[0].ID)
	assert.Equal(t, "inspect me", metas[0].Name)
	assert.Equal(t, "/src/app", metas[0].WorkingDir)
	assert.Equal(t, "test-model", metas[0].Model)
	assert.Equal(t, f.empty.ID, metas[1].ID)
}

func TestTree(t *testing.T) {
	f := newFixture(t)
	status, stdout, stderr := runCmd("tree", f.root, f.session.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, len(f.all), stdout)

	depth := map[uuid.UUID]int{}
	for _, ev := range f.all {
		if ev.ParentID != uuid.Nil {
			depth[ev.ID] = depth[ev.ParentID] + 1
		}
		line := lineOf(t, stdout, shortID(ev.ID)+" ")
		assert.True(t, strings.HasPrefix(line, strings.Repeat("  ", depth[ev.ID])+shortID(ev.ID)), "indentation of %q", line)
		assert.Contains(t, line, " "+string(ev.Kind)+" ", line)
		assert.Equal(t, ev.ID == f.head.ID, strings.Contains(line, "[HEAD]"), line)
		assert.Equal(t, ev.BranchFrom != uuid.Nil, strings.Contains(line, "[branch from"), line)
	}
	assert.Contains(t, lineOf(t, stdout, shortID(f.blob.ID)), " tool_result    tool ")
	assert.Contains(t, lineOf(t, stdout, shortID(f.branch.ID)), "[branch from "+shortID(f.ask.ID)+"]")
	assert.Contains(t, lineOf(t, stdout, shortID(f.compaction.ID)), " compaction     - ")
	// Depth first: the first branch comes whole before the second.
	assert.Less(t, strings.Index(stdout, shortID(f.firstLeaf.ID)), strings.Index(stdout, shortID(f.branch.ID)))

	// -full, and a prefix of the session id, flags after the arguments.
	status, stdout, stderr = runCmd("tree", f.root, f.session.ID.String()[:30], "-full")
	require.Equal(t, exitOK, status, stderr)
	for _, ev := range f.all {
		assert.Contains(t, stdout, ev.ID.String()+" ")
	}
	assert.Contains(t, stdout, "[branch from "+f.ask.ID.String()+"]")

	// -forks: a chain stays at its level, the children of a fork go one
	// deeper.
	status, stdout, stderr = runCmd("tree", "-forks", f.root, f.session.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.True(t, strings.HasPrefix(lineOf(t, stdout, shortID(f.ask.ID)), shortID(f.ask.ID)))
	assert.True(t, strings.HasPrefix(lineOf(t, stdout, shortID(f.firstLeaf.ID)), "  "+shortID(f.firstLeaf.ID)))
	assert.True(t, strings.HasPrefix(lineOf(t, stdout, shortID(f.head.ID)), "  "+shortID(f.head.ID)))

	// A session without events.
	status, stdout, stderr = runCmd("tree", f.root, f.empty.ID.String())
	assert.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "has no events")
}

func TestPath(t *testing.T) {
	f := newFixture(t)
	// The active path starts at the compaction.
	status, stdout, stderr := runCmd("path", f.root, f.session.ID.String())
	require.Equal(t, exitOK, status, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 2, stdout)
	assert.Regexp(t, `^`+shortID(f.compaction.ID)+` compaction +- +\{"summary":`, lines[0])
	assert.Regexp(t, `^`+shortID(f.head.ID)+` message +user +\{"content":"Go on after the summary."\}$`, lines[1])

	// The abandoned branch, up to its end, named by a short id; the blob
	// record is read and cut to the width.
	status, stdout, stderr = runCmd("path", "-width", "40", f.root, f.session.ID.String(), shortID(f.firstLeaf.ID))
	require.Equal(t, exitOK, status, stderr)
	lines = strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 5, stdout)
	for i, id := range []uuid.UUID{f.ask.ID, f.all[1].ID, f.call.ID, f.blob.ID, f.firstLeaf.ID} {
		assert.True(t, strings.HasPrefix(lines[i], shortID(id)+" "), lines[i])
	}
	blobLine := lineOf(t, stdout, shortID(f.blob.ID))
	assert.Contains(t, blobLine, `{"call_id":"c1","output":"line of`)
	record := blobLine[strings.Index(blobLine, "{"):]
	assert.Equal(t, 40, len([]rune(record)), record)
	assert.True(t, strings.HasSuffix(record, "…"), record)

	// -json: whole events, blob record included.
	status, stdout, stderr = runCmd("path", "-json", f.root, f.session.ID.String(), f.firstLeaf.ID.String())
	require.Equal(t, exitOK, status, stderr)
	var events []sessionstore.Event
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var ev sessionstore.Event
		require.NoError(t, json.Unmarshal(sc.Bytes(), &ev), sc.Text())
		events = append(events, ev)
	}
	require.NoError(t, sc.Err())
	require.Len(t, events, 5)
	assert.Equal(t, f.ask.ID, events[0].ID)
	assert.Equal(t, uuid.Nil, events[0].ParentID)
	assert.Equal(t, f.blob.ID, events[3].ID)
	assert.Equal(t, f.blob.Digest, events[3].Digest)
	var result sessionstore.ToolResult
	require.NoError(t, json.Unmarshal(events[3].Record, &result))
	assert.Equal(t, bigOutput, result.Output)
	assert.Equal(t, f.firstLeaf.ID, events[4].ID)

	// An event of another session, or none at all.
	status, _, stderr = runCmd("path", f.root, f.session.ID.String(), f.empty.ID.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "path: session "+f.session.ID.String()+": leaf event "+f.empty.ID.String()+": not found\n")
	status, _, stderr = runCmd("tree", f.root, f.empty.ID.String()[:24]+"000000000000")
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "tree: session "+f.empty.ID.String()[:24]+"000000000000 not found in \""+f.root+"\"\n")
	status, _, stderr = runCmd("path", f.root, "0123456789ab")
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, `path: no session matches "0123456789ab"`)
}

func TestShow(t *testing.T) {
	f := newFixture(t)
	decode := func(out string) sessionstore.Event {
		t.Helper()
		var ev sessionstore.Event
		require.NoError(t, json.Unmarshal([]byte(out), &ev), out)
		return ev
	}

	status, stdout, stderr := runCmd("show", f.root, f.session.ID.String(), f.blob.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.True(t, strings.HasPrefix(stdout, "{\n  \"id\": \""+f.blob.ID.String()+"\",\n"), "indented JSON")
	ev := decode(stdout)
	assert.Equal(t, f.blob.ID, ev.ID)
	assert.Equal(t, f.call.ID, ev.ParentID)
	assert.Equal(t, sessionstore.KindToolResult, ev.Kind)
	assert.Equal(t, sessionstore.RoleTool, ev.Role)
	assert.Equal(t, f.blob.Digest, ev.Digest)
	assert.Equal(t, f.blob.Size, ev.Size)
	var result sessionstore.ToolResult
	require.NoError(t, json.Unmarshal(ev.Record, &result))
	assert.Equal(t, bigOutput, result.Output)

	// -lazy leaves the blob unread.
	status, stdout, stderr = runCmd("show", "-lazy", f.root, f.session.ID.String(), shortID(f.blob.ID))
	require.Equal(t, exitOK, status, stderr)
	ev = decode(stdout)
	assert.Equal(t, f.blob.ID, ev.ID)
	assert.Equal(t, f.blob.Digest, ev.Digest)
	assert.Equal(t, "null", string(ev.Record))

	// The branch event names where it starts from.
	status, stdout, stderr = runCmd("show", f.root, f.session.ID.String(), f.branch.ID.String())
	require.Equal(t, exitOK, status, stderr)
	ev = decode(stdout)
	assert.Contains(t, stdout, `"branch_from": "`+f.ask.ID.String()+`"`)
	assert.Equal(t, f.ask.ID, ev.BranchFrom)
	assert.JSONEq(t, `{"content":"Approach B: a new package."}`, string(ev.Record))

	// An ambiguous prefix: the longest prefix shared by two event ids.
	a, b := f.ask.ID.String(), f.head.ID.String()
	n := 0
	for n < len(a) && a[n] == b[n] {
		n++
	}
	require.Positive(t, n, "UUIDv7 ids made a moment apart share their time prefix")
	status, stdout, stderr = runCmd("show", f.root, f.session.ID.String(), a[:n])
	assert.Equal(t, exitFail, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "is ambiguous")
	status, _, stderr = runCmd("show", f.root, f.session.ID.String(), "not-hex!")
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, `event "not-hex!" is neither an id nor an id prefix`)
}

// chunkFile returns the first chunk file of a session.
func chunkFile(t *testing.T, root string, session uuid.UUID) string {
	t.Helper()
	path := filepath.Join(root, "sessions", session.String(), "chunks", "000000.jsonl")
	_, err := os.Stat(path)
	require.NoError(t, err)
	return path
}

func TestVerify(t *testing.T) {
	f := newFixture(t)
	status, stdout, stderr := runCmd("verify", f.root)
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	assert.Regexp(t, `(?m)^`+f.session.ID.String()+` ok: 1 chunks \(\d+ bytes\), 8 records, 8 indexed, 1 blobs, head `+f.head.ID.String()+`$`, stdout)
	assert.Regexp(t, `(?m)^`+f.empty.ID.String()+` ok: `, stdout)
	assert.NotContains(t, stdout, "problem")

	// Damage a byte of the first record: its checksum fails and valid
	// records follow, so it is corruption.
	path := chunkFile(t, f.root, f.session.ID)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	at := bytes.Index(data, []byte("Build the feature."))
	require.Positive(t, at)
	data[at] ^= 0x20
	require.NoError(t, os.WriteFile(path, data, 0o600))

	status, stdout, stderr = runCmd("verify", f.root)
	assert.Equal(t, exitFail, status)
	assert.Regexp(t, `(?m)^`+f.session.ID.String()+` CORRUPT: `, stdout)
	assert.Contains(t, stdout, "  problem: "+path+" at offset 0: ")
	assert.Regexp(t, `(?m)^`+f.empty.ID.String()+` ok: `, stdout)
	assert.Contains(t, stderr, "verify: 1 of 2 sessions have problems")

	// Only the sessions named: the clean one passes.
	status, stdout, stderr = runCmd("verify", f.root, f.empty.ID.String())
	assert.Equal(t, exitOK, status, stderr)
	assert.NotContains(t, stdout, f.session.ID.String())

	// The commands that read the record report the damage with its file
	// and offset.
	status, _, stderr = runCmd("show", f.root, f.session.ID.String(), f.ask.ID.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "show: session "+f.session.ID.String()+": event "+f.ask.ID.String()+": ")
	assert.Contains(t, stderr, "corrupt data in "+path+" at offset 0")
	status, _, stderr = runCmd("path", f.root, f.session.ID.String(), f.firstLeaf.ID.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "corrupt data in "+path+" at offset 0")

	// A session that is not there.
	missing := uuid.Must(uuid.NewV7())
	status, _, stderr = runCmd("verify", f.root, missing.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "verify: session "+missing.String()+" not found in \""+f.root+"\"\n")
	assert.Contains(t, stderr, "verify: 1 of 1 sessions have problems")
}

func TestGC(t *testing.T) {
	f := newFixture(t)
	// An orphan blob, as a crash between writing a blob and appending its
	// event leaves: a well-formed name no event refers to.
	dir := filepath.Join(f.root, "sessions", f.session.ID.String(), "blobs", "sha256", "00")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	orphan := filepath.Join(dir, strings.Repeat("0", 62)+".zst")
	require.NoError(t, os.WriteFile(orphan, []byte("orphan"), 0o600))

	status, stdout, stderr := runCmd("gc", f.root, f.session.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, f.session.ID.String()+": removed 1 files (6 bytes): blobs no event refers to and temporary files; kept 1 blobs\n", stdout)
	_, err := os.Stat(orphan)
	assert.ErrorIs(t, err, os.ErrNotExist)

	// The referenced blob is still there.
	status, _, stderr = runCmd("show", f.root, f.session.ID.String(), f.blob.ID.String())
	assert.Equal(t, exitOK, status, stderr)

	// A session held by a writer.
	s, err := sessionstore.Open(f.root, nil)
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Head(context.Background(), f.session.ID) // opens and locks the session
	require.NoError(t, err)
	status, _, stderr = runCmd("gc", f.root, f.session.ID.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "gc: session "+f.session.ID.String()+": ")
	assert.Contains(t, stderr, "another process holds the session open for writing")
}

func TestGCUncompressedRoot(t *testing.T) {
	root := t.TempDir()
	s, err := sessionstore.Open(root, &sessionstore.Options{Compression: sessionstore.CompressionNone})
	require.NoError(t, err)
	meta, err := s.Create(context.Background(), sessionstore.Meta{})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	status, stdout, stderr := runCmd("gc", root, meta.ID.String())
	assert.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "removed 0 files")
}

// TestBesideWriter runs the read-only commands on a root whose session an
// open, writable Store holds (locked) and appends to.
func TestBesideWriter(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer func() { assert.NoError(t, s.Close()) }()
	meta, err := s.Create(ctx, sessionstore.Meta{Name: "live"})
	require.NoError(t, err)
	first, err := s.Append(ctx, meta.ID, sessionstore.UserText("hello"))
	require.NoError(t, err)

	status, stdout, stderr := runCmd("ls", root)
	require.Equal(t, exitOK, status, stderr)
	assert.Regexp(t, `(?m)^`+meta.ID.String()+` +live `, stdout)

	status, stdout, stderr = runCmd("tree", root, meta.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, shortID(first.ID)+" message")

	// The writer goes on; the next read sees its new event.
	second, err := s.Append(ctx, meta.ID, sessionstore.AssistantText("hi"))
	require.NoError(t, err)
	status, stdout, stderr = runCmd("path", root, meta.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, shortID(first.ID)+" message        user      {\"content\":\"hello\"}\n")
	assert.Contains(t, stdout, shortID(second.ID)+" message        assistant {\"content\":\"hi\"}\n")

	status, _, stderr = runCmd("verify", root)
	assert.Equal(t, exitOK, status, stderr)

	// And the writer is undisturbed.
	_, err = s.Append(ctx, meta.ID, sessionstore.UserText("still writing"))
	assert.NoError(t, err)
}

func TestParseInterspersed(t *testing.T) {
	c := &cmdEnv{name: "x", stdout: bufio.NewWriter(&bytes.Buffer{}), stderr: &bytes.Buffer{}}
	fs := c.newFlags("")
	full := fs.Bool("full", false, "")
	width := fs.Int("width", 0, "")
	pos, err := parse(fs, []string{"a", "-full", "b", "-width", "7", "c", "--", "-d"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c", "-d"}, pos)
	assert.True(t, *full)
	assert.Equal(t, 7, *width)
}

func TestTruncate(t *testing.T) {
	assert.Equal(t, "abc", truncate("abc", 3))
	assert.Equal(t, "ab…", truncate("abcd", 3))
	assert.Equal(t, "éé…", truncate("éééé", 3))
	assert.Equal(t, "abcd", truncate("abcd", 0))
	assert.Equal(t, "…", truncate("abcd", 1))
}

// TestSealedChunks reads a session whose full chunks were sealed
// (compressed): tree, path and verify see every event.
func TestSealedChunks(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, &sessionstore.Options{ChunkSize: 2048})
	require.NoError(t, err)
	meta, err := s.Create(ctx, sessionstore.Meta{Name: "long"})
	require.NoError(t, err)
	const n = 60
	var last sessionstore.Event
	for i := range n {
		last, err = s.Append(ctx, meta.ID, sessionstore.UserText(strings.Repeat("x", 100)+strconv.Itoa(i)))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	sealed, err := filepath.Glob(filepath.Join(root, "sessions", meta.ID.String(), "chunks", "*.zst"))
	require.NoError(t, err)
	require.NotEmpty(t, sealed, "the session should have sealed chunks")

	status, stdout, stderr := runCmd("tree", "-forks", root, meta.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, n, strings.Count(stdout, "\n"))
	assert.Contains(t, lineOf(t, stdout, shortID(last.ID)), "[HEAD]")

	status, stdout, stderr = runCmd("path", "-json", root, meta.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, n, strings.Count(stdout, "\n"))
	assert.Contains(t, stdout, `"record":{"content":"`+strings.Repeat("x", 100)+`59"},`)

	status, stdout, stderr = runCmd("verify", root)
	require.Equal(t, exitOK, status, stderr)
	assert.Regexp(t, `ok: \d+ chunks .* `+strconv.Itoa(n)+` records, `+strconv.Itoa(n)+` indexed, 0 blobs, head `+last.ID.String(), stdout)
}
