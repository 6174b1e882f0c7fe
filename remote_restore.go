package sessionstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sessionstore/sessionstore/internal/chunk"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/recovery"
	"github.com/sessionstore/sessionstore/internal/seam"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// reconcileLocal makes a remote session's directory hold exactly what
// the log view v holds, before the session opens from it (see remote.go):
//
//   - a sealed chunk of the log that the directory lacks (or holds with
//     another size) is downloaded whole when a read first needs it, or
//     ahead of a Load's walk that will (fetchFS), its structure checked
//     before it takes its name and each block by the read that first
//     needs it; a bad object is a
//     *CorruptionError naming its key (downloadedDamage); a sealed chunk
//     file the directory holds is the log's when remote.json vouches for
//     it (localRemoteState: no read), else when its footer states the
//     log's size;
//   - each chunk the log holds as data objects is rebuilt from them,
//     fetching only the objects newer than remote.json says the directory
//     held (the directory never loses what it held then), and cut to the
//     log's end: bytes after it were never acknowledged;
//   - chunks the log does not hold are removed (never acknowledged);
//   - session.json and the lanes file become the log's (a lanes file the
//     log does not hold goes: its change was never acknowledged);
//   - when a chunk changed, index.jsonl and HEAD go: the open rebuilds
//     them from the chunks.
//
// Each file written is synced; a crash in the middle leaves files the
// next open reconciles the same way.
//
// With head (a Load from HEAD is opening the session), the downloads of
// HEAD's path start once the sealed chunks are recorded, before the rest
// of the rebuild (which reads HEAD's chunk: recovery.SealedTip), when
// HEAD is the newest sealed chunk's last line (sealedHead).
func (r *remoteFiles) reconcileLocal(ctx context.Context, v *logView, head *headPrefetch) error {
	fsys := r.FS
	cdir := r.ChunkDir()
	for _, d := range []string{cdir, filepath.Join(r.Dir, blobsDir)} {
		if err := durable.MkdirAll(fsys, d, r.DirPerm); err != nil {
			return err
		}
	}
	var trusted uint64
	vouched := func(uint32) bool { return false } // sealed chunk files trusted by name (localRemoteState)
	// A follower's cache as its previous look left it (follow.go), or
	// what remote.json records.
	ls := r.trust
	if ls == nil {
		if b, err := readFile(fsys, filepath.Join(r.Dir, remoteStateFile), nil, 4<<10); err == nil {
			ls = new(localRemoteState)
			if json.Unmarshal(b, ls) != nil {
				ls = nil
			}
		}
	}
	if ls != nil && ls.Seq <= v.NewestSeq {
		trusted = ls.Seq
		if ls.SealedDigest != "" && sealedDigest(v.State.Sealed, ls.SealedThrough) == ls.SealedDigest {
			through := ls.SealedThrough
			vouched = func(c uint32) bool { return c <= through }
		}
	}
	changed := trusted == 0 || trusted < v.NewestSeq
	// structural: a change other than data appended to plain chunks
	// (which a follower's open session reads from the chunks' tail
	// without the derived files: appendOnly).
	structural := false
	r.derivedLag = false
	if !r.appendOnly {
		r.fetch.forget(cdir) // waits for the downloads under way here
	}
	// (A follower's later look keeps the deferred downloads: a walk of
	// the open session, which holds no mutex, may be reading them.)
	local, temps, err := localChunks(r.fetch.FS, cdir)
	if err != nil {
		return err
	}
	for _, name := range temps {
		if r.appendOnly {
			break // a download under way may be writing it
		}
		if err := removeIfExists(fsys, filepath.Join(cdir, name)); err != nil {
			return err
		}
	}
	want := map[uint32]bool{}
	r.tail = localTail{}
	tailChunk, keep := r.tailChunk(v, local)

	for _, s := range v.State.Sealed {
		want[s.Chunk] = true
		path := r.ChunkPath(s.Chunk)
		l := local[s.Chunk]
		if l.sealed && (vouched(s.Chunk) || l.plainSizeOfSealed() == s.Size) {
			if l.plain {
				if err := removeIfExists(fsys, path); err != nil {
					return err
				}
			}
			continue
		}
		if r.appendOnly && !l.sealed && !l.plain && r.fetch.deferred(path+sealedExt, s) {
			continue // a follower's earlier look deferred it
		}
		if l.sealed { // another size: not this chunk's sealing
			if err := removeIfExists(fsys, path+sealedExt); err != nil {
				return err
			}
		}
		// Downloaded when first read (fetchFS): recorded before the
		// plain file goes, so that a reader of the chunk finds one or
		// the other.
		r.fetch.deferFetch(path+sealedExt, s)
		if err := removeIfExists(fsys, path); err != nil {
			return err
		}
		changed, structural = true, true
	}
	r.fetch.setTables(cdir, v.State.Sealed)
	if head != nil {
		if loc, ok := sealedHead(v); ok {
			head.start(r.fetch, cdir, loc)
		}
	}

	pieces := livePieces(v)
	for c, ps := range pieces {
		want[c] = true
		slices.SortFunc(ps, func(a, b logPiece) int { return cmp.Compare(a.Off, b.Off) })
		var end int64
		for _, p := range ps {
			if p.Off != end {
				return corruptf(seam.LogKey(r.ID, p.Seq), 0, "data object for chunk %d at offset %d, where the chunk's data so far ends at %d", c, p.Off, end)
			}
			end += int64(p.Len)
		}
		l := local[c]
		newer := slices.ContainsFunc(ps, func(p logPiece) bool { return p.Seq > trusted })
		if l.sealed {
			if !newer && l.plainSizeOfSealed() == end {
				continue
			}
			if err := removeIfExists(fsys, r.ChunkPath(c)+sealedExt); err != nil {
				return err
			}
			changed, structural = true, true
		}
		wrote, rewrote, err := r.rebuildPlain(ctx, v, c, ps, trusted, end, keep && c == tailChunk)
		if err != nil {
			return err
		}
		changed = changed || wrote
		structural = structural || rewrote
	}
	if _, ok := pieces[tailChunk]; keep && !ok {
		// The newest chunk, started after every object before it was
		// stored (settleLocal), none of its own yet.
		if _, _, err := r.rebuildPlain(ctx, v, tailChunk, nil, trusted, 0, true); err != nil {
			return err
		}
	}
	if r.tail.End > r.tail.Off {
		// Acknowledged bytes past the log, kept for acquire to store:
		// the derived files are rebuilt with them, as if stored.
		want[r.tail.Chunk] = true
		changed, structural = true, true
		pieces = maps.Clone(pieces)
		pieces[r.tail.Chunk] = append(slices.Clip(pieces[r.tail.Chunk]), logPiece{Chunk: r.tail.Chunk, Off: r.tail.Off, Len: int(r.tail.End - r.tail.Off)})
	}

	for c := range local {
		if want[c] {
			continue
		}
		for _, name := range []string{chunkName(c), chunkName(c) + sealedExt} {
			if err := removeIfExists(fsys, filepath.Join(cdir, name)); err != nil {
				return err
			}
		}
		changed, structural = true, true
	}

	switch {
	case changed && r.appendOnly && !structural:
		r.derivedLag = true // the follower rebuilds them at release
	case changed:
		if err := r.rebuildDerived(v, pieces); err != nil {
			return err
		}
	}
	old, err := readFile(fsys, filepath.Join(r.Dir, metaFile), nil, maxMetaSize)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if !bytes.Equal(old, v.Meta) {
		if err := durable.ReplaceFile(fsys, r.Dir, metaFile, v.Meta, r.Perm); err != nil {
			return err
		}
	}
	return r.reconcileLanes(v.State.Lanes)
}

