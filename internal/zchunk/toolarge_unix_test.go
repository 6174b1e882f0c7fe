//go:build unix

package zchunk

import (
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMetaTooLarge writes metadata one byte over MaxMetaSize: Write
// refuses it and leaves no file. The metadata is an anonymous mapping that
// is never touched, so the test costs no memory (an allocation from the Go
// heap would be zeroed, a gigabyte of it).
func TestMetaTooLarge(t *testing.T) {
	huge, err := syscall.Mmap(-1, 0, MaxMetaSize+1, syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Munmap(huge) })
	require.Len(t, huge, MaxMetaSize+1)
	m := newMemFS(t)
	err = Write(m, testPath, transcript(19, 10<<10, false), huge, 0o600)
	require.ErrorContains(t, err, "metadata too large")
	names, err := m.ReadDir("/s/chunks")
	require.NoError(t, err)
	require.Empty(t, names)
}
