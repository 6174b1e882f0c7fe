package journal

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// sessionDir is the directory of session name under memRoot.
func sessionDir(name string) string {
	return filepath.Join(memRoot, layout.SessionsDir, name)
}

// chunkOf is the path, relative to memRoot, of session name's file.
func chunkOf(name string) string { return layout.SessionsDir + "/" + name + "/chunk" }

// liveStore makes, on a fresh MemFS, the sessions named (each a file
// chunk, empty, and a JOURNAL marker naming w's journal, all durable) and
// commits three records for each through w, written into the files by
// the journal (unsynced). It returns the file system, the writer and
// what each session's file holds.
func liveStore(t *testing.T, sessions ...string) (*vfs.MemFS, *Writer, map[string]string) {
	t.Helper()
	m, w := newMem(t, 64<<10)
	require.NoError(t, m.MkdirAll(filepath.Join(memRoot, layout.SessionsDir), 0o755))
	require.NoError(t, m.SyncDir(memRoot))
	want := map[string]string{}
	for _, s := range sessions {
		makeFile(t, m, memRoot, chunkOf(s))
		require.NoError(t, m.SyncDir(filepath.Join(memRoot, layout.SessionsDir)))
		require.NoError(t, WriteMarker(m, sessionDir(s), w.Owner(), 0o644))
	}
	for i := range 3 {
		for _, s := range sessions {
			line := fmt.Sprintf("%s line %d\n", s, i)
			commitT(t, w, nil, Record{Op: OpWrite, Path: chunkOf(s), Offset: int64(len(want[s])), Data: []byte(line)})
			want[s] += line
		}
	}
	return m, w, want
}

// deadStore is liveStore as a power loss leaves it: the owner dead, in
// another boot, with none of the files' unsynced bytes.
func deadStore(t *testing.T, sessions ...string) (*vfs.MemFS, string, map[string]string) {
	t.Helper()
	m, w, want := liveStore(t, sessions...)
	c := m.CrashClone(vfs.KeepSynced, 1)
	for _, s := range sessions {
		require.Empty(t, fileOf(t, c, s), "precondition: the crash lost %s's unsynced bytes", s)
	}
	return c, w.Owner(), want
}

// fileOf reads session s's file on fsys.
func fileOf(t *testing.T, fsys vfs.FS, s string) string {
	t.Helper()
	b, err := vfs.ReadFile(fsys, filepath.Join(memRoot, filepath.FromSlash(chunkOf(s))))
	require.NoError(t, err)
	return string(b)
}

// markerOf reads session s's marker on fsys.
func markerOf(t *testing.T, fsys vfs.FS, s string) string {
	t.Helper()
	owner, err := ReadMarker(fsys, sessionDir(s))
	require.NoError(t, err)
	return owner
}

// TestTakeOverAppliesDeadJournal: taking over a session whose marker
// names a dead owner's journal writes the session's records into its
// file and names none, both durably; other sessions' records stay in the
// journal, whose file stays.
func TestTakeOverAppliesDeadJournal(t *testing.T) {
	c, owner, want := deadStore(t, "s1", "s2")
	got, err := TakeOver(context.Background(), c, memRoot, sessionDir("s1"), "", 0o644, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	after := c.CrashClone(vfs.KeepSynced, 2)
	assert.Equal(t, want["s1"], fileOf(t, after, "s1"), "applied and synced")
	assert.Empty(t, markerOf(t, after, "s1"), "the marker names none, durably")
	assert.Empty(t, fileOf(t, after, "s2"), "another session's records stay in the journal")
	assert.Equal(t, owner, markerOf(t, after, "s2"))
	_, err = after.Stat(WALPath(memRoot, owner))
	assert.NoError(t, err, "the journal stays for the other sessions")
}

// TestTakeOverLeaves: a marker that names the caller's own journal, a
// live owner's, a journal that is gone, or none, is left as it is, and
// nothing is written.
func TestTakeOverLeaves(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dead    bool // the owner died (a power loss)
		mine    bool // the caller is the owner
		gone    bool // the journal file was removed
		none    bool // the marker names none
		wantOwn bool // TakeOver returns the owner
	}{
		{name: "mine", dead: true, mine: true, wantOwn: true},
		{name: "owner alive"},
		{name: "journal gone", dead: true, gone: true},
		{name: "names none", dead: true, none: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, w, want := liveStore(t, "s1")
			owner := w.Owner()
			var fsys vfs.FS = m
			file := want["s1"]
			if tc.dead {
				fsys, file = m.CrashClone(vfs.KeepSynced, 1), ""
			}
			if tc.gone {
				require.NoError(t, fsys.Remove(WALPath(memRoot, owner)))
			}
			if tc.none {
				require.NoError(t, WriteMarker(fsys, sessionDir("s1"), "", 0o644))
			}
			before := markerOf(t, fsys, "s1")
			mine := ""
			if tc.mine {
				mine = owner
			}
			got, err := TakeOver(context.Background(), fsys, memRoot, sessionDir("s1"), mine, 0o644, nil)
			require.NoError(t, err)
			if tc.wantOwn {
				assert.Equal(t, owner, got)
			} else {
				assert.Empty(t, got)
			}
			assert.Equal(t, before, markerOf(t, fsys, "s1"), "the marker is left")
			assert.Equal(t, file, fileOf(t, fsys, "s1"), "nothing is written")
		})
	}
}

