package claude

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/importer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deepManifest is the shared transcript with file-history-snapshot lines
// that name backups: relative paths, one outside the working directory,
// updates, and a last line whose message is not in the file.
func deepManifest(t *testing.T) string {
	return filepath.Join(sharedData(t), "-src-deep-manifest", "a7da6a22-facc-4fcd-8bab-f83c87862004.jsonl")
}

// rawHistory is a file-history-snapshot line of a transcript, as a test
// reads it: its 1-based line and members.
type rawHistory struct {
	line int
	h    historyLine
}

// historyLines reads the file-history-snapshot lines of the transcript
// at path.
func historyLines(t *testing.T, path string) []rawHistory {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<28)
	var out []rawHistory
	for n := 1; sc.Scan(); n++ {
		if !bytes.Contains(sc.Bytes(), []byte(`"type":"file-history-snapshot"`)) {
			continue
		}
		var h historyLine
		require.NoError(t, json.Unmarshal(sc.Bytes(), &h))
		if h.Snapshot.MessageID == "" {
			h.Snapshot.MessageID = h.MessageID
		}
		out = append(out, rawHistory{n, h})
	}
	require.NoError(t, sc.Err())
	return out
}

// backupContent is what the synthetic file history holds for a backup.
func backupContent(key, name string) string { return fmt.Sprintf("%s at %s\n", key, name) }

// writeHistory builds a synthetic file-history directory in dir for the
// transcripts: <dir>/<session id>/<backupFileName> for every backup they
// name, holding backupContent, but for the names in missing.
func writeHistory(t *testing.T, dir string, paths []string, missing ...string) {
	t.Helper()
	for _, p := range paths {
		sid := strings.TrimSuffix(filepath.Base(p), ".jsonl")
		for _, l := range historyLines(t, p) {
			for k, b := range l.h.Snapshot.TrackedFileBackups {
				if b.BackupFileName == nil || slices.Contains(missing, *b.BackupFileName) {
					continue
				}
				require.NoError(t, os.MkdirAll(filepath.Join(dir, sid), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(dir, sid, *b.BackupFileName), []byte(backupContent(k, *b.BackupFileName)), 0o644))
			}
		}
	}
}

// recordEvents maps each record uuid of the transcript at path to the
// imported id of its last event (as Read places it).
func recordEvents(t *testing.T, path string) (uuid.UUID, map[string]uuid.UUID) {
	t.Helper()
	f, err := Read(path)
	require.NoError(t, err)
	require.NotEmpty(t, f.Sessions)
	return f.Sessions[0].Meta.ID, f.infos[0].leaves
}

// snapshotAfter returns the snapshot event that is a child of ev, or
// uuid.Nil, and the number of ev's children.
func snapshotAfter(t *testing.T, st *sessionstore.Store, s, ev uuid.UUID) (uuid.UUID, int) {
	t.Helper()
	ctx := context.Background()
	children, err := st.Children(ctx, s, ev)
	require.NoError(t, err)
	for _, c := range children {
		if c.Kind == sessionstore.KindCustom && strings.HasPrefix(c.Preview, manifestMark) {
			return c.ID, len(children)
		}
	}
	return uuid.Nil, len(children)
}

// workspaceAt is the workspace of session s as of event at: path to
// content.
func workspaceAt(t *testing.T, st *sessionstore.Store, s, at uuid.UUID) map[string]string {
	t.Helper()
	ctx := context.Background()
	ws, err := st.Files(ctx, s, at)
	require.NoError(t, err)
	out := map[string]string{}
	for _, f := range ws.Files {
		b, err := st.ReadFile(ctx, s, f)
		require.NoError(t, err)
		out[f.Path] = string(b)
	}
	return out
}

// withoutSnapshots is evs without the snapshot events, by id and kind.
func withoutSnapshots(evs []sessionstore.Event) []string {
	var out []string
	for _, ev := range evs {
		if ev.Kind == sessionstore.KindCustom && bytes.HasPrefix(ev.Record, []byte(manifestMark)) {
			continue
		}
		out = append(out, ev.ID.String()+" "+string(ev.Kind))
	}
	return out
}

// manifests counts the snapshot events of session s.
func manifests(t *testing.T, st *sessionstore.Store, s uuid.UUID) int {
	t.Helper()
	nodes, err := st.Tree(context.Background(), s)
	require.NoError(t, err)
	n := 0
	for _, nd := range nodes {
		if nd.Kind == sessionstore.KindCustom && strings.HasPrefix(nd.Preview, manifestMark) {
			n++
		}
	}
	return n
}

