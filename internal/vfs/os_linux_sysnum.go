//go:build linux && !mips && !mipsle && !mips64 && !mips64le

package vfs

// sysOpenat2 is openat2's number, the same on every architecture that
// came after the numbers were unified (Linux 5.6).
const sysOpenat2 = 437
