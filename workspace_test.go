package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/workspace"
)

// writeTree writes files (path -> content) below dir.
func writeTree(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(t, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

// readTree reads every regular file below dir (path -> content),
// leaving out .git.
func readWorkTree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			out[filepath.ToSlash(rel)] = string(b)
		}
		return nil
	}))
	return out
}

// wsContents reads every file of ws through the store.
func wsContents(t testing.TB, s *Store, session uuid.UUID, ws Workspace) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, f := range ws.Files {
		b, err := s.ReadFile(context.Background(), session, f)
		require.NoError(t, err, f.Path)
		out[f.Path] = string(b)
	}
	return out
}

func wsStore(t testing.TB, o *Options) (*Store, uuid.UUID) {
	t.Helper()
	s, err := Open(t.TempDir(), o)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	m, err := s.Create(context.Background(), Meta{Name: "ws"})
	require.NoError(t, err)
	return s, m.ID
}

func say(t testing.TB, s *Store, session uuid.UUID, text string) Event {
	t.Helper()
	ev, err := s.Append(context.Background(), session, NewEvent(KindMessage, RoleUser, Message{Content: text}))
	require.NoError(t, err)
	return ev
}

// TestWorkspaceSnapshotRestore: snapshots of a changing directory give
// the files as of every event, the diffs between them, and restore any
// of them into a directory, which a snapshot then finds unchanged.
func TestWorkspaceSnapshotRestore(t *testing.T) {
	for _, c := range []struct {
		name string
		opts *Options
	}{
		{"plain", nil},
		{"encrypted", &Options{Keys: testKeys(t, "local:ws", 3)}},
		{"inline-blob-threshold", &Options{BlobThreshold: 64}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			s, id := wsStore(t, c.opts)
			work := t.TempDir()
			v1 := map[string]string{"main.go": "package main\n", "lib/a.go": "package lib\n// a\n", "lib/b.go": strings.Repeat("b", 5000), "README": "hi"}
			writeTree(t, work, v1)
			say(t, s, id, "start")
			r1, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{Label: "one"})
			require.NoError(t, err)
			require.NotEqual(t, uuid.Nil, r1.Event.ID)
			assert.ElementsMatch(t, []string{"main.go", "lib/a.go", "lib/b.go", "README"}, r1.Added)

			// Change one file, add one, remove one.
			writeTree(t, work, map[string]string{"lib/a.go": "package lib\n// a changed\n", "new.txt": "new"})
			require.NoError(t, os.Remove(filepath.Join(work, "README")))
			say(t, s, id, "edit")
			r2, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
			require.NoError(t, err)
			assert.Equal(t, []string{"new.txt"}, r2.Added)
			assert.Equal(t, []string{"lib/a.go"}, r2.Modified)
			assert.Equal(t, []string{"README"}, r2.Deleted)
			assert.Equal(t, int64(len("package lib\n// a changed\n")+len("new")), r2.Stored, "only new contents are stored")

			// Nothing changed: no event.
			r3, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
			require.NoError(t, err)
			assert.Equal(t, uuid.Nil, r3.Event.ID)

			ws1, err := s.Files(ctx, id, r1.Event.ID)
			require.NoError(t, err)
			assert.Equal(t, v1, wsContents(t, s, id, ws1))
			assert.Equal(t, r1.Event.ID, ws1.Snapshot)
			ws2, err := s.Files(ctx, id, uuid.Nil)
			require.NoError(t, err)
			assert.Equal(t, readWorkTree(t, work), wsContents(t, s, id, ws2))

			d, err := s.Diff(ctx, id, r1.Event.ID, r2.Event.ID)
			require.NoError(t, err)
			var got []string
			for _, ch := range d {
				got = append(got, string(ch.Op)+" "+ch.Path)
			}
			assert.Equal(t, []string{"deleted README", "modified lib/a.go", "added new.txt"}, got)

			// Restore the first snapshot over the work tree: a dry run
			// first changes nothing.
			before := readWorkTree(t, work)
			dry, err := s.Restore(ctx, id, r1.Event.ID, work, RestoreOptions{DryRun: true})
			require.NoError(t, err)
			assert.Equal(t, []string{"README", "lib/a.go"}, dry.Written)
			assert.Equal(t, []string{"new.txt"}, dry.Removed)
			assert.Equal(t, 2, dry.Unchanged)
			assert.Equal(t, before, readWorkTree(t, work))
			rep, err := s.Restore(ctx, id, r1.Event.ID, work, RestoreOptions{Branch: true})
			require.NoError(t, err)
			assert.Equal(t, dry, rep)
			assert.Equal(t, v1, readWorkTree(t, work))
			next, _, err := s.NextParent(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, r1.Event.ID, next, "Branch: the conversation goes back with the code")

			// A new directory restores the whole tree.
			fresh := filepath.Join(t.TempDir(), "fresh")
			_, err = s.Restore(ctx, id, r2.Event.ID, fresh, RestoreOptions{})
			require.NoError(t, err)
			assert.Equal(t, wsContents(t, s, id, ws2), readWorkTree(t, fresh))

			// A snapshot right after the restore records nothing new
			// on the branch it selected.
			r4, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
			require.NoError(t, err)
			assert.Equal(t, uuid.Nil, r4.Event.ID)
		})
	}
}

