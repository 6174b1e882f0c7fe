package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/blob"
	"github.com/sessionstore/sessionstore/internal/chunkwriter"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

func TestCompressionModeMismatch(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, &Options{Compression: CompressionNone})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	for _, o := range []*Options{nil, {Compression: CompressionZstd}} {
		_, err := Open(dir, o)
		require.ErrorIs(t, err, ErrCompressionMismatch)
		assert.Contains(t, err.Error(), `Options.Compression = "none"`, "the error says how to proceed")
	}
	s, err = Open(dir, &Options{Compression: CompressionNone})
	require.NoError(t, err, "the root's own mode opens")
	require.NoError(t, s.Close())

	_, err = Open(t.TempDir(), &Options{Compression: "lz4"})
	assert.ErrorIs(t, err, ErrInvalidOptions)
}

// sealedLayout reports, for each chunk file of a session, whether it is
// sealed compressed.
func sealedLayout(t *testing.T, fsys vfs.FS, dir string) map[string]bool {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	out := map[string]bool{}
	for _, n := range names {
		if _, ok := parseChunkName(n); ok {
			out[n] = strings.HasSuffix(n, sealedExt)
		}
	}
	return out
}

// TestMixedChunks: a sealing that fails leaves its chunk plain; plain and
// compressed chunks then load identically, also after reopening.
func TestMixedChunks(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	failed := 0
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpCreate && strings.HasSuffix(path, "000001.jsonl.zst.tmp") {
			failed++
			return errors.New("injected: no space for the compressed copy")
		}
		return nil
	})
	s := openMem(t, m, Options{ChunkSize: 2048})
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	var evs []Event
	for range 60 {
		evs = append(evs, appendN(t, s, meta.ID, 1)...)
		awaitSealing(s, meta.ID) // one rotation at a time, each sealing ended
	}
	require.Greater(t, failed, 1, "each rotation retries the chunk left plain")
	layout := sealedLayout(t, m, sessionPath(meta.ID, chunksDir))
	assert.False(t, layout["000001.jsonl"], "the chunk whose sealing failed stays plain")
	assert.True(t, layout["000000.jsonl.zst"])
	assert.True(t, layout["000002.jsonl.zst"])
	path, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	m.SetFault(nil)
	s2 := checkAll(t, m, meta.ID, evs)
	defer s2.Close()
	again, err := s2.Load(ctx, meta.ID)
	require.NoError(t, err)
	assert.Equal(t, path, again)
	r, err := s2.Verify(ctx, meta.ID)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)

	// Without the fault, the next rotation seals the chunk left plain, and
	// index.jsonl drops its lines.
	evs = append(evs, appendN(t, s2, meta.ID, 30)...)
	awaitSealing(s2, meta.ID)
	assert.True(t, sealedLayout(t, m, sessionPath(meta.ID, chunksDir))["000001.jsonl.zst"])
	require.NoError(t, s2.Close())
	checkAll(t, m, meta.ID, evs).Close()
}

// closedSealedSession writes n events with 2 KiB chunks to a new session
// on a MemFS and closes the store. It returns the file system, the
// session's metadata, the events and the session's chunks directory.
func closedSealedSession(t *testing.T, n int) (*vfs.MemFS, Meta, []Event, string) {
	t.Helper()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{ChunkSize: 2048})
	meta, err := s.Create(context.Background(), Meta{})
	require.NoError(t, err)
	evs := appendN(t, s, meta.ID, n)
	require.NoError(t, s.Close())
	return m, meta, evs, sessionPath(meta.ID, chunksDir)
}

// TestInterruptedSeal: a crash after the compressed copy is durable but
// before the plain file is removed leaves both; opening removes the plain
// one and loses nothing.
func TestInterruptedSeal(t *testing.T) {
	m, meta, evs, dir := closedSealedSession(t, 30)
	zr, err := openChunkFile(m, filepath.Join(dir, chunkName(0)+sealedExt))
	require.NoError(t, err)
	writeMemFile(t, m, filepath.Join(dir, chunkName(0)), zr)
	require.True(t, sealedLayout(t, m, dir)["000000.jsonl.zst"])
	require.Contains(t, sealedLayout(t, m, dir), "000000.jsonl")
	writeMemFile(t, m, filepath.Join(dir, chunkName(1)+sealedExt+".tmp"), []byte("half a sealing"))

	checkAll(t, m, meta.ID, evs).Close()
	assert.NotContains(t, sealedLayout(t, m, dir), "000000.jsonl", "the plain copy is removed")
	assert.Contains(t, sealedLayout(t, m, dir), "000000.jsonl.zst")
	_, err = m.Stat(filepath.Join(dir, chunkName(1)+sealedExt+".tmp"))
	assert.ErrorIs(t, err, fs.ErrNotExist, "the temporary file of an interrupted sealing is removed")
}

