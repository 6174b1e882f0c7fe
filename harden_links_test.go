//go:build unix

package sessionstore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLinkedFilesNeverWrittenThrough: a file of a session replaced by a
// symbolic link to a file outside the store (a garbage file, or a copy of
// the file it replaces) is never written, truncated or followed: opening
// the session for writing (Repair, Append) and closing it leave the file
// outside byte for byte as it was, and the session reports a
// *CorruptionError naming the link, as does Verify. A writer used to take
// garbage behind a chunk link for a torn tail and cut the file outside to
// nothing, and to append to a copy behind a chunk or index link.
func TestLinkedFilesNeverWrittenThrough(t *testing.T) {
	ctx := context.Background()
	for _, name := range []string{
		filepath.Join(chunksDir, chunkName(0)), indexName, headfile.Name, metaFile, lanesFile, lockName,
	} {
		for _, content := range []string{"garbage", "copy"} {
			t.Run(name+"/"+content, func(t *testing.T) {
				root, id, sdir := hardenStore(t, 3)
				path := filepath.Join(sdir, name)
				outside := filepath.Join(t.TempDir(), "outside")
				data := []byte("precious bytes, not a record\n")
				if content == "copy" {
					var err error
					data, err = os.ReadFile(path)
					require.NoError(t, err)
				}
				require.NoError(t, os.WriteFile(outside, data, 0o600))
				require.NoError(t, os.Remove(path))
				require.NoError(t, os.Symlink(outside, path))
				before := treeOf(t, filepath.Dir(outside))

				s := hardenOpen(t, root, false)
				_, rerr := s.Repair(ctx, id)
				_, aerr := s.Append(ctx, id, UserText("after"))
				r, verr := s.Verify(ctx, id)
				require.NoError(t, verr)
				require.NoError(t, s.Close())
				assert.Equal(t, before, treeOf(t, filepath.Dir(outside)), "the file outside is unchanged")
				b, err := os.ReadFile(outside)
				require.NoError(t, err)
				assert.Equal(t, data, b)

				reportsProblem(t, r, path)
				if name == lockName {
					corruptAt(t, rerr, path, "Repair")
				}
				if name != lanesFile {
					// lanes.json damaged leaves the session appendable
					// (onto HEAD); every other link stops it.
					corruptAt(t, rerr, path, "Repair")
					corruptAt(t, aerr, path, "Append")
				} else {
					assert.NoError(t, aerr)
					_, err := hardenOpen(t, root, false).Lanes(ctx, id)
					corruptAt(t, err, path, "Lanes")
				}
				info, err := os.Lstat(path)
				require.NoError(t, err)
				assert.NotZero(t, info.Mode()&os.ModeSymlink, "the link is left for its owner to see")
			})
		}
	}
}

// TestLinkedDirectoriesNeverWrittenThrough: a directory of the store's
// tree (the session's own, chunks/, blobs/, a blob prefix directory)
// replaced by a symbolic link to a directory outside, whether a copy of
// what it replaces or another directory, is never written through: an
// append (a blob's too), GC and Delete leave the outside tree as it was,
// and the session reports a *CorruptionError naming the link. GC used to
// remove the files of a linked blob directory, and Delete to empty a
// linked directory, outside the store.
func TestLinkedDirectoriesNeverWrittenThrough(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		dir  func(sdir string) string
	}{
		{"session", func(sdir string) string { return sdir }},
		{"chunks", func(sdir string) string { return filepath.Join(sdir, chunksDir) }},
		{"blobs", func(sdir string) string { return filepath.Join(sdir, blobsDir) }},
		{"blob prefix", func(sdir string) string {
			subs, err := os.ReadDir(filepath.Join(sdir, blobsDir, "sha256"))
			if err != nil || len(subs) != 1 {
				panic("want one blob prefix directory")
			}
			return filepath.Join(sdir, blobsDir, "sha256", subs[0].Name())
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, id, sdir := hardenStore(t, 3)
			dir := tc.dir(sdir)
			outside := filepath.Join(t.TempDir(), "outside")
			require.NoError(t, os.Rename(dir, outside))
			// A file there that GC would take for an unreferenced blob.
			stray := filepath.Join(outside, strings.Repeat("ab", 31)+blobExt)
			require.NoError(t, os.WriteFile(stray, []byte("mine"), 0o600))
			require.NoError(t, os.Symlink(outside, dir))
			before := treeOf(t, outside)

			s := hardenOpen(t, root, false)
			_, aerr := s.Append(ctx, id, UserText(strings.Repeat("blob ", testBlobThreshold/4)+"new"))
			_, gerr := s.GC(ctx, id)
			r, verr := s.Verify(ctx, id)
			require.NoError(t, verr)
			assert.Equal(t, before, treeOf(t, outside), "nothing outside changed")
			assert.True(t, errors.Is(aerr, ErrCorrupt) || errors.Is(gerr, ErrCorrupt), "append %v, GC %v", aerr, gerr)
			reportsProblem(t, r, dir)

			derr := s.Delete(ctx, id)
			require.NoError(t, s.Close())
			assert.Equal(t, before, treeOf(t, outside), "Delete (%v) changed nothing outside", derr)
		})
	}
}

// TestLinkedSessionReaders: a read-only store, like a writing one,
// reports a linked session directory as damage (a *CorruptionError naming
// it) and reads nothing through it. (List may still show the session's
// metadata from the catalogue, recorded before the link: Stat describes,
// and the catalogue trusts a session.json whose stamp is unchanged.)
func TestLinkedSessionReaders(t *testing.T) {
	ctx := context.Background()
	root, id, sdir := hardenStore(t, 3)
	outside := filepath.Join(t.TempDir(), "outside")
	require.NoError(t, os.Rename(sdir, outside))
	require.NoError(t, os.Symlink(outside, sdir))
	for _, readOnly := range []bool{true, false} {
		s := hardenOpen(t, root, readOnly)
		_, err := s.Load(ctx, id)
		corruptAt(t, err, sdir, "Load")
		_, err = s.Tree(ctx, id)
		corruptAt(t, err, sdir, "Tree")
		_, err = s.Meta(ctx, id)
		corruptAt(t, err, sdir, "Meta")
		r, err := s.Verify(ctx, id)
		require.NoError(t, err)
		reportsProblem(t, r, sdir)
		require.NoError(t, s.Close())
	}
}
