package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The failure paths of a session that appends without its index (lazy.go),
// and stress runs of appends and readers on sessions opened without it.

// lazySession makes a session of n events in m, closes it and opens it
// again without its index, the first append starting a partial index.
func lazySession(t *testing.T, m vfs.FS, o Options, n int) (*Store, uuid.UUID, []Event) {
	t.Helper()
	ctx := context.Background()
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{Name: "lazy"})
	require.NoError(t, err)
	evs := appendN(t, s, meta.ID, n)
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	_, err = s.Head(ctx, meta.ID)
	require.NoError(t, err)
	require.True(t, isLazy(t, s, meta.ID), "precondition: opened without the index")
	ev, err := s.Append(ctx, meta.ID, UserText("acknowledged"))
	require.NoError(t, err)
	require.True(t, isPartial(t, s, meta.ID), "precondition: appending without the index")
	return s, meta.ID, append(evs, ev)
}

// failIndexOpen makes opening index.jsonl fail in m (nil: nothing fails).
func failIndexOpen(op vfs.Op, path string) error {
	if op == vfs.OpOpen && strings.HasSuffix(path, indexName) {
		return errors.New("injected EIO")
	}
	return nil
}

// TestLazySyncFailureThenIndexLoad: after a failed sync the session stops
// writing, and a call that loads the index then must not index, or name in
// HEAD, the record that sync carried: it was never acknowledged, and after
// a power loss it is gone.
func TestLazySyncFailureThenIndexLoad(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test gates, fails or checks.
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{JournalSize: -1, ChunkSize: 64 << 10}
	s, id, evs := lazySession(t, m, o, 5)
	defer s.Close()
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, chunksDir) {
			return errors.New("injected EIO")
		}
		return nil
	})
	_, err := s.Append(ctx, id, UserText("not acknowledged"))
	require.Error(t, err, "the sync failed")
	m.SetFault(nil)

	_, err = s.Tree(ctx, id) // loads the index
	require.NoError(t, err)
	require.False(t, isLazy(t, s, id))
	got, err := s.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, evs, got)
	_, err = s.Append(ctx, id, UserText("refused"))
	assert.ErrorIs(t, err, ErrSessionFailed, "writes stay stopped")
	head, _, err := readHeadFile(m, filepath.Join(sessionPath(id), headfile.Name))
	require.NoError(t, err)
	assert.Contains(t, []uuid.UUID{uuid.Nil, evs[4].ID, evs[5].ID}, head, "HEAD names an acknowledged event, or none newer than the open")

	// A power loss now: the session opens with every acknowledged event.
	s2 := checkAll(t, m.CrashClone(vfs.KeepSynced, 1), id, evs)
	defer s2.Close()
	r, err := s2.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}

// TestLazyFailedIndexLoadThenClose: a call that fails to load the index
// leaves the session without it, appends included; closing it then
// checkpoints HEAD and the metadata, and it opens with every event.
func TestLazyFailedIndexLoadThenClose(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 64 << 10}
	s, id, evs := lazySession(t, m, o, 5)
	m.SetFault(failIndexOpen)
	_, err := s.Tree(ctx, id)
	require.Error(t, err, "precondition: loading the index failed")
	m.SetFault(nil)
	require.True(t, isLazy(t, s, id), "still without the index")
	var closeErr error
	require.NotPanics(t, func() { closeErr = s.Close() })
	require.NoError(t, closeErr)

	s = openMem(t, m, o)
	defer s.Close()
	got, err := s.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, evs, got)
	meta, err := s.Meta(ctx, id)
	require.NoError(t, err)
	assert.False(t, meta.UpdatedAt.Before(evs[len(evs)-1].Time), "Close recorded the newest append's time")
}

// statGate blocks the first Stat of a path containing match until
// released, outside the MemFS lock.
type statGate struct {
	vfs.FS
	mu      sync.Mutex
	match   string
	entered chan struct{}
	release chan struct{}
}

func (g *statGate) arm(match string) {
	g.mu.Lock()
	g.match, g.entered, g.release = match, make(chan struct{}), make(chan struct{})
	g.mu.Unlock()
}

func (g *statGate) Stat(name string) (fs.FileInfo, error) {
	g.mu.Lock()
	hit := g.match != "" && strings.Contains(name, g.match)
	entered, release := g.entered, g.release
	if hit {
		g.match = ""
	}
	g.mu.Unlock()
	if hit {
		close(entered)
		<-release
	}
	return g.FS.Stat(name)
}

