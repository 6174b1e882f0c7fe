package jsonl

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type scannedLine struct {
	off  int64
	text string
}

type scanResult struct {
	lines   []scannedLine
	tail    string
	tailOff int64
	end     int64
	err     error
}

// scanAll drains a Scanner, copying each line (Line is only valid until
// the next call to Next).
func scanAll(r io.Reader, base int64) scanResult {
	s := NewScanner(r, base, testMaxLine)
	var res scanResult
	for s.Next() {
		res.lines = append(res.lines, scannedLine{s.Offset(), string(s.Line())})
	}
	res.tail = string(s.Tail())
	res.tailOff = s.Offset()
	res.end = s.End()
	res.err = s.Err()
	return res
}

func TestScanner(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		base    int64
		lines   []scannedLine
		tail    string
		tailOff int64
	}{
		{name: "empty", in: "", base: 0, tailOff: 0},
		{name: "empty with base", in: "", base: 4096, tailOff: 4096},
		{name: "only tail", in: "abc", base: 10, tail: "abc", tailOff: 10},
		{name: "one line", in: "abc\n", base: 0, lines: []scannedLine{{0, "abc"}}, tailOff: 4},
		{name: "empty lines", in: "\n\n\n", base: 1, lines: []scannedLine{{1, ""}, {2, ""}, {3, ""}}, tailOff: 4},
		{
			name: "lines and tail with base", in: "ab\ncde\n\nfg", base: 100,
			lines:   []scannedLine{{100, "ab"}, {103, "cde"}, {107, ""}},
			tail:    "fg",
			tailOff: 108,
		},
		{
			name: "CR is kept", in: "a\r\nb\r\n", base: 0,
			lines:   []scannedLine{{0, "a\r"}, {3, "b\r"}},
			tailOff: 6,
		},
		{
			name: "torn framed line", in: `{"a":1,"crc":"149cdbb2"}` + "\n" + `{"a":2,"cr`, base: 7,
			lines:   []scannedLine{{7, `{"a":1,"crc":"149cdbb2"}`}},
			tail:    `{"a":2,"cr`,
			tailOff: 7 + 25,
		},
		// A line holding a zero byte is kept up to it (TestScannerLimits).
		{name: "NUL bytes", in: "a\x00\n\x00", base: 0, lines: []scannedLine{{0, "a"}}, tail: "", tailOff: 3},
	}
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
		{"half", iotest.HalfReader},
		{"data with EOF", iotest.DataErrReader},
	}
	for _, tt := range tests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				res := scanAll(rd.wrap(strings.NewReader(tt.in)), tt.base)
				require.NoError(t, res.err)
				assert.Equal(t, tt.lines, res.lines)
				assert.Equal(t, tt.tail, res.tail)
				assert.Equal(t, tt.tailOff, res.tailOff, "tail offset")
				assert.Equal(t, tt.base+int64(len(tt.in)), res.end, "end")
			})
		}
	}
}

// Lines longer than bufio.Scanner's 64 KiB token limit and longer than the
// Scanner's own buffer come back whole, with correct offsets around them.
func TestScannerLongLines(t *testing.T) {
	sizes := []int{64<<10 - 1, 64 << 10, 64<<10 + 1, 200_000, 1 << 20, 3<<20 + 17}
	var in bytes.Buffer
	var want []scannedLine
	const base = 12345
	add := func(s string) {
		want = append(want, scannedLine{base + int64(in.Len()), s})
		in.WriteString(s)
		in.WriteByte('\n')
	}
	add("short")
	for i, n := range sizes {
		// Distinct content per line so a mixed-up fragment shows.
		b := make([]byte, n)
		for j := range b {
			b[j] = 'a' + byte((i+j)%26)
		}
		add(string(b))
		add("")
	}
	tailOff := base + int64(in.Len())
	tail := strings.Repeat("t", 100_000)
	in.WriteString(tail)

	for _, name := range []string{"whole", "one byte"} {
		t.Run(name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(in.Bytes())
			if name == "one byte" {
				r = iotest.OneByteReader(r)
			}
			res := scanAll(r, base)
			require.NoError(t, res.err)
			require.Len(t, res.lines, len(want))
			for i := range want {
				assert.Equal(t, want[i].off, res.lines[i].off, "offset of line %d", i)
				// Compare lengths first: a failure message with megabyte
				// strings is useless.
				if assert.Equal(t, len(want[i].text), len(res.lines[i].text), "length of line %d", i) {
					assert.True(t, want[i].text == res.lines[i].text, "content of line %d", i)
				}
			}
			assert.Equal(t, len(tail), len(res.tail))
			assert.True(t, tail == res.tail)
			assert.Equal(t, tailOff, res.tailOff)
			assert.Equal(t, base+int64(in.Len()), res.end)
		})
	}
}

