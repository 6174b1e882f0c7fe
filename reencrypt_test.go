package sessionstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/seal"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// reencOptions are encOptions with chunks small enough that the workload
// spans several, sealed ones among them.
func reencOptions(keys KeyProvider) Options {
	o := encOptions(keys)
	o.ChunkSize = 2 << 10
	return o
}

// keyGens returns the generations of the key record at path.
func keyGens(t *testing.T, fsys vfs.FS, path string, id uuid.UUID) []uint32 {
	t.Helper()
	rec, err := seal.ReadRecord(fsys, path, id)
	require.NoError(t, err)
	var out []uint32
	for _, k := range rec.Keys {
		out = append(out, k.Gen)
	}
	return out
}

// TestReencrypt: after Reencrypt every record reads back as appended,
// under a key record that holds the new data key only; a copy of the
// session's files made before it no longer opens; the blobs of the old
// envelopes are gone; appends go on; a fork reads its prefix under the
// new key; a second Reencrypt moves to a third key.
func TestReencrypt(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := reencOptions(testKeys(t, "local:1", 7))
	s, err := Open(dir, &o)
	require.NoError(t, err)
	id, all := encryptedWorkload(t, s)
	fork, err := s.Fork(ctx, id, all[len(all)-1].ID)
	require.NoError(t, err)
	forked, err := s.Load(ctx, fork.ID)
	require.NoError(t, err)
	require.NoError(t, s.Close()) // the full chunks sealed
	sdir := filepath.Join(dir, sessionsDir, id.String())
	chunks, err := os.ReadDir(filepath.Join(sdir, chunksDir))
	require.NoError(t, err)
	sealed := 0
	for _, c := range chunks {
		if strings.HasSuffix(c.Name(), sealedExt) {
			sealed++
		}
	}
	require.Positive(t, sealed, "the workload spans sealed chunks")
	before := filepath.Join(t.TempDir(), "before")
	require.NoError(t, copyTree(sdir, before))
	oldBlobs := filesUnder(t, filepath.Join(sdir, "blobs"))
	require.NotEmpty(t, oldBlobs)

	s, err = Open(dir, &o)
	require.NoError(t, err)
	previews := treePreviews(t, s, id)
	require.Contains(t, previews, secret(0), "precondition: sealed previews, opened")
	require.NoError(t, s.Reencrypt(ctx, id))
	keyFile := filepath.Join(dir, keysDir, id.String()+".json")
	assert.Equal(t, []uint32{2}, keyGens(t, vfs.Default, keyFile, id))
	checkEncryptedReads(t, s, id, all)
	assert.Equal(t, previews, treePreviews(t, s, id), "the previews sealed again under the new key")
	got, err := s.Load(ctx, fork.ID)
	require.NoError(t, err)
	assert.Equal(t, recordsOf(t, s, fork.ID, forked), recordsOf(t, s, fork.ID, got), "the fork's prefix under the new key")
	for _, b := range oldBlobs {
		_, err := os.Stat(filepath.Join(sdir, "blobs", b))
		assert.True(t, errors.Is(err, os.ErrNotExist), "old blob %s removed: %v", b, err)
	}
	require.NoError(t, s.Close())

	// A new Store reads it all with the key record alone.
	s, err = Open(dir, &o)
	require.NoError(t, err)
	checkEncryptedReads(t, s, id, all)
	require.NoError(t, s.Reencrypt(ctx, id))
	assert.Equal(t, []uint32{3}, keyGens(t, vfs.Default, keyFile, id))
	checkEncryptedReads(t, s, id, all)
	assert.Equal(t, previews, treePreviews(t, s, id), "the previews after a second re-encryption")
	ev, err := s.Append(ctx, id, UserText(secret(7)))
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s, err = Open(dir, &o)
	require.NoError(t, err)
	one, err := s.Event(ctx, id, ev.ID)
	require.NoError(t, err)
	assert.Equal(t, string(ev.Record), string(one.Record), "appended after")
	require.NoError(t, s.Close())

	// The files as they were before: under a key the record no longer holds.
	require.NoError(t, os.RemoveAll(sdir))
	require.NoError(t, copyTree(before, sdir))
	s, err = Open(dir, &o)
	require.NoError(t, err)
	_, err = s.Load(ctx, id)
	var ce *CorruptionError
	require.ErrorAs(t, err, &ce, "a copy from before does not open")
	assert.Contains(t, err.Error(), "generation 1")
	require.NoError(t, s.Close())
}