// reconcileLanes makes the local lanes file hold want, the log's (none
// when want is nil).
func (r *remoteFiles) reconcileLanes(want []byte) error {
	fsys := r.FS
	old, err := readFile(fsys, filepath.Join(r.Dir, lanesFile), nil, maxLanesSize)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	case want == nil && err == nil:
		return removeIfExists(fsys, filepath.Join(r.Dir, lanesFile))
	case want != nil && !bytes.Equal(old, want):
		return durable.ReplaceFile(fsys, r.Dir, lanesFile, want, r.Perm)
	}
	return nil
}

// localChunk is what a session directory holds of one chunk.
type localChunkFiles struct {
	plain     bool
	plainSize int64
	sealed    bool
	fsys      vfs.FS
	path      string // the sealed chunk's
}

// plainSizeOfSealed returns the plain size the sealed chunk file's footer
// states, -1 when it cannot be read. It opens the file: reconcileLocal
// asks only for the files remote.json does not vouch for.
func (l localChunkFiles) plainSizeOfSealed() int64 {
	zr, err := zchunk.Open(l.fsys, l.path)
	if err != nil {
		return -1
	}
	defer zr.Close()
	return zr.Size()
}

// localChunks returns the chunk files in dir (reading none), and the
// temporary files of downloads a crash interrupted (layout.DownloadTemp).
func localChunks(fsys vfs.FS, dir string) (map[uint32]localChunkFiles, []string, error) {
	names, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	out := map[uint32]localChunkFiles{}
	var temps []string
	for _, name := range names {
		if strings.HasSuffix(name, layout.DownloadTemp) {
			temps = append(temps, name)
			continue
		}
		n, ok := parseChunkName(name)
		if !ok {
			continue
		}
		l := out[n]
		path := filepath.Join(dir, name)
		if filepath.Ext(name) == sealedExt {
			l.sealed, l.fsys, l.path = true, fsys, path
		} else {
			info, err := fsys.Stat(path)
			if err != nil {
				return nil, nil, err
			}
			l.plain, l.plainSize = true, info.Size()
		}
		out[n] = l
	}
	return out, temps, nil
}