// TestWorkspaceIncrementalReadsOnlyChanged: a file whose size, mode and
// time match is not read again, so replacing its content behind the
// store's back with the same size and time goes unseen, and one whose
// time changed is read and, its content unchanged, stores nothing.
func TestWorkspaceIncrementalReadsOnlyChanged(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{"a": "aaaa", "b": "bbbb"})
	old := timeAgo(t, work, "a", "b")
	_, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	writeTree(t, work, map[string]string{"a": "AAAA"})
	require.NoError(t, os.Chtimes(filepath.Join(work, "a"), old, old))
	require.NoError(t, os.Chtimes(filepath.Join(work, "b"), old.Add(1e9), old.Add(1e9)))
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.Equal(t, uuid.Nil, r.Event.ID, "a new time alone writes no manifest")
	writeTree(t, work, map[string]string{"c": "cc"})
	r, err = s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.Empty(t, r.Modified, "a's stat is unchanged, so it is not read; b's content is unchanged")
	assert.Equal(t, []string{"c"}, r.Added)
	assert.Equal(t, int64(2), r.Stored)
	ws, err := s.Files(ctx, id, uuid.Nil)
	require.NoError(t, err)
	b, _ := ws.File("b")
	assert.Equal(t, old.Add(1e9).UnixNano(), b.ModTime, "b's new time is recorded")
}

// timeAgo sets the modification time of the files to an hour ago and
// returns it.
func timeAgo(t testing.TB, dir string, files ...string) (tm time.Time) {
	t.Helper()
	tm = time.Now().Add(-time.Hour).Truncate(time.Second)
	for _, f := range files {
		require.NoError(t, os.Chtimes(filepath.Join(dir, f), tm, tm))
	}
	return tm
}

