//go:build unix

package sessionstore

// Review of the workspace snapshot and session state feature
// (workspace.go, workspace_append.go, workspace_restore.go, state.go,
// internal/workspace). Each TestReviewWorkspace<Bug> test fails on the
// code as reviewed and says what the bug is and what the correct
// behaviour would be; the TestReviewWorkspaceCoverage<...> tests pass and
// only add coverage of risky cases.

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// rvHookFS is the operating system's file system with a hook called
// before each OpenFile of a path below prefix (the workspace directory
// of a test): it lets a test act between SnapshotDir's scan and its
// reads, deterministically.
type rvHookFS struct {
	vfs.FS
	prefix string
	mu     sync.Mutex
	hook   func(name string)
}

func (h *rvHookFS) setHook(f func(string)) {
	h.mu.Lock()
	h.hook = f
	h.mu.Unlock()
}

func (h *rvHookFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	h.mu.Lock()
	hook := h.hook
	h.mu.Unlock()
	if hook != nil && strings.HasPrefix(name, h.prefix) {
		hook(name)
	}
	return h.FS.OpenFile(name, flag, perm)
}

// rvHookStore opens a store whose workspace reads go through a hook FS
// watching work.
func rvHookStore(t *testing.T, work string, o Options) (*Store, uuid.UUID, *rvHookFS) {
	t.Helper()
	hfs := &rvHookFS{FS: vfs.Default, prefix: work + string(filepath.Separator)}
	o.fs = hfs
	s, id := wsStore(t, &o)
	return s, id, hfs
}

// rvMemStore opens a store on a MemFS: fast appends for the tests that
// need a thousand of them.
func rvMemStore(t *testing.T) (*Store, uuid.UUID) {
	t.Helper()
	s, err := Open("/store", &Options{fs: vfs.NewMemFS()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	m, err := s.Create(context.Background(), Meta{})
	require.NoError(t, err)
	return s, m.ID
}

func rvDigest(b string) string { return digestString(sha256.Sum256([]byte(b))) }

// ---------------------------------------------------------------------
// Failing tests: bugs.
// ---------------------------------------------------------------------

// TestReviewWorkspaceRecordFilesFileDirConflict: RecordFiles accepts a
// file at "a" while the workspace holds "a/b" (or both in one call), so
// the workspace holds a path that is both a file and a directory. No
// directory can hold that: Restore of it fails ("replace directory a
// with a file: directory not empty") after it has already changed the
// target. Correct: RecordFiles refuses such a write with ErrInvalidEvent
// (decodeManifest should refuse such a manifest too), or records the
// conflicting entries as deleted, so that every workspace is restorable.
func TestReviewWorkspaceRecordFilesFileDirConflict(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		calls [][]FileWrite
	}{
		{"one call", [][]FileWrite{{{Path: "a", Data: []byte("file a")}, {Path: "a/b", Data: []byte("b")}}}},
		{"file over dir", [][]FileWrite{{{Path: "a/b", Data: []byte("b")}}, {{Path: "a", Data: []byte("file a")}}}},
		{"dir over file", [][]FileWrite{{{Path: "a", Data: []byte("file a")}}, {{Path: "a/b", Data: []byte("b")}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, id := wsStore(t, nil)
			var last Event
			var err error
			for _, files := range c.calls {
				last, err = s.RecordFiles(ctx, id, "", files...)
				if err != nil {
					break
				}
			}
			if err != nil {
				assert.ErrorIs(t, err, ErrInvalidEvent, "a conflicting path is refused as invalid")
				return
			}
			ws, err := s.Files(ctx, id, last.ID)
			require.NoError(t, err)
			_, fileA := ws.File("a")
			_, fileAB := ws.File("a/b")
			assert.False(t, fileA && fileAB, "the workspace holds both a file a and a file a/b")
			_, err = s.Restore(ctx, id, last.ID, t.TempDir(), RestoreOptions{})
			assert.NoError(t, err, "every workspace Files returns must be restorable")
		})
	}
}

// TestReviewWorkspaceRestoreModeUmask: Restore creates each file with
// OpenFile(perm) and never sets the mode afterwards, so the process
// umask (022 here) strips bits: a 0666 or 0777 file is restored as 0644
// or 0755. The restored tree then differs from the workspace, every
// later Restore rewrites the file (mode mismatch) and never reports it
// Unchanged, and a SnapshotDir right after records a mode change,
// breaking "a SnapshotDir of dir with the same rules right after records
// the workspace as it is". Correct: chmod (fchmod) the temporary file to
// the entry's mode before the rename.
func TestReviewWorkspaceRestoreModeUmask(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	ev, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "shared.txt", Data: []byte("x"), Mode: 0o666}, FileWrite{Path: "tool.sh", Data: []byte("#!"), Mode: 0o777})
	require.NoError(t, err)
	dir := t.TempDir()
	_, err = s.Restore(ctx, id, ev.ID, dir, RestoreOptions{})
	require.NoError(t, err)
	for p, want := range map[string]fs.FileMode{"shared.txt": 0o666, "tool.sh": 0o777} {
		info, err := os.Stat(filepath.Join(dir, p))
		require.NoError(t, err)
		assert.Equal(t, want, info.Mode().Perm(), "%s restored with its recorded mode", p)
	}
	rep, err := s.Restore(ctx, id, ev.ID, dir, RestoreOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Unchanged, "a second Restore finds both files as asked")
	assert.Empty(t, rep.Written)
}

// TestReviewWorkspaceRestoreLongName: the Writer's temporary file is
// "." + base + ".sessionstore-tmp-" + 16 hex digits, 35 bytes longer
// than the file's own name, so any file whose name is longer than 220
// bytes (valid on every common file system, which allow 255) cannot be
// restored: ENAMETOOLONG. SnapshotDir records such files without
// complaint, so the snapshot is not restorable. Correct: bound the
// temporary name (e.g. keep a short prefix of the base, or use a fixed
// ".sessionstore-tmp-<random>" name) so that any name the file system
// holds can be written.
func TestReviewWorkspaceRestoreLongName(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	long := strings.Repeat("n", 240) + ".txt"
	writeTree(t, work, map[string]string{long: "long name", "sub/" + long: "nested"})
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	require.Len(t, r.Added, 2)
	dir := t.TempDir()
	_, err = s.Restore(ctx, id, r.Event.ID, dir, RestoreOptions{})
	assert.NoError(t, err)
	assert.Equal(t, readWorkTree(t, work), readWorkTree(t, dir))
}

