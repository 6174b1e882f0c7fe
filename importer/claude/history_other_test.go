//go:build !unix

package claude

import "testing"

// hostileFiles makes nothing where links and FIFOs are not the unix ones:
// link@v1 and fifo@v1 are then missing, as they are not read on unix.
func hostileFiles(t *testing.T, sdir string) {}
