package sessionstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hardenStore makes a store in a new directory holding one closed
// session of n small events (plain chunks: Compression none), one of them
// a blob, and returns the root, the session and its directory.
func hardenStore(t *testing.T, n int) (string, uuid.UUID, string) {
	t.Helper()
	root := t.TempDir()
	s, err := Open(root, &Options{Compression: CompressionNone})
	require.NoError(t, err)
	ctx := context.Background()
	m, err := s.Create(ctx, Meta{Name: "harden"})
	require.NoError(t, err)
	var first Event
	for i := range n {
		text := "event " + strings.Repeat("x", i)
		if i == 1 {
			text = strings.Repeat("blob ", testBlobThreshold/4) // over the blob threshold
		}
		ev, err := s.Append(ctx, m.ID, UserText(text))
		require.NoError(t, err)
		if i == 0 {
			first = ev
		}
	}
	require.NoError(t, s.CreateLane(ctx, m.ID, "side", first.ID))
	require.NoError(t, s.Close())
	return root, m.ID, s.sessionDir(m.ID)
}

// hardenOpen opens root, read-only or not, closing it when the test ends.
func hardenOpen(t *testing.T, root string, readOnly bool) *Store {
	t.Helper()
	s, err := Open(root, &Options{Compression: CompressionNone, ReadOnly: readOnly})
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return s
}

// fingerprint is what a tree of files holds: each path's type and
// content digest.
type fingerprint map[string]string

// treeOf fingerprints the tree at path (a file or a directory), following
// nothing.
func treeOf(t *testing.T, path string) fingerprint {
	t.Helper()
	out := fingerprint{}
	require.NoError(t, filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(path, p)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			to, err := os.Readlink(p)
			require.NoError(t, err)
			out[rel] = "link " + to
		case d.IsDir():
			out[rel] = "dir"
		default:
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			out[rel] = fmt.Sprintf("%x", sha256.Sum256(b))
		}
		return nil
	}))
	return out
}

// noHang runs f and fails the test if it has not returned after a
// generous while: a detector of calls that block for good, not a timing
// check.
func noHang(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not return: it blocks", what)
	}
}

// corruptAt asserts that err is a *CorruptionError naming path.
func corruptAt(t *testing.T, err error, path string, msgAndArgs ...any) {
	t.Helper()
	var ce *CorruptionError
	if assert.ErrorAs(t, err, &ce, msgAndArgs...) {
		assert.Equal(t, path, ce.Path, msgAndArgs...)
	}
}

// reportsProblem asserts that a Verify report names path among its
// problems.
func reportsProblem(t *testing.T, r *VerifyReport, path string, msgAndArgs ...any) {
	t.Helper()
	require.NotNil(t, r, msgAndArgs...)
	var paths []string
	for _, p := range r.Problems {
		if p.Path == path {
			return
		}
		paths = append(paths, p.Path)
	}
	t.Errorf("Verify names no problem in %s, only in %v: %v", path, paths, msgAndArgs)
}

// allocated returns the bytes f allocated (runtime.MemStats.TotalAlloc),
// for tests that show a read's memory does not follow a file's size.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