// TestReviewWorkspaceReadOnlyRestoreBranchWritesFirst: on a read-only
// Store, Restore with Branch writes (and removes) the files of the
// target directory, then fails with ErrReadOnly from Branch: the caller
// gets an error but its directory was changed, and the conversation did
// not go back with the code (the opposite of Branch's promise that they
// go back together). Correct: refuse Branch on a read-only Store (or
// any precondition Branch can check) before touching the directory.
func TestReviewWorkspaceReadOnlyRestoreBranchWritesFirst(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := Open(root, nil)
	require.NoError(t, err)
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	ev, err := s.RecordFiles(ctx, m.ID, "", FileWrite{Path: "a", Data: []byte("from the snapshot")})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	ro, err := Open(root, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"a": "mine", "b": "also mine"})
	_, err = ro.Restore(ctx, m.ID, ev.ID, dir, RestoreOptions{Branch: true})
	require.ErrorIs(t, err, ErrReadOnly)
	assert.Equal(t, map[string]string{"a": "mine", "b": "also mine"}, readWorkTree(t, dir),
		"a Restore that fails with ErrReadOnly leaves the directory as it was")
}

// TestReviewWorkspaceOutsideStoreSymlink: outsideStore compares
// filepath.Abs strings only. (1) A directory given through a symbolic
// link to the store (or to one of its sessions) passes, and Restore then
// scans the store's own files and would remove every one of them (the
// dry run lists them), SnapshotDir snapshots the store into itself. (2)
// The root "/" holds every store, but abs+"/" is "//", so it is not
// refused either. Correct: resolve links (filepath.EvalSymlinks of dir,
// or of its nearest existing parent when it does not exist yet, and of
// the store's directory) and compare with a check that handles the root
// (filepath.Rel, or a prefix check without doubling a trailing
// separator); refuse with ErrInvalidOptions.
func TestReviewWorkspaceOutsideStoreSymlink(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	ev, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "a", Data: []byte("a")})
	require.NoError(t, err)
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(s.Dir(), link))

	rep, err := s.Restore(ctx, id, ev.ID, link, RestoreOptions{DryRun: true})
	assert.ErrorIs(t, err, ErrInvalidOptions, "a link to the store is the store")
	assert.Empty(t, rep.Removed, "Restore would remove the store's own files")
	r, err := s.SnapshotDir(ctx, id, link, SnapshotOptions{})
	assert.ErrorIs(t, err, ErrInvalidOptions, "SnapshotDir of the store through a link")
	assert.Empty(t, r.Added)

	sessLink := filepath.Join(t.TempDir(), "session")
	require.NoError(t, os.Symlink(s.sessionDir(id), sessLink))
	_, err = s.Restore(ctx, id, ev.ID, sessLink, RestoreOptions{DryRun: true})
	assert.ErrorIs(t, err, ErrInvalidOptions, "a link to a session directory")

	assert.ErrorIs(t, s.outsideStore("/"), ErrInvalidOptions, `"/" holds the store`)
}

// TestReviewWorkspaceTempNameFilterEatsUserFiles: isTemp takes any name
// that starts with "." and contains ".sessionstore-tmp-" for a Restore's
// temporary file. A user's file so named is silently left out of
// SnapshotDir (neither Added nor Skipped), and Restore removes it without
// listing it in RestoreReport.Removed (nor in a dry run), so the user
// loses a file the snapshot never held and the report never mentioned.
// Correct: match only the Writer's exact form ("." + name + TempMark +
// 16 lower-case hex digits, nothing after), and report what is dropped
// or removed.
func TestReviewWorkspaceTempNameFilterEatsUserFiles(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	const mine = ".notes.sessionstore-tmp-mine"
	writeTree(t, work, map[string]string{"a": "a", mine: "the user's notes"})
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	var skipped []string
	for _, sk := range r.Skipped {
		skipped = append(skipped, sk.Path)
	}
	assert.True(t, slices.Contains(r.Added, mine) || slices.Contains(skipped, mine),
		"a user file is recorded, or at least reported skipped: Added %v Skipped %v", r.Added, skipped)

	dry, err := s.Restore(ctx, id, r.Event.ID, work, RestoreOptions{DryRun: true})
	require.NoError(t, err)
	_, err = s.Restore(ctx, id, r.Event.ID, work, RestoreOptions{})
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(work, mine)); err != nil {
		assert.Contains(t, dry.Removed, mine, "Restore removed %s without reporting it", mine)
	}
}

// TestReviewWorkspaceRestoreDirTreeToFile: where the workspace has a
// file "a" and the directory has a directory "a" holding a
// subdirectory ("a/sub/x", a tree the snapshot replaced by a file),
// Restore removes a/sub/x, then fails to write "a": the emptied
// directories are only removed (RemoveEmpty) after the writes, and
// Writer.Write removes an empty directory at the file's path but not an
// emptied tree. The Restore returns an error with the target half
// changed. Correct: remove the emptied directories (deepest first)
// before writing, or let Write remove an empty directory tree.
func TestReviewWorkspaceRestoreDirTreeToFile(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{"a/sub/x": "x", "a/y": "y", "keep": "k"})
	r1, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(filepath.Join(work, "a")))
	writeTree(t, work, map[string]string{"a": "now a file"})
	r2, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)

	dir := t.TempDir()
	_, err = s.Restore(ctx, id, r1.Event.ID, dir, RestoreOptions{})
	require.NoError(t, err)
	_, err = s.Restore(ctx, id, r2.Event.ID, dir, RestoreOptions{})
	assert.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "now a file", "keep": "k"}, readWorkTree(t, dir))
}

