package sessionstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// lockedHandle returns the open handle of a session with its mutex held.
func lockedHandle(t *testing.T, s *Store, id uuid.UUID) *openSession {
	t.Helper()
	h, _ := s.reg.tab.Get(id)
	require.NotNil(t, h, "the session is open")
	h.mu.Lock()
	return h
}

// isLazy reports whether the open handle of a session has no index loaded
// (lazy.go).
func isLazy(t *testing.T, s *Store, id uuid.UUID) bool {
	t.Helper()
	h := lockedHandle(t, s, id)
	defer h.mu.Unlock()
	if h.headEntry != nil {
		require.Empty(t, h.Entries, "a session opened without its index holds no entries")
	}
	return h.headEntry != nil
}

// assertSameEvents compares two paths event by event.
func assertSameEvents(t *testing.T, want, got []Event) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].ID, got[i].ID, "event %d", i)
		assert.Equal(t, want[i].ParentID, got[i].ParentID, "event %d", i)
		assert.Equal(t, want[i].BranchFrom, got[i].BranchFrom, "event %d", i)
		assert.Equal(t, want[i].Kind, got[i].Kind, "event %d", i)
		assert.Equal(t, want[i].Role, got[i].Role, "event %d", i)
		assert.True(t, want[i].Time.Equal(got[i].Time), "event %d", i)
		assert.Equal(t, want[i].Size, got[i].Size, "event %d", i)
		assert.Equal(t, want[i].Digest, got[i].Digest, "event %d", i)
		assert.Equal(t, string(want[i].Record), string(got[i].Record), "event %d", i)
	}
}

// assertHeadAndPath checks that s sees want as the session's active path,
// its last event as HEAD, and whether it holds the session without its
// index.
func assertHeadAndPath(t *testing.T, s *Store, id uuid.UUID, want []Event, lazy bool) {
	t.Helper()
	head, err := s.Head(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, want[len(want)-1].ID, head)
	assert.Equal(t, lazy, isLazy(t, s, id))
	got, err := s.Load(context.Background(), id)
	require.NoError(t, err)
	assertSameEvents(t, want, got)
}

// branchySession writes a session with sealed compressed chunks, batches,
// blobs and three branches, and returns its active path (and the store,
// still open).
func branchySession(t *testing.T, m vfs.FS, o Options) (*Store, uuid.UUID, []Event) {
	t.Helper()
	ctx := context.Background()
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{Name: "branchy"})
	require.NoError(t, err)
	trunk := appendN(t, s, meta.ID, 20)
	big := ToolResultEvent(ToolResult{CallID: "c", Output: strings.Repeat("tool output ", 3000)})
	for b := range 3 {
		require.NoError(t, s.Branch(ctx, meta.ID, trunk[10+b].ID))
		_, err := s.AppendBatch(ctx, meta.ID, UserText("branch"), big, AssistantText("done"))
		require.NoError(t, err)
		appendN(t, s, meta.ID, 15)
	}
	want, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	return s, meta.ID, want
}

// TestLazyOpenLoad: a cleanly closed session opens without its index; Load
// follows the parent locations and returns what the index-based Load
// returned; the first append chains onto HEAD.
func TestLazyOpenLoad(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 2048, BlobThreshold: 1024}
	s, id, want := branchySession(t, m, o)
	require.NoError(t, s.Close())
	chunks, err := listChunks(m, sessionPath(id, chunksDir))
	require.NoError(t, err)
	require.Greater(t, len(chunks), 4, "several chunks")
	forms, _, err := chunkForms(m, sessionPath(id, chunksDir))
	require.NoError(t, err)
	require.True(t, forms[0].sealed, "chunk 0 is sealed, so Load reads compressed chunks too")

	s = openMem(t, m, o)
	defer s.Close()
	head, err := s.Head(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, want[len(want)-1].ID, head)
	assert.True(t, isLazy(t, s, id), "a clean session opens without its index")
	got, err := s.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, want, got)
	full, err := s.FullPath(ctx, id, uuid.Nil)
	require.NoError(t, err)
	assertSameEvents(t, want, full)
	assert.True(t, isLazy(t, s, id), "Load and FullPath from HEAD need no index")

	ev, err := s.Append(ctx, id, UserText("after reopening"))
	require.NoError(t, err)
	assert.False(t, isLazy(t, s, id), "appending holds a partial index, or the whole one if it started a chunk (TestLazyAppend)")
	assert.Equal(t, head, ev.ParentID)
	got, err = s.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, append(want, ev), got)
}

