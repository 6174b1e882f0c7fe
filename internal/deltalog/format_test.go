package deltalog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// sample returns a segment's bytes holding deltas and markers, and the
// records it holds.
func sample(t *testing.T) ([]byte, []Record) {
	t.Helper()
	b := []byte(Magic)
	var want []Record
	for i := range 6 {
		off := int64(len(b))
		if i%3 == 2 {
			id := [16]byte{byte(i), 1, 2}
			b = AppendSettled(b, id)
			want = append(want, Record{Type: TypeSettled, Event: id, Off: off, End: int64(len(b))})
			continue
		}
		var err error
		d := fmt.Sprintf("token %d ", i)
		b, err = AppendDelta(b, "text", "call", d)
		require.NoError(t, err)
		want = append(want, Record{Type: TypeDelta, Kind: "text", CallID: "call", Data: d, Off: off, End: int64(len(b))})
	}
	return b, want
}

func scanBytes(t *testing.T, b []byte, off int64) ([]Record, Result, error) {
	t.Helper()
	m := vfs.NewMemFS()
	require.NoError(t, m.MkdirAll("/s", 0o755))
	f, err := m.OpenFile("/s/x", 0o102, 0o644) // O_RDWR|O_CREATE
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	var got []Record
	res, err := Scan(m, "/s/x", off, func(r Record) error { got = append(got, r); return nil })
	return got, res, err
}

func TestScanRoundTrip(t *testing.T) {
	b, want := sample(t)
	got, res, err := scanBytes(t, b, 0)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, int64(len(b)), res.End)
	assert.False(t, res.Torn)
	// From a record's offset: the records from it.
	got, _, err = scanBytes(t, b, want[3].Off)
	require.NoError(t, err)
	assert.Equal(t, want[3:], got)
}

// TestScanTruncated: a segment cut at any byte gives the records whole
// before the cut, with no error.
func TestScanTruncated(t *testing.T) {
	b, want := sample(t)
	for n := range len(b) {
		got, res, err := scanBytes(t, b[:n], 0)
		require.NoError(t, err, "cut at %d", n)
		k := 0
		for k < len(want) && want[k].End <= int64(n) {
			k++
		}
		if k > 0 || len(got) > 0 {
			assert.Equal(t, want[:k], got, "cut at %d", n)
		}
		end := int64(len(Magic))
		if k > 0 {
			end = want[k-1].End
		}
		if n < len(Magic) {
			end = 0
		}
		assert.Equal(t, end, res.End, "cut at %d", n)
		assert.Equal(t, int64(n) != end, res.Torn, "cut at %d", n)
	}
}

// TestScanGarbage: a byte changed anywhere gives a prefix of the records,
// and damage is located at the first record not returned.
func TestScanGarbage(t *testing.T) {
	b, want := sample(t)
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x5a
		got, res, err := scanBytes(t, c, 0)
		require.LessOrEqual(t, len(got), len(want))
		if len(got) > 0 {
			assert.Equal(t, want[:len(got)], got, "byte %d", i)
		}
		if err != nil {
			var ce *corrupt.Error
			require.True(t, errors.As(err, &ce), "byte %d: %v", i, err)
			assert.Equal(t, "/s/x", ce.Path)
			wantOff := int64(0)
			if len(got) > 0 {
				wantOff = got[len(got)-1].End
			} else if i >= len(Magic) {
				wantOff = int64(len(Magic))
			}
			assert.Equal(t, wantOff, ce.Offset, "byte %d", i)
			assert.Equal(t, wantOff, res.End)
		} else {
			assert.Less(t, len(got), len(want), "byte %d: a changed byte went unnoticed", i)
			assert.True(t, res.Torn, "byte %d", i)
		}
	}
}

// TestScanHostileLength: a length past MaxRecord is damage at once, read
// no further; zeros where a record belongs are a torn tail.
func TestScanHostileLength(t *testing.T) {
	b := []byte(Magic)
	b = binary.LittleEndian.AppendUint32(b, 0xffffffff)
	b = binary.LittleEndian.AppendUint32(b, 0)
	_, _, err := scanBytes(t, b, 0)
	var ce *corrupt.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(len(Magic)), ce.Offset)

	b = append([]byte(Magic), make([]byte, 64)...)
	got, res, err := scanBytes(t, b, 0)
	require.NoError(t, err)
	assert.Empty(t, got)
	assert.True(t, res.Torn)

	_, _, err = scanBytes(t, []byte("NOTDELTAxxxxxxxx"), 0)
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(0), ce.Offset)
}

func TestDeltaTooLarge(t *testing.T) {
	_, err := AppendDelta(nil, "text", "", string(make([]byte, MaxRecord)))
	assert.ErrorIs(t, err, ErrTooLarge)
}

func TestSegmentNames(t *testing.T) {
	g, ok := ParseSegmentName(SegmentName(42))
	assert.True(t, ok)
	assert.Equal(t, uint64(42), g)
	for _, bad := range []string{"42.deltas", "00000000000000000042.delta", "0000000000000000004x.deltas", "+0000000000000000042.deltas"} {
		_, ok := ParseSegmentName(bad)
		assert.False(t, ok, bad)
	}
}

// TestWriterSegments: the writer starts a new segment at each open, rolls
// over at a marker past SegmentBytes and removes superseded segments.
func TestWriterSegments(t *testing.T) {
	m := vfs.NewMemFS()
	dir := "/st"
	o := Options{FileMode: 0o644, DirMode: 0o755, SyncInterval: time.Hour, SegmentBytes: 200}
	w, err := Open(m, dir, 0, o)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), w.Gen())
	for i := range 30 {
		require.NoError(t, w.Delta("text", "", fmt.Sprint("d", i)))
		if i%5 == 4 {
			require.NoError(t, w.Settled([16]byte{byte(i)}))
		}
	}
	require.NoError(t, w.Close())
	gens, err := Segments(m, dir)
	require.NoError(t, err)
	require.Len(t, gens, 2, "the current segment and the one before")
	// Synced on Close and at the roll: a power cut keeps every record.
	c := m.CrashClone(vfs.KeepSynced, 1)
	var n int
	_, err = Scan(c, filepath.Join(dir, SegmentName(gens[0])), 0, func(Record) error { n++; return nil })
	require.NoError(t, err)
	assert.Positive(t, n)
	last := gens[1]
	w, err = Open(m, dir, last, o)
	require.NoError(t, err)
	assert.Equal(t, last+1, w.Gen())
	require.NoError(t, w.Close())
	gens, err = Segments(m, dir)
	require.NoError(t, err)
	assert.Equal(t, []uint64{last, last + 1}, gens)
}
