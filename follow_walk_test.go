package sessionstore

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// walkLookFS stalls a lazy Load's walk when it opens sealed chunk
// stallAt, until a look at the log (reconcileLocal) lists the chunks
// directory, which it holds for a while: after fetchFS.forget dropped
// the deferred downloads of the session, before they are deferred again.
type walkLookFS struct {
	vfs.FS
	stallAt     string
	armed       atomic.Bool
	walkStalled chan struct{}
	lookEntered chan struct{}
}

func (p *walkLookFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if filepath.Base(name) == p.stallAt && p.armed.Load() && strings.Contains(string(debug.Stack()), "walkFromHead") && p.armed.CompareAndSwap(true, false) {
		close(p.walkStalled)
		select {
		case <-p.lookEntered:
		case <-time.After(10 * time.Second):
		}
	}
	return p.FS.OpenFile(name, flag, perm)
}

func (p *walkLookFS) ReadDir(name string) ([]string, error) {
	if strings.HasSuffix(name, chunksDir) && strings.Contains(string(debug.Stack()), "reconcileLocal") {
		select {
		case <-p.walkStalled:
			select {
			case <-p.lookEntered:
			default:
				close(p.lookEntered)
				time.Sleep(time.Second)
			}
		default:
		}
	}
	return p.FS.ReadDir(name)
}

// TestFollowerLoadBesideALook: a follower's lazy Load walks the
// session's chunks without its mutex, downloading the sealed chunks its
// cache lacks as it goes (fetchFS); a concurrent call's look at the log
// (reconcileLocal) drops every deferred download of the session
// (fetchFS.forget) before deferring them again, and a walk that reaches
// a chunk meanwhile finds no file: Load fails on a healthy session.
func TestFollowerLoadBesideALook(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	wopts := remoteOpts(obj)
	wopts.ChunkSize = 4 << 10
	a, _ := apiNewStore(t, wopts)
	m, err := a.Create(ctx, Meta{})
	require.NoError(t, err)
	var want []string
	for i := range 1000 { // about 25 chunks
		s := fmt.Sprintf("event %d %s", i, strings.Repeat("x", 40))
		apiAppend(t, a, m.ID, textEv(s))
		want = append(want, s)
	}
	require.NoError(t, a.Flush(ctx, m.ID))

	fopts, _ := followerOpts(obj)
	pfs := &walkLookFS{FS: vfs.Default, walkStalled: make(chan struct{}), lookEntered: make(chan struct{})}
	fopts.fs = pfs
	f, _ := apiNewStore(t, fopts)
	_, err = f.Head(ctx, m.ID) // opened, lazy, its sealed chunks deferred
	require.NoError(t, err)
	rev, err := f.Revision(ctx, m.ID)
	require.NoError(t, err)
	require.GreaterOrEqual(t, rev.Chunk, uint32(12))
	pfs.stallAt = chunkName(rev.Chunk-2) + sealedExt
	pfs.armed.Store(true)

	loaded := make(chan error, 1)
	var got []string
	go func() {
		evs, err := f.Load(ctx, m.ID)
		for _, e := range evs {
			got = append(got, string(e.Record))
		}
		loaded <- err
	}()
	select {
	case <-pfs.walkStalled:
	case <-time.After(10 * time.Second):
		t.Fatal("the Load did not walk into the chunk")
	}
	apiAppend(t, a, m.ID, textEv("new")) // the next look reconciles
	_, err = f.Head(ctx, m.ID)
	require.NoError(t, err)
	require.NoError(t, <-loaded, "a Load beside a look at the log")
	require.Len(t, got, len(want))
}
