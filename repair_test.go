package sessionstore

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// entryLocs returns the locations of a session's entries, in log order.
func entryLocs(t *testing.T, s *Store, id uuid.UUID) []location {
	t.Helper()
	h, err := s.reg.acquire(context.Background(), id, nil)
	require.NoError(t, err)
	defer s.reg.release(h)
	out := make([]location, len(h.Entries))
	for i, e := range h.Entries {
		out[i] = e.Loc
	}
	return out
}

// lostTailSession makes a closed session of six events in one chunk whose
// last record has a flipped byte (a lost tail), and returns the
// filesystem, the session, the intact events, the chunk's path, the
// offset of the damaged record and the damaged chunk's bytes.
func lostTailSession(t *testing.T) (*vfs.MemFS, uuid.UUID, []Event, string, int64, []byte) {
	t.Helper()
	m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
	evs := appendN(t, s, id, 6)
	locs := entryLocs(t, s, id)
	require.NoError(t, s.Close())
	chunk := sessionPath(id, chunksDir, chunkName(0))
	b, err := vfs.ReadFile(m, chunk)
	require.NoError(t, err)
	last := locs[len(locs)-1]
	b[last.Offset+int64(last.Length)/2] ^= 0x20
	writeMemFile(t, m, chunk, b)
	return m, id, evs[:len(evs)-1], chunk, last.Offset, b
}

// repairCrashLoop fails the k-th mutating operation of the open that
// repairs the session on damaged, for every k until the open succeeds,
// and hands each state a power loss then leaves (every crash mode) to
// check.
func repairCrashLoop(t *testing.T, damaged *vfs.MemFS, id uuid.UUID, check func(t *testing.T, fsys *vfs.MemFS)) int {
	points := 0
	for k := 1; ; k++ {
		m := damaged.CrashClone(vfs.KeepAll, 0)
		f := vfs.FailNth(k, syscall.EIO, vfs.OpWrite, vfs.OpSync, vfs.OpTruncate, vfs.OpRename, vfs.OpRemove, vfs.OpSyncDir, vfs.OpCreate, vfs.OpMkdir)
		m.SetFault(f.Hook)
		s := openMem(t, m, Options{ChunkSize: 1 << 20})
		_, err := s.Head(context.Background(), id)
		s.Close()
		m.SetFault(nil)
		if !f.Fired() {
			require.NoError(t, err)
			break
		}
		points++
		for _, mode := range vfs.CrashModes {
			t.Run(fmt.Sprintf("op%d-%s", k, mode), func(t *testing.T) {
				check(t, m.CrashClone(mode, uint64(k)))
			})
		}
	}
	return points
}

// TestLostTailRepairCrashSafe cuts power at every mutating
// operation of the open that repairs a lost tail (cut, index rewrite,
// HEAD.broken, HEAD): the next open must recover with every intact event,
// Verify clean, and the damaged bytes kept in <chunk>.broken-<offset>.
func TestLostTailRepairCrashSafe(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	// The per-session commit (JournalSize -1): what its chunk holds
	// after a crash is what this test cuts, repairs or checks.
	damaged, id, kept, chunk, cut, bad := lostTailSession(t)
	points := repairCrashLoop(t, damaged, id, func(t *testing.T, fsys *vfs.MemFS) {
		ctx := context.Background()
		s := openMem(t, fsys, Options{JournalSize: -1, ChunkSize: 1 << 20})
		defer s.Close()
		got, err := s.Load(ctx, id)
		require.NoError(t, err, "the writer's open repairs the lost tail")
		require.Len(t, got, len(kept))
		for i := range kept {
			assert.Equal(t, kept[i].ID, got[i].ID)
		}
		rep, err := s.Verify(ctx, id)
		require.NoError(t, err)
		assert.True(t, rep.OK(), "%v", rep.Problems)
		assert.Empty(t, rep.Repairs)
		aside, err := vfs.ReadFile(fsys, fmt.Sprintf("%s.broken-%d", chunk, cut))
		require.NoError(t, err, "the damaged bytes are kept aside")
		assert.Equal(t, bad[cut:len(bad)-zeroTail(bad)], aside)
	})
	assert.Greater(t, points, 5)
}

