package sessionstore

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestListPageHugeLimit: a Limit as large as an int goes is a page of
// every session, not an empty one (the page read one more session than
// the limit to tell whether a next page exists, and that count wrapped
// around to a negative number), with and without the catalogue.
func TestListPageHugeLimit(t *testing.T) {
	const n = 5
	for _, mode := range listModes {
		t.Run(mode.name, func(t *testing.T) {
			m, metas := listFixture(t, n)
			require.Len(t, metas, n)
			s := mode.open(t, m)
			for _, limit := range []int{math.MaxInt, math.MaxInt - 1, 1 << 40} {
				page, next, err := s.ListPage(context.Background(), Query{Limit: limit}, "")
				require.NoError(t, err, "limit %d", limit)
				assert.Len(t, page, n, "limit %d", limit)
				assert.Empty(t, next, "limit %d", limit)
			}
		})
	}
}
