package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// wsFixture is a closed store whose session recorded workspace snapshots:
//
//	ask -> snap1 (full: main.go, run.sh, docs/README.md) -> reply
//	    -> snap2 (main.go changed, docs/README.md deleted, util.go added) -> head
//
// and a session without events.
type wsFixture struct {
	root         string
	session      uuid.UUID
	empty        uuid.UUID
	ask          sessionstore.Event // before any snapshot
	snap1, snap2 sessionstore.Event
	reply, head  sessionstore.Event
}

// The files of the fixture's snapshots.
const (
	mainV1 = "package main\n\nfunc main() {}\n"
	mainV2 = "package main\n\nfunc main() { run() }\n"
	runSh  = "#!/bin/sh\nexec go run .\n"
	readme = "# app\n"
	utilGo = "package main\n\nfunc run() {}\n"
)

func newWSFixture(t *testing.T) *wsFixture {
	t.Helper()
	ctx := context.Background()
	f := &wsFixture{root: t.TempDir()}
	s, err := sessionstore.Open(f.root, nil)
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	m, err := s.Create(ctx, sessionstore.Meta{Name: "workspace"})
	require.NoError(t, err)
	f.session = m.ID
	add := func(ev sessionstore.Event) sessionstore.Event {
		t.Helper()
		got, err := s.Append(ctx, f.session, ev)
		require.NoError(t, err)
		return got
	}
	f.ask = add(sessionstore.UserText("Make main call run."))
	f.snap1, err = s.RecordFiles(ctx, f.session, "before the edit",
		sessionstore.FileWrite{Path: "main.go", Data: []byte(mainV1)},
		sessionstore.FileWrite{Path: "run.sh", Data: []byte(runSh), Mode: 0o755},
		sessionstore.FileWrite{Path: "docs/README.md", Data: []byte(readme)})
	require.NoError(t, err)
	f.reply = add(sessionstore.AssistantText("Editing main.go."))
	f.snap2, err = s.RecordFiles(ctx, f.session, "after the edit",
		sessionstore.FileWrite{Path: "main.go", Data: []byte(mainV2)},
		sessionstore.FileWrite{Path: "docs/README.md", Deleted: true},
		sessionstore.FileWrite{Path: "util.go", Data: []byte(utilGo)})
	require.NoError(t, err)
	f.head = add(sessionstore.AssistantText("Done."))
	e, err := s.Create(ctx, sessionstore.Meta{Name: "empty"})
	require.NoError(t, err)
	f.empty = e.ID
	return f
}

// digest12 is the digest prefix files prints for content.
func digest12(content string) string {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:])[:12]
}

