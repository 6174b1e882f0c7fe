//go:build !unix

package sessionstore

import "time"

// cpuTime is 0 where getrusage is not there: the metric reads 0.
func cpuTime() time.Duration { return 0 }
