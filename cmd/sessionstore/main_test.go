package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/sessiontest"
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

// bigOutput is a tool output over the fixture's 16 KiB blob threshold.
var bigOutput = strings.Repeat("line of test output\n", 1200)

// newFixture builds a closed store in a temporary directory: a session
// with a tool call whose result is a blob, a branch from the first
// message and a compaction on the active branch; and an empty session.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{root: t.TempDir()}
	// A 16 KiB blob threshold (the default is 1 MiB), so that the tool
	// result is a blob for the commands that show and check blobs.
	s, err := sessionstore.Open(f.root, &sessionstore.Options{BlobThreshold: 16 << 10})
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
	f.compaction, err = s.CompactWith(ctx, id, sessiontest.Summarizer{}, sessionstore.CompactOptions{})
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

// TestUsage: no arguments or an unknown command is a bad command line
// (the usage on stderr, status 2); help asked for ("help", "-h", "-help",
// "--help") prints it on stdout with status 0, as Go's flag package does.
func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		status int
	}{
		{nil, exitUsage},
		{[]string{"frobnicate"}, exitUsage},
		{[]string{"help", "frobnicate"}, exitUsage},
		{[]string{"help", "tree", "ls"}, exitUsage},
		{[]string{"-h", "tree"}, exitUsage},
		{[]string{"help"}, exitOK},
		{[]string{"-h"}, exitOK},
		{[]string{"-help"}, exitOK},
		{[]string{"--help"}, exitOK},
	} {
		status, stdout, stderr := runCmd(tc.args...)
		assert.Equal(t, tc.status, status, "args %q", tc.args)
		out, quiet := stderr, stdout
		if tc.status == exitOK {
			out, quiet = stdout, stderr
		}
		assert.Empty(t, quiet, "args %q", tc.args)
		assert.True(t, strings.HasPrefix(out, "usage: sessionstore <command>") || strings.Contains(out, "\n\nusage: sessionstore <command>"), "args %q: %s", tc.args, out)
		for name := range commands {
			assert.Contains(t, out, "  "+name+" ", "args %q", tc.args)
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
		{[]string{"repair", root}, "missing arguments"},
		{[]string{"repair", root, "s", "t"}, "too many arguments: t"},
		// An argument that cannot name an id is a bad command line too.
		{[]string{"tree", root, "not-hex!"}, `session "not-hex!" is neither an id nor an id prefix`},
		{[]string{"path", root, "0123", "xyz"}, `event "xyz" is neither an id nor an id prefix`},
		{[]string{"show", root, "0123", "-"}, `event "-" is neither an id nor an id prefix`},
		{[]string{"verify", root, "0123", "garbage"}, `session "garbage" is neither an id nor an id prefix`},
		{[]string{"gc", root, "g"}, `session "g" is neither an id nor an id prefix`},
		{[]string{"repair", root, "r"}, `session "r" is neither an id nor an id prefix`},
	} {
		status, stdout, stderr := runCmd(tc.args...)
		assert.Equal(t, exitUsage, status, "args %q", tc.args)
		assert.Empty(t, stdout, "args %q", tc.args)
		assert.Contains(t, stderr, tc.want, "args %q", tc.args)
		assert.Contains(t, stderr, "usage: sessionstore "+tc.args[0], "args %q", tc.args)
	}
}

// TestNotAStore runs every command on a directory that does not exist, on
// one whose parent does not exist either, and on one that holds no store:
// each says there is no store there, in its own words only (no "read-only"
// from gc or repair, no stat error), and creates nothing.
func TestNotAStore(t *testing.T) {
	tmp := t.TempDir()
	empty := filepath.Join(tmp, "empty")
	require.NoError(t, os.Mkdir(empty, 0o700))
	for _, tc := range []struct{ dir, reason string }{
		{filepath.Join(tmp, "nothing-here"), "the directory does not exist"},
		{filepath.Join(tmp, "no-parent", "nothing-here"), "the directory does not exist"},
		{empty, "it holds no sessions directory"},
	} {
		id := uuid.NewString()
		for _, args := range [][]string{
			{"ls", tc.dir},
			{"tree", tc.dir, id},
			{"path", tc.dir, id},
			{"show", tc.dir, id, id},
			{"verify", tc.dir},
			{"verify", tc.dir, id},
			{"gc", tc.dir, id},
			{"repair", tc.dir, id},
		} {
			status, stdout, stderr := runCmd(args...)
			assert.Equal(t, exitFail, status, "args %q", args)
			assert.Empty(t, stdout, "args %q", args)
			assert.Equal(t, args[0]+": no store at \""+tc.dir+"\": "+tc.reason+"\n", stderr, "args %q", args)
		}
	}
	_, err := os.Stat(filepath.Join(tmp, "nothing-here"))
	assert.ErrorIs(t, err, os.ErrNotExist, "no command may create the root")
	entries, err := os.ReadDir(empty)
	require.NoError(t, err)
	assert.Empty(t, entries, "no command may create a store")
}

