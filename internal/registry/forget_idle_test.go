package registry

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestForgetIdleEntryLeavesNoStaleIdleLink: an idle entry that is
// forgotten must leave the idle list; otherwise eviction later picks the
// stale entry and deletes the id's new, in-use entry from the table.
func TestForgetIdleEntryLeavesNoStaleIdleLink(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, 1)
	e1, open, err := h.tab.Acquire(ctx, idOf("a"))
	require.NoError(t, err)
	require.True(t, open)
	e1.Opened()
	h.tab.Release(e1) // idle
	require.True(t, h.tab.Forget(e1, nil))
	e2, open, err := h.tab.Acquire(ctx, idOf("a"))
	require.NoError(t, err)
	require.True(t, open)
	e2.Opened()
	e3, _, err := h.tab.Acquire(ctx, idOf("b")) // beyond Max: evicts an idle one
	require.NoError(t, err)
	e3.Opened()
	v, ok := h.tab.Get(idOf("a"))
	assert.True(t, ok, "a's entry in use is still registered")
	assert.Same(t, e2.Value, v)
	assert.Empty(t, h.closed(), "nothing idle was registered to close")
}
