package journal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// crashWork is a multi-writer workload on one journal: each writer
// commits groups of one to three records appending to its current file
// (the journal's apply writes them, unsynced), and now and then syncs
// that file, commits a Forget for it, removes it and goes on in a new
// one. The ring is small, so the run wraps and checkpoints many times.
type crashWork struct {
	writers, commits int
	size             int64
	seed             uint64

	created atomic.Bool
	closing atomic.Bool
	owner   string
	wal     string

	mu       sync.Mutex
	acked    []ackedRecord    // every acknowledged write record
	inflight map[int][]Record // per writer, the commit under way when it stopped
	removed  map[string]bool  // files forgotten (then removed)
	groups   atomic.Int64
	wraps    atomic.Int64
	ckpts    atomic.Int64
}

type ackedRecord struct {
	lsn uint64
	rec Record
}

func newCrashWork(writers, commits int, size int64, seed uint64) *crashWork {
	return &crashWork{writers: writers, commits: commits, size: size, seed: seed, inflight: map[int][]Record{}, removed: map[string]bool{}}
}

// createFile creates p under root and makes its entry durable.
func createFile(fsys vfs.FS, p string) error {
	full := filepath.Join(memRoot, filepath.FromSlash(p))
	if err := fsys.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	f, err := fsys.OpenFile(full, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := fsys.SyncDir(filepath.Dir(full)); err != nil {
		return err
	}
	return fsys.SyncDir(memRoot)
}

func syncFile(fsys vfs.FS, p string) error {
	f, err := fsys.OpenFile(filepath.Join(memRoot, filepath.FromSlash(p)), os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

func (cw *crashWork) run(m vfs.FS) {
	if m.MkdirAll(memRoot, 0o755) != nil || m.SyncDir("/") != nil {
		return
	}
	w, err := Create(m, memRoot, &Options{Size: cw.size, small: true})
	if err != nil {
		return
	}
	cw.owner, cw.wal = w.Owner(), w.Path()
	cw.created.Store(true)
	var wg sync.WaitGroup
	for g := range cw.writers {
		wg.Go(func() { cw.writer(m, w, g) })
	}
	wg.Wait()
	st := w.Stats()
	cw.groups.Store(st.Groups)
	cw.wraps.Store(st.Wraps)
	cw.ckpts.Store(st.Checkpoints)
	cw.closing.Store(true)
	w.Close()
}

func (cw *crashWork) writer(m vfs.FS, w *Writer, g int) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(cw.seed, uint64(g)))
	file, off, seq := 0, int64(0), 0
	path := func() string { return fmt.Sprintf("w%d/f%d", g, file) }
	if createFile(m, path()) != nil {
		return
	}
	for range cw.commits {
		if rng.IntN(10) == 0 {
			// Rotate: make the file durable, forget it, remove it.
			if syncFile(m, path()) != nil {
				return
			}
			cw.setInflight(g, []Record{{Op: OpForget, Path: path()}})
			if _, err := w.Forget(ctx, path()); err != nil {
				return
			}
			cw.mu.Lock()
			cw.removed[path()] = true
			delete(cw.inflight, g)
			cw.mu.Unlock()
			if m.Remove(filepath.Join(memRoot, filepath.FromSlash(path()))) != nil {
				return
			}
			file, off = file+1, 0
			if createFile(m, path()) != nil {
				return
			}
			continue
		}
		recs := make([]Record, 1+rng.IntN(3))
		for j := range recs {
			data := payload(g, seq, 150+rng.IntN(300))
			recs[j] = Record{Op: OpWrite, Path: path(), Offset: off, Data: data}
			off += int64(len(data))
			seq++
		}
		cw.setInflight(g, recs)
		last, err := w.Commit(ctx, recs, nil)
		if err != nil {
			return
		}
		cw.mu.Lock()
		for j, r := range recs {
			cw.acked = append(cw.acked, ackedRecord{lsn: last - uint64(len(recs)-1-j), rec: r})
		}
		delete(cw.inflight, g)
		cw.mu.Unlock()
	}
}

func (cw *crashWork) setInflight(g int, recs []Record) {
	cw.mu.Lock()
	cw.inflight[g] = recs
	cw.mu.Unlock()
}

// check verifies a crash clone: the journal reads without error; its
// records are acknowledged ones (same lsn, same content) or the whole of
// a commit under way, in lsn order; after the replay every acknowledged
// record not forgotten is in its file.
func (cw *crashWork) check(t *testing.T, c *vfs.MemFS, what string) {
	if !cw.created.Load() {
		return
	}
	log, err := Read(c, cw.wal)
	if errors.Is(err, fs.ErrNotExist) && cw.closing.Load() {
		log = &Log{} // Close's checkpoint synced every file, then removed the journal
	} else if !assert.NoError(t, err, what) {
		return
	}
	byLSN := map[uint64]Record{}
	for _, a := range cw.acked {
		byLSN[a.lsn] = a.rec
	}
	inflightSeen := map[int]int{}
	var prev uint64
	for _, e := range log.Entries {
		if !assert.Greater(t, e.LSN, prev, "%s: lsn order", what) {
			return
		}
		prev = e.LSN
		if r, ok := byLSN[e.LSN]; ok {
			if !assert.True(t, r.Path == e.Path && r.Offset == e.Offset && bytes.Equal(r.Data, e.Data), "%s: lsn %d is not the record acknowledged", what, e.LSN) {
				return
			}
			continue
		}
		found := false
		for g, recs := range cw.inflight {
			for _, r := range recs {
				if r.Path == e.Path && r.Offset == e.Offset && bytes.Equal(r.Data, e.Data) {
					inflightSeen[g]++
					found = true
				}
			}
		}
		if !assert.True(t, found, "%s: lsn %d (%s@%d) was never committed", what, e.LSN, e.Path, e.Offset) {
			return
		}
	}
	for g, n := range inflightSeen {
		assert.Equal(t, len(cw.inflight[g]), n, "%s: writer %d's commit under way appears in part", what, g)
	}
	if _, err := log.Apply(c, memRoot, ""); !assert.NoError(t, err, what) {
		return
	}
	for _, a := range cw.acked {
		if cw.removed[a.rec.Path] {
			continue
		}
		got, err := vfs.ReadFile(c, filepath.Join(memRoot, filepath.FromSlash(a.rec.Path)))
		if !assert.NoError(t, err, "%s: lsn %d", what, a.lsn) {
			return
		}
		end := a.rec.Offset + int64(len(a.rec.Data))
		if !assert.True(t, int64(len(got)) >= end && bytes.Equal(got[a.rec.Offset:end], a.rec.Data), "%s: acknowledged lsn %d (%s@%d) lost", what, a.lsn, a.rec.Path, a.rec.Offset) {
			return
		}
	}
}

// TestCrashAtEveryOperation cuts the power at every mutating operation
// of the workload in turn (k = 1, 2, ... until a run ends first) and
// checks every crash mode's clone.
func TestCrashAtEveryOperation(t *testing.T) {
	writers, commits := 4, 24
	if testing.Short() {
		commits = 8
	}
	var sawWraps, sawCkpts int64
	for k := 1; ; k++ {
		m := vfs.NewMemFS()
		cw := newCrashWork(writers, commits, 16<<10, uint64(k))
		var n atomic.Int64
		m.SetFault(func(op vfs.Op, path string) error {
			if vfs.Mutating(op) && n.Add(1) == int64(k) {
				return vfs.ErrPowerLoss
			}
			return nil
		})
		cw.run(m)
		m.PowerOff()
		for _, mode := range vfs.CrashModes {
			cw.check(t, m.CrashClone(mode, uint64(k)), fmt.Sprintf("k=%d %v", k, mode))
		}
		if t.Failed() {
			return
		}
		if n.Load() < int64(k) {
			sawWraps, sawCkpts = cw.wraps.Load(), cw.ckpts.Load()
			t.Logf("%d crash points; the full run: %d groups, %d wraps, %d checkpoints, %d records", k-1, cw.groups.Load(), sawWraps, sawCkpts, len(cw.acked))
			break
		}
	}
	assert.Positive(t, sawWraps, "the workload wraps the ring")
	assert.Positive(t, sawCkpts, "and checkpoints")
}