func TestLs(t *testing.T) {
	f := newFixture(t)
	status, stdout, stderr := runCmd("ls", f.root)
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3, stdout)
	assert.Regexp(t, `^ID +NAME +CREATED +UPDATED +WORKING DIR +MODEL +TOKENS IN/OUT$`, lines[0])
	line := lineOf(t, stdout, f.session.ID.String())
	assert.Regexp(t, `^`+f.session.ID.String()+` +inspect me +20\d\d-\d\d-\d\dT[0-9:]+Z +20\d\d-\d\d-\d\dT[0-9:]+Z +/src/app +test-model +0/0$`, line)
	assert.Regexp(t, `^`+f.empty.ID.String()+` +empty +\S+ +\S+ +- +- +-$`, lineOf(t, stdout, f.empty.ID.String()))

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

	// A store without sessions says so.
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for _, args := range [][]string{{"ls", root}, {"ls", "-json", root}, {"verify", root}} {
		status, stdout, stderr = runCmd(args...)
		assert.Equal(t, exitOK, status, "args %q: %s", args, stderr)
		assert.Empty(t, stdout, "args %q", args)
		assert.Equal(t, args[0]+": no sessions in \""+root+"\"\n", stderr, "args %q", args)
	}
}

func TestTree(t *testing.T) {
	f := newFixture(t)
	status, stdout, stderr := runCmd("tree", f.root, f.session.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, len(f.all), stdout)

	// A line is indented by the forks above it (ask has two children),
	// and the first line of each branch of a fork starts with "- ".
	kids := map[uuid.UUID]int{}
	for _, ev := range f.all {
		kids[ev.ParentID]++
	}
	level := map[uuid.UUID]int{}
	for _, ev := range f.all {
		indent := ""
		if ev.ParentID != uuid.Nil {
			level[ev.ID] = level[ev.ParentID]
			indent = strings.Repeat("  ", level[ev.ID])
			if kids[ev.ParentID] > 1 {
				level[ev.ID]++
				indent += "- "
			}
		}
		line := lineOf(t, stdout, sessionstore.ShortID(ev.ID)+" ")
		assert.True(t, strings.HasPrefix(line, indent+sessionstore.ShortID(ev.ID)), "indentation of %q", line)
		assert.Contains(t, line, " "+string(ev.Kind)+" ", line)
		assert.Equal(t, ev.ID == f.head.ID, strings.Contains(line, "[HEAD]"), line)
		assert.Equal(t, ev.BranchFrom != uuid.Nil, strings.Contains(line, "[branch from"), line)
	}
	assert.Contains(t, lineOf(t, stdout, sessionstore.ShortID(f.blob.ID)), " tool_result    tool ")
	assert.Contains(t, lineOf(t, stdout, sessionstore.ShortID(f.branch.ID)), "[branch from "+sessionstore.ShortID(f.ask.ID)+"]")
	assert.Contains(t, lineOf(t, stdout, sessionstore.ShortID(f.compaction.ID)), " compaction     - ")
	// Depth first: the first branch comes whole before the second.
	assert.Less(t, strings.Index(stdout, sessionstore.ShortID(f.firstLeaf.ID)), strings.Index(stdout, sessionstore.ShortID(f.branch.ID)))

	// The previews, quoted, after the markers.
	assert.True(t, strings.HasSuffix(lineOf(t, stdout, sessionstore.ShortID(f.ask.ID)), ` B  "Build the feature."`), stdout)
	assert.True(t, strings.HasSuffix(lineOf(t, stdout, sessionstore.ShortID(f.head.ID)), ` B  [HEAD]  "Go on after the summary."`), stdout)
	assert.True(t, strings.HasSuffix(lineOf(t, stdout, sessionstore.ShortID(f.call.ID)), ` B  "run_tests"`), stdout)

	// -forks, which drew this layout when the default indented by depth,
	// is still taken, and changes nothing.
	status, forks, stderr := runCmd("tree", "-forks", f.root, f.session.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, stdout, forks)

	// -full, and a prefix of the session id, flags after the arguments.
	status, stdout, stderr = runCmd("tree", f.root, f.session.ID.String()[:30], "-full")
	require.Equal(t, exitOK, status, stderr)
	for _, ev := range f.all {
		assert.Contains(t, stdout, ev.ID.String()+" ")
	}
	assert.Contains(t, stdout, "[branch from "+f.ask.ID.String()+"]")

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
	assert.Regexp(t, `^`+sessionstore.ShortID(f.compaction.ID)+` compaction +- +\{"summary":`, lines[0])
	assert.Regexp(t, `^`+sessionstore.ShortID(f.head.ID)+` message +user +\{"content":"Go on after the summary."\}$`, lines[1])

	// The abandoned branch, up to its end, named by a short id; the blob
	// record is read and cut to the width.
	status, stdout, stderr = runCmd("path", "-width", "40", f.root, f.session.ID.String(), sessionstore.ShortID(f.firstLeaf.ID))
	require.Equal(t, exitOK, status, stderr)
	lines = strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 5, stdout)
	for i, id := range []uuid.UUID{f.ask.ID, f.all[1].ID, f.call.ID, f.blob.ID, f.firstLeaf.ID} {
		assert.True(t, strings.HasPrefix(lines[i], sessionstore.ShortID(id)+" "), lines[i])
	}
	blobLine := lineOf(t, stdout, sessionstore.ShortID(f.blob.ID))
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
	assert.Contains(t, stderr, `path: no session in "`+f.root+`" matches "0123456789ab"`)

	// A session without events says so.
	status, stdout, stderr = runCmd("path", f.root, f.empty.ID.String())
	assert.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stdout)
	assert.Equal(t, "path: session "+f.empty.ID.String()+" has no events\n", stderr)
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
	status, stdout, stderr = runCmd("show", "-lazy", f.root, f.session.ID.String(), sessionstore.ShortID(f.blob.ID))
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
	assert.Contains(t, stderr, "is ambiguous: it matches "+a+", ")
	assert.Contains(t, stderr, "; give more of the id\n")
	status, stdout, stderr = runCmd("show", f.root, f.session.ID.String(), "not-hex!")
	assert.Equal(t, exitUsage, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, `event "not-hex!" is neither an id nor an id prefix`)
	assert.Contains(t, stderr, "usage: sessionstore show")
}

