package sessionstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/seam"
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
// A Load does not wait for each chunk as its walk reaches it: from
// HEAD's line, and from each line where the walk enters another chunk,
// it downloads side by side the next chunks the path crosses as far as
// their exit tables tell (prefetch; a table, seam.Exit, is computed when
// the chunk is sealed and carried by its seal record), at most
// prefetchAhead chunks ahead and up to the first compaction on the way
// (where a Load's context ends), so that a restore takes about one
// download's time for the path's chunks instead of their sum. The
// downloads a Load started and its walk did not need (a table was wrong)
// are cancelled when it returns: a few chunks' bytes at most, never an
// event.
//
// Everything else passes through. A download's error (ErrRemote, or a
// *CorruptionError naming the object's key) is the error of the open.
type fetchFS struct {
	vfs.FS
	obj     ObjectStore
	timeout time.Duration

	mu       sync.Mutex
	pending  map[string]sealedObject           // path of a sealed chunk not downloaded yet
	tables   map[string]map[uint32][]seam.Exit // by chunks directory: the exit tables of the log's sealed chunks
	inflight map[string]*fetchOp               // downloads under way
	prefixMu sync.Mutex                        // held while a fork's prefix copy is restored or read (fork.go)
	fetched  int64                             // bytes downloaded, for tests and benchmarks
}

// fetchOp is a download under way; err is set before done closes.
type fetchOp struct {
	done chan struct{}
	err  error
}

const (
	// prefetchers is how many chunks a prefetch downloads side by side.
	prefetchers = 8
	// prefetchAhead is how many chunks past the one it starts in a
	// prefetch looks ahead along the path; the walk's next crossing
	// looks further.
	prefetchAhead = 8
)

func newFetchFS(base vfs.FS, obj ObjectStore, timeout time.Duration) *fetchFS {
	return &fetchFS{FS: base, obj: obj, timeout: timeout, pending: map[string]sealedObject{},
		tables: map[string]map[uint32][]seam.Exit{}, inflight: map[string]*fetchOp{}}
}

// deferFetch records sealed chunk s, not downloaded, at path.
func (f *fetchFS) deferFetch(path string, s sealedObject) {
	f.mu.Lock()
	f.pending[path] = s
	f.mu.Unlock()
}

// deferred reports whether the sealed chunk at path waits to be
// downloaded as s (deferFetch), or is being downloaded.
func (f *fetchFS) deferred(path string, s sealedObject) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pending[path]
	return ok && p.Key == s.Key && p.Size == s.Size || f.inflight[path] != nil
}

// setTables records the exit tables of the sealed chunks of the chunks
// directory dir, as the log names them.
func (f *fetchFS) setTables(dir string, sealed []sealedObject) {
	t := map[uint32][]seam.Exit{}
	for _, s := range sealed {
		if s.Exits != nil {
			t[s.Chunk] = s.Exits
		}
	}
	f.mu.Lock()
	f.tables[dir] = t
	f.mu.Unlock()
}

// forget drops every deferred chunk under dir (a session's chunks
// directory), before a restore records them again, and waits for their
// downloads under way: none starts after it dropped them.
func (f *fetchFS) forget(dir string) {
	f.mu.Lock()
	for p := range f.pending {
		if filepath.Dir(p) == dir {
			delete(f.pending, p)
		}
	}
	delete(f.tables, dir)
	var ops []*fetchOp
	for p, op := range f.inflight {
		if filepath.Dir(p) == dir {
			ops = append(ops, op)
		}
	}
	f.mu.Unlock()
	for _, op := range ops {
		<-op.done
	}
	downloaded.Range(func(k, v any) bool {
		if p := k.(string); filepath.Dir(p) == dir && v.(downloadedChunk).f == f {
			downloaded.Delete(p)
		}
		return true
	})
}

// ensure downloads the deferred chunk at path, if it is one, or waits for
// its download under way (a prefetch's; when that fails, it downloads the
// chunk itself, so that the error is the caller's).
func (f *fetchFS) ensure(path string) error {
	for tries := 0; ; tries++ {
		f.mu.Lock()
		if op := f.inflight[path]; op != nil {
			f.mu.Unlock()
			<-op.done
			if op.err == nil || tries > 0 {
				return op.err
			}
			continue
		}
		s, ok := f.pending[path]
		if !ok {
			f.mu.Unlock()
			return nil // not deferred, or fetched meanwhile
		}
		op := &fetchOp{done: make(chan struct{})}
		f.inflight[path] = op
		f.mu.Unlock()
		f.fetch(context.Background(), path, s, op)
		return op.err
	}
}

// fetch downloads sealed chunk s to path for op, registered in inflight,
// within ctx and the call timeout.
func (f *fetchFS) fetch(ctx context.Context, path string, s sealedObject, op *fetchOp) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	n, err := downloadSealed(ctx, f.obj, f.FS, path, s, DefaultFileMode)
	if err == nil {
		// Before it is no longer pending: damage a read finds in it from
		// then on names the object's key (downloadedDamage).
		downloaded.Store(path, downloadedChunk{f, s})
	}
	f.mu.Lock()
	delete(f.inflight, path)
	if err != nil {
		op.err = &fs.PathError{Op: "fetch", Path: path, Err: err}
	} else {
		delete(f.pending, path)
		f.fetched += n
	}
	f.mu.Unlock()
	close(op.done)
}

