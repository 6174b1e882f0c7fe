//go:build unix

package sessionstore

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/uuid"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sparse makes path a sparse file of size bytes (zeros, a few kilobytes
// on disk), after its first keep bytes (-1: all of them).
func sparse(t *testing.T, path string, keep, size int64) {
	t.Helper()
	if keep >= 0 {
		require.NoError(t, os.Truncate(path, keep))
	}
	require.NoError(t, os.Truncate(path, size))
}

// maxSparseAlloc bounds what the calls on a store with a sparse file of
// gigabytes may allocate, all of them together: a store's and a session's
// own needs, far below the file's size.
const maxSparseAlloc = 64 << 20

// TestSparseFilesBoundedMemory: a sparse file of 10 GiB in place of a
// file of a session or of the catalogue costs its readers, read-only or
// writing, no more memory than the file's format allows: every file is
// refused past its limit without being read (session.json, HEAD,
// lanes.json, a blob: a *CorruptionError at the limit's offset), or read
// a line at a time with each line's limit (index.jsonl, the catalogue,
// whose bad lines a writer rebuilds). Opening a session used to size its
// index from index.jsonl's size, grow a line without newline without
// limit, and read HEAD and session.json whole: gigabytes, until the
// process ran out of memory.
func TestSparseFilesBoundedMemory(t *testing.T) {
	ctx := context.Background()
	const size = 10 << 30
	for _, tc := range []struct {
		name  string
		path  func(sdir string) string
		check func(t *testing.T, path string, r *VerifyReport, s *Store, id uuid.UUID)
	}{
		{"index", func(sdir string) string { return filepath.Join(sdir, indexName) }, func(t *testing.T, path string, r *VerifyReport, s *Store, id uuid.UUID) {
			assert.True(t, r.OK(), "index.jsonl is derived: %v", r.Problems)
			assert.Contains(t, r.Repairs, "cut index.jsonl at offset 0, its first invalid line: jsonl: line longer than the format allows: more than 1024 bytes")
		}},
		{"HEAD", func(sdir string) string { return filepath.Join(sdir, headfile.Name) }, func(t *testing.T, path string, r *VerifyReport, s *Store, id uuid.UUID) {
			assert.True(t, r.OK(), "HEAD is a checkpoint: %v", r.Problems)
			require.NotEmpty(t, r.Repairs)
			assert.Contains(t, r.Repairs[len(r.Repairs)-1], "keep HEAD aside in HEAD.broken")
			_, _, err := readHeadFile(s.opts.fs, path)
			corruptAt(t, err, path)
		}},
		{"session.json", func(sdir string) string { return filepath.Join(sdir, metaFile) }, func(t *testing.T, path string, r *VerifyReport, s *Store, id uuid.UUID) {
			reportsProblem(t, r, path)
			_, err := s.Meta(ctx, id)
			corruptAt(t, err, path)
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, int64(maxMetaSize), ce.Offset, "where the file goes past its format")
		}},
		{"lanes.json", func(sdir string) string { return filepath.Join(sdir, lanesFile) }, func(t *testing.T, path string, r *VerifyReport, s *Store, id uuid.UUID) {
			reportsProblem(t, r, path)
			_, err := s.Lanes(ctx, id)
			corruptAt(t, err, path)
		}},
		{"blob", onlyBlob, func(t *testing.T, path string, r *VerifyReport, s *Store, id uuid.UUID) {
			reportsProblem(t, r, path)
			_, err := s.Load(ctx, id)
			corruptAt(t, err, path)
		}},
		{"catalogue snapshot", func(sdir string) string { return filepath.Join(sdir, "..", "..", catalogueName) }, nil},
		{"catalogue log", func(sdir string) string { return filepath.Join(sdir, "..", "..", catalogueLogName) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, id, sdir := hardenStore(t, 3)
			path := filepath.Clean(tc.path(sdir))
			sparse(t, path, 0, size)
			for _, readOnly := range []bool{true, false} {
				s, err := Open(root, &Options{Compression: CompressionNone, ReadOnly: readOnly})
				require.NoError(t, err)
				var r *VerifyReport
				n := allocated(func() {
					r, err = s.Verify(ctx, id)
					require.NoError(t, err)
					_, _ = s.Load(ctx, id)
					_, _ = s.Tree(ctx, id)
					metas, err := s.List(ctx)
					if tc.check == nil {
						require.NoError(t, err)
						require.Len(t, metas, 1)
					}
					_, _ = s.ListRecent(ctx, 5)
				})
				t.Logf("read-only %v: %d bytes allocated", readOnly, n)
				assert.Less(t, n, uint64(maxSparseAlloc), "bytes allocated, read-only %v", readOnly)
				if tc.check != nil && readOnly {
					tc.check(t, path, r, s, id)
				}
				require.NoError(t, s.Close())
			}
		})
	}
}

