package sessionstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// benchTree writes n files of about size bytes each (text-like, so they
// compress) below dir, in nested directories, and returns their paths.
func benchTree(b testing.TB, dir string, n, size int, seed uint64) []string {
	rng := rand.New(rand.NewPCG(seed, 1))
	words := []string{"func", "return", "if", "err", "nil", "package", "import", "type", "struct", "for", "range", "{", "}", "(", ")", "\n", "\t", "x", "y", "value"}
	var paths []string
	buf := make([]byte, 0, size+16)
	for i := range n {
		p := fmt.Sprintf("d%02d/s%02d/f%05d.go", i%37, i%11, i)
		buf = buf[:0]
		for len(buf) < size {
			buf = append(buf, words[rng.IntN(len(words))]...)
			buf = append(buf, ' ')
		}
		full := filepath.Join(dir, filepath.FromSlash(p))
		require.NoError(b, os.MkdirAll(filepath.Dir(full), 0o755))
		require.NoError(b, os.WriteFile(full, buf, 0o644))
		paths = append(paths, p)
	}
	return paths
}

// BenchmarkSnapshotDir: a snapshot of a tree of 2,000 files (about
// 16 MB) after a change of 3 files, the incremental case; bytes/op is
// what the store grew by per snapshot.
func BenchmarkSnapshotDir(b *testing.B) {
	ctx := context.Background()
	s, id := wsStore(b, nil)
	work := b.TempDir()
	paths := benchTree(b, work, 2000, 8<<10, 1)
	_, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
	require.NoError(b, err)
	rng := rand.New(rand.NewPCG(2, 2))
	before := dirSize(b, s.Dir())
	changed := int64(0)
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for k := range 3 {
			p := paths[rng.IntN(len(paths))]
			data := fmt.Appendf(nil, "// change %d %d\n%s", i, k, p)
			changed += int64(len(data))
			require.NoError(b, os.WriteFile(filepath.Join(work, filepath.FromSlash(p)), data, 0o644))
		}
		b.StartTimer()
		_, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
		require.NoError(b, err)
	}
	b.StopTimer()
	b.ReportMetric(float64(dirSize(b, s.Dir())-before)/float64(b.N), "store-bytes/snapshot")
	b.ReportMetric(float64(changed)/float64(b.N), "changed-bytes/snapshot")
}

// BenchmarkWorkspaceFiles: Files at the end of a path of 50 snapshots
// over a tree of 2,000 files.
// Cold decodes the manifests (the cache emptied first), warm starts from
// the workspace the cache keeps.
func BenchmarkWorkspaceFiles(b *testing.B) {
	ctx := context.Background()
	s, id, _ := benchHistory(b)
	for _, cold := range []bool{true, false} {
		b.Run(fmt.Sprintf("cold=%v", cold), func(b *testing.B) {
			for b.Loop() {
				if cold {
					s.workspaces.forget(id)
				}
				ws, err := s.Files(ctx, id, uuid.Nil)
				require.NoError(b, err)
				require.Len(b, ws.Files, 2000)
			}
		})
	}
}

// BenchmarkRestore: Restore of a whole tree of 2,000 files into an empty
// directory, synced and not.
func BenchmarkRestore(b *testing.B) {
	ctx := context.Background()
	s, id, at := benchHistory(b)
	for _, noSync := range []bool{false, true} {
		b.Run(fmt.Sprintf("nosync=%v", noSync), func(b *testing.B) {
			for b.Loop() {
				dir := filepath.Join(b.TempDir(), "w")
				_, err := s.Restore(ctx, id, at, dir, RestoreOptions{NoSync: noSync})
				require.NoError(b, err)
			}
		})
	}
}

// benchHistory is a session with a tree of 2,000 files snapshotted, then
// 49 snapshots of 3 changed files each; it returns the last.
func benchHistory(b *testing.B) (*Store, uuid.UUID, uuid.UUID) {
	ctx := context.Background()
	s, id := wsStore(b, nil)
	work := b.TempDir()
	paths := benchTree(b, work, 2000, 8<<10, 1)
	var last uuid.UUID
	rng := rand.New(rand.NewPCG(3, 3))
	for i := range 50 {
		if i > 0 {
			for k := range 3 {
				p := paths[rng.IntN(len(paths))]
				require.NoError(b, os.WriteFile(filepath.Join(work, filepath.FromSlash(p)), fmt.Appendf(nil, "// %d %d", i, k), 0o644))
			}
		}
		r, err := s.SnapshotDir(ctx, id, work, SnapshotOptions{})
		require.NoError(b, err)
		if r.Event.ID != uuid.Nil {
			last = r.Event.ID
		}
	}
	return s, id, last
}

func dirSize(b testing.TB, dir string) int64 {
	var n int64
	require.NoError(b, filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return err
	}))
	return n
}