// TestWorkspaceBranchesAndState: each branch carries its own files and
// state; State and Files as of an event on one branch do not see the
// other's.
func TestWorkspaceBranchesAndState(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	root := say(t, s, id, "root")
	_, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "f", Data: []byte("base")})
	require.NoError(t, err)
	_, err = s.AppendState(ctx, id, StateDelta{Set: map[string]json.RawMessage{"mode": json.RawMessage(`"plan"`), "todo": json.RawMessage(`[1]`)}})
	require.NoError(t, err)
	a, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "f", Data: []byte("branch a")}, FileWrite{Path: "only-a", Data: []byte("x"), Mode: 0o755})
	require.NoError(t, err)
	aState, err := s.AppendState(ctx, id, StateDelta{Set: map[string]json.RawMessage{"mode": json.RawMessage(`"edit"`)}, Delete: []string{"todo"}})
	require.NoError(t, err)

	require.NoError(t, s.Branch(ctx, id, root.ID))
	b, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "f", Data: []byte("branch b")})
	require.NoError(t, err)

	wsA, err := s.Files(ctx, id, aState.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"f": "branch a", "only-a": "x"}, wsContents(t, s, id, wsA))
	fa, _ := wsA.File("only-a")
	assert.Equal(t, fs.FileMode(0o755), fa.Mode)
	assert.Equal(t, a.ID, wsA.Snapshot)
	wsB, err := s.Files(ctx, id, b.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"f": "branch b"}, wsContents(t, s, id, wsB))

	st, err := s.State(ctx, id, aState.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]json.RawMessage{"mode": json.RawMessage(`"edit"`)}, st)
	st, err = s.State(ctx, id, a.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]json.RawMessage{"mode": json.RawMessage(`"plan"`), "todo": json.RawMessage(`[1]`)}, st)
	st, err = s.State(ctx, id, uuid.Nil)
	require.NoError(t, err)
	assert.Empty(t, st, "branch b has no state deltas")
	assert.NotNil(t, st)

	_, err = s.Files(ctx, id, uuid.Must(uuid.NewV7()))
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestWorkspaceFork: a fork sees its parent's files up to the fork point
// and its own after; the parent does not see the fork's.
func TestWorkspaceFork(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	say(t, s, id, "root")
	p1, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "shared", Data: []byte("v1")}, FileWrite{Path: "keep", Data: []byte("k")})
	require.NoError(t, err)
	_, err = s.RecordFiles(ctx, id, "", FileWrite{Path: "shared", Data: []byte("parent later")})
	require.NoError(t, err)
	fork, err := s.Fork(ctx, id, p1.ID)
	require.NoError(t, err)
	f1, err := s.RecordFiles(ctx, fork.ID, "", FileWrite{Path: "shared", Data: []byte("fork's")})
	require.NoError(t, err)

	ws, err := s.Files(ctx, fork.ID, p1.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"shared": "v1", "keep": "k"}, wsContents(t, s, fork.ID, ws))
	ws, err = s.Files(ctx, fork.ID, f1.ID)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"shared": "fork's", "keep": "k"}, wsContents(t, s, fork.ID, ws), "keep is read from the parent's blobs")
	ws, err = s.Files(ctx, id, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"shared": "parent later", "keep": "k"}, wsContents(t, s, id, ws))
	_, err = s.Files(ctx, id, f1.ID)
	assert.ErrorIs(t, err, ErrNotFound, "the fork's events are not the parent's")

	dir := t.TempDir()
	_, err = s.Restore(ctx, fork.ID, f1.ID, dir, RestoreOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"shared": "fork's", "keep": "k"}, readWorkTree(t, dir))

	// GC of both keeps every content a manifest names.
	_, err = s.GC(ctx, id)
	require.NoError(t, err)
	_, err = s.GC(ctx, fork.ID)
	require.NoError(t, err)
	_, err = s.Restore(ctx, fork.ID, f1.ID, t.TempDir(), RestoreOptions{})
	require.NoError(t, err)
}

// TestWorkspaceGCKeepsContents: GC removes an unreferenced blob but
// keeps every blob a manifest names, small or large, plain or sealed.
func TestWorkspaceGCKeepsContents(t *testing.T) {
	for _, o := range []*Options{nil, {Keys: testKeys(t, "local:gc", 5)}} {
		ctx := context.Background()
		s, id := wsStore(t, o)
		files := map[string]string{"small": "s", "big": strings.Repeat("x", 3<<20)}
		var ws []FileWrite
		for p, c := range files {
			ws = append(ws, FileWrite{Path: p, Data: []byte(c)})
		}
		_, err := s.RecordFiles(ctx, id, "", ws...)
		require.NoError(t, err)
		// A blob no event names: GC removes it.
		orphan := filepath.Join(s.sessionDir(id), "blobs", "sha256", "ab", strings.Repeat("c", 62)+".zst")
		require.NoError(t, os.MkdirAll(filepath.Dir(orphan), 0o755))
		require.NoError(t, os.WriteFile(orphan, []byte("junk"), 0o644))
		rep, err := s.GC(ctx, id)
		require.NoError(t, err)
		assert.Equal(t, 1, rep.Removed)
		assert.GreaterOrEqual(t, rep.Kept, 2)
		cur, err := s.Files(ctx, id, uuid.Nil)
		require.NoError(t, err)
		assert.Equal(t, files, wsContents(t, s, id, cur))
	}
}

