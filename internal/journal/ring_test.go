package journal

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestRingLongRun commits records of many sizes to a small ring, many
// laps around it, rotating files with Forget, and at intervals checks
// what a crash would leave (only synced data), replayed: every file
// holds every acknowledged byte.
func TestRingLongRun(t *testing.T) {
	commits := 6000
	if testing.Short() {
		commits = 1500
	}
	m, w := newMem(t, 24<<10)
	rng := rand.New(rand.NewPCG(7, 7))
	const files = 6
	want := make([][]byte, files) // the expected content of each current file
	gen := make([]int, files)
	name := func(f int) string { return fmt.Sprintf("r%d/g%d", f, gen[f]) }
	for f := range files {
		makeFile(t, m, memRoot, name(f))
	}
	check := func(at int) {
		c := m.CrashClone(vfs.KeepSynced, uint64(at))
		log, err := Read(c, w.Path())
		require.NoError(t, err, "after %d commits", at)
		require.Equal(t, int64(-1), log.Torn)
		_, err = log.Apply(c, memRoot, "")
		require.NoError(t, err)
		for f := range files {
			got, err := vfs.ReadFile(c, filepath.Join(memRoot, filepath.FromSlash(name(f))))
			require.NoError(t, err)
			require.True(t, bytes.Equal(want[f], got), "after %d commits: %s holds %d bytes, %d acknowledged", at, name(f), len(got), len(want[f]))
		}
	}
	for i := range commits {
		f := rng.IntN(files)
		if len(want[f]) > 8<<10 {
			require.NoError(t, syncFile(m, name(f)))
			_, err := w.Forget(context.Background(), name(f)+"/x") // a prefix of nothing: harmless
			require.NoError(t, err)
			_, err = w.Forget(context.Background(), name(f))
			require.NoError(t, err)
			gen[f]++
			want[f] = nil
			makeFile(t, m, memRoot, name(f))
		}
		data := payload(f, i, 1+rng.IntN(2500))
		commitT(t, w, nil, Record{Op: OpWrite, Path: name(f), Offset: int64(len(want[f])), Data: data})
		want[f] = append(want[f], data...)
		if i%500 == 499 {
			check(i + 1)
		}
	}
	check(commits)
	st := w.Stats()
	t.Logf("%+v", st)
	assert.Greater(t, st.Wraps, int64(commits/50), "many laps")
	assert.Greater(t, st.Checkpoints, st.Wraps)
	require.NoError(t, w.Close())
}

// TestConcurrentCommits runs committers, Forgets and Stats at once (run
// it with -race): every commit is applied, the lsns each caller gets
// grow, and the files end up holding every acknowledged byte.
func TestConcurrentCommits(t *testing.T) {
	const writers, commits = 16, 150
	m := vfs.NewMemFS()
	require.NoError(t, m.MkdirAll(memRoot, 0o755))
	require.NoError(t, m.SyncDir("/"))
	var syncMu sync.Mutex
	synced := map[string]int{}
	var w *Writer
	w, err := Create(m, memRoot, &Options{Size: 32 << 10, small: true, SyncFiles: func(paths []string) error {
		syncMu.Lock()
		for _, p := range paths {
			synced[p]++
		}
		syncMu.Unlock()
		return w.syncPaths(paths)
	}})
	require.NoError(t, err)
	for g := range writers {
		makeFile(t, m, memRoot, fmt.Sprintf("c/%d", g))
	}
	want := make([][]byte, writers)
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			var prev uint64
			for i := range commits {
				data := payload(g, i, 100+(g*31+i*17)%400)
				lsn, err := w.Commit(context.Background(), []Record{{Op: OpWrite, Path: fmt.Sprintf("c/%d", g), Offset: int64(len(want[g])), Data: data}}, nil)
				if !assert.NoError(t, err) {
					return
				}
				assert.Greater(t, lsn, prev)
				prev = lsn
				want[g] = append(want[g], data...)
				if i%50 == 0 {
					_, err := w.Forget(context.Background(), fmt.Sprintf("none/%d/", g))
					assert.NoError(t, err)
					_ = w.Stats()
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, w.Close())
	st := w.Stats()
	t.Logf("%+v", st)
	assert.Equal(t, int64(writers*commits+writers*(commits/50)), st.Commits)
	assert.LessOrEqual(t, st.Groups, st.Commits)
	assert.Positive(t, st.Checkpoints)
	c := m.CrashClone(vfs.KeepSynced, 1)
	for g := range writers {
		got, err := vfs.ReadFile(c, filepath.Join(memRoot, "c", fmt.Sprint(g)))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want[g], got), "file %d after Close", g)
	}
	syncMu.Lock()
	assert.NotEmpty(t, synced, "checkpoints called SyncFiles")
	syncMu.Unlock()
}

