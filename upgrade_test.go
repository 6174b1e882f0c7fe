package sessionstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// memFixture copies the fixture root testdata/<name> into a new MemFS at
// memRoot, every file and directory synced.
func memFixture(t testing.TB, name string) *vfs.MemFS {
	t.Helper()
	m := vfs.NewMemFS()
	tree := map[string]string{}
	src := filepath.Join("testdata", name)
	require.NoError(t, filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(src, p)
		tree[filepath.ToSlash(rel)] = string(b)
		return err
	}))
	paths := make([]string, 0, len(tree))
	for p := range tree {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	require.NoError(t, m.MkdirAll(memRoot, 0o700))
	for _, p := range paths {
		full := filepath.Join(memRoot, filepath.FromSlash(p))
		require.NoError(t, m.MkdirAll(filepath.Dir(full), 0o700))
		require.NoError(t, durable.ReplaceFile(m, filepath.Dir(full), filepath.Base(full), []byte(tree[p]), 0o600))
	}
	// Sync every directory, deepest first, so the whole tree is durable.
	var dirs []string
	for _, p := range paths {
		for d := filepath.Dir(filepath.Join(memRoot, filepath.FromSlash(p))); len(d) >= len(memRoot); d = filepath.Dir(d) {
			dirs = append(dirs, d)
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		require.NoError(t, m.SyncDir(d))
	}
	require.NoError(t, m.SyncDir(filepath.Dir(memRoot)))
	return m
}

// setRootCompression rewrites a root's sessionstore.json to say mode, as
// if the root had been created in it.
func setRootCompression(t testing.TB, m vfs.FS, mode string) {
	t.Helper()
	b, err := json.Marshal(rootConfig{Format: rootFormat, Compression: mode})
	require.NoError(t, err)
	require.NoError(t, durable.ReplaceFile(m, memRoot, rootConfigName, append(b, '\n'), 0o600))
}

// format1Sealed returns the format 1 fixture in a zstd root, grown by
// appends in format 1 (on two branches) so that it has several sealed
// chunks, and closed.
func format1Sealed(t testing.TB) *vfs.MemFS {
	t.Helper()
	ctx := context.Background()
	m := memFixture(t, "format1")
	setRootCompression(t, m, CompressionZstd)
	o := deterministic(Options{ChunkSize: 2048, fs: m}) // the same bytes every time
	s, err := Open(memRoot, &o)
	require.NoError(t, err)
	head, err := s.Head(ctx, goldenSession)
	require.NoError(t, err)
	grow := func() {
		for i := range 12 {
			_, err := s.Append(ctx, goldenSession, UserText(fmt.Sprintf("message %d %s", i, strings.Repeat("x", i%7*20))))
			require.NoError(t, err)
		}
	}
	grow()
	require.NoError(t, s.Branch(ctx, goldenSession, head))
	grow()
	require.NoError(t, s.Close())
	forms, _, err := chunkForms(m, sessionPath(goldenSession, chunksDir))
	require.NoError(t, err)
	sealed := 0
	for _, f := range forms {
		if f.sealed {
			sealed++
		}
	}
	require.GreaterOrEqual(t, sealed, 3, "the session has sealed chunks")
	require.Equal(t, 1, sessionFormat(t, m, goldenSession), "it is still format 1")
	return m
}

// sessionFormat returns the format session.json records.
func sessionFormat(t testing.TB, fsys vfs.FS, id uuid.UUID) int {
	t.Helper()
	_, format, err := readMeta(fsys, sessionPath(id), id)
	require.NoError(t, err)
	return format
}

// sessionView is everything a caller can read of a session.
type sessionView struct {
	Meta   Meta
	Head   uuid.UUID
	Load   []Event
	Tree   []Node
	Events []Event // every event, by Event, in Tree's order
	Full   []Event // FullPath to HEAD, blobs resolved
}

func viewSession(t *testing.T, s *Store, id uuid.UUID) sessionView {
	t.Helper()
	ctx := context.Background()
	var v sessionView
	var err error
	v.Meta, err = s.Meta(ctx, id)
	require.NoError(t, err)
	v.Head, err = s.Head(ctx, id)
	require.NoError(t, err)
	v.Load, err = s.Load(ctx, id)
	require.NoError(t, err)
	v.Tree, err = s.Tree(ctx, id)
	require.NoError(t, err)
	for _, n := range v.Tree {
		ev, err := s.Event(ctx, id, n.ID)
		require.NoError(t, err)
		v.Events = append(v.Events, ev)
	}
	v.Full, err = s.FullPath(ctx, id, uuid.Nil)
	require.NoError(t, err)
	return v
}

// chunkLines returns every line of every chunk of a session, reading
// sealed chunks through their logical bytes.
func chunkLines(t *testing.T, fsys vfs.FS, id uuid.UUID) []string {
	t.Helper()
	dir := sessionPath(id, chunksDir)
	nums, err := listChunks(fsys, dir)
	require.NoError(t, err)
	var out []string
	for _, n := range nums {
		src, size, _, err := openChunk(fsys, dir, n)
		require.NoError(t, err)
		b := make([]byte, size)
		_, err = src.ReadAt(b, 0)
		src.Close()
		require.NoError(t, err)
		b = b[:len(b)-chunk.ZeroTail(b)]
		for _, l := range strings.SplitAfter(string(b), "\n") {
			if l != "" {
				out = append(out, l)
			}
		}
	}
	return out
}

// assertFormat2Lines checks that every line of a session with a parent
// names its parent's location.
func assertFormat2Lines(t *testing.T, fsys vfs.FS, id uuid.UUID) {
	t.Helper()
	lines := chunkLines(t, fsys, id)
	require.NotEmpty(t, lines)
	for _, l := range lines {
		h, pl, err := eventline.ReadEvent([]byte(strings.TrimSuffix(l, "\n")))
		require.NoError(t, err)
		if h.ParentID != uuid.Nil {
			assert.NotZero(t, pl.ParentAt.Length, "line of %s names its parent's location", h.ID)
		}
	}
}

// sealedForms counts a session's chunks by form.
func sealedForms(t *testing.T, fsys vfs.FS, id uuid.UUID) (plain, sealed int) {
	t.Helper()
	forms, _, err := chunkForms(fsys, sessionPath(id, chunksDir))
	require.NoError(t, err)
	for _, f := range forms {
		require.False(t, f.plain && f.sealed, "no chunk in both forms")
		if f.sealed {
			sealed++
		} else {
			plain++
		}
	}
	return plain, sealed
}

// sessionBlobBytes returns the bytes of every blob file of a session.
func sessionBlobBytes(t *testing.T, fsys vfs.FS, id uuid.UUID) map[string]string {
	t.Helper()
	out := map[string]string{}
	root := sessionPath(id, blobsDir, "sha256")
	subs, err := fsys.ReadDir(root)
	require.NoError(t, err)
	for _, sub := range subs {
		names, err := fsys.ReadDir(filepath.Join(root, sub))
		require.NoError(t, err)
		for _, name := range names {
			b, err := vfs.ReadFile(fsys, filepath.Join(root, sub, name))
			require.NoError(t, err)
			out[sub+"/"+name] = string(b)
		}
	}
	return out
}

// TestUpgrade rewrites format 1 sessions as format 2: the plain fixture
// (a blob, three plain chunks) and the fixture grown in a zstd root
// (sealed chunks, two branches). Afterwards every read gives what it gave
// before, every line names its parent's location, session.json says
// format 2, the chunks keep their forms, blobs are untouched, the session
// opens without its index and without repairs, new events are written in
// format 2, and a second Upgrade changes nothing.
func TestUpgrade(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name  string
		fsys  func(t *testing.T) *vfs.MemFS
		opts  Options
		anyZs bool // the session has sealed chunks
	}{
		{"plain chunks", func(t *testing.T) *vfs.MemFS { return memFixture(t, "format1") }, Options{Compression: CompressionNone}, false},
		{"sealed chunks", func(t *testing.T) *vfs.MemFS { return format1Sealed(t) }, Options{ChunkSize: 2048}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := tt.fsys(t)
			s := openMem(t, m, tt.opts)
			before := viewSession(t, s, goldenSession)
			require.NotEmpty(t, before.Load)
			_, err := s.List(ctx) // the catalogue records session.json as it is
			require.NoError(t, err)
			require.NoError(t, s.Close())
			blobs := sessionBlobBytes(t, m, goldenSession)
			require.NotEmpty(t, blobs, "the fixture has a blob")
			plainBefore, sealedBefore := sealedForms(t, m, goldenSession)
			require.Equal(t, tt.anyZs, sealedBefore > 0)

			s = openMem(t, m, tt.opts)
			require.NoError(t, s.Upgrade(ctx, goldenSession))
			require.NoError(t, s.Close())

			assert.Equal(t, formatVersion, sessionFormat(t, m, goldenSession))
			assertFormat2Lines(t, m, goldenSession)
			assert.Equal(t, blobs, sessionBlobBytes(t, m, goldenSession), "blobs untouched")
			plainAfter, sealedAfter := sealedForms(t, m, goldenSession)
			assert.Equal(t, plainBefore, plainAfter, "plain chunks stay plain")
			assert.Equal(t, sealedBefore, sealedAfter, "sealed chunks are sealed again")
			p, err := analyze(m, sessionPath(goldenSession), false, nil)
			require.NoError(t, err)
			require.Nil(t, p.corrupt)
			assert.Empty(t, p.repairs(), "the upgraded files need no repair")

			s = openMem(t, m, tt.opts)
			_, err = s.Head(ctx, goldenSession)
			require.NoError(t, err)
			assert.True(t, isLazy(t, s, goldenSession), "a clean format 2 session opens without its index")
			lazyLoad, err := s.Load(ctx, goldenSession)
			require.NoError(t, err)
			assert.Equal(t, before.Load, lazyLoad, "Load following parent locations")
			after := viewSession(t, s, goldenSession)
			assert.Equal(t, before, after, "every read gives what it gave before")
			metas, err := s.List(ctx)
			require.NoError(t, err)
			assert.Equal(t, []Meta{before.Meta}, metas, "List, through the catalogue")
			r, err := s.Verify(ctx, goldenSession)
			require.NoError(t, err)
			assert.True(t, r.OK(), "%v", r.Problems)

			ev, err := s.Append(ctx, goldenSession, UserText("after the upgrade"))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			lines := chunkLines(t, m, goldenSession)
			last := lines[len(lines)-1]
			assert.Contains(t, last, ev.ID.String())
			assert.Contains(t, last, `"parent_loc":[`, "new events are written in format 2")

			settled := m.String()
			s = openMem(t, m, tt.opts)
			require.NoError(t, s.Upgrade(ctx, goldenSession), "upgrading a format 2 session")
			require.NoError(t, s.Close())
			assert.Equal(t, settled, m.String(), "a second Upgrade writes nothing")
		})
	}
}