// TestWorkspaceHostile: paths that would leave the workspace are refused
// with ErrInvalidEvent, links are never followed, a link in the target
// directory does not lead a Restore outside it, a file over the limit is
// a clear error.
func TestWorkspaceHostile(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	for _, p := range []string{"../x", "/etc/passwd", "a/../../x", "a//b", "./a", "a/", "", "bad\xffname", "nul\x00"} {
		_, err := s.RecordFiles(ctx, id, "", FileWrite{Path: p, Data: []byte("x")})
		assert.ErrorIs(t, err, ErrInvalidEvent, "%q", p)
	}
	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"secret": "do not read", "victim": "do not touch"})
	work := t.TempDir()
	writeTree(t, work, map[string]string{"ok.txt": "fine", "sub/x": "x"})
	require.NoError(t, os.Symlink(filepath.Join(outside, "secret"), filepath.Join(work, "link")))
	require.NoError(t, os.Symlink(outside, filepath.Join(work, "linkdir")))
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{"ok.txt", "sub/x"}, r.Added)
	var skipped []string
	for _, sk := range r.Skipped {
		skipped = append(skipped, sk.Path)
	}
	assert.ElementsMatch(t, []string{"link", "linkdir"}, skipped)

	// A target whose "sub" is a link to outside: Restore replaces the
	// link with a directory and writes nothing outside.
	target := t.TempDir()
	require.NoError(t, os.Symlink(outside, filepath.Join(target, "sub")))
	require.NoError(t, os.Symlink(filepath.Join(outside, "victim"), filepath.Join(target, "ok.txt")))
	_, err = s.Restore(ctx, id, r.Event.ID, target, RestoreOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"secret": "do not read", "victim": "do not touch"}, readWorkTree(t, outside))
	assert.Equal(t, map[string]string{"ok.txt": "fine", "sub/x": "x"}, readWorkTree(t, target))
	info, err := os.Lstat(filepath.Join(target, "sub"))
	require.NoError(t, err)
	assert.True(t, info.IsDir())

	// A file over MaxFileSize is an error naming it; ignoring it goes on.
	writeTree(t, work, map[string]string{"huge.bin": strings.Repeat("h", 10_000)})
	_, err = s.SnapshotDir(ctx, id, work, SnapshotOptions{MaxFileSize: 1000})
	assert.ErrorIs(t, err, ErrRecordTooLarge)
	assert.ErrorContains(t, err, "huge.bin")
	_, err = s.SnapshotDir(ctx, id, work, SnapshotOptions{MaxFileSize: 1000, Ignore: []string{"*.bin"}})
	assert.NoError(t, err)

	// A name that is not UTF-8 is a clear error, not a lossy record.
	bad := t.TempDir()
	writeTree(t, bad, map[string]string{"bad\xffname": "x"})
	_, err = s.SnapshotDir(ctx, id, bad, SnapshotOptions{})
	assert.ErrorIs(t, err, ErrInvalidEvent)

	// Too many files.
	_, err = s.SnapshotDir(ctx, id, work, SnapshotOptions{MaxFiles: 1})
	assert.Error(t, err)
}