// TestReviewWorkspaceRacyEntryTrustedLater: a file read because it was
// modified within two seconds of the scan (racy) is recorded with the
// modification time the scan saw. A write in the same timestamp tick
// right after that reading (same size) leaves that time unchanged; the
// next snapshot, taken more than two seconds later, finds size, mode and
// time equal and no longer racy, trusts the entry and never reads the
// file: the change is lost for good. The racy rule only protects a
// second scan made within two seconds. Here the same tick is simulated
// by setting the time back (what a file system with 1 s or 2 s
// timestamps, or a coarse kernel clock, does by itself). Correct (as
// git's racy-git rule): compare the time against the time of the scan
// that recorded the entry, e.g. record a racily-read entry with no
// modification time (0) so that the next snapshot reads it again.
func TestReviewWorkspaceRacyEntryTrustedLater(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	f := filepath.Join(work, "f")
	writeTree(t, work, map[string]string{"f": "aaaa"})
	m := time.Now().Add(-racy / 2)
	require.NoError(t, os.Chtimes(f, m, m))
	_, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	require.Less(t, time.Since(m), racy, "the first scan saw f as racy, so it read it")
	require.NoError(t, os.WriteFile(f, []byte("bbbb"), 0o644)) // same size
	require.NoError(t, os.Chtimes(f, m, m))                    // same tick
	time.Sleep(time.Until(m.Add(racy + 100*time.Millisecond)))
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"f"}, r.Modified)
	ws, err := s.Files(ctx, id, uuid.Nil)
	require.NoError(t, err)
	e, ok := ws.File("f")
	require.True(t, ok)
	assert.Equal(t, rvDigest("bbbb"), e.Digest, "the workspace holds the file's content")
}

// TestReviewWorkspaceMalformedReservedRecord: Append accepts an
// application's custom record that starts with the reserved
// {"sessionstore":"snapshot" (or "state") but is not a valid manifest
// (delta). From then on every Files, Restore and SnapshotDir on that
// path, and every GC of the session (manifestBlobs), fails with a
// *CorruptionError: one bad record written through the public API stops
// the session's blob collection for ever (GCStore skips it), and State
// fails the same way. Correct: Append (AppendWith, AppendBatch) checks a
// custom record in the reserved form and refuses a malformed one with
// ErrInvalidEvent, as the package's typed-error promise asks; or the
// readers ignore such a record. Either way GC keeps working.
func TestReviewWorkspaceMalformedReservedRecord(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	_, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "a", Data: []byte("a")})
	require.NoError(t, err)
	_, err = s.Append(ctx, id, Event{Kind: KindCustom, Record: []byte(`{"sessionstore":"snapshot","files":"not a list"}`)})
	if err != nil {
		assert.ErrorIs(t, err, ErrInvalidEvent)
	} else {
		_, gcErr := s.GC(ctx, id)
		assert.NoError(t, gcErr, "GC of a session holding an application's malformed record")
		_, err = s.Files(ctx, id, uuid.Nil)
		assert.NoError(t, err, "Files")
	}
	_, err = s.Append(ctx, id, Event{Kind: KindCustom, Record: []byte(`{"sessionstore":"state","set":5}`)})
	if err != nil {
		assert.ErrorIs(t, err, ErrInvalidEvent)
	} else {
		_, err = s.State(ctx, id, uuid.Nil)
		assert.NoError(t, err, "State")
	}
}

// TestReviewWorkspaceForgedManifestUnsorted: decodeManifest checks each
// entry but not their order nor their uniqueness, and applyDelta and
// Workspace.File rely on both. A manifest (an application's record in
// the reserved form, or a damaged session) listing "b" before "a", "a"
// twice and "a/x" beside "a" is accepted: Files returns an unsorted
// list with duplicates (documented as sorted by Path), File("a") does not
// find a file the list holds, and Restore would write the same path from
// two goroutines at once. Correct: decodeManifest refuses entries that
// are not strictly increasing by path (or that name a file below
// another file), so Files returns a *CorruptionError (or Append refuses
// the record with ErrInvalidEvent).
func TestReviewWorkspaceForgedManifestUnsorted(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	entry := func(p string, size int) string {
		return fmt.Sprintf(`{"path":%q,"mode":420,"size":%d,"digest":"sha256:%s"}`, p, size, strings.Repeat("0", 64))
	}
	rec := `{"sessionstore":"snapshot","full":true,"files":[` + strings.Join([]string{entry("b", 1), entry("a", 1), entry("a", 2), entry("a/x", 3)}, ",") + `]}`
	_, err := s.Append(ctx, id, Event{Kind: KindCustom, Record: []byte(rec)})
	if err != nil {
		assert.ErrorIs(t, err, ErrInvalidEvent)
		return
	}
	ws, err := s.Files(ctx, id, uuid.Nil)
	if err != nil {
		var ce *CorruptionError
		assert.True(t, errors.As(err, &ce), "a bad manifest is a *CorruptionError: %v", err)
		return
	}
	assert.True(t, slices.IsSortedFunc(ws.Files, func(a, b FileEntry) int { return strings.Compare(a.Path, b.Path) }), "Files is sorted by path")
	for i := 1; i < len(ws.Files); i++ {
		assert.NotEqual(t, ws.Files[i-1].Path, ws.Files[i].Path, "a path twice")
	}
	_, ok := ws.File("a")
	assert.True(t, ok, "File finds a path the list holds")
}

// TestReviewWorkspaceForgedManifestDepth: decodeManifest does not check
// "depth" and "since". One delta in the reserved form with a negative
// depth (say -1e9) makes every later snapshot's depth negative, so none
// is ever full again: the promise that Files reads a bounded chain (at
// most 1000 deltas after a full manifest) is gone, and every uncached
// Files, SnapshotDir and GC walks and decodes every manifest back to the
// forged one. Correct: refuse (or clamp) depth outside 0..maxDepth, a
// negative since, and non-zero depth/since in a full manifest.
func TestReviewWorkspaceForgedManifestDepth(t *testing.T) {
	ctx := context.Background()
	s, id := rvMemStore(t)
	_, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "a", Data: []byte("a")}, FileWrite{Path: "b", Data: []byte("b")})
	require.NoError(t, err)
	_, err = s.Append(ctx, id, Event{Kind: KindCustom, Record: []byte(`{"sessionstore":"snapshot","depth":-1000000000,"files":[]}`)})
	if err != nil {
		assert.ErrorIs(t, err, ErrInvalidEvent)
		return
	}
	full := false
	for i := 0; i <= maxDepth && !full; i++ {
		// Empty deltas (a mark, as SnapshotOptions.Always): only the
		// depth rule can make one full.
		ev, err := s.RecordFiles(ctx, id, "")
		if err != nil {
			var ce *CorruptionError
			assert.True(t, errors.As(err, &ce), "the forged manifest is refused as damage: %v", err)
			return
		}
		var m snapshotRecord
		require.NoError(t, json.Unmarshal(ev.Record, &m))
		full = m.Full
	}
	assert.True(t, full, "a full manifest within %d deltas", maxDepth+1)
}

