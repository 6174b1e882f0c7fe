//go:build unix && !linux

package vfs

import "testing"

// withoutOpenat2 skips the test: only Linux has openat2, and only there
// do paths below the root resolve two ways.
func withoutOpenat2(t *testing.T) { t.Skip("openat2 is Linux's") }
