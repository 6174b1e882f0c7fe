package seam

import (
	"slices"

	"github.com/google/uuid"

	"github.com/sessionstore/sessionstore/internal/eventline"
)

// Exit is one run of a sealed chunk's exit table, which its seal record
// carries so that a restore can download the chunks a path crosses side
// by side instead of one at a time, as its walk reaches each: every line
// at or after Off (up to the next run's Off) leads, following parents
// within the chunk, out of it to the line at offset At of chunk Chunk;
// or, with Root, to the session's first event (the path ends in this
// chunk). Compaction says that a compaction event lies on that way, the
// line itself or a parent in the chunk: a Load's context ends there, or
// soon after (at the compaction's first kept event).
//
// The table is a hint, never trusted: a restore that follows a wrong one
// downloads a chunk it did not need, or downloads one later, when its walk
// reaches it, and reads the same events either way (the walk checks every
// line it reads against the parent its child names). A table that does
// not hold together (runs not in order, a target not in an earlier chunk)
// is ignored (Chain). A chunk sealed by a build before tables, or whose
// paths leave it in more than MaxExits runs, has none.
type Exit struct {
	Off        int64  `json:"off"`
	Chunk      uint32 `json:"chunk,omitzero"`
	At         int64  `json:"at,omitzero"`
	Root       bool   `json:"root,omitzero"`
	Compaction bool   `json:"compaction,omitzero"`
}

// MaxExits bounds a chunk's exit table: a chunk whose lines alternate
// between branches that leave it (interleaved lanes, say) has none, and its
// restore reads it when the walk reaches it.
const MaxExits = 64

// Exits returns the exit table of a chunk whose entries are es, in log
// order (offset order), or nil when it would need more than MaxExits
// runs or a line's way out is unknown. parentAt returns the location of
// the parent of es[i], an entry whose parent is not in the chunk, read
// from its line (format 2 lines name it); false when the line names none.
func Exits(es []eventline.Entry, parentAt func(i int) (eventline.Location, bool)) []Exit {
	if len(es) == 0 {
		return nil
	}
	out := make(map[uuid.UUID]Exit, len(es)) // each line's way out
	var runs []Exit
	for i := range es {
		e := &es[i]
		x, in := out[e.ParentID]
		switch {
		case in:
		case e.ParentID == uuid.Nil:
			x = Exit{Root: true}
		default:
			at, ok := parentAt(i)
			if !ok || at.Chunk >= e.Loc.Chunk {
				return nil
			}
			x = Exit{Chunk: at.Chunk, At: at.Offset}
		}
		x.Off = 0
		x.Compaction = x.Compaction || e.Kind == eventline.KindCompaction
		out[e.ID] = x
		if n := len(runs); n > 0 && sameWay(runs[n-1], x) {
			continue
		}
		if len(runs) == MaxExits {
			return nil
		}
		x.Off = e.Loc.Offset
		runs = append(runs, x)
	}
	return runs
}

func sameWay(a, b Exit) bool {
	return a.Root == b.Root && a.Chunk == b.Chunk && a.At == b.At && a.Compaction == b.Compaction
}

// Chain returns the chunks a path crosses from the line at loc on,
// following the exit tables of sealed (by chunk): loc's chunk first, then
// each chunk the path enters, as far as the tables lead (a chunk without
// a table, or one that does not hold together, ends it) and up to the
// first compaction on the way, whose chunk ends it. At most
// len(sealed)+1 chunks.
func Chain(sealed map[uint32][]Exit, loc eventline.Location) []uint32 {
	chain := []uint32{loc.Chunk}
	c, off := loc.Chunk, loc.Offset
	for range len(sealed) {
		xs := sealed[c]
		if !wellFormed(xs, c) {
			break
		}
		k, _ := slices.BinarySearchFunc(xs, off, func(x Exit, off int64) int {
			if x.Off <= off {
				return -1
			}
			return 1
		})
		if k == 0 {
			break // before the first run: not a line the table knows
		}
		x := xs[k-1]
		if x.Root || x.Compaction {
			break
		}
		c, off = x.Chunk, x.At
		chain = append(chain, c)
	}
	return chain
}

// wellFormed reports whether xs, chunk c's table, holds together: runs in
// order of offset, every target in an earlier chunk.
func wellFormed(xs []Exit, c uint32) bool {
	if len(xs) == 0 || len(xs) > MaxExits {
		return false
	}
	for i, x := range xs {
		if x.Off < 0 || (i > 0 && x.Off <= xs[i-1].Off) || (!x.Root && (x.Chunk >= c || x.At < 0)) {
			return false
		}
	}
	return true
}
