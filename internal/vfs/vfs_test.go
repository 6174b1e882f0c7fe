package vfs

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testLimit is a ReadFile limit no test file reaches.
const testLimit = 1 << 40

// TestReadFileSizes: ReadFile returns every byte, on both file systems,
// for sizes around the buffer it sizes from Stat.
func TestReadFileSizes(t *testing.T) {
	for _, fsys := range []struct {
		name string
		fs   FS
		dir  string
	}{{"memfs", NewMemFS(), "/"}, {"os", Default, t.TempDir()}} {
		for _, n := range []int{0, 1, 511, 512, 4096, 100_003} {
			t.Run(fmt.Sprintf("%s/%d", fsys.name, n), func(t *testing.T) {
				want := bytes.Repeat([]byte("0123456789abcdef"), n/16+1)[:n]
				name := filepath.Join(fsys.dir, fmt.Sprintf("f%d", n))
				writeFile(t, fsys.fs, name, string(want))
				got, err := ReadFile(fsys.fs, name)
				require.NoError(t, err)
				assert.Equal(t, want, got)

				// Into a buffer that fits: read in place, from its start.
				roomy := append(make([]byte, 0, n+64), "stale"...)
				got, err = ReadFileInto(fsys.fs, name, roomy, testLimit)
				require.NoError(t, err)
				assert.Equal(t, want, got)
				assert.Same(t, &roomy[:1][0], &got[:1][0], "the buffer was reused")
				// Into one that does not: grown.
				got, err = ReadFileInto(fsys.fs, name, make([]byte, 0, n/2), testLimit)
				require.NoError(t, err)
				assert.Equal(t, want, got)
			})
		}
	}
}