// checkPlaced checks, for each file-history line of the transcript at
// path placed in the session (its message a record of the file), the
// workspace right after that message (its snapshot, else the message's
// event) against what the line says: every backup of a path below the
// working directory, at its version, but for the backups in missing and
// the files that do not exist. It returns the lines checked.
func checkPlaced(t *testing.T, st *sessionstore.Store, path, cwd string, missing ...string) int {
	t.Helper()
	s, leaves := recordEvents(t, path)
	checked := 0
	for _, l := range historyLines(t, path) {
		ev, ok := leaves[l.h.MessageID]
		if !ok {
			continue
		}
		at := ev
		if snap, _ := snapshotAfter(t, st, s, ev); snap != uuid.Nil {
			at = snap
		}
		want := map[string]string{}
		for k, b := range l.h.Snapshot.TrackedFileBackups {
			rel := strings.TrimPrefix(k, cwd+"/")
			if b.BackupFileName == nil || strings.HasPrefix(rel, "/") || slices.Contains(missing, *b.BackupFileName) {
				continue
			}
			want[rel] = backupContent(k, *b.BackupFileName)
		}
		assert.Equal(t, want, workspaceAt(t, st, s, at), "%s:%d: the workspace after message %s", path, l.line, l.h.MessageID)
		checked++
	}
	return checked
}

// TestFileHistoryRealTranscript: a real transcript imported with a
// synthetic file history (one backup missing) records its snapshots
// where its lines place them, each right after its message and before
// the events that follow it; the events are those of an import without
// the history; the paths outside the working directory and the missing
// backup are counted and told; importing again adds nothing.
func TestFileHistoryRealTranscript(t *testing.T) {
	ctx := context.Background()
	src := deepManifest(t)
	hist := t.TempDir()
	const missing = "65942dc3eb342f11@v1" // tests/test_unit.py before its first edit
	writeHistory(t, hist, []string{src}, missing)

	plain := openStore(t)
	want, err := Import(ctx, plain, []string{src}, nil)
	require.NoError(t, err)

	st := openStore(t)
	rep, err := ImportWith(ctx, st, []string{src}, &Options{FileHistory: hist})
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, want.Added, rep.Added, "the transcript's events, the snapshots not counted")
	assert.Equal(t, 1, rep.Created)
	// 15 lines, the last one's message not in the file. Of 12 backups
	// (versions new where their line is placed), 2 are of the plan file
	// outside the working directory and 1 is missing: 9 files, in 6
	// snapshots (the line naming only the missing backup records none).
	assert.Equal(t, HistoryStats{Lines: 15, Unplaced: 1, Backups: 12, Snapshots: 6, Files: 9, Outside: 2, Missing: 1}, rep.History)
	require.Len(t, rep.Notes, len(want.Notes)+1)
	note := rep.Notes[len(rep.Notes)-1]
	assert.Equal(t, src, note.Path)
	assert.Contains(t, note.Text, `2 outside the working directory "/src/deep-manifest" (such as "/home/cboos/.claude/plans/humble-doodling-wolf.md")`)
	assert.Contains(t, note.Text, `1 whose backup file is not in `+filepath.Join(hist, "a7da6a22-facc-4fcd-8bab-f83c87862004")+` (such as "`+missing+`")`)

	m := onlySession(t, st)
	assert.Equal(t, 6, manifests(t, st, m.ID))
	assert.Equal(t, 14, checkPlaced(t, st, src, "/src/deep-manifest", missing))

	// Each snapshot sits between its message and what followed it.
	s, leaves := recordEvents(t, src)
	require.Equal(t, m.ID, s)
	for _, l := range historyLines(t, src) {
		ev, ok := leaves[l.h.MessageID]
		if !ok {
			continue
		}
		if snap, n := snapshotAfter(t, st, s, ev); snap != uuid.Nil {
			assert.Equal(t, 1, n, "line %d: the snapshot is the message's only child", l.line)
			after, err := st.Children(ctx, s, snap)
			require.NoError(t, err)
			before, err := plain.Children(ctx, s, ev)
			require.NoError(t, err)
			require.Len(t, after, len(before))
			for i := range after {
				assert.Equal(t, before[i].ID, after[i].ID, "line %d: the events after the message follow the snapshot", l.line)
			}
		}
	}
	// The context is the transcript's, the snapshots aside.
	got, err := st.Load(ctx, s)
	require.NoError(t, err)
	base, err := plain.Load(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, withoutSnapshots(base), withoutSnapshots(got))
	assert.Less(t, len(withoutSnapshots(got)), len(got), "snapshots on the active path")
	head, err := st.Head(ctx, s)
	require.NoError(t, err)
	wantHead, err := plain.Head(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, wantHead, head)

	again, err := ImportWith(ctx, st, []string{src}, &Options{FileHistory: hist})
	require.NoError(t, err)
	assert.Zero(t, again.Added)
	assert.Equal(t, want.Added, again.Existing)
	assert.Zero(t, again.History.Snapshots)
	assert.Equal(t, 6, again.History.Found, "the snapshots of the first import, found in place")
	assert.Equal(t, 6, manifests(t, st, s))
}

