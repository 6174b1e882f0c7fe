package jsonl

import (
	"bufio"
	"bytes"
	"errors"
	"io"
)

// Scanner reads newline-terminated lines from a reader, keeping track of
// each line's offset. It does not verify frames: a caller decides what a bad
// line means from where it stands. Lines may be of any length (there is no
// bufio.Scanner token limit); the bytes after the last newline are reported
// by Tail once Next returns false.
type Scanner struct {
	r    *bufio.Reader
	off  int64 // offset of the next unread byte
	line []byte
	lOff int64
	buf  []byte
	tail []byte
	err  error
}

// NewScanner reads from r, whose first byte is at offset base in its file.
func NewScanner(r io.Reader, base int64) *Scanner {
	return NewScannerSize(r, base, maxBuffer)
}

// maxBuffer is the read buffer of a Scanner for a large input.
const maxBuffer = 64 << 10

// NewScannerSize is NewScanner for an input of about size bytes: it reads
// through a buffer no larger than needed (between 4 and 64 KiB).
func NewScannerSize(r io.Reader, base, size int64) *Scanner {
	n := int(min(max(size+1, 4<<10), maxBuffer))
	return &Scanner{r: bufio.NewReaderSize(r, n), off: base}
}

// Next advances to the next complete line and reports whether there is one.
func (s *Scanner) Next() bool {
	if s.err != nil {
		return false
	}
	s.buf = s.buf[:0]
	start := s.off
	for {
		frag, err := s.r.ReadSlice('\n')
		s.off += int64(len(frag))
		if err == nil {
			if len(s.buf) == 0 {
				s.line = frag[:len(frag)-1]
			} else {
				s.buf = append(s.buf, frag...)
				s.line = s.buf[:len(s.buf)-1]
			}
			s.lOff = start
			return true
		}
		s.buf = append(s.buf, frag...)
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

// Line is the current line without its newline. It is valid until the next
// call to Next.
func (s *Scanner) Line() []byte { return s.line }

// Offset is the offset of the current line, or after Next returns false the
// offset where the tail starts.
func (s *Scanner) Offset() int64 { return s.lOff }

// End is the offset just past the last byte consumed.
func (s *Scanner) End() int64 { return s.off }

// Tail returns the bytes after the last newline, once Next has returned
// false at the end of input (empty when the input ended with a newline).
func (s *Scanner) Tail() []byte { return s.tail }

// Err returns the read error that stopped the scan, or nil at a clean end.
func (s *Scanner) Err() error {
	if s.err == io.EOF {
		return nil
	}
	return s.err
}