// TestRingFullWaitsForApply holds one commit's apply while others fill
// the ring: the group that finds no room waits until the apply returns
// and a checkpoint can pass its records, then goes on; nothing is lost.
func TestRingFullWaitsForApply(t *testing.T) {
	m, w := newMem(t, 16<<10)
	makeFile(t, m, memRoot, "slow")
	makeFile(t, m, memRoot, "fast")
	release := make(chan struct{})
	slowDone := make(chan error, 1)
	go func() {
		_, err := w.Commit(context.Background(), []Record{{Op: OpWrite, Path: "slow", Data: []byte("slow")}}, func() error {
			<-release
			return w.applyRecords([]Record{{Op: OpWrite, Path: "slow", Data: []byte("slow")}})
		})
		slowDone <- err
	}()
	for w.Stats().Groups == 0 {
		runtime.Gosched()
	}
	fastDone := make(chan []byte, 1)
	go func() {
		var want []byte
		for i := range 60 {
			data := payload(9, i, 400)
			_, err := w.Commit(context.Background(), []Record{{Op: OpWrite, Path: "fast", Offset: int64(len(want)), Data: data}}, nil)
			if !assert.NoError(t, err) {
				break
			}
			want = append(want, data...)
		}
		fastDone <- want
	}()
	for w.Stats().RoomWaits == 0 {
		runtime.Gosched() // the ring fills: no checkpoint may pass the slow apply
	}
	close(release)
	require.NoError(t, <-slowDone)
	want := <-fastDone
	require.NoError(t, w.Close())
	c := m.CrashClone(vfs.KeepSynced, 1)
	got, err := vfs.ReadFile(c, filepath.Join(memRoot, "fast"))
	require.NoError(t, err)
	assert.Equal(t, want, got)
	got, err = vfs.ReadFile(c, filepath.Join(memRoot, "slow"))
	require.NoError(t, err)
	assert.Equal(t, "slow", string(got))
}

