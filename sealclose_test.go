package sessionstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// chunkFiles returns the names in a session's chunks directory.
func chunkFiles(t *testing.T, fsys vfs.FS, id uuid.UUID) []string {
	t.Helper()
	names, err := fsys.ReadDir(sessionPath(id, chunksDir))
	require.NoError(t, err)
	return names
}

// appendKiB appends n user messages of about kib KiB each.
func appendKiB(t *testing.T, s *Store, id uuid.UUID, n, kib int) []Event {
	t.Helper()
	var out []Event
	for i := range n {
		ev, err := s.Append(context.Background(), id, UserText(fmt.Sprintf("%d %s", i, strings.Repeat("log line\n", kib*1024/9))))
		require.NoError(t, err)
		out = append(out, ev)
	}
	return out
}

// TestCloseSealsActiveChunk: a Close seals an active chunk of at least
// sealOnCloseMin, leaves index.jsonl empty, and the session opens again
// without its index (HEAD found in the sealed chunk), for a writer and a
// reader; the next append starts a new chunk, which the next Close seals
// too; nothing is left to repair.
func TestCloseSealsActiveChunk(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	evs := appendKiB(t, s, id, 20, 1) // 20 KiB: above sealOnCloseMin
	require.NoError(t, s.Close())
	assert.Equal(t, []string{chunkName(0) + sealedExt}, chunkFiles(t, m, id))
	index, err := vfs.ReadFile(m, sessionPath(id, indexName))
	require.NoError(t, err)
	assert.Empty(t, index, "the sealed chunk embeds its index lines")

	s = openMem(t, m, Options{})
	assertHeadAndPath(t, s, id, evs, true)
	more := appendKiB(t, s, id, 20, 1)
	evs = append(evs, more...)
	require.NoError(t, s.Close())
	assert.Equal(t, []string{chunkName(0) + sealedExt, chunkName(1) + sealedExt}, chunkFiles(t, m, id))

	r := openMem(t, m, Options{ReadOnly: true})
	assertHeadAndPath(t, r, id, evs, true)
	require.NoError(t, r.Close())

	s = openMem(t, m, Options{})
	assertHeadAndPath(t, s, id, evs, true)
	rep, err := s.Verify(ctx, id)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Empty(t, rep.Repairs)
	assert.Equal(t, len(evs), rep.Indexed)
	tree, err := s.Tree(ctx, id)
	require.NoError(t, err)
	assert.Len(t, tree, len(evs))
	require.NoError(t, s.Close())
}

// TestCloseLeavesSmallChunkPlain: below sealOnCloseMin the chunk stays
// plain, and a later visit that takes it past the bound, appending
// without the index to a chunk it did not create, loads the index and
// seals it whole at Close.
func TestCloseLeavesSmallChunkPlain(t *testing.T) {
	m, s, id := memSession(t, Options{})
	evs := appendKiB(t, s, id, 2, 1)
	require.NoError(t, s.Close())
	assert.Equal(t, []string{chunkName(0)}, chunkFiles(t, m, id))

	s = openMem(t, m, Options{})
	assertHeadAndPath(t, s, id, evs, true)
	evs = append(evs, appendKiB(t, s, id, 20, 1)...)
	require.NoError(t, s.Close())
	assert.Equal(t, []string{chunkName(0) + sealedExt}, chunkFiles(t, m, id))

	s = openMem(t, m, Options{})
	assertHeadAndPath(t, s, id, evs, true)
	rep, err := s.Verify(context.Background(), id)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Empty(t, rep.Repairs)
	assert.Equal(t, len(evs), rep.Indexed)
	require.NoError(t, s.Close())
}

// TestCloseSealsNothingUncompressed: with CompressionNone the chunk stays
// plain whatever its size.
func TestCloseSealsNothingUncompressed(t *testing.T) {
	m, s, id := memSession(t, Options{Compression: CompressionNone})
	appendKiB(t, s, id, 40, 1)
	require.NoError(t, s.Close())
	assert.Equal(t, []string{chunkName(0)}, chunkFiles(t, m, id))
}

// TestCloseSealFailureKeepsChunk: a sealing that fails at Close loses
// nothing: the chunk stays plain, the session opens and appends to it.
func TestCloseSealFailureKeepsChunk(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	evs := appendKiB(t, s, id, 20, 1)
	failed := false
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpCreate && strings.HasSuffix(path, sealedExt+".tmp") {
			failed = true
			return errors.New("injected")
		}
		return nil
	})
	require.NoError(t, s.Close(), "sealing saves space; its failure is no Close error")
	m.SetFault(nil)
	require.True(t, failed, "Close tried to seal")
	assert.Equal(t, []string{chunkName(0)}, chunkFiles(t, m, id))

	s = openMem(t, m, Options{})
	evs = append(evs, appendKiB(t, s, id, 1, 1)...)
	got, err := s.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, evs, got)
	require.NoError(t, s.Close())
}

