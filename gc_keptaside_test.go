package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/canonical"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestGCKeepsBlobsOfKeptAsideRecords: a record that a repair cut from the
// end of the log is kept, in "<chunk>.broken-<offset>" or in the
// temporary file of one, and so is its blob: GC keeps a blob such a file
// names, whole or cut short by a tear, though no event does any more,
// and still removes a blob nothing names.
//
// The session: two small events, K (its record a blob), an append whose
// chunk write failed after its blob O was written (an orphan), then L
// (a blob too), the last record of the chunk. Each case takes L out of
// the log another way.
func TestGCKeepsBlobsOfKeptAsideRecords(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// damage changes the closed session's files so that the next open
		// takes L out of the log, and returns the name of the chunk
		// directory's file that then holds L's bytes (as far as they go).
		damage func(t *testing.T, m *vfs.MemFS, id uuid.UUID, chunk, line []byte, l location, k Event) string
		// full says whether that file holds L's digest whole.
		full bool
	}{
		{"lost record kept aside", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, chunk, line []byte, l location, _ Event) string {
			// A flipped byte in L's id: L's index line names a damaged
			// record at the end of the newest chunk, an acknowledged event
			// lost, and the repair cuts it into .broken-<offset>.
			chunk[l.Offset+3] ^= 0x20
			writeMemFile(t, m, sessionPath(id, chunksDir, chunkName(0)), chunk)
			return fmt.Sprintf("%s.broken-%d", chunkName(0), l.Offset)
		}, true},
		{"record torn in its digest", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, chunk, line []byte, l location, _ Event) string {
			// The chunk ends 30 hex digits into L's digest.
			at := bytes.Index(line, []byte(canonical.DigestPrefix)) + len(canonical.DigestPrefix) + 30
			writeMemFile(t, m, sessionPath(id, chunksDir, chunkName(0)), chunk[:l.Offset+int64(at)])
			return fmt.Sprintf("%s.broken-%d", chunkName(0), l.Offset)
		}, false},
		{"temporary file of a cut", func(t *testing.T, m *vfs.MemFS, id uuid.UUID, chunk, line []byte, l location, k Event) string {
			// L was never synced: a repair copied its torn bytes to the
			// temporary file of .broken-<offset> and the power failed, and
			// the crash lost L's bytes in the chunk (the next repair finds
			// no tail to cut). L's index line and HEAD naming it were never
			// written either.
			writeMemFile(t, m, sessionPath(id, chunksDir, chunkName(0)), chunk[:l.Offset])
			idx := sessionPath(id, indexName)
			b, err := vfs.ReadFile(m, idx)
			require.NoError(t, err)
			writeMemFile(t, m, idx, b[:bytes.LastIndexByte(b[:len(b)-1], '\n')+1])
			require.NoError(t, writeHead(m, sessionPath(id), k.ID, 0o600))
			name := fmt.Sprintf("%s.broken-%d.tmp", chunkName(0), l.Offset)
			writeMemFile(t, m, sessionPath(id, chunksDir, name), line[:len(line)-20])
			return name
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, s, id := memSession(t, Options{ChunkSize: 1 << 20})
			appendN(t, s, id, 2)
			k, err := s.Append(ctx, id, bigResult("k", 1))
			require.NoError(t, err)
			m.SetFault(func(op vfs.Op, path string) error {
				if op == vfs.OpWrite && strings.HasSuffix(path, chunkExt) {
					return errors.New("injected")
				}
				return nil
			})
			_, err = s.Append(ctx, id, bigResult("o", 2))
			require.Error(t, err, "the orphan's chunk write fails after its blob was written")
			m.SetFault(nil)
			l, err := s.Append(ctx, id, bigResult("l", 3))
			require.NoError(t, err)
			locs := entryLocs(t, s, id)
			require.NoError(t, s.Close())
			require.Len(t, blobFiles(t, m, id), 3, "precondition: the blobs of K, O and L")
			dk, err := parseDigest(k.Digest)
			require.NoError(t, err)
			dl, err := parseDigest(l.Digest)
			require.NoError(t, err)
			var orphan string
			for _, f := range blobFiles(t, m, id) {
				if f != blobPath(sessionPath(id), dk) && f != blobPath(sessionPath(id), dl) {
					orphan = f
				}
			}
			require.NotEmpty(t, orphan)

			last := locs[len(locs)-1]
			chunk, err := vfs.ReadFile(m, sessionPath(id, chunksDir, chunkName(0)))
			require.NoError(t, err)
			line := chunk[last.Offset:last.End()]
			require.Contains(t, string(line), l.Digest, "precondition: L is the chunk's last record")
			kept := tt.damage(t, m, id, chunk, line, last, k)

			s = openMem(t, m, Options{ChunkSize: 1 << 20})
			defer s.Close()
			_, err = s.Repair(ctx, id)
			require.NoError(t, err)
			_, err = s.Event(ctx, id, l.ID)
			require.ErrorIs(t, err, ErrNotFound, "precondition: no event names L's blob")
			aside, err := vfs.ReadFile(m, sessionPath(id, chunksDir, kept))
			require.NoError(t, err, "precondition: L's bytes are kept aside")
			hexL := strings.TrimPrefix(l.Digest, canonical.DigestPrefix)
			if tt.full {
				require.Contains(t, string(aside), hexL, "precondition: the kept bytes hold L's digest")
			} else {
				require.NotContains(t, string(aside), hexL)
				require.Contains(t, string(aside), canonical.DigestPrefix+hexL[:30], "precondition: the kept bytes hold a torn digest, L's first 30 digits")
			}

			rep, err := s.GC(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, 2, rep.Kept, "K's blob and L's")
			assert.Equal(t, 1, rep.Removed, "the orphan")
			files := blobFiles(t, m, id)
			assert.ElementsMatch(t, []string{blobPath(sessionPath(id), dk), blobPath(sessionPath(id), dl)}, files)
			assert.NotContains(t, files, orphan)
			rec, err := readBlob(m, sessionPath(id), dl, l.Size)
			require.NoError(t, err, "L's blob is whole")
			assert.Equal(t, string(l.Record), string(rec))
			again, err := s.GC(ctx, id)
			require.NoError(t, err)
			assert.Equal(t, GCReport{Kept: 2}, again)
			assert.Len(t, blobFiles(t, m.CrashClone(vfs.KeepSynced, 0), id), 2, "the removal is durable")
		})
	}
}