// newestChunk returns the newest plain chunk file of a session.
func newestChunk(t *testing.T, root string, session uuid.UUID) string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(root, "sessions", session.String(), "chunks", "[0-9][0-9][0-9][0-9][0-9][0-9].jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, paths)
	return paths[len(paths)-1] // Glob sorts
}

// damage flips a byte of the first occurrence of s in the file at path
// (s should not end in a newline: a byte of the record, not its end).
func damage(t *testing.T, path, s string) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	at := bytes.Index(data, []byte(s))
	require.GreaterOrEqual(t, at, 0, "%q not in %s", s, path)
	data[at] ^= 0x20
	require.NoError(t, os.WriteFile(path, data, 0o600))
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
	assert.Regexp(t, `(?m)^`+f.session.ID.String()+` ok: 8 records \(\d+ bytes of chunk lines\), 8 indexed, 1 chunk file \(\d+ bytes on disk\), 1 blob, head `+f.head.ID.String()+`$`, stdout)
	assert.Regexp(t, `(?m)^`+f.empty.ID.String()+` ok: 0 records \(0 bytes of chunk lines\), 0 indexed, 0 chunk files \(0 bytes on disk\), 0 blobs, head -$`, stdout)
	assert.Regexp(t, `(?m)^`+f.empty.ID.String()+` ok: `, stdout)
	assert.NotContains(t, stdout, "problem")
	assert.True(t, strings.HasSuffix(stdout, "\nok: 2 sessions, 8 records, 1 blob checked\n"), "a summary when all is well:\n%s", stdout)

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
	assert.Contains(t, stderr, "(verify lists the session's problems)")
	status, _, stderr = runCmd("path", f.root, f.session.ID.String(), f.firstLeaf.ID.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "corrupt data in "+path+" at offset 0")
	assert.Contains(t, stderr, "(verify lists the session's problems)")

	// A session that is not there.
	missing := uuid.Must(uuid.NewV7())
	status, _, stderr = runCmd("verify", f.root, missing.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "verify: session "+missing.String()+" not found in \""+f.root+"\"\n")
	assert.Contains(t, stderr, "verify: no session verified; 1 not found\n")
}

