package export

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// blobLine returns the index of the first event line of an export that
// holds a blob's record inline.
func blobLine(t *testing.T, lines []string) int {
	t.Helper()
	for i, l := range lines[1:] {
		if strings.Contains(l, `"digest":"sha256:`) {
			return i + 1
		}
	}
	t.Fatal("no blob line")
	return 0
}

// TestReviewReaderInlineDigest: an inline blob record that does not match
// its digest (a byte changed, the size the same) is refused: the digest
// stays in the line so that a reader can check it.
func TestReviewReaderInlineDigest(t *testing.T) {
	st := openStore(t)
	s := fixture(t, st)
	var buf bytes.Buffer
	_, err := JSONL(context.Background(), &buf, st, s, Options{})
	require.NoError(t, err)
	lines := strings.Split(buf.String(), "\n")
	i := blobLine(t, lines)
	damaged := strings.Replace(lines[i], "pkg/module", "pkg/modulX", 1)
	require.NotEqual(t, lines[i], damaged)
	lines[i] = damaged
	err = readErr(strings.Join(lines, "\n"))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrFormat)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, i+1, pe.Line)
}

// TestReviewReaderPathOrder: a "path" export is one chain, root first;
// two of its lines swapped, or a line from elsewhere, are refused.
func TestReviewReaderPathOrder(t *testing.T) {
	st := openStore(t)
	s := fixture(t, st)
	var buf bytes.Buffer
	_, err := JSONL(context.Background(), &buf, st, s, Options{Scope: ActivePath})
	require.NoError(t, err)
	require.NoError(t, readErr(buf.String()), "the export as written reads")
	lines := strings.Split(buf.String(), "\n")
	require.Greater(t, len(lines), 5)
	swapped := append([]string(nil), lines...)
	swapped[2], swapped[3] = swapped[3], swapped[2]
	err = readErr(strings.Join(swapped, "\n"))
	assert.ErrorIs(t, err, ErrFormat)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 3, pe.Line)
}

// TestReviewReaderInlineNull: in an export with "blobs":"inline" every
// record is in its line; a blob's line with "record":null (its record
// lost) is refused.
func TestReviewReaderInlineNull(t *testing.T) {
	st := openStore(t)
	s := fixture(t, st)
	var buf bytes.Buffer
	_, err := JSONL(context.Background(), &buf, st, s, Options{})
	require.NoError(t, err)
	lines := strings.Split(buf.String(), "\n")
	i := blobLine(t, lines)
	at := strings.Index(lines[i], `"record":`)
	end := strings.Index(lines[i], `,"digest":`)
	require.True(t, at > 0 && end > at)
	lines[i] = lines[i][:at] + `"record":null` + lines[i][end:]
	err = readErr(strings.Join(lines, "\n"))
	require.Error(t, err)
	assert.ErrorIs(t, err, ErrFormat)
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, i+1, pe.Line)
}