// TestLazyOpenNeedsCleanFiles: each state a normal open would repair, or
// that a lazy open cannot check, takes the normal open, and Load is right
// either way. A read-only store, which repairs nothing and takes HEAD from
// the log, opens lazily also when only the HEAD file or session.json lags,
// and when the log goes on after the last index line (a writer's append in
// progress, or an index line a crash lost): it follows the log to its
// newest record, so that it never shows a stale HEAD.
func TestLazyOpenNeedsCleanFiles(t *testing.T) {
	cases := []struct {
		name         string
		damage       func(t *testing.T, m *vfs.MemFS, id uuid.UUID, path []Event)
		lazy, reader bool // whether a writing and a read-only store open lazily
		// sealed: the session closed as Close leaves it by default, the
		// newest chunk sealed and index.jsonl empty; otherwise with the
		// newest chunk kept plain.
		sealed bool
	}{
		{"clean", func(*testing.T, *vfs.MemFS, uuid.UUID, []Event) {}, true, true, false},
		{"HEAD replace interrupted", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, path []Event) {
			writeMemFile(t, m, sessionPath(id, headfile.Temp), headfile.Encode(path[len(path)-1].ID))
		}, false, true, false},
		{"session.json replace interrupted", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, _ []Event) {
			writeMemFile(t, m, sessionPath(id, metaFile+".tmp"), []byte("{"))
		}, false, true, false},
		{"HEAD behind the log", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, path []Event) {
			writeMemFile(t, m, sessionPath(id, headfile.Name), headfile.Encode(path[len(path)-2].ID))
		}, false, true, false},
		{"last index line lost", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, _ []Event) {
			b, err := vfs.ReadFile(m, sessionPath(id, indexName))
			require.NoError(t, err)
			writeMemFile(t, m, sessionPath(id, indexName), b[:bytes.LastIndexByte(b[:len(b)-1], '\n')+1])
		}, false, true, false},
		{"torn tail after the last record", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, _ []Event) {
			p := newestChunk(t, m, id)
			b, err := vfs.ReadFile(m, p)
			require.NoError(t, err)
			writeMemFile(t, m, p, append(b, `{"id":"torn`...))
		}, false, true, false},
		{"sealing interrupted", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, _ []Event) {
			writeMemFile(t, m, sessionPath(id, chunksDir, chunkName(0)+sealedExt+".tmp"), []byte("partial"))
		}, false, false, false},
		{"sealed newest, clean", func(*testing.T, *vfs.MemFS, uuid.UUID, []Event) {}, true, true, true},
		{"sealed newest, HEAD behind the log", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, path []Event) {
			writeMemFile(t, m, sessionPath(id, headfile.Name), headfile.Encode(path[len(path)-2].ID))
		}, false, true, true},
		{"sealed newest, stale index lines", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, path []Event) {
			writeMemFile(t, m, sessionPath(id, indexName), []byte("{}\n"))
		}, false, false, true},
		{"sealed newest, plain copy left", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, _ []Event) {
			// As a crash between the sealed file's rename and the plain
			// file's removal leaves it: whole, the same records.
			chunks, err := listChunks(m, sessionPath(id, chunksDir))
			require.NoError(t, err)
			src, size, _, err := openChunk(m, sessionPath(id, chunksDir), chunks[len(chunks)-1])
			require.NoError(t, err)
			b := make([]byte, size)
			_, err = src.ReadAt(b, 0)
			require.NoError(t, err)
			require.NoError(t, src.Close())
			writeMemFile(t, m, newestChunk(t, m, id), b)
		}, false, false, true},
	}
	for _, tc := range cases {
		for _, readOnly := range []bool{false, true} {
			name := tc.name
			if readOnly {
				name += "/read-only"
			}
			t.Run(name, func(t *testing.T) {
				m := vfs.NewMemFS()
				o := Options{ChunkSize: 2048, BlobThreshold: 1024, keepPlainOnClose: !tc.sealed}
				s, id, want := branchySession(t, m, o)
				require.NoError(t, s.Close())
				_, err := m.Stat(newestChunk(t, m, id) + sealedExt)
				require.Equal(t, tc.sealed, err == nil, "the newest chunk sealed at Close")
				tc.damage(t, m, id, want)

				lazy := tc.lazy
				if readOnly {
					o.fs, lazy = m, tc.reader
					s, _ = roOpen(t, memRoot, o)
				} else {
					s = openMem(t, m, o)
					defer s.Close()
				}
				assertHeadAndPath(t, s, id, want, lazy)
			})
		}
	}
}

