package sessionstore

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/jsonl"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

func TestVerifyClean(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 700})
	evs := appendN(t, s, id, 15)
	require.NoError(t, s.Close())

	s = openMem(t, m, Options{})
	defer s.Close()
	before := m.String()
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Empty(t, r.Repairs)
	assert.Equal(t, len(evs), r.Records)
	assert.Equal(t, len(evs), r.Indexed)
	assert.Greater(t, r.Chunks, 2)
	assert.Equal(t, evs[len(evs)-1].ID, r.Head)
	assert.Equal(t, evs[len(evs)-1].ID, r.HeadOnDisk)
	assert.Equal(t, before, m.String(), "Verify writes nothing")

	_, err = s.Verify(ctx, uuid.New())
	assert.ErrorIs(t, err, ErrNotFound)
}

// TestVerifyRecordBytes: RecordBytes counts the records' lines, while
// ChunkBytes is what the files take, with the active chunk's preallocated
// free space.
func TestVerifyRecordBytes(t *testing.T) {
	m, s, id := memSession(t, Options{Compression: CompressionNone})
	defer s.Close()
	appendN(t, s, id, 5)
	b, err := vfs.ReadFile(m, newestChunk(t, m, id))
	require.NoError(t, err)
	data := len(b) - zeroTail(b)
	require.Greater(t, len(b), data, "the active chunk is preallocated")
	r, err := s.Verify(t.Context(), id)
	require.NoError(t, err)
	assert.Equal(t, int64(data), r.RecordBytes)
	assert.Equal(t, int64(len(b)), r.ChunkBytes)
}

// TestVerifyAfterCrash: the leftovers of a crash are repairs, not problems,
// and Verify leaves them for the next open.
func TestVerifyAfterCrash(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{ChunkSize: 700})
	evs := appendN(t, s, id, 10)
	crashed := m.CrashClone(vfs.KeepSynced, 0)
	require.NoError(t, s.Close())
	last := newestChunk(t, crashed, id)
	b, err := vfs.ReadFile(crashed, last)
	require.NoError(t, err)
	writeMemFile(t, crashed, last, append(b, `{"id":"01a0`...))

	v := openMem(t, crashed, Options{})
	before := crashed.String()
	r, err := v.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Equal(t, len(evs), r.Records)
	assert.Less(t, r.Indexed, len(evs), "the index was never synced")
	assert.NotEmpty(t, r.Repairs)
	joined := ""
	for _, rep := range r.Repairs {
		joined += rep + "\n"
	}
	assert.Contains(t, joined, "torn tail")
	assert.Contains(t, joined, "index entries")
	assert.Contains(t, joined, "set HEAD")
	assert.Equal(t, before, crashed.String(), "Verify writes nothing")
	require.NoError(t, v.Close())

	// Opening for writing carries out the repairs; Verify is then clean.
	s2 := checkAll(t, crashed, id, evs)
	defer s2.Close()
	r, err = s2.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK())
	assert.Empty(t, r.Repairs)
}

// TestVerifyLockedSession: Verify takes no lock, so it works beside the
// writer that holds the session.
func TestVerifyLockedSession(t *testing.T) {
	ctx := context.Background()
	m, writer, id := memSession(t, Options{})
	appendN(t, writer, id, 5)
	defer writer.Close()
	other := openMem(t, m, Options{})
	defer other.Close()
	_, err := other.Append(ctx, id, UserText("second writer"))
	require.ErrorIs(t, err, ErrLocked)
	r, err := other.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK(), "%v", r.Problems)
	assert.Equal(t, 5, r.Records)
}

// flipsEnv sizes TestByteFlipDetection; by default it makes one change in
// flipsSample.
const (
	flipsEnv    = "SESSIONSTORE_FLIPS"
	flipsSample = 10
)