// TestLazyAppendAfterFailedIndexLoad: an append that released the
// session's mutex to write its blob finds, when it takes it back, that a
// call that failed to load the index left the session without it; it
// appends all the same, after the newest event.
func TestLazyAppendAfterFailedIndexLoad(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	g := &statGate{FS: m}
	o := Options{ChunkSize: 64 << 10, BlobThreshold: 1024}
	s, id, evs := lazySession(t, g, o, 5)
	g.arm(filepath.Join(blobsDir, "sha256"))
	type result struct {
		ev    Event
		err   error
		panic any
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			r.panic = recover()
			done <- r
		}()
		r.ev, r.err = s.Append(ctx, id, ToolResultEvent(ToolResult{CallID: "c", Output: strings.Repeat("blob ", 1000)}))
	}()
	reached(t, g.entered, "the append writes its blob without the session's mutex")
	m.SetFault(failIndexOpen)
	_, err := s.Tree(ctx, id)
	require.Error(t, err, "precondition: loading the index failed")
	m.SetFault(nil)
	close(g.release)
	r := <-done
	require.Nil(t, r.panic, "the append panicked")
	defer s.Close() // after the check: a panicking append kept the mutex
	require.NoError(t, r.err)
	require.NotEmpty(t, r.ev.Digest, "a blob")
	assert.Equal(t, evs[len(evs)-1].ID, r.ev.ParentID)
	got, err := s.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, append(evs, r.ev), got)
}

// pathProblem says what is wrong with path as a Load result holding the
// events of acked: not a chain from a root, or an acknowledged event
// missing; "" if nothing is. For checks in goroutines, where require
// cannot stop the test.
func pathProblem(path []Event, acked []uuid.UUID) string {
	have := make(map[uuid.UUID]bool, len(path))
	for i, ev := range path {
		want := uuid.Nil
		if i > 0 {
			want = path[i-1].ID
		}
		if ev.ParentID != want || have[ev.ID] {
			return fmt.Sprintf("event %d of %d, %s, has parent %s, want %s", i, len(path), ev.ID, ev.ParentID, want)
		}
		have[ev.ID] = true
	}
	for _, a := range acked {
		if !have[a] {
			return fmt.Sprintf("acknowledged event %s missing from a path of %d events", a, len(path))
		}
	}
	return ""
}

// TestLazyStressWithEviction: 8 goroutines append to, load, read the head
// and tree of, and flush 4 sessions opened without their index, with room
// for 2 open at a time, across chunk rotations and blobs. Every Load is a
// path holding every event acknowledged before it, and after a reopen
// every session verifies clean.
func TestLazyStressWithEviction(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 4096, BlobThreshold: 512, MaxOpenSessions: 2}
	s := openMem(t, m, o)
	var ids []uuid.UUID
	for range 4 {
		meta, err := s.Create(ctx, Meta{Name: "stress"})
		require.NoError(t, err)
		appendN(t, s, meta.ID, 3)
		ids = append(ids, meta.ID)
	}
	require.NoError(t, s.Close())
	s = openMem(t, m, o)

	var mu sync.Mutex
	acked := map[uuid.UUID][]uuid.UUID{}
	ackedOf := func(id uuid.UUID) []uuid.UUID {
		mu.Lock()
		defer mu.Unlock()
		return append([]uuid.UUID(nil), acked[id]...)
	}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 60 {
				id := ids[(w+i)%len(ids)]
				switch (w*7 + i) % 6 {
				case 0, 1, 2:
					ev, err := s.Append(ctx, id, UserText(strings.Repeat("y", (i*37)%700)))
					if !assert.NoError(t, err) {
						return
					}
					mu.Lock()
					acked[id] = append(acked[id], ev.ID)
					mu.Unlock()
				case 3:
					before := ackedOf(id)
					got, err := s.Load(ctx, id)
					if !assert.NoError(t, err) {
						return
					}
					assert.Empty(t, pathProblem(got, before))
				case 4:
					_, err := s.Head(ctx, id)
					assert.NoError(t, err)
					if i%2 == 0 {
						_, err = s.Tree(ctx, id)
						assert.NoError(t, err)
					}
				case 5:
					assert.NoError(t, s.Flush(ctx, id))
				}
			}
		})
	}
	wg.Wait()
	require.NoError(t, s.Close())
	s = openMem(t, m, o)
	defer s.Close()
	for _, id := range ids {
		got, err := s.Load(ctx, id)
		require.NoError(t, err)
		require.Empty(t, pathProblem(got, acked[id]))
		r, err := s.Verify(ctx, id)
		require.NoError(t, err)
		require.True(t, r.OK(), "%v", r.Problems)
	}
}

