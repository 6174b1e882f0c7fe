package sessionstore

import (
	"context"
	"io/fs"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// panicOnceFS panics at the first OpenFile after it is armed.
type panicOnceFS struct {
	vfs.FS
	armed atomic.Bool
}

func (p *panicOnceFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if p.armed.CompareAndSwap(true, false) {
		panic("opening " + name)
	}
	return p.FS.OpenFile(name, flag, perm)
}

// TestOpenPanicKeepsBranchSelection: a session closed with a pending
// Branch selection keeps it through an open that panics (the registry
// takes what it kept for the session before opening it): the next open
// still sends the next event to the selected parent.
func TestOpenPanicKeepsBranchSelection(t *testing.T) {
	ctx := context.Background()
	p := &panicOnceFS{FS: vfs.NewMemFS()}
	s := openMem(t, p, Options{})
	defer s.Close()
	m, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	a, err := s.Append(ctx, m.ID, UserText("a"))
	require.NoError(t, err)
	_, err = s.Append(ctx, m.ID, UserText("b"))
	require.NoError(t, err)
	require.NoError(t, s.Branch(ctx, m.ID, a.ID))
	require.NoError(t, s.CloseSession(ctx, m.ID))

	p.armed.Store(true)
	func() {
		defer func() { require.NotNil(t, recover(), "the open panicked") }()
		_, _ = s.Append(ctx, m.ID, UserText("lost"))
	}()
	require.False(t, p.armed.Load(), "the panic came from the open")

	c, err := s.Append(ctx, m.ID, UserText("c"))
	require.NoError(t, err)
	assert.Equal(t, a.ID, c.ParentID, "the Branch selection survived the panicking open")
	assert.Equal(t, a.ID, c.BranchFrom)
}