func TestFiles(t *testing.T) {
	f := newWSFixture(t)
	root, sid := f.root, f.session.String()
	v2 := "-rw-r--r--         36 " + digest12(mainV2) + " main.go\n" +
		"-rwxr-xr-x         24 " + digest12(runSh) + " run.sh\n" +
		"-rw-r--r--         28 " + digest12(utilGo) + " util.go\n"
	v1 := "-rw-r--r--          6 " + digest12(readme) + " docs/README.md\n" +
		"-rw-r--r--         29 " + digest12(mainV1) + " main.go\n" +
		"-rwxr-xr-x         24 " + digest12(runSh) + " run.sh\n"
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stdout string
		stderr string // contained in stderr; "" for none at all
	}{
		{"active path's end", []string{"files", root, sid}, exitOK, v2, ""},
		{"at the second snapshot", []string{"files", root, sid, f.snap2.ID.String()}, exitOK, v2, ""},
		{"at the first snapshot, by short id", []string{"files", root, sid, sessionstore.ShortID(f.snap1.ID)}, exitOK, v1, ""},
		{"after the first snapshot", []string{"files", root, sid, f.reply.ID.String()}, exitOK, v1, ""},
		{"flags after the arguments", []string{"files", root, sessionstore.ShortID(f.session), sessionstore.ShortID(f.snap1.ID), "-json=false"}, exitOK, v1, ""},
		{"before any snapshot", []string{"files", root, sid, f.ask.ID.String()}, exitOK, "",
			"files: session " + sid + ": no workspace snapshot on the path to event " + f.ask.ID.String() + "\n"},
		{"a session without events", []string{"files", root, f.empty.String()}, exitOK, "",
			"files: session " + f.empty.String() + " has no events\n"},
		{"an event the session does not have", []string{"files", root, sid, f.empty.String()}, exitFail, "",
			"files: session " + sid + ": event " + f.empty.String() + ": not found\n"},
		{"a prefix no event has", []string{"files", root, sid, "ffffffffffff"}, exitFail, "",
			`files: session ` + sid + `: no event matches "ffffffffffff"`},
		{"not an id", []string{"files", root, sid, "main.go"}, exitUsage, "",
			`files: event "main.go" is neither an id nor an id prefix`},
		{"too many arguments", []string{"files", root, sid, f.snap1.ID.String(), "x"}, exitUsage, "", "too many arguments: x"},
		{"missing arguments", []string{"files", root}, exitUsage, "", "missing arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, stdout, stderr := runCmd(tc.args...)
			assert.Equal(t, tc.status, status, stderr)
			assert.Equal(t, tc.stdout, stdout)
			if tc.stderr == "" {
				assert.Empty(t, stderr)
			} else {
				assert.Contains(t, stderr, tc.stderr)
			}
		})
	}

	// -json: each manifest entry whole, one a line.
	status, stdout, stderr := runCmd("files", "-json", root, sid, sessionstore.ShortID(f.snap1.ID))
	require.Equal(t, exitOK, status, stderr)
	var got []sessionstore.FileEntry
	sc := bufio.NewScanner(strings.NewReader(stdout))
	for sc.Scan() {
		var e sessionstore.FileEntry
		require.NoError(t, json.Unmarshal(sc.Bytes(), &e), sc.Text())
		got = append(got, e)
	}
	require.Len(t, got, 3, stdout)
	assert.Equal(t, "docs/README.md", got[0].Path)
	assert.Equal(t, "run.sh", got[2].Path)
	assert.Equal(t, fs.FileMode(0o755), got[2].Mode)
	assert.Equal(t, int64(len(runSh)), got[2].Size)
	sum := sha256.Sum256([]byte(runSh))
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), got[2].Digest)
	assert.False(t, got[2].Deleted)
}

func TestDiff(t *testing.T) {
	f := newWSFixture(t)
	root, sid := f.root, f.session.String()
	s1, s2 := f.snap1.ID.String(), f.snap2.ID.String()
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		stdout string
		stderr string
	}{
		{"forward", []string{"diff", root, sid, s1, s2}, exitOK,
			"deleted  docs/README.md\nmodified main.go\nadded    util.go\n", ""},
		{"backward, by short ids", []string{"diff", root, sid, sessionstore.ShortID(f.snap2.ID), sessionstore.ShortID(f.snap1.ID)}, exitOK,
			"added    docs/README.md\nmodified main.go\ndeleted  util.go\n", ""},
		{"from before any snapshot: every file added", []string{"diff", root, sid, f.ask.ID.String(), f.head.ID.String()}, exitOK,
			"added    main.go\nadded    run.sh\nadded    util.go\n", ""},
		{"no change between", []string{"diff", root, sid, s2, f.head.ID.String()}, exitOK, "",
			"diff: no file differs between event " + s2 + " and event " + f.head.ID.String() + "\n"},
		{"an event the session does not have", []string{"diff", root, sid, s1, f.empty.String()}, exitFail, "",
			"diff: session " + sid + ": event " + f.empty.String() + ": not found\n"},
		{"a prefix no event has", []string{"diff", root, sid, "ffffffffffff", s2}, exitFail, "",
			`diff: session ` + sid + `: no event matches "ffffffffffff"`},
		{"not an id", []string{"diff", root, sid, s1, "HEAD"}, exitUsage, "",
			`diff: event "HEAD" is neither an id nor an id prefix`},
		{"missing arguments", []string{"diff", root, sid, s1}, exitUsage, "", "missing arguments"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, stdout, stderr := runCmd(tc.args...)
			assert.Equal(t, tc.status, status, stderr)
			assert.Equal(t, tc.stdout, stdout)
			if tc.stderr == "" {
				assert.Empty(t, stderr)
			} else {
				assert.Contains(t, stderr, tc.stderr)
			}
		})
	}

	// -json: the file before and after, null where it is absent.
	status, stdout, stderr := runCmd("diff", "-json", root, sid, s1, s2)
	require.Equal(t, exitOK, status, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3, stdout)
	var ch struct {
		Path     string
		Op       string
		From, To *sessionstore.FileEntry
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &ch))
	assert.Equal(t, "docs/README.md", ch.Path)
	assert.Equal(t, "deleted", ch.Op)
	require.NotNil(t, ch.From)
	assert.Equal(t, int64(len(readme)), ch.From.Size)
	assert.Nil(t, ch.To)
	assert.Contains(t, lines[0], `"to":null`)
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &ch))
	assert.Equal(t, "modified", ch.Op)
	require.NotNil(t, ch.From)
	require.NotNil(t, ch.To)
	assert.Equal(t, int64(len(mainV1)), ch.From.Size)
	assert.Equal(t, int64(len(mainV2)), ch.To.Size)
	ch.From, ch.To = nil, nil
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &ch))
	assert.Equal(t, "added", ch.Op)
	assert.Nil(t, ch.From)
	require.NotNil(t, ch.To)
	assert.Equal(t, "util.go", ch.To.Path)
}

