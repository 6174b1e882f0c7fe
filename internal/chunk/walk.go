package chunk

import (
	"bytes"
	"errors"
	"io"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/jsonl"
)

// Walked is what Walk found after the last valid record.
type Walked struct {
	End    int64 // just past the last valid record
	Bad    int64 // offset of the invalid tail (no valid record after it), or -1
	BadErr error // why the tail's first line failed
	Size   int64 // where the scan stopped: the end of the bytes read
}

// Walk decodes the framed records of chunk n, read from f, from off to
// size, calling rec for each valid one with its header, payload and
// location. Zero bytes running to the end are free space (a preallocated
// chunk's). An invalid stretch followed by a valid record is passed to gap
// (its offset, the valid record's offset, why its first line failed)
// before that record, except that in a chunk that may end in a torn write
// (newest: the active plain chunk) a hole ends the walk: it and all after
// it are the invalid tail, which starts at the first bad line before it
// when there is one. A hole is a run of zero bytes in a line from
// the line's start or a sector boundary to a sector boundary (SectorSize):
// a sector of an unsynced write that did not reach the disk. An error from rec or gap stops
// the walk and is returned as it is; so is a read error (a sealed file's
// damage, a *zchunk.FormatError).
func Walk(f io.ReaderAt, n uint32, off, size int64, newest bool, rec func(h eventline.Header, p eventline.Payload, loc eventline.Location) error, gap func(bad, next int64, err error) error) (Walked, error) {
	w := Walked{End: off, Bad: -1}
	sc := jsonl.NewScannerSize(io.NewSectionReader(f, off, size-off), off, size-off, eventline.MaxChunkLine)
	sc.TrackHoles(SectorSize)
	for sc.Next() {
		line := sc.Line()
		err := sc.Malformed() // too long, or holding zeros: no record
		var hdr eventline.Header
		var pl eventline.Payload
		if err == nil {
			hdr, pl, err = eventline.DecodeEvent(line)
		}
		if err != nil {
			if w.Bad < 0 {
				w.Bad, w.BadErr = sc.Offset(), err
			}
			if newest && sc.Hole() {
				// The tail starts at its first bad line: this one, or
				// an earlier one (a garbled write before the hole).
				if w.Bad == sc.Offset() {
					w.BadErr = ErrHole
				}
				w.Size = size
				return w, nil
			}
			continue
		}
		if w.Bad >= 0 {
			if err := gap(w.Bad, sc.Offset(), w.BadErr); err != nil {
				return w, err
			}
			w.Bad, w.BadErr = -1, nil
		}
		if err := rec(hdr, pl, eventline.Location{Chunk: n, Offset: sc.Offset(), Length: uint32(len(line) + 1)}); err != nil {
			return w, err
		}
		w.End = sc.End()
	}
	w.Size = sc.End()
	if err := sc.Err(); err != nil {
		return w, err
	}
	if w.Bad < 0 && !sc.TailZero() {
		w.Bad, w.BadErr = sc.Offset(), io.ErrUnexpectedEOF
	}
	return w, nil
}

// ErrHole is why a torn tail starts at a hole.
var ErrHole = errors.New("zero bytes of a write that had not reached the disk")

// SectorSize is the unit in which a disk persists a write, at the
// smallest.
const SectorSize = 512

// A hole is a run of zero bytes in a line that starts at the line's
// start or at a sector boundary and ends at a sector boundary: a sector
// of an unsynced write that did not reach the disk, in the free space of
// a preallocated chunk. Records hold no zero byte. Walk has the line
// scanner find them (jsonl.Scanner.TrackHoles), without keeping the
// zeros; hole asks it of one line.

// hole reports whether line, at offset off of its chunk, holds a hole.
func hole(line []byte, off int64) bool {
	sc := jsonl.NewScanner(io.MultiReader(bytes.NewReader(line), bytes.NewReader(newline)), off, len(line))
	sc.TrackHoles(SectorSize)
	return sc.Next() && sc.Hole()
}

var newline = []byte{'\n'}

// ZeroTail returns how many zero bytes end b: the free space of a
// preallocated chunk, when b is its end.
func ZeroTail(b []byte) int {
	n := len(b)
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return len(b) - n
}