// TestLazyReaderStress: read-only stores, reopened often so that they open
// without the index, follow three goroutines appending across chunk
// rotations and sealing: every Load is a path holding every event
// acknowledged before the call.
func TestLazyReaderStress(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 2048, BlobThreshold: 700}
	w := openMem(t, m, o)
	meta, err := w.Create(ctx, Meta{Name: "stress"})
	require.NoError(t, err)
	id := meta.ID
	appendN(t, w, id, 3)
	require.NoError(t, w.Close())
	w = openMem(t, m, o)
	defer w.Close()

	var mu sync.Mutex
	var acked []uuid.UUID
	stop := make(chan struct{})
	var writers, readers sync.WaitGroup
	for g := range 3 {
		writers.Go(func() {
			for i := range 150 {
				ev, err := w.Append(ctx, id, UserText(strings.Repeat("z", (g*131+i*53)%900)))
				if !assert.NoError(t, err) {
					return
				}
				mu.Lock()
				acked = append(acked, ev.ID)
				mu.Unlock()
				if i%40 == 39 {
					_, err := w.Tree(ctx, id)
					assert.NoError(t, err)
				}
			}
		})
	}
	for range 3 {
		readers.Go(func() {
			ro := Options{ReadOnly: true, fs: m}
			var r *Store
			defer func() {
				if r != nil {
					r.Close()
				}
			}()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				if k%10 == 0 {
					if r != nil {
						r.Close()
					}
					var err error
					if r, err = Open(memRoot, &ro); !assert.NoError(t, err) {
						return
					}
				}
				mu.Lock()
				before := append([]uuid.UUID(nil), acked...)
				mu.Unlock()
				got, err := r.Load(ctx, id)
				if !assert.NoError(t, err) || !assert.Empty(t, pathProblem(got, before)) {
					return
				}
			}
		})
	}
	writers.Wait()
	close(stop)
	readers.Wait()
}

// TestLazyLoadParentLocationOverflow: a chunk line whose checksum matches
// but whose parent location holds an offset past int64 is corruption that
// Load reports; the decoder took it for a negative offset, and the walk
// panicked slicing at it.
func TestLazyLoadParentLocationOverflow(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	evs := appendN(t, s, id, 2)
	require.NoError(t, s.Close())
	reframe := func(line []byte, old, new string) []byte { // line without its newline
		obj := string(line[:len(line)-jsonl.SuffixLen]) + "}"
		require.Contains(t, obj, old)
		out := jsonl.Seal(nil, []byte(strings.Replace(obj, old, new, 1)))
		return out[:len(out)-1]
	}
	chunk := sessionPath(id, chunksDir, chunkName(0))
	data, err := vfs.ReadFile(m, chunk)
	require.NoError(t, err)
	lines := bytes.SplitAfter(bytes.TrimRight(data, "\x00"), []byte("\n"))
	first, last := lines[0], lines[1]
	require.Contains(t, string(last), evs[1].ID.String())
	loc := fmt.Sprintf(`"parent_loc":[0,0,%d]`, len(first))
	newLast := append(reframe(last[:len(last)-1], loc, fmt.Sprintf(`"parent_loc":[0,9999999999999999999,%d]`, len(first))), '\n')
	writeMemFile(t, m, chunk, append(bytes.Clone(first), newLast...))
	// The index line of the last event names the new length, so that the
	// session still opens without its index and Load walks the lines.
	idxPath := sessionPath(id, indexName)
	idx, err := vfs.ReadFile(m, idxPath)
	require.NoError(t, err)
	ilines := bytes.SplitAfter(idx, []byte("\n"))
	il := ilines[1]
	newIL := append(reframe(il[:len(il)-1], fmt.Sprintf(`"length":%d}`, len(last)), fmt.Sprintf(`"length":%d}`, len(newLast))), '\n')
	writeMemFile(t, m, idxPath, append(bytes.Clone(ilines[0]), newIL...))

	s = openMem(t, m, Options{})
	defer s.Close()
	var loadErr error
	require.NotPanics(t, func() { _, loadErr = s.Load(ctx, id) })
	assert.ErrorIs(t, loadErr, ErrCorrupt)
}
