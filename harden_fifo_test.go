//go:build unix

package sessionstore

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fifoPlaces are the files and directories of a store that a FIFO may
// stand in for: relative to the session directory, or (root) to the
// store's root.
var fifoPlaces = []struct {
	name string
	rel  func(sdir string) string
	data bool // a file of the session: Verify names it
}{
	{"chunk", func(sdir string) string { return filepath.Join(sdir, chunksDir, chunkName(0)) }, true},
	{"index", func(sdir string) string { return filepath.Join(sdir, indexName) }, true},
	{"HEAD", func(sdir string) string { return filepath.Join(sdir, headfile.Name) }, true},
	{"session.json", func(sdir string) string { return filepath.Join(sdir, metaFile) }, true},
	{"lanes.json", func(sdir string) string { return filepath.Join(sdir, lanesFile) }, true},
	{"LOCK", func(sdir string) string { return filepath.Join(sdir, lockName) }, true},
	{"blob", func(sdir string) string { return onlyBlob(sdir) }, true},
	{"chunks directory", func(sdir string) string { return filepath.Join(sdir, chunksDir) }, true},
	{"session directory", func(sdir string) string { return sdir }, true},
	{"catalogue snapshot", func(sdir string) string { return filepath.Join(sdir, "..", "..", catalogueName) }, false},
	{"catalogue log", func(sdir string) string { return filepath.Join(sdir, "..", "..", catalogueLogName) }, false},
}

// onlyBlob returns the path of the session's one blob.
func onlyBlob(sdir string) string {
	var found string
	filepath.WalkDir(filepath.Join(sdir, blobsDir), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			found = p
		}
		return nil
	})
	if found == "" {
		panic("no blob")
	}
	return found
}

// TestFIFONeverBlocks: a FIFO in place of any file or directory of a
// store makes no call block, in a writing store or a read-only one:
// Verify, Load, Tree, Meta, List, ListPage (the web view's session list)
// and Append return (the session's calls with a *CorruptionError naming
// the FIFO, which Verify reports), and Close returns. Every one of them
// used to wait forever on the FIFO's open, and Close on them.
func TestFIFONeverBlocks(t *testing.T) {
	ctx := context.Background()
	for _, place := range fifoPlaces {
		t.Run(place.name, func(t *testing.T) {
			root, id, sdir := hardenStore(t, 3)
			path := filepath.Clean(place.rel(sdir))
			require.NoError(t, os.RemoveAll(path))
			require.NoError(t, syscall.Mkfifo(path, 0o600))
			for _, readOnly := range []bool{true, false} {
				s, err := Open(root, &Options{Compression: CompressionNone, ReadOnly: readOnly})
				require.NoError(t, err)
				noHang(t, "the calls of a store with a FIFO", func() {
					r, err := s.Verify(ctx, id)
					if place.data {
						require.NoError(t, err)
						reportsProblem(t, r, path, "read-only %v", readOnly)
					}
					_, lerr := s.Load(ctx, id)
					_, terr := s.Tree(ctx, id)
					_, merr := s.Meta(ctx, id)
					metas, err := s.List(ctx)
					if !place.data {
						require.NoError(t, err, "List reads session.json when the catalogue is not a file")
						require.Len(t, metas, 1)
					}
					_, _, _ = s.ListPage(ctx, Query{}, "")
					_, _ = s.ListRecent(ctx, 10)
					_, aerr := s.Append(ctx, id, UserText("after"))
					if place.name == "blob" {
						corruptAt(t, lerr, path, "Load reads the blob") // Tree and Append do not
					} else if place.data && place.name != "lanes.json" && !readOnly {
						// A writer opens the session whole, and stops at
						// the FIFO (a damaged lanes file leaves it
						// appendable); a reader reads what it needs,
						// perhaps not the FIFO.
						for _, err := range []error{lerr, terr, aerr} {
							corruptAt(t, err, path)
						}
					}
					if place.name == "session.json" || place.name == "session directory" {
						corruptAt(t, merr, path)
					}
					assert.NoError(t, s.Close())
				})
			}
			info, err := os.Lstat(path)
			require.NoError(t, err)
			if place.data {
				assert.NotZero(t, info.Mode()&os.ModeNamedPipe, "the FIFO is left as it was")
			} else {
				// A writer rebuilds a catalogue it cannot read, renaming
				// the new file over the FIFO: nothing goes through it.
				assert.True(t, info.Mode().IsRegular(), "the catalogue rebuilt: %v", info.Mode())
			}
		})
	}
}

// TestFIFOSealedChunk: a FIFO in place of a sealed (compressed) chunk is
// refused like a plain one.
func TestFIFOSealedChunk(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	s, err := Open(root, nil)
	require.NoError(t, err)
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	for range 3 { // enough for Close to seal the chunk
		_, err = s.Append(ctx, m.ID, UserText(strings.Repeat("x", 10<<10)))
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	path := filepath.Join(s.sessionDir(m.ID), chunksDir, chunkName(0)+sealedExt)
	require.NoError(t, os.Remove(path))
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	for _, readOnly := range []bool{true, false} {
		s, err := Open(root, &Options{ReadOnly: readOnly})
		require.NoError(t, err)
		noHang(t, "the calls of a store with a FIFO", func() {
			r, err := s.Verify(ctx, m.ID)
			require.NoError(t, err)
			reportsProblem(t, r, path)
			_, err = s.Load(ctx, m.ID)
			corruptAt(t, err, path, "Load")
			_, err = s.Tree(ctx, m.ID)
			corruptAt(t, err, path, "Tree")
			assert.NoError(t, s.Close())
		})
	}
}
