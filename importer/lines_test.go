package importer

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readAll reads every line of data with a LineReader of max bytes: the
// lines, and the numbers of those reported too long.
func readAll(t testing.TB, data []byte, max int) (lines []string, long []int, st FileStats) {
	lr := NewLineReader(bytes.NewReader(data), "f.jsonl", max)
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			return lines, long, lr.Stats()
		}
		if errors.Is(err, ErrLineTooLong) {
			var le *LineError
			require.ErrorAs(t, err, &le)
			require.Equal(t, "f.jsonl", le.Path)
			require.Equal(t, n, le.Line)
			require.Nil(t, line)
			long = append(long, n)
			continue
		}
		require.NoError(t, err)
		require.Equal(t, len(lines)+len(long)+1, n, "lines are numbered from 1")
		lines = append(lines, string(line))
	}
}

func TestLineReader(t *testing.T) {
	cases := []struct {
		name  string
		data  string
		max   int
		lines []string
		long  []int
	}{
		{"empty", "", 10, nil, nil},
		{"lines", "a\nbb\n\nccc\n", 10, []string{"a", "bb", "", "ccc"}, nil},
		{"no final newline", "a\nbb", 10, []string{"a", "bb"}, nil},
		{"crlf kept for the caller", "a\r\nb\r\n", 10, []string{"a\r", "b\r"}, nil},
		{"exactly max", "12345\n6\n", 5, []string{"12345", "6"}, nil},
		{"one over max", "123456\n7\n", 5, []string{"7"}, []int{1}},
		{"long in the middle", "a\n" + strings.Repeat("x", 200_000) + "\nb\n", 1000, []string{"a", "b"}, []int{2}},
		{"long at the end without newline", "a\n" + strings.Repeat("x", 200_000), 1000, []string{"a"}, []int{2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lines, long, st := readAll(t, []byte(tc.data), tc.max)
			assert.Equal(t, tc.lines, lines)
			assert.Equal(t, tc.long, long)
			assert.Equal(t, int64(len(tc.data)), st.Bytes)
			assert.Equal(t, len(tc.lines)+len(tc.long), st.Lines)
		})
	}
}

// A read error is returned, and again on every later call.
func TestLineReaderError(t *testing.T) {
	boom := errors.New("boom")
	lr := NewLineReader(io.MultiReader(strings.NewReader("a\nb"), iotest.ErrReader(boom)), "f", 0)
	line, _, err := lr.Next()
	require.NoError(t, err)
	assert.Equal(t, "a", string(line))
	_, _, err = lr.Next()
	assert.ErrorIs(t, err, boom)
	_, _, err = lr.Next()
	assert.ErrorIs(t, err, boom)
}

// FuzzLineReader: the lines read are those of bytes.Split, each of more
// than max bytes reported instead, and the bytes all counted.
func FuzzLineReader(f *testing.F) {
	f.Add([]byte("a\nbb\n\nccc"), 2)
	f.Add([]byte("\n\n\n"), 0)
	f.Add([]byte(strings.Repeat("x", 70_000)+"\ny"), 65_536)
	f.Fuzz(func(t *testing.T, data []byte, max int) {
		if max <= 0 || max > 1<<20 {
			max = 1 + max&0xffff
		}
		lines, long, st := readAll(t, data, max)
		var want []string
		var wantLong []int
		parts := bytes.Split(data, []byte("\n"))
		if len(parts) > 0 && len(parts[len(parts)-1]) == 0 {
			parts = parts[:len(parts)-1] // after the final newline
		}
		for i, p := range parts {
			if len(p) > max {
				wantLong = append(wantLong, i+1)
			} else {
				want = append(want, string(p))
			}
		}
		assert.Equal(t, want, lines)
		assert.Equal(t, wantLong, long)
		assert.Equal(t, int64(len(data)), st.Bytes)
		assert.Equal(t, len(parts), st.Lines)
	})
}

func TestSniff(t *testing.T) {
	cases := []struct {
		line, want string
	}{
		{`{"type":"session","version":3,"id":"s","timestamp":"2025-01-01T00:00:00Z","cwd":"/"}`, FormatPi},
		{`{"type":"session","id":"s","timestamp":"2025-01-01T00:00:00Z"}`, FormatPi},
		{`{"timestamp":"2025-01-01T00:00:00Z","type":"session_meta","payload":{"id":"s1"}}`, FormatCodex},
		{`{"id":"0199e000","timestamp":"2025-05-01T12:00:00.000Z","instructions":"Be terse."}`, FormatCodex},
		{`{"parentUuid":null,"isSidechain":false,"type":"user","uuid":"u","sessionId":"s","timestamp":"2026-01-01T00:00:00Z"}`, FormatClaude},
		{`{"type":"queue-operation","operation":"dequeue","timestamp":"2026-01-01T00:00:00Z","sessionId":"s"}`, FormatClaude},
		{`{"type":"summary","summary":"A title","leafUuid":"u"}`, FormatClaude},
		{`{"type":"file-history-snapshot","messageId":"m","snapshot":{}}`, FormatClaude},
		{`{"type":"message","id":"e1","parentId":null}`, ""},
		{`{"timestamp":"2025-01-01T00:00:00Z","type":"response_item","payload":{}}`, ""},
		{`not json`, ""},
		{`[]`, ""},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, Sniff([]byte(tc.line)), tc.line)
	}
	err := WrongFormat("x.jsonl", FormatPi, []byte(cases[4].line))
	var fe *FormatError
	require.ErrorAs(t, err, &fe)
	assert.ErrorIs(t, err, ErrWrongFormat)
	assert.Equal(t, FormatError{Path: "x.jsonl", Want: FormatPi, Looks: FormatClaude}, *fe)
	assert.Equal(t, "x.jsonl: importer: a file of another format: it looks like a Claude Code transcript, not a Pi session (import it as claude)", err.Error())
	assert.NoError(t, WrongFormat("x.jsonl", FormatClaude, []byte(cases[4].line)))
	assert.NoError(t, WrongFormat("x.jsonl", FormatPi, []byte(`{"type":"message"}`)))
}
