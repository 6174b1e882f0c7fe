package sessionstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

const memRoot = "/store"

// openMem opens a store rooted at memRoot on m.
func openMem(t *testing.T, m vfs.FS, o Options) *Store {
	t.Helper()
	o.fs = m
	s, err := Open(memRoot, &o)
	require.NoError(t, err)
	return s
}

// memSession opens a store on a fresh MemFS and creates a session in it.
func memSession(t *testing.T, o Options) (*vfs.MemFS, *Store, uuid.UUID) {
	t.Helper()
	m := vfs.NewMemFS()
	s := openMem(t, m, o)
	meta, err := s.Create(context.Background(), Meta{Name: "crash"})
	require.NoError(t, err)
	return m, s, meta.ID
}

func appendN(t *testing.T, s *Store, id uuid.UUID, n int) []Event {
	t.Helper()
	out := make([]Event, 0, n)
	for i := 0; i < n; i++ {
		ev, err := s.Append(context.Background(), id, UserText(fmt.Sprintf("message %d %s", i, strings.Repeat("x", i%7*20))))
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// zeroTail is chunk.ZeroTail, for tests whose chunk path is named chunk.
var zeroTail = chunk.ZeroTail

// newestChunk returns the path of a session's newest chunk, as a plain
// file name.
func newestChunk(t *testing.T, fsys vfs.FS, id uuid.UUID) string {
	t.Helper()
	chunks, err := listChunks(fsys, sessionPath(id, chunksDir))
	require.NoError(t, err)
	require.NotEmpty(t, chunks)
	return sessionPath(id, chunksDir, chunkName(chunks[len(chunks)-1]))
}

func sessionPath(id uuid.UUID, parts ...string) string {
	return filepath.Join(append([]string{memRoot, sessionsDir, id.String()}, parts...)...)
}

// checkAll reopens fsys and asserts that the session holds exactly want as
// its active path, with HEAD, index and HEAD file consistent.
func checkAll(t *testing.T, fsys vfs.FS, id uuid.UUID, want []Event) *Store {
	t.Helper()
	ctx := context.Background()
	s := openMem(t, fsys, Options{ChunkSize: 512})
	got, err := s.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i].ID, got[i].ID)
		assert.Equal(t, string(want[i].Record), string(got[i].Record))
	}
	head, err := s.Head(ctx, id)
	require.NoError(t, err)
	if len(want) > 0 {
		assert.Equal(t, want[len(want)-1].ID, head)
		// Reconciliation already rewrote the HEAD file.
		onDisk, exists, err := readHeadFile(fsys, sessionPath(id, headfile.Name))
		require.NoError(t, err)
		assert.True(t, exists)
		assert.Equal(t, head, onDisk)
	}
	assert.Equal(t, len(want), indexedOnDisk(t, fsys, id))
	return s
}

// indexedOnDisk returns how many index entries a session holds on disk:
// the lines of index.jsonl plus those embedded in sealed chunks. It fails
// the test if index.jsonl has a line of a sealed chunk or a bad line.
func indexedOnDisk(t *testing.T, fsys vfs.FS, id uuid.UUID) int {
	t.Helper()
	dir := sessionPath(id, chunksDir)
	forms, _, err := chunkForms(fsys, dir)
	require.NoError(t, err)
	n := 0
	scan, err := index.Read(fsys, sessionPath(id, indexName), func(e *entry, _ int64) error {
		assert.False(t, forms[e.Loc.Chunk].sealed, "index.jsonl holds a line of sealed chunk %d", e.Loc.Chunk)
		n++
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, int64(-1), scan.Bad, "index.jsonl has a bad line")
	for c, f := range forms {
		if f.sealed {
			es, _, err := sealedIndex(fsys, dir, c)
			require.NoError(t, err)
			n += len(es)
		}
	}
	return n
}

// TestCrashWithoutClose simulates power loss after acknowledged appends:
// only synced data survives, so the index and HEAD must be rebuilt.
func TestCrashWithoutClose(t *testing.T) {
	for _, mode := range []vfs.CrashMode{vfs.KeepSynced, vfs.KeepAll, vfs.KeepRandom} {
		t.Run(fmt.Sprint(mode), func(t *testing.T) {
			m, s, id := memSession(t, Options{ChunkSize: 512})
			evs := appendN(t, s, id, 25)
			clone := m.CrashClone(mode, 7)
			s2 := checkAll(t, clone, id, evs)
			// The session keeps working after recovery.
			more := appendN(t, s2, id, 3)
			require.NoError(t, s2.Close())
			checkAll(t, clone, id, append(evs, more...)).Close()
		})
	}
}

// TestReconcileIndexDamage damages the index in the ways a crash can and
// checks it is rebuilt from the chunks.
func TestReconcileIndexDamage(t *testing.T) {
	cases := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"missing", func([]byte) []byte { return nil }},
		{"torn last line", func(b []byte) []byte { return b[:len(b)-40] }},
		{"last lines lost", func(b []byte) []byte { return b[:bytes.Index(b, []byte("\n"))+1] }},
		{"zero tail", func(b []byte) []byte { return append(b, make([]byte, 300)...) }},
		{"zero hole", func(b []byte) []byte {
			// The first 100 bytes of the last line, inside the data.
			i := bytes.LastIndex(b[:len(b)-1], []byte("\n")) + 1
			copy(b[i:], make([]byte, 100))
			return b
		}},
		{"garbage tail", func(b []byte) []byte { return append(b, "{\"id\":\"nonsense\"}\n"...) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, s, id := memSession(t, Options{ChunkSize: 512, keepPlainOnClose: true})
			evs := appendN(t, s, id, 12)
			require.NoError(t, s.Close())
			path := sessionPath(id, indexName)
			b, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			writeMemFile(t, m, path, tc.damage(b))
			checkAll(t, m, id, evs).Close()
		})
	}
}