// TestLazyReaderStopsAtDamage: an invalid record after the last index
// line, followed by a valid one, is not a tail a reader can follow: it
// loads the index, whose analysis reports the damage.
func TestLazyReaderStopsAtDamage(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 2048, BlobThreshold: 1024, keepPlainOnClose: true} // a plain newest chunk to damage
	s, id, want := branchySession(t, m, o)
	require.NoError(t, s.Close())
	b, err := vfs.ReadFile(m, sessionPath(id, indexName))
	require.NoError(t, err)
	lines := bytes.SplitAfter(b, []byte("\n"))
	require.Greater(t, len(lines), 3)
	writeMemFile(t, m, sessionPath(id, indexName), bytes.Join(lines[:len(lines)-3], nil)) // the last two lines lost
	bad := want[len(want)-2]
	p := newestChunk(t, m, id)
	data, err := vfs.ReadFile(m, p)
	require.NoError(t, err)
	at := bytes.Index(data, []byte(bad.ID.String()))
	require.Positive(t, at, "precondition: the record is in the newest chunk")
	data[at] ^= 1 // its id: the line no longer checks
	writeMemFile(t, m, p, data)

	o.fs = m
	r, _ := roOpen(t, memRoot, o)
	_, err = r.Head(ctx, id)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.False(t, isLazy(t, r, id))
}

// TestLazyReaderFollowsWriter: a read-only store opens a session without
// its index while its writer is idle, even with the writer still open, and
// after each batch of the writer's appends it finds the new HEAD from the
// log's end and loads the new path; a call that needs the index loads it,
// and later refreshes go on from there.
func TestLazyReaderFollowsWriter(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 2048, BlobThreshold: 1024}
	w, id, _ := branchySession(t, m, o)
	defer w.Close()
	awaitSealing(w, id)
	r, _ := roOpen(t, memRoot, Options{fs: m})
	check := func(lazy bool) {
		t.Helper()
		want, err := w.Load(ctx, id)
		require.NoError(t, err)
		assertHeadAndPath(t, r, id, want, lazy)
	}
	check(true)
	_, err := r.Append(ctx, id, UserText("refused"))
	assert.ErrorIs(t, err, ErrReadOnly)
	assert.True(t, isLazy(t, r, id), "a refused append loads no index")
	for range 3 {
		appendN(t, w, id, 12) // enough to start a chunk
		awaitSealing(w, id)
		// The writer holds up to 64 index lines; a reader whose newest
		// chunk has none indexed yet reads the whole tail instead of
		// following lazily, so the writer writes them out first.
		require.NoError(t, w.Flush(ctx, id))
		check(true)
	}
	_, err = r.Tree(ctx, id)
	require.NoError(t, err)
	assert.False(t, isLazy(t, r, id), "the tree needs the index")
	appendN(t, w, id, 12)
	awaitSealing(w, id)
	check(false)
}