// TestReviewWorkspaceInflightParent: NextParent (h.tip) returns the last
// event of an append still in flight, which Tree does not list until it
// is published. markedEvents looks that event up in Tree, so Files and
// State as of uuid.Nil, and SnapshotDir and RecordFiles (which start
// from NextParent), fail with ErrNotFound ("event ... in session ...")
// whenever another goroutine appends to the session at the same time:
// a wrong typed error (the session and the event exist) that a caller
// takes for a missing session. Correct: wait for the appends in flight
// (or take the published tip) before reading the path, and let
// SnapshotDir/RecordFiles report ErrConflict through ExpectParent if the
// parent moved.
func TestReviewWorkspaceInflightParent(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	_, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "a", Data: []byte("a")})
	require.NoError(t, err)
	stop := time.Now().Add(2 * time.Second)
	var done atomic.Bool
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for !done.Load() && time.Now().Before(stop) {
				_, err := s.Append(ctx, id, UserText("meanwhile"))
				assert.NoError(t, err)
			}
		})
	}
	var notFound []string
	for !done.Load() && time.Now().Before(stop) {
		if _, err := s.Files(ctx, id, uuid.Nil); errors.Is(err, ErrNotFound) {
			notFound = append(notFound, "Files: "+err.Error())
		}
		if _, err := s.State(ctx, id, uuid.Nil); errors.Is(err, ErrNotFound) {
			notFound = append(notFound, "State: "+err.Error())
		}
		if _, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "b", Data: []byte(time.Now().String())}); errors.Is(err, ErrNotFound) {
			notFound = append(notFound, "RecordFiles: "+err.Error())
		}
		if len(notFound) >= 3 {
			done.Store(true)
		}
	}
	done.Store(true)
	wg.Wait()
	assert.Empty(t, notFound, "ErrNotFound for a session and events that exist, during concurrent appends")
}

// TestReviewWorkspaceRecordFilesDropsIgnoreRules: a manifest written by
// RecordFiles carries no rules, and Workspace.Ignore is the newest
// snapshot's rules, Restore's default. The harness flow the docs give
// (SnapshotDir with rules, then RecordFiles for each edit's pre- and
// post-image) therefore makes a default Restore to any event after an
// edit read the directory with no rules and remove everything the
// snapshot was told to leave alone: node_modules, build output, .env.
// The workspace still holds only what those rules selected. Correct:
// RecordFiles (and a full manifest it writes) carries the base
// workspace's Ignore/GitIgnore forward, so that the rules stay those of
// the last SnapshotDir on the path.
func TestReviewWorkspaceRecordFilesDropsIgnoreRules(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{"main.go": "v1", "node_modules/dep/index.js": "dep", ".env": "SECRET=1"})
	_, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{Ignore: []string{"node_modules/", ".env"}})
	require.NoError(t, err)
	_, err = s.RecordFiles(ctx, id, "before edit", FileWrite{Path: "main.go", Data: []byte("v1")})
	require.NoError(t, err)
	writeTree(t, work, map[string]string{"main.go": "v2"})
	after, err := s.RecordFiles(ctx, id, "after edit", FileWrite{Path: "main.go", Data: []byte("v2")})
	require.NoError(t, err)

	ws, err := s.Files(ctx, id, after.ID)
	require.NoError(t, err)
	assert.Equal(t, []string{"node_modules/", ".env"}, ws.Ignore, "the rules of the last SnapshotDir still describe the workspace")
	rep, err := s.Restore(ctx, id, after.ID, work, RestoreOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Removed)
	assert.Equal(t, map[string]string{"main.go": "v2", "node_modules/dep/index.js": "dep", ".env": "SECRET=1"}, readWorkTree(t, work),
		"a default Restore leaves the files the snapshot ignored")
}

// TestReviewWorkspaceVanishedFileFailsSnapshot: Scan tolerates a file
// removed between the listing and its stat ("removed since the
// listing"), but a file removed between the scan and its read fails the
// whole SnapshotDir with a bare "no such file or directory". Build tools
// and editors create and remove temporary files all the time, so a
// snapshot taken while one runs fails at random. Correct: a file gone
// (fs.ErrNotExist) when read is taken as removed, as Scan does (or the
// error is ErrConflict-like and documented as retryable).
func TestReviewWorkspaceVanishedFileFailsSnapshot(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	s, id, hfs := rvHookStore(t, work, Options{})
	writeTree(t, work, map[string]string{"main.go": "m", "build.tmp": "t"})
	victim := filepath.Join(work, "build.tmp")
	hfs.setHook(func(name string) {
		if name == victim {
			_ = os.Remove(victim) // the tool removes its temporary file
		}
	})
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"main.go"}, r.Added)
}

// TestReviewWorkspaceReencryptRace: Reencrypt checks hasSnapshots before
// it takes the session for its rewrite, and SnapshotDir/RecordFiles seal
// their contents under the current key generation before their manifest
// is appended. A snapshot in progress when Reencrypt starts passes the
// check (its manifest is not appended yet), commits, and the rewrite
// then drops the old generation, which the content blobs (named only by
// the manifest, so not resealed) are sealed under: both calls succeed
// and the file can never be read again ("sealed under key generation 1,
// which its key record does not hold"), for this Store and any other.
// Correct: check for snapshots under the session's exclusive hold (after
// the rewrite has closed the session and appends wait), and make a
// snapshot that sealed under a generation that is gone fail (or reseal)
// instead of committing; or keep a generation while a manifest names it.
func TestReviewWorkspaceReencryptRace(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	s, id, hfs := rvHookStore(t, work, Options{Keys: testKeys(t, "local:x", 1)})
	say(t, s, id, "hello")
	writeTree(t, work, map[string]string{"a": "secret content"})
	var once sync.Once
	reErr := make(chan error, 1)
	hfs.setHook(func(string) {
		once.Do(func() {
			go func() { reErr <- s.Reencrypt(ctx, id) }()
			time.Sleep(200 * time.Millisecond) // Reencrypt passes its check meanwhile
		})
	})
	r, snapErr := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	hfs.setHook(nil)
	rerr := <-reErr
	if snapErr != nil || rerr != nil {
		t.Logf("one refused: snapshot %v, reencrypt %v", snapErr, rerr)
		return
	}
	ws, err := s.Files(ctx, id, r.Event.ID)
	require.NoError(t, err)
	for _, f := range ws.Files {
		b, err := s.ReadFile(ctx, id, f)
		assert.NoError(t, err, "both calls succeeded: the snapshot's content must read")
		assert.Equal(t, "secret content", string(b))
	}
}

