package sessionstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// restoreOpts are the options of the stores of the restore tests: small
// chunks, so that a session has sealed chunks and a plain one, which
// stays plain at Close.
func restoreOpts(obj ObjectStore) Options {
	o := *remoteOpts(obj)
	o.ChunkSize = 4 << 10
	o.keepPlainOnClose = true
	return o
}

// restoreWorkload writes a session to obj from a store on a MemFS of its
// own, then restores it into the new MemFS it returns: a second store
// loads it (downloading the sealed chunks the path crosses, rebuilding
// the plain one from its data objects) and closes, the release recording
// in remote.json that the local files hold the log. The session has
// sealed chunks and a plain one, or with sealed false a plain one only.
// It returns the texts of the session's events.
func restoreWorkload(t *testing.T, obj *memObjects, sealed bool) (m *vfs.MemFS, id uuid.UUID, want []string) {
	t.Helper()
	ctx := context.Background()
	o := restoreOpts(obj)
	a := openMem(t, vfs.NewMemFS(), o)
	meta, err := a.Create(ctx, Meta{Name: "restored"})
	require.NoError(t, err)
	n := 40
	if !sealed {
		n = 5
	}
	for i := range n {
		want = append(want, fmt.Sprintf("event %d %s", i, strings.Repeat("r", 60+i%5*40)))
		apiAppend(t, a, meta.ID, textEv(want[i]))
	}
	require.NoError(t, a.Close())

	m = vfs.NewMemFS()
	b := openMem(t, m, o)
	require.Equal(t, want, loadTexts(t, b, meta.ID))
	require.NoError(t, b.Close())
	names, err := m.ReadDir(sessionPath(meta.ID, chunksDir))
	require.NoError(t, err)
	var zst, plain int
	for _, n := range names {
		switch {
		case strings.HasSuffix(n, sealedExt):
			zst++
		case strings.HasSuffix(n, ".jsonl"):
			plain++
		}
	}
	if sealed {
		require.GreaterOrEqual(t, zst, 2, "precondition: the restore downloaded sealed chunks: %v", names)
	} else {
		require.Zero(t, zst, "precondition: no sealed chunk: %v", names)
	}
	require.Equal(t, 1, plain, "precondition: the restore rebuilt a plain chunk: %v", names)
	_, err = m.Stat(sessionPath(meta.ID, remoteStateFile))
	require.NoError(t, err, "precondition: the release wrote remote.json")
	return m, meta.ID, want
}

// TestSyncRestoredSessionSurvivesCrash: a session restored from the
// object store and closed (its release records in remote.json that the
// local files hold the log, so that the next open fetches only what is
// newer) opens after a crash, in every crash mode, and loads every event:
// the chunks the restore wrote, which the next open trusts, were synced.
func TestSyncRestoredSessionSurvivesCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	obj := newMemObjects()
	m, id, want := restoreWorkload(t, obj, true)
	for _, mode := range vfs.CrashModes {
		seeds := 1
		if mode == vfs.KeepRandomSectors || mode == vfs.KeepRandom || mode == vfs.KeepGarbageTail {
			seeds = 8
		}
		for seed := range seeds {
			state := fmt.Sprintf("%s seed %d", mode, seed)
			c := m.CrashClone(mode, uint64(seed))
			s := openMem(t, c, restoreOpts(obj))
			evs, err := s.Load(ctx, id)
			if assert.NoError(t, err, state) {
				assert.Len(t, evs, len(want), state)
			}
			r, err := s.Verify(ctx, id)
			if assert.NoError(t, err, state) {
				assert.True(t, r.OK(), "%s: %v", state, r.Problems)
			}
			require.NoError(t, s.Close(), state)
		}
	}
}

// TestSyncDownloadedSealedChunkWhole: after a crash, in every crash
// mode, a sealed chunk a restore downloaded is under its name whole, or
// not there at all: never with lost blocks, which the next open would
// not notice (it trusts a sealed chunk whose footer reads with the log's
// size, reading no block) and a later read would report as corruption.
func TestSyncDownloadedSealedChunkWhole(t *testing.T) {
	t.Parallel()
	obj := newMemObjects()
	m, id, _ := restoreWorkload(t, obj, true)
	dir := sessionPath(id, chunksDir)
	names, err := m.ReadDir(dir)
	require.NoError(t, err)
	for _, mode := range vfs.CrashModes {
		seeds := 1
		if mode == vfs.KeepRandomSectors || mode == vfs.KeepRandom || mode == vfs.KeepGarbageTail {
			seeds = 4
		}
		for seed := range seeds {
			c := m.CrashClone(mode, uint64(seed))
			for _, n := range names {
				if !strings.HasSuffix(n, sealedExt) {
					continue
				}
				state := fmt.Sprintf("%s seed %d: %s", mode, seed, n)
				got, err := vfs.ReadFile(c, filepath.Join(dir, n))
				if errors.Is(err, fs.ErrNotExist) {
					continue
				}
				require.NoError(t, err, state)
				want, err := vfs.ReadFile(m, filepath.Join(dir, n))
				require.NoError(t, err)
				assert.True(t, bytes.Equal(want, got), "%s: %d bytes, not the %d downloaded", state, len(got), len(want))
			}
		}
	}
}

// TestSyncRestoredChunksNamed: once a restore has returned, every chunk
// file it wrote, and the session's directory itself (a cache of the
// object store the open made), has a durable name (MemFS.Orphans lists
// none): a crash
// never leaves a copy of the session's data on the disk out of every
// directory, where a file system check would gather it into lost+found
// and no Delete of the session would remove it. The plain chunk is
// rebuilt first, then the sealed chunks are downloaded as Load reads
// them; without sealed chunks, nothing after the plain chunk's rebuild
// syncs the chunks directory.
func TestSyncRestoredChunksNamed(t *testing.T) {
	t.Parallel()
	for _, sealed := range []bool{true, false} {
		t.Run(fmt.Sprintf("sealed=%v", sealed), func(t *testing.T) {
			m, _, _ := restoreWorkload(t, newMemObjects(), sealed)
			assert.Empty(t, m.Orphans())
		})
	}
}

// TestSyncFetchedBlobNamed: a blob a Store fetches from the object store
// (a record of a session another Store wrote) lands in a prefix
// directory whose name is durable: no crash leaves it out of every
// directory.
func TestSyncFetchedBlobNamed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	obj := newMemObjects()
	o := restoreOpts(obj)
	o.BlobThreshold = 64
	a := openMem(t, vfs.NewMemFS(), o)
	meta, err := a.Create(ctx, Meta{Name: "with a blob"})
	require.NoError(t, err)
	big := apiAppend(t, a, meta.ID, textEv(strings.Repeat("large record ", 20)))
	require.NotEmpty(t, big.Digest, "precondition: a blob")
	require.NoError(t, a.Close())

	m := vfs.NewMemFS()
	b := openMem(t, m, o)
	ev, err := b.Event(ctx, meta.ID, big.ID)
	require.NoError(t, err)
	_, err = b.Resolve(ctx, meta.ID, ev)
	require.NoError(t, err)
	d, err := parseDigest(big.Digest)
	require.NoError(t, err)
	_, err = m.Stat(blobPath(sessionPath(meta.ID), d))
	require.NoError(t, err, "precondition: the blob was fetched")
	assert.Empty(t, m.Orphans())
	require.NoError(t, b.Close())
}