// TestWorkspaceIgnore: ignore rules and .gitignore files keep files out
// of snapshots, and Restore leaves ignored files alone.
func TestWorkspaceIgnore(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{
		"src/a.go": "a", "src/a.o": "obj", "build/out": "o", ".gitignore": "*.o\n/build/\n",
		"docs/.gitignore": "draft*\n!draft-keep\n", "docs/draft1": "d", "docs/draft-keep": "k", "docs/x": "x",
		".git/HEAD": "ref", "node_modules/m/index.js": "m",
	})
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{GitIgnore: true, Ignore: []string{"node_modules/"}})
	require.NoError(t, err)
	sort.Strings(r.Added)
	assert.Equal(t, []string{".gitignore", "docs/.gitignore", "docs/draft-keep", "docs/x", "src/a.go"}, r.Added)

	// Restore into the tree after changes: ignored files stay.
	require.NoError(t, os.Remove(filepath.Join(work, "src/a.go")))
	writeTree(t, work, map[string]string{"src/extra.go": "extra", "src/b.o": "obj2"})
	rep, err := s.Restore(ctx, id, r.Event.ID, work, RestoreOptions{GitIgnore: true, Ignore: []string{"node_modules/"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"src/a.go"}, rep.Written)
	assert.Equal(t, []string{"src/extra.go"}, rep.Removed)
	tree := readWorkTree(t, work)
	assert.Equal(t, "obj2", tree["src/b.o"])
	assert.Equal(t, "m", tree["node_modules/m/index.js"])
	assert.Equal(t, "d", tree["docs/draft1"])

	// Without rules, Restore reads the directory with the snapshot's.
	writeTree(t, work, map[string]string{"src/extra.go": "extra"})
	rep, err = s.Restore(ctx, id, r.Event.ID, work, RestoreOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"src/extra.go"}, rep.Removed)
	ws, err := s.Files(ctx, id, r.Event.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"node_modules/"}, ws.Ignore)
	assert.True(t, ws.GitIgnore)
	// NoRules: every file the workspace lacks goes.
	rep, err = s.Restore(ctx, id, r.Event.ID, work, RestoreOptions{NoRules: true, DryRun: true})
	require.NoError(t, err)
	assert.Equal(t, []string{"build/out", "docs/draft1", "node_modules/m/index.js", "src/a.o", "src/b.o"}, rep.Removed)
}

// TestWorkspaceReencryptRefused: Reencrypt of a session holding
// snapshots is refused and changes nothing.
func TestWorkspaceReencryptRefused(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, &Options{Keys: testKeys(t, "local:re", 9)})
	_, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "a", Data: []byte("x")})
	require.NoError(t, err)
	err = s.Reencrypt(ctx, id)
	assert.ErrorIs(t, err, ErrWorkspaceReencrypt)
	ws, err := s.Files(ctx, id, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "x"}, wsContents(t, s, id, ws))
}

// TestWorkspaceDamagedContent: a blob whose content was changed on disk
// is a *CorruptionError, and Restore leaves that file as it was.
func TestWorkspaceDamagedContent(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	ev, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "a", Data: []byte("original content")})
	require.NoError(t, err)
	ws, err := s.Files(ctx, id, ev.ID)
	require.NoError(t, err)
	f, _ := ws.File("a")
	d, err := parseDigest(f.Digest)
	require.NoError(t, err)
	path := layout.BlobPath(s.sessionDir(id), d)
	require.FileExists(t, path)
	require.NoError(t, os.WriteFile(path, blob.Encode([]byte("tampered content"), nil), 0o644))
	_, err = s.ReadFile(ctx, id, f)
	var ce *CorruptionError
	assert.True(t, errors.As(err, &ce), "%v", err)
	target := t.TempDir()
	writeTree(t, target, map[string]string{"a": "mine"})
	_, err = s.Restore(ctx, id, ev.ID, target, RestoreOptions{})
	assert.Error(t, err)
	assert.Equal(t, map[string]string{"a": "mine"}, readWorkTree(t, target))
}

// TestWorkspaceLanes: each lane carries its own files, and switching
// lanes moves where the next snapshot goes.
func TestWorkspaceLanes(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	q := say(t, s, id, "fix the bug")
	mainEv, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "fix.go", Data: []byte("patch A")})
	require.NoError(t, err)
	require.NoError(t, s.CreateLane(ctx, id, "try-b", q.ID))
	require.NoError(t, s.SwitchLane(ctx, id, "try-b"))
	bEv, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "fix.go", Data: []byte("patch B")}, FileWrite{Path: "b-only", Data: []byte("b")})
	require.NoError(t, err)
	assert.Equal(t, q.ID, bEv.ParentID)

	cur, err := s.Files(ctx, id, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"fix.go": "patch B", "b-only": "b"}, wsContents(t, s, id, cur))
	require.NoError(t, s.SwitchLane(ctx, id, "main"))
	cur, err = s.Files(ctx, id, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, mainEv.ID, cur.Snapshot)
	assert.Equal(t, map[string]string{"fix.go": "patch A"}, wsContents(t, s, id, cur))
	d, err := s.Diff(ctx, id, mainEv.ID, bEv.ID)
	require.NoError(t, err)
	require.Len(t, d, 2)
	assert.Equal(t, FileAdded, d[0].Op)
	assert.Equal(t, "b-only", d[0].Path)
	assert.Equal(t, FileModified, d[1].Op)
}