// downloadSealed fetches sealed chunk s into path (a chunk's local
// sealed name, in fsys without the fetching layer) as
// seam.DownloadSealed does, its damage a *CorruptionError. A leftover
// temporary file is removed by reconciliation; reconcileLocal trusts a
// sealed chunk whose footer reads with the log's size, reading no block.
// A leftover temporary file (a download a crash interrupted) is removed
// by the next reconciliation (localChunks lists it).
func downloadSealed(ctx context.Context, obj ObjectStore, fsys vfs.FS, path string, s sealedObject, perm os.FileMode) (int64, error) {
	n, err := seam.DownloadSealed(ctx, remoteObjects{obj}, fsys, path, s, perm)
	return n, damage(err)
}

// rebuildPlain makes chunk c's plain file hold exactly the data objects
// ps, which end at end: objects up to trusted are in the file already
// when it is long enough, the others are fetched (or taken from v). It
// reports whether it changed the file's data. With keep (the chunk of
// reconcileLocal's keepTail), when the file held every object's bytes,
// the whole records after end stay (r.tail), and only what follows them
// (a torn write, free space) is cut. The file is synced, since
// the next clean release records in remote.json that the directory
// holds it, and a later open trusts what the file holds up to there; and
// the name of a file it makes is, so that its bytes are never on the disk
// without a name.
func (r *remoteFiles) rebuildPlain(ctx context.Context, v *logView, c uint32, ps []logPiece, trusted uint64, end int64, keep bool) (wrote, rewrote bool, err error) {
	fsys := r.FS
	path := r.ChunkPath(c)
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE, r.Perm)
	if err != nil {
		return false, false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return false, false, err
	}
	size := info.Size()
	var need []logPiece
	for _, p := range ps {
		if p.Seq > trusted || size < p.Off+int64(p.Len) {
			need = append(need, p)
		}
	}
	data := make([][]byte, len(need))
	errs := make([]error, len(need))
	forEach(len(need), 16, func(_, i int) {
		p := need[i]
		if b, ok := v.Payloads[p.Seq]; ok {
			data[i] = b
			return
		}
		key := seam.LogKey(r.ID, p.Seq)
		b, err := r.Obj.Get(ctx, key, 0, -1)
		if errors.Is(err, ErrObjectNotFound) {
			// The log's state names it, and no log object is ever
			// deleted: the object store lost it.
			errs[i] = corruptf(key, 0, "data object of chunk %d at %d (%d bytes) is missing", c, p.Off, p.Len)
			return
		}
		if err != nil {
			errs[i] = seam.RemoteErr("get", key, err)
			return
		}
		h, payload, err := decodeLogObject(key, b)
		if err == nil && isDeleteMarker(h) {
			// A Delete replaced it since the log was read (remote_delete.go,
			// step 4): the session is gone, as the open would have found
			// had it read the log a moment later.
			err = fmt.Errorf("%w: session %s was deleted", ErrNotFound, r.ID)
		} else if err == nil && (h.Kind != logData || h.Chunk != c || h.Off != p.Off || h.Len != p.Len) {
			err = corruptf(key, 0, "data object is %s of chunk %d at %d (%d bytes), the log's state says chunk %d at %d (%d bytes)", h.Kind, h.Chunk, h.Off, h.Len, c, p.Off, p.Len)
		}
		data[i], errs[i] = payload, err
	})
	for _, err := range errs {
		if errors.Is(err, ErrNotFound) {
			return false, false, err // deleted: each object tells the same
		}
	}
	if err := errors.Join(errs...); err != nil {
		var ce *CorruptionError
		if errors.As(err, &ce) && r.Moved(ctx, v.NewestSeq) {
			// Another Store wrote since the log was read: it may have
			// sealed the chunk and replaced its data objects by
			// tombstones. The open reads the log again.
			return false, false, fmt.Errorf("%w: %w", errLogMoved, err)
		}
		return false, false, err
	}
	changed := false
	buf := make([]byte, 0, 64<<10)
	for i, p := range need {
		if size >= p.Off+int64(p.Len) {
			buf = buf[:p.Len]
			if _, err := f.ReadAt(buf, p.Off); err == nil && bytes.Equal(buf, data[i]) {
				continue
			}
		}
		if _, err := f.WriteAt(data[i], p.Off); err != nil {
			return false, false, err
		}
		changed = true
		rewrote = rewrote || p.Off < size
	}
	if keep && !changed && size > end {
		kept, err := recordsEnd(f, c, end, size)
		if err != nil {
			return false, false, err
		}
		r.tail = localTail{Chunk: c, Off: end, End: kept}
		end = kept
	}
	if size > end {
		// A block at a time: the file may be of any size.
		if !zerosFrom(f, end, size) {
			changed, rewrote = true, true
		}
		if err := f.Truncate(end); err != nil {
			return false, false, err
		}
	}
	if err := f.Sync(); err != nil {
		return false, false, fmt.Errorf("sessionstore: sync %s: %w", path, err)
	}
	if size == 0 {
		if err := fsys.SyncDir(r.ChunkDir()); err != nil {
			return false, false, err
		}
	}
	return changed, rewrote, nil
}

