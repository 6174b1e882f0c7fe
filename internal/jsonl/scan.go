package jsonl

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Errors returned by Scanner.Malformed.
var (
	// ErrLineTooLong reports a line longer than the scanner's maximum: no
	// line of the format is that long.
	ErrLineTooLong = errors.New("jsonl: line longer than the format allows")
	// ErrZeroByte reports a line holding a zero byte, which no framed line
	// does (JSON escapes every control character): zeros are what a file
	// holds where nothing was written (preallocated space, a sector lost
	// to a crash, a sparse file).
	ErrZeroByte = errors.New("jsonl: zero byte in a line")
)

// Scanner reads newline-terminated lines from a reader, keeping track of
// each line's offset. It does not verify frames: a caller decides what a bad
// line means from where it stands. The bytes after the last newline are
// reported by Tail once Next returns false.
//
// What it keeps of a line is bounded, so that a file of any size (a sparse
// one of gigabytes of zeros, say) is scanned in bounded memory: a line of
// at most the maximum length given to NewScanner, holding no zero byte, is
// kept whole; any other line is malformed (Malformed says why), and only
// its bytes before its first zero byte, and at most the maximum, are
// kept, the rest being read and dropped.
type Scanner struct {
	r    *bufio.Reader
	max  int
	off  int64 // offset of the next unread byte
	line []byte
	lOff int64
	buf  []byte
	tail []byte
	err  error

	// The current line (or tail): why it is malformed, whether it is all
	// zero bytes, and its zero runs (see TrackHoles).
	bad      error
	allZero  bool
	stopBad  bool // StopAtMalformed
	sector   int64
	zeroFrom int64 // offset where the current run of zeros started, -1 if none
	hole     bool
}

// NewScanner reads from r, whose first byte is at offset base in its file,
// keeping lines of up to maxLine bytes whole.
func NewScanner(r io.Reader, base int64, maxLine int) *Scanner {
	return NewScannerSize(r, base, maxBuffer, maxLine)
}

// maxBuffer is the read buffer of a Scanner for a large input.
const maxBuffer = 64 << 10

// NewScannerSize is NewScanner for an input of about size bytes: it reads
// through a buffer no larger than needed (between 4 and 64 KiB).
func NewScannerSize(r io.Reader, base, size int64, maxLine int) *Scanner {
	n := int(min(max(size+1, 4<<10), maxBuffer))
	return &Scanner{r: bufio.NewReaderSize(r, n), off: base, max: maxLine, zeroFrom: -1}
}

// TrackHoles makes Hole report, for each line, whether it holds a run of
// zero bytes that starts at the line's start or at a multiple of sector
// (as a file offset) and ends at a multiple of sector: a sector of a write
// that never reached the disk. Call it before the first Next.
func (s *Scanner) TrackHoles(sector int64) { s.sector = sector }

// StopAtMalformed makes Next return a malformed line as soon as it is
// known to be one, without reading the rest of it, and end the scan
// there: for a reader that stops at its first bad line, which may be
// gigabytes of zeros long. End is then where the reading stopped. Call it
// before the first Next.
func (s *Scanner) StopAtMalformed() { s.stopBad = true }

// errStopped ends a scan stopped at a malformed line (StopAtMalformed).
var errStopped = errors.New("jsonl: scan stopped at a malformed line")