// fileState is what a directory holds, to tell whether a command changed
// it: each entry's type and mode, size, modification time and content.
func fileState(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		v := info.Mode().String() + " " + info.ModTime().Format(time.RFC3339Nano)
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			v += " " + string(b)
		}
		out[rel] = v
		return nil
	})
	require.NoError(t, err)
	return out
}

// workDir makes a directory holding main.go as the first snapshot has it,
// run.sh with other content and a file no snapshot has.
func workDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "work")
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte(mainV1), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "run.sh"), []byte("#!/bin/sh\necho edited\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "scratch.txt"), []byte("notes"), 0o644))
	return dir
}

func TestRestore(t *testing.T) {
	f := newWSFixture(t)
	root, sid := f.root, f.session.String()
	s1 := f.snap1.ID.String()

	// A dry run lists the changes and leaves the directory as it was.
	dir := workDir(t)
	before := fileState(t, dir)
	status, stdout, stderr := runCmd("restore", "-dry-run", root, sid, sessionstore.ShortID(f.snap1.ID), dir)
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	assert.Equal(t, "would write   docs/README.md\nwould write   run.sh\nwould remove  scratch.txt\n"+
		"dry run, nothing changed: restoring event "+s1+" into "+dir+" would write 2 files, would remove 1 file, 1 unchanged\n", stdout)
	assert.Equal(t, before, fileState(t, dir), "a dry run changes nothing")

	// A dry run into a directory that does not exist creates nothing.
	missing := filepath.Join(t.TempDir(), "not-yet")
	status, stdout, stderr = runCmd("restore", "-dry-run", root, sid, s1, missing)
	require.Equal(t, exitOK, status, stderr)
	assert.Contains(t, stdout, "would write 3 files, would remove 0 files, 0 unchanged\n")
	_, err := os.Stat(missing)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	// Ignore rules leave the files they match alone: neither compared
	// nor removed.
	ignoring := workDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(ignoring, "build.log"), []byte("log"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ignoring, "docs", ".gitignore"), []byte("*.tmp\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ignoring, "docs", "x.tmp"), []byte("tmp"), 0o644))
	for _, tc := range []struct {
		flags  []string
		listed string
	}{
		{nil, "would write   docs/README.md\nwould write   run.sh\nwould remove  build.log\nwould remove  docs/.gitignore\nwould remove  docs/x.tmp\nwould remove  scratch.txt\n"},
		{[]string{"-ignore", "*.log"}, "would write   docs/README.md\nwould write   run.sh\nwould remove  docs/.gitignore\nwould remove  docs/x.tmp\nwould remove  scratch.txt\n"},
		{[]string{"-ignore", "*.log", "-ignore", "/scratch.txt", "-ignore", ".gitignore", "-gitignore"}, "would write   docs/README.md\nwould write   run.sh\n"},
	} {
		args := append(append([]string{"restore", "-dry-run"}, tc.flags...), root, sid, s1, ignoring)
		status, stdout, stderr := runCmd(args...)
		require.Equal(t, exitOK, status, "%q: %s", tc.flags, stderr)
		assert.True(t, strings.HasPrefix(stdout, tc.listed), "%q:\n%s", tc.flags, stdout)
		assert.Equal(t, strings.Count(tc.listed, "\n")+1, strings.Count(stdout, "\n"), "%q:\n%s", tc.flags, stdout)
	}
	before = fileState(t, ignoring)
	status, _, stderr = runCmd("restore", "-gitignore", "-ignore", "*.log", "-ignore", ".gitignore", root, sid, s1, ignoring)
	require.Equal(t, exitOK, status, stderr)
	after := fileState(t, ignoring)
	for _, name := range []string{"build.log", "docs/.gitignore", "docs/x.tmp"} {
		assert.Equal(t, before[name], after[name], "%s is ignored: left as it was", name)
	}
	assert.NotContains(t, after, "scratch.txt")

	// The restore makes the directory what the dry run said.
	status, stdout, stderr = runCmd("restore", root, sid, s1, dir)
	require.Equal(t, exitOK, status, stderr)
	assert.Empty(t, stderr)
	assert.Equal(t, "wrote    docs/README.md\nwrote    run.sh\nremoved  scratch.txt\n"+
		"restored event "+s1+" into "+dir+": wrote 2 files, removed 1 file, 1 unchanged\n", stdout)
	for name, want := range map[string]struct {
		content string
		mode    fs.FileMode
	}{"main.go": {mainV1, 0o644}, "run.sh": {runSh, 0o755}, "docs/README.md": {readme, 0o644}} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want.content, string(b), name)
		info, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, want.mode, info.Mode().Perm(), name)
	}
	_, err = os.Stat(filepath.Join(dir, "scratch.txt"))
	assert.ErrorIs(t, err, fs.ErrNotExist)

	// Again: nothing to do.
	status, stdout, stderr = runCmd("restore", root, sid, s1, dir)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, "restored event "+s1+" into "+dir+": wrote 0 files, removed 0 files, 3 unchanged\n", stdout)

	// Into a new directory, the active path's files.
	fresh := filepath.Join(t.TempDir(), "a", "b")
	status, stdout, stderr = runCmd("restore", root, sid, f.head.ID.String(), fresh)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, "wrote    main.go\nwrote    run.sh\nwrote    util.go\nrestored event "+f.head.ID.String()+" into "+fresh+": wrote 3 files, removed 0 files, 0 unchanged\n", stdout)
	b, err := os.ReadFile(filepath.Join(fresh, "main.go"))
	require.NoError(t, err)
	assert.Equal(t, mainV2, string(b))

	// Refusals change nothing in the directory.
	dir = workDir(t)
	before = fileState(t, dir)
	inside := filepath.Join(root, "sessions", "ws")
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		msg    string
	}{
		{"an event before any snapshot", []string{"restore", root, sid, f.ask.ID.String(), dir}, exitFail,
			"restore: session " + sid + ": no workspace snapshot on the path to event " + f.ask.ID.String() + ", so there is nothing to restore (it would remove every file of " + dir + "); nothing changed\n"},
		{"the same, dry run", []string{"restore", "-dry-run", root, sid, f.ask.ID.String(), dir}, exitFail, "no workspace snapshot on the path to event"},
		{"an event the session does not have", []string{"restore", root, sid, f.empty.String(), dir}, exitFail,
			"restore: session " + sid + ": event " + f.empty.String() + ": not found\n"},
		{"the same, -branch", []string{"restore", "-branch", root, sid, f.empty.String(), dir}, exitFail,
			"restore: session " + sid + ": event " + f.empty.String() + ": not found\n"},
		{"a prefix no event has", []string{"restore", root, sid, "ffffffffffff", dir}, exitFail, `no event matches "ffffffffffff"`},
		{"a session the store does not have", []string{"restore", root, "ffffffffffff", s1, dir}, exitFail, `restore: no session in "` + root + `" matches "ffffffffffff"`},
		{"not an id", []string{"restore", root, sid, "last", dir}, exitUsage, `restore: event "last" is neither an id nor an id prefix`},
		{"missing the directory", []string{"restore", root, sid, s1}, exitUsage, "missing arguments"},
		{"too many arguments", []string{"restore", root, sid, s1, dir, "more"}, exitUsage, "too many arguments: more"},
		{"a directory inside the store", []string{"restore", root, sid, s1, inside}, exitFail, "holds or is inside the store"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, stdout, stderr := runCmd(tc.args...)
			assert.Equal(t, tc.status, status, stderr)
			assert.Empty(t, stdout)
			assert.Contains(t, stderr, tc.msg)
			assert.Equal(t, before, fileState(t, dir))
		})
	}
	_, err = os.Stat(inside)
	assert.ErrorIs(t, err, fs.ErrNotExist)
}

