package parallel

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestForEach: every index is visited exactly once, by no more goroutines
// than asked (and by the caller's alone when asked for one or none).
func TestForEach(t *testing.T) {
	for _, tc := range []struct{ n, workers, maxW int }{
		{0, 4, 0}, {1, 4, 1}, {100, 1, 1}, {100, 0, 1}, {100, 4, 4}, {3, 8, 3},
	} {
		var mu sync.Mutex
		seen := make([]int, tc.n)
		ws := map[int]bool{}
		ForEach(tc.n, tc.workers, func(w, i int) {
			mu.Lock()
			defer mu.Unlock()
			seen[i]++
			ws[w] = true
		})
		for i, c := range seen {
			assert.Equal(t, 1, c, "n=%d workers=%d: index %d", tc.n, tc.workers, i)
		}
		for w := range ws {
			assert.True(t, w >= 0 && w < max(tc.maxW, 1), "n=%d workers=%d: goroutine %d", tc.n, tc.workers, w)
		}
		if tc.workers <= 1 && tc.n > 0 {
			assert.Equal(t, map[int]bool{0: true}, ws, "the caller's goroutine alone")
		}
	}
}