// TestByteFlipDetection changes the bytes of a committed session's chunk
// files, one at a time and four ways, and checks that every change is
// detected both by Verify and by reading the events back: with plain
// chunks, and with sealed chunks compressed (frames, embedded index,
// table and footer).
//
// SESSIONSTORE_FLIPS sets the number of changes per compression mode. By
// default a tenth of the possible ones (every byte four ways: about 7,000
// to 7,800), evenly spread over every file, the four ways taking turns, so
// every record, frame and field of three bytes or more is hit. "all", or a
// number at least the possible changes, changes every byte four ways, as
// .ci/run's long step does.
func TestByteFlipDetection(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	for _, mode := range []string{CompressionNone, CompressionZstd} {
		t.Run(mode, func(t *testing.T) {
			ctx := context.Background()
			o := Options{ChunkSize: 900, Compression: mode}
			m, s, id := memSession(t, o)
			evs := appendN(t, s, id, 4)
			require.NoError(t, s.Branch(ctx, id, evs[1].ID))
			evs = append(evs, appendN(t, s, id, 3)...)
			require.NoError(t, s.Close())

			dir := sessionPath(id, chunksDir)
			names, err := m.ReadDir(dir)
			require.NoError(t, err)
			var files []string
			sealed := 0
			for _, name := range names {
				if _, ok := parseChunkName(name); ok {
					files = append(files, filepath.Join(dir, name))
					if strings.HasSuffix(name, sealedExt) {
						sealed++
					}
				}
			}
			require.Greater(t, len(files), 1, "sealed and active chunks are both covered")
			if mode == CompressionZstd {
				require.Equal(t, len(files)-1, sealed, "every full chunk is sealed compressed")
			}

			masks := []byte{0x01, 0x20, 0x80, 0xff}
			origs := make([][]byte, len(files))
			possible := 0
			for i, path := range files {
				origs[i], err = vfs.ReadFile(m, path)
				require.NoError(t, err)
				possible += len(masks) * len(origs[i])
			}
			// Change g of the possible ones (file by file, byte by byte,
			// mask by mask) is made if g*n mod possible < n: n changes,
			// evenly spread, the first included.
			n := min(possible, testSize(t, flipsEnv, (possible+flipsSample-1)/flipsSample, possible))
			var total, byVerify, byRead, g int
			for i, path := range files {
				orig, inFile := origs[i], 0
				for pos := range orig {
					for _, x := range masks {
						made := g*n%possible < n
						g++
						if !made {
							continue
						}
						inFile++
						flipped := m.CrashClone(vfs.KeepAll, 0)
						b := bytes.Clone(orig)
						b[pos] ^= x
						writeMemFile(t, flipped, path, b)
						total++

						v := openMem(t, flipped, o)
						r, err := v.Verify(ctx, id)
						require.NoError(t, err)
						if !r.OK() {
							byVerify++
						}
						if readDetects(ctx, v, id, evs) {
							byRead++
						}
						v.Close()
					}
				}
				require.Positive(t, inFile, "%s: no byte changed", path)
			}
			t.Logf("%s: byte changes: %d of %d possible (every byte four ways) in %d files; detected by Verify: %d (%.2f%%); detected by reading every event: %d (%.2f%%)",
				mode, total, possible, len(files), byVerify, 100*float64(byVerify)/float64(total), byRead, 100*float64(byRead)/float64(total))
			if total < possible {
				t.Logf("a sample: %s=all changes every byte four ways", flipsEnv)
			}
			assert.Equal(t, total, byVerify, "Verify detects every single-byte change")
			assert.Equal(t, total, byRead, "reading detects every single-byte change")
		})
	}
}

// readDetects reports whether reading every event of the session returns
// an error, or data that differs from what was appended.
func readDetects(ctx context.Context, s *Store, id uuid.UUID, evs []Event) bool {
	for _, want := range evs {
		got, err := s.Event(ctx, id, want.ID)
		if err != nil {
			return true
		}
		if got.ParentID != want.ParentID || string(got.Record) != string(want.Record) || !got.Time.Equal(want.Time) || got.Kind != want.Kind || got.Role != want.Role {
			return true
		}
	}
	return false
}