// TestBadHeadRepairCrashSafe does the same for a HEAD that is not
// an id: every crash state recovers, with HEAD rebuilt and its bytes in
// HEAD.broken.
func TestBadHeadRepairCrashSafe(t *testing.T) {
	// The per-session commit (JournalSize -1): what its chunk holds
	// after a crash is what this test cuts, repairs or checks.
	m, s, id := memSession(t, Options{JournalSize: -1, ChunkSize: 1 << 20})
	evs := appendN(t, s, id, 4)
	require.NoError(t, s.Close())
	garbage := []byte("not a head at all\n")
	writeMemFile(t, m, sessionPath(id, headfile.Name), garbage)
	points := repairCrashLoop(t, m, id, func(t *testing.T, fsys *vfs.MemFS) {
		checkAll(t, fsys, id, evs).Close()
		kept, err := vfs.ReadFile(fsys, sessionPath(id, headfile.Broken))
		require.NoError(t, err)
		assert.Equal(t, garbage, kept)
	})
	assert.Greater(t, points, 3)
}

// TestLostTailKeptAfterNextCut: the lost tail's bytes (acknowledged
// events) are kept in <chunk>.broken-<offset>; when a later torn append at
// the same offset is cut, its bytes go to a new file beside it and the
// first copy stays.
func TestLostTailKeptAfterNextCut(t *testing.T) {
	ctx := context.Background()
	m, id, kept, chunk, cut, bad := lostTailSession(t)
	s := openMem(t, m, Options{ChunkSize: 1 << 20})
	done, err := s.Repair(ctx, id)
	require.NoError(t, err)
	require.NotEmpty(t, done)
	aside := fmt.Sprintf("%s.broken-%d", chunk, cut)
	saved, err := vfs.ReadFile(m, aside)
	require.NoError(t, err)
	require.Equal(t, bad[cut:len(bad)-zeroTail(bad)], saved)
	require.NoError(t, s.Close())

	// The next append is torn by a crash: its bytes are at offset cut.
	b, err := vfs.ReadFile(m, chunk)
	require.NoError(t, err)
	require.Equal(t, cut, int64(len(b)))
	writeMemFile(t, m, chunk, append(b, `{"id":"01a0torn`...))

	s = checkAll(t, m, id, kept)
	defer s.Close()
	after, err := vfs.ReadFile(m, aside)
	require.NoError(t, err)
	assert.True(t, bytes.Contains(after, saved) || anyFileHolds(t, m, sessionPath(id, chunksDir), saved),
		"the lost events' bytes are still kept somewhere after the next cut at the same offset; %s now holds %q", aside, after)
}

// anyFileHolds reports whether a file in dir holds want.
func anyFileHolds(t *testing.T, fsys vfs.FS, dir string, want []byte) bool {
	t.Helper()
	names, err := fsys.ReadDir(dir)
	require.NoError(t, err)
	for _, n := range names {
		b, err := vfs.ReadFile(fsys, dir+"/"+n)
		if err == nil && bytes.Contains(b, want) {
			return true
		}
	}
	return false
}