// TestTakeOverDamagedMarker: a marker that cannot be read names any
// journal: every dead owner's journal but the caller's is applied, and
// the marker is made to name none.
func TestTakeOverDamagedMarker(t *testing.T) {
	c, _, want := deadStore(t, "s1")
	writeRaw(t, c, sessionDir("s1"), layout.JournalMarker, []byte(strings.Repeat("?", MarkerSize)))
	_, err := ReadMarker(c, sessionDir("s1"))
	require.ErrorIs(t, err, ErrCorrupt, "precondition")
	got, err := TakeOver(context.Background(), c, memRoot, sessionDir("s1"), "", 0o644, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	after := c.CrashClone(vfs.KeepSynced, 2)
	assert.Equal(t, want["s1"], fileOf(t, after, "s1"))
	assert.Empty(t, markerOf(t, after, "s1"))
}

// TestTakeOverDamagedJournal: a dead journal that cannot be read is a
// *CorruptionError naming it, and the marker keeps naming it.
func TestTakeOverDamagedJournal(t *testing.T) {
	c, owner, _ := deadStore(t, "s1")
	wal := WALPath(memRoot, owner)
	f, err := c.OpenFile(wal, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, recordsStart), 0) // both header slots
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = TakeOver(context.Background(), c, memRoot, sessionDir("s1"), "", 0o644, nil)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, wal, ce.Path)
	assert.Equal(t, owner, markerOf(t, c, "s1"), "left naming the journal")
	assert.Empty(t, fileOf(t, c, "s1"))
}