// treePreviews returns the previews of the nodes of session's Tree.
func treePreviews(t *testing.T, s *Store, session uuid.UUID) []string {
	t.Helper()
	tree, err := s.Tree(context.Background(), session)
	require.NoError(t, err)
	out := make([]string, len(tree))
	for i, n := range tree {
		out[i] = n.Preview
	}
	return out
}

// filesUnder lists the files under dir, relative to it.
func filesUnder(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	require.NoError(t, filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		out = append(out, rel)
		return err
	}))
	return out
}

// TestReencryptErrors: a plain session, a read-only Store, a Store
// without keys and a missing session are refused, and nothing changes.
func TestReencryptErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	o := reencOptions(testKeys(t, "local:1", 7))
	s, err := Open(dir, &o)
	require.NoError(t, err)
	id, all := encryptedWorkload(t, s)
	require.NoError(t, s.Close())

	plain, err := Open(dir, &Options{})
	require.NoError(t, err)
	pm, err := plain.Create(ctx, Meta{})
	require.NoError(t, err)
	assert.ErrorIs(t, plain.Reencrypt(ctx, id), ErrInvalidOptions)
	require.NoError(t, plain.Close())

	s, err = Open(dir, &o)
	require.NoError(t, err)
	assert.ErrorIs(t, s.Reencrypt(ctx, pm.ID), ErrNotEncrypted)
	assert.ErrorIs(t, s.Reencrypt(ctx, uuid.New()), ErrNotFound)
	require.NoError(t, s.Close())

	ro := o
	ro.ReadOnly = true
	r, err := Open(dir, &ro)
	require.NoError(t, err)
	assert.ErrorIs(t, r.Reencrypt(ctx, id), ErrReadOnly)
	require.NoError(t, r.Close())

	// A provider that cannot wrap: a *KeyError, and the key record as it was.
	keyFile := filepath.Join(dir, keysDir, id.String()+".json")
	o.Keys = failingWrap{o.Keys}
	s, err = Open(dir, &o)
	require.NoError(t, err)
	var ke *KeyError
	require.ErrorAs(t, s.Reencrypt(ctx, id), &ke)
	assert.Equal(t, id, ke.Session)
	assert.Equal(t, []uint32{1}, keyGens(t, vfs.Default, keyFile, id))
	checkEncryptedReads(t, s, id, all)
	require.NoError(t, s.Close())
}

// failingWrap is a KeyProvider whose Wrap fails.
type failingWrap struct{ KeyProvider }

func (failingWrap) Wrap(context.Context, []byte, []byte) (string, []byte, error) {
	return "", nil, ErrKeyUnavailable
}

// TestReencryptCrashPoints: a power cut at every mutating file operation
// of a Reencrypt leaves a session that opens and loads whole; Reencrypt
// again completes it, after which the key record holds one generation
// and every record reads back as appended (each opened under it).
func TestReencryptCrashPoints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	keys := testKeys(t, "local:1", 7)
	var id uuid.UUID
	var all []Event
	points := crashPoints(t, func(m *vfs.MemFS) (func() error, func()) {
		s := openMem(t, m, reencOptions(keys))
		id, all = encryptedWorkload(t, s)
		require.NoError(t, s.Close())
		s = openMem(t, m, reencOptions(keys))
		return func() error { return s.Reencrypt(ctx, id) }, func() { s.Close() }
	}, func(state string, c *vfs.MemFS) {
		s := openMem(t, c, reencOptions(keys))
		_, err := s.Load(ctx, id)
		require.NoError(t, err, state)
		require.NoError(t, s.Reencrypt(ctx, id), state)
		gens := keyGens(t, c, filepath.Join(memRoot, keysDir, id.String()+".json"), id)
		require.Len(t, gens, 1, state)
		assert.GreaterOrEqual(t, gens[0], uint32(2), state)
		checkEncryptedReads(t, s, id, all)
		require.NoError(t, s.Close())
	})
	t.Logf("%d crash points", points)
	require.GreaterOrEqual(t, points, 6, "the key record twice, the index, the chunks, the blob")
}
