package sessionstore

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/seam"
)

// overlapObjects counts the sealed chunk downloads in flight at once: each
// chunk Get waits (up to hold) for a second one to start, so that
// downloads issued one after the other show as one at a time.
type overlapObjects struct {
	ObjectStore
	hold time.Duration

	mu      sync.Mutex
	cond    *sync.Cond
	now     int
	most    int
	fetched []string
}

func newOverlapObjects(obj ObjectStore, hold time.Duration) *overlapObjects {
	o := &overlapObjects{ObjectStore: obj, hold: hold}
	o.cond = sync.NewCond(&o.mu)
	return o
}

func (o *overlapObjects) Get(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if !strings.Contains(key, "/chunks/") {
		return o.ObjectStore.Get(ctx, key, off, n)
	}
	o.mu.Lock()
	o.now++
	o.most = max(o.most, o.now)
	o.fetched = append(o.fetched, key)
	o.cond.Broadcast()
	// The timer says when the hold is over (a flag under o.mu: a clock
	// read after the timer was set could still be short of the hold when
	// the timer's broadcast came, and nothing would wake the wait again).
	expired := false
	deadline := time.AfterFunc(o.hold, func() {
		o.mu.Lock()
		expired = true
		o.cond.Broadcast()
		o.mu.Unlock()
	})
	for o.now < 2 && !expired {
		o.cond.Wait()
	}
	deadline.Stop()
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.now--
		o.mu.Unlock()
	}()
	return o.ObjectStore.Get(ctx, key, off, n)
}

// sealKeys maps each sealed chunk's object key, from the seal records of
// session id's log, to its chunk, and reports how many records carry an
// exit table.
func sealKeys(t *testing.T, obj *memObjects, id uuid.UUID) (map[string]uint32, int) {
	t.Helper()
	keys, tables := map[string]uint32{}, 0
	for _, k := range obj.keys(seam.LogPrefix(id)) {
		b, err := obj.Get(context.Background(), k, 0, -1)
		require.NoError(t, err)
		h, _, err := seam.DecodeObject(k, b)
		require.NoError(t, err)
		if h.Kind == seam.KindSeal {
			keys[h.Key] = h.Chunk
			if h.Exits != nil {
				tables++
			}
		}
	}
	return keys, tables
}

// TestRemoteRestoreDownloadsThePathSideBySide: a restore's Load downloads
// the sealed chunks its path crosses side by side, from their seal
// records' exit tables, and no chunk the path does not cross; a path
// that leaves a chunk for one further back than the chunk before it (a
// branch from an early fork point) is followed too.
// branchyRemoteSession builds, through a Store on obj with 4 KiB chunks, a
// session whose active path crosses several sealed chunks and leaves one
// for a chunk further back than the one before it (a branch from an early
// fork point), with an abandoned branch in the chunks between; it returns
// the session, its active path (Load's) and the chunks that hold it.
func branchyRemoteSession(t *testing.T, obj *memObjects) (uuid.UUID, []Event, map[uint32]bool) {
	t.Helper()
	ctx := context.Background()
	a, m := smallChunkSession(t, obj)
	var fork uuid.UUID
	var err error
	for i := range 60 {
		apiAppend(t, a, m.ID, textEv(fmt.Sprintf("trunk %d %s", i, strings.Repeat("t", 80))))
		if i == 10 {
			fork, err = a.Head(ctx, m.ID)
			require.NoError(t, err)
		}
	}
	for i := range 200 {
		apiAppend(t, a, m.ID, textEv(fmt.Sprintf("abandoned %d %s", i, strings.Repeat("y", 80))))
	}
	require.NoError(t, a.Branch(ctx, m.ID, fork))
	for i := range 120 {
		apiAppend(t, a, m.ID, textEv(fmt.Sprintf("active %d %s", i, strings.Repeat("z", 80))))
	}
	path, err := a.Load(ctx, m.ID)
	require.NoError(t, err)
	want := eventChunks(t, a, m.ID, path)
	require.NoError(t, a.Close())
	return m.ID, path, want
}

// eventChunks returns the chunks that hold evs, events of session id
// that s holds.
func eventChunks(t *testing.T, s *Store, id uuid.UUID, evs []Event) map[uint32]bool {
	t.Helper()
	h, err := s.reg.acquire(context.Background(), id, nil)
	require.NoError(t, err)
	defer s.reg.release(h)
	out := map[uint32]bool{}
	for _, ev := range evs {
		out[h.Entries[h.ByID[ev.ID]].Loc.Chunk] = true
	}
	return out
}