// isPartial reports whether the open handle of a session appends without
// its index (lazy.go).
func isPartial(t *testing.T, s *Store, id uuid.UUID) bool {
	t.Helper()
	h := lockedHandle(t, s, id)
	defer h.mu.Unlock()
	return h.Partial
}

// TestLazyAppend: appends to a session opened without its index chain onto
// HEAD without loading it (single, batched with a blob, concurrent), and
// Load follows them; starting a new chunk, and any call that needs the
// index, loads it; reopened, the session holds the same path, opens
// without its index again and verifies clean.
func TestLazyAppend(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 2048, BlobThreshold: 1024}
	s, id, want := branchySession(t, m, o)
	tree, err := s.Tree(ctx, id)
	require.NoError(t, err)
	offPath := len(tree) - len(want)
	require.NoError(t, s.Close())
	o.ChunkSize = 16 << 10 // room for the appends below in the newest chunk
	s = openMem(t, m, o)
	defer s.Close()
	require.NoError(t, s.Flush(ctx, id), "a barrier with nothing appended")

	ev, err := s.Append(ctx, id, UserText("resumed"))
	require.NoError(t, err)
	assert.Equal(t, want[len(want)-1].ID, ev.ParentID)
	assert.True(t, isPartial(t, s, id), "the first append needs no index")
	want = append(want, ev)
	batch, err := s.AppendBatch(ctx, id, AssistantText("a tool call"),
		ToolResultEvent(ToolResult{CallID: "c", Output: strings.Repeat("blob output ", 200)}))
	require.NoError(t, err)
	require.NotEmpty(t, batch[1].Digest, "precondition: the tool result is a blob")
	want = append(want, batch...)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 3 {
				_, err := s.Append(ctx, id, UserText(fmt.Sprintf("writer %d, %d", g, i)))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	require.True(t, isPartial(t, s, id), "precondition: no new chunk yet")
	got, err := s.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, got, len(want)+12)
	assertSameEvents(t, want, got[:len(want)])
	roChain(t, got)
	head, err := s.Head(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, got[len(got)-1].ID, head)
	assert.True(t, isPartial(t, s, id), "Load and Head need no index")
	want = got

	// Fill the chunk: the append that starts the next one loads the index.
	before, err := s.Revision(ctx, id)
	require.NoError(t, err)
	for {
		ev, err := s.Append(ctx, id, UserText(strings.Repeat("fill ", 40)))
		require.NoError(t, err)
		want = append(want, ev)
		rev, err := s.Revision(ctx, id)
		require.NoError(t, err)
		if rev.Chunk != before.Chunk {
			break
		}
		require.True(t, isPartial(t, s, id))
	}
	assert.False(t, isPartial(t, s, id), "a new chunk loads the index")
	assert.False(t, isLazy(t, s, id))
	got, err = s.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, want, got)
	require.NoError(t, s.Close())

	s = openMem(t, m, o)
	defer s.Close()
	got, err = s.Load(ctx, id)
	require.NoError(t, err)
	assert.True(t, isLazy(t, s, id), "closed cleanly after appending without the index")
	assertSameEvents(t, want, got)
	rep, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Equal(t, len(want)+offPath, rep.Records, "every event on disk once")

	// Any call that needs the index loads it, with the appends' lines.
	ev, err = s.Append(ctx, id, UserText("partial again"))
	require.NoError(t, err)
	require.True(t, isPartial(t, s, id))
	tree, err = s.Tree(ctx, id)
	require.NoError(t, err)
	assert.False(t, isPartial(t, s, id))
	assert.Len(t, tree, len(want)+offPath+1)
	assert.Equal(t, ev.ID, tree[len(tree)-1].ID)
	require.NoError(t, s.Branch(ctx, id, want[len(want)-1].ID))
}

