package sessionstore

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// markerGateFS pauses the first Stat of the workspace marker (Reencrypt's
// check before it takes the session) until a snapshot is writing its
// contents (an open below blobs/), so that the snapshot marks the
// session between the check and the rewrite.
type markerGateFS struct {
	vfs.FS
	inStat  chan struct{}
	resume  chan struct{}
	stats   atomic.Int32
	resumed sync.Once
}

func (g *markerGateFS) Stat(name string) (fs.FileInfo, error) {
	if strings.HasSuffix(name, "/"+workspaceMarker) && g.stats.Add(1) == 1 {
		info, err := g.FS.Stat(name) // as it is now: no marker yet
		close(g.inStat)
		<-g.resume
		return info, err
	}
	return g.FS.Stat(name)
}

func (g *markerGateFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if strings.Contains(name, "/blobs/") && g.stats.Load() >= 1 {
		g.resumed.Do(func() {
			close(g.resume)
			time.Sleep(100 * time.Millisecond) // Reencrypt goes on to wait for the session
		})
	}
	return g.FS.OpenFile(name, flag, perm)
}

// TestWorkspaceReencryptBesideSnapshot: a Reencrypt whose first check
// ran before a snapshot marked the session refuses once it holds the
// session (the check under its lock), and the snapshot's contents read.
func TestWorkspaceReencryptBesideSnapshot(t *testing.T) {
	ctx := context.Background()
	g := &markerGateFS{FS: vfs.Default, inStat: make(chan struct{}), resume: make(chan struct{})}
	s, err := Open(t.TempDir(), &Options{Keys: testKeys(t, "local:gate", 4), fs: g})
	require.NoError(t, err)
	defer s.Close()
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	say(t, s, m.ID, "hello")
	reErr := make(chan error, 1)
	go func() { reErr <- s.Reencrypt(ctx, m.ID) }()
	<-g.inStat
	ev, err := s.RecordFiles(ctx, m.ID, "", FileWrite{Path: "a", Data: []byte("secret content")})
	require.NoError(t, err)
	rerr := <-reErr
	assert.ErrorIs(t, rerr, ErrWorkspaceReencrypt)
	ws, err := s.Files(ctx, m.ID, ev.ID)
	require.NoError(t, err)
	require.Len(t, ws.Files, 1)
	b, err := s.ReadFile(ctx, m.ID, ws.Files[0])
	require.NoError(t, err)
	assert.Equal(t, "secret content", string(b))
}