// openChunkFile returns the logical bytes of a chunk file, plain or sealed.
func openChunkFile(fsys vfs.FS, path string) ([]byte, error) {
	dir, name := filepath.Split(path)
	n, ok := parseChunkName(name)
	if !ok {
		return nil, fmt.Errorf("not a chunk: %s", path)
	}
	src, size, _, err := openChunk(fsys, filepath.Clean(dir), n)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	b := make([]byte, size)
	_, err = src.ReadAt(b, 0)
	return b, err
}

// TestSealedIndex: a sealed chunk embeds the index lines of its records,
// and index.jsonl keeps only those of plain chunks. Lines a crash left in
// index.jsonl for a sealed chunk are skipped and dropped; an embedded
// index that does not match its chunk is corruption naming the file.
func TestSealedIndex(t *testing.T) {
	ctx := context.Background()
	m, meta, evs, dir := closedSealedSession(t, 40)
	layout := sealedLayout(t, m, dir)
	require.True(t, layout["000000.jsonl.zst"])
	require.True(t, layout["000001.jsonl.zst"])

	// Every entry is on disk once: embedded or in index.jsonl.
	assert.Equal(t, len(evs), indexedOnDisk(t, m, meta.ID))
	zero, _, err := sealedIndex(m, dir, 0)
	require.NoError(t, err)
	require.NotEmpty(t, zero)
	assert.Equal(t, evs[0].ID, zero[0].ID)

	// A crash between sealing and rewriting index.jsonl leaves the lines
	// of chunk 0 in front of it.
	indexPath := sessionPath(meta.ID, indexName)
	rest, err := vfs.ReadFile(m, indexPath)
	require.NoError(t, err)
	writeMemFile(t, m, indexPath, append(index.AppendLines(nil, zero), rest...))
	s2 := openMem(t, m, Options{ChunkSize: 2048})
	r, err := s2.Verify(ctx, meta.ID)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Equal(t, len(evs), r.Indexed)
	assert.Contains(t, strings.Join(r.Repairs, "\n"), fmt.Sprintf("drop %d lines of sealed chunks", len(zero)))
	path, err := s2.Load(ctx, meta.ID)
	require.NoError(t, err)
	assert.Len(t, path, len(evs))
	// Load needs no index (lazy.go); the first call that loads it
	// reconciles.
	_, err = s2.Tree(ctx, meta.ID)
	require.NoError(t, err)
	require.NoError(t, s2.Close())
	assert.Equal(t, len(evs), indexedOnDisk(t, m, meta.ID), "reconciliation dropped the stale lines")

	// Chunk 1 sealed with chunk 0's index lines: the file is whole, its
	// embedded index is wrong.
	one := filepath.Join(dir, chunkName(1)+sealedExt)
	data, err := openChunkFile(m, one)
	require.NoError(t, err)
	require.NoError(t, zchunk.Write(m, one, data, index.AppendLines(nil, zero), 0o600))
	s3 := openMem(t, m, Options{ChunkSize: 2048})
	defer s3.Close()
	// The first call that loads the index reports it (appends and Load
	// from HEAD need no index: lazy.go); writes are refused from then on.
	_, err = s3.Tree(ctx, meta.ID)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, one, ce.Path)
	assert.Contains(t, ce.Error(), "embedded index")
	_, err = s3.Append(ctx, meta.ID, UserText("refused"))
	assert.ErrorAs(t, err, &ce)
	r, err = s3.Verify(ctx, meta.ID)
	require.NoError(t, err)
	assert.False(t, r.OK())
	path, err = s3.Load(ctx, meta.ID)
	assert.ErrorAs(t, err, &ce)
	assert.Len(t, path, len(zero), "the valid prefix is chunk 0")
}

// awaitSealing waits until no chunk of the session, if open in s, is being
// sealed in the background.
func awaitSealing(s *Store, id uuid.UUID) {
	h, _ := s.reg.tab.Get(id)
	if h == nil {
		return
	}
	h.mu.Lock()
	h.chunks.AwaitSealing()
	h.mu.Unlock()
}

// gatedSealFS holds the creation of a sealed chunk's temporary file until
// open is closed, and reports on started that a sealing began.
type gatedSealFS struct {
	vfs.FS
	started chan string
	open    chan struct{}
}

func (g gatedSealFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if strings.HasSuffix(name, sealedExt+".tmp") {
		select {
		case g.started <- filepath.Base(name):
		default: // the test reads the first few
		}
		<-g.open
	}
	return g.FS.OpenFile(name, flag, perm)
}