func writeMemFile(t *testing.T, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}

// fiveEventChunk makes a closed session of five events in one chunk and
// returns its filesystem, id, events, the chunk's path and its bytes.
func fiveEventChunk(t *testing.T) (*vfs.MemFS, uuid.UUID, []Event, string, []byte) {
	t.Helper()
	m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
	evs := appendN(t, s, id, 5)
	require.NoError(t, s.Close())
	chunk := sessionPath(id, chunksDir, chunkName(0))
	b, err := vfs.ReadFile(m, chunk)
	require.NoError(t, err)
	return m, id, evs, chunk, b
}

// TestReconcileTornChunkTail adds the kinds of tail a crash leaves after the
// last record and checks they are cut and kept aside, with no record lost.
func TestReconcileTornChunkTail(t *testing.T) {
	tails := map[string][]byte{
		"half record":          []byte(`{"id":"01a039f0-fd62-7000-8000-000000000005","parent_id":"01a0`),
		"record no newline":    nil, // filled below with a whole valid-looking line minus its newline
		"zeros with newline":   append(make([]byte, 100), '\n'),
		"garbage then newline": []byte("\x01\x02garbage\n"),
	}
	for name, tail := range tails {
		t.Run(name, func(t *testing.T) {
			m, id, evs, chunk, b := fiveEventChunk(t)
			if tail == nil {
				// A complete record whose newline never reached the disk.
				line := encodeEvent(nil, &Event{ID: uuid.New(), ParentID: evs[4].ID, Kind: KindMessage, Role: RoleUser, Record: []byte(`{}`)})
				tail = line[:len(line)-1]
			}
			writeMemFile(t, m, chunk, append(bytes.Clone(b), tail...))
			reopened := checkAll(t, m, id, evs)
			after, err := vfs.ReadFile(m, chunk) // before Close, which seals the chunk
			require.NoError(t, err)
			require.NoError(t, reopened.Close())
			assert.Equal(t, b, after, "chunk is cut back to its last valid record")
			kept, err := vfs.ReadFile(m, fmt.Sprintf("%s.broken-%d", chunk, len(b)))
			require.NoError(t, err)
			assert.Equal(t, tail, kept, "the cut bytes are kept aside")
		})
	}
}

// TestReconcileFreeSpace: zero bytes ending a chunk are free space (a
// preallocated tail), not a torn write: nothing is cut or reported, and
// the next append goes at the end of the data. Zeros followed by data are
// a hole of an unsynced write only when they run to a sector boundary
// (TestReconcileHole); otherwise they are a torn tail like any other.
func TestReconcileFreeSpace(t *testing.T) {
	ctx := context.Background()
	for _, free := range []int{1, 511, 4096, 100000} {
		t.Run(fmt.Sprint(free), func(t *testing.T) {
			m, id, evs, chunk, b := fiveEventChunk(t)
			writeMemFile(t, m, chunk, append(bytes.Clone(b), make([]byte, free)...))

			s := openMem(t, m, Options{ChunkSize: 1 << 20})
			r, err := s.Verify(ctx, id)
			require.NoError(t, err)
			assert.True(t, r.OK(), "%v", r.Problems)
			assert.Empty(t, r.Repairs, "free space needs no repair")
			names, err := m.ReadDir(sessionPath(id, chunksDir))
			require.NoError(t, err)
			assert.Equal(t, []string{chunkName(0)}, names, "nothing is kept aside")
			ev, err := s.Append(ctx, id, UserText("after the free space"))
			require.NoError(t, err)
			require.NoError(t, s.Close())
			after, err := vfs.ReadFile(m, chunk)
			require.NoError(t, err)
			require.True(t, bytes.HasPrefix(after, b))
			assert.Equal(t, byte('{'), after[len(b)], "the next record follows the data")
			assert.Zero(t, zeroTail(after), "closing cuts the free space off")
			checkAll(t, m, id, append(evs, ev)).Close()
		})
	}
}

