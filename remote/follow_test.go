package remote_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore"
)

// TestFollower: on each backend, a follower (a read-only Store with the
// same Remote, in a directory of its own) reads what a writing Store
// appends, across seals and a handoff: each call sees every append that
// returned before it, a subscription delivers each event once, in order,
// and the follower sends no write to the object store.
func TestFollower(t *testing.T) {
	forEachBackend(t, func(t *testing.T, obj sessionstore.ObjectStore, _ backend) {
		ctx := ctxFor(t)
		wopts := &sessionstore.Options{Remote: obj, ChunkSize: 4 << 10}
		w, err := sessionstore.Open(t.TempDir(), wopts)
		require.NoError(t, err)
		defer func() { require.NoError(t, w.Close()) }()
		m, err := w.Create(ctx, sessionstore.Meta{Name: "followed"})
		require.NoError(t, err)

		cs := newCounting(obj)
		f, err := sessionstore.Open(t.TempDir(), &sessionstore.Options{Remote: cs, ReadOnly: true, FollowInterval: 10 * time.Millisecond})
		require.NoError(t, err)
		defer func() { require.NoError(t, f.Close()) }()
		sub, err := f.SubscribeFrom(ctx, m.ID, [16]byte{})
		require.NoError(t, err)
		defer sub.Close()

		var want []string
		appendN := func(s *sessionstore.Store, n int) {
			for range n {
				text := fmt.Sprintf("event %d", len(want))
				_, err := s.Append(ctx, m.ID, sessionstore.UserText(text))
				require.NoError(t, err)
				want = append(want, text)
			}
		}
		texts := func() []string {
			evs, err := f.Load(ctx, m.ID)
			require.NoError(t, err)
			var out []string
			for _, ev := range evs {
				msg, err := ev.Message()
				require.NoError(t, err)
				out = append(out, msg.Content)
			}
			return out
		}
		appendN(w, 60)
		assert.Equal(t, want, texts())
		require.NoError(t, w.CloseSession(ctx, m.ID)) // a release, then another Store takes it
		w2, err := sessionstore.Open(t.TempDir(), wopts)
		require.NoError(t, err)
		defer func() { require.NoError(t, w2.Close()) }()
		appendN(w2, 20)
		assert.Equal(t, want, texts())

		var got []string
		for len(got) < len(want) {
			select {
			case u, ok := <-sub.C:
				require.True(t, ok, "the subscription ended: %v", sub.Err())
				require.Zero(t, u.Missed)
				msg, err := u.Event.Message()
				require.NoError(t, err)
				got = append(got, msg.Content)
			case <-time.After(time.Minute):
				t.Fatalf("%d of %d events delivered", len(got), len(want))
			}
		}
		assert.Equal(t, want, got)
		assert.Zero(t, cs.counts().writes(), "a follower writes nothing to the object store")
	})
}
