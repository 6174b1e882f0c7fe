package catalogue

import (
	"sync"
	"sync/atomic"
)

// readBatch is the number of session.json files below which a rebuild
// reads them from one goroutine; each further batch may add one.
const readBatch = 64

// forEach calls f(w, i) for every i in [0, n), from up to workers
// goroutines, w naming the goroutine (0 is the caller's), and returns
// when every call has returned.
func forEach(n, workers int, f func(w, i int)) {
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

func bytesLess(a, b []byte) bool { return string(a) < string(b) }