// TestVerifyResealedInvalidRecord: a record that is not valid JSON inside a
// line whose checksum matches (written by some other tool) is corruption
// to Verify, which validates every record, and to the scan that indexes a
// chunk, though Load, trusting the checksum of an indexed line, does not
// parse the record again.
func TestVerifyResealedInvalidRecord(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	evs := appendN(t, s, id, 3)
	require.NoError(t, s.Close())
	chunkPath := sessionPath(id, chunksDir, chunkName(0))
	chunk, err := vfs.ReadFile(m, chunkPath)
	require.NoError(t, err)
	chunk = bytes.TrimRight(chunk, "\x00") // the preallocated free space
	lines := bytes.SplitAfter(chunk, []byte("\n"))
	off := len(lines[0])
	line := lines[1]
	require.Contains(t, string(line), `"message 1 `)
	body := bytes.Replace(line[:len(line)-1-jsonl.SuffixLen], []byte(`"message 1 `), []byte(`"messa"e 1 `), 1)
	resealed := jsonl.Seal(nil, append(body, '}'))
	require.Len(t, resealed, len(line), "same length: the index still locates every record")
	require.NoError(t, jsonl.Verify(resealed[:len(resealed)-1]), "the checksum matches")
	copy(chunk[off:], resealed)
	writeMemFile(t, m, chunkPath, chunk)

	s = openMem(t, m, Options{})
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	require.False(t, r.OK())
	assert.Equal(t, chunkPath, r.Problems[0].Path)
	assert.Equal(t, int64(off), r.Problems[0].Offset)
	assert.Contains(t, r.Problems[0].Error(), "not valid JSON")
	require.NoError(t, s.Close())

	// Without index.jsonl the open scans the chunk and stops at the record.
	require.NoError(t, m.Remove(sessionPath(id, indexName)))
	s = openMem(t, m, Options{})
	defer s.Close()
	path, err := s.Load(ctx, id)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, chunkPath, ce.Path)
	assert.Equal(t, int64(off), ce.Offset)
	require.Len(t, path, 1, "the valid prefix")
	assert.Equal(t, evs[0].ID, path[0].ID)
}

// TestVerifyDamagedRecordInTheMiddle: damaged records in the middle of a
// chunk are reported once, with one problem for the index entries naming
// them and one for the unknown parent of the record after them; the index
// entries after the damage still match their records.
func TestVerifyDamagedRecordInTheMiddle(t *testing.T) {
	for _, tc := range []struct {
		damaged int    // records damaged, from the third on
		entries string // how the index problem names them
	}{
		{1, " names offset "},
		{2, " and the 1 after it name offsets "},
	} {
		t.Run(fmt.Sprint(tc.damaged), func(t *testing.T) {
			ctx := context.Background()
			m, s, id := memSession(t, Options{})
			evs := appendN(t, s, id, 6)
			require.NoError(t, s.Close())
			path := newestChunk(t, m, id)
			b, err := vfs.ReadFile(m, path)
			require.NoError(t, err)
			lines := bytes.SplitAfter(b, []byte("\n"))
			require.Greater(t, len(lines), 2+tc.damaged)
			off := int64(len(lines[0]) + len(lines[1]))
			next := off
			damaged := bytes.Clone(b)
			for i := 2; i < 2+tc.damaged; i++ {
				require.Contains(t, string(lines[i]), evs[i].ID.String())
				damaged[next+int64(len(lines[i]))/2] ^= 0x01
				next += int64(len(lines[i]))
			}
			writeMemFile(t, m, path, damaged)

			v := openMem(t, m, Options{ReadOnly: true})
			defer v.Close()
			r, err := v.Verify(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, len(evs)-tc.damaged, r.Records)
			assert.Equal(t, len(evs), r.Indexed)
			var msgs []string
			for _, p := range r.Problems {
				msgs = append(msgs, p.Error())
				assert.NotContains(t, p.Error(), "disagrees", "entries after the damage match their records")
			}
			require.Len(t, r.Problems, 3, strings.Join(msgs, "\n"))
			assert.Equal(t, path, r.Problems[0].Path)
			assert.Equal(t, off, r.Problems[0].Offset)
			assert.Contains(t, r.Problems[0].Error(), fmt.Sprintf("invalid record followed by a valid one at offset %d", next))
			assert.Equal(t, path, r.Problems[1].Path)
			assert.Equal(t, next, r.Problems[1].Offset)
			assert.Contains(t, r.Problems[1].Error(), "unknown parent "+evs[1+tc.damaged].ID.String())
			assert.Equal(t, filepath.Join(filepath.Dir(filepath.Dir(path)), indexName), r.Problems[2].Path)
			assert.Contains(t, r.Problems[2].Error(), "index entry "+evs[2].ID.String()+tc.entries)
		})
	}
}
