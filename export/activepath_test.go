package export

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// TestActivePathAfterSwitch: after a lane switch no append has followed,
// the active path ends at the lane's tip (Load and FullPath from the
// active path's end give it): scope path exports that path, of which
// scope context is the end, in JSONL and Markdown alike, and the header's
// "head" (Markdown's HEAD) stays the session's HEAD in every scope.
func TestActivePathAfterSwitch(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	require.NoError(t, st.CreateLane(ctx, s, "approach-a", eid(4)))
	require.NoError(t, st.SwitchLane(ctx, s, "approach-a"))
	head, err := st.Head(ctx, s)
	require.NoError(t, err)
	require.Equal(t, eid(11), head, "precondition: HEAD moves with the next append")
	path := wantIDs(t, st, s, ActivePath)
	require.Equal(t, eid(4), path[len(path)-1], "precondition: the active path ends at the lane's tip")

	for _, scope := range []Scope{ActivePath, Context} {
		var buf bytes.Buffer
		_, err := JSONL(ctx, &buf, st, s, Options{Scope: scope})
		require.NoError(t, err)
		h, evs := readAll(t, buf.Bytes())
		assert.Equal(t, wantIDs(t, st, s, scope), ids(evs), "scope %s", scope)
		assert.Equal(t, eid(11), h.Head, "scope %s: the header's head is HEAD", scope)
	}

	for _, scope := range []Scope{ActivePath, Context} {
		var buf bytes.Buffer
		_, err := Markdown(ctx, &buf, st, s, Options{Scope: scope})
		require.NoError(t, err)
		md := buf.String()
		assert.Contains(t, md, "HEAD `"+sessionstore.ShortID(eid(11))+"`", "scope %s", scope)
		// An event shown is stamped with its time and short id.
		shown := func(id uuid.UUID) string { return " · `" + sessionstore.ShortID(id) + "`</sub>" }
		for _, id := range wantIDs(t, st, s, scope) {
			assert.Contains(t, md, shown(id), "scope %s: event %s", scope, id)
		}
		for _, n := range []int{5, 9, 11} { // of the path to HEAD, not the active one
			assert.NotContains(t, md, shown(eid(n)), "scope %s: event %d", scope, n)
		}
	}
}