// TestTakeOverSameBoot: an owner that died in this boot (its process,
// not the machine) wrote every record it acknowledged into its file
// before: taking over syncs the files, and a record durable in the
// journal but never written into its file (its Commit had not returned)
// stays out.
func TestTakeOverSameBoot(t *testing.T) {
	m, w, want := liveStore(t, "s1")
	_, err := w.Commit(context.Background(), []Record{{Op: OpWrite, Path: chunkOf("s1"), Offset: int64(len(want["s1"])), Data: []byte("unacknowledged\n")}},
		func() error { return nil }) // the process dies before its apply writes it
	require.NoError(t, err)
	require.NoError(t, w.lock.Close()) // the process dies: the system drops its lock
	got, err := TakeOver(context.Background(), m, memRoot, sessionDir("s1"), "", 0o644, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.Equal(t, want["s1"], fileOf(t, m, "s1"), "the unwritten record stays out")
	after := m.CrashClone(vfs.KeepSynced, 2)
	assert.Equal(t, want["s1"], fileOf(t, after, "s1"), "synced")
	assert.Empty(t, markerOf(t, after, "s1"))
}

// TestTakeOverReadsDeadJournalOnce: taking over the sessions of one dead
// journal through one DeadLogs reads it once.
func TestTakeOverReadsDeadJournalOnce(t *testing.T) {
	sessions := []string{"s1", "s2", "s3"}
	c, _, want := deadStore(t, sessions...)
	var dead DeadLogs
	for _, s := range sessions {
		_, err := TakeOver(context.Background(), c, memRoot, sessionDir(s), "", 0o644, &dead)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, dead.Reads())
	after := c.CrashClone(vfs.KeepSynced, 2)
	for _, s := range sessions {
		assert.Equal(t, want[s], fileOf(t, after, s))
	}
}

// TestRecover: Recover applies a dead journal to the sessions whose
// marker still names it, makes those name none and removes the journal;
// a session taken over since is left; a dead journal it cannot read is
// logged and left, and a live owner's journal is left.
func TestRecover(t *testing.T) {
	m, w, want := liveStore(t, "s1", "s2")
	defer w.Close()
	damaged, err := Create(m, memRoot, &Options{Size: 64 << 10, small: true})
	require.NoError(t, err)
	defer damaged.Close()
	c := m.CrashClone(vfs.KeepSynced, 1)
	// s2 was taken over since, and written again: its file is not the
	// journal's to write.
	require.NoError(t, WriteMarker(c, sessionDir("s2"), "", 0o644))
	f, err := c.OpenFile(WALPath(memRoot, damaged.Owner()), os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(make([]byte, recordsStart), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	live, err := Create(c, memRoot, &Options{Size: 64 << 10, small: true})
	require.NoError(t, err)
	defer live.Close()

	var logged bytes.Buffer
	var dead DeadLogs
	require.NoError(t, Recover(context.Background(), c, memRoot, 0o644, slog.New(slog.NewTextHandler(&logged, nil)), &dead))
	after := c.CrashClone(vfs.KeepSynced, 2)
	assert.Equal(t, want["s1"], fileOf(t, after, "s1"))
	assert.Empty(t, markerOf(t, after, "s1"))
	assert.Empty(t, fileOf(t, after, "s2"), "a session taken over since is left")
	_, err = after.Stat(WALPath(memRoot, w.Owner()))
	assert.ErrorIs(t, err, fs.ErrNotExist, "the applied journal is removed, durably")
	_, err = after.Stat(WALPath(memRoot, damaged.Owner()))
	assert.NoError(t, err, "a damaged journal is left")
	assert.Contains(t, logged.String(), "dead journal left for its sessions to replay")
	assert.Contains(t, logged.String(), damaged.Owner())
	_, err = c.Stat(live.Path())
	assert.NoError(t, err, "a live owner's journal is left")
	assert.Equal(t, 2, dead.Reads(), "each dead journal read once")
}

func TestSessionOfPath(t *testing.T) {
	for _, tc := range []struct {
		path, want string
	}{
		{"sessions/abc/chunks/000000.jsonl", "sessions/abc/"},
		{"sessions/abc/x", "sessions/abc/"},
		{"sessions/abc", ""},
		{"sessions//x", ""},
		{"sessionsx/abc/x", ""},
		{"trash/abc/x", ""},
		{"", ""},
	} {
		got, ok := sessionOfPath(tc.path)
		assert.Equal(t, tc.want, got, tc.path)
		assert.Equal(t, tc.want != "", ok, tc.path)
	}
}

// TestTakeOverJournalOfCreateCutShort: a dead journal that a crash during
// Create left without a header, empty or zeros, held no commit: a
// session whose marker names it is taken over with nothing applied, and
// the journal is removed.
func TestTakeOverJournalOfCreateCutShort(t *testing.T) {
	for _, size := range []int{0, recordsStart + 100} {
		c, owner, _ := deadStore(t, "s1")
		wal := WALPath(memRoot, owner)
		f, err := c.OpenFile(wal, os.O_WRONLY|os.O_TRUNC, 0)
		require.NoError(t, err)
		_, err = f.Write(make([]byte, size))
		require.NoError(t, err)
		require.NoError(t, f.Close())
		_, err = TakeOver(context.Background(), c, memRoot, sessionDir("s1"), "", 0o644, nil)
		require.NoError(t, err, "a journal of %d zeros", size)
		_, err = c.Stat(wal)
		assert.ErrorIs(t, err, fs.ErrNotExist, "removed")
		assert.Empty(t, markerOf(t, c, "s1"))
	}
}