// TestReviewWorkspaceRestoreGitIgnoreFromWorkspace: with GitIgnore,
// Restore reads the .gitignore files the directory holds before the
// Restore, not those of the workspace it restores. A snapshot taken with
// ".gitignore: *.log" never held debug.log; after the rule is dropped
// from .gitignore, a Restore of that snapshot (its own rules by
// default) sees debug.log as a file the workspace lacks and removes it:
// a file the snapshot's rules ignore, never stored anywhere, is lost.
// (The other way round, a rule added since leaves files the workspace
// lacks in place, and a SnapshotDir right after records them.) Correct:
// read each directory's .gitignore from the workspace being restored
// when it holds one (it is a file of the workspace), falling back to
// the directory's.
func TestReviewWorkspaceRestoreGitIgnoreFromWorkspace(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{".gitignore": "*.log\n", "main.go": "m", "debug.log": "precious, never stored"})
	r1, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{GitIgnore: true})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{".gitignore", "main.go"}, r1.Added)
	writeTree(t, work, map[string]string{".gitignore": "# no rules now\n"})
	rep, err := s.Restore(ctx, id, r1.Event.ID, work, RestoreOptions{})
	require.NoError(t, err)
	assert.NotContains(t, rep.Removed, "debug.log")
	assert.Equal(t, "precious, never stored", readWorkTree(t, work)["debug.log"],
		"the restored workspace's own .gitignore ignores debug.log")
}

// TestReviewWorkspaceRestoreIgnoredFileWhereDirGoes: a file the rules
// ignore, standing where the workspace needs a directory, is removed by
// Writer.ensureDir (makeDir removes whatever is not a directory) without
// being listed in RestoreReport.Removed, in the dry run or the real run:
// Restore's doc says ignored files "are left alone", and its report says
// nothing of the file it destroyed. Correct: treat it as a conflict
// found before anything changes (an error naming it, as git checkout
// refuses to overwrite untracked files), or at least list it in Removed
// in the dry run and the report.
func TestReviewWorkspaceRestoreIgnoredFileWhereDirGoes(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{"a/b": "b"})
	// The file "a" is ignored, the directory "a" is not.
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{Ignore: []string{"a", "!a/"}})
	require.NoError(t, err)
	require.Equal(t, []string{"a/b"}, r.Added)
	target := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(target, "a"), []byte("ignored, precious"), 0o644))
	dry, err := s.Restore(ctx, id, r.Event.ID, target, RestoreOptions{DryRun: true})
	if errors.Is(err, ErrConflict) {
		// Decided: Restore refuses, and its dry run says so, naming the
		// file; nothing changes.
		_, err = s.Restore(ctx, id, r.Event.ID, target, RestoreOptions{})
		assert.ErrorIs(t, err, ErrConflict)
		b, rerr := os.ReadFile(filepath.Join(target, "a"))
		require.NoError(t, rerr)
		assert.Equal(t, "ignored, precious", string(b))
		return
	}
	require.NoError(t, err)
	rep, err := s.Restore(ctx, id, r.Event.ID, target, RestoreOptions{})
	info, serr := os.Lstat(filepath.Join(target, "a"))
	if serr == nil && info.Mode().IsRegular() {
		return // left alone (the Restore may fail, naming the conflict)
	}
	require.NoError(t, err)
	assert.Contains(t, dry.Removed, "a", "the dry run says the ignored file goes")
	assert.Contains(t, rep.Removed, "a", "the report says the ignored file went")
}

// TestReviewWorkspaceGitIgnoreTrailingStarStar: the rules read
// "dir/**" with "**" matching zero elements, so the pattern matches
// "dir" itself. Git's "dir/**" matches everything inside dir but not dir
// (checked with git check-ignore): with git, "build/**" then
// "!build/keep.txt" keeps build/keep.txt (the documented idiom), and
// "abc/**" does not ignore a file named abc. Here the directory build is
// ignored, so never walked, and keep.txt and abc are silently left out
// of the snapshot. Correct: a trailing "/**" matches one or more
// elements.
func TestReviewWorkspaceGitIgnoreTrailingStarStar(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{
		".gitignore":     "build/**\n!build/keep.txt\nabc/**\n",
		"build/keep.txt": "k", "build/out.o": "o", "abc": "a file named abc",
	})
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{GitIgnore: true})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{".gitignore", "build/keep.txt", "abc"}, r.Added, "as git status lists them")
}

// TestReviewWorkspaceGitIgnoreBracketNegation: rules are matched with
// path.Match, whose bracket negation is "[^...]"; gitignore's is
// "[!...]" (fnmatch). "x[!a]" in git ignores "xb" and keeps "xa"
// (checked with git check-ignore); here it does the opposite: xa is
// silently left out of the snapshot and xb recorded. Correct: translate
// a leading "!" in a bracket expression to "^" before path.Match.
func TestReviewWorkspaceGitIgnoreBracketNegation(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	work := t.TempDir()
	writeTree(t, work, map[string]string{".gitignore": "x[!a]\n", "xa": "kept by git", "xb": "ignored by git"})
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{GitIgnore: true})
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{".gitignore", "xa"}, r.Added)
}

// ---------------------------------------------------------------------
// Passing coverage of risky cases.
// ---------------------------------------------------------------------

// TestReviewWorkspaceCoverageGCDuringSnapshot (passing coverage): GC runs
// on every read of a workspace file by SnapshotDir, so between blob
// writes and the manifest's append; every content stays (writingBlobs).
func TestReviewWorkspaceCoverageGCDuringSnapshot(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	for _, o := range []Options{{}, {Keys: testKeys(t, "local:gc", 2)}} {
		s, id, hfs := rvHookStore(t, work, o)
		files := map[string]string{}
		for i := range 30 {
			files[fmt.Sprint("f", i)] = fmt.Sprint("content ", i, strings.Repeat("x", i*100))
		}
		writeTree(t, work, files)
		hfs.setHook(func(string) {
			_, err := s.GC(ctx, id)
			assert.NoError(t, err)
		})
		r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
		hfs.setHook(nil)
		require.NoError(t, err)
		_, err = s.GC(ctx, id)
		require.NoError(t, err)
		ws, err := s.Files(ctx, id, r.Event.ID)
		require.NoError(t, err)
		assert.Equal(t, files, wsContents(t, s, id, ws))
	}
}