func TestGC(t *testing.T) {
	f := newFixture(t)
	// An orphan blob, as a crash between writing a blob and appending its
	// event leaves: a well-formed name no event refers to.
	dir := filepath.Join(f.root, "sessions", f.session.ID.String(), "blobs", "sha256", "00")
	require.NoError(t, os.MkdirAll(dir, 0o700))
	orphan := filepath.Join(dir, strings.Repeat("0", 62)+".zst")
	require.NoError(t, os.WriteFile(orphan, []byte("orphan"), 0o600))

	status, stdout, stderr := runCmd("gc", "-dry-run", f.root, f.session.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, f.session.ID.String()+": would remove (dry run: nothing removed) 1 files (6 bytes): blobs no event refers to and temporary files; kept 1 blobs\n", stdout)
	_, err := os.Stat(orphan)
	assert.NoError(t, err, "a dry run removes nothing")

	status, stdout, stderr = runCmd("gc", f.root, f.session.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, f.session.ID.String()+": removed 1 files (6 bytes): blobs no event refers to and temporary files; kept 1 blobs\n", stdout)
	_, err = os.Stat(orphan)
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
	assert.Contains(t, stdout, sessionstore.ShortID(first.ID)+" message")

	// The writer goes on; the next read sees its new event.
	second, err := s.Append(ctx, meta.ID, sessionstore.AssistantText("hi"))
	require.NoError(t, err)
	status, stdout, stderr = runCmd("path", root, meta.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, sessionstore.ShortID(first.ID)+" message        user      {\"content\":\"hello\"}\n")
	assert.Contains(t, stdout, sessionstore.ShortID(second.ID)+" message        assistant {\"content\":\"hi\"}\n")

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
	assert.Contains(t, lineOf(t, stdout, sessionstore.ShortID(last.ID)), "[HEAD]")

	status, stdout, stderr = runCmd("path", "-json", root, meta.ID.String())
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, n, strings.Count(stdout, "\n"))
	assert.Contains(t, stdout, `"record":{"content":"`+strings.Repeat("x", 100)+`59"},`)

	status, stdout, stderr = runCmd("verify", root)
	require.Equal(t, exitOK, status, stderr)
	assert.Regexp(t, `ok: `+strconv.Itoa(n)+` records \(\d+ bytes of chunk lines\), `+strconv.Itoa(n)+` indexed, \d+ chunk files \(\d+ bytes on disk\), 0 blobs, head `+last.ID.String(), stdout)
}

// TestIDForms names sessions and events, in every command that takes them,
// by the forms the tool accepts: the full id, the short id it prints
// (sessionstore.ShortID), a prefix of the full id, the same without its
// dashes, and a prefix of the last group.
func TestIDForms(t *testing.T) {
	f := newFixture(t)
	forms := func(id uuid.UUID) []string {
		full := id.String()
		return []string{full, sessionstore.ShortID(id), full[:30], strings.ReplaceAll(full, "-", "")[:26], full[24:30], strings.ToUpper(sessionstore.ShortID(id))}
	}
	// The short ids tree and path print are sessionstore.ShortID's.
	_, stdout, _ := runCmd("tree", f.root, f.session.ID.String())
	for _, ev := range f.all {
		assert.Contains(t, stdout, sessionstore.ShortID(ev.ID)+" ", "tree")
	}
	_, stdout, _ = runCmd("path", f.root, f.session.ID.String())
	assert.Contains(t, stdout, sessionstore.ShortID(f.head.ID)+" message", "path")

	for _, session := range forms(f.session.ID) {
		for _, event := range forms(f.call.ID) {
			status, stdout, stderr := runCmd("show", f.root, session, event)
			if assert.Equal(t, exitOK, status, "show %s %s: %s", session, event, stderr) {
				assert.Contains(t, stdout, `"id": "`+f.call.ID.String()+`"`)
			}
			status, stdout, stderr = runCmd("path", f.root, session, event)
			if assert.Equal(t, exitOK, status, "path %s %s: %s", session, event, stderr) {
				assert.Contains(t, stdout, sessionstore.ShortID(f.call.ID)+" tool_call")
			}
		}
		for _, cmd := range []string{"tree", "path", "verify", "gc", "repair"} {
			status, stdout, stderr := runCmd(cmd, f.root, session)
			assert.Equal(t, exitOK, status, "%s %s: %s", cmd, session, stderr)
			assert.NotEmpty(t, stdout, "%s %s", cmd, session)
		}
	}

	// A prefix two sessions share is ambiguous, and the message names both.
	a, b := f.session.ID.String(), f.empty.ID.String()
	n := 0
	for n < len(a) && a[n] == b[n] {
		n++
	}
	require.Positive(t, n)
	for _, cmd := range []string{"tree", "path", "verify", "gc", "repair"} {
		status, _, stderr := runCmd(cmd, f.root, a[:n])
		assert.Equal(t, exitFail, status, cmd)
		assert.Contains(t, stderr, cmd+`: session prefix "`+a[:n]+`" is ambiguous: it matches `+a+", "+b+"; give more of the id\n", cmd)
	}
}