// Next advances to the next complete line and reports whether there is one.
func (s *Scanner) Next() bool {
	if s.err != nil {
		return false
	}
	s.buf, s.bad, s.allZero, s.hole, s.zeroFrom = s.buf[:0], nil, true, false, -1
	start := s.off
	for {
		frag, err := s.r.ReadSlice('\n')
		at := s.off
		s.off += int64(len(frag))
		if err == nil {
			body := frag[:len(frag)-1]
			if s.bad == nil && len(s.buf) == 0 && len(body) <= s.max && bytes.IndexByte(body, 0) < 0 {
				s.line, s.lOff, s.allZero = body, start, len(body) == 0
				return true // the usual case: a whole line in the buffer
			}
			s.take(body, at, start)
			if s.zeroFrom >= 0 {
				s.endZeros(s.off-1, start)
			}
			s.line, s.lOff = s.buf, start
			if s.bad != nil && s.stopBad {
				s.err = errStopped
			}
			return true
		}
		s.take(frag, at, start)
		if s.bad != nil && s.stopBad {
			s.line, s.lOff, s.err = s.buf, start, errStopped
			return true
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		s.tail = bytes.Clone(s.buf)
		s.lOff = start
		if err != io.EOF {
			s.err = err
		} else {
			s.err = io.EOF
		}
		return false
	}
}

// take adds b, at offset at in a line that starts at start, to the line:
// its bytes while the line is whole, its zero runs, and why it is not.
func (s *Scanner) take(b []byte, at, start int64) {
	z := bytes.IndexByte(b, 0)
	if s.bad == nil {
		keep := b
		if z >= 0 {
			keep = b[:z]
		}
		if room := s.max - len(s.buf); len(keep) > room {
			keep = keep[:max(room, 0)]
			s.bad = fmt.Errorf("%w: more than %d bytes", ErrLineTooLong, s.max)
		}
		s.buf = append(s.buf, keep...)
		if z >= 0 && s.bad == nil {
			s.bad = fmt.Errorf("%w at offset %d", ErrZeroByte, at+int64(z))
		}
	}
	if z < 0 && s.zeroFrom < 0 {
		if len(b) > 0 {
			s.allZero = false
		}
		return
	}
	// Walk the zero runs: find a zero, then the next non-zero byte.
	i := 0
	for i < len(b) {
		if s.zeroFrom < 0 {
			j := bytes.IndexByte(b[i:], 0)
			if j < 0 {
				s.allZero = false
				return
			}
			if j > 0 {
				s.allZero = false
			}
			i += j
			s.zeroFrom = at + int64(i)
		}
		j := i + nonZero(b[i:])
		if j == len(b) {
			return // the run goes on past b
		}
		s.endZeros(at+int64(j), start)
		i = j
	}
}

// endZeros ends the current run of zeros at offset end, in a line that
// starts at start.
func (s *Scanner) endZeros(end, start int64) {
	if s.sector > 0 && (s.zeroFrom == start || s.zeroFrom%s.sector == 0) && end%s.sector == 0 {
		s.hole = true
	}
	s.zeroFrom = -1
}

// nonZero returns the index of the first non-zero byte of b, or len(b):
// eight bytes at a time, so that gigabytes of zeros take a second.
func nonZero(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != 0 {
			break
		}
	}
	for ; i < len(b); i++ {
		if b[i] != 0 {
			return i
		}
	}
	return i
}

// Line is the current line without its newline, or what is kept of a
// malformed one (see Scanner). It is valid until the next call to Next.
func (s *Scanner) Line() []byte { return s.line }

// Malformed reports why the current line (or, after Next returned false,
// the tail) was not kept whole: an error wrapping ErrLineTooLong or
// ErrZeroByte, or nil.
func (s *Scanner) Malformed() error { return s.bad }

// Hole reports whether the current line holds a hole (see TrackHoles).
func (s *Scanner) Hole() bool { return s.hole }

// Offset is the offset of the current line, or after Next returns false the
// offset where the tail starts.
func (s *Scanner) Offset() int64 { return s.lOff }

// End is the offset just past the last byte consumed.
func (s *Scanner) End() int64 { return s.off }

// Tail returns what is kept of the bytes after the last newline (see
// Scanner), once Next has returned false at the end of input (empty when
// the input ended with a newline).
func (s *Scanner) Tail() []byte { return s.tail }

// TailZero reports whether the bytes after the last newline, once Next has
// returned false, are zero bytes only, or none: the free space that may
// end a file written in preallocated space.
func (s *Scanner) TailZero() bool { return s.err != nil && s.err != errStopped && s.allZero }

// Err returns the read error that stopped the scan, or nil at a clean end
// or at a malformed line (StopAtMalformed).
func (s *Scanner) Err() error {
	if s.err == io.EOF || s.err == errStopped {
		return nil
	}
	return s.err
}