// TestFileHistoryWithoutDirectory: without Options.FileHistory, the
// import is as before, and counts the backups it leaves.
func TestFileHistoryWithoutDirectory(t *testing.T) {
	ctx := context.Background()
	src := deepManifest(t)
	plain := openStore(t)
	want, err := Import(ctx, plain, []string{src}, nil)
	require.NoError(t, err)
	st := openStore(t)
	rep, err := ImportWith(ctx, st, []string{src}, nil)
	require.NoError(t, err)
	assert.Equal(t, want, rep.Report)
	assert.Equal(t, HistoryStats{Lines: 15, Unplaced: 1, Backups: 12, Outside: 2, NoHistory: 10}, rep.History)
	assert.Zero(t, manifests(t, st, onlySession(t, st).ID))
}

// TestFileHistoryLate: a session imported without its file history
// cannot take its snapshots later (the events after their places are
// stored): they are counted and told, and nothing is written.
func TestFileHistoryLate(t *testing.T) {
	ctx := context.Background()
	src := deepManifest(t)
	hist := t.TempDir()
	writeHistory(t, hist, []string{src})
	st := openStore(t)
	_, err := Import(ctx, st, []string{src}, nil)
	require.NoError(t, err)
	rep, err := ImportWith(ctx, st, []string{src}, &Options{FileHistory: hist})
	require.NoError(t, err)
	assert.Zero(t, rep.Added)
	assert.Zero(t, rep.History.Snapshots)
	assert.Equal(t, 10, rep.History.Late)
	assert.Contains(t, rep.Notes[len(rep.Notes)-1].Text, "10 whose place was imported before without them")
	assert.Zero(t, manifests(t, st, onlySession(t, st).ID))
}

// TestFileHistoryGrowing: a transcript imported as it grows, cut where a
// snapshot line waits for its message, gets the same workspaces as one
// imported whole.
func TestFileHistoryGrowing(t *testing.T) {
	ctx := context.Background()
	src := deepManifest(t)
	hist := t.TempDir()
	writeHistory(t, hist, []string{src})
	data, err := os.ReadFile(src)
	require.NoError(t, err)
	lines := bytes.SplitAfter(data, []byte("\n"))
	path := filepath.Join(t.TempDir(), filepath.Base(src))
	st := openStore(t)
	total := 0
	// Line 44 is the snapshot of the message on line 45; line 95 the
	// update of the tool call on line 96.
	for _, cut := range []int{44, 95, len(lines)} {
		require.NoError(t, os.WriteFile(path, bytes.Join(lines[:cut], nil), 0o600))
		rep, err := ImportWith(ctx, st, []string{path}, &Options{FileHistory: hist})
		require.NoError(t, err)
		assert.Empty(t, rep.Errors)
		assert.Zero(t, rep.History.Late, "cut at %d", cut)
		total += rep.History.Snapshots
	}
	assert.Equal(t, 7, total)
	assert.Equal(t, 14, checkPlaced(t, st, path, "/src/deep-manifest"))

	whole := openStore(t)
	_, err = ImportWith(ctx, whole, []string{src}, &Options{FileHistory: hist})
	require.NoError(t, err)
	s, _ := recordEvents(t, path)
	a, err := st.Load(ctx, s)
	require.NoError(t, err)
	b, err := whole.Load(ctx, s)
	require.NoError(t, err)
	assert.Equal(t, withoutSnapshots(b), withoutSnapshots(a))
	assert.Equal(t, len(b), len(a))
	assert.Equal(t, workspaceAt(t, whole, s, uuid.Nil), workspaceAt(t, st, s, uuid.Nil))
}

