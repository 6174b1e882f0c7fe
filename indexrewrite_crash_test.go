package sessionstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/index"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// lateCutFS is a MemFS on which a truncation of index.jsonl (or of its
// temporary file) that drops bytes may reach the disk after the writes
// made since, or not at all before the power is lost, until the file is
// synced: POSIX orders neither against the other. vfs.MemFS models a cut
// file as its synced content whole or the cut (a truncation frees the
// blocks past it), never as the writes after the cut laid over the old
// bytes, which is what a file system that overwrote the old blocks in
// place and had not committed the new size yet would leave; lateCut adds
// that state to a crash clone. Everything else is the MemFS's.
type lateCutFS struct {
	*vfs.MemFS
	mu sync.Mutex
	// cut holds, per path, the bytes the file had before its unsynced
	// truncations (the old content, overlaid with what each later
	// truncation dropped).
	cut map[string][]byte
}

func newLateCutFS() *lateCutFS {
	return &lateCutFS{MemFS: vfs.NewMemFS(), cut: map[string][]byte{}}
}

// lateCutFile is a file of a lateCutFS.
type lateCutFile struct {
	vfs.File
	fs   *lateCutFS
	path string
}

// lateCutPath reports whether the truncations of path can be late:
// index.jsonl and the temporary file it is replaced through.
func lateCutPath(path string) bool {
	base := filepath.Base(path)
	return base == indexName || base == indexName+".tmp"
}

// overlay returns top with the bytes of base past its end after it.
func overlay(top, base []byte) []byte {
	if len(base) <= len(top) {
		return top
	}
	return append(append([]byte(nil), top...), base[len(top):]...)
}

// noteCut records that path, which held before, was truncated to size
// and not synced since.
func (l *lateCutFS) noteCut(path string, before []byte, size int64) {
	if int64(len(before)) <= size {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut[path] = overlay(before, l.cut[path])
}

func (l *lateCutFS) OpenFile(name string, flag int, perm fs.FileMode) (vfs.File, error) {
	var before []byte
	if flag&os.O_TRUNC != 0 && lateCutPath(name) {
		before, _ = vfs.ReadFile(l.MemFS, name)
	}
	f, err := l.MemFS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	l.noteCut(name, before, 0)
	return &lateCutFile{File: f, fs: l, path: name}, nil
}

func (l *lateCutFS) Rename(oldname, newname string) error {
	if err := l.MemFS.Rename(oldname, newname); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	// The renamed file takes its pending truncation along, and the file it
	// replaced is gone with its own.
	if c, ok := l.cut[oldname]; ok {
		l.cut[newname] = c
	} else {
		delete(l.cut, newname)
	}
	delete(l.cut, oldname)
	return nil
}

func (l *lateCutFS) Remove(name string) error {
	if err := l.MemFS.Remove(name); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.cut, name)
	return nil
}

func (f *lateCutFile) Truncate(size int64) error {
	var before []byte
	if lateCutPath(f.path) {
		before, _ = vfs.ReadFile(f.fs.MemFS, f.path)
	}
	if err := f.File.Truncate(size); err != nil {
		return err
	}
	f.fs.noteCut(f.path, before, size)
	return nil
}

// Sync makes the truncations durable with the data.
func (f *lateCutFile) Sync() error {
	if err := f.File.Sync(); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	delete(f.fs.cut, f.path)
	return nil
}