func TestScannerEmptyInput(t *testing.T) {
	s := NewScanner(strings.NewReader(""), 77, testMaxLine)
	assert.False(t, s.Next())
	assert.Empty(t, s.Tail())
	assert.Empty(t, s.Line())
	assert.NoError(t, s.Err())
	assert.Equal(t, int64(77), s.Offset())
	assert.Equal(t, int64(77), s.End())
	assert.False(t, s.Next(), "Next stays false")
}

// End tracks the bytes consumed so far: after a line it is the offset just
// past that line's newline.
func TestScannerEndAfterEachLine(t *testing.T) {
	s := NewScanner(strings.NewReader("a\nbb\nccc\n"), 5, testMaxLine)
	var ends []int64
	for s.Next() {
		assert.Equal(t, s.Offset()+int64(len(s.Line()))+1, s.End())
		ends = append(ends, s.End())
	}
	assert.Equal(t, []int64{7, 10, 14}, ends)
}

func TestScannerStaysDoneAfterEnd(t *testing.T) {
	s := NewScanner(strings.NewReader("x\ny"), 0, testMaxLine)
	require.True(t, s.Next())
	require.False(t, s.Next())
	assert.Equal(t, "y", string(s.Tail()))
	for i := 0; i < 3; i++ {
		assert.False(t, s.Next())
		assert.Equal(t, "y", string(s.Tail()))
		assert.Equal(t, int64(2), s.Offset())
		assert.NoError(t, s.Err())
	}
}

// errAfterReader returns its data, then err instead of io.EOF.
type errAfterReader struct {
	r   io.Reader
	err error
}

func (e *errAfterReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

func TestScannerReadError(t *testing.T) {
	boom := errors.New("boom")
	for _, rd := range []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"whole", func(r io.Reader) io.Reader { return r }},
		{"one byte", iotest.OneByteReader},
	} {
		t.Run(rd.name, func(t *testing.T) {
			in := "one\ntwo\npart"
			res := scanAll(&errAfterReader{r: rd.wrap(strings.NewReader(in)), err: boom}, 3)
			assert.ErrorIs(t, res.err, boom)
			assert.Equal(t, []scannedLine{{3, "one"}, {7, "two"}}, res.lines)
			assert.Equal(t, "part", res.tail, "bytes read before the error")
			assert.Equal(t, int64(11), res.tailOff)
			assert.Equal(t, int64(3+len(in)), res.end)
		})
	}

	t.Run("immediate", func(t *testing.T) {
		s := NewScanner(iotest.ErrReader(boom), 0, testMaxLine)
		assert.False(t, s.Next())
		assert.ErrorIs(t, s.Err(), boom)
		assert.Empty(t, s.Tail())
		assert.False(t, s.Next(), "an error is sticky")
		assert.ErrorIs(t, s.Err(), boom)
	})

	t.Run("unexpected EOF is an error, not a clean end", func(t *testing.T) {
		s := NewScanner(&errAfterReader{r: strings.NewReader("a\nb"), err: io.ErrUnexpectedEOF}, 0, testMaxLine)
		require.True(t, s.Next())
		require.False(t, s.Next())
		assert.ErrorIs(t, s.Err(), io.ErrUnexpectedEOF)
	})
}

// A section of a file scanned from a non-zero base reports offsets in the
// file, so a caller can cut the file at Offset.
func TestScannerSectionOffsets(t *testing.T) {
	file := []byte("skip me\n" + "first\n" + "second\n" + "torn")
	const base = 8
	s := NewScanner(io.NewSectionReader(bytes.NewReader(file), base, 1<<62), base, testMaxLine)
	for s.Next() {
		assert.Equal(t, string(s.Line()), string(file[s.Offset():s.Offset()+int64(len(s.Line()))]))
		assert.Equal(t, byte('\n'), file[s.Offset()+int64(len(s.Line()))])
	}
	require.NoError(t, s.Err())
	assert.Equal(t, "torn", string(file[s.Offset():]))
	assert.Equal(t, s.Tail(), file[s.Offset():])
	assert.Equal(t, int64(len(file)), s.End())
}

func TestScannerSizeHint(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	input := "a\n" + long + "\nb"
	for _, size := range []int64{0, 1, 3, int64(len(input)), 1 << 30} {
		sc := NewScannerSize(strings.NewReader(input), 10, size, testMaxLine)
		var got []string
		for sc.Next() {
			got = append(got, string(sc.Line()))
		}
		require.NoError(t, sc.Err())
		assert.Equal(t, []string{"a", long}, got, "size hint %d", size)
		assert.Equal(t, "b", string(sc.Tail()))
		assert.Equal(t, int64(10+len(input)), sc.End())
	}
}

// testMaxLine is a line limit that the tests of whole lines never reach.
const testMaxLine = 1 << 30