// TestLazyAppendRestoredSelection: a Branch selection survives its session
// being closed to make room; reopened without its index, the session loads
// it before the next append, which becomes a child of the selection.
func TestLazyAppendRestoredSelection(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{MaxOpenSessions: 1})
	defer s.Close()
	a, err := s.Create(ctx, Meta{Name: "a"})
	require.NoError(t, err)
	b, err := s.Create(ctx, Meta{Name: "b"})
	require.NoError(t, err)
	evs := appendN(t, s, a.ID, 3)
	require.NoError(t, s.Branch(ctx, a.ID, evs[0].ID))
	appendN(t, s, b.ID, 1) // closes a to make room
	_, open := s.reg.tab.Get(a.ID)
	require.False(t, open, "precondition: a was closed")

	ev, err := s.Append(ctx, a.ID, UserText("on the selection"))
	require.NoError(t, err)
	assert.Equal(t, evs[0].ID, ev.ParentID)
	assert.Equal(t, evs[0].ID, ev.BranchFrom)
	assert.False(t, isPartial(t, s, a.ID), "the selection needs the index")
	path, err := s.Load(ctx, a.ID)
	require.NoError(t, err)
	require.Len(t, path, 2)
	assert.Equal(t, ev.ID, path[1].ID)
}

// TestLazyLoadCompaction: without the index, Load stops at the newest
// compaction and returns the same context as with it: the compaction, the
// events it keeps (FirstKept to its parent; none when FirstKept is unset
// or not on the path), then the events after it.
func TestLazyLoadCompaction(t *testing.T) {
	cases := []struct {
		name    string
		compact func(t *testing.T, s *Store, id uuid.UUID, evs, other []Event)
	}{
		{"kept tail", func(t *testing.T, s *Store, id uuid.UUID, evs, _ []Event) {
			_, err := s.Compact(t.Context(), id, Compaction{Summary: Summary{Text: "the first 25"}, Head: evs[29].ID, FirstKept: evs[25].ID})
			require.NoError(t, err)
		}},
		{"nothing kept", func(t *testing.T, s *Store, id uuid.UUID, evs, _ []Event) {
			_, err := s.Compact(t.Context(), id, Compaction{Summary: Summary{Text: "all 30"}, Head: evs[29].ID})
			require.NoError(t, err)
		}},
		{"FirstKept off the path", func(t *testing.T, s *Store, id uuid.UUID, _, other []Event) {
			_, err := s.Append(t.Context(), id, NewEvent(KindCompaction, RoleNone, CompactionRecord{Summary: Summary{Text: "by hand"}, FirstKept: other[1].ID}))
			require.NoError(t, err)
		}},
		{"two compactions", func(t *testing.T, s *Store, id uuid.UUID, evs, _ []Event) {
			_, err := s.Compact(t.Context(), id, Compaction{Summary: Summary{Text: "first"}, Head: evs[29].ID, FirstKept: evs[20].ID})
			require.NoError(t, err)
			more := appendN(t, s, id, 4)
			_, err = s.Compact(t.Context(), id, Compaction{Summary: Summary{Text: "second"}, Head: more[3].ID, FirstKept: more[1].ID})
			require.NoError(t, err)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := vfs.NewMemFS()
			o := Options{ChunkSize: 2048, BlobThreshold: 200}
			s := openMem(t, m, o)
			meta, err := s.Create(ctx, Meta{})
			require.NoError(t, err)
			other := appendN(t, s, meta.ID, 3)
			require.NoError(t, s.Branch(ctx, meta.ID, other[0].ID))
			// The active path: other[0], 28 messages, then a blob (in the
			// kept tail): 30 events, HEAD last.
			evs := append(other[:1:1], appendN(t, s, meta.ID, 28)...)
			big, err := s.Append(ctx, meta.ID, ToolResultEvent(ToolResult{CallID: "big", Output: strings.Repeat("o", 500)}))
			require.NoError(t, err)
			require.NotEmpty(t, big.Digest, "a blob")
			evs = append(evs, big)
			tc.compact(t, s, meta.ID, evs, other)
			appendN(t, s, meta.ID, 5)
			want, err := s.Load(ctx, meta.ID)
			require.NoError(t, err)
			require.Equal(t, KindCompaction, want[0].Kind)
			require.NoError(t, s.Close())

			s = openMem(t, m, o)
			defer s.Close()
			_, err = s.Head(ctx, meta.ID)
			require.NoError(t, err)
			require.True(t, isLazy(t, s, meta.ID))
			got, err := s.Load(ctx, meta.ID)
			require.NoError(t, err)
			assertSameEvents(t, want, got)
			assert.True(t, isLazy(t, s, meta.ID), "a compaction needs no index")
		})
	}
}

