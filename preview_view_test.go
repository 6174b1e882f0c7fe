package sessionstore

import (
	"testing"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/stretchr/testify/require"
)

// requireSameView checks that got reads as want, except that a node
// whose index line predates previews (an empty one in want) may have
// got its preview since, when its entry was rebuilt from its chunk line
// (internal/eventline/preview.go): then it must be the preview of its record.
func requireSameView(t *testing.T, want, got sessionView, msgAndArgs ...any) {
	t.Helper()
	wantTree, gotTree := want.Tree, got.Tree
	want.Tree, got.Tree = withoutPreviews(wantTree), withoutPreviews(gotTree)
	require.Equal(t, want, got, msgAndArgs...)
	for i := range gotTree {
		if gotTree[i].Preview == wantTree[i].Preview {
			continue
		}
		require.Empty(t, wantTree[i].Preview, msgAndArgs...)
		k, _ := eventline.KindCodeOf([]byte(gotTree[i].Kind))
		pv := eventline.PreviewOf(k, got.Events[i].Record)
		require.Equal(t, pv.String(), gotTree[i].Preview, msgAndArgs...)
	}
}

func withoutPreviews(ns []Node) []Node {
	out := make([]Node, len(ns))
	for i, n := range ns {
		n.Preview = ""
		out[i] = n
	}
	return out
}