// TestRepair cuts a torn tail: verify lists the repair, repair makes it and
// says so, verify is clean afterwards and a second repair has nothing to
// do.
func TestRepair(t *testing.T) {
	f := newFixture(t)
	chunk := newestChunk(t, f.root, f.session.ID)
	fh, err := os.OpenFile(chunk, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = fh.WriteString(`{"id":"01a0`)
	require.NoError(t, err)
	require.NoError(t, fh.Close())
	id := sessionstore.ShortID(f.session.ID)

	status, stdout, stderr := runCmd("verify", f.root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Regexp(t, `(?m)^`+f.session.ID.String()+` ok: `, stdout)
	assert.Contains(t, stdout, "  repair on next open for writing: cut the torn tail of "+chunk+" at offset ")

	status, stdout, stderr = runCmd("repair", f.root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	assert.Regexp(t, `^repaired: cut the torn tail of `+regexp.QuoteMeta(chunk)+` at offset \d+ \(11 bytes, kept in `, stdout)
	assert.Equal(t, 1, strings.Count(stdout, "\n"), stdout)

	status, stdout, stderr = runCmd("verify", f.root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Regexp(t, `(?m)^`+f.session.ID.String()+` ok: 8 records `, stdout)
	assert.NotContains(t, stdout, "repair")

	status, stdout, stderr = runCmd("repair", f.root, id)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, "nothing to repair\n", stdout)

	// A session held by a writer.
	s, err := sessionstore.Open(f.root, nil)
	require.NoError(t, err)
	_, err = s.Head(context.Background(), f.session.ID) // opens and locks the session
	require.NoError(t, err)
	status, stdout, stderr = runCmd("repair", f.root, id)
	assert.Equal(t, exitFail, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "repair: session "+f.session.ID.String()+": ")
	assert.Contains(t, stderr, "another process holds the session open for writing; stop it first")
	require.NoError(t, s.Close())

	// A session damaged beyond repair (a damaged record that valid ones
	// follow, which only Verify finds): nothing is changed.
	damage(t, chunk, "Build the feature.")
	before, err := os.ReadFile(chunk)
	require.NoError(t, err)
	status, stdout, stderr = runCmd("repair", f.root, id)
	assert.Equal(t, exitFail, status)
	assert.Empty(t, stdout)
	assert.Regexp(t, `^repair: session `+f.session.ID.String()+` is damaged beyond repair \(\d+ problems?\), so nothing was changed; `, stderr)
	assert.Contains(t, stderr, "see `sessionstore verify "+f.root+" "+f.session.ID.String()+"` for the problems\n")
	after, err := os.ReadFile(chunk)
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

// TestGCDamagedSession runs gc on a session with a damaged record in the
// middle of its chunk, and on one with a damaged blob: gc verifies first
// and removes nothing.
func TestGCDamagedSession(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, f *fixture)
	}{
		{"record", func(t *testing.T, f *fixture) { damage(t, chunkFile(t, f.root, f.session.ID), "Build the feature.") }},
		{"blob", func(t *testing.T, f *fixture) {
			blobs, err := filepath.Glob(filepath.Join(f.root, "sessions", f.session.ID.String(), "blobs", "sha256", "*", "*"))
			require.NoError(t, err)
			require.Len(t, blobs, 1)
			require.NoError(t, os.WriteFile(blobs[0], []byte("not the blob"), 0o600))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			tc.damage(t, f)
			dir := filepath.Join(f.root, "sessions", f.session.ID.String(), "blobs", "sha256", "00")
			require.NoError(t, os.MkdirAll(dir, 0o700))
			orphan := filepath.Join(dir, strings.Repeat("0", 62)+".zst")
			require.NoError(t, os.WriteFile(orphan, []byte("orphan"), 0o600))

			status, _, _ := runCmd("verify", f.root, f.session.ID.String())
			require.Equal(t, exitFail, status, "verify should call the session damaged")
			status, stdout, stderr := runCmd("gc", f.root, f.session.ID.String())
			assert.Equal(t, exitFail, status)
			assert.Empty(t, stdout)
			assert.Regexp(t, `^gc: session `+f.session.ID.String()+` is damaged \(\d+ problems?\): gc removes nothing from a damaged session; see `+
				regexp.QuoteMeta("`sessionstore verify "+f.root+" "+f.session.ID.String()+"`")+` for the problems\n$`, stderr)
			_, err := os.Stat(orphan)
			assert.NoError(t, err, "gc removed a file")
		})
	}
}

// TestShowDamagedBlob shows an event whose blob is damaged: the event is
// printed without its record, and the error follows.
func TestShowDamagedBlob(t *testing.T) {
	f := newFixture(t)
	blobs, err := filepath.Glob(filepath.Join(f.root, "sessions", f.session.ID.String(), "blobs", "sha256", "*", "*"))
	require.NoError(t, err)
	require.Len(t, blobs, 1)
	require.NoError(t, os.WriteFile(blobs[0], []byte("not the blob"), 0o600))

	status, stdout, stderr := runCmd("show", f.root, f.session.ID.String(), sessionstore.ShortID(f.blob.ID))
	assert.Equal(t, exitFail, status)
	var ev sessionstore.Event
	require.NoError(t, json.Unmarshal([]byte(stdout), &ev), stdout)
	assert.Equal(t, f.blob.ID, ev.ID)
	assert.Equal(t, f.blob.Digest, ev.Digest)
	assert.Equal(t, "null", string(ev.Record))
	assert.Contains(t, stderr, "show: session "+f.session.ID.String()+": event "+f.blob.ID.String()+": cannot read its blob, so it is printed above without its record: ")
	assert.Contains(t, stderr, "corrupt data in "+blobs[0])
}

// TestShowIntactEventInDamagedSession damages the last record of a closed
// session: show prints an earlier, intact event and succeeds, while path,
// which reads the damaged one, reports the damage.
func TestShowIntactEventInDamagedSession(t *testing.T) {
	f := newFixture(t)
	chunk := chunkFile(t, f.root, f.session.ID)
	damage(t, chunk, "Go on after the summary.")

	for _, ev := range []sessionstore.Event{f.ask, f.blob, f.compaction} {
		status, stdout, stderr := runCmd("show", f.root, f.session.ID.String(), sessionstore.ShortID(ev.ID))
		assert.Equal(t, exitOK, status, stderr)
		assert.Empty(t, stderr)
		var got sessionstore.Event
		if assert.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout) {
			assert.Equal(t, ev.ID, got.ID)
			assert.NotEqual(t, "null", string(got.Record))
		}
	}

	status, _, stderr := runCmd("path", f.root, f.session.ID.String())
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stderr, "corrupt data in "+chunk)
}

