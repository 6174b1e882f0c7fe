package sessionstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// bigResult is a tool result whose record is well over the default blob
// threshold.
func bigResult(callID string, n int) Event {
	return ToolResultEvent(ToolResult{CallID: callID, Output: strings.Repeat(fmt.Sprintf("line %d of a long test log\n", n), 2000)})
}

// blobFiles lists the blob files of a session.
func blobFiles(t *testing.T, fsys vfs.FS, id uuid.UUID) []string {
	t.Helper()
	root := sessionPath(id, blobsDir, "sha256")
	subs, err := fsys.ReadDir(root)
	if err != nil {
		return nil
	}
	var out []string
	for _, sub := range subs {
		names, err := fsys.ReadDir(filepath.Join(root, sub))
		require.NoError(t, err)
		for _, n := range names {
			out = append(out, filepath.Join(root, sub, n))
		}
	}
	return out
}

func TestBlobRoundTripAndLaziness(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	small, err := s.Append(ctx, id, UserText("run the tests"))
	require.NoError(t, err)
	big, err := s.Append(ctx, id, bigResult("c1", 1))
	require.NoError(t, err)
	assert.Empty(t, small.Digest, "small records stay inline")
	require.True(t, strings.HasPrefix(big.Digest, "sha256:"))
	assert.Greater(t, big.Size, int64(testBlobThreshold))
	assert.Equal(t, big.Size, int64(len(big.Record)))
	files := blobFiles(t, m, id)
	require.Len(t, files, 1)
	info, err := m.Stat(files[0])
	require.NoError(t, err)
	assert.Less(t, info.Size()*10, big.Size, "blobs are compressed")

	// The chunk line holds the reference, not the record.
	chunk, err := vfs.ReadFile(m, sessionPath(id, chunksDir, chunkName(0)))
	require.NoError(t, err)
	assert.Contains(t, string(chunk), `"digest":"`+big.Digest+`","size":`)
	assert.Contains(t, string(chunk), `"record":null`)
	assert.NotContains(t, string(chunk), "long test log")
	require.NoError(t, s.Close())

	// Event is lazy, Resolve and Load resolve; all after a reopen.
	counting := vfs.NewCounting(m)
	s = openMem(t, counting, Options{})
	defer s.Close()
	ev, err := s.Event(ctx, id, big.ID)
	require.NoError(t, err)
	assert.Nil(t, ev.Record)
	assert.Equal(t, big.Digest, ev.Digest)
	assert.Equal(t, big.Size, ev.Size)
	_, err = s.Tree(ctx, id)
	require.NoError(t, err)
	for p := range counting.Stats() {
		assert.NotContains(t, p, string(filepath.Separator)+blobsDir+string(filepath.Separator), "Event and Tree open no blob")
	}
	resolved, err := s.Resolve(ctx, id, ev)
	require.NoError(t, err)
	assert.Equal(t, string(big.Record), string(resolved.Record))
	path, err := s.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, path, 2)
	assert.Equal(t, string(big.Record), string(path[1].Record))
	same, err := s.Resolve(ctx, id, small)
	require.NoError(t, err)
	assert.Equal(t, small, same, "inline events resolve to themselves")
}

// TestBlobDedup: the same payload appended twice, also on another branch,
// is stored once.
func TestBlobDedup(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	defer s.Close()
	root, err := s.Append(ctx, id, UserText("q"))
	require.NoError(t, err)
	a, err := s.Append(ctx, id, bigResult("c", 7))
	require.NoError(t, err)
	b, err := s.Append(ctx, id, bigResult("c", 7))
	require.NoError(t, err)
	require.NoError(t, s.Branch(ctx, id, root.ID))
	c, err := s.Append(ctx, id, bigResult("c", 7))
	require.NoError(t, err)
	assert.Equal(t, a.Digest, b.Digest)
	assert.Equal(t, a.Digest, c.Digest)
	assert.Len(t, blobFiles(t, m, id), 1)
	_, err = s.Append(ctx, id, bigResult("c", 8))
	require.NoError(t, err)
	assert.Len(t, blobFiles(t, m, id), 2)
}

