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

// renameGateFS calls before ahead of every Rename: a test holds one
// Store's rename there while another Store goes on.
type renameGateFS struct {
	vfs.FS
	before func(oldname, newname string)
}

func (g renameGateFS) Rename(oldname, newname string) error {
	g.before(oldname, newname)
	return g.FS.Rename(oldname, newname)
}

// TestOpenNewRootTwoProcessesAtOnce: two processes open a new root at
// once. The first writes the root's sessionstore.json and, before its
// rename, the second does the same, rename included. Both Opens succeed,
// each Store creates a session, and the root's configuration is whole.
//
// TestMultiProcessCrashPoints's Stores open an empty root at once; one
// of the two failed its Open in about 1 run in 25 under -race ("rename
// /store/sessionstore.json.tmp: file does not exist"): both write the
// same temporary file, and the first rename takes it from the other.
func TestOpenNewRootTwoProcessesAtOnce(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	atRename, goOn := make(chan struct{}), make(chan struct{})
	gated := renameGateFS{FS: m, before: func(_, newname string) {
		if path.Base(newname) == rootConfigName {
			close(atRename)
			<-goOn
		}
	}}
	type opened struct {
		s   *Store
		err error
	}
	first := make(chan opened, 1)
	go func() {
		o := Options{fs: gated}
		s, err := Open(memRoot, &o)
		first <- opened{s, err}
	}()
	reached(t, atRename, "the first Store's rename of "+rootConfigName)
	o := Options{fs: m}
	second, err := Open(memRoot, &o)
	require.NoError(t, err, "the second process's Open")
	close(goOn)
	got := <-first
	require.NoError(t, got.err, "the first process's Open")
	for i, s := range []*Store{got.s, second} {
		_, err := s.Create(ctx, Meta{Name: "a session"})
		assert.NoError(t, err, "Store %d", i+1)
		require.NoError(t, s.Close())
	}
	s := openMem(t, m.CrashClone(vfs.KeepSynced, 0), Options{})
	list, err := s.List(ctx)
	require.NoError(t, err, "the root opens after a power cut")
	assert.Len(t, list, 2)
	require.NoError(t, s.Close())
}