// linearSession makes a session of n events of about 100 bytes, one after
// the other, through a Store on obj with 4 KiB chunks, closed; it returns
// the session and its events (Load's).
func linearSession(t *testing.T, obj ObjectStore, n int) (Meta, []Event) {
	t.Helper()
	a, m := smallChunkSession(t, obj)
	for i := range n {
		apiAppend(t, a, m.ID, textEv(fmt.Sprintf("event %d %s", i, strings.Repeat("e", 80))))
	}
	want, err := a.Load(context.Background(), m.ID)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	return m, want
}

// smallChunkSession creates a session through a new Store on obj whose
// chunks hold 4 KiB, so that a few hundred events seal many.
func smallChunkSession(t *testing.T, obj ObjectStore) (*Store, Meta) {
	t.Helper()
	opts := remoteOpts(obj)
	opts.ChunkSize = 4 << 10
	a, _ := apiNewStore(t, opts)
	m, err := a.Create(context.Background(), Meta{})
	require.NoError(t, err)
	return a, m
}

func TestRemoteRestoreDownloadsThePathSideBySide(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	id, path, want := branchyRemoteSession(t, obj)

	keys, tables := sealKeys(t, obj, id)
	assert.Equal(t, len(keys), tables, "every seal record carries its chunk's exit table")
	sealedOnPath := 0
	for _, c := range keys {
		if want[c] {
			sealedOnPath++
		}
	}
	require.GreaterOrEqual(t, sealedOnPath, 3, "the path crosses several sealed chunks")
	require.Greater(t, len(keys), sealedOnPath, "some sealed chunks are off the path")

	o := newOverlapObjects(obj, 500*time.Millisecond)
	b, _ := apiNewStore(t, remoteOpts(o))
	got, err := b.Load(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, path, got)
	var fetched []uint32
	for _, k := range o.fetched {
		fetched = append(fetched, keys[k])
	}
	slices.Sort(fetched)
	assert.Equal(t, sealedOn(keys, want), fetched, "the sealed chunks of the path, each once, and no other")
	assert.GreaterOrEqual(t, o.most, 2, "downloads side by side")
	t.Logf("%d sealed chunks, %d on the path, at most %d downloads at once", len(keys), sealedOnPath, o.most)
}

// TestPrefetchDownloadsSideBySide: one prefetch along a linear path of
// several sealed chunks downloads them side by side. It drives prefetch
// alone, so that no other download (the walk's, the open's) can overlap
// with one issued one after the other.
func TestPrefetchDownloadsSideBySide(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	m, _ := linearSession(t, obj, 150)

	o := newOverlapObjects(obj, time.Second)
	b, _ := apiNewStore(t, remoteOpts(o))
	_, err := b.Head(ctx, m.ID) // restores; downloads HEAD's chunk at most
	require.NoError(t, err)
	f := b.opts.fetch
	f.mu.Lock()
	var dir string
	var newest uint32
	for p, s := range f.pending {
		dir, newest = filepath.Dir(p), max(newest, s.Chunk)
	}
	before := len(f.pending)
	f.mu.Unlock()
	require.GreaterOrEqual(t, before, 3, "the path crosses several sealed chunks not downloaded")
	o.mu.Lock()
	o.fetched, o.most = nil, 0
	o.mu.Unlock()

	// From the last line of the newest chunk not downloaded: the chunks
	// before it are on its path, as far as prefetchAhead.
	wait := f.prefetch(ctx, dir, eventline.Location{Chunk: newest})
	wait()
	assert.Len(t, o.fetched, min(before, 1+prefetchAhead), "the chunks of the path ahead, each once")
	assert.GreaterOrEqual(t, o.most, 2, "downloads side by side")
}