// TestLostTailWithFreeSpaceCrashSafe is the crash loop for a lost
// tail of a session a writer left open (power cut after its appends):
// the chunk has preallocated free space after the damaged record and no
// HEAD file.
func TestLostTailWithFreeSpaceCrashSafe(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	base, s, id := memSession(t, Options{JournalSize: -1, ChunkSize: 1 << 20})
	evs := appendN(t, s, id, 6)
	locs := entryLocs(t, s, id)
	damaged := base.CrashClone(vfs.KeepAll, 0)
	require.NoError(t, s.Close())
	chunk := sessionPath(id, chunksDir, chunkName(0))
	b, err := vfs.ReadFile(damaged, chunk)
	require.NoError(t, err)
	require.Greater(t, zeroTail(b), 0, "free space follows the records")
	last := locs[len(locs)-1]
	b[last.Offset+3] ^= 0x20
	writeMemFile(t, damaged, chunk, b)
	kept := evs[:len(evs)-1]
	points := repairCrashLoop(t, damaged, id, func(t *testing.T, fsys *vfs.MemFS) {
		checkAll(t, fsys, id, kept).Close()
		aside, err := vfs.ReadFile(fsys, fmt.Sprintf("%s.broken-%d", chunk, last.Offset))
		require.NoError(t, err)
		assert.Equal(t, b[last.Offset:len(b)-zeroTail(b)], aside)
	})
	assert.Greater(t, points, 3)
}

// TestRepairReportsEachRepairOnce: when the reconciliation of a lazily
// opened session fails part-way (an I/O error), the next call reconciles
// again, and Repair reports each repair once, in Verify's words.
func TestRepairReportsEachRepairOnce(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
	appendN(t, s, id, 6)
	require.NoError(t, s.Close())
	// Damage the second index line: the last line is intact, so the
	// session opens without its index, and the index is cut and rebuilt
	// when a call loads it.
	idx := sessionPath(id, indexName)
	b, err := vfs.ReadFile(m, idx)
	require.NoError(t, err)
	second := bytes.IndexByte(b, '\n') + 1
	b[second+10] ^= 0x01
	writeMemFile(t, m, idx, b)

	r, _ := roOpen(t, memRoot, Options{fs: m})
	rep, err := r.Verify(ctx, id)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)
	require.NotEmpty(t, rep.Repairs)

	w := openMem(t, m, Options{ChunkSize: 1 << 20})
	defer w.Close()
	_, err = w.Head(ctx, id) // opens the session without its index
	require.NoError(t, err)
	m.SetFault(vfs.FailNth(1, syscall.EIO, vfs.OpRename).Hook) // the rename of the rewritten index over index.jsonl
	_, err = w.Repair(ctx, id)
	m.SetFault(nil)
	require.Error(t, err, "the index rewrite failed")

	done, err := w.Repair(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, rep.Repairs, done, "each repair reported once")
}

// TestIndexLengthMismatchIsNotALoss: the last index line (valid
// checksum) names its record with a wrong length, while the record is
// whole in the chunk: that is an index entry that disagrees with its chunk
// (corruption), not damaged bytes, and no event is reported lost.
func TestIndexLengthMismatchIsNotALoss(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
	evs := appendN(t, s, id, 6)
	h, err := s.reg.acquire(ctx, id, nil)
	require.NoError(t, err)
	last := h.Entries[len(h.Entries)-1]
	s.reg.release(h)
	require.NoError(t, s.Close())

	idx := sessionPath(id, indexName)
	b, err := vfs.ReadFile(m, idx)
	require.NoError(t, err)
	cutAt := bytes.LastIndexByte(b[:len(b)-1], '\n') + 1
	wrong := last
	wrong.Loc.Length -= 5
	writeMemFile(t, m, idx, eventline.AppendIndex(bytes.Clone(b[:cutAt]), &wrong))

	r, _ := roOpen(t, memRoot, Options{fs: m})
	rep, err := r.Verify(ctx, id)
	require.NoError(t, err)
	require.False(t, rep.OK(), "the index disagrees with its chunk")
	for _, p := range rep.Problems {
		assert.NotContains(t, p.Error(), "acknowledged events lost", "event %s is whole in the chunk", last.ID)
	}

	w := openMem(t, m, Options{ChunkSize: 1 << 20})
	defer w.Close()
	got, err := w.Load(ctx, id)
	t.Logf("writer's Load after the 'loss': %d events, err %v", len(got), err)
	if err == nil {
		assert.Len(t, got, len(evs), "the 'lost' event is there after the repair")
	}
}