// TestReconcileHole: after a power loss, a sector of an unsynced write can
// be missing (zeros) while later ones reached the disk. In the newest
// chunk, zeros at the start of an invalid line running to a sector
// boundary are such a hole: the hole and everything after it are a torn
// tail, cut and kept aside, even the valid records after it (they were
// never acknowledged: the write was not synced). Zeros that do not run to
// a sector boundary are a damaged record, reported as corruption.
func TestReconcileHole(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		hole bool
	}{{"to a sector boundary", true}, {"short of a sector boundary", false}} {
		t.Run(tc.name, func(t *testing.T) {
			m, id, evs, chunkPath, b := fiveEventChunk(t)
			// Three more records, as one unsynced write would leave them.
			var tail []byte
			parent := evs[4].ID
			for i := range 3 {
				ev := Event{ID: uuid.Must(uuid.NewV7()), ParentID: parent, Kind: KindMessage, Role: RoleUser, Record: []byte(fmt.Sprintf(`{"n":%d,"pad":%q}`, i, strings.Repeat("p", 300)))}
				tail = encodeEvent(tail, &ev)
				parent = ev.ID
			}
			off := int64(len(b))
			zeros := int(chunk.SectorSize - off%chunk.SectorSize) // to the next boundary
			if !tc.hole {
				zeros--
			}
			require.Less(t, zeros, len(tail)-200, "valid records follow the zeros")
			clear(tail[:zeros])
			writeMemFile(t, m, chunkPath, append(bytes.Clone(b), tail...))

			r, err := openMem(t, m, Options{ReadOnly: true}).Verify(ctx, id)
			require.NoError(t, err)
			if !tc.hole {
				require.False(t, r.OK())
				var ce *CorruptionError
				require.ErrorAs(t, r.Problems[0], &ce)
				assert.Equal(t, chunkPath, ce.Path)
				assert.Equal(t, off, ce.Offset)
				return
			}
			assert.Empty(t, r.Problems)
			require.Len(t, r.Repairs, 1)
			assert.Contains(t, r.Repairs[0], "cut the torn tail")
			reopened := checkAll(t, m, id, evs)
			after, err := vfs.ReadFile(m, chunkPath) // before Close, which seals the chunk
			require.NoError(t, err)
			require.NoError(t, reopened.Close())
			assert.Equal(t, b, after, "chunk is cut back at the hole")
			kept, err := vfs.ReadFile(m, fmt.Sprintf("%s.broken-%d", chunkPath, off))
			require.NoError(t, err)
			assert.Equal(t, tail, kept, "the cut bytes are kept aside")
		})
	}
}

// TestReconcileUnindexedRecordSurvives: a record synced in the chunk but
// whose index line was lost (crash between the two) is indexed on open.
func TestReconcileUnindexedRecordSurvives(t *testing.T) {
	m, s, id := memSession(t, Options{})
	evs := appendN(t, s, id, 3)
	require.NoError(t, s.Close())
	idx := sessionPath(id, indexName)
	b, err := vfs.ReadFile(m, idx)
	require.NoError(t, err)
	lines := bytes.SplitAfter(b, []byte("\n"))
	writeMemFile(t, m, idx, bytes.Join(lines[:1], nil))
	checkAll(t, m, id, evs).Close()
}