// TestLazyLoadBadParentLocation: a line whose parent location names
// another record, or a place after the line, is corruption at that line,
// even with a valid checksum.
func TestLazyLoadBadParentLocation(t *testing.T) {
	cases := []struct {
		name string
		loc  func(evs []location) location // the new parent location of the last event
	}{
		{"another record", func(locs []location) location { return locs[1] }},
		{"after the line", func(locs []location) location {
			l := locs[len(locs)-1]
			return location{Chunk: l.Chunk, Offset: l.End(), Length: 10}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, s, id := memSession(t, Options{Compression: CompressionNone})
			appendN(t, s, id, 6)
			h, err := s.reg.acquire(ctx, id, nil)
			require.NoError(t, err)
			var locs []location
			for _, e := range h.Entries {
				locs = append(locs, e.Loc)
			}
			s.reg.release(h)
			require.NoError(t, s.Close())

			// Rewrite the last line with the new parent location, same
			// length, valid checksum.
			last := locs[len(locs)-1]
			path := sessionPath(id, chunksDir, chunkName(last.Chunk))
			b, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			line := b[last.Offset : last.End()-1]
			hd, pl, err := eventline.DecodeEvent(line)
			require.NoError(t, err)
			pl.ParentAt = tc.loc(locs)
			re := eventline.AppendEvent(nil, &hd, pl)
			require.NoError(t, jsonl.Verify(re[:len(re)-1]))
			patched := append(append(bytes.Clone(b[:last.Offset]), re...), b[last.End():]...)
			writeMemFile(t, m, path, patched)
			// The index line keeps the new length, so the lazy open's
			// check of the last record passes.
			idx, err := vfs.ReadFile(m, sessionPath(id, indexName))
			require.NoError(t, err)
			lines := bytes.SplitAfter(idx, []byte("\n"))
			e, err := eventline.DecodeIndex(bytes.TrimSuffix(lines[len(lines)-2], []byte("\n")))
			require.NoError(t, err)
			e.Loc.Length = uint32(len(re))
			lines[len(lines)-2] = eventline.AppendIndex(nil, &e)
			writeMemFile(t, m, sessionPath(id, indexName), bytes.Join(lines, nil))

			s = openMem(t, m, Options{Compression: CompressionNone})
			defer s.Close()
			_, err = s.Load(ctx, id)
			assert.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, path, ce.Path)
			assert.Equal(t, last.Offset, ce.Offset)
			// Verify reports it too, at the same line.
			r, err := s.Verify(ctx, id)
			require.NoError(t, err)
			require.Len(t, r.Problems, 1)
			require.ErrorAs(t, r.Problems[0], &ce)
			assert.Equal(t, path, ce.Path)
			assert.Equal(t, last.Offset, ce.Offset)
			assert.Contains(t, ce.Err.Error(), "names its parent at")
		})
	}
}

