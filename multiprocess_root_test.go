package sessionstore

import (
	"context"
	"path"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestOpenMakesFoundRootDurable: two processes open a new root at once;
// the first makes its directories and, before it syncs their names, the
// second finds them there, creates a session and appends. A power cut
// then must not take the acknowledged session and event with the root's
// unsynced names: Open makes the root durable whoever created it.
//
// The state is what TestMultiProcessCrashPoints reached when its second
// Store ran hundreds of operations while the first was preempted between
// its MkdirAll and its SyncDir: every session of both was lost.
func TestOpenMakesFoundRootDurable(t *testing.T) {
	ctx := context.Background()
	for _, made := range []string{memRoot, path.Join(memRoot, sessionsDir)} {
		t.Run(path.Base(made), func(t *testing.T) {
			m := vfs.NewMemFS()
			if made != memRoot {
				// The root was durable already; only sessions/ is new.
				require.NoError(t, m.MkdirAll(memRoot, 0o700))
				require.NoError(t, m.SyncDir("/"))
			}
			// The other process's MkdirAll, its SyncDir still to come.
			require.NoError(t, m.MkdirAll(path.Join(memRoot, sessionsDir), 0o700))
			s := openMem(t, m, Options{})
			meta, err := s.Create(ctx, Meta{Name: "second process"})
			require.NoError(t, err)
			ev, err := s.Append(ctx, meta.ID, UserText("acknowledged"))
			require.NoError(t, err)

			for _, mode := range vfs.CrashModes {
				s2 := openMem(t, m.CrashClone(mode, 1), Options{})
				got, err := s2.Event(ctx, meta.ID, ev.ID)
				if assert.NoError(t, err, "%s: the acknowledged event after a power cut", mode) {
					assert.Equal(t, string(ev.Record), string(got.Record), mode.String())
				}
				require.NoError(t, s2.Close())
			}
			require.NoError(t, s.Close())
		})
	}
}