// sealedOn returns the chunks of want that are sealed (in keys), in order.
func sealedOn(keys map[string]uint32, want map[uint32]bool) []uint32 {
	var out []uint32
	for _, c := range keys {
		if want[c] {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// TestRemoteLoadSeqDownloadsOnlyThePath: LoadSeq on a session restored
// cold yields Load's events and downloads the path's sealed chunks only,
// as Load does, not every sealed chunk for the index.
func TestRemoteLoadSeqDownloadsOnlyThePath(t *testing.T) {
	obj := newMemObjects()
	id, path, want := branchyRemoteSession(t, obj)
	keys, _ := sealKeys(t, obj, id)
	defer func(b int64, n int) { seqBatchBytes, seqBatchEvents = b, n }(seqBatchBytes, seqBatchEvents)
	seqBatchBytes, seqBatchEvents = 4<<10, 16 // many batches

	o := newOverlapObjects(obj, 0)
	b, _ := apiNewStore(t, remoteOpts(o))
	var got []Event
	for ev, err := range b.LoadSeq(context.Background(), id) {
		require.NoError(t, err)
		got = append(got, ev)
	}
	assert.Equal(t, path, got)
	var fetched []uint32
	for _, k := range o.fetched {
		fetched = append(fetched, keys[k])
	}
	slices.Sort(fetched)
	assert.Equal(t, sealedOn(keys, want), fetched, "the sealed chunks of the path, each once, and no other")
}

// TestRemoteRestoreWithoutExitTables: seal records without tables (a
// build before them) restore as before, one chunk as the walk reaches it,
// and a table that lies costs bytes, never events.
func TestRemoteRestoreWithoutExitTables(t *testing.T) {
	for _, tc := range []struct {
		name  string
		exits func(h *seam.Header) []seam.Exit
	}{
		{"none", func(*seam.Header) []seam.Exit { return nil }},
		{"lying", func(h *seam.Header) []seam.Exit {
			if h.Chunk == 0 {
				return []seam.Exit{{Off: 0, Root: true}}
			}
			return []seam.Exit{{Off: 0, Chunk: 0, At: 0}} // every chunk straight to the first
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			obj := newMemObjects()
			m, want := linearSession(t, obj, 150)
			rewriteSealRecords(t, obj, m.ID, tc.exits)

			b, _ := apiNewStore(t, remoteOpts(obj))
			got, err := b.Load(ctx, m.ID)
			require.NoError(t, err)
			assert.Equal(t, want, got)
		})
	}
}

// rewriteSealRecords replaces the exit table of every seal record of
// session id's log, and of the markers' states, by exits(header).
func rewriteSealRecords(t *testing.T, obj *memObjects, id uuid.UUID, exits func(h *seam.Header) []seam.Exit) {
	t.Helper()
	obj.mu.Lock()
	defer obj.mu.Unlock()
	byChunk := map[uint32][]seam.Exit{}
	for _, k := range slices.Sorted(maps.Keys(obj.objs)) {
		if !strings.HasPrefix(k, seam.LogPrefix(id)) {
			continue
		}
		o := obj.objs[k]
		h, payload, err := seam.DecodeObject(k, o.data)
		require.NoError(t, err)
		if h.Kind == seam.KindSeal {
			h.Exits = exits(h)
			byChunk[h.Chunk] = h.Exits
		}
		if h.State != nil {
			for i := range h.State.Sealed {
				h.State.Sealed[i].Exits = exits(&seam.Header{Chunk: h.State.Sealed[i].Chunk})
			}
		}
		b, err := seam.EncodeObject(h, payload)
		require.NoError(t, err)
		o.data = b
		obj.objs[k] = o
	}
	require.NotEmpty(t, byChunk, "the session has seal records")
}

// TestRemoteDownloadLeftoverRemoved: the temporary file of a download a
// crash interrupted (not a sealing's: the open's recovery leaves it, a
// download may run beside it) is removed by the next restore of the
// session, which downloads the chunk again.
func TestRemoteDownloadLeftoverRemoved(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	m, want := linearSession(t, obj, 100)

	dir := t.TempDir()
	cdir := filepath.Join(layout.SessionDir(dir, m.ID), chunksDir)
	require.NoError(t, os.MkdirAll(cdir, 0o755))
	leftover := filepath.Join(cdir, chunkName(0)+sealedExt+layout.DownloadTemp)
	require.NoError(t, os.WriteFile(leftover, []byte("half a download"), 0o644))
	b := apiOpen(t, dir, remoteOpts(obj))
	got, err := b.Load(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.NoFileExists(t, leftover)
	assert.FileExists(t, filepath.Join(cdir, chunkName(0)+sealedExt), "the path's first chunk, downloaded again")
}

// TestSeqMatchesSlicesRestored: LoadSeq and FullPathSeq of HEAD's path on
// sessions restored cold from the object store (resolved by walking the
// path; compactions, blobs and a fork among them) yield what the slice
// forms returned on the Store that wrote them.
func TestSeqMatchesSlicesRestored(t *testing.T) {
	smallBatches(t)
	obj := newMemObjects()
	o := remoteOpts(obj)
	o.BlobThreshold, o.ChunkSize = 200, 4096
	s, err := Open(t.TempDir(), o)
	require.NoError(t, err)
	sessions := buildSeqSessions(t, s)
	wants := map[uuid.UUID]seqWant{}
	for _, ss := range sessions {
		wants[ss.id] = sliceForms(t, s, ss)
	}
	require.NoError(t, s.Close())

	// The path forms only: TreeSeq's previews of blob records may differ
	// by design (a blob's entry rebuilt from its chunk line has none).
	r, _ := apiNewStore(t, o)
	for _, ss := range sessions {
		t.Run(ss.name, func(t *testing.T) {
			load, err := collect(t, r.LoadSeq(context.Background(), ss.id))
			require.NoError(t, err)
			assert.Equal(t, wants[ss.id].load, load, "LoadSeq")
			full, err := collect(t, r.FullPathSeq(context.Background(), ss.id, uuid.Nil))
			require.NoError(t, err)
			assert.Equal(t, wants[ss.id].full, full, "FullPathSeq to HEAD")
		})
	}
}

// TestRemoteRestoreStopsAtACompaction: a Load whose context ends at a
// compaction near HEAD downloads the chunks up to it (the exit tables
// mark the compaction, where the prefetch stops), not every chunk to the
// session's first event.
func TestRemoteRestoreStopsAtACompaction(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, m := smallChunkSession(t, obj)
	var last Event
	for i := range 300 {
		last = apiAppend(t, a, m.ID, textEv(fmt.Sprintf("event %d %s", i, strings.Repeat("e", 80))))
	}
	_, err := a.Append(ctx, m.ID, NewEvent(KindCompaction, RoleNone, CompactionRecord{Summary: Summary{Text: "s"}, FirstKept: last.ID}))
	require.NoError(t, err)
	for i := range 60 {
		apiAppend(t, a, m.ID, textEv(fmt.Sprintf("after %d %s", i, strings.Repeat("e", 80))))
	}
	want, err := a.Load(ctx, m.ID)
	require.NoError(t, err)
	chunks := eventChunks(t, a, m.ID, want)
	require.NoError(t, a.Close())
	keys, _ := sealKeys(t, obj, m.ID)
	require.Greater(t, len(keys), len(chunks)+2*prefetchAhead, "the session spans many sealed chunks past the context's")

	o := newOverlapObjects(obj, 0)
	b, _ := apiNewStore(t, remoteOpts(o))
	got, err := b.Load(ctx, m.ID)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.LessOrEqual(t, len(o.fetched), len(chunks)+1, "the chunks of the context: the tables mark the compaction, where the prefetch stops")
	t.Logf("%d sealed chunks, %d events in the context in %d chunks, %d chunk downloads", len(keys), len(got), len(chunks), len(o.fetched))
}

// TestRemoteLoadSeqBesideBranch: LoadSeq of a restored session beside a
// Branch (run with -race: the pending selection is read under the
// session's mutex).
func TestRemoteLoadSeqBesideBranch(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	a, _ := apiNewStore(t, remoteOpts(obj))
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	var evs []Event
	for i := range 20 {
		evs = append(evs, apiAppend(t, a, m.ID, textEv(fmt.Sprintf("e%d", i))))
	}
	require.NoError(t, a.Close())
	for range 20 {
		b, err := Open(t.TempDir(), remoteOpts(obj))
		require.NoError(t, err)
		_, err = b.Head(ctx, m.ID) // opened without its index
		require.NoError(t, err)
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() {
			<-start
			assert.NoError(t, b.Branch(ctx, m.ID, evs[3].ID))
		})
		var n int
		wg.Go(func() {
			<-start
			for _, err := range b.LoadSeq(ctx, m.ID) {
				assert.NoError(t, err)
				n++
			}
		})
		close(start)
		wg.Wait()
		assert.Contains(t, []int{4, 20}, n, "HEAD's path, or the selected event's once the Branch is made")
		require.NoError(t, b.Close())
	}
}
