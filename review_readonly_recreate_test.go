package sessionstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReadOnlyRecreated: a reader that has a session's index in memory
// sees the session a writer deleted and made again under the same id as
// the new one, not the old one's events.
func TestReadOnlyRecreated(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	w, err := Open(root, nil)
	require.NoError(t, err)
	defer w.Close()
	m, err := w.Create(ctx, Meta{Name: "first"})
	require.NoError(t, err)
	for range 5 {
		_, err := w.Append(ctx, m.ID, UserText("the first session's event"))
		require.NoError(t, err)
	}
	ro, err := Open(root, &Options{ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	old, err := ro.Tree(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, old, 5)

	for _, n := range []int{3, 5, 9} { // fewer, as many, more events
		require.NoError(t, w.Delete(ctx, m.ID))
		_, err = w.Create(ctx, Meta{ID: m.ID, Name: "again"})
		require.NoError(t, err)
		var want []Event
		for range n {
			ev, err := w.Append(ctx, m.ID, UserText("made again"))
			require.NoError(t, err)
			want = append(want, ev)
		}
		got, err := ro.Tree(ctx, m.ID)
		require.NoError(t, err)
		require.Len(t, got, n, "%d events", n)
		for i := range want {
			assert.Equal(t, want[i].ID, got[i].ID, "%d events: node %d", n, i)
		}
		head, err := ro.Head(ctx, m.ID)
		require.NoError(t, err)
		assert.Equal(t, want[n-1].ID, head, "%d events", n)
	}
}