// TestBlobCorruption: a damaged or missing blob is a *CorruptionError
// naming the blob file, on Load, Resolve and Verify.
func TestBlobCorruption(t *testing.T) {
	for _, damage := range []string{"flip", "missing", "truncate"} {
		t.Run(damage, func(t *testing.T) {
			ctx := context.Background()
			m, s, id := memSession(t, Options{})
			big, err := s.Append(ctx, id, bigResult("c", 1))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			path := blobFiles(t, m, id)[0]
			b, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			switch damage {
			case "flip":
				b[len(b)/2] ^= 0x40
				writeMemFile(t, m, path, b)
			case "missing":
				require.NoError(t, m.Remove(path))
			case "truncate":
				writeMemFile(t, m, path, b[:len(b)-5])
			}
			s = openMem(t, m, Options{})
			defer s.Close()
			_, err = s.Load(ctx, id)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, path, ce.Path)
			ev, err := s.Event(ctx, id, big.ID)
			require.NoError(t, err, "the chunk record itself is fine")
			_, err = s.Resolve(ctx, id, ev)
			assert.ErrorIs(t, err, ErrCorrupt)
			r, err := s.Verify(ctx, id)
			require.NoError(t, err)
			require.False(t, r.OK())
			assert.Equal(t, path, r.Problems[0].Path)
		})
	}
}

// TestBlobGC: a crash between writing a blob and appending its event
// leaves an unreferenced blob; GC removes it and keeps every referenced one.
func TestBlobGC(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	kept, err := s.Append(ctx, id, bigResult("c", 1))
	require.NoError(t, err)
	// The chunk write of the next append fails after its blob was written.
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && strings.HasSuffix(path, chunkExt) {
			return fmt.Errorf("injected")
		}
		return nil
	})
	_, err = s.Append(ctx, id, bigResult("c", 2))
	require.Error(t, err)
	m.SetFault(nil)
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	require.NoError(t, s.Close())
	require.Len(t, blobFiles(t, crashed, id), 2, "the orphan blob is durable")
	writeMemFile(t, crashed, filepath.Join(filepath.Dir(blobFiles(t, crashed, id)[0]), "stale.tmp"), []byte("x"))
	// What GC must remove: every blob file but the kept event's, and the
	// temporary file.
	d, err := parseDigest(kept.Digest)
	require.NoError(t, err)
	var orphans []string
	var orphanBytes int64
	for _, f := range blobFiles(t, crashed, id) {
		if f == blobPath(sessionPath(id), d) {
			continue
		}
		info, err := crashed.Stat(f)
		require.NoError(t, err)
		orphans = append(orphans, f)
		orphanBytes += info.Size()
	}
	require.Len(t, orphans, 2, "precondition: the orphan blob and stale.tmp")

	s = openMem(t, crashed, Options{})
	defer s.Close()
	rep, err := s.GC(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, 1, rep.Kept)
	assert.Equal(t, 2, rep.Removed)
	assert.Equal(t, orphanBytes, rep.Bytes, "the size of the orphan blob and of stale.tmp")
	files := blobFiles(t, crashed, id)
	require.Len(t, files, 1)
	ev, err := s.Event(ctx, id, kept.ID)
	require.NoError(t, err)
	ev, err = s.Resolve(ctx, id, ev)
	require.NoError(t, err)
	assert.Equal(t, string(kept.Record), string(ev.Record))
	again, err := s.GC(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, GCReport{Kept: 1}, again)
	// The removal is durable.
	assert.Len(t, blobFiles(t, crashed.CrashClone(vfs.KeepSynced, 0), id), 1)
}

// TestBlobRewrittenAfterCrash: a crash after a blob's name is durable but
// before its content is leaves a blob that does not verify. No event
// refers to it, and appending the same record again writes it anew
// instead of reusing it.
func TestBlobRewrittenAfterCrash(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	// The blob file's sync fails; its directory's sync (run beside it)
	// succeeds, so the name survives the power loss and the content not.
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, blobExt) { // the handle keeps its temporary name
			return fmt.Errorf("injected")
		}
		return nil
	})
	_, err := s.Append(ctx, id, bigResult("c", 3))
	require.Error(t, err)
	m.SetFault(nil)
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	require.NoError(t, s.Close())
	files := blobFiles(t, crashed, id)
	require.Len(t, files, 1, "the blob's name is durable")
	_, err = readBlob(crashed, filepath.Join(memRoot, id.String()), digestOf(t, files[0]), int64(len(bigResult("c", 3).Record)))
	require.ErrorIs(t, err, ErrCorrupt, "its content is not")

	s = openMem(t, crashed, Options{})
	defer s.Close()
	ev, err := s.Append(ctx, id, bigResult("c", 3))
	require.NoError(t, err)
	got, err := s.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, got, 1)
	assert.Equal(t, string(ev.Record), string(got[0].Record))
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}

// digestOf parses the digest from a blob file's path.
func digestOf(t *testing.T, path string) [32]byte {
	t.Helper()
	name := filepath.Base(filepath.Dir(path)) + strings.TrimSuffix(filepath.Base(path), blobExt)
	d, err := parseDigest("sha256:" + name)
	require.NoError(t, err)
	return d
}