// TestRestoreBranch: -branch moves the active lane to the event once the
// files are written, durably (the next append, in another process, goes
// on from it); with -dry-run it moves nothing. Without -branch restore
// reads the store only, beside a writer; with it, it needs the session.
func TestRestoreBranch(t *testing.T) {
	ctx := context.Background()
	f := newWSFixture(t)
	root, sid := f.root, f.session.String()
	s1 := f.snap1.ID.String()
	nextParent := func() uuid.UUID {
		t.Helper()
		s, err := sessionstore.Open(root, &sessionstore.Options{ReadOnly: true})
		require.NoError(t, err)
		defer s.Close()
		p, _, err := s.NextParent(ctx, f.session)
		require.NoError(t, err)
		return p
	}

	dir := filepath.Join(t.TempDir(), "work")
	status, stdout, stderr := runCmd("restore", "-dry-run", "-branch", root, sid, s1, dir)
	require.Equal(t, exitOK, status, stderr)
	assert.NotContains(t, stdout, "lane")
	assert.Equal(t, f.head.ID, nextParent(), "a dry run moves nothing")

	// Beside a writer that holds the session: a plain restore reads.
	w, err := sessionstore.Open(root, nil)
	require.NoError(t, err)
	_, err = w.Head(ctx, f.session) // opens and locks the session
	require.NoError(t, err)
	status, _, stderr = runCmd("restore", root, sid, s1, dir)
	assert.Equal(t, exitOK, status, stderr)
	other := filepath.Join(t.TempDir(), "other")
	status, stdout, stderr = runCmd("restore", "-branch", root, sid, s1, other)
	assert.Equal(t, exitFail, status)
	assert.Empty(t, stdout)
	assert.Contains(t, stderr, "another process holds the session open for writing")
	_, err = os.Stat(other)
	assert.ErrorIs(t, err, fs.ErrNotExist, "nothing written when the session cannot be had")
	require.NoError(t, w.Close())

	status, stdout, stderr = runCmd("restore", "-branch", root, sid, sessionstore.ShortID(f.snap1.ID), dir)
	require.Equal(t, exitOK, status, stderr)
	assert.Equal(t, "restored event "+s1+" into "+dir+": wrote 0 files, removed 0 files, 3 unchanged\n"+
		"moved lane "+sessionstore.DefaultLane+" to event "+s1+": the next append goes on from it\n", stdout)
	assert.Equal(t, f.snap1.ID, nextParent())

	// The next append, in another process, is a child of the snapshot.
	w, err = sessionstore.Open(root, nil)
	require.NoError(t, err)
	ev, err := w.Append(ctx, f.session, sessionstore.UserText("try again"))
	require.NoError(t, err)
	require.NoError(t, w.Close())
	assert.Equal(t, f.snap1.ID, ev.ParentID)
	assert.Equal(t, f.snap1.ID, ev.BranchFrom, "the snapshot had a child: a branch")
}

