//go:build linux && (mips || mipsle)

package vfs

// sysOpenat2 is openat2's number on the o32 ABI.
const sysOpenat2 = 4437