// gatedSealing opens a store on dir with 2 KiB chunks whose sealings wait
// to create their file until release (called at the latest when the test
// ends), and creates a session in it.
func gatedSealing(t *testing.T, dir string) (*Store, Meta, gatedSealFS, func()) {
	t.Helper()
	g := gatedSealFS{FS: vfs.Default, started: make(chan string, 16), open: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(g.open) }) }
	t.Cleanup(release)
	s, err := Open(dir, &Options{ChunkSize: 2048, fs: g})
	require.NoError(t, err)
	meta, err := s.Create(context.Background(), Meta{})
	require.NoError(t, err)
	return s, meta, g, release
}

// TestFlushAwaitsSealing: Flush returns only once a chunk being sealed
// in the background is sealed and its lines have left index.jsonl, so a
// crash after Flush has nothing to repair.
//
// The sealing is held before it writes anything, and Flush runs in a
// synctest bubble: Wait returns once every other goroutine of the test is
// blocked, so by then a Flush that does not wait for the sealing has
// returned, and one that does is waiting for it (nothing else holds it).
func TestFlushAwaitsSealing(t *testing.T) {
	warmZstd(t)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		dir := t.TempDir()
		s, meta, g, release := gatedSealing(t, dir)
		defer func() {
			release() // Close waits for the sealing
			assert.NoError(t, s.Close())
		}()
		for len(g.started) == 0 {
			_, err := s.Append(ctx, meta.ID, UserText("until a chunk is full"))
			require.NoError(t, err)
			// A pause in the appends, in the bubble's time: a full chunk
			// is sealed then.
			time.Sleep(chunkwriter.DefaultSealIdle)
		}
		flushed := make(chan error, 1)
		go func() { flushed <- s.Flush(ctx, meta.ID) }()
		synctest.Wait() // Flush returned or waits; the sealing is held
		select {
		case err := <-flushed:
			require.Failf(t, "Flush returned while a sealing was held", "Flush: %v", err)
		default:
		}
		release()
		require.NoError(t, <-flushed)
		b, err := os.ReadFile(filepath.Join(dir, sessionsDir, meta.ID.String(), indexName))
		require.NoError(t, err)
		for line := range bytes.Lines(b) {
			e, err := eventline.DecodeIndex(bytes.TrimSuffix(line, []byte("\n")))
			require.NoError(t, err)
			assert.NotEqual(t, uint32(0), e.Loc.Chunk, "a line of the sealed chunk 0 is still in index.jsonl")
		}
	})
}

// warmZstd sets up the zstd coders the package shares (internal/zchunk's,
// which seal chunks, and the blob encoder), which they do on first use.
// A test calls it before its synctest bubble: channels the coders made in
// a bubble would belong to it, and the next test to seal a chunk or write
// a blob would die ("receive on synctest channel from outside bubble").
func warmZstd(t *testing.T) {
	t.Helper()
	require.NoError(t, zchunk.Write(vfs.NewMemFS(), "/warm.jsonl.zst", []byte("warm\n"), []byte("{}\n"), 0o600))
	blob.Encode([]byte("warm"), nil)
}

// TestSealingInBackground: sealing a full chunk runs beside the appends
// that fill the next one, which neither wait for it nor see it; Close
// waits for it, and the session is then sealed and whole.
func TestSealingInBackground(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, meta, g, release := gatedSealing(t, dir)
	var evs []Event
	appendOne := func() {
		t.Helper()
		done := make(chan Event, 1)
		go func() {
			ev, err := s.Append(ctx, meta.ID, UserText(fmt.Sprintf("message %d", len(evs))))
			assert.NoError(t, err)
			done <- ev
		}()
		select {
		case ev := <-done:
			evs = append(evs, ev)
		case <-time.After(time.Minute):
			t.Fatal("an append waited for the sealing")
		}
	}
	for len(g.started) == 0 {
		appendOne()
	}
	assert.Equal(t, chunkName(0)+sealedExt+".tmp", <-g.started)

	// Chunk 0 is being sealed (held): appends go on into chunk 1 and
	// beyond, and reads see every event.
	for range 40 {
		appendOne()
	}
	apiSameEvents(t, evs, mustLoad(t, s, meta.ID))
	chunks := filepath.Join(dir, sessionsDir, meta.ID.String(), chunksDir)
	names, err := vfs.Default.ReadDir(chunks)
	require.NoError(t, err)
	assert.Contains(t, names, chunkName(0), "chunk 0 stays plain while its sealing is held")
	assert.Contains(t, names, chunkName(2), "the appends filled chunk 1 and started chunk 2")

	release()
	require.NoError(t, s.Close())
	names, err = vfs.Default.ReadDir(chunks)
	require.NoError(t, err)
	for _, n := range []uint32{0, 1} {
		assert.Contains(t, names, chunkName(n)+sealedExt, "Close waited for the sealing")
		assert.NotContains(t, names, chunkName(n))
	}
	s2, err := Open(dir, nil)
	require.NoError(t, err)
	defer s2.Close()
	apiSameEvents(t, evs, mustLoad(t, s2, meta.ID))
	r, err := s2.Verify(ctx, meta.ID)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Empty(t, r.Repairs, "nothing for reconciliation to repair")
}