// TestVerifyNotFound names sessions that verify cannot check: a malformed
// argument is a bad command line and nothing is verified; a session not
// found is counted apart from the sessions with problems.
func TestVerifyNotFound(t *testing.T) {
	f := newFixture(t)
	status, stdout, stderr := runCmd("verify", f.root, f.session.ID.String(), "garbage")
	assert.Equal(t, exitUsage, status)
	assert.Empty(t, stdout, "nothing is verified")
	assert.Contains(t, stderr, `verify: session "garbage" is neither an id nor an id prefix`)
	assert.Contains(t, stderr, "usage: sessionstore verify <root> [session...]")

	third, err := func() (sessionstore.Meta, error) {
		s, err := sessionstore.Open(f.root, nil)
		require.NoError(t, err)
		defer s.Close()
		return s.Create(context.Background(), sessionstore.Meta{Name: "third"})
	}()
	require.NoError(t, err)
	_, err = os.Stat(filepath.Join(f.root, "sessions", third.ID.String()))
	require.NoError(t, err)
	damage(t, chunkFile(t, f.root, f.session.ID), "Build the feature.")
	missing := uuid.Must(uuid.NewV7())
	status, stdout, stderr = runCmd("verify", f.root, sessionstore.ShortID(f.session.ID), missing.String(), sessionstore.ShortID(f.empty.ID), "ffffffffffff", sessionstore.ShortID(third.ID))
	assert.Equal(t, exitFail, status)
	assert.Regexp(t, `(?m)^`+f.session.ID.String()+` CORRUPT: `, stdout)
	assert.Regexp(t, `(?m)^`+f.empty.ID.String()+` ok: `, stdout)
	assert.Regexp(t, `(?m)^`+third.ID.String()+` ok: `, stdout)
	assert.Contains(t, stderr, "verify: session "+missing.String()+" not found in \""+f.root+"\"\n")
	assert.Contains(t, stderr, `verify: no session in "`+f.root+`" matches "ffffffffffff"`+"\n")
	assert.True(t, strings.HasSuffix(stderr, "verify: 1 of 3 sessions have problems; 2 not found\n"), stderr)
}