// TestWorkspaceRemote: with Options.Remote a snapshot's contents are
// uploaded once, and a Store on another machine (a fresh directory over
// the same object store) restores them.
func TestWorkspaceRemote(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	s, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	files := map[string]string{"a": strings.Repeat("a", 3000), "b": "bee"}
	work := t.TempDir()
	writeTree(t, work, files)
	r1, err := s.SnapshotDir(ctx, m.ID, work, SnapshotOptions{})
	require.NoError(t, err)
	blobObjects := func() int {
		n := 0
		for _, k := range obj.keys("") {
			if strings.Contains(k, "blob") {
				n++
			}
		}
		return n
	}
	first := blobObjects()
	assert.GreaterOrEqual(t, first, 2, "a's and b's contents are objects")
	writeTree(t, work, map[string]string{"c": "sea"})
	_, err = s.SnapshotDir(ctx, m.ID, work, SnapshotOptions{})
	require.NoError(t, err)
	// The second snapshot uploads c's content, not a's and b's again.
	assert.Equal(t, first+1, blobObjects())
	_, err = s.GC(ctx, m.ID)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	other, err := Open(t.TempDir(), remoteOpts(obj))
	require.NoError(t, err)
	defer other.Close()
	dir := t.TempDir()
	_, err = other.Restore(ctx, m.ID, r1.Event.ID, dir, RestoreOptions{})
	require.NoError(t, err)
	assert.Equal(t, files, readWorkTree(t, dir))
	ws, err := other.Files(ctx, m.ID, uuid.Nil)
	require.NoError(t, err)
	assert.Len(t, ws.Files, 3)
}

// FuzzDecodeManifest: a manifest record decodes or is refused, never
// panics, and every entry it accepts names a path inside the workspace.
func FuzzDecodeManifest(f *testing.F) {
	f.Add([]byte(`{"sessionstore":"snapshot","full":true,"files":[{"path":"a/b","mode":420,"size":1,"digest":"sha256:` + strings.Repeat("0", 64) + `"}]}`))
	f.Add([]byte(`{"sessionstore":"snapshot","files":[{"path":"../x","deleted":true}]}`))
	f.Add([]byte(`{"sessionstore":"state"}`))
	f.Add([]byte(`{"sessionstore":"snapshot","depth":1,"since":2,"label":"l","ignore":["a/","*.o"],"gitignore":true,"files":[{"path":"a","mode":493,"size":0,"digest":"sha256:` + strings.Repeat("a", 64) + `","mtime":-1,"blob":"sha256:` + strings.Repeat("b", 64) + `","blob_size":30},{"path":"b","deleted":true}]}`))
	f.Add([]byte(`{"sessionstore":"snapshot","files":[{"path":"\u0061","size":1e2,"mode":0420}]}`))
	f.Add([]byte(`{"sessionstore":"snapshot","files":[],"files":null,"depth":01}`))
	f.Fuzz(func(t *testing.T, rec []byte) {
		// The hand decoder agrees with encoding/json wherever it decodes.
		p := manifestParser{b: rec}
		if fast, ok := p.manifest(); ok {
			var slow snapshotRecord
			require.NoError(t, json.Unmarshal(rec, &slow), "the hand decoder took %q", rec)
			require.Equal(t, slow, fast, "%q", rec)
		}
		m, err := decodeManifest(rec)
		if err != nil {
			return
		}
		for _, e := range m.Files {
			require.NoError(t, workspace.CheckPath(e.Path))
			require.False(t, strings.Contains(e.Path, ".."+"/"))
			if !e.Deleted {
				require.GreaterOrEqual(t, e.Size, int64(0))
				require.Zero(t, e.Mode&^fs.ModePerm)
			}
		}
	})
}

