package export

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	goodHeader = `{"format":"sessionstore-export","version":1,"scope":"tree","blobs":"inline","session":{"id":"01a039f0-0000-7000-8000-0000000000ff","created_at":"2026-08-25T16:59:00Z","updated_at":"2026-08-25T16:59:00Z"},"head":"01a039f0-0000-7000-8000-000000000002","events":2}`
	rootEvent  = `{"id":"01a039f0-0000-7000-8000-000000000001","parent_id":"00000000-0000-0000-0000-000000000000","kind":"message","role":"user","timestamp":"2026-08-25T17:00:01Z","record":{"content":"hi"},"size":16}`
	childEvent = `{"id":"01a039f0-0000-7000-8000-000000000002","parent_id":"01a039f0-0000-7000-8000-000000000001","kind":"message","role":"assistant","timestamp":"2026-08-25T17:00:02Z","record":{"content":"ho"},"size":16}`
)

// TestReaderErrors: each kind of bad input is refused with its sentinel
// and the line it is on.
func TestReaderErrors(t *testing.T) {
	lines := func(ls ...string) string { return strings.Join(ls, "\n") + "\n" }
	for _, tc := range []struct {
		name  string
		input string
		want  error
		line  int
	}{
		{"empty", "", ErrTruncated, 1},
		{"not json", "hello\n", ErrFormat, 1},
		{"other format", lines(strings.Replace(goodHeader, "sessionstore-export", "other", 1)), ErrFormat, 1},
		{"newer version", lines(strings.Replace(goodHeader, `"version":1`, `"version":2`, 1)), ErrVersion, 1},
		{"unknown scope", lines(strings.Replace(goodHeader, `"tree"`, `"forest"`, 1)), ErrFormat, 1},
		{"unknown blobs mode", lines(strings.Replace(goodHeader, `"inline"`, `"elsewhere"`, 1)), ErrFormat, 1},
		{"unknown header member", lines(strings.Replace(goodHeader, `"events":2`, `"events":2,"extra":1`, 1)), ErrFormat, 1},
		{"header without newline", goodHeader, ErrTruncated, 1},
		{"cut after one event", lines(goodHeader, rootEvent), ErrTruncated, 3},
		{"event line cut", lines(goodHeader, rootEvent) + childEvent[:40], ErrTruncated, 3},
		{"line past the count", lines(goodHeader, rootEvent, childEvent, childEvent), ErrFormat, 4},
		{"child before parent", lines(goodHeader, childEvent, rootEvent), ErrFormat, 2},
		{"repeated event", lines(goodHeader, rootEvent, rootEvent), ErrFormat, 3},
		{"unknown kind", lines(goodHeader, rootEvent, strings.Replace(childEvent, `"message"`, `"note"`, 1)), ErrFormat, 3},
		{"unknown role", lines(goodHeader, rootEvent, strings.Replace(childEvent, `"assistant"`, `"robot"`, 1)), ErrFormat, 3},
		{"bad digest", lines(goodHeader, rootEvent, strings.Replace(childEvent, `"size":16`, `"digest":"md5:00","size":16`, 1)), ErrFormat, 3},
		{"no record", lines(goodHeader, rootEvent, strings.Replace(childEvent, `{"content":"ho"}`, `null`, 1)), ErrFormat, 3},
		{"size disagrees", lines(goodHeader, rootEvent, strings.Replace(childEvent, `"size":16`, `"size":17`, 1)), ErrFormat, 3},
		{"garbage after the object", lines(goodHeader, rootEvent+" {}"), ErrFormat, 2},
		{"branch_from not the parent", lines(goodHeader, rootEvent, strings.Replace(childEvent, `"kind"`, `"branch_from":"01a039f0-0000-7000-8000-000000000009","kind"`, 1)), ErrFormat, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := readErr(tc.input)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tc.line, pe.Line)
			assert.Equal(t, "in.jsonl", pe.Name)
			assert.Equal(t, lineOffset(tc.input, tc.line), pe.Offset)
			assert.Contains(t, err.Error(), "in.jsonl:")
		})
	}
	assert.NoError(t, readErr(lines(goodHeader, rootEvent, childEvent)), "the good input")
}

// readErr reads input whole and returns its error (nil at a clean end).
func readErr(input string) error {
	r, err := NewReader(strings.NewReader(input), "in.jsonl")
	if err != nil {
		return err
	}
	for {
		_, err := r.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if _, again := r.Next(); again != err {
				return errors.New("Next did not repeat its error")
			}
			return err
		}
	}
}

// lineOffset is the byte offset of the 1-based line n of s.
func lineOffset(s string, n int) int64 {
	var off int64
	for i := 1; i < n; i++ {
		k := strings.IndexByte(s, '\n')
		if k < 0 {
			break
		}
		off += int64(k + 1)
		s = s[k+1:]
	}
	return off
}

// TestReadBlobErrors: a missing or changed blob file is refused.
func TestReadBlobErrors(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	s := fixture(t, st)
	dir := filepath.Join(t.TempDir(), "blobs")
	var buf bytes.Buffer
	_, err := JSONL(ctx, &buf, st, s, Options{BlobDir: dir})
	require.NoError(t, err)
	_, evs := readAll(t, buf.Bytes())
	blob := evs[6]
	require.NotEmpty(t, blob.Digest)
	_, err = ReadBlob(dir, blob)
	require.NoError(t, err)
	_, err = ReadBlob(t.TempDir(), blob)
	assert.ErrorIs(t, err, ErrBlobFile)
	name, err := BlobName(blob.Digest)
	require.NoError(t, err)
	other := evs[10]
	otherName, err := BlobName(other.Digest)
	require.NoError(t, err)
	require.NotEqual(t, name, otherName)
	// A file renamed over another blob's name does not match it.
	mixed := t.TempDir()
	data, err := ReadBlob(dir, blob)
	require.NoError(t, err)
	require.NoError(t, writeFile(filepath.Join(mixed, otherName), data))
	_, err = ReadBlob(mixed, other)
	assert.ErrorIs(t, err, ErrFormat)
	blob.Digest = "sha256:../../etc"
	_, err = ReadBlob(dir, blob)
	assert.ErrorIs(t, err, ErrFormat)
}

// FuzzReader: any input reads to a clean end or a located error, never a
// panic; what reads cleanly holds the events its header counts.
func FuzzReader(f *testing.F) {
	st := openStore(f)
	s := fixture(f, st)
	for _, opts := range []Options{{}, {Scope: ActivePath}, {Scope: Context, BlobDir: f.TempDir()}} {
		var buf bytes.Buffer
		_, err := JSONL(context.Background(), &buf, st, s, opts)
		require.NoError(f, err)
		f.Add(buf.Bytes())
	}
	snap, _ := snapshotSession(f, st)
	for _, opts := range []Options{{}, {BlobDir: f.TempDir()}} {
		var buf bytes.Buffer
		_, err := JSONL(context.Background(), &buf, st, snap, opts)
		require.NoError(f, err)
		f.Add(buf.Bytes())
	}
	require.NoError(f, st.Close())
	f.Add([]byte(goodHeader + "\n" + rootEvent + "\n" + childEvent + "\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewReader(bytes.NewReader(data), "fuzz")
		if err != nil {
			var pe *ParseError
			require.ErrorAs(t, err, &pe)
			return
		}
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				var pe *ParseError
				require.ErrorAs(t, err, &pe)
				assert.GreaterOrEqual(t, pe.Line, 2)
				return
			}
			n++
		}
		assert.Equal(t, r.Header().Events, n)
	})
}

func writeFile(path string, data []byte) error { return os.WriteFile(path, data, 0o600) }
