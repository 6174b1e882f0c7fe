package sessionstore

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// lockHookFS runs before once, just before its first Lock of a path
// named name.
type lockHookFS struct {
	vfs.FS
	name   string
	once   sync.Once
	before func()
}

func (l *lockHookFS) Lock(name string, perm fs.FileMode) (io.Closer, error) {
	if name == l.name {
		l.once.Do(l.before)
	}
	return l.FS.Lock(name, perm)
}

// Another Store (as another process) opening a session that a Delete
// moves away between the open's check of session.json and its lock: the
// call reports ErrNotFound, as for any session that does not exist.
func TestReviewDeleteDuringOtherStoresOpen(t *testing.T) {

	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	defer s.Close()
	appendN(t, s, id, 2)
	require.NoError(t, s.Close())
	s1 := openMem(t, m, Options{})
	defer s1.Close()
	lf := &lockHookFS{FS: m, name: sessionPath(id, lockName)}
	lf.before = func() { require.NoError(t, s1.Delete(ctx, id)) }
	s2 := openMem(t, lf, Options{})
	defer s2.Close()
	_, err := s2.Load(ctx, id)
	assert.ErrorIs(t, err, ErrNotFound)
}

// A read-only Store that has the session loaded, after a writer deleted
// it: its calls report ErrNotFound.
func TestReviewDeleteUnderReadOnlyStore(t *testing.T) {

	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	defer s.Close()
	appendN(t, s, id, 3)
	r := openMem(t, m, Options{ReadOnly: true})
	defer r.Close()
	_, err := r.Load(ctx, id)
	require.NoError(t, err)
	require.NoError(t, s.Delete(ctx, id))
	_, err = r.Load(ctx, id)
	assert.ErrorIs(t, err, ErrNotFound, "Load")
	_, err = r.Meta(ctx, id)
	assert.ErrorIs(t, err, ErrNotFound, "Meta")
	_, err = r.Head(ctx, id)
	assert.ErrorIs(t, err, ErrNotFound, "Head")
}

// A Delete that fails before its move leaves the session whole, and as
// this Store had it: a pending Branch selection still chooses the next
// parent.
func TestReviewFailedDeleteKeepsBranchSelection(t *testing.T) {
	ctx := context.Background()
	m, s, id := memSession(t, Options{})
	defer s.Close()
	evs := appendN(t, s, id, 3)
	require.NoError(t, s.Branch(ctx, id, evs[0].ID))
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpRename && strings.HasPrefix(filepath.Base(path), id.String()+".") {
			return errors.New("injected rename failure")
		}
		return nil
	})
	require.Error(t, s.Delete(ctx, id))
	m.SetFault(nil)
	parent, branching, err := s.NextParent(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, evs[0].ID, parent, "the Branch selection survives a failed Delete")
	assert.True(t, branching)
}

// statHookFS runs after once, just after the first Stat of a path named
// name (after may use the FS: later Stats pass through).
type statHookFS struct {
	vfs.FS
	name  string
	fired atomic.Bool
	after func()
}

func (h *statHookFS) Stat(name string) (fs.FileInfo, error) {
	info, err := h.FS.Stat(name)
	if name == h.name && h.fired.CompareAndSwap(false, true) {
		h.after()
	}
	return info, err
}

// A Subscribe that found the session just before a Delete of the same
// Store moved it away still ends, with ErrNotFound.
func TestReviewSubscribeDuringDelete(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	hf := &statHookFS{FS: m}
	s := openMem(t, hf, Options{})
	defer s.Close()
	meta, err := s.Create(ctx, Meta{})
	require.NoError(t, err)
	id := meta.ID
	appendN(t, s, id, 1)
	var deleted chan struct{}
	hf.name = sessionPath(id, metaFile)
	hf.after = func() {
		deleted = make(chan struct{})
		go func() {
			defer close(deleted)
			assert.NoError(t, s.Delete(ctx, id))
		}()
		// Let the Delete run to its end before Subscribe goes on.
		for i := 0; i < 200; i++ {
			if _, err := m.Stat(sessionPath(id)); errors.Is(err, fs.ErrNotExist) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(5 * time.Millisecond)
	}
	sub, err := s.Subscribe(ctx, id)
	<-deleted
	if err != nil {
		assert.ErrorIs(t, err, ErrNotFound)
		return
	}
	defer sub.Close()
	select {
	case <-sub.done:
	case <-time.After(20 * time.Millisecond):
	}
	assert.ErrorIs(t, sub.Err(), ErrNotFound, "the subscription of a deleted session ends")
}

// A Delete that fails before its move leaves a session whose writes a
// failed sync stopped still stopped: the Store does not forget it.
func TestReviewFailedDeleteKeepsWriteFailure(t *testing.T) {
	// The per-session commit (JournalSize -1): its chunk's write and
	// sync are what this test fails, cuts or checks.
	ctx := context.Background()
	m, s, id := memSession(t, Options{JournalSize: -1})
	defer s.Close()
	appendN(t, s, id, 2)
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpSync && strings.Contains(path, chunksDir) {
			return errors.New("injected sync failure")
		}
		return nil
	})
	_, err := s.Append(ctx, id, UserText("unsynced"))
	require.Error(t, err)
	_, err = s.Append(ctx, id, UserText("refused"))
	require.ErrorIs(t, err, ErrSessionFailed, "precondition: writes stopped")
	m.SetFault(func(op vfs.Op, path string) error {
		if op == vfs.OpRename && strings.HasPrefix(filepath.Base(path), id.String()+".") {
			return errors.New("injected rename failure")
		}
		return nil
	})
	require.Error(t, s.Delete(ctx, id))
	m.SetFault(nil)
	_, err = s.Append(ctx, id, UserText("after the failed delete"))
	assert.ErrorIs(t, err, ErrSessionFailed, "writes stay stopped until the Store is reopened")
}