// TestScannerLimits: a line longer than the maximum, or holding a zero
// byte, is malformed and kept only up to the first zero and the maximum;
// its offsets and the lines after it are as for a whole line. Holes are
// the zero runs aligned to the sector, and a tail of zeros is free space.
func TestScannerLimits(t *testing.T) {
	type line struct {
		text string
		bad  error
		hole bool
	}
	zeros := func(n int) string { return string(make([]byte, n)) }
	tests := []struct {
		name     string
		in       string
		base     int64
		max      int
		lines    []line
		tail     string
		tailZero bool
	}{
		{name: "at the maximum", in: "abcd\n", max: 4, lines: []line{{text: "abcd"}}, tailZero: true},
		{name: "one past", in: "abcde\nxy\n", max: 4, lines: []line{{"abcd", ErrLineTooLong, false}, {text: "xy"}}, tailZero: true},
		{name: "zero byte", in: "ab\x00cd\nok\n", max: 100, lines: []line{{"ab", ErrZeroByte, false}, {text: "ok"}}, tailZero: true},
		{name: "zero past the maximum", in: "abcdef\x00\n", max: 3, lines: []line{{"abc", ErrLineTooLong, false}}, tailZero: true},
		{name: "tail of zeros", in: "ok\n" + zeros(5000), max: 100, lines: []line{{text: "ok"}}, tailZero: true},
		{name: "tail with data", in: "ok\n" + zeros(10) + "x", max: 100, lines: []line{{text: "ok"}}, tailZero: false},
		{name: "long tail", in: "ok\n" + strings.Repeat("t", 50), max: 10, lines: []line{{text: "ok"}}, tail: strings.Repeat("t", 10)},
		{name: "hole from the line start", in: "ab\n" + zeros(509) + "x\n", max: 1000, lines: []line{{text: "ab"}, {"", ErrZeroByte, true}}, tailZero: true},
		{name: "hole at a sector", in: strings.Repeat("a", 512) + zeros(512) + "b\n", max: 2000, lines: []line{{strings.Repeat("a", 512), ErrZeroByte, true}}, tailZero: true},
		{name: "zeros off the sectors", in: strings.Repeat("a", 100) + zeros(1000) + "b\n", max: 2000, lines: []line{{strings.Repeat("a", 100), ErrZeroByte, false}}, tailZero: true},
		{name: "hole ending the line", in: "a" + zeros(511) + "\n", max: 10, lines: []line{{"a", ErrZeroByte, false}}, tailZero: true},
		{name: "hole to the newline", in: zeros(512) + "\n", max: 10, lines: []line{{"", ErrZeroByte, true}}, tailZero: true},
	}
	for _, tt := range tests {
		for _, rd := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"one byte", iotest.OneByteReader}} {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				s := NewScanner(rd.wrap(strings.NewReader(tt.in)), tt.base, tt.max)
				s.TrackHoles(512)
				var got []line
				next := tt.base
				for s.Next() {
					assert.Equal(t, next, s.Offset())
					next = s.End()
					var bad error
					if err := s.Malformed(); err != nil {
						bad = ErrLineTooLong
						if errors.Is(err, ErrZeroByte) {
							bad = ErrZeroByte
						}
					}
					got = append(got, line{string(s.Line()), bad, s.Hole()})
				}
				require.NoError(t, s.Err())
				assert.Equal(t, tt.lines, got)
				assert.Equal(t, tt.tail, string(s.Tail()))
				assert.Equal(t, tt.tailZero, s.TailZero())
				assert.Equal(t, tt.base+int64(len(tt.in)), s.End())
			})
		}
	}
}

// TestScannerSparseMemory: scanning a long run of zero bytes (a sparse
// file) keeps nothing of them.
func TestScannerSparseMemory(t *testing.T) {
	const size = 128 << 20 // 128 times the allocation bound
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	s := NewScannerSize(io.LimitReader(zeroReader{}, size), 0, size, 1<<20)
	s.TrackHoles(512)
	for s.Next() {
		t.Fatal("no line in zeros")
	}
	require.NoError(t, s.Err())
	assert.True(t, s.TailZero())
	assert.Equal(t, int64(size), s.End())
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated")
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestScannerStopAtMalformed: a scanner told to stop at a malformed line
// returns it as soon as it is known bad, reads no further, and ends.
func TestScannerStopAtMalformed(t *testing.T) {
	for _, in := range []string{"ok\nab\x00" + strings.Repeat("\x00", 100<<10) + "\nnext\n", "ok\n" + strings.Repeat("y", 100<<10) + "\nnext\n"} {
		r := strings.NewReader(in)
		s := NewScanner(r, 0, 1000)
		s.StopAtMalformed()
		require.True(t, s.Next())
		assert.Equal(t, "ok", string(s.Line()))
		assert.NoError(t, s.Malformed())
		require.True(t, s.Next())
		assert.Error(t, s.Malformed())
		assert.Less(t, s.End(), int64(70<<10), "the rest of the line is not read")
		assert.Greater(t, r.Len(), 30<<10, "bytes left unread")
		assert.False(t, s.Next())
		assert.NoError(t, s.Err())
		assert.False(t, s.TailZero())
	}
}