// TestVerifyByteCounts checks a session beside its writer, whose active
// chunk holds preallocated free space: verify prints the records' bytes
// and the files' size apart.
func TestVerifyByteCounts(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	defer s.Close()
	meta, err := s.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	_, err = s.Append(ctx, meta.ID, sessionstore.UserText("hello"))
	require.NoError(t, err)
	// Flush writes the index lines a writer holds (it writes them in
	// batches), so that the reader finds the record indexed.
	require.NoError(t, s.Flush(ctx, meta.ID))

	ro, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
	require.NoError(t, err)
	rep, err := ro.Verify(ctx, meta.ID)
	require.NoError(t, ro.Close())
	require.NoError(t, err)
	require.Less(t, rep.RecordBytes, rep.ChunkBytes, "the active chunk should be preallocated")

	status, stdout, stderr := runCmd("verify", root)
	require.Equal(t, exitOK, status, stderr)
	assert.True(t, strings.HasPrefix(stdout, fmt.Sprintf("%s ok: 1 record (%d bytes of chunk lines), 1 indexed, 1 chunk file (%d bytes on disk), 0 blobs, head %s\n",
		meta.ID, rep.RecordBytes, rep.ChunkBytes, rep.Head)), stdout)
}

// nilID is what no output may print for "no event".
var nilID = uuid.Nil.String()

// TestNoNilID runs the reading commands on a store whose session lost its
// HEAD file and on an empty session: none prints the nil uuid.
func TestNoNilID(t *testing.T) {
	f := newFixture(t)
	head := filepath.Join(f.root, "sessions", f.session.ID.String(), "HEAD")
	_, err := os.Stat(head)
	require.NoError(t, err)
	require.NoError(t, os.Remove(head))

	for _, args := range [][]string{
		{"ls", f.root},
		{"ls", "-json", f.root},
		{"tree", f.root, f.session.ID.String()},
		{"tree", "-full", f.root, f.session.ID.String()},
		{"tree", f.root, f.empty.ID.String()},
		{"path", f.root, f.session.ID.String()},
		{"path", "-json", f.root, f.session.ID.String(), f.firstLeaf.ID.String()},
		{"path", f.root, f.empty.ID.String()},
		{"show", f.root, f.session.ID.String(), f.ask.ID.String()},
		{"show", "-lazy", f.root, f.session.ID.String(), f.ask.ID.String()},
		{"verify", f.root},
		{"export", f.root, f.session.ID.String()},
		{"export", "-scope", "path", f.root, f.session.ID.String()},
		{"export", "-scope", "context", f.root, f.session.ID.String()},
		{"export", "-format", "md", f.root, f.session.ID.String()},
		{"export", f.root, f.empty.ID.String()},
		{"export", "-format", "md", f.root, f.empty.ID.String()},
	} {
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, exitOK, status, "args %q: %s", args, stderr)
		assert.NotContains(t, stdout, nilID, "args %q", args)
		assert.NotContains(t, stderr, nilID, "args %q", args)
	}
	_, stdout, _ := runCmd("verify", f.root)
	assert.Contains(t, stdout, "  repair on next open for writing: set HEAD to "+f.head.ID.String()+" (missing)\n")
	assert.Regexp(t, `(?m)^`+f.empty.ID.String()+` ok: .*, head -$`, stdout)
	_, stdout, _ = runCmd("show", f.root, f.session.ID.String(), f.ask.ID.String())
	assert.Contains(t, stdout, `"parent_id": null,`)
	_, stdout, _ = runCmd("export", "-scope", "path", f.root, f.session.ID.String())
	assert.Contains(t, stdout, "\n"+`{"id":"`+f.ask.ID.String()+`","parent_id":null,"kind":"message",`)
	_, stdout, _ = runCmd("export", f.root, f.empty.ID.String())
	assert.Contains(t, stdout, `,"head":null,"events":0}`)
}