// TestReconcileCorruption checks that complete but invalid data is
// reported with its path and offset, never repaired or skipped.
func TestReconcileCorruption(t *testing.T) {
	type setup struct {
		m    *vfs.MemFS
		id   uuid.UUID
		evs  []Event
		locs []location
	}
	cases := []struct {
		name    string
		corrupt func(t *testing.T, st setup) (path string, off int64)
		// The damage is off the active path and the files look clean to
		// a lazy open (lazy.go): Load reads the whole path without error
		// and the first call that loads the index reports it.
		offPath bool
	}{
		{"flipped byte in a middle record of the newest chunk", func(t *testing.T, st setup) (string, int64) {
			// Drop the index so the chunk is scanned; the bad record is
			// followed by valid ones.
			writeMemFile(t, st.m, sessionPath(st.id, indexName), nil)
			last := st.locs[len(st.locs)-1].Chunk
			var target location
			for i, l := range st.locs {
				if l.Chunk == last {
					require.Less(t, i, len(st.locs)-1, "the newest chunk holds two records")
					target = l
					break
				}
			}
			path := sessionPath(st.id, chunksDir, chunkName(last))
			flipByte(t, st.m, path, target.Offset+20)
			return path, target.Offset
		}, false},
		{"flipped byte in a sealed chunk", func(t *testing.T, st setup) (string, int64) {
			writeMemFile(t, st.m, sessionPath(st.id, indexName), nil)
			path := sessionPath(st.id, chunksDir, chunkName(0))
			flipByte(t, st.m, path, st.locs[1].Offset+30)
			return path, st.locs[1].Offset
		}, false},
		{"index entry disagrees with its chunk", func(t *testing.T, st setup) (string, int64) {
			// Rewrite the last index line so it points at another record,
			// with a valid checksum.
			idx := sessionPath(st.id, indexName)
			b, err := vfs.ReadFile(st.m, idx)
			require.NoError(t, err)
			lines := bytes.SplitAfter(b, []byte("\n"))
			lines = lines[:len(lines)-1]
			e, err := eventline.DecodeIndex(bytes.TrimSuffix(lines[len(lines)-1], []byte("\n")))
			require.NoError(t, err)
			e.ID = st.evs[0].ID
			lines[len(lines)-1] = eventline.AppendIndex(nil, &e)
			writeMemFile(t, st.m, idx, bytes.Join(lines, nil))
			return idx, int64(len(b) - len(lines[len(lines)-1]))
		}, false},
		{"index entries do not tile the chunks", func(t *testing.T, st setup) (string, int64) {
			idx := sessionPath(st.id, indexName)
			b, err := vfs.ReadFile(st.m, idx)
			require.NoError(t, err)
			lines := bytes.SplitAfter(b, []byte("\n"))
			e, err := eventline.DecodeIndex(bytes.TrimSuffix(lines[2], []byte("\n")))
			require.NoError(t, err)
			e.Loc.Offset++
			lines[2] = eventline.AppendIndex(nil, &e)
			writeMemFile(t, st.m, idx, bytes.Join(lines, nil))
			return idx, int64(len(lines[0]) + len(lines[1]))
		}, true},
		{"missing chunk file", func(t *testing.T, st setup) (string, int64) {
			path := sessionPath(st.id, chunksDir, chunkName(1))
			require.NoError(t, st.m.Remove(path))
			return path, 0
		}, false},
		// A bad HEAD is not corruption: HEAD is a checkpoint of the log,
		// rebuilt from it (TestReconcileBadHead).
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, s, id := memSession(t, Options{ChunkSize: 700, Compression: CompressionNone})
			evs := appendN(t, s, id, 12)
			var locs []location
			h, err := s.reg.acquire(t.Context(), id, nil)
			require.NoError(t, err)
			for _, e := range h.Entries {
				locs = append(locs, e.Loc)
			}
			s.reg.release(h)
			require.NoError(t, s.Close())
			require.Greater(t, locs[len(locs)-1].Chunk, uint32(1))

			before := m.String()
			wantPath, wantOff := tc.corrupt(t, setup{m: m, id: id, evs: evs, locs: locs})
			damaged := m.String()
			require.NotEqual(t, before, damaged)

			s2 := openMem(t, m, Options{ChunkSize: 700, Compression: CompressionNone})
			defer s2.Close()
			prefix, err := s2.Load(context.Background(), id)
			if tc.offPath {
				require.NoError(t, err)
				assert.Len(t, prefix, len(evs))
				_, err = s2.Tree(context.Background(), id) // loads the index
				require.ErrorIs(t, err, ErrCorrupt)
				prefix, err = s2.Load(context.Background(), id)
			}
			require.Error(t, err)
			// The valid prefix stays readable, returned with the error.
			require.LessOrEqual(t, len(prefix), len(evs))
			for i := range prefix {
				assert.Equal(t, evs[i].ID, prefix[i].ID)
				assert.Equal(t, string(evs[i].Record), string(prefix[i].Record))
			}
			tree, terr := s2.Tree(context.Background(), id)
			assert.ErrorIs(t, terr, ErrCorrupt)
			assert.Len(t, tree, len(prefix))
			assert.ErrorIs(t, err, ErrCorrupt)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, wantPath, ce.Path)
			assert.Equal(t, wantOff, ce.Offset)
			// Nothing was repaired or truncated.
			assert.Equal(t, damaged, m.String())
			// Writes are refused too.
			_, err = s2.Append(context.Background(), id, UserText("after"))
			assert.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func flipByte(t *testing.T, fsys vfs.FS, path string, off int64) {
	t.Helper()
	b, err := vfs.ReadFile(fsys, path)
	require.NoError(t, err)
	b[off] ^= 0x01
	writeMemFile(t, fsys, path, b)
}

// TestReconcileHeadTemp covers an interrupted HEAD replace.
func TestReconcileHeadTemp(t *testing.T) {
	cases := []struct {
		name string
		tmp  func(evs []Event) []byte
	}{
		{"valid temp is finished", func(evs []Event) []byte { return headfile.Encode(evs[len(evs)-1].ID) }},
		{"temp naming an older event", func(evs []Event) []byte { return headfile.Encode(evs[0].ID) }},
		{"torn temp is removed", func([]Event) []byte { return []byte("01a0") }},
		{"temp naming an unknown event is removed", func([]Event) []byte { return headfile.Encode(uuid.New()) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, s, id := memSession(t, Options{})
			evs := appendN(t, s, id, 4)
			require.NoError(t, s.Close())
			writeMemFile(t, m, sessionPath(id, headfile.Name), headfile.Encode(evs[1].ID)) // stale
			writeMemFile(t, m, sessionPath(id, headfile.Temp), tc.tmp(evs))
			writeMemFile(t, m, sessionPath(id, metaFile+".tmp"), []byte(`{"format":1,"na`))
			checkAll(t, m, id, evs).Close()
			_, err := m.Stat(sessionPath(id, headfile.Temp))
			assert.ErrorIs(t, err, os.ErrNotExist)
			_, err = m.Stat(sessionPath(id, metaFile+".tmp"))
			assert.ErrorIs(t, err, os.ErrNotExist)
		})
	}
}

// TestWriteFaults injects I/O errors into Append. A failed write leaves no
// trace and the session goes on; a failed sync makes the session refuse
// writes until reopened, and every acknowledged event survives.
func TestWriteFaults(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	ctx := context.Background()
	t.Run("write", func(t *testing.T) {
		m, s, id := memSession(t, Options{JournalSize: -1})
		evs := appendN(t, s, id, 3)
		m.SetFault(func(op vfs.Op, path string) error {
			if op == vfs.OpWrite && strings.HasSuffix(path, chunkExt) {
				return syscall.ENOSPC
			}
			return nil
		})
		_, err := s.Append(ctx, id, UserText("lost"))
		require.Error(t, err)
		assert.ErrorIs(t, err, syscall.ENOSPC)
		m.SetFault(nil)
		more := appendN(t, s, id, 2)
		require.NoError(t, s.Close())
		checkAll(t, m, id, append(evs, more...)).Close()
	})
	t.Run("sync is sticky", func(t *testing.T) {
		m, s, id := memSession(t, Options{JournalSize: -1})
		evs := appendN(t, s, id, 3)
		m.SetFault(func(op vfs.Op, path string) error {
			if op == vfs.OpSync && strings.HasSuffix(path, chunkExt) {
				return syscall.EIO
			}
			return nil
		})
		_, err := s.Append(ctx, id, UserText("maybe"))
		require.ErrorIs(t, err, syscall.EIO)
		m.SetFault(nil)
		_, err = s.Append(ctx, id, UserText("refused"))
		assert.ErrorIs(t, err, ErrSessionFailed)
		_, err = s.UpdateMeta(ctx, id, func(m *Meta) { m.Name = "x" })
		assert.ErrorIs(t, err, ErrSessionFailed)
		// Acknowledged events stay readable, and only they: the record
		// of the failed sync is not published.
		got, err := s.Load(ctx, id)
		require.NoError(t, err)
		assertSameEvents(t, evs, got)
		clone := m.CrashClone(vfs.KeepSynced, 1)
		require.NoError(t, s.Close())
		checkAll(t, clone, id, evs).Close()
	})
	t.Run("index write failure acknowledges the durable event", func(t *testing.T) {
		m, s, id := memSession(t, Options{JournalSize: -1})
		evs := appendN(t, s, id, index.HoldLines-1) // the next line makes the index's batch written
		m.SetFault(func(op vfs.Op, path string) error {
			if op == vfs.OpWrite && strings.HasSuffix(path, indexName) {
				return syscall.EIO
			}
			return nil
		})
		ev, err := s.Append(ctx, id, UserText("durable"))
		require.NoError(t, err)
		m.SetFault(nil)
		_, err = s.Append(ctx, id, UserText("refused"))
		assert.ErrorIs(t, err, ErrSessionFailed)
		require.NoError(t, s.Close())
		checkAll(t, m, id, append(evs, ev)).Close()
	})
}

// TestReconcileCrashDuringRepair fails the k-th mutating operation of a
// reconciliation, crashes, and reconciles again: every crash point must
// recover with no event lost.
func TestReconcileCrashDuringRepair(t *testing.T) {
	t.Parallel() // on files of its own, beside the other parallel tests
	base, s, id := memSession(t, Options{ChunkSize: 512})
	evs := appendN(t, s, id, 20)
	// Crash without Close, then damage: torn chunk tail, stale index.
	crashed := base.CrashClone(vfs.KeepSynced, 0)
	require.NoError(t, s.Close())
	last := newestChunk(t, crashed, id)
	b, err := vfs.ReadFile(crashed, last)
	require.NoError(t, err)
	writeMemFile(t, crashed, last, append(b, `{"id":"torn`...))
	writeMemFile(t, crashed, sessionPath(id, indexName), nil)

	points := 0
	for k := 0; ; k++ {
		m := crashed.CrashClone(vfs.KeepAll, 0)
		n := 0
		m.SetFault(func(op vfs.Op, path string) error {
			switch op {
			case vfs.OpRead, vfs.OpOpen:
				return nil
			}
			n++
			if n == k+1 {
				return syscall.EIO
			}
			return nil
		})
		s := openMem(t, m, Options{ChunkSize: 512})
		_, err := s.Head(context.Background(), id)
		s.Close()
		m.SetFault(nil)
		if err == nil {
			break // reconciliation finished before the k-th operation
		}
		points++
		for _, mode := range []vfs.CrashMode{vfs.KeepSynced, vfs.KeepAll} {
			checkAll(t, m.CrashClone(mode, uint64(k)), id, evs).Close()
		}
	}
	assert.Greater(t, points, 3, "reconciliation performs several mutating steps")
	t.Logf("crash points inside reconciliation: %d", points)
}

// TestLoadReadsOnlyTheActivePath counts bytes read through the seam: with
// ten branches, Load reads exactly the records of the active branch.
func TestLoadReadsOnlyTheActivePath(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	// Plain chunks, so that bytes read are record bytes.
	s := openMem(t, m, Options{ChunkSize: 4096, Compression: CompressionNone})
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	trunk := appendN(t, s, meta.ID, 10)
	for b := 0; b < 10; b++ {
		require.NoError(t, s.Branch(ctx, meta.ID, trunk[len(trunk)-1].ID))
		appendN(t, s, meta.ID, 30)
	}
	require.NoError(t, s.Close())

	counting := vfs.NewCounting(m)
	s = openMem(t, counting, Options{ChunkSize: 4096, Compression: CompressionNone})
	defer s.Close()
	_, err = s.Tree(ctx, meta.ID) // open and load the index
	require.NoError(t, err)
	counting.Reset()
	path, err := s.Load(ctx, meta.ID)
	require.NoError(t, err)
	require.Len(t, path, 40)

	h, err := s.reg.acquire(ctx, meta.ID, nil)
	require.NoError(t, err)
	want := int64(0)
	for _, ev := range path {
		want += int64(h.Entries[h.ByID[ev.ID]].Loc.Length)
	}
	s.reg.release(h)
	var got int64
	for p, st := range counting.Stats() {
		require.Contains(t, p, string(filepath.Separator)+chunksDir+string(filepath.Separator), "Load reads chunk files only")
		got += st.Bytes
	}
	assert.Equal(t, want, got, "bytes read are exactly the active path's records")
	total := int64(0)
	chunks, err := listChunks(m, sessionPath(meta.ID, chunksDir))
	require.NoError(t, err)
	for _, c := range chunks {
		info, err := m.Stat(sessionPath(meta.ID, chunksDir, chunkName(c)))
		require.NoError(t, err)
		total += info.Size()
	}
	assert.Less(t, got*5, total, "the active branch is a small part of the session")
}

// errorsIs is a guard that the corruption error matches through wrapping.
func TestCorruptionErrorWrapping(t *testing.T) {
	err := fmt.Errorf("outer: %w", corruptf("/p", 42, "bad %s", "thing"))
	assert.ErrorIs(t, err, ErrCorrupt)
	var ce *CorruptionError
	require.True(t, errors.As(err, &ce))
	assert.Equal(t, "/p", ce.Path)
	assert.Equal(t, int64(42), ce.Offset)
	assert.Contains(t, err.Error(), "/p at offset 42: bad thing")
}

// TestSealedFooterMetaSizeBounded: a damaged metadata length in a sealed
// chunk's footer, which is checked only when the embedded index is read,
// does not make loading the index allocate in proportion to it before
// the damage is found and reported.
func TestSealedFooterMetaSizeBounded(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	o := Options{ChunkSize: 1 << 20, BlobThreshold: -1}
	s := openMem(t, m, o)
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	evs := make([]Event, 500)
	for i := range evs {
		evs[i] = UserText(fmt.Sprintf("m %d %s", i, strings.Repeat("q", i%50)))
	}
	for range 12 {
		_, err := s.AppendBatch(ctx, meta.ID, evs...)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	path := sessionPath(meta.ID, chunksDir, chunkName(0)+sealedExt)
	b, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	// The footer ends the file; its metadata length is the little-endian
	// u64 at offset 48 (internal/zchunk's layout).
	foot := b[len(b)-zchunk.FooterSize:]
	metaSize := binary.LittleEndian.Uint64(foot[48:56])
	require.Positive(t, metaSize)
	binary.LittleEndian.PutUint64(foot[48:56], 1<<30)
	writeMemFile(t, m, path, b)

	s = openMem(t, m, o)
	defer s.Close()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = s.Tree(ctx, meta.ID)
	runtime.ReadMemStats(&after)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce, "the damage is reported")
	assert.Equal(t, path, ce.Path)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "bytes allocated to load the index")
}

