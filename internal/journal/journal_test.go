package journal

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// readEntries reads the journal of w from a crash clone keeping only
// synced data.
func readClone(t *testing.T, m *vfs.MemFS, w *Writer) (*vfs.MemFS, *Log) {
	t.Helper()
	c := m.CrashClone(vfs.KeepSynced, 1)
	log, err := Read(c, w.Path())
	require.NoError(t, err)
	return c, log
}

func TestCommitReadBack(t *testing.T) {
	m, w := newMem(t, 64<<10)
	makeFile(t, m, memRoot, "s/a")
	makeFile(t, m, memRoot, "s/b")
	h := history{}
	l1 := commitT(t, w, h, Record{Op: OpWrite, Path: "s/a", Offset: 0, Data: []byte("hello ")})
	l2 := commitT(t, w, h, Record{Op: OpWrite, Path: "s/b", Offset: 0, Data: []byte("one")},
		Record{Op: OpWrite, Path: "s/a", Offset: 6, Data: []byte("world")})
	assert.Equal(t, uint64(1), l1)
	assert.Equal(t, uint64(3), l2)

	// Applied without a sync: the files hold the data, a crash may lose it.
	got, err := vfs.ReadFile(m, filepath.Join(memRoot, "s/a"))
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(got))

	c, log := readClone(t, m, w)
	require.Len(t, log.Entries, 3)
	for _, e := range log.Entries {
		assert.Equal(t, h[e.LSN].Path, e.Path)
		assert.Equal(t, string(h[e.LSN].Data), string(e.Data))
	}
	assert.Equal(t, int64(-1), log.Torn)
	assert.Equal(t, w.Owner(), log.Owner)
	a, err := vfs.ReadFile(c, filepath.Join(memRoot, "s/a"))
	require.NoError(t, err)
	assert.Empty(t, a, "unsynced file data is lost in the clone")

	res, err := Replay(c, memRoot, w.Owner(), "s/")
	require.NoError(t, err)
	assert.Equal(t, 3, res.Records)
	assert.Equal(t, []string{"s/a", "s/b"}, res.Files)
	a, err = vfs.ReadFile(c.CrashClone(vfs.KeepSynced, 1), filepath.Join(memRoot, "s/a"))
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(a), "Replay syncs what it wrote")

	require.NoError(t, w.Close())
	_, err = m.Stat(w.Path())
	assert.ErrorIs(t, err, fs.ErrNotExist, "Close removes the journal")
	_, err = m.Stat(LockPath(memRoot, w.Owner()))
	assert.ErrorIs(t, err, fs.ErrNotExist, "and its lock")
	a, err = vfs.ReadFile(m.CrashClone(vfs.KeepSynced, 1), filepath.Join(memRoot, "s/a"))
	require.NoError(t, err)
	assert.Equal(t, "hello world", string(a), "Close's checkpoint synced the files")
	assert.NoError(t, w.Close(), "Close twice")
	_, err = w.Commit(context.Background(), []Record{{Op: OpForget}}, nil)
	assert.ErrorIs(t, err, ErrClosed)
}

func TestForgetDropsEarlierRecords(t *testing.T) {
	m, w := newMem(t, 64<<10)
	for _, p := range []string{"s/x/1", "s/xy/1", "s/y/1"} {
		makeFile(t, m, memRoot, p)
	}
	h := history{}
	commitT(t, w, h, Record{Op: OpWrite, Path: "s/x/1", Data: []byte("a")})
	commitT(t, w, h, Record{Op: OpWrite, Path: "s/xy/1", Data: []byte("b")})
	commitT(t, w, h, Record{Op: OpWrite, Path: "s/y/1", Data: []byte("c")})
	_, err := w.Forget(context.Background(), "s/x/")
	require.NoError(t, err)
	commitT(t, w, h, Record{Op: OpWrite, Path: "s/x/1", Offset: 1, Data: []byte("d")})
	_, log := readClone(t, m, w)
	var paths []string
	for _, e := range log.Entries {
		paths = append(paths, e.Path+"@"+string(e.Data))
	}
	assert.Equal(t, []string{"s/xy/1@b", "s/y/1@c", "s/x/1@d"}, paths)
	assert.Len(t, log.Under("s/x/"), 1)
}

func TestCommitRefuses(t *testing.T) {
	_, w := newMem(t, 64<<10)
	ctx := context.Background()
	_, err := w.Commit(ctx, nil, nil)
	assert.ErrorIs(t, err, ErrInvalidRecord)
	_, err = w.Commit(ctx, []Record{{Op: OpWrite, Path: "../x"}}, nil)
	assert.ErrorIs(t, err, ErrInvalidRecord)
	_, err = w.Commit(ctx, []Record{{Op: OpWrite, Path: "x", Data: make([]byte, w.MaxCommit())}}, nil)
	assert.ErrorIs(t, err, ErrTooLarge)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = w.Commit(cctx, []Record{{Op: OpForget}}, nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, int64(0), w.Stats().Groups, "nothing refused was written")
	require.NoError(t, w.Close())
}