// TestDefaultBlobThreshold: with the production default, tool results of
// 64 KiB stay inline (one write and sync per append, no blob file) and
// one over 1 MiB becomes a blob.
func TestDefaultBlobThreshold(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{BlobThreshold: DefaultBlobThreshold, StringThreshold: -1})
	mid, err := s.Append(ctx, id, ToolResultEvent(ToolResult{CallID: "c1", Output: strings.Repeat("x", 64<<10)}))
	require.NoError(t, err)
	assert.Empty(t, mid.Digest, "64 KiB stays inline")
	assert.Empty(t, blobFiles(t, m, id))
	big, err := s.Append(ctx, id, ToolResultEvent(ToolResult{CallID: "c2", Output: strings.Repeat("y", DefaultBlobThreshold)}))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(big.Digest, "sha256:"), "over 1 MiB is a blob")
	assert.Len(t, blobFiles(t, m, id), 1)
	assert.Equal(t, 1<<20, DefaultBlobThreshold)
	require.NoError(t, s.Close())
}

// TestCloseSealFindsDamage: a session that appended without its index to
// a chunk it did not create loads the index to seal it at Close; when
// that finds damage the lazy open could not see (here, a sealed chunk's
// embedded index), Close writes nothing more: no HEAD over the old one,
// no panic, and the session opens damaged, its valid prefix readable.
func TestCloseSealFindsDamage(t *testing.T) {
	o := Options{ChunkSize: 64 << 10, keepPlainOnClose: true}
	m, s, id := memSession(t, o)
	appendKiB(t, s, id, 70, 1) // chunk 0 sealed when full, chunk 1 plain
	require.NoError(t, s.Close())
	sealed := sessionPath(id, chunksDir, chunkName(0)+sealedExt)
	b, err := vfs.ReadFile(m, sealed)
	require.NoError(t, err)
	footer := b[len(b)-68:]
	metaOff, metaLen := binary.LittleEndian.Uint64(footer[32:]), binary.LittleEndian.Uint64(footer[40:])
	require.NotZero(t, metaLen)
	flipByte(t, m, sealed, int64(metaOff+metaLen/2))
	headBefore, err := vfs.ReadFile(m, sessionPath(id, headfile.Name))
	require.NoError(t, err)

	o.keepPlainOnClose = false
	s = openMem(t, m, o)
	appendKiB(t, s, id, 20, 1)
	h := lockedHandle(t, s, id)
	partial := h.Partial
	h.mu.Unlock()
	require.True(t, partial, "appending without the index to chunk 1, which it did not create")
	assert.NotPanics(t, func() { _ = s.Close() })
	headAfter, err := vfs.ReadFile(m, sessionPath(id, headfile.Name))
	require.NoError(t, err)
	assert.Equal(t, string(headBefore), string(headAfter), "a damaged session's files are not written")
	assert.Equal(t, []string{chunkName(0) + sealedExt, chunkName(1)}, chunkFiles(t, m, id), "nothing sealed")
}

// TestReaderBesideSealingClose: a read-only store that loaded a session
// while its writer appended sees the same events after the writer's Close
// seals the chunk under it, and the events of a later writer after that.
func TestReaderBesideSealingClose(t *testing.T) {
	ctx := context.Background()
	m, w, id := memSession(t, Options{})
	evs := appendKiB(t, w, id, 20, 1)
	r, _ := roOpen(t, memRoot, Options{fs: m})
	defer r.Close()
	got, err := r.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, evs, got)

	require.NoError(t, w.Close())
	_, err = m.Stat(sessionPath(id, chunksDir, chunkName(0)+sealedExt))
	require.NoError(t, err, "the writer's Close sealed chunk 0")
	got, err = r.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, evs, got)

	w = openMem(t, m, Options{})
	evs = append(evs, appendKiB(t, w, id, 2, 1)...)
	got, err = r.Load(ctx, id)
	require.NoError(t, err)
	assertSameEvents(t, evs, got)
	head, err := r.Head(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, evs[len(evs)-1].ID, head)
	require.NoError(t, w.Close())
}