// prefetch starts downloading, side by side (prefetchers at a time), the
// deferred chunks of dir (a session's chunks directory) that a path from
// the line at loc crosses, as far as their exit tables tell (seam.Chain)
// and at most prefetchAhead chunks past loc's: the walk that reads the
// path (walkFromHead) then finds each downloaded, or waits for its
// download (ensure), instead of downloading them one after the other as it
// reaches each. The tables are hints: a chunk downloaded that the path
// does not cross costs its bytes, nothing else. The downloads run within
// ctx, which the caller cancels when it no longer needs them; it returns
// a function that waits for them, which the caller calls before it
// returns (no download outlives the call that started it). Their errors
// are for ensure to report.
func (f *fetchFS) prefetch(ctx context.Context, dir string, loc eventline.Location) (wait func()) {
	type job struct {
		path string
		s    sealedObject
		op   *fetchOp
	}
	var jobs []job
	f.mu.Lock()
	chain := seam.Chain(f.tables[dir], loc)
	for _, c := range chain[:min(len(chain), 1+prefetchAhead)] {
		p := filepath.Join(dir, layout.SealedName(c))
		s, ok := f.pending[p]
		if !ok || f.inflight[p] != nil {
			continue
		}
		op := &fetchOp{done: make(chan struct{})}
		f.inflight[p] = op
		jobs = append(jobs, job{p, s, op})
	}
	f.mu.Unlock()
	if len(jobs) == 0 {
		return func() {}
	}
	next := make(chan job, len(jobs))
	for _, j := range jobs {
		next <- j // in the order the walk needs them
	}
	close(next)
	var wg sync.WaitGroup
	for range min(prefetchers, len(jobs)) {
		wg.Go(func() {
			for j := range next {
				f.fetch(ctx, j.path, j.s, j.op)
			}
		})
	}
	return wg.Wait
}

// headPrefetch is how a Load from HEAD (loadPath) asks the open of a
// session that restores it to start downloading HEAD's path as soon as
// the log is read (remoteFiles.acquire: from the newest sealed chunk's
// last line, HEAD's when no data objects follow the seals), side by side
// with the rest of the open (its marker's Create, the local files'
// rebuild), instead of when the walk starts. The Load waits for the
// downloads before it returns (wait), so that none outlives it.
type headPrefetch struct {
	ctx    context.Context // the downloads', cancelled by wait
	cancel context.CancelFunc
	mu     sync.Mutex
	waits  []func()
}

type headPrefetchKey struct{}

func withHeadPrefetch(ctx context.Context) (context.Context, *headPrefetch) {
	p := &headPrefetch{}
	p.ctx, p.cancel = context.WithCancel(ctx)
	return context.WithValue(ctx, headPrefetchKey{}, p), p
}

// headPrefetchOf returns the headPrefetch of ctx, if any.
func headPrefetchOf(ctx context.Context) *headPrefetch {
	p, _ := ctx.Value(headPrefetchKey{}).(*headPrefetch)
	return p
}

// start starts the prefetch of dir's chunks from the line at loc.
func (p *headPrefetch) start(f *fetchFS, dir string, loc eventline.Location) {
	wait := f.prefetch(p.ctx, dir, loc)
	p.mu.Lock()
	p.waits = append(p.waits, wait)
	p.mu.Unlock()
}

// wait cancels the downloads not done yet and waits for them all.
func (p *headPrefetch) wait() {
	p.cancel()
	p.mu.Lock()
	waits := p.waits
	p.waits = nil
	p.mu.Unlock()
	for _, w := range waits {
		w()
	}
}

// sealedHead returns where HEAD's line is in the log v when the newest
// chunk is sealed and no data object follows: in the newest sealed
// chunk's last line, which ends at its size.
func sealedHead(v *logView) (eventline.Location, bool) {
	if len(v.State.Sealed) == 0 || slices.ContainsFunc(v.State.Live, func(p logPiece) bool {
		_, sealed := v.State.SealedChunk(p.Chunk)
		return !sealed
	}) {
		return eventline.Location{}, false
	}
	newest := slices.MaxFunc(v.State.Sealed, func(a, b sealedObject) int { return cmp.Compare(a.Chunk, b.Chunk) })
	if newest.Size <= 0 {
		return eventline.Location{}, false
	}
	return eventline.Location{Chunk: newest.Chunk, Offset: newest.Size - 1}, true
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

// Remove removes name, and drops it if deferred: a download of it under
// way ends first (none starts once it is dropped), so that none renames
// its file into place after the removal.
func (f *fetchFS) Remove(name string) error {
	f.mu.Lock()
	_, deferred := f.pending[name]
	delete(f.pending, name)
	op := f.inflight[name]
	f.mu.Unlock()
	if op != nil {
		<-op.done
	}
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