// TestFileHistoryAllRealTranscripts: every shared transcript with
// file-history lines imports with a file history as without one, the
// snapshots aside (the others never meet the file history): with none of
// the backups there, nothing is recorded; with all of them, every line's
// files are where it says.
func TestFileHistoryAllRealTranscripts(t *testing.T) {
	ctx := context.Background()
	var files []string
	for _, f := range transcripts(t, sharedData(t)) {
		if len(historyLines(t, f)) > 0 {
			files = append(files, f)
		}
	}
	require.Len(t, files, 4)
	plain := openStore(t)
	want, err := Import(ctx, plain, files, nil)
	require.NoError(t, err)

	empty := openStore(t)
	rep, err := ImportWith(ctx, empty, files, &Options{FileHistory: t.TempDir()})
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, want.Added, rep.Added)
	assert.Zero(t, rep.History.Snapshots)
	assert.Positive(t, rep.History.Missing)
	assert.Equal(t, rep.History.Backups, rep.History.Missing+rep.History.Outside)

	hist := t.TempDir()
	writeHistory(t, hist, files)
	st := openStore(t)
	rep, err = ImportWith(ctx, st, files, &Options{FileHistory: hist})
	require.NoError(t, err)
	assert.Empty(t, rep.Errors)
	assert.Equal(t, want.Added, rep.Added)
	assert.Positive(t, rep.History.Snapshots)
	assert.Zero(t, rep.History.Missing)
	metas, err := plain.List(ctx)
	require.NoError(t, err)
	for _, m := range metas {
		a, err := plain.Load(ctx, m.ID)
		require.NoError(t, err)
		b, err := st.Load(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, withoutSnapshots(a), withoutSnapshots(b), "session %s (%s)", m.ID, m.Labels["source_path"])
	}
	checked := 0
	for _, f := range files {
		if fl, err := Read(f); err == nil && len(fl.Sessions) > 0 {
			checked += checkPlaced(t, st, f, fl.Sessions[0].Meta.WorkingDir)
		}
	}
	assert.Equal(t, 25, checked, "the lines whose message is in their file")
}

// hostileLines is a transcript in /home/u/proj whose snapshot line names
// backups that must not be read: names that are paths out of the
// session's file-history directory, paths the workspace refuses, paths
// outside the working directory, a missing backup.
func hostileLines(sid string) []string {
	rec := func(typ, u, parent, content string, s int) string {
		p := "null"
		if parent != "" {
			p = fmt.Sprintf("%q", parent)
		}
		role := "user"
		msg := fmt.Sprintf(`{"role":"user","content":%q}`, content)
		if typ == "assistant" {
			role = "assistant"
			msg = fmt.Sprintf(`{"model":"m","id":"r%s","role":%q,"content":[{"type":"text","text":%q}]}`, u, role, content)
		}
		return fmt.Sprintf(`{"type":%q,"uuid":%q,"parentUuid":%s,"cwd":"/home/u/proj","sessionId":%q,"timestamp":"2026-01-01T00:00:%02dZ","message":%s}`, typ, u, p, sid, s, msg)
	}
	backups := map[string]any{
		"good.txt":             map[string]any{"backupFileName": "good@v1", "version": 1},
		"/home/u/proj/abs.txt": map[string]any{"backupFileName": "abs@v1", "version": 1},
		"/etc/passwd":          map[string]any{"backupFileName": "good@v1", "version": 1},
		"/home/u/projx/x.txt":  map[string]any{"backupFileName": "good@v1", "version": 1},
		"../up.txt":            map[string]any{"backupFileName": "good@v1", "version": 1},
		"a/../b.txt":           map[string]any{"backupFileName": "good@v1", "version": 1},
		"/home/u/proj/../p":    map[string]any{"backupFileName": "good@v1", "version": 1},
		"esc1.txt":             map[string]any{"backupFileName": "../secret.txt", "version": 1},
		"esc2.txt":             map[string]any{"backupFileName": "sub/x", "version": 1},
		"esc3.txt":             map[string]any{"backupFileName": "..", "version": 1},
		"esc4.txt":             map[string]any{"backupFileName": "/etc/passwd", "version": 1},
		"esc5.txt":             map[string]any{"backupFileName": `..\secret.txt`, "version": 1},
		"missing.txt":          map[string]any{"backupFileName": "nope@v1", "version": 1},
		"gone.txt":             map[string]any{"backupFileName": nil, "version": 1},
		"link.txt":             map[string]any{"backupFileName": "link@v1", "version": 1},
		"fifo.txt":             map[string]any{"backupFileName": "fifo@v1", "version": 1},
		"dir.txt":              map[string]any{"backupFileName": "dir@v1", "version": 1},
	}
	snap, _ := json.Marshal(map[string]any{"type": historyType, "messageId": "u1", "isSnapshotUpdate": false,
		"snapshot": map[string]any{"messageId": "u1", "trackedFileBackups": backups, "timestamp": "2026-01-01T00:00:00Z"}})
	return []string{
		string(snap),
		rec("user", "u1", "", "edit things", 1),
		rec("assistant", "u2", "u1", "done", 2),
	}
}

