package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// fetchFS is the filesystem of a Store with a remote: the local one, in
// which a sealed chunk a restore did not download (reconcileLocal) is
// listed in its directory as if it were there and downloaded, checked and
// stored under its name when it is first opened or stat'ed. So a restored
// session opens and loads its active path from the chunks the path
// crosses: the lazy open (lazy.go) finds every chunk listed, and Load
// follows the parent locations of the path's lines into the chunks that
// hold them. A call that loads the whole index (reconciliation, Verify)
// opens every chunk, and so downloads the rest.
//
// Everything else passes through. A download's error (ErrRemote, or a
// *CorruptionError naming the object's key) is the error of the open.
type fetchFS struct {
	vfs.FS
	obj     ObjectStore
	timeout time.Duration

	mu       sync.Mutex
	pending  map[string]sealedObject // path of a sealed chunk not downloaded yet
	fetchMu  sync.Mutex              // one download at a time
	prefixMu sync.Mutex              // held while a fork's prefix copy is restored or read (fork.go)
	fetched  int64                   // bytes downloaded, for tests and benchmarks
}

func newFetchFS(base vfs.FS, obj ObjectStore, timeout time.Duration) *fetchFS {
	return &fetchFS{FS: base, obj: obj, timeout: timeout, pending: map[string]sealedObject{}}
}

// defer_ records sealed chunk s, not downloaded, at path.
func (f *fetchFS) deferFetch(path string, s sealedObject) {
	f.mu.Lock()
	f.pending[path] = s
	f.mu.Unlock()
}

// forget drops every deferred chunk under dir (a session's chunks
// directory), before a restore records them again.
func (f *fetchFS) forget(dir string) {
	f.mu.Lock()
	for p := range f.pending {
		if filepath.Dir(p) == dir {
			delete(f.pending, p)
		}
	}
	f.mu.Unlock()
	downloaded.Range(func(k, v any) bool {
		if p := k.(string); filepath.Dir(p) == dir && v.(downloadedChunk).f == f {
			downloaded.Delete(p)
		}
		return true
	})
}

func (f *fetchFS) lookup(path string) (sealedObject, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.pending[path]
	return s, ok
}

// ensure downloads the deferred chunk at path, if it is one.
func (f *fetchFS) ensure(path string) error {
	if _, ok := f.lookup(path); !ok {
		return nil
	}
	f.fetchMu.Lock()
	defer f.fetchMu.Unlock()
	s, ok := f.lookup(path)
	if !ok {
		return nil // fetched meanwhile
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	n, err := downloadSealed(ctx, f.obj, f.FS, path, s, DefaultFileMode)
	if err != nil {
		return &fs.PathError{Op: "fetch", Path: path, Err: err}
	}
	f.mu.Lock()
	delete(f.pending, path)
	f.fetched += n
	f.mu.Unlock()
	downloaded.Store(path, downloadedChunk{f, s})
	return nil
}

// downloaded maps the local path of each sealed chunk a fetchFS of this
// process downloaded to where it came from. A download checks a chunk's
// structure only (seam.DownloadSealed); its blocks are checked when first
// read, so damage in one is found after the download, by a read:
// sealedErr then reports it under the object's key (the local file holds
// the object's bytes, at the same offsets), and removes the local copy and
// defers its download again, so that a copy damaged on its way or on the
// local disk is downloaded anew by the next open of the session (the
// damaged session refuses calls until then; one whose object itself is
// damaged keeps failing, naming the key). A chunk downloaded by an earlier
// process is not in the map: its damage names the local file.
var downloaded sync.Map // string -> downloadedChunk

type downloadedChunk struct {
	f *fetchFS
	s sealedObject
}

// downloadedDamage returns the damage fe found in a downloaded sealed
// chunk as a *CorruptionError naming its object's key, after removing the
// local copy and deferring its download again; nil if fe's file is not a
// downloaded chunk.
func downloadedDamage(fe *zchunk.FormatError) *CorruptionError {
	v, ok := downloaded.LoadAndDelete(fe.Path)
	if !ok {
		return nil
	}
	d := v.(downloadedChunk)
	if err := d.f.FS.Remove(fe.Path); err == nil || errors.Is(err, os.ErrNotExist) {
		d.f.deferFetch(fe.Path, d.s)
	}
	return &CorruptionError{Path: d.s.Key, Offset: fe.Offset, Err: fmt.Errorf("sealed chunk %d (downloaded to %s): %w", d.s.Chunk, fe.Path, fe.Err)}
}

func (f *fetchFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	if err := f.ensure(name); err != nil {
		return nil, err
	}
	return f.FS.OpenFile(name, flag, perm)
}

func (f *fetchFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.ensure(name); err != nil {
		return nil, err
	}
	return f.FS.Stat(name)
}

func (f *fetchFS) ReadDir(name string) ([]string, error) {
	names, err := f.FS.ReadDir(name)
	if err != nil {
		return names, err
	}
	f.mu.Lock()
	added := false
	for p := range f.pending {
		if filepath.Dir(p) == name && !slices.Contains(names, filepath.Base(p)) {
			names = append(names, filepath.Base(p))
			added = true
		}
	}
	f.mu.Unlock()
	if added {
		slices.Sort(names)
	}
	return names, nil
}

func (f *fetchFS) Remove(name string) error {
	f.mu.Lock()
	_, deferred := f.pending[name]
	delete(f.pending, name)
	f.mu.Unlock()
	downloaded.Delete(name)
	err := f.FS.Remove(name)
	if deferred && errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

func (f *fetchFS) Rename(oldname, newname string) error {
	if err := f.ensure(oldname); err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.pending, newname)
	f.mu.Unlock()
	downloaded.Delete(oldname)
	downloaded.Delete(newname)
	return f.FS.Rename(oldname, newname)
}