// TestBlobThresholdOptions: a negative threshold keeps every record inline;
// a small one moves small records to blobs.
func TestBlobThresholdOptions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		threshold int
		blob      bool
	}{{-1, false}, {0, false}, {10, true}} {
		t.Run(fmt.Sprint(tc.threshold), func(t *testing.T) {
			m, s, id := memSession(t, Options{BlobThreshold: tc.threshold})
			ev, err := s.Append(ctx, id, UserText("a message of some forty bytes"))
			require.NoError(t, err)
			assert.Equal(t, tc.blob, ev.Digest != "")
			assert.Equal(t, tc.blob, len(blobFiles(t, m, id)) == 1)
			big, err := s.Append(ctx, id, bigResult("c", 1))
			require.NoError(t, err)
			assert.Equal(t, tc.threshold >= 0, big.Digest != "")
			require.NoError(t, s.Close())
			s = openMem(t, m, Options{BlobThreshold: tc.threshold})
			defer s.Close()
			path, err := s.Load(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, string(big.Record), string(path[1].Record))
		})
	}
}

// TestLoadReportsFirstBadBlob: Load resolves blobs in parallel, and of
// several damaged ones it reports the first on the path, every time.
func TestLoadReportsFirstBadBlob(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	var paths []string
	for i := range 8 {
		ev, err := s.Append(ctx, id, bigResult(fmt.Sprint("c", i), i))
		require.NoError(t, err)
		d, err := parseDigest(ev.Digest)
		require.NoError(t, err)
		paths = append(paths, blobPath(sessionPath(id), d))
	}
	require.NoError(t, s.Close())
	for _, bad := range []int{3, 7, 5} { // damaged in this order: 3 stays first
		b, err := vfs.ReadFile(m, paths[bad])
		require.NoError(t, err)
		b[len(b)/2] ^= 0x40
		writeMemFile(t, m, paths[bad], b)
	}
	s = openMem(t, m, Options{})
	defer s.Close()
	// Without the index (lazy.go), then with it.
	for _, lazy := range []bool{true, false} {
		if !lazy {
			_, err := s.Tree(ctx, id)
			require.NoError(t, err)
		}
		for range 20 {
			_, err := s.Load(ctx, id)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, paths[3], ce.Path)
		}
		assert.Equal(t, lazy, isLazy(t, s, id))
	}
}

// gateFS holds each operation that hold selects until open is closed,
// reporting it on held first.
type gateFS struct {
	vfs.FS
	hold func(op, name string) bool
	held chan string
	open chan struct{}
}

func newGateFS(hold func(op, name string) bool) *gateFS {
	return &gateFS{FS: vfs.Default, hold: hold, held: make(chan string, 64), open: make(chan struct{})}
}

func (g *gateFS) wait(op, name string) {
	if g.hold(op, name) {
		g.held <- name
		<-g.open
	}
}

func (g *gateFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	g.wait("open", name)
	return g.FS.OpenFile(name, flag, perm)
}

func (g *gateFS) Rename(from, to string) error {
	g.wait("rename", from)
	return g.FS.Rename(from, to)
}

// within runs f and fails the test if it does not return within a minute.
func within[T any](t *testing.T, what string, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return", what)
		panic("unreachable")
	}
}

// TestBlobWriteOutsideMutex: while one append's blob is being written (held
// before its rename), other appends to the session go on and GC keeps the
// blob's temporary file; then the held append completes after them.
func TestBlobWriteOutsideMutex(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	g := newGateFS(func(op, name string) bool {
		return op == "rename" && strings.Contains(name, string(filepath.Separator)+blobsDir+string(filepath.Separator))
	})
	s, err := Open(dir, &Options{fs: g})
	require.NoError(t, err)
	defer s.Close()
	var release sync.Once
	defer release.Do(func() { close(g.open) }) // before Close, which waits for the held append
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	first := apiAppend(t, s, meta.ID, UserText("before"))

	big := make(chan error, 1)
	var bigEv Event
	go func() {
		var err error
		bigEv, err = s.Append(ctx, meta.ID, bigResult("held", 1))
		big <- err
	}()
	tmp := <-g.held // the blob is written to its temporary file; the rename is held
	small := within(t, "an append beside a blob write", func() Event {
		ev, err := s.Append(ctx, meta.ID, UserText("beside"))
		assert.NoError(t, err)
		return ev
	})
	rep := within(t, "GC beside a blob write", func() GCReport {
		rep, err := s.GC(ctx, meta.ID)
		assert.NoError(t, err)
		return rep
	})
	assert.Zero(t, rep.Removed, "GC keeps the temporary file of a blob being written")
	_, err = os.Stat(tmp)
	require.NoError(t, err, "the temporary file is still there")

	release.Do(func() { close(g.open) })
	require.NoError(t, <-big)
	path := mustLoad(t, s, meta.ID)
	require.Len(t, path, 3)
	apiSameEvents(t, []Event{first, small}, path[:2])
	assert.Equal(t, bigEv.ID, path[2].ID, "the held append took its turn when its blob was durable")
	assert.Equal(t, small.ID, path[2].ParentID)
	files, err := filepath.Glob(filepath.Join(dir, sessionsDir, meta.ID.String(), blobsDir, "sha256", "*", "*"))
	require.NoError(t, err)
	require.Len(t, files, 1, "one blob, no temporary file left")
	assert.True(t, strings.HasSuffix(files[0], blobExt))
}