// TestReconcileSyncsUnindexedRecords: a writer whose fdatasync failed (or
// that died before it) left a record in the page cache only. The next
// open finds it after the last index line and names it in index.jsonl and
// HEAD, durably: it must make the chunk durable first, or a power loss
// leaves index and HEAD naming a record that is gone, and the session
// damaged.
func TestReconcileSyncsUnindexedRecords(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	ctx := context.Background()
	m, s, id := memSession(t, Options{JournalSize: -1})
	evs := appendN(t, s, id, 3)
	require.NoError(t, s.Close())

	s1 := openMem(t, m, Options{JournalSize: -1})
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, chunksDir) {
			return errors.New("injected: the writer dies before its fdatasync")
		}
		return nil
	})
	_, err := s1.Append(ctx, id, UserText("never acknowledged"))
	require.Error(t, err)
	m.SetFault(nil)
	_ = s1.Close() // its lock goes, as a dead process's does

	s2 := openMem(t, m, Options{JournalSize: -1}) // reconciles
	got, err := s2.Load(ctx, id)
	require.NoError(t, err)
	require.Len(t, got, len(evs)+1, "the record is in the page cache")
	require.NoError(t, s2.Close())

	c := m.CrashClone(vfs.KeepSynced, 1)
	s3 := openMem(t, c, Options{JournalSize: -1})
	defer s3.Close()
	got, err = s3.Load(ctx, id)
	require.NoError(t, err, "the session opens after the power loss")
	assert.Len(t, got, len(evs)+1, "the record the open indexed was made durable")
	_, err = s3.Append(ctx, id, UserText("writes go on"))
	assert.NoError(t, err)
}

