package sessionstore

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// sealedOpens counts the opens of sealed chunk files.
type sealedOpens struct {
	vfs.FS
	n atomic.Int64
}

func (f *sealedOpens) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if strings.HasSuffix(name, sealedExt) {
		f.n.Add(1)
	}
	return f.FS.OpenFile(name, flag, perm)
}

// vouchedSession writes a session of n events through a Store on obj with
// 4 KiB chunks in a directory of its own, closed (a clean release: its
// remote.json vouches for its sealed chunks); it returns the directory,
// the session, its events and its chunks directory's sealed files.
func vouchedSession(t *testing.T, obj ObjectStore, n int) (string, Meta, []Event, []string) {
	t.Helper()
	dir := t.TempDir()
	opts := remoteOpts(obj)
	opts.ChunkSize = 4 << 10
	a, err := Open(dir, opts)
	require.NoError(t, err)
	m, err := a.Create(context.Background(), Meta{})
	require.NoError(t, err)
	for i := range n {
		apiAppend(t, a, m.ID, textEv(fmt.Sprintf("event %d %s", i, strings.Repeat("v", 80))))
	}
	want, err := a.Load(context.Background(), m.ID)
	require.NoError(t, err)
	require.NoError(t, a.Close())
	sealed, err := filepath.Glob(filepath.Join(layout.SessionDir(dir, m.ID), chunksDir, "*"+sealedExt))
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(sealed), 3, "several sealed chunks")
	return dir, m, want, sealed
}

// editRemoteState rewrites session id's remote.json in dir through edit.
func editRemoteState(t *testing.T, dir string, m Meta, edit func(*localRemoteState)) {
	t.Helper()
	path := filepath.Join(layout.SessionDir(dir, m.ID), remoteStateFile)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var ls localRemoteState
	require.NoError(t, json.Unmarshal(b, &ls))
	edit(&ls)
	b, err = json.Marshal(ls)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, b, 0o644))
}

// TestRemoteReopenTrustsVouchedSealedChunks: reopening a session on the
// directory that released it cleanly reads at most one of its sealed
// chunk files (the newest, which the lazy open reads; remote.json vouches
// for them all), where a remote.json without the
// vouching (an older one) makes the open read each one's footer; both
// load the session's events.
func TestRemoteReopenTrustsVouchedSealedChunks(t *testing.T) {
	ctx := context.Background()
	obj := newMemObjects()
	dir, m, want, sealed := vouchedSession(t, obj, 150)

	for _, tc := range []struct {
		name    string
		edit    func(*localRemoteState)
		atLeast int64 // sealed chunk opens of the open
	}{
		{"vouched", nil, 0},
		{"older remote.json", func(ls *localRemoteState) { ls.SealedThrough, ls.SealedDigest = 0, "" }, int64(len(sealed))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.edit != nil {
				editRemoteState(t, dir, m, tc.edit)
			}
			fsys := &sealedOpens{FS: vfs.Default}
			opts := remoteOpts(obj)
			opts.fs = fsys
			s, err := Open(dir, opts)
			require.NoError(t, err)
			_, err = s.Head(ctx, m.ID)
			require.NoError(t, err)
			opened := fsys.n.Load()
			if tc.atLeast == 0 {
				assert.LessOrEqual(t, opened, int64(1), "sealed chunk files opened by the open")
			} else {
				assert.GreaterOrEqual(t, opened, tc.atLeast, "sealed chunk files opened by the open")
			}
			got, err := s.Load(ctx, m.ID)
			require.NoError(t, err)
			assert.Equal(t, want, got)
			require.NoError(t, s.Close())
		})
	}
}

// TestRemoteVouchingIsBounded: remote.json vouches only for the sealed
// chunks the log held at the release that wrote it. A sealed chunk file
// the directory holds beyond them, or any when the log's sealed chunks
// do not match its digest, is read and checked as before: a wrong one is
// downloaded again, and the session loads.
func TestRemoteVouchingIsBounded(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		// spoil makes the directory hold a wrong sealed chunk file, of a
		// chunk of the log, that its remote.json must not vouch for.
		spoil func(t *testing.T, obj ObjectStore, dir string, m Meta, sealed []string) (wantMore int)
	}{
		{"digest not the log's", func(t *testing.T, _ ObjectStore, dir string, m Meta, sealed []string) int {
			require.NoError(t, os.WriteFile(sealed[1], []byte("not the log's chunk"), 0o644))
			editRemoteState(t, dir, m, func(ls *localRemoteState) { ls.SealedDigest = strings.Repeat("0", 64) })
			return 0
		}},
		{"beyond the vouched chunks", func(t *testing.T, obj ObjectStore, dir string, m Meta, sealed []string) int {
			// Another Store seals more chunks; this directory gets a
			// wrong file for the first of them.
			opts := remoteOpts(obj)
			opts.ChunkSize = 4 << 10
			b, _ := apiNewStore(t, opts)
			for i := range 60 {
				apiAppend(t, b, m.ID, textEv(fmt.Sprintf("more %d %s", i, strings.Repeat("w", 80))))
			}
			require.NoError(t, b.Close())
			next := filepath.Join(filepath.Dir(sealed[0]), chunkName(uint32(len(sealed)))+sealedExt)
			require.NoFileExists(t, next)
			require.NoError(t, os.WriteFile(next, []byte("not the log's chunk"), 0o644))
			return 60
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := newMemObjects()
			dir, m, want, sealed := vouchedSession(t, obj, 150)
			more := tc.spoil(t, obj, dir, m, sealed)
			s := apiOpen(t, dir, remoteOpts(obj))
			got, err := s.Load(ctx, m.ID)
			require.NoError(t, err)
			require.Len(t, got, len(want)+more)
			assert.Equal(t, want, got[:len(want)])
			_, err = s.Verify(ctx, m.ID)
			assert.NoError(t, err, "every chunk of the session reads")
		})
	}
}