// TestGrow: a journal that starts small grows, doubling up to its Size,
// when a group finds no room (a commit larger than half its record area)
// and when the ring turns over faster than the turnover; with neither (a
// checkpoint after each commit, no turnover) it stays at its first size. Every acknowledged record survives a crash
// after the growths, and the file is as large as the header says.
func TestGrow(t *testing.T) {
	const size = 96 << 10
	tests := []struct {
		name     string
		turnover time.Duration
		record   int // bytes per record
		grows    int64
		size     int64
	}{
		{"no growth", -1, 500, 0, minTestSize},
		{"fast turnover", time.Hour, 500, 3, size},
		{"no room", -1, 5000, 1, 2 * minTestSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := vfs.NewMemFS()
			require.NoError(t, m.MkdirAll(memRoot, 0o755))
			require.NoError(t, m.SyncDir("/"))
			w, err := Create(m, memRoot, &Options{Size: size, InitialSize: minTestSize, small: true, turnover: tt.turnover})
			require.NoError(t, err)
			assert.Equal(t, int64(minTestSize), fileSize(t, m, w.Path()), "the first size")
			makeFile(t, m, memRoot, "f")
			var want []byte
			n := 300
			if tt.record > 1000 {
				n = 1 // one group larger than half the first record area
			}
			for i := range n {
				data := payload(0, i, tt.record)
				commitT(t, w, nil, Record{Op: OpWrite, Path: "f", Offset: int64(len(want)), Data: data})
				want = append(want, data...)
				if tt.grows == 0 {
					w.checkpoint() // room for the next group, always
				}
			}
			st := w.Stats()
			assert.Equal(t, tt.grows, st.Grows, "%+v", st)
			assert.Equal(t, tt.size, st.Size)
			assert.Equal(t, st.Size, fileSize(t, m, w.Path()))
			if n > 1 {
				assert.Positive(t, st.Wraps, "the ring wrapped")
			}

			c := m.CrashClone(vfs.KeepSynced, 1)
			log, err := Read(c, w.Path())
			require.NoError(t, err)
			_, err = log.Apply(c, memRoot, "")
			require.NoError(t, err)
			got, err := vfs.ReadFile(c, filepath.Join(memRoot, "f"))
			require.NoError(t, err)
			assert.True(t, bytes.Equal(want, got), "%d bytes acknowledged, %d after a crash", len(want), len(got))
			require.NoError(t, w.Close())
		})
	}
}

// fileSize is the size of the file name in fsys.
func fileSize(t *testing.T, fsys vfs.FS, name string) int64 {
	t.Helper()
	info, err := fsys.Stat(name)
	require.NoError(t, err)
	return info.Size()
}

// TestGrowCrash cuts the power at each operation of a commit that makes
// the file grow, and after it, and reads every crash mode's clone under
// many seeds: the log reads, holds every acknowledged record, and holds
// the growing commit's record only if it returned. A header naming a
// size whose zeros did not reach the disk (their sync skipped) would
// make a clone whose file is smaller than its header says.
func TestGrowCrash(t *testing.T) {
	for k := 1; ; k++ {
		m := vfs.NewMemFS()
		require.NoError(t, m.MkdirAll(memRoot, 0o755))
		require.NoError(t, m.SyncDir("/"))
		w, err := Create(m, memRoot, &Options{Size: 96 << 10, InitialSize: minTestSize, small: true, turnover: -1})
		require.NoError(t, err)
		makeFile(t, m, memRoot, "f")
		first := payload(0, 0, 1000)
		commitT(t, w, nil, Record{Op: OpWrite, Path: "f", Data: first})
		var n int
		m.SetFault(func(op vfs.Op, _ string) error {
			if vfs.Mutating(op) {
				if n++; n == k {
					return vfs.ErrPowerLoss
				}
			}
			return nil
		})
		big := payload(0, 1, 6000) // more than half the first record area: the file grows
		_, err = w.Commit(context.Background(), []Record{{Op: OpWrite, Path: "f", Offset: int64(len(first)), Data: big}}, nil)
		acked := err == nil
		if acked {
			require.Equal(t, int64(1), w.Stats().Grows)
		}
		m.PowerOff()
		for _, mode := range vfs.CrashModes {
			for seed := range uint64(40) {
				c := m.CrashClone(mode, seed)
				log, err := Read(c, w.Path())
				require.NoError(t, err, "k=%d %v seed %d", k, mode, seed)
				require.NotEmpty(t, log.Entries, "k=%d %v seed %d", k, mode, seed)
				assert.Equal(t, first, log.Entries[0].Data)
				if acked {
					require.Len(t, log.Entries, 2, "k=%d %v seed %d: the growing commit was acknowledged", k, mode, seed)
					assert.Equal(t, big, log.Entries[1].Data)
				}
			}
		}
		if n < k {
			require.True(t, acked, "the run that reached its end")
			return
		}
	}
}