// TestReviewWorkspaceCoverageConflictMidSnapshot (passing coverage): an
// Append while SnapshotDir reads the files makes it return ErrConflict
// and append nothing; called again it records the change.
func TestReviewWorkspaceCoverageConflictMidSnapshot(t *testing.T) {
	ctx := context.Background()
	work := t.TempDir()
	s, id, hfs := rvHookStore(t, work, Options{})
	writeTree(t, work, map[string]string{"a": "a", "b": "b"})
	_, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	writeTree(t, work, map[string]string{"a": "changed"})
	var once sync.Once
	var moved Event
	hfs.setHook(func(string) { once.Do(func() { moved = say(t, s, id, "meanwhile") }) })
	r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	hfs.setHook(nil)
	assert.ErrorIs(t, err, ErrConflict)
	assert.Equal(t, uuid.Nil, r.Event.ID)
	head, err := s.Head(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, moved.ID, head, "nothing appended after the conflicting event")
	r, err = s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"a"}, r.Modified)
	assert.Equal(t, moved.ID, r.Event.ParentID)
}

// TestReviewWorkspaceCoverageConcurrent (passing coverage, meant for
// -race): SnapshotDir of a changing directory, RecordFiles, Append,
// AppendState, GC and Branch on one session at once. ErrConflict is the
// expected outcome of a lost race; ErrNotFound is the in-flight bug of
// TestReviewWorkspaceInflightParent, tolerated here. Afterwards every
// event's workspace reads back whole: GC removed nothing a manifest
// names.
func TestReviewWorkspaceCoverageConcurrent(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	root := say(t, s, id, "root")
	work := t.TempDir()
	writeTree(t, work, map[string]string{"a": "a", "d/b": "b"})
	stop := time.Now().Add(time.Second)
	var mu sync.Mutex
	unexpected := map[string]int{}
	note := func(what string, err error) {
		if err != nil && !errors.Is(err, ErrConflict) && !errors.Is(err, ErrNotFound) &&
			!errors.Is(err, fs.ErrNotExist) { // a file removed between scan and read: TestReviewWorkspaceVanishedFileFailsSnapshot
			mu.Lock()
			unexpected[what+": "+err.Error()]++
			mu.Unlock()
		}
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; time.Now().Before(stop); i++ {
			_ = os.WriteFile(filepath.Join(work, "d", fmt.Sprint("f", i%7)), []byte(fmt.Sprint("content ", i)), 0o644)
			if i%5 == 0 {
				_ = os.Remove(filepath.Join(work, "d", fmt.Sprint("f", (i+3)%7)))
			}
			time.Sleep(time.Millisecond)
		}
	})
	wg.Go(func() {
		for time.Now().Before(stop) {
			_, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
			note("snapshot", err)
		}
	})
	wg.Go(func() {
		for i := 0; time.Now().Before(stop); i++ {
			_, err := s.RecordFiles(ctx, id, "", FileWrite{Path: fmt.Sprint("r/", i%5), Data: []byte(fmt.Sprint("rec ", i))})
			note("record", err)
		}
	})
	wg.Go(func() {
		for time.Now().Before(stop) {
			_, err := s.Append(ctx, id, UserText("hi"))
			note("append", err)
			_, err = s.AppendState(ctx, id, StateDelta{Set: map[string]json.RawMessage{"k": json.RawMessage(`1`)}})
			note("state", err)
		}
	})
	wg.Go(func() {
		for time.Now().Before(stop) {
			_, err := s.GC(ctx, id)
			note("gc", err)
		}
	})
	wg.Go(func() {
		for time.Now().Before(stop) {
			note("branch", s.Branch(ctx, id, root.ID))
			time.Sleep(5 * time.Millisecond)
		}
	})
	wg.Wait()
	assert.Empty(t, unexpected)
	_, err := s.GC(ctx, id)
	require.NoError(t, err)
	nodes, err := s.Tree(ctx, id)
	require.NoError(t, err)
	for _, n := range nodes {
		ws, err := s.Files(ctx, id, n.ID)
		require.NoError(t, err)
		for _, f := range ws.Files {
			_, err := s.ReadFile(ctx, id, f)
			require.NoError(t, err, "event %s file %s", n.ID, f.Path)
		}
	}
}

// TestReviewWorkspaceCoverageManyDeltas (passing coverage): 1200
// deltas in a row (every 20th changes a file of a 60-file tree, the
// others are empty marks): the 1001st delta in a row is full
// (maxDepth), no other is, and Files is right at old and new events,
// from a fresh Store (no cache) too.
func TestReviewWorkspaceCoverageManyDeltas(t *testing.T) {
	ctx := context.Background()
	mfs := vfs.NewMemFS()
	s, err := Open("/store", &Options{fs: mfs})
	require.NoError(t, err)
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	id := m.ID
	model := map[string]string{}
	var base []FileWrite
	for i := range 60 {
		p, c := fmt.Sprintf("f%02d", i), fmt.Sprint(i)
		base = append(base, FileWrite{Path: p, Data: []byte(c)})
		model[p] = rvDigest(c)
	}
	_, err = s.RecordFiles(ctx, id, "", base...)
	require.NoError(t, err)
	type point struct {
		id    uuid.UUID
		model map[string]string
	}
	var points []point
	var fulls []int
	for i := range 1200 {
		var ws []FileWrite
		if i%20 == 0 {
			p, c := fmt.Sprintf("f%02d", (i/20*7)%60), fmt.Sprint("v", i)
			ws = append(ws, FileWrite{Path: p, Data: []byte(c)})
			model[p] = rvDigest(c)
		}
		ev, err := s.RecordFiles(ctx, id, "", ws...)
		require.NoError(t, err)
		var rec snapshotRecord
		require.NoError(t, json.Unmarshal(ev.Record, &rec))
		if rec.Full {
			fulls = append(fulls, i)
		}
		if i%199 == 0 || i == 999 || i == 1000 || i == 1199 {
			points = append(points, point{ev.ID, maps.Clone(model)})
		}
	}
	assert.Equal(t, []int{maxDepth}, fulls, "the delta after %d in a row is full", maxDepth)
	check := func(s *Store) {
		for _, pt := range points {
			ws, err := s.Files(ctx, id, pt.id)
			require.NoError(t, err)
			got := map[string]string{}
			for _, f := range ws.Files {
				got[f.Path] = f.Digest
			}
			assert.Equal(t, pt.model, got)
		}
	}
	check(s)
	require.NoError(t, s.Close())
	s2, err := Open("/store", &Options{fs: mfs})
	require.NoError(t, err)
	defer s2.Close()
	check(s2)
}