// TestFileHistoryHostile: backup names that are paths never read outside
// the session's file-history directory (nor inside it but below); paths
// outside the working directory are skipped and told, paths the rules
// refuse reported as malformed; the rest is recorded.
func TestFileHistoryHostile(t *testing.T) {
	ctx := context.Background()
	const sid = "22222222-2222-4222-8222-222222222222"
	hist := t.TempDir()
	sdir := filepath.Join(hist, sid)
	require.NoError(t, os.MkdirAll(filepath.Join(sdir, "sub"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(sdir, "dir@v1"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hist, "secret.txt"), []byte("SECRET"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sdir, "sub", "x"), []byte("SECRET below"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sdir, "good@v1"), []byte("good\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sdir, "abs@v1"), []byte("abs\n"), 0o755))
	hostileFiles(t, sdir) // link@v1, fifo@v1 where the system has them
	path := writeLines(t, t.TempDir(), sid, hostileLines(sid)...)

	st := openStore(t)
	done := make(chan struct{})
	var rep Report
	var err error
	go func() {
		defer close(done)
		rep, err = ImportWith(ctx, st, []string{path}, &Options{FileHistory: hist})
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the import blocks (on a FIFO?)")
	}
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Added)
	// Refused: three paths and five names.
	require.Len(t, rep.Errors, 8)
	for _, e := range rep.Errors {
		assert.ErrorIs(t, e, importer.ErrMalformed)
		assert.Equal(t, 1, lineOf(t, e), "%v", e)
	}
	for _, s := range []string{`"../up.txt"`, `"a/../b.txt"`, `"/home/u/proj/../p"`, `"../secret.txt"`, `"sub/x"`, `".."`, `name "/etc/passwd"`, `"..\\secret.txt"`} {
		found := false
		for _, e := range rep.Errors {
			found = found || strings.Contains(e.Error(), s)
		}
		assert.True(t, found, "an error names %s", s)
	}
	assert.Equal(t, HistoryStats{Lines: 1, Backups: 16, Snapshots: 1, Files: 2, Outside: 2, Refused: 8, Missing: 4}, rep.History)
	m := onlySession(t, st)
	ws := workspaceAt(t, st, m.ID, uuid.Nil)
	assert.Equal(t, map[string]string{"good.txt": "good\n", "abs.txt": "abs\n"}, ws)
	files, err := st.Files(ctx, m.ID, uuid.Nil)
	require.NoError(t, err)
	f, ok := files.File("abs.txt")
	require.True(t, ok)
	assert.Equal(t, os.FileMode(0o755), f.Mode, "the backup's mode")
	require.NotEmpty(t, rep.Notes)
	assert.Contains(t, rep.Notes[0].Text, `2 outside the working directory "/home/u/proj" (such as "/etc/passwd")`)
	assert.Contains(t, rep.Notes[0].Text, "4 whose backup file is not in")

	// A session id that is a path reads no directory.
	st2 := openStore(t)
	evil := writeLines(t, t.TempDir(), "evil", hostileLines("..")...)
	rep, err = ImportWith(ctx, st2, []string{evil}, &Options{FileHistory: sdir})
	require.NoError(t, err)
	assert.Zero(t, rep.History.Snapshots)
	assert.Equal(t, 6, rep.History.Missing, "good, abs, missing, link, fifo, dir: none read from ..")
}

// TestRelPath: the mapping of tracked paths to workspace paths.
func TestRelPath(t *testing.T) {
	for _, tc := range []struct {
		key, cwd string
		windows  bool
		want     string
		why      string
	}{
		{"a.txt", "/p", false, "a.txt", ""},
		{"/p/a/b.txt", "/p", false, "a/b.txt", ""},
		{"/p", "/p", false, "", "outside"},
		{"/px/a", "/p", false, "", "outside"},
		{"/a", "", false, "", "outside"},
		{"a//b", "/p", false, "", "has an empty element"},
		{"./a", "/p", false, "", "has a . element"},
		{"/p/../q", "/p", false, "", "has a .. element"},
		{"a/", "/p", false, "", "has an empty element"},
		{`C:\w\p\src\a.go`, `C:/w/p`, true, "src/a.go", ""},
		{`src\a.go`, `C:/w/p`, true, "src/a.go", ""},
		{`D:\x`, `C:/w/p`, true, "", "outside"},
		{`a\b`, "/p", false, `a\b`, ""},
	} {
		got, why := relPath(tc.key, tc.cwd, tc.windows)
		assert.Equal(t, tc.want, got, "%q in %q", tc.key, tc.cwd)
		assert.Contains(t, why, tc.why, "%q in %q", tc.key, tc.cwd)
		if tc.why == "" {
			assert.Empty(t, why)
		}
	}
}

// TestReadHistory: Read counts the file-history lines and the backups
// they place, and reports a malformed line only to an import given the
// file history.
func TestReadHistory(t *testing.T) {
	ctx := context.Background()
	f, err := Read(deepManifest(t))
	require.NoError(t, err)
	assert.Equal(t, HistoryStats{Lines: 15, Unplaced: 1, Backups: 12, Outside: 2}, f.History)

	lines := hostileLines("s")
	lines = append(lines, `{"type":"file-history-snapshot","messageId":"u2","snapshot":{"trackedFileBackups":{"a":null}}}`, `{"type":"file-history-snapshot","snapshot":{}}`)
	path := writeLines(t, t.TempDir(), "s", lines...)
	f, err = Read(path)
	require.NoError(t, err)
	assert.Empty(t, f.Errors)
	assert.Equal(t, 2, f.History.Malformed)
	rep, err := Import(ctx, openStore(t), []string{path}, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Errors, "without the file history, its lines are skipped as before")
	hrep, err := ImportWith(ctx, openStore(t), []string{path}, &Options{FileHistory: t.TempDir()})
	require.NoError(t, err)
	assert.Len(t, hrep.Errors, 10, "eight refused, two malformed lines")
}

// TestFileHistoryAfterHead: a snapshot of the transcript's last message
// follows it as the session's leaf and HEAD; when the transcript grows,
// the reply follows the snapshot.
func TestFileHistoryAfterHead(t *testing.T) {
	ctx := context.Background()
	const sid = "33333333-3333-4333-8333-333333333333"
	hist := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(hist, sid), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(hist, sid, "h@v1"), []byte("v1\n"), 0o644))
	lines := hostileLines(sid)
	snap := `{"type":"file-history-snapshot","messageId":"u1","snapshot":{"messageId":"u1","trackedFileBackups":{"/home/u/proj/f.go":{"backupFileName":"h@v1","version":1}}},"isSnapshotUpdate":false}`
	dir := t.TempDir()
	path := writeLines(t, dir, sid, snap, lines[1])
	st := openStore(t)
	rep, err := ImportWith(ctx, st, []string{path}, &Options{FileHistory: hist})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.History.Snapshots)
	m := onlySession(t, st)
	head, err := st.Head(ctx, m.ID)
	require.NoError(t, err)
	_, leaves := recordEvents(t, path)
	snapID, _ := snapshotAfter(t, st, m.ID, leaves["u1"])
	require.NotEqual(t, uuid.Nil, snapID)
	assert.Equal(t, snapID, head, "the snapshot is HEAD")
	assert.Equal(t, map[string]string{"f.go": "v1\n"}, workspaceAt(t, st, m.ID, uuid.Nil))

	path = writeLines(t, dir, sid, snap, lines[1], lines[2])
	rep, err = ImportWith(ctx, st, []string{path}, &Options{FileHistory: hist})
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Added)
	assert.Equal(t, 1, rep.History.Found)
	head, err = st.Head(ctx, m.ID)
	require.NoError(t, err)
	reply, err := st.Event(ctx, m.ID, head)
	require.NoError(t, err)
	assert.Equal(t, snapID, reply.ParentID, "the reply follows the snapshot")
	assert.Equal(t, map[string]string{"f.go": "v1\n"}, workspaceAt(t, st, m.ID, head))
}