// TestHeadNamesCutRecordIsALoss: HEAD is written only for acknowledged
// events. A session closed cleanly (HEAD names e6), whose unsynced
// index.jsonl then lost its last lines in a power loss, and whose last
// record was damaged: the record HEAD names is cut as a torn tail, and
// Verify reports the loss (HEAD names an event the log does not hold)
// besides listing the repair.
func TestHeadNamesCutRecordIsALoss(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
	evs := appendN(t, s, id, 6)
	locs := entryLocs(t, s, id)
	require.NoError(t, s.Close())
	head, _, err := readHeadFile(m, sessionPath(id, headfile.Name))
	require.NoError(t, err)
	require.Equal(t, evs[5].ID, head, "Close checkpointed HEAD")

	idx := sessionPath(id, indexName)
	b, err := vfs.ReadFile(m, idx)
	require.NoError(t, err)
	n := 0
	for i := 0; i < 3; i++ {
		n += bytes.IndexByte(b[n:], '\n') + 1
	}
	writeMemFile(t, m, idx, b[:n]) // the index as a power loss leaves it
	flipByte(t, m, sessionPath(id, chunksDir, chunkName(0)), locs[5].Offset+int64(locs[5].Length)/2)

	r, _ := roOpen(t, memRoot, Options{fs: m})
	rep, err := r.Verify(ctx, id)
	require.NoError(t, err)
	t.Logf("repairs: %q", rep.Repairs)
	assert.False(t, rep.OK(), "HEAD named %s, an acknowledged event the open cuts", evs[5].ID)
}

// TestLostTailSealedChunksCrashSafe: the crash loop for a session of
// several sealed chunks whose newest plain chunk ends in two damaged
// records the index names (a lost tail of two events).
func TestLostTailSealedChunksCrashSafe(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	// The per-session commit (JournalSize -1): what its chunk holds
	// after a crash is what this test cuts, repairs or checks.
	m, s, id := memSession(t, Options{JournalSize: -1, ChunkSize: 512, keepPlainOnClose: true})
	evs := appendN(t, s, id, 30)
	locs := entryLocs(t, s, id)
	for n := len(locs); locs[n-1].Chunk != locs[n-2].Chunk; n = len(locs) {
		evs = append(evs, appendN(t, s, id, 1)...)
		locs = entryLocs(t, s, id)
	}
	require.NoError(t, s.Close())
	n := len(locs)
	require.Equal(t, locs[n-1].Chunk, locs[n-2].Chunk, "the last two records share the newest chunk")
	require.Positive(t, locs[n-1].Chunk)
	forms, _, err := chunkForms(m, sessionPath(id, chunksDir))
	require.NoError(t, err)
	require.True(t, forms[0].sealed)
	chunk := sessionPath(id, chunksDir, chunkName(locs[n-1].Chunk))
	b, err := vfs.ReadFile(m, chunk)
	require.NoError(t, err)
	b[locs[n-2].Offset+5] ^= 0x20
	b[locs[n-1].Offset+5] ^= 0x20
	writeMemFile(t, m, chunk, b)
	kept := evs[:n-2]
	points := repairCrashLoop(t, m, id, func(t *testing.T, fsys *vfs.MemFS) {
		s := openMem(t, fsys, Options{JournalSize: -1, ChunkSize: 512})
		defer s.Close()
		got, err := s.Load(t.Context(), id)
		require.NoError(t, err)
		require.Len(t, got, len(kept))
		assert.Equal(t, kept[len(kept)-1].ID, got[len(got)-1].ID)
		rep, err := s.Verify(t.Context(), id)
		require.NoError(t, err)
		assert.True(t, rep.OK(), "%v", rep.Problems)
		assert.Empty(t, rep.Repairs)
		aside, err := vfs.ReadFile(fsys, fmt.Sprintf("%s.broken-%d", chunk, locs[n-2].Offset))
		require.NoError(t, err)
		assert.Equal(t, b[locs[n-2].Offset:], aside)
	})
	assert.Greater(t, points, 3)
}