// TestReconcileBadHead: HEAD is a checkpoint of the log, so a HEAD that is
// not an id, or names an event the log does not hold, does not stop the
// session: Verify lists its repair, and an open for writing keeps the bad
// bytes aside in HEAD.broken and rebuilds HEAD from the log. A HEAD that
// is not an id is no problem besides (a reader reads the session); one
// naming an unknown event is also reported as a loss, since HEAD is
// written only for durable events (TestReconcileHeadNamesCutRecord).
func TestReconcileBadHead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		head   []byte
		events int
		lost   bool // reported as a loss of acknowledged events
	}{
		{"garbage", []byte("not a head\n"), 5, false},
		{"empty file", []byte{}, 5, false},
		{"unknown event", headfile.Encode(uuid.MustParse("01a0ffff-0000-7000-8000-00000000dead")), 5, true},
		{"garbage in a session without events", []byte("\x00\x01"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			m, s, id := memSession(t, Options{})
			evs := appendN(t, s, id, tc.events)
			require.NoError(t, s.Close())
			headPath := sessionPath(id, headfile.Name)
			writeMemFile(t, m, headPath, tc.head)
			damaged := m.String()

			// A reader ignores the HEAD file: the log says what HEAD is.
			r, _ := roOpen(t, memRoot, Options{fs: m})
			path, err := r.Load(ctx, id)
			require.NoError(t, err)
			assert.Len(t, path, tc.events)
			rep, err := r.Verify(ctx, id)
			require.NoError(t, err)
			if tc.lost {
				require.Len(t, rep.Problems, 1)
				assert.Contains(t, rep.Problems[0].Error(), "acknowledged events were lost, or HEAD is damaged")
				assert.True(t, rep.Repairable(), "the repairs make the session whole again")
			} else {
				assert.True(t, rep.OK(), "a HEAD that is not an id is no problem: %v", rep.Problems)
			}
			wantOnDisk, _ := headfile.Decode(tc.head) // what the HEAD file names, if anything
			assert.Equal(t, wantOnDisk, rep.HeadOnDisk)
			require.Len(t, rep.Repairs, 1)
			assert.Contains(t, rep.Repairs[0], "keep HEAD aside in HEAD.broken")
			assert.Equal(t, damaged, m.String(), "reading and verifying write nothing")

			// The writer's repair, reported by Repair.
			w := openMem(t, m, Options{})
			done, err := w.Repair(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, rep.Repairs, done)
			require.NoError(t, w.Close())
			kept, err := vfs.ReadFile(m, sessionPath(id, headfile.Broken))
			require.NoError(t, err)
			assert.Equal(t, tc.head, kept, "the bad HEAD's bytes are kept aside")
			if tc.events == 0 {
				_, err := m.Stat(headPath)
				assert.ErrorIs(t, err, os.ErrNotExist, "HEAD of a session without events is removed")
			}
			s2 := checkAll(t, m, id, evs)
			rep, err = s2.Verify(ctx, id)
			require.NoError(t, err)
			assert.True(t, rep.OK(), "%v", rep.Problems)
			assert.Empty(t, rep.Repairs)
			done, err = s2.Repair(ctx, id)
			require.NoError(t, err)
			assert.Empty(t, done, "nothing left to repair")
			require.NoError(t, s2.Close())
		})
	}
}

