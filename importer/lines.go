package importer

import (
	"bufio"
	"errors"
	"fmt"
	"io"

	"github.com/sessionstore/sessionstore"
)

// MaxLineSize is the longest line the readers take, in bytes without the
// newline: the store's default record limit
// (sessionstore.DefaultMaxRecordSize), since a line is one record or more
// of about its size. A longer line is reported (ErrLineTooLong) and left
// out without being held in memory.
const MaxLineSize = sessionstore.DefaultMaxRecordSize

// ErrLineTooLong is wrapped by the LineError of a line over MaxLineSize.
var ErrLineTooLong = errors.New("importer: line too long")

// LineReader reads the lines of a JSONL source file, each at most max
// bytes, counting what it reads (FileStats). Memory is bounded by max: a
// longer line is read through and dropped.
type LineReader struct {
	r     *bufio.Reader
	path  string
	max   int
	n     int // the number of the line read last
	stats FileStats
	buf   []byte
	err   error
}

// NewLineReader returns a LineReader of r, the file at path (for
// messages), that takes lines of at most max bytes (MaxLineSize if max <=
// 0).
func NewLineReader(r io.Reader, path string, max int) *LineReader {
	if max <= 0 {
		max = MaxLineSize
	}
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), path: path, max: max}
}

// Next returns the next line, without its newline (a "\r" before it is
// kept), and its 1-based number; the line is valid until the next call.
// It returns io.EOF after the last line (a last line without a newline is
// a line), and r's error if reading fails. A line longer than max is
// returned as a nil line with a *LineError wrapping ErrLineTooLong; the
// reader goes on with the next line.
func (l *LineReader) Next() (line []byte, n int, err error) {
	if l.err != nil {
		return nil, l.n, l.err
	}
	l.buf = l.buf[:0]
	var size int64
	over := false
	for {
		chunk, err := l.r.ReadSlice('\n')
		size += int64(len(chunk))
		if !over {
			l.buf = append(l.buf, chunk...)
			if len(l.buf) > l.max+1 { // +1: the newline
				over = true
				l.buf = l.buf[:0]
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if size == 0 {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.EOF
			}
			l.err = err
			return nil, l.n, err
		}
		if err != nil && !errors.Is(err, io.EOF) {
			l.err = err
			return nil, l.n, err
		}
		l.n++
		l.stats.Lines++
		l.stats.Bytes += size
		if err != nil {
			l.err = io.EOF // the last line had no newline
		}
		line = l.buf
		if len(line) > 0 && line[len(line)-1] == '\n' {
			line = line[:len(line)-1]
		}
		if over || len(line) > l.max {
			return nil, l.n, &LineError{Path: l.path, Line: l.n, Err: fmt.Errorf("%w: %d bytes, over the %d a line may hold: left out", ErrLineTooLong, size, l.max)}
		}
		return line, l.n, nil
	}
}

// Stats returns what the reader has read so far.
func (l *LineReader) Stats() FileStats { return l.stats }