// TestUpgradeFixtureOnDisk upgrades a copy of testdata/format1 on the real
// file system, with the session open in the Store (loaded, then appended
// to) when Upgrade is called.
func TestUpgradeFixtureOnDisk(t *testing.T) {
	ctx := context.Background()
	dir := copyFixture(t, "format1")
	s, err := Open(dir, &Options{Compression: CompressionNone})
	require.NoError(t, err)
	defer s.Close()
	_, err = s.Append(ctx, goldenSession, UserText("before the upgrade"))
	require.NoError(t, err)
	before, err := s.Load(ctx, goldenSession)
	require.NoError(t, err)
	require.NoError(t, s.Upgrade(ctx, goldenSession))
	after, err := s.Load(ctx, goldenSession)
	require.NoError(t, err)
	assert.Equal(t, before, after)
	b, err := os.ReadFile(filepath.Join(dir, sessionsDir, goldenSession.String(), metaFile))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"format": 3,`)
	_, err = s.Append(ctx, goldenSession, UserText("after the upgrade"))
	require.NoError(t, err)
	r, err := s.Verify(ctx, goldenSession)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}

// TestUpgradeErrors: what Upgrade refuses, each with its typed error and
// without changing a file.
func TestUpgradeErrors(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		prep func(t *testing.T, m *vfs.MemFS) (*Store, uuid.UUID, func())
		want error
	}{
		{"unknown session", func(t *testing.T, m *vfs.MemFS) (*Store, uuid.UUID, func()) {
			return openMem(t, m, Options{Compression: CompressionNone}), uuid.MustParse("01a02f3f-0000-7000-8000-000000000bad"), nil
		}, ErrNotFound},
		{"read-only store", func(t *testing.T, m *vfs.MemFS) (*Store, uuid.UUID, func()) {
			return openMem(t, m, Options{ReadOnly: true}), goldenSession, nil
		}, ErrReadOnly},
		{"closed store", func(t *testing.T, m *vfs.MemFS) (*Store, uuid.UUID, func()) {
			s := openMem(t, m, Options{Compression: CompressionNone})
			require.NoError(t, s.Close())
			return s, goldenSession, nil
		}, ErrClosed},
		{"held by another writer", func(t *testing.T, m *vfs.MemFS) (*Store, uuid.UUID, func()) {
			other := openMem(t, m, Options{Compression: CompressionNone})
			_, err := other.Head(ctx, goldenSession)
			require.NoError(t, err)
			return openMem(t, m, Options{Compression: CompressionNone}), goldenSession, func() { other.Close() }
		}, ErrLocked},
		{"remote store without the session in its object store", func(t *testing.T, m *vfs.MemFS) (*Store, uuid.UUID, func()) {
			return openMem(t, m, Options{Compression: CompressionNone, Remote: newMemObjects()}), goldenSession, nil
		}, ErrNotFound},
		{"damaged session", func(t *testing.T, m *vfs.MemFS) (*Store, uuid.UUID, func()) {
			// Flip a byte in the middle of the first chunk: a bad record
			// followed by good ones is corruption.
			path := sessionPath(goldenSession, chunksDir, chunkName(0))
			b, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			b[len(b)/2] ^= 0x01
			require.NoError(t, durable.ReplaceFile(m, filepath.Dir(path), filepath.Base(path), b, 0o600))
			require.NoError(t, removeIfExists(m, sessionPath(goldenSession, indexName)))
			return openMem(t, m, Options{Compression: CompressionNone}), goldenSession, nil
		}, ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := memFixture(t, "format1")
			s, id, cleanup := tt.prep(t, m)
			if cleanup != nil {
				defer cleanup()
			}
			defer s.Close()
			before := m.String()
			err := s.Upgrade(ctx, id)
			require.ErrorIs(t, err, tt.want)
			assert.Equal(t, before, m.String(), "nothing changed")
			assert.Equal(t, 1, sessionFormat(t, m, goldenSession))
		})
	}
}

// TestConvertCompression converts a root between the two modes and back:
// chunk forms follow the mode (every chunk but the newest sealed for
// zstd, none for none), sessionstore.json records it, Open in the new
// mode works and in the old one is refused, every session reads as
// before, and a second conversion changes nothing. Sessions of both
// formats are converted, each keeping its format.
func TestConvertCompression(t *testing.T) {
	ctx := context.Background()
	m := memFixture(t, "format1")
	s := openMem(t, m, Options{Compression: CompressionNone, ChunkSize: 2048})
	meta, err := s.Create(ctx, Meta{Name: "format 3"})
	require.NoError(t, err)
	appendN(t, s, meta.ID, 30)
	appendN(t, s, goldenSession, 10)
	require.NoError(t, s.Close()) // checkpoints UpdatedAt
	ids := []uuid.UUID{goldenSession, meta.ID}
	views := map[uuid.UUID]sessionView{}
	s = openMem(t, m, Options{Compression: CompressionNone, ChunkSize: 2048})
	for _, id := range ids {
		views[id] = viewSession(t, s, id)
	}
	require.NoError(t, s.Close())
	formats := map[uuid.UUID]int{goldenSession: 1, meta.ID: formatVersion}

	check := func(t *testing.T, mode string) {
		t.Helper()
		for _, id := range ids {
			plain, sealed := sealedForms(t, m, id)
			if mode == CompressionZstd {
				assert.GreaterOrEqual(t, sealed, 2, "%s: full chunks are sealed", id)
				assert.LessOrEqual(t, plain, 1, "%s: the newest chunk may stay plain", id)
			} else {
				assert.Zero(t, sealed, "%s: no sealed chunk in a root without compression", id)
			}
			assert.Equal(t, formats[id], sessionFormat(t, m, id), "the format is kept")
		}
		s := openMem(t, m, Options{Compression: mode, ChunkSize: 2048})
		for _, id := range ids {
			assert.Equal(t, views[id], viewSession(t, s, id), "%s reads as before", id)
			r, err := s.Verify(ctx, id)
			require.NoError(t, err)
			assert.True(t, r.OK(), "%v", r.Problems)
		}
		require.NoError(t, s.Close())
		other := CompressionNone
		if mode == CompressionNone {
			other = CompressionZstd
		}
		_, err := Open(memRoot, &Options{fs: m, Compression: other})
		assert.ErrorIs(t, err, ErrCompressionMismatch)
	}
	for _, mode := range []string{CompressionZstd, CompressionNone, CompressionZstd} {
		t.Run("to "+mode, func(t *testing.T) {
			require.NoError(t, ConvertCompression(ctx, memRoot, &Options{fs: m, Compression: mode, ChunkSize: 2048}))
			check(t, mode)
			settled := m.String()
			require.NoError(t, ConvertCompression(ctx, memRoot, &Options{fs: m, Compression: mode, ChunkSize: 2048}))
			assert.Equal(t, settled, m.String(), "converting to the root's mode changes nothing")
		})
	}
}

// TestConvertCompressionErrors: a locked session or a damaged one stops
// the conversion with its error, the root keeping its old mode; bad
// options and a missing root are refused.
func TestConvertCompressionErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("locked session", func(t *testing.T) {
		m := memFixture(t, "format1")
		s := openMem(t, m, Options{Compression: CompressionNone})
		defer s.Close()
		_, err := s.Head(ctx, goldenSession)
		require.NoError(t, err)
		err = ConvertCompression(ctx, memRoot, &Options{fs: m, Compression: CompressionZstd})
		require.ErrorIs(t, err, ErrLocked)
		cfg, err := readRootCompression(m, memRoot)
		require.NoError(t, err)
		assert.Equal(t, CompressionNone, cfg, "the root keeps its mode")
	})
	t.Run("no store", func(t *testing.T) {
		m := vfs.NewMemFS()
		require.NoError(t, m.MkdirAll(memRoot, 0o700))
		err := ConvertCompression(ctx, memRoot, &Options{fs: m})
		assert.ErrorIs(t, err, ErrNoStore)
	})
	t.Run("bad options", func(t *testing.T) {
		m := memFixture(t, "format1")
		for _, o := range []*Options{
			{fs: m, Compression: "lz4"},
			{fs: m, ReadOnly: true},
			{fs: m, Remote: newMemObjects()},
		} {
			err := ConvertCompression(ctx, memRoot, o)
			require.Error(t, err)
			assert.True(t, errorIsAny(err, ErrInvalidOptions, ErrReadOnly, ErrRemoteUnsupported), "%v", err)
		}
	})
}

func errorIsAny(err error, targets ...error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// TestConvertCompressionStragglers: a root whose mode is none but which
// holds sealed chunks (sealed by a Store that had it open in zstd while a
// conversion ran) has them unsealed by a conversion to none, its own mode,
// and reads as before.
func TestConvertCompressionStragglers(t *testing.T) {
	ctx := context.Background()
	m := memFixture(t, "format1")
	setRootCompression(t, m, CompressionZstd)
	s := openMem(t, m, Options{ChunkSize: 2048})
	appendN(t, s, goldenSession, 20)
	require.NoError(t, s.Close())
	setRootCompression(t, m, CompressionNone)
	_, sealed := sealedForms(t, m, goldenSession)
	require.Positive(t, sealed, "chunks sealed in the other mode")
	s = openMem(t, m, Options{Compression: CompressionNone})
	want := viewSession(t, s, goldenSession)
	require.NoError(t, s.Close())

	require.NoError(t, ConvertCompression(ctx, memRoot, &Options{fs: m, Compression: CompressionNone}))
	_, sealed = sealedForms(t, m, goldenSession)
	assert.Zero(t, sealed)
	s = openMem(t, m, Options{Compression: CompressionNone})
	defer s.Close()
	assert.Equal(t, want, viewSession(t, s, goldenSession))
}

// BenchmarkUpgrade upgrades the format 1 fixture grown to several sealed
// chunks (format1Sealed) on MemFS: the cost of reading, re-encoding and
// resealing, per event.
func BenchmarkUpgrade(b *testing.B) {
	ctx := context.Background()
	base := format1Sealed(b)
	open := func(m *vfs.MemFS) *Store {
		s, err := Open(memRoot, &Options{ChunkSize: 2048, fs: m})
		require.NoError(b, err)
		return s
	}
	s := open(base.CrashClone(vfs.KeepSynced, 0))
	nodes, err := s.Tree(ctx, goldenSession)
	require.NoError(b, err)
	require.NoError(b, s.Close())
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		s := open(base.CrashClone(vfs.KeepSynced, 0))
		b.StartTimer()
		if err := s.Upgrade(ctx, goldenSession); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		s.Close()
		b.StartTimer()
	}
	b.ReportMetric(float64(len(nodes)*b.N)/b.Elapsed().Seconds(), "events/s")
}

// TestUpgradeWhileAppending: appends of this Store running while Upgrade
// rewrites the session wait for it (Options.WaitForLock) and are kept:
// afterwards the session is format 2 and holds every acknowledged event,
// those appended before the upgrade in format 1 lines rewritten, those
// after it in format 2.
func TestUpgradeWhileAppending(t *testing.T) {
	ctx := context.Background()
	m := memFixture(t, "format1")
	s := openMem(t, m, Options{Compression: CompressionNone, WaitForLock: true, ChunkSize: 4096})
	defer s.Close()
	done := make(chan []Event)
	go func() {
		var acked []Event
		for i := range 40 {
			ev, err := s.Append(ctx, goldenSession, UserText(fmt.Sprintf("concurrent %d", i)))
			if err != nil {
				t.Errorf("append %d: %v", i, err)
				break
			}
			acked = append(acked, ev)
		}
		done <- acked
	}()
	require.NoError(t, s.Upgrade(ctx, goldenSession))
	acked := <-done
	require.Len(t, acked, 40)
	require.NoError(t, s.Close())

	assert.Equal(t, formatVersion, sessionFormat(t, m, goldenSession))
	assertFormat2Lines(t, m, goldenSession)
	s2 := openMem(t, m, Options{Compression: CompressionNone})
	defer s2.Close()
	got, err := s2.Load(ctx, goldenSession)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(got), len(acked))
	tail := got[len(got)-len(acked):]
	for i := range acked {
		assert.Equal(t, acked[i].ID, tail[i].ID)
		assert.Equal(t, string(acked[i].Record), string(tail[i].Record))
	}
	r, err := s2.Verify(ctx, goldenSession)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
}