// TestReconcileLostTail: the last records of a closed session damaged
// (their bytes changed or cut short, nothing valid after them) although
// the index and HEAD name them: acknowledged events are lost. A reader and
// Verify report the damage, and every intact event still reads without
// error; Verify also lists the repair, which an open for writing makes:
// the damaged end is cut like a torn tail (kept aside), the index lines
// and HEAD that named it are rebuilt, and the session takes appends again.
func TestReconcileLostTail(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lost   int // events damaged at the end
		damage func(b []byte, last location) []byte
	}{
		{"flipped byte in the last record", 1, func(b []byte, last location) []byte {
			b[last.Offset+int64(last.Length)/2] ^= 0x20
			return b
		}},
		{"last record cut short", 1, func(b []byte, last location) []byte {
			return b[:last.Offset+int64(last.Length)/2]
		}},
		{"last two records zeroed", 2, nil}, // filled below
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
			evs := appendN(t, s, id, 6)
			h, err := s.reg.acquire(ctx, id, nil)
			require.NoError(t, err)
			locs := make([]location, len(h.Entries))
			for i, e := range h.Entries {
				locs[i] = e.Loc
			}
			s.reg.release(h)
			require.NoError(t, s.Close())
			chunk := sessionPath(id, chunksDir, chunkName(0))
			b, err := vfs.ReadFile(m, chunk)
			require.NoError(t, err)
			cut := locs[len(locs)-tc.lost].Offset
			damage := tc.damage
			if damage == nil {
				damage = func(b []byte, _ location) []byte {
					clear(b[cut+3 : len(b)-1])
					return b
				}
			}
			bad := damage(bytes.Clone(b), locs[len(locs)-1])
			writeMemFile(t, m, chunk, bad)
			kept := evs[:len(evs)-tc.lost]

			r, _ := roOpen(t, memRoot, Options{fs: m})
			path, err := r.Load(ctx, id)
			require.ErrorIs(t, err, ErrCorrupt, "a reader reports the loss")
			assert.Len(t, path, len(kept))
			for _, ev := range kept {
				got, err := r.Event(ctx, id, ev.ID)
				require.NoError(t, err, "an intact event reads without error in a damaged session")
				assert.Equal(t, string(ev.Record), string(got.Record))
			}
			_, err = r.Event(ctx, id, evs[len(evs)-1].ID)
			assert.ErrorIs(t, err, ErrCorrupt)
			rep, err := r.Verify(ctx, id)
			require.NoError(t, err)
			require.False(t, rep.OK(), "the loss of acknowledged events is a problem")
			require.Len(t, rep.Problems, 1, "reported once: %v", rep.Problems)
			assert.Same(t, rep.Lost, rep.Problems[0])
			assert.True(t, rep.Repairable())
			assert.Contains(t, rep.Problems[0].Error(), fmt.Sprintf("%d acknowledged events lost", tc.lost))
			assert.Equal(t, chunk, rep.Problems[0].Path)
			assert.Equal(t, cut, rep.Problems[0].Offset)
			joined := strings.Join(rep.Repairs, "\n")
			assert.Contains(t, joined, fmt.Sprintf("cut the torn tail of %s at offset %d", chunk, cut))
			assert.Contains(t, joined, fmt.Sprintf("drop the %d index lines", tc.lost))
			assert.Contains(t, joined, "keep HEAD aside")

			w := openMem(t, m, Options{})
			done, err := w.Repair(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, rep.Repairs, done)
			require.NoError(t, w.Close())
			after, err := vfs.ReadFile(m, chunk)
			require.NoError(t, err)
			assert.Equal(t, b[:cut], after, "the chunk is cut where the damage starts")
			aside, err := vfs.ReadFile(m, fmt.Sprintf("%s.broken-%d", chunk, cut))
			require.NoError(t, err)
			assert.Equal(t, bad[cut:len(bad)-zeroTail(bad[cut:])], aside, "the damaged bytes are kept aside")

			s2 := checkAll(t, m, id, kept)
			rep, err = s2.Verify(ctx, id)
			require.NoError(t, err)
			assert.True(t, rep.OK(), "%v", rep.Problems)
			assert.Empty(t, rep.Repairs)
			next, err := s2.Append(ctx, id, UserText("after the repair"))
			require.NoError(t, err)
			assert.Equal(t, kept[len(kept)-1].ID, next.ParentID)
			require.NoError(t, s2.Close())
		})
	}
}