// TestLazyLoadReadsAboutThePath: without the index, Load reads the chunks
// only, and about the bytes of the path's records, not the session's.
func TestLazyLoadReadsAboutThePath(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 64 << 10, Compression: CompressionNone}
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	trunk := appendN(t, s, meta.ID, 10)
	for range 10 {
		require.NoError(t, s.Branch(ctx, meta.ID, trunk[len(trunk)-1].ID))
		appendN(t, s, meta.ID, 100)
	}
	h, err := s.reg.acquire(ctx, meta.ID, nil)
	require.NoError(t, err)
	var pathBytes, total int64
	for _, e := range h.Entries {
		total += int64(e.Loc.Length)
	}
	s.reg.release(h)
	require.NoError(t, s.Close())

	counting := vfs.NewCounting(m)
	s = openMem(t, counting, o)
	defer s.Close()
	_, err = s.Head(ctx, meta.ID)
	require.NoError(t, err)
	require.True(t, isLazy(t, s, meta.ID))
	counting.Reset()
	path, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	require.Len(t, path, 110)
	for _, ev := range path {
		pathBytes += int64(len(encodeEvent(nil, &ev))) // about the line, without its parent location
	}
	var read int64
	for p, st := range counting.Stats() {
		require.Contains(t, p, string(filepath.Separator)+chunksDir+string(filepath.Separator), "Load reads chunk files only")
		read += st.Bytes
	}
	t.Logf("read %d bytes for a path of about %d in a session of %d", read, pathBytes, total)
	assert.Less(t, read, 3*pathBytes, "about the path's bytes")
	assert.Less(t, read*4, total, "a small part of the session")
}

// TestFormat1Session opens a session written before lines held parent
// locations (testdata/format1, the events of testdata/format2): it opens with its index, loads as before,
// and new events are written in format 1 so that older builds still read
// it.
func TestFormat1Session(t *testing.T) {
	ctx := context.Background()
	dir := copyFixture(t, "format1")
	s, err := Open(dir, &Options{Compression: CompressionNone})
	require.NoError(t, err)
	defer s.Close()
	want := activePathFixture(t, "format2-active-path.json")
	_, err = s.Head(ctx, goldenSession)
	require.NoError(t, err)
	assert.False(t, isLazy(t, s, goldenSession), "format 1 lines hold no parent locations: the session opens with its index")
	got, err := s.Load(ctx, goldenSession)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].ID, got[i].ID)
		assert.JSONEq(t, string(want[i].Record), string(got[i].Record))
	}

	ev, err := s.Append(ctx, goldenSession, UserText("appended by this build"))
	require.NoError(t, err)
	_, err = s.UpdateMeta(ctx, goldenSession, func(m *Meta) { m.Name = "renamed" })
	require.NoError(t, err)
	require.NoError(t, s.Close())

	sdir := filepath.Join(dir, sessionsDir, goldenSession.String())
	meta, err := os.ReadFile(filepath.Join(sdir, metaFile))
	require.NoError(t, err)
	assert.Contains(t, string(meta), `"format": 1,`, "the session stays format 1")
	chunks, err := listChunks(vfs.Default, filepath.Join(sdir, chunksDir))
	require.NoError(t, err)
	last, err := os.ReadFile(filepath.Join(sdir, chunksDir, chunkName(chunks[len(chunks)-1])))
	require.NoError(t, err)
	assert.Contains(t, string(last), ev.ID.String())
	assert.NotContains(t, string(last), "parent_loc")
}

// TestLazyEndAppendingThenCrash: a session appending without its index
// whose last commit went through the journal ends appending (a Tree
// loads the index), then closes, which has the journal forget its
// records: the chunk must hold them durably by then (the chunk writer's
// Close syncs what the journal holds before the files are closed), or a
// power loss after the close loses acknowledged events.
func TestLazyEndAppendingThenCrash(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{Compression: CompressionNone})
	want := appendN(t, s, id, 3)
	require.NoError(t, s.Close())
	s = openMem(t, m, Options{Compression: CompressionNone})
	ev, err := s.Append(ctx, id, UserText("resumed"))
	require.NoError(t, err)
	require.True(t, isPartial(t, s, id), "precondition: the append needs no index")
	want = append(want, ev)
	_, err = s.Tree(ctx, id)
	require.NoError(t, err)
	require.False(t, isPartial(t, s, id), "precondition: the Tree loaded the index")
	require.NoError(t, s.CloseSession(ctx, id))
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	require.NoError(t, s.Close())

	c := openMem(t, crashed, Options{JournalSize: -1, Compression: CompressionNone})
	defer c.Close()
	got, err := c.Load(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, ids(want), ids(got), "every acknowledged event survives")
}