// lateCut turns crash clone c (of l's MemFS) into the state where every
// unsynced truncation of an index file was lost and the writes after it
// were not: each such file holds what c holds, then the old bytes past
// its end. It reports whether that changed anything.
func (l *lateCutFS) lateCut(t *testing.T, c *vfs.MemFS) bool {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	changed := false
	for path, old := range l.cut {
		got, err := vfs.ReadFile(c, path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		if len(got) < len(old) {
			writeMemFile(t, c, path, overlay(got, old))
			changed = true
		}
	}
	return changed
}

// indexRewriteOps tells the operations of a rewrite of index.jsonl from
// the others, for a fault hook: in place, the truncation, the write after
// it and the sync after that; through a replace, every change to the
// temporary file, its rename over index.jsonl and the directory sync
// after the rename. The appends' index writes are not part of it. The
// caller serializes the calls (a MemFS runs its hook under its mutex).
type indexRewriteOps struct {
	last    vfs.Op // the last operation on index.jsonl
	renamed bool   // the last operation was the rename over index.jsonl
}

func (r *indexRewriteOps) is(op vfs.Op, path string) bool {
	if !vfs.Mutating(op) {
		return false
	}
	renamed := r.renamed
	r.renamed = false
	switch base := filepath.Base(path); {
	case base == indexName+".tmp":
		return true
	case base == indexName && op == vfs.OpRename:
		r.renamed = true
		return true
	case op == vfs.OpSyncDir:
		return renamed
	case base == indexName:
		last := r.last
		r.last = op
		return op == vfs.OpTruncate ||
			(op == vfs.OpWrite && last == vfs.OpTruncate) ||
			(op == vfs.OpSync && (last == vfs.OpTruncate || last == vfs.OpWrite))
	}
	return false
}

// requireIndexInOrder checks the valid prefix of a session's index.jsonl
// in a crash state: each line names a record after the one the line
// before names. An old line left after new ones (a rewrite's truncation
// lost, its write kept) names an earlier record again.
func requireIndexInOrder(t *testing.T, fsys vfs.FS, id uuid.UUID, state string) {
	t.Helper()
	var prev *entry
	n := 0
	_, err := index.Read(fsys, sessionPath(id, indexName), func(e *entry, off int64) error {
		if prev != nil {
			after := e.Loc.Chunk > prev.Loc.Chunk || (e.Loc.Chunk == prev.Loc.Chunk && e.Loc.Offset >= prev.Loc.End())
			require.True(t, after, "%s: index line %d (offset %d) names chunk %d offset %d, not after the line before it (chunk %d offset %d): an old line after new ones",
				state, n, off, e.Loc.Chunk, e.Loc.Offset, prev.Loc.Chunk, prev.Loc.Offset)
		}
		c := *e
		prev = &c
		n++
		return nil
	})
	require.NoError(t, err, state)
}

// sealingText is the record of sealing test event i: all of them are as
// long, so the index lines of two chunks' records line up (every line
// the same length but for the digits of its offset) and an old line
// left after new ones starts where a new one ended, a whole valid line.
func sealingText(i int) Event {
	return UserText(fmt.Sprintf("event %03d %s", i, strings.Repeat("s", 200)))
}

// TestIndexRewriteCrashPoints cuts the power at every operation of the
// rewrites of index.jsonl, and once after the last, and checks each crash
// state (every mode, random-sectors with dirSeeds() seeds), also with
// the rewrite's truncation lost and its writes kept (lateCutFS): the
// index holds no old line after new ones, and the session opens with
// every acknowledged event, whole, and Verify clean (checkCrashState).
// Rewriting in place (truncate, then write) would leave, when the
// truncation is lost, the new lines followed by the old ones: a sealed
// chunk's lines, then the new lines again, which the next open takes for
// corruption.
//
// sealing: the rewrite after each sealing, which drops the sealed chunk's
// lines. reconcile: the rewrite by which the next open drops the lines of
// a sealed chunk that a crash between its sealing and that rewrite left
// in index.jsonl.
func TestIndexRewriteCrashPoints(t *testing.T) {
	t.Parallel() // CPU-bound on MemFS instances of its own, like the other parallel tests
	ctx := context.Background()
	session := uuid.MustParse("01a02f3f-0000-7000-8000-0000000014de")
	const events = 40 // of about 450 bytes: four chunks of crashChunkSize sealed
	// The clock and ids are fake, so every run writes the same bytes.
	opts := func() Options { return deterministic(Options{ChunkSize: crashChunkSize, keepPlainOnClose: true}) }

	// check checks the crash states of point k of l, whose workload w
	// acknowledged what it did, and returns the number of states in which
	// the late truncation changed the index.
	check := func(t *testing.T, l *lateCutFS, w *crashWorkload, k int) int {
		late := 0
		for _, st := range dirCrashStates(l.MemFS, k) {
			states := []dirCrashState{st}
			lc := dirCrashState{st.name + ", truncation lost", st.fs.CrashClone(vfs.KeepAll, 0)}
			if l.lateCut(t, lc.fs) {
				states = append(states, lc)
				late++
			}
			for _, st := range states {
				func() {
					defer func() {
						if t.Failed() {
							t.Logf("in %s (power cut at %v)", st.name, l.PowerCut())
						}
					}()
					requireIndexInOrder(t, st.fs, session, st.name)
					checkCrashState(t, st.fs, w)
				}()
				if t.Failed() {
					t.FailNow()
				}
			}
		}
		return late
	}

	t.Run("sealing", func(t *testing.T) {
		t.Parallel()
		// run appends the events with the power cut at the k-th operation
		// of an index rewrite (never if k is 0), closes the store and cuts
		// the power. It returns the frozen filesystem, the workload's
		// record and the number of rewrite operations seen.
		run := func(k int) (*lateCutFS, *crashWorkload, int) {
			l := newLateCutFS()
			w := newCrashWorkload(events, 0)
			w.session = session
			var ops indexRewriteOps
			n := 0
			l.SetFault(func(op vfs.Op, path string) error {
				if ops.is(op, path) {
					n++
					if n == k {
						return vfs.ErrPowerLoss
					}
				}
				return nil
			})
			s := openMem(t, l, opts())
			defer func() {
				s.Close() // after a power cut it fails and changes nothing
				l.PowerOff()
			}()
			w.pending = "rewrite"
			if _, err := s.Create(ctx, Meta{ID: session, Name: w.pending}); err != nil {
				return l, w, n
			}
			w.created, w.names, w.pending = true, []string{w.pending}, ""
			for i := range events {
				ev := sealingText(i)
				w.inflight = []Event{ev}
				out, err := s.Append(ctx, session, ev)
				if err != nil {
					return l, w, n
				}
				w.inflight = nil
				w.acked[out.ID] = out
				w.order = append(w.order, out.ID)
				awaitSealing(s, session) // one sealing at a time: each rewrites the index
			}
			s.Close()
			return l, w, n
		}

		l, w, total := run(0)
		var pe *fs.PathError
		require.ErrorAs(t, l.PowerCut(), &pe)
		require.Equal(t, "poweroff", pe.Op, "the workload runs without a cut")
		require.Len(t, w.order, events)
		for n := range uint32(4) {
			_, err := l.CrashClone(vfs.KeepSynced, 0).Stat(sessionPath(session, chunksDir, chunkName(n)+sealedExt))
			require.NoError(t, err, "the workload seals chunk %d", n)
		}
		// The run without a cut, powered off after Close, is the last
		// crash point.
		late := check(t, l, w, 0)
		points := 1
		for k := 1; ; k++ {
			l, w, _ := run(k)
			var pe *fs.PathError
			if !errors.As(l.PowerCut(), &pe) || pe.Op == "poweroff" {
				break
			}
			points++
			late += check(t, l, w, k)
		}
		t.Logf("%d crash points (%d index rewrite operations in the run without a cut), %d states each, %d more with the truncation lost", points, total, len(vfs.CrashModes)-1+dirSeeds(), late)
		// One rewrite per sealing, of two operations at least (a replace
		// makes five: the temporary file's create, write and sync, its
		// rename, the directory sync; in place, a truncate and a write).
		assert.GreaterOrEqual(t, points, 1+4*2)
	})

	t.Run("reconcile", func(t *testing.T) {
		t.Parallel()
		// A closed session whose chunk 0 is sealed and chunk 1 active, with
		// index.jsonl as a crash between the sealing and its rewrite left
		// it: chunk 0's lines (stale: the sealed file embeds them), then
		// chunk 1's. Chunk 1 has fewer lines than chunk 0, which a rewrite
		// in place leaves after them when its truncation is lost.
		base := newLateCutFS()
		s := openMem(t, base, opts())
		meta, err := s.Create(ctx, Meta{ID: session, Name: "rewrite"})
		require.NoError(t, err)
		w := newCrashWorkload(0, 0)
		w.session, w.created, w.names = session, true, []string{meta.Name}
		for i := range 14 {
			out, err := s.Append(ctx, session, sealingText(i))
			require.NoError(t, err)
			w.acked[out.ID] = out
			w.order = append(w.order, out.ID)
		}
		require.NoError(t, s.Close())
		chunkDir := sessionPath(session, chunksDir)
		sealed, _, err := sealedIndex(base, chunkDir, 0)
		require.NoError(t, err, "chunk 0 is sealed")
		forms, _, err := chunkForms(base, chunkDir)
		require.NoError(t, err)
		require.Equal(t, map[uint32]chunkForm{0: {sealed: true}, 1: {plain: true}}, forms)
		indexPath := sessionPath(session, indexName)
		plain, err := vfs.ReadFile(base, indexPath)
		require.NoError(t, err)
		require.Less(t, strings.Count(string(plain), "\n"), len(sealed), "chunk 1 has fewer lines than chunk 0")
		writeMemFile(t, base, indexPath, append(index.AppendLines(nil, sealed), plain...))

		// run reopens the session with the power cut at the k-th operation
		// of the index rewrite (never if k is 0), and returns the frozen
		// filesystem and the number of rewrite operations seen.
		run := func(k int) (*lateCutFS, int) {
			l := &lateCutFS{MemFS: base.CrashClone(vfs.KeepAll, 0), cut: map[string][]byte{}}
			var ops indexRewriteOps
			n := 0
			l.SetFault(func(op vfs.Op, path string) error {
				if ops.is(op, path) {
					n++
					if n == k {
						return vfs.ErrPowerLoss
					}
				}
				return nil
			})
			s := openMem(t, l, Options{ChunkSize: crashChunkSize, keepPlainOnClose: true})
			_, err := s.Repair(ctx, session)
			s.Close()
			l.PowerOff()
			var pe *fs.PathError
			if k > 0 && errors.As(l.PowerCut(), &pe) && pe.Op != "poweroff" {
				require.Error(t, err, "crash point %d: the repair fails at the power cut", k)
			} else {
				require.NoError(t, err)
			}
			return l, n
		}

		l, total := run(0)
		late := check(t, l, w, 0)
		points := 1
		for k := 1; ; k++ {
			l, _ := run(k)
			var pe *fs.PathError
			if !errors.As(l.PowerCut(), &pe) || pe.Op == "poweroff" {
				break
			}
			points++
			late += check(t, l, w, k)
		}
		t.Logf("%d crash points (%d index rewrite operations in the run without a cut), %d states each, %d more with the truncation lost", points, total, len(vfs.CrashModes)-1+dirSeeds(), late)
		// Three operations at least (a replace makes five; in place, a
		// truncate, a write and a sync).
		assert.GreaterOrEqual(t, points, 1+3)
	})
}