// indexGapFS holds a sealing (the creation of its temporary file) and the
// syncs of plain chunks while their gates are armed, and fails the next
// write of index.jsonl's temporary file (the rewrite after a sealing)
// once failIndex is armed.
type indexGapFS struct {
	vfs.FS
	sealHeld, syncHeld, indexFailed chan struct{}
	sealOpen, syncOpen              chan struct{}
	holdSeal, holdSync, failIndex   atomic.Bool
}

func (g *indexGapFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if strings.HasSuffix(name, sealedExt+".tmp") && g.holdSeal.CompareAndSwap(true, false) {
		g.sealHeld <- struct{}{}
		<-g.sealOpen
	}
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &indexGapFile{File: f, fs: g, name: name}, nil
}

type indexGapFile struct {
	vfs.File
	fs   *indexGapFS
	name string
}

func (f *indexGapFile) Sync() error {
	if filepath.Base(filepath.Dir(f.name)) == chunksDir && strings.HasSuffix(f.name, chunkExt) && f.fs.holdSync.CompareAndSwap(true, false) {
		f.fs.syncHeld <- struct{}{}
		<-f.fs.syncOpen
	}
	return f.File.Sync()
}

func (f *indexGapFile) Write(p []byte) (int, error) {
	if strings.HasSuffix(f.name, indexName+".tmp") && f.fs.failIndex.CompareAndSwap(true, false) {
		close(f.fs.indexFailed)
		return 0, errors.New("injected index write failure")
	}
	return f.File.Write(p)
}

// TestIndexRewriteFailsDuringSync: the rewrite of index.jsonl after a
// background sealing fails while an append's group is syncing; that group
// is then published. Its events are acknowledged, so the next open must
// find every one of them: index.jsonl must not get the group's lines at
// its start (a gap, which reconciliation takes for corruption).
func TestIndexRewriteFailsDuringSync(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test gates, fails or checks.
	ctx := context.Background()
	m := vfs.NewMemFS()
	g := &indexGapFS{FS: m, sealHeld: make(chan struct{}, 1), syncHeld: make(chan struct{}, 1), indexFailed: make(chan struct{}),
		sealOpen: make(chan struct{}), syncOpen: make(chan struct{})}
	s := openMem(t, g, Options{JournalSize: -1, ChunkSize: 2048})
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	appendAsync := func(i int) chan Event {
		done := make(chan Event, 1)
		go func() {
			ev, err := s.Append(ctx, meta.ID, UserText(fmt.Sprintf("message %d", i)))
			assert.NoError(t, err)
			done <- ev
		}()
		return done
	}
	var acked []Event
	g.holdSeal.Store(true)
	for { // until chunk 0 is full and its sealing starts
		acked = append(acked, within(t, "an append", func() Event { return <-appendAsync(len(acked)) }))
		chunks, err := listChunks(m, sessionPath(meta.ID, chunksDir))
		require.NoError(t, err)
		if len(chunks) > 1 {
			break
		}
	}
	within(t, "the sealing", func() struct{} { return <-g.sealHeld })
	// Appends go on in the next chunk meanwhile, so the group below does
	// not start it.
	for range 3 {
		acked = append(acked, within(t, "an append", func() Event { return <-appendAsync(len(acked)) }))
	}

	// An append whose group is mid-sync when the sealing ends and its
	// rewrite of index.jsonl fails.
	g.holdSync.Store(true)
	g.failIndex.Store(true)
	last := appendAsync(len(acked))
	within(t, "the append's sync", func() struct{} { return <-g.syncHeld })
	close(g.sealOpen)
	within(t, "the failed rewrite", func() struct{} { <-g.indexFailed; return struct{}{} })
	close(g.syncOpen)
	acked = append(acked, within(t, "the append", func() Event { return <-last }))
	require.NoError(t, s.Close())

	s = openMem(t, m, Options{JournalSize: -1, ChunkSize: 2048})
	defer s.Close()
	for _, ev := range acked {
		got, err := s.Event(ctx, meta.ID, ev.ID)
		require.NoError(t, err, "acknowledged event %s", ev.ID)
		assert.Equal(t, string(ev.Record), string(got.Record))
	}
	r, err := s.Verify(ctx, meta.ID)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}