// TestWorkspaceNotAStore: the workspace commands on a directory that
// holds no store say so and create nothing, neither a store nor restore's
// directory.
func TestWorkspaceNotAStore(t *testing.T) {
	tmp := t.TempDir()
	root := filepath.Join(tmp, "nothing-here")
	dir := filepath.Join(tmp, "work")
	id := uuid.NewString()
	for _, args := range [][]string{
		{"files", root, id},
		{"diff", root, id, id, id},
		{"restore", root, id, id, dir},
		{"restore", "-dry-run", root, id, id, dir},
		{"restore", "-branch", root, id, id, dir},
	} {
		status, stdout, stderr := runCmd(args...)
		assert.Equal(t, exitFail, status, "args %q", args)
		assert.Empty(t, stdout, "args %q", args)
		assert.Equal(t, args[0]+": no store at \""+root+"\": the directory does not exist\n", stderr, "args %q", args)
	}
	entries, err := os.ReadDir(tmp)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

func TestPathText(t *testing.T) {
	for in, want := range map[string]string{
		"a/b.go":      "a/b.go",
		"with space":  "with space",
		"名前/é.txt":    "名前/é.txt",
		"new\nline":   `"new\nline"`,
		"tab\there":   `"tab\there"`,
		" lead":       `" lead"`,
		"trail ":      `"trail "`,
		`"quoted"`:    `"\"quoted\""`,
		"csi\u009bx":  `"csi\u009bx"`,
		"esc\x1b[31m": `"esc\x1b[31m"`,
	} {
		assert.Equal(t, want, pathText(in), "%q", in)
	}
}