// TestDamageElsewhereHidesNoEvent: in a session that opens damaged (a bad
// record followed by valid ones), every event before the damage reads
// with Event and Resolve without error; one past it is reported with the
// damage, and matches ErrNotFound too.
func TestDamageElsewhereHidesNoEvent(t *testing.T) {
	ctx := t.Context()
	m, s, id := memSession(t, Options{ChunkSize: 1 << 20, BlobThreshold: 64})
	evs := appendN(t, s, id, 3)
	blob, err := s.Append(ctx, id, ToolResultEvent(ToolResult{CallID: "c", Output: strings.Repeat("o", 200)}))
	require.NoError(t, err)
	require.NotEmpty(t, blob.Digest)
	evs = append(evs, blob)
	evs = append(evs, appendN(t, s, id, 3)...)
	h, err := s.reg.acquire(ctx, id, nil)
	require.NoError(t, err)
	bad := h.Entries[5].Loc
	s.reg.release(h)
	require.NoError(t, s.Close())
	// Drop the index so the chunk is scanned, and damage the sixth record:
	// a valid one follows it, so this is corruption, not a torn tail.
	writeMemFile(t, m, sessionPath(id, indexName), nil)
	flipByte(t, m, sessionPath(id, chunksDir, chunkName(0)), bad.Offset+20)

	for _, ro := range []bool{false, true} {
		var st *Store
		if ro {
			st, _ = roOpen(t, memRoot, Options{fs: m})
		} else {
			st = openMem(t, m, Options{})
		}
		_, err := st.Load(ctx, id)
		require.ErrorIs(t, err, ErrCorrupt, "read-only %t: the session is damaged", ro)
		for _, ev := range evs[:5] {
			got, err := st.Event(ctx, id, ev.ID)
			require.NoError(t, err, "read-only %t: intact event %s", ro, ev.ID)
			got, err = st.Resolve(ctx, id, got)
			require.NoError(t, err)
			assert.Equal(t, string(ev.Record), string(got.Record))
		}
		_, err = st.Event(ctx, id, evs[6].ID)
		assert.ErrorIs(t, err, ErrCorrupt, "read-only %t: an event past the damage", ro)
		assert.ErrorIs(t, err, ErrNotFound)
		if !ro {
			require.NoError(t, st.Close())
		}
	}
}