// TestDamageHidesNoIntactEvent: in a damaged session whose index lags,
// the events of the valid prefix read without error; intact events after
// the damage are not in the valid prefix and are reported with the damage
// (doc.go, Store.Event).
func TestDamageHidesNoIntactEvent(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
	evs := appendN(t, s, id, 6)
	locs := entryLocs(t, s, id)
	require.NoError(t, s.Close())
	// The index lost its last lines (as a power loss after Close leaves
	// it: index lines are never synced), and the third record is damaged
	// (valid records follow it).
	idx := sessionPath(id, indexName)
	b, err := vfs.ReadFile(m, idx)
	require.NoError(t, err)
	n := bytes.IndexByte(b, '\n') + 1
	n += bytes.IndexByte(b[n:], '\n') + 1
	writeMemFile(t, m, idx, b[:n])
	flipByte(t, m, sessionPath(id, chunksDir, chunkName(0)), locs[2].Offset+int64(locs[2].Length)/2)

	r, _ := roOpen(t, memRoot, Options{fs: m})
	for _, ev := range evs[:2] {
		got, err := r.Event(ctx, id, ev.ID)
		assert.NoError(t, err, "event %s of the valid prefix reads without error", ev.ID)
		assert.Equal(t, string(ev.Record), string(got.Record))
	}
	for _, ev := range []Event{evs[4], evs[5]} {
		_, err := r.Event(ctx, id, ev.ID)
		assert.ErrorIs(t, err, ErrNotFound, "event %s is past the damage: not in the valid prefix", ev.ID)
		assert.ErrorIs(t, err, ErrCorrupt, "and the damage is named")
	}
}

// TestRepairReportsRepairsAfterEviction: repairs this Store made when
// another call opened the session are returned by the next Repair, also
// after the Store closed the idle session to make room (MaxOpenSessions).
func TestRepairReportsRepairsAfterEviction(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	s := openMem(t, m, Options{ChunkSize: 1 << 20})
	a, err := s.Create(ctx, Meta{Name: "a"})
	require.NoError(t, err)
	appendN(t, s, a.ID, 3)
	b, err := s.Create(ctx, Meta{Name: "b"})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	chunk := sessionPath(a.ID, chunksDir, chunkName(0))
	data, err := vfs.ReadFile(m, chunk)
	require.NoError(t, err)
	writeMemFile(t, m, chunk, append(data, `{"id":"torn`...))

	s = openMem(t, m, Options{ChunkSize: 1 << 20, MaxOpenSessions: 1})
	defer s.Close()
	_, err = s.Tree(ctx, a.ID) // opens a: the torn tail is cut
	require.NoError(t, err)
	_, err = s.Head(ctx, b.ID) // opens b, closing a to make room
	require.NoError(t, err)
	done, err := s.Repair(ctx, a.ID)
	require.NoError(t, err)
	assert.NotEmpty(t, done, "the torn tail this Store cut is returned by the first Repair after it")
}

// TestAppendAfterFailedLazyRepair: a session that opened without its
// index needs a repair when a call loads the index (an earlier index line
// is damaged). The repair fails to write the rebuilt index (ENOSPC): the
// session is closed, and the next Append opens it again, repairs it and
// appends; the next open finds it whole.
func TestAppendAfterFailedLazyRepair(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
	evs := appendN(t, s, id, 6)
	require.NoError(t, s.Close())
	idx := sessionPath(id, indexName)
	b, err := vfs.ReadFile(m, idx)
	require.NoError(t, err)
	second := bytes.IndexByte(b, '\n') + 1
	b[second+10] ^= 0x01
	writeMemFile(t, m, idx, b)

	w := openMem(t, m, Options{ChunkSize: 1 << 20})
	_, err = w.Head(ctx, id) // opens without the index
	require.NoError(t, err)
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpWrite && strings.HasPrefix(path, idx) { // or the temporary file it is replaced through
			return syscall.ENOSPC
		}
		return nil
	})
	_, err = w.Repair(ctx, id)
	m.SetFault(nil)
	require.Error(t, err, "the repair could not write the index")

	ev, err := w.Append(ctx, id, UserText("after the failed repair"))
	require.NoError(t, err, "acknowledged")
	require.NoError(t, w.Close())

	s2 := openMem(t, m, Options{ChunkSize: 1 << 20})
	defer s2.Close()
	nodes, err := s2.Tree(ctx, id) // loads the index
	require.NoError(t, err, "the session is not damaged: every record is whole")
	assert.Len(t, nodes, len(evs)+1)
	if len(nodes) > 0 {
		assert.Equal(t, ev.ID, nodes[len(nodes)-1].ID, "the acknowledged append is there")
	}
	_, err = s2.Append(ctx, id, UserText("writes go on"))
	assert.NoError(t, err)
}