// localTail is what reconcileLocal kept of the newest local chunk past
// the log (keepTail): Chunk's whole records from Off to End, acknowledged
// by a lease of this Store that acknowledged after the local sync, which
// acquire stores (storeTail).
type localTail struct {
	Chunk    uint32
	Off, End int64
}

// tailChunk returns the chunk whose bytes past the log reconcileLocal
// keeps (keepTail): the newest local chunk, plain, when no chunk of the
// log is newer and the log holds it as data objects or not at all (a
// lease that acknowledged after the local sync started it after every
// object before it was stored, and sealed nothing before that:
// settleLocal). ok is false when nothing is kept.
func (r *remoteFiles) tailChunk(v *logView, local map[uint32]localChunkFiles) (c uint32, ok bool) {
	if !r.keepTail || len(local) == 0 {
		return 0, false
	}
	// The newest chunk, whatever its state: an older plain one is never
	// the tail when a newer chunk exists.
	c = slices.Max(slices.Collect(maps.Keys(local)))
	if l := local[c]; !l.plain || l.sealed {
		return 0, false
	}
	for _, s := range v.State.Sealed {
		if s.Chunk >= c {
			return 0, false
		}
	}
	for _, p := range v.State.Live {
		if p.Chunk > c {
			return 0, false
		}
	}
	return c, true
}

