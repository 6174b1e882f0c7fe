package jsonl

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seedFiles returns the contents of the files in testdata/ (not the fuzz
// corpus directories) and, separately, each of their lines.
func seedFiles(f *testing.F) (files, lines [][]byte) {
	f.Helper()
	entries, err := os.ReadDir("testdata")
	require.NoError(f, err)
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("testdata", e.Name()))
		require.NoError(f, err)
		files = append(files, b)
		lines = append(lines, bytes.Split(b, []byte("\n"))...)
	}
	require.NotEmpty(f, files, "no seed files in testdata")
	return files, lines
}

// literalSeeds are inputs worth keeping whatever testdata holds.
var literalSeeds = []string{
	``,
	`{}`,
	`{"a":1}`,
	`{"a":1,"crc":"149cdbb2"}`,
	`{"a":1,"crc":"149CDBB2"}`,
	`{x,"crc":"00000000"}`,
	`{"a":{"b":[1,{"c":"}"}]},"d":"\"\\"}`,
	`{"a":[}}`,
	`{"a":1,}`,
	`{"a":"\`,
	" { \"a\" : [ ] , \"b\" : { } } ",
	"\n\n{\"a\":1}\n{\"b\"",
	"\xff\xfe\x00{\"",
}

// compactObject reports whether b is what Seal accepts: a compact JSON
// object with at least one member.
func compactObject(b []byte) bool {
	if !json.Valid(b) || len(b) < 2 || b[0] != '{' || string(b) == "{}" {
		return false
	}
	var c bytes.Buffer
	if err := json.Compact(&c, b); err != nil {
		return false
	}
	return bytes.Equal(c.Bytes(), b)
}

func FuzzVerify(f *testing.F) {
	files, lines := seedFiles(f)
	for _, b := range append(files, lines...) {
		f.Add(b)
	}
	for _, s := range literalSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Never panics, and only ever returns its two errors.
		err := Verify(data)
		if err != nil && err != ErrFrame && err != ErrChecksum {
			t.Fatalf("Verify(%q) = %v", data, err)
		}

		// Verify accepts exactly what Seal produces: a line it accepts is
		// rebuilt byte for byte by sealing its covered part.
		if err == nil {
			obj := append(append([]byte(nil), data[:len(data)-frameSuffixLen]...), '}')
			require.Equal(t, string(data)+"\n", string(Seal(nil, obj)))
		}

		if !compactObject(data) {
			return
		}
		sealed := Seal(nil, data)
		require.Equal(t, 1, bytes.Count(sealed, []byte("\n")), "one newline, at the end")
		line := sealed[:len(sealed)-1]
		require.NoError(t, Verify(line), "Verify(Seal(%q))", data)

		// The framed line is still a JSON object: the original members plus
		// "crc".
		var want, got map[string]json.RawMessage
		if json.Unmarshal(data, &want) == nil && want["crc"] == nil && len(want) == bytes.Count(data, []byte(`":`)) {
			require.NoError(t, json.Unmarshal(line, &got), "framed line is not JSON: %q", line)
			assert.Contains(t, got, "crc")
			delete(got, "crc")
			assert.Equal(t, want, got)
		}

		// Any single changed byte is caught (bounded to keep runs fast).
		if len(line) > 2048 {
			return
		}
		mutated := make([]byte, len(line))
		for pos := range line {
			for _, x := range []byte{0x01, 0x20, 0x80, 0xff} {
				copy(mutated, line)
				mutated[pos] ^= x
				if Verify(mutated) == nil {
					t.Fatalf("byte %d of %q xor %#x not detected", pos, line, x)
				}
			}
		}
	})
}

// chunkReader returns at most n bytes per Read.
type chunkReader struct {
	r io.Reader
	n int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	if len(p) > c.n {
		p = p[:c.n]
	}
	return c.r.Read(p)
}

func FuzzScanner(f *testing.F) {
	files, _ := seedFiles(f)
	for i, b := range files {
		f.Add(b, uint32(i*1000), uint16(i), uint16(1000))
	}
	for i, s := range literalSeeds {
		f.Add([]byte(s), uint32(i), uint16(1), uint16(5))
	}
	f.Add([]byte(strings.Repeat("x", 70_000)+"\n"+strings.Repeat("y", 10)), uint32(1)<<31, uint16(4096), uint16(65535))
	f.Add(append(append([]byte("ab\n"), make([]byte, 1500)...), "cd\n\x00\x00"...), uint32(509), uint16(100), uint16(8))
	f.Fuzz(func(t *testing.T, data []byte, base uint32, chunk, maxLine uint16) {
		s := NewScanner(&chunkReader{r: bytes.NewReader(data), n: int(chunk) + 1}, int64(base), int(maxLine))
		s.TrackHoles(512)
		// What it must find: the input split at its newlines, each line
		// whole if short enough and free of zeros, else kept up to its
		// first zero and its first maxLine bytes.
		want := bytes.Split(data, []byte("\n"))
		wantTail := want[len(want)-1]
		want = want[:len(want)-1]
		kept := func(b []byte) []byte {
			if z := bytes.IndexByte(b, 0); z >= 0 {
				b = b[:z]
			}
			return b[:min(len(b), int(maxLine))]
		}
		next := int64(base)
		i := 0
		for s.Next() {
			require.Less(t, i, len(want), "more lines than the input holds")
			line, w := s.Line(), want[i]
			require.Equal(t, next, s.Offset(), "line offset")
			next += int64(len(w)) + 1
			require.Equal(t, next, s.End(), "end after line")
			whole := len(w) <= int(maxLine) && bytes.IndexByte(w, 0) < 0
			require.Equal(t, whole, s.Malformed() == nil, "line %d malformed: %v", i, s.Malformed())
			require.True(t, bytes.Equal(kept(w), line), "line %d: got %q", i, line)
			require.Equal(t, refHole(w, s.Offset()), s.Hole(), "hole in line %d", i)
			i++
		}
		require.NoError(t, s.Err())
		require.Equal(t, len(want), i, "lines")
		require.Equal(t, next, s.Offset(), "tail offset")
		require.True(t, bytes.Equal(kept(wantTail), s.Tail()), "tail %q", s.Tail())
		require.Equal(t, len(bytes.Trim(wantTail, "\x00")) == 0, s.TailZero(), "tail of zeros")
		require.Equal(t, int64(base)+int64(len(data)), s.End())
	})
}

// refHole is the plain statement of a hole in line, at offset off: a run
// of zero bytes from the line's start or a multiple of 512 to a multiple
// of 512 (see Scanner.TrackHoles).
func refHole(line []byte, off int64) bool {
	for i := 0; i < len(line); {
		if line[i] != 0 {
			i++
			continue
		}
		j := i
		for j < len(line) && line[j] == 0 {
			j++
		}
		if a, b := off+int64(i), off+int64(j); (i == 0 || a%512 == 0) && b%512 == 0 {
			return true
		}
		i = j
	}
	return false
}