// TestReviewWorkspaceCoverageForkGC (passing coverage): a fork and a
// fork of the fork read their unchanged files from the first parent's
// blobs after every session's GC, plain and encrypted; the parent
// cannot be deleted while forks read from it.
func TestReviewWorkspaceCoverageForkGC(t *testing.T) {
	ctx := context.Background()
	for _, o := range []*Options{nil, {Keys: testKeys(t, "local:fork", 4)}} {
		s, id := wsStore(t, o)
		p1, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "keep", Data: []byte("k")}, FileWrite{Path: "shared", Data: []byte("v1")})
		require.NoError(t, err)
		_, err = s.RecordFiles(ctx, id, "", FileWrite{Path: "keep", Deleted: true})
		require.NoError(t, err)
		f1, err := s.Fork(ctx, id, p1.ID)
		require.NoError(t, err)
		e1, err := s.RecordFiles(ctx, f1.ID, "", FileWrite{Path: "shared", Data: []byte("fork")})
		require.NoError(t, err)
		f2, err := s.Fork(ctx, f1.ID, e1.ID)
		require.NoError(t, err)
		e2, err := s.RecordFiles(ctx, f2.ID, "", FileWrite{Path: "new", Data: []byte("n")})
		require.NoError(t, err)
		for _, sess := range []uuid.UUID{id, f1.ID, f2.ID} {
			_, err := s.GC(ctx, sess)
			require.NoError(t, err)
		}
		ws, err := s.Files(ctx, f2.ID, e2.ID)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"keep": "k", "shared": "fork", "new": "n"}, wsContents(t, s, f2.ID, ws))
		dir := t.TempDir()
		_, err = s.Restore(ctx, f2.ID, e2.ID, dir, RestoreOptions{})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"keep": "k", "shared": "fork", "new": "n"}, readWorkTree(t, dir))
		assert.ErrorIs(t, s.Delete(ctx, id), ErrHasForks)
		_, err = s.Files(ctx, id, e1.ID)
		assert.ErrorIs(t, err, ErrNotFound, "Files of another session's event")
		_, err = s.State(ctx, id, e1.ID)
		assert.ErrorIs(t, err, ErrNotFound, "State of another session's event")
	}
}

// TestReviewWorkspaceCoverageEncryptedNoKeys (passing coverage): a Store
// without the keys gets ErrKeyUnavailable from Files, State and
// Restore (which then touches nothing, even with NoRules), and its GC
// refuses rather than collecting contents it cannot see named; a Store
// with the keys, read-only, reads everything after.
func TestReviewWorkspaceCoverageEncryptedNoKeys(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	keys := testKeys(t, "local:x", 1)
	s, err := Open(root, &Options{Keys: keys})
	require.NoError(t, err)
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	ev, err := s.RecordFiles(ctx, m.ID, "", FileWrite{Path: "a", Data: []byte("secret a")})
	require.NoError(t, err)
	_, err = s.AppendState(ctx, m.ID, StateDelta{Set: map[string]json.RawMessage{"k": json.RawMessage(`1`)}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	nokeys, err := Open(root, nil)
	require.NoError(t, err)
	_, err = nokeys.Files(ctx, m.ID, uuid.Nil)
	assert.ErrorIs(t, err, ErrKeyUnavailable)
	_, err = nokeys.State(ctx, m.ID, uuid.Nil)
	assert.ErrorIs(t, err, ErrKeyUnavailable)
	dir := t.TempDir()
	writeTree(t, dir, map[string]string{"mine": "x"})
	_, err = nokeys.Restore(ctx, m.ID, ev.ID, dir, RestoreOptions{NoRules: true})
	assert.ErrorIs(t, err, ErrKeyUnavailable)
	assert.Equal(t, map[string]string{"mine": "x"}, readWorkTree(t, dir))
	_, err = nokeys.GC(ctx, m.ID)
	assert.Error(t, err, "GC cannot read the manifests: it removes nothing")
	require.NoError(t, nokeys.Close())

	ro, err := Open(root, &Options{ReadOnly: true, Keys: keys})
	require.NoError(t, err)
	defer ro.Close()
	ws, err := ro.Files(ctx, m.ID, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "secret a"}, wsContents(t, ro, m.ID, ws))
}

// TestReviewWorkspaceCoverageReadOnlyStore (passing coverage): a
// read-only Store reads workspaces and state, diffs, and restores
// without Branch; the writing calls say ErrReadOnly.
func TestReviewWorkspaceCoverageReadOnlyStore(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := Open(root, nil)
	require.NoError(t, err)
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	e1, err := s.RecordFiles(ctx, m.ID, "", FileWrite{Path: "a", Data: []byte("a1")})
	require.NoError(t, err)
	e2, err := s.RecordFiles(ctx, m.ID, "", FileWrite{Path: "a", Data: []byte("a2")}, FileWrite{Path: "b", Data: []byte("b")})
	require.NoError(t, err)
	_, err = s.AppendState(ctx, m.ID, StateDelta{Set: map[string]json.RawMessage{"mode": json.RawMessage(`"plan"`)}})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	ro, err := Open(root, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	ws, err := ro.Files(ctx, m.ID, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "a2", "b": "b"}, wsContents(t, ro, m.ID, ws))
	d, err := ro.Diff(ctx, m.ID, e1.ID, e2.ID)
	require.NoError(t, err)
	assert.Len(t, d, 2)
	st, err := ro.State(ctx, m.ID, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]json.RawMessage{"mode": json.RawMessage(`"plan"`)}, st)
	dir := t.TempDir()
	_, err = ro.Restore(ctx, m.ID, e1.ID, dir, RestoreOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"a": "a1"}, readWorkTree(t, dir))
	_, err = ro.SnapshotDir(ctx, m.ID, dir, SnapshotOptions{})
	assert.ErrorIs(t, err, ErrReadOnly)
	_, err = ro.RecordFiles(ctx, m.ID, "", FileWrite{Path: "x", Data: []byte("x")})
	assert.ErrorIs(t, err, ErrReadOnly)
	_, err = ro.AppendState(ctx, m.ID, StateDelta{Delete: []string{"mode"}})
	assert.ErrorIs(t, err, ErrReadOnly)
}