// recordsEnd returns where the whole, valid records of chunk c in f from
// off (a record's start) up to size end: the first line that is not one
// (a torn write, free space) ends them.
func recordsEnd(f io.ReaderAt, c uint32, off, size int64) (int64, error) {
	errStop := errors.New("stop")
	w, err := walkRecords(f, c, off, size, true, func(header, payload, location) error { return nil },
		func(bad, next int64, err error) error { return errStop })
	if err != nil && !errors.Is(err, errStop) {
		return 0, err
	}
	return w.End, nil
}

// zerosFrom reports whether f holds only zero bytes from off to end, read
// a block at a time.
func zerosFrom(f vfs.File, off, end int64) bool {
	buf := make([]byte, min(end-off, 64<<10))
	for off < end {
		n, err := f.ReadAt(buf[:min(int64(len(buf)), end-off)], off)
		if chunk.ZeroTail(buf[:n]) != n || err != nil && (!errors.Is(err, io.EOF) || off+int64(n) < end) {
			return false
		}
		off += int64(n)
	}
	return true
}

// rebuildDerived rewrites index.jsonl and HEAD after reconcileLocal
// changed the chunks, so that the session opens lazily (lazy.go) when the
// log allows it: every chunk but the newest sealed, and the newest plain
// (index.jsonl then holds its lines, the last one HEAD) or sealed
// (index.jsonl empty, HEAD its last record). Otherwise both go, and the
// open rebuilds them from every chunk (reconciliation).
func (r *remoteFiles) rebuildDerived(v *logView, pieces map[uint32][]logPiece) error {
	fsys := r.FS
	for _, name := range []string{indexName, headfile.Name, headfile.Temp} {
		if err := removeIfExists(fsys, filepath.Join(r.Dir, name)); err != nil {
			return err
		}
	}
	var newest uint32
	for _, s := range v.State.Sealed {
		newest = max(newest, s.Chunk)
	}
	for c := range pieces {
		newest = max(newest, c)
	}
	if len(pieces) > 1 || len(pieces) == 1 && pieces[newest] == nil || len(v.State.Sealed)+len(pieces) != int(newest)+1 {
		return nil // an older chunk is plain, or one is missing: reconcile
	}
	var lines []byte
	var head entry
	if len(pieces) == 1 {
		var end int64 // where the log's data of the chunk ends
		for _, p := range pieces[newest] {
			end = max(end, p.Off+int64(p.Len))
		}
		b, err := readFile(fsys, r.ChunkPath(newest), nil, end)
		if err != nil {
			return err
		}
		var es []entry
		_, err = walkRecords(bytes.NewReader(b), newest, 0, int64(len(b)), true, func(h header, p payload, loc location) error {
			es = append(es, eventline.NewEntry(h, p, loc))
			return nil
		}, func(bad, next int64, err error) error { return err })
		if err != nil || len(es) == 0 {
			return nil // reconciliation reports it
		}
		lines, head = index.AppendLines(nil, es), es[len(es)-1]
	}
	if err := durable.ReplaceFile(fsys, r.Dir, indexName, lines, r.Perm); err != nil {
		return err
	}
	if len(pieces) == 0 {
		tip, ok := recovery.SealedTip(fsys, r.Dir, newest)
		if !ok {
			return nil
		}
		head = tip
	}
	return writeHead(fsys, r.Dir, head.ID, r.Perm)
}

// errLogMoved reports an open whose reading or reconciliation found the
// log changed since it listed it (seam.ErrLogMoved): acquire reads it
// again, a fork's restore a few times.
var errLogMoved = seam.ErrLogMoved
