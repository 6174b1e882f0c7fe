// Package parallel runs a loop's iterations on a few goroutines: the one
// helper the engine's layers share for reading many files at once
// (session.json files, chunks, index lines). It imports nothing of the
// module.
package parallel

import (
	"sync"
	"sync/atomic"
)

// ForEach calls f(w, i) for every i in [0, n), from up to workers
// goroutines (at least one: the caller's), w naming the goroutine (0 is
// the caller's), each i taken by exactly one call. It returns when every
// call has returned. f must not panic.
func ForEach(n, workers int, f func(w, i int)) {
	workers = max(min(workers, n), 1)
	var next atomic.Int64
	work := func(w int) {
		for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
			f(w, i)
		}
	}
	var wg sync.WaitGroup
	for w := 1; w < workers; w++ {
		wg.Go(func() { work(w) })
	}
	work(0)
	wg.Wait()
}
