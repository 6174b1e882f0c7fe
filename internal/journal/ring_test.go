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
