package vfs

import "testing"

// withoutOpenat2 makes the confinement resolve paths as on a kernel
// without openat2, until the test ends.
func withoutOpenat2(t *testing.T) {
	saved := haveOpenat2
	haveOpenat2 = func() bool { return false }
	t.Cleanup(func() { haveOpenat2 = saved })
}
