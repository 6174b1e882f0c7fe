//go:build !linux

package pgtest

import "syscall"

// setParentDeathSignal does nothing where the kernel has no parent-death
// signal: a killed test process leaves its server running there.
func setParentDeathSignal(*syscall.SysProcAttr) {}