// TestWorkspaceRacyWrite: a file rewritten with the same size and the
// same modification time right after a snapshot (the same clock tick) is
// read again, not taken as unchanged.
func TestWorkspaceRacyWrite(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{"a": "1111"})
	tm := time.Now().Truncate(time.Second)
	require.NoError(t, os.Chtimes(filepath.Join(work, "a"), tm, tm))
	_, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	writeTree(t, work, map[string]string{"a": "2222"})
	require.NoError(t, os.Chtimes(filepath.Join(work, "a"), tm, tm))
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, r.Modified)
}

// TestWorkspaceRacyWriteSeenLater: a file read within two seconds of its
// modification time is recorded without that time, so a write of the
// same size that kept the time is read again by a snapshot taken later,
// when the time is no longer recent.
func TestWorkspaceRacyWriteSeenLater(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{"a": "1111"})
	tm := time.Now().Add(-racy + 1500*time.Millisecond)
	require.NoError(t, os.Chtimes(filepath.Join(work, "a"), tm, tm))
	_, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	if time.Since(tm) > racy {
		t.Skip("the machine took more than 1.5 s to snapshot one file: the write was not recent")
	}
	writeTree(t, work, map[string]string{"a": "2222"})
	require.NoError(t, os.Chtimes(filepath.Join(work, "a"), tm, tm))
	time.Sleep(time.Until(tm.Add(racy + 100*time.Millisecond)))
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, r.Modified)
}

// TestWorkspaceHugeFile: a 1 GiB file (sparse: no disk used) is refused
// by its size, before it is read, naming it.
func TestWorkspaceHugeFile(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{"small": "s"})
	f, err := os.Create(filepath.Join(work, "huge.img"))
	require.NoError(t, err)
	require.NoError(t, f.Truncate(1<<30))
	require.NoError(t, f.Close())
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, ErrRecordTooLarge)
	assert.ErrorContains(t, err, "huge.img")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "the file is not read")
	ws, err := s.Files(ctx, id, uuid.Nil)
	require.NoError(t, err)
	assert.Empty(t, ws.Files, "nothing is recorded")
}

// TestWorkspaceManyFiles: a tree of many files (SESSIONSTORE_WS_FILES,
// 1,000 by default, 30,000 in CI's long runs, "all" for 100,000) snapshots, changes
// incrementally and restores whole; the heap the snapshot leaves grows
// with the number of files, not their bytes.
func TestWorkspaceManyFiles(t *testing.T) {
	n := testSize(t, "SESSIONSTORE_WS_FILES", 1000, 100_000)
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	content := []byte(strings.Repeat("x", 512))
	for i := range n {
		p := filepath.Join(work, fmt.Sprintf("d%03d", i%997), fmt.Sprintf("f%06d", i))
		if i < 997 {
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		}
		require.NoError(t, os.WriteFile(p, append(content, fmt.Sprint(i)...), 0o644))
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.Len(t, r.Added, n)
	writeTree(t, work, map[string]string{"d000/f000000": "changed"})
	r2, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"d000/f000000"}, r2.Modified)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	grown := int64(ms.HeapAlloc) - int64(before.HeapAlloc)
	assert.Less(t, grown, int64(n)*4096+32<<20, "heap the snapshots keep (the cached workspaces): about a file's entry each")
	dir := filepath.Join(t.TempDir(), "out")
	rep, err := s.Restore(ctx, id, r2.Event.ID, dir, RestoreOptions{NoSync: true})
	require.NoError(t, err)
	assert.Len(t, rep.Written, n)
	b, err := os.ReadFile(filepath.Join(dir, "d000", "f000000"))
	require.NoError(t, err)
	assert.Equal(t, "changed", string(b))
	t.Logf("%d files snapshotted and restored", n)
}