func TestCreateOptions(t *testing.T) {
	m := vfs.NewMemFS()
	require.NoError(t, m.MkdirAll(memRoot, 0o755))
	require.NoError(t, m.SyncDir("/"))
	_, err := Create(m, memRoot, &Options{Size: MinSize - 4096})
	assert.Error(t, err)
	_, err = Create(m, memRoot, &Options{Size: MaxSize + 4096})
	assert.Error(t, err)
	w, err := Create(m, memRoot, &Options{Size: MinSize + 100})
	require.NoError(t, err)
	info, err := m.Stat(w.Path())
	require.NoError(t, err)
	assert.Equal(t, int64(MinSize), info.Size(), "rounded down to 4096, preallocated")
	c := m.CrashClone(vfs.KeepSynced, 1)
	log, err := Read(c, w.Path())
	require.NoError(t, err, "the empty journal is durable when Create returns")
	assert.Empty(t, log.Entries)
	require.NoError(t, w.Close())
}

func TestStickyFailure(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync} {
		t.Run(string(op), func(t *testing.T) {
			m, w := newMem(t, 64<<10)
			makeFile(t, m, memRoot, "f")
			h := history{}
			commitT(t, w, h, Record{Op: OpWrite, Path: "f", Data: []byte("ok")})
			boom := errors.New("boom")
			m.SetFault(func(o vfs.Op, path string) error {
				if o == op && path == w.Path() {
					return boom
				}
				return nil
			})
			_, err := w.Commit(context.Background(), []Record{{Op: OpWrite, Path: "f", Data: []byte("no")}}, nil)
			assert.ErrorIs(t, err, ErrFailed)
			assert.ErrorIs(t, err, boom)
			m.SetFault(nil)
			_, err = w.Commit(context.Background(), []Record{{Op: OpWrite, Path: "f", Data: []byte("no")}}, nil)
			assert.ErrorIs(t, err, ErrFailed, "the failure is sticky")
			assert.ErrorIs(t, w.Close(), ErrFailed)
			_, err = m.Stat(w.Path())
			assert.NoError(t, err, "a failed writer leaves its journal for a replay")
			log, err := Read(m, w.Path())
			require.NoError(t, err)
			require.NotEmpty(t, log.Entries)
			assert.Equal(t, "ok", string(log.Entries[0].Data))
		})
	}
}

// TestCloseCheckpointFailure: a failure of Close's own last checkpoint
// is returned as its cause, not as ErrFailed (which tells the caller an
// earlier commit already reported it), and the journal stays for a
// replay.
func TestCloseCheckpointFailure(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync} {
		t.Run(string(op), func(t *testing.T) {
			m, w := newMem(t, 64<<10)
			makeFile(t, m, memRoot, "f")
			commitT(t, w, history{}, Record{Op: OpWrite, Path: "f", Data: []byte("ok")})
			boom := errors.New("boom")
			m.SetFault(func(o vfs.Op, path string) error {
				if o == op && path == w.Path() {
					return boom
				}
				return nil
			})
			err := w.Close()
			assert.ErrorIs(t, err, boom)
			assert.NotErrorIs(t, err, ErrFailed)
			m.SetFault(nil)
			_, err = m.Stat(w.Path())
			assert.NoError(t, err, "the journal stays for a replay")
		})
	}
}

// TestApplyFailureFailsOnlyItsCommit: a failed apply returns ErrApply
// with apply's error; the record is durable (a replay writes it whole),
// the writer goes on, and a checkpoint passes the record.
func TestApplyFailureFailsOnlyItsCommit(t *testing.T) {
	m, w := newMem(t, 64<<10)
	makeFile(t, m, memRoot, "f")
	boom := errors.New("apply")
	_, err := w.Commit(context.Background(), []Record{{Op: OpWrite, Path: "f", Data: []byte("x")}}, func() error { return boom })
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, err, ErrApply)
	assert.NotErrorIs(t, err, ErrFailed)
	log, err := Read(m, w.Path())
	require.NoError(t, err)
	assert.Len(t, log.Entries, 1, "the durable record stays for a replay")
	_, err = w.Commit(context.Background(), []Record{{Op: OpWrite, Path: "f", Offset: 1, Data: []byte("y")}}, nil)
	assert.NoError(t, err, "the writer goes on")
	w.checkpoint()
	log, err = Read(m, w.Path())
	require.NoError(t, err)
	assert.Empty(t, log.Entries, "the checkpoint passed both records")
	assert.NoError(t, w.Close())
}

func TestAliveReplayRemove(t *testing.T) {
	m, w := newMem(t, 64<<10)
	makeFile(t, m, memRoot, "f")
	commitT(t, w, nil, Record{Op: OpWrite, Path: "f", Data: []byte("x")})
	alive, err := Alive(m, memRoot, w.Owner())
	require.NoError(t, err)
	assert.True(t, alive)
	_, err = Replay(m, memRoot, w.Owner(), "")
	assert.ErrorIs(t, err, ErrOwnerAlive)
	assert.ErrorIs(t, Remove(m, memRoot, w.Owner()), ErrOwnerAlive)
	_, err = Replay(m, memRoot, "../../etc", "")
	assert.ErrorIs(t, err, ErrBadOwner)

	c := m.CrashClone(vfs.KeepSynced, 1) // the owner died: its lock is gone
	alive, err = Alive(c, memRoot, w.Owner())
	require.NoError(t, err)
	assert.False(t, alive)
	require.NoError(t, c.Remove(filepath.Join(memRoot, "f")))
	res, err := Replay(c, memRoot, w.Owner(), "")
	require.NoError(t, err)
	assert.Equal(t, []string{"f"}, res.Skipped, "a missing file is skipped")
	require.NoError(t, Remove(c, memRoot, w.Owner()))
	_, err = Replay(c, memRoot, w.Owner(), "")
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.NoError(t, w.Close())
}
