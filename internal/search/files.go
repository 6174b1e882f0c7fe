package search

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// The index's files, in its directory (Files.Dir).
const (
	LockName     = "search.lock" // writers take it around a segment's write
	segPrefix    = "seg-"
	segSuffix    = ".six"
	MaxSegments  = 8       // more after a write: they are merged into one
	MaxSegmentSz = 4 << 30 // the largest segment file read
)

// Files is where the index is kept.
type Files struct {
	FS       vfs.FS
	Dir      string
	Perm     os.FileMode
	DirPerm  os.FileMode
	ReadOnly bool // never write or remove
}

// segName is the file name of segment seq.
func segName(seq uint64) string { return fmt.Sprintf("%s%016x%s", segPrefix, seq, segSuffix) }

// segments lists the segment files of dir by seq, ascending (ReadDir
// sorts names, and the seqs are fixed-width hexadecimal).
func (f Files) segments() ([]uint64, []string, error) {
	names, err := f.FS.ReadDir(f.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var seqs []uint64
	var other []string
	for _, n := range names {
		h, ok := strings.CutPrefix(n, segPrefix)
		h, ok2 := strings.CutSuffix(h, segSuffix)
		if !ok || !ok2 || len(h) != 16 {
			if n != LockName {
				other = append(other, n)
			}
			continue
		}
		v, err := strconv.ParseUint(h, 16, 64)
		if err != nil {
			other = append(other, n)
			continue
		}
		seqs = append(seqs, v)
	}
	return seqs, other, nil
}

// Load reads the index from its files. Any damage (a file that does not
// decode, a gap between files) gives an empty index and damaged true: the
// caller indexes every session again, and a writable Files removes the
// damaged files when that index is next saved. A directory that does not
// exist is an empty index, not damage.
func Load(f Files) (x *Index, damaged bool, err error) {
	x = New()
	seqs, _, err := f.segments()
	if err != nil {
		return x, false, err
	}
	if len(seqs) == 0 {
		return x, false, nil
	}
	newest, err := f.read(seqs[len(seqs)-1])
	if err != nil {
		return damagedIndex(err)
	}
	for _, seq := range seqs {
		if seq < newest.Base {
			continue // merged into a newer file
		}
		s := newest
		if seq != newest.Seq {
			if s, err = f.read(seq); err != nil {
				return damagedIndex(err)
			}
		}
		if err := x.apply(s); err != nil {
			return damagedIndex(err)
		}
	}
	return x, false, nil
}

func damagedIndex(err error) (*Index, bool, error) {
	if errors.Is(err, ErrDamaged) || errors.Is(err, vfs.ErrTooLarge) {
		x := New()
		x.damaged = true
		return x, true, nil
	}
	return New(), false, err
}

// read reads and decodes segment seq, ErrDamaged if it is not the
// segment its name says.
func (f Files) read(seq uint64) (*Segment, error) {
	b, err := vfs.ReadFileLimit(f.FS, filepath.Join(f.Dir, segName(seq)), MaxSegmentSz)
	if err != nil {
		return nil, err
	}
	s, err := DecodeSegment(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", segName(seq), err)
	}
	if s.Seq != seq || s.Base > seq {
		return nil, fmt.Errorf("%w: %s holds segment %d", ErrDamaged, segName(seq), s.Seq)
	}
	return s, nil
}

// Unsaved reports whether the index holds documents or session states
// its files do not.
func (x *Index) Unsaved() bool {
	for sl := range x.Sessions {
		s := &x.Sessions[sl]
		if !s.Private && !s.Dead && s.Next != x.savedNext[uint32(sl)] {
			return true
		}
	}
	return x.damaged
}

// Save writes what the index holds beyond its files as a new segment
// (then, past MaxSegments, the whole index as one), documents of private
// sessions left out. If the files changed since this index last read or
// wrote them (another writer), it writes nothing and returns nil: the
// index stays in memory. When it returns nil, the segment is durable.
func (x *Index) Save(f Files) error {
	if f.ReadOnly || !x.Unsaved() {
		return nil
	}
	if err := durable.MkdirAll(f.FS, f.Dir, dirPerm(f.DirPerm)); err != nil {
		return err
	}
	lk, err := f.FS.Lock(filepath.Join(f.Dir, LockName), filePerm(f.Perm))
	if errors.Is(err, vfs.ErrLocked) {
		return nil
	}
	if err != nil {
		return err
	}
	defer lk.Close()
	seqs, other, err := f.segments()
	if err != nil {
		return err
	}
	full := x.damaged || len(x.segments) == 0 || len(x.segments)+1 > MaxSegments
	if !x.damaged {
		known := len(seqs) == 0 && len(x.segments) == 0 ||
			len(seqs) > 0 && len(x.segments) > 0 && seqs[len(seqs)-1] == x.segments[len(x.segments)-1]
		if !known {
			return nil // another writer's files: not ours to extend
		}
	}
	if len(seqs) > 0 {
		x.generation = max(x.generation, seqs[len(seqs)-1]+1)
	}
	seq := x.generation
	var slots []uint32
	var from []uint64
	var docs []uint32
	live := func(sl uint32) bool { s := &x.Sessions[sl]; return !s.Private && !s.Dead }
	if full {
		for sl := range x.Sessions {
			if live(uint32(sl)) && x.Sessions[sl].Next > 0 {
				slots, from = append(slots, uint32(sl)), append(from, 0)
			}
		}
		for d := range x.Docs {
			if live(x.Docs[d].Session) {
				docs = append(docs, uint32(d))
			}
		}
	} else {
		for sl := range x.Sessions {
			if live(uint32(sl)) && x.Sessions[sl].Next != x.savedNext[uint32(sl)] {
				slots, from = append(slots, uint32(sl)), append(from, x.savedNext[uint32(sl)])
			}
		}
		for d := x.saved; d < len(x.Docs); d++ {
			if live(x.Docs[d].Session) {
				docs = append(docs, uint32(d))
			}
		}
	}
	base := x.segments0()
	if full {
		base = seq
	}
	b := x.encodeSegment(seq, base, slots, from, docs)
	if err := durable.ReplaceFile(f.FS, f.Dir, segName(seq), b, filePerm(f.Perm)); err != nil {
		return err
	}
	x.generation = seq + 1
	x.saved = len(x.Docs)
	for _, sl := range slots {
		x.savedNext[sl] = x.Sessions[sl].Next
	}
	if full {
		x.segments = x.segments[:0]
		x.damaged = false
		for _, old := range seqs { // merged, or damaged: no longer read
			if err := durable.RemoveFile(f.FS, filepath.Join(f.Dir, segName(old))); err != nil {
				return err
			}
		}
		for _, n := range other { // temporary files of a write a crash cut
			if err := durable.RemoveFile(f.FS, filepath.Join(f.Dir, n)); err != nil {
				return err
			}
		}
	}
	x.segments = append(x.segments, seq)
	return nil
}

// segments0 is the base of the files the index was read from or wrote.
func (x *Index) segments0() uint64 {
	if len(x.segments) == 0 {
		return 0
	}
	return x.segments[0]
}

func filePerm(p os.FileMode) os.FileMode {
	if p == 0 {
		return 0o644
	}
	return p
}

func dirPerm(p os.FileMode) os.FileMode {
	if p == 0 {
		return 0o755
	}
	return p
}