// TestReviewWorkspaceCoverageHostileTarget (passing coverage): Restore
// into a directory holding a FIFO where a file goes, a socket where a
// directory goes, links at file and directory places (to outside), a
// read-only file, and a FIFO and a link the workspace does not name:
// it never blocks, never writes through a link, replaces what stands in
// the way and leaves the other FIFO and link alone. A target that is a
// FIFO itself is an error at once.
func TestReviewWorkspaceCoverageHostileTarget(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, nil)
	want := map[string]string{"f": "file", "d/x": "in d", "l": "was a link", "s/y": "under s", "ro": "new content"}
	var ws []FileWrite
	for p, c := range want {
		ws = append(ws, FileWrite{Path: p, Data: []byte(c)})
	}
	ev, err := s.RecordFiles(ctx, id, "", ws...)
	require.NoError(t, err)

	outside := t.TempDir()
	writeTree(t, outside, map[string]string{"victim": "do not touch"})
	target := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(target, "f"), 0o644))
	require.NoError(t, syscall.Mkfifo(filepath.Join(target, "other.fifo"), 0o644))
	ln, err := net.Listen("unix", filepath.Join(target, "d"))
	require.NoError(t, err)
	defer ln.Close()
	require.NoError(t, os.Symlink(filepath.Join(outside, "victim"), filepath.Join(target, "l")))
	require.NoError(t, os.Symlink(outside, filepath.Join(target, "s")))
	require.NoError(t, os.Symlink(outside, filepath.Join(target, "other.link")))
	require.NoError(t, os.WriteFile(filepath.Join(target, "ro"), []byte("old"), 0o444))

	done := make(chan error, 1)
	go func() {
		_, err := s.Restore(ctx, id, ev.ID, target, RestoreOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Restore blocked")
	}
	assert.Equal(t, want, readWorkTree(t, target))
	assert.Equal(t, map[string]string{"victim": "do not touch"}, readWorkTree(t, outside))
	info, err := os.Lstat(filepath.Join(target, "other.fifo"))
	require.NoError(t, err)
	assert.Equal(t, fs.ModeNamedPipe, info.Mode().Type(), "a FIFO the workspace does not name is left alone")
	info, err = os.Lstat(filepath.Join(target, "other.link"))
	require.NoError(t, err)
	assert.Equal(t, fs.ModeSymlink, info.Mode().Type(), "a link the workspace does not name is left alone")

	fifoDir := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifoDir, 0o644))
	go func() {
		_, err := s.Restore(ctx, id, ev.ID, fifoDir, RestoreOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		assert.Error(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Restore into a FIFO blocked")
	}
}

// TestReviewWorkspaceCoverageState (passing coverage): state deltas
// over the record limit are ErrRecordTooLarge, bad keys and values
// ErrInvalidEvent; a fork sees its parent's state up to the fork point.
func TestReviewWorkspaceCoverageState(t *testing.T) {
	ctx := context.Background()
	s, id := wsStore(t, &Options{MaxRecordSize: 4096})
	p, err := s.AppendState(ctx, id, StateDelta{Set: map[string]json.RawMessage{"mode": json.RawMessage(`"plan"`)}})
	require.NoError(t, err)
	_, err = s.AppendState(ctx, id, StateDelta{Set: map[string]json.RawMessage{"big": json.RawMessage(`"` + strings.Repeat("x", 5000) + `"`)}})
	assert.ErrorIs(t, err, ErrRecordTooLarge)
	for _, d := range []StateDelta{
		{},
		{Set: map[string]json.RawMessage{"": json.RawMessage(`1`)}},
		{Set: map[string]json.RawMessage{"k": json.RawMessage(`{`)}},
		{Set: map[string]json.RawMessage{"k": nil}},
		{Delete: []string{"bad\xff"}},
		{Delete: []string{strings.Repeat("k", MaxStateKey+1)}},
	} {
		_, err := s.AppendState(ctx, id, d)
		assert.ErrorIs(t, err, ErrInvalidEvent, "%+v", d)
	}
	_, err = s.AppendState(ctx, id, StateDelta{Set: map[string]json.RawMessage{"after": json.RawMessage(`true`)}})
	require.NoError(t, err)
	f, err := s.Fork(ctx, id, p.ID)
	require.NoError(t, err)
	_, err = s.AppendState(ctx, f.ID, StateDelta{Set: map[string]json.RawMessage{"fork": json.RawMessage(`1`)}})
	require.NoError(t, err)
	st, err := s.State(ctx, f.ID, uuid.Nil)
	require.NoError(t, err)
	assert.Equal(t, map[string]json.RawMessage{"mode": json.RawMessage(`"plan"`), "fork": json.RawMessage(`1`)}, st)
}

// TestReviewWorkspaceCoverageEmptyAndLimitFiles (passing coverage): an
// empty file and a file of exactly MaxRecordSize bytes round-trip in a
// plain session and in an encrypted one with a small MaxRecordSize
// (whose sealed blob is larger than the limit).
func TestReviewWorkspaceCoverageEmptyAndLimitFiles(t *testing.T) {
	ctx := context.Background()
	for _, o := range []*Options{{MaxRecordSize: 4096}, {Keys: testKeys(t, "local:x", 1), MaxRecordSize: 4096}} {
		s, id := wsStore(t, o)
		want := map[string]string{"empty": "", "max": strings.Repeat("m", 4096)}
		_, err := s.RecordFiles(ctx, id, "", FileWrite{Path: "empty", Data: []byte{}}, FileWrite{Path: "max", Data: []byte(want["max"])})
		require.NoError(t, err)
		ws, err := s.Files(ctx, id, uuid.Nil)
		require.NoError(t, err)
		assert.Equal(t, want, wsContents(t, s, id, ws))
		dir := t.TempDir()
		_, err = s.Restore(ctx, id, uuid.Nil, dir, RestoreOptions{})
		require.NoError(t, err)
		assert.Equal(t, want, readWorkTree(t, dir))
		rep, err := s.Restore(ctx, id, uuid.Nil, dir, RestoreOptions{})
		require.NoError(t, err)
		assert.Equal(t, 2, rep.Unchanged)
		_, err = s.RecordFiles(ctx, id, "", FileWrite{Path: "over", Data: []byte(strings.Repeat("o", 4097))})
		assert.ErrorIs(t, err, ErrRecordTooLarge)
	}
}
