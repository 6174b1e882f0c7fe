//go:build linux && (mips64 || mips64le)

package vfs

// sysOpenat2 is openat2's number on the n64 ABI.
const sysOpenat2 = 5437
