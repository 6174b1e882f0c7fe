//go:build unix

package sessionstore

import (
	"syscall"
	"time"
)

// cpuTime is the CPU time (user and system) the process has used, for
// benchmarks that report the work a call does beside its latency.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
