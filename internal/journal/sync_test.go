package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The tests of this file cut the power right after a call returns and
// check, in every crash mode, what the call's doc says is durable: each
// fails without one of the syncs the call makes.

// syncRecords are the records the tests commit, to the file "s/a".
func syncRecords() []Record {
	return []Record{
		{Op: OpWrite, Path: "s/a", Offset: 0, Data: payload(0, 0, 700)},
		{Op: OpWrite, Path: "s/a", Offset: 700, Data: payload(0, 1, 300)},
	}
}

// holdsRecords reports whether the file of recs under root in fsys holds
// each record's data at its offset.
func holdsRecords(t *testing.T, fsys vfs.FS, recs []Record, what string) bool {
	t.Helper()
	for _, r := range recs {
		got, err := vfs.ReadFile(fsys, filepath.Join(memRoot, filepath.FromSlash(r.Path)))
		if !assert.NoError(t, err, what) {
			return false
		}
		end := r.Offset + int64(len(r.Data))
		if !assert.True(t, int64(len(got)) >= end && bytes.Equal(got[r.Offset:end], r.Data), "%s: %s@%d lost", what, r.Path, r.Offset) {
			return false
		}
	}
	return true
}

// TestSyncCreateThenCrash: a crash right after Create returns leaves a
// journal that reads as an empty log (its directory, its name, its
// preallocated bytes and header are durable), and a crash right after a
// Commit returns leaves the journal holding the commit's records. The
// root and the target file are made durable before Create, so that only
// Create's own syncs can make its directory durable.
func TestSyncCreateThenCrash(t *testing.T) {
	tests := []struct {
		name string
		recs []Record // committed before the crash
	}{
		{"after Create", nil},
		{"after a Commit", syncRecords()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := vfs.NewMemFS()
			require.NoError(t, m.MkdirAll(memRoot, 0o755))
			require.NoError(t, m.SyncDir("/"))
			makeFile(t, m, memRoot, "s/a")
			w, err := Create(m, memRoot, &Options{Size: 64 << 10, small: true})
			require.NoError(t, err)
			if tt.recs != nil {
				commitT(t, w, nil, tt.recs...)
			}
			m.PowerOff()
			defer w.Close() // fails: the power is off

			for _, mode := range vfs.CrashModes {
				what := fmt.Sprintf("%s, %v", tt.name, mode)
				c := m.CrashClone(mode, 7)
				log, err := Read(c, w.Path())
				if !assert.NoError(t, err, what) {
					continue
				}
				assert.Equal(t, w.Owner(), log.Owner, what)
				assert.Equal(t, int64(-1), log.Torn, what)
				if !assert.Len(t, log.Entries, len(tt.recs), what) {
					continue
				}
				for i, e := range log.Entries {
					assert.Equal(t, tt.recs[i], e.Record, what)
				}
				_, err = log.Apply(c, memRoot, "")
				require.NoError(t, err, what)
				holdsRecords(t, c, tt.recs, what)
			}
		})
	}
}

// TestSyncReplayThenCrash: a dead owner's journal is replayed and then
// removed. A crash right after Replay returns leaves the files holding
// the records; a crash right after Remove returns leaves them so too,
// and the journal and its lock file gone: a journal brought back would
// hold records that are stale once the files are written again, and a
// reader replays a dead owner's journal.
func TestSyncReplayThenCrash(t *testing.T) {
	m, w := newMem(t, 64<<10)
	makeFile(t, m, memRoot, "s/a")
	recs := syncRecords()
	commitT(t, w, nil, recs...)
	m.PowerOff()
	defer w.Close() // fails: the power is off
	// The owner died before its files were synced.
	dead := m.CrashClone(vfs.KeepSynced, 1)
	got, err := vfs.ReadFile(dead, filepath.Join(memRoot, "s", "a"))
	require.NoError(t, err)
	require.Empty(t, got, "the applied records were not synced")

	res, err := Replay(dead, memRoot, w.Owner(), "")
	require.NoError(t, err)
	require.Equal(t, Replayed{Records: len(recs), Files: []string{"s/a"}}, res)
	for _, mode := range vfs.CrashModes {
		holdsRecords(t, dead.CrashClone(mode, 2), recs, fmt.Sprintf("after Replay, %v", mode))
	}

	require.NoError(t, Remove(dead, memRoot, w.Owner()))
	for _, mode := range vfs.CrashModes {
		what := fmt.Sprintf("after Remove, %v", mode)
		c := dead.CrashClone(mode, 3)
		holdsRecords(t, c, recs, what)
		for _, p := range []string{WALPath(memRoot, w.Owner()), LockPath(memRoot, w.Owner())} {
			_, err := c.Stat(p)
			assert.ErrorIs(t, err, fs.ErrNotExist, "%s: %s is back", what, p)
		}
	}
}

// TestCloseThenCrashReplaysNothing: Close does not sync the removal of
// the journal file, so a crash right after it may bring the file back;
// its last checkpoint made every file the journal covers durable and
// started the durable header at the log's end, so the journal brought
// back replays nothing and is removed as any dead owner's journal.
func TestCloseThenCrashReplaysNothing(t *testing.T) {
	tests := []struct {
		name    string
		size    int64
		commits int
	}{
		// Too few records to start a checkpoint: Close's is the only one.
		{"no checkpoint before Close", 64 << 10, 5},
		// Laps of the ring: stale records everywhere after the start.
		{"after wraps", 16 << 10, 40},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, w := newMem(t, tt.size)
			makeFile(t, m, memRoot, "s/a")
			var recs []Record
			off := int64(0)
			for i := range tt.commits {
				r := Record{Op: OpWrite, Path: "s/a", Offset: off, Data: payload(1, i, 200+i)}
				off += int64(len(r.Data))
				commitT(t, w, nil, r)
				recs = append(recs, r)
			}
			st := w.Stats()
			if tt.commits > 10 {
				require.Positive(t, st.Wraps)
			} else {
				require.Zero(t, st.Checkpoints)
			}
			require.NoError(t, w.Close())
			back := 0
			for _, mode := range vfs.CrashModes {
				what := fmt.Sprintf("after Close, %v", mode)
				c := m.CrashClone(mode, 4)
				holdsRecords(t, c, recs, what)
				_, err := c.Stat(w.Path())
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				require.NoError(t, err, what)
				back++
				alive, err := Alive(c, memRoot, w.Owner())
				require.NoError(t, err, what)
				assert.False(t, alive, what)
				res, err := Replay(c, memRoot, w.Owner(), "")
				if assert.NoError(t, err, what) {
					assert.Zero(t, res.Records, "%s: a closed journal replays records", what)
				}
				assert.NoError(t, Remove(c, memRoot, w.Owner()), what)
			}
			t.Logf("the journal came back in %d of %d crash modes", back, len(vfs.CrashModes))
		})
	}
}