// TestSparseHeadKeptAsideUnread: a writer keeps a bad HEAD of any size
// aside by moving it, unread, and writes a new one.
func TestSparseHeadKeptAsideUnread(t *testing.T) {
	ctx := context.Background()
	root, id, sdir := hardenStore(t, 3)
	head := filepath.Join(sdir, headfile.Name)
	sparse(t, head, 0, 10<<30)
	s := hardenOpen(t, root, false)
	var repairs []string
	n := allocated(func() {
		var err error
		repairs, err = s.Repair(ctx, id)
		require.NoError(t, err)
	})
	t.Logf("%d bytes allocated", n)
	assert.Less(t, n, uint64(maxSparseAlloc))
	require.NotEmpty(t, repairs)
	info, err := os.Stat(filepath.Join(sdir, headfile.Broken))
	require.NoError(t, err)
	assert.Equal(t, int64(10<<30), info.Size(), "HEAD kept aside whole")
	info, err = os.Stat(head)
	require.NoError(t, err)
	assert.Equal(t, int64(headfile.Size), info.Size(), "a new HEAD")
	r, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, r.OK())
	assert.Empty(t, r.Repairs)
}

// sparseTail is the zeros TestSparseChunkTail puts after the newest
// chunk's lines: twice what the calls may allocate there
// (sparseTail/2), so that reading the tail into memory fails the test.
// The walk over the zeros is what the test spends its time on (a block
// at a time, under the race detector), so it is kept this small.
const sparseTail = 32 << 20

// TestSparseChunkTail: the newest chunk followed by 32 MiB of zeros
// (free space, as far as anything can tell; twice what the calls may
// allocate, so that reading the tail into memory fails the test), or by a
// torn line and then as many zeros, is walked a block at a time: Verify,
// Load and an append cost no more memory than a session's needs, and the
// torn tail is cut with its bytes kept aside (the line, not the zeros),
// streamed.
func TestSparseChunkTail(t *testing.T) {
	ctx := context.Background()
	for _, torn := range []bool{false, true} {
		t.Run(map[bool]string{false: "free space", true: "torn"}[torn], func(t *testing.T) {
			root, id, sdir := hardenStore(t, 3)
			chunk := filepath.Join(sdir, chunksDir, chunkName(0))
			info, err := os.Stat(chunk)
			require.NoError(t, err)
			if torn {
				f, err := os.OpenFile(chunk, os.O_WRONLY|os.O_APPEND, 0)
				require.NoError(t, err)
				_, err = f.WriteString(`{"id":"torn`)
				require.NoError(t, err)
				require.NoError(t, f.Close())
			}
			sparse(t, chunk, -1, sparseTail)
			s := hardenOpen(t, root, false)
			n := allocated(func() {
				r, err := s.Verify(ctx, id)
				require.NoError(t, err)
				assert.True(t, r.OK(), "%v", r.Problems)
				evs, err := s.Load(ctx, id)
				require.NoError(t, err)
				assert.Len(t, evs, 3)
				_, err = s.Append(ctx, id, UserText("after"))
				require.NoError(t, err)
			})
			t.Logf("%d bytes allocated", n)
			assert.Less(t, n, uint64(sparseTail/2), "bytes allocated")
			if torn {
				kept, err := os.ReadFile(chunk + ".broken-" + strconv.FormatInt(info.Size(), 10))
				require.NoError(t, err)
				assert.Equal(t, `{"id":"torn`, string(kept), "the torn line kept, not the zeros")
			}
		})
	}
}

// TestSparseKeptAsideGC: GC scans a kept-aside file of any size for the
// blob digests it names a block at a time.
func TestSparseKeptAsideGC(t *testing.T) {
	ctx := context.Background()
	root, id, sdir := hardenStore(t, 3)
	kept := filepath.Join(sdir, chunksDir, chunkName(0)+".broken-7")
	require.NoError(t, os.WriteFile(kept, nil, 0o600))
	sparse(t, kept, -1, 512<<20)
	s := hardenOpen(t, root, false)
	n := allocated(func() {
		_, err := s.GC(ctx, id)
		require.NoError(t, err)
	})
	t.Logf("%d bytes allocated", n)
	assert.Less(t, n, uint64(maxSparseAlloc), "bytes allocated")
}