// TestUnreadableSession damages the session.json of one session: ls and
// verify report it with its path and fail, after doing their work on the
// others, and prefixes still name the others (and it).
func TestUnreadableSession(t *testing.T) {
	f := newFixture(t)
	metaPath := filepath.Join(f.root, "sessions", f.empty.ID.String(), "session.json")
	require.NoError(t, os.WriteFile(metaPath, []byte("{not json"), 0o600))

	// Changed in place, by hand: the listing answers from the store's
	// catalogue, with what the store wrote, until the sessions directory
	// changes (the library's List).
	status, stdout, _ := runCmd("ls", "-json", f.root)
	assert.Equal(t, exitOK, status)
	assert.Contains(t, stdout, `"id":"`+f.empty.ID.String()+`"`)
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(filepath.Join(f.root, "sessions"), later, later))

	status, stdout, stderr := runCmd("ls", f.root)
	assert.Equal(t, exitFail, status)
	assert.Regexp(t, `(?m)^`+f.session.ID.String()+` +inspect me `, stdout)
	assert.NotContains(t, stdout, f.empty.ID.String())
	assert.Contains(t, stderr, "ls: session "+f.empty.ID.String()+": cannot read "+metaPath+": ")
	assert.Contains(t, stderr, "ls: 1 of 2 sessions in \""+f.root+"\" cannot be read (above: the others)\n")

	status, stdout, stderr = runCmd("ls", "-json", f.root)
	assert.Equal(t, exitFail, status)
	assert.Equal(t, 1, strings.Count(stdout, "\n"), stdout)
	assert.Contains(t, stdout, `"id":"`+f.session.ID.String()+`"`)
	assert.Contains(t, stderr, "ls: session "+f.empty.ID.String()+": cannot read "+metaPath+": ")

	status, stdout, stderr = runCmd("verify", f.root)
	assert.Equal(t, exitFail, status)
	assert.Regexp(t, `(?m)^`+f.session.ID.String()+` ok: 8 records `, stdout)
	assert.Contains(t, stdout+stderr, metaPath)
	assert.Contains(t, stderr, "verify: 1 of 2 sessions have problems\n")

	// Prefixes still resolve beside the unreadable session.
	status, stdout, stderr = runCmd("tree", f.root, sessionstore.ShortID(f.session.ID))
	assert.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, sessionstore.ShortID(f.head.ID))
	status, stdout, stderr = runCmd("verify", f.root, sessionstore.ShortID(f.empty.ID))
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout+stderr, metaPath)
	assert.Contains(t, stderr, "verify: 1 of 1 sessions have problems\n")
}

// TestVerifySplitBlobs: verify says how many blobs are split and how
// many long strings they share, and names a string blob that went
// missing.
func TestVerifySplitBlobs(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := sessionstore.Open(root, &sessionstore.Options{StringThreshold: 1000})
	require.NoError(t, err)
	meta, err := s.Create(ctx, sessionstore.Meta{})
	require.NoError(t, err)
	shot := strings.Repeat("iVBORw0KGgo", 200)
	for i := range 3 {
		_, err = s.Append(ctx, meta.ID, sessionstore.ToolResultEvent(sessionstore.ToolResult{CallID: fmt.Sprint("c", i), Output: shot}))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())

	status, stdout, stderr := runCmd("verify", root)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, ", 3 blobs (3 split, their 1 long string stored once), head ")

	// The one string blob is the file that no record names whole.
	strPath := ""
	err = filepath.WalkDir(filepath.Join(root, "sessions", meta.ID.String(), "blobs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && (len(b) < 4 || b[0] != 0x5e || b[1] != 0x2a || b[2] != 0x4d || b[3] != 0x18) {
			strPath = p // not a skippable frame: the string blob
		}
		return err
	})
	require.NoError(t, err)
	require.NotEmpty(t, strPath)
	require.NoError(t, os.Remove(strPath))
	status, stdout, _ = runCmd("verify", root)
	assert.Equal(t, exitFail, status)
	assert.Contains(t, stdout, "  problem: "+strPath+" at offset 0: blob is missing")
}