// TestRepairsSurviveASecondPowerCut: every repair a writer's open makes is
// durable when the open returns: after a repair and a clean close, a
// power cut (only synced state kept) does not bring the repaired damage
// back. For a
// finished HEAD replace (the directory sync after its rename), a cut torn
// tail (the sync after the truncation), a cut index (replaced: the syncs
// of replaceFile) and index lines a crash lost (appended in place, then
// synced).
func TestRepairsSurviveASecondPowerCut(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, m *vfs.MemFS, id uuid.UUID, evs []Event)
		repair string // in the repair Verify lists before
	}{
		{"interrupted HEAD replace", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, evs []Event) {
			writeMemFile(t, m, sessionPath(id, headfile.Name), headfile.Encode(evs[1].ID)) // older
			writeMemFile(t, m, sessionPath(id, headfile.Temp), headfile.Encode(evs[len(evs)-1].ID))
			require.NoError(t, m.SyncDir(sessionPath(id)))
		}, "finish the interrupted HEAD update"},
		{"torn tail", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, _ []Event) {
			chunk := newestChunk(t, m, id)
			b, err := vfs.ReadFile(m, chunk)
			require.NoError(t, err)
			writeMemFile(t, m, chunk, append(b, `{"id":"01a0`...))
		}, "cut the torn tail"},
		{"invalid index line", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, _ []Event) {
			idx := sessionPath(id, indexName)
			b, err := vfs.ReadFile(m, idx)
			require.NoError(t, err)
			second := bytes.IndexByte(b, '\n') + 1
			b[second+10] ^= 0x01
			writeMemFile(t, m, idx, b)
		}, "its first invalid line"},
		{"index lines lost", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, _ []Event) {
			idx := sessionPath(id, indexName)
			b, err := vfs.ReadFile(m, idx)
			require.NoError(t, err)
			b = b[:bytes.LastIndexByte(b[:len(b)-1], '\n')+1]
			writeMemFile(t, m, idx, b[:bytes.LastIndexByte(b[:len(b)-1], '\n')+1]) // the last two lines
		}, "add 2 index entries rebuilt from the chunks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
			evs := appendN(t, s, id, 5)
			require.NoError(t, s.Close())
			tc.damage(t, m, id, evs)

			w := openMem(t, m, Options{ChunkSize: 1 << 20})
			done, err := w.Repair(ctx, id)
			require.NoError(t, err)
			require.Contains(t, strings.Join(done, "\n"), tc.repair, "precondition: the open repairs it")
			require.NoError(t, w.Close())

			cut := m.CrashClone(vfs.KeepSynced, 0)
			r, _ := roOpen(t, memRoot, Options{fs: cut})
			rep, err := r.Verify(ctx, id)
			require.NoError(t, err)
			assert.True(t, rep.OK(), "%v", rep.Problems)
			// Index lines are never synced in steady state, so the cut
			// may leave them to rebuild; never the repair made before.
			assert.NotContains(t, strings.Join(rep.Repairs, "\n"), tc.repair, "the repair was durable")
			path, err := r.Load(ctx, id)
			require.NoError(t, err)
			assert.Len(t, path, len(evs))
		})
	}
}