// TestSameBlobAtOnce: appends of the same large record at the same time
// each write their own temporary file, and the session ends up with one
// blob that every event resolves to.
func TestSameBlobAtOnce(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	rec := bigResult("same", 7)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			_, err := s.Append(ctx, id, rec)
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	require.Len(t, blobFiles(t, m, id), 1)
	path, err := s.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, path, 8)
	for _, ev := range path {
		assert.Equal(t, string(path[0].Record), string(ev.Record))
	}
	require.NoError(t, s.Close())
	checkAll(t, m, id, path).Close()
}

// TestBlobDirMadeByOthers: a blob's prefix directory that exists but whose
// name is not durable (made by another append that has not synced its
// parent yet, or by a process that crashed) does not make the blob's name
// depend on it: the first blob in it syncs its parents too.
func TestBlobDirMadeByOthers(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	ev := bigResult("c", 3)
	rec, err := prepareRecord(ev, DefaultMaxRecordSize)
	require.NoError(t, err)
	sub := filepath.Dir(blobPath(sessionPath(id), sha256.Sum256(rec)))
	require.NoError(t, m.MkdirAll(sub, 0o700)) // no directory synced
	got, err := s.Append(ctx, id, ev)
	require.NoError(t, err)

	crashed := m.CrashClone(vfs.KeepSynced, 0)
	s2 := openMem(t, crashed, Options{})
	defer s2.Close()
	path, err := s2.Load(ctx, id)
	require.NoError(t, err, "the acknowledged event and its blob survive")
	require.Len(t, path, 1)
	assert.Equal(t, got.ID, path[0].ID)
	assert.Equal(t, string(got.Record), string(path[0].Record))
}

// TestResolveBadInput: Resolve refuses an event whose Size is out of range
// (a caller's Event is input) and names a session the store does not hold
// as not found, not as corruption of a healthy blob.
func TestResolveBadInput(t *testing.T) {
	ctx := context.Background()
	_, s, id := memSession(t, Options{})
	defer s.Close()
	big, err := s.Append(ctx, id, bigResult("c1", 1))
	require.NoError(t, err)
	ev, err := s.Event(ctx, id, big.ID)
	require.NoError(t, err)
	require.Nil(t, ev.Record, "precondition: unresolved")

	for _, size := range []int64{-1, maxRecordSizeLimit + 1} {
		bad := ev
		bad.Size = size
		_, err := s.Resolve(ctx, id, bad)
		assert.ErrorIs(t, err, ErrInvalidEvent, "size %d", size)
	}
	_, err = s.Resolve(ctx, uuid.Must(uuid.NewV7()), ev)
	assert.ErrorIs(t, err, ErrNotFound)
	assert.NotErrorIs(t, err, ErrCorrupt)
	got, err := s.Resolve(ctx, id, ev)
	require.NoError(t, err)
	assert.JSONEq(t, string(big.Record), string(got.Record))
}

// TestBlobBase64Compressed: base64 data, which zstd's matches do not
// shorten, is stored at under 0.8 of its size: its literals are entropy
// coded (about 6 bits each), not kept raw. Without
// WithAllLitEntropyCompression it was stored at 1.0.
func TestBlobBase64Compressed(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{StringThreshold: -1}) // the record whole, not split

	defer s.Close()
	ev, err := s.Append(ctx, id, base64Result("c1", 1, 1<<20))
	require.NoError(t, err)
	require.NotEmpty(t, ev.Digest)
	files := blobFiles(t, m, id)
	require.Len(t, files, 1)
	info, err := m.Stat(files[0])
	require.NoError(t, err)
	assert.Less(t, float64(info.Size())/float64(ev.Size), 0.8, "stored/raw of %d bytes of base64", ev.Size)
	got, err := s.Resolve(ctx, id, Event{Digest: ev.Digest, Size: ev.Size})
	require.NoError(t, err)
	assert.Equal(t, string(ev.Record), string(got.Record))
}
