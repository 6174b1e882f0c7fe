package sessionstore

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReviewForkOfUpgradedParent: a fork open in the Store (its prefix
// read) whose parent is then upgraded (its chunks rewritten, so every
// line moves) must still load its prefix.
func TestReviewForkOfUpgradedParent(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name   string
		o      Options
		sealed bool
	}{{"plain", Options{Compression: CompressionNone}, false}, {"sealed", Options{ChunkSize: 2048}, true}} {
		t.Run(tt.name, func(t *testing.T) {
			m := memFixture(t, "format1")
			if tt.sealed {
				m = format1Sealed(t)
			}
			s := openMem(t, m, tt.o)
			defer s.Close()
			want, err := s.Load(ctx, goldenSession)
			require.NoError(t, err)
			head, err := s.Head(ctx, goldenSession)
			require.NoError(t, err)
			f, err := s.Fork(ctx, goldenSession, head)
			require.NoError(t, err)
			got, err := s.Load(ctx, f.ID)
			require.NoError(t, err)
			require.Equal(t, forkIDs(want), forkIDs(got))
			require.NoError(t, s.Upgrade(ctx, goldenSession))
			got, err = s.Load(ctx, f.ID)
			require.NoError(t, err, "Load of the fork after its parent's upgrade")
			require.Equal(t, forkIDs(want), forkIDs(got))
			_, err = s.Event(ctx, f.ID, want[len(want)-1].ID)
			require.NoError(t, err, "Event of a prefix event after the parent's upgrade")
		})
	}
}
