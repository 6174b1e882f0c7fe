package blob

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/synth"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// shot is a stand-in for a base64 screenshot of n bytes.
func shot(seed uint64, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	b := make([]byte, n)
	x := seed*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = alphabet[x%64]
	}
	return string(b)
}

// record returns the compact JSON of v.
func record(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// TestStrings: Strings finds the strings of at least the threshold,
// values and keys, at any depth, with escapes (an escaped quote does not
// end a string), and gives each its place in the skeleton; Skeleton
// takes exactly those bytes out.
func TestStrings(t *testing.T) {
	long := strings.Repeat("a", 100)
	esc := strings.Repeat(`q"\`, 40) // 120 bytes as given, 200 escaped
	for _, tc := range []struct {
		name string
		rec  []byte
		min  int
		want []string // the strings' bytes, as stored (escaped)
	}{
		{"none", []byte(`{"a":"short","b":[1,2,3]}`), 64, nil},
		{"one value", record(t, map[string]any{"output": long, "id": "x"}), 64, []string{long}},
		{"below the threshold", record(t, map[string]any{"output": long}), 101, nil},
		{"at the threshold", record(t, map[string]any{"output": long}), 100, []string{long}},
		{"minimum", record(t, map[string]any{"output": strings.Repeat("b", 63)}), 1, nil},
		{"a key", []byte(`{"` + long + `":1}`), 64, []string{long}},
		{"nested and repeated", record(t, map[string]any{"a": []any{map[string]any{"x": long}}, "b": long}), 64, []string{long, long}},
		{"escapes", record(t, map[string]any{"output": esc}), 64, []string{strings.ReplaceAll(strings.ReplaceAll(esc, `\`, `\\`), `"`, `\"`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			refs := Strings(tc.rec, tc.min)
			require.Len(t, refs, len(tc.want))
			skel := Skeleton(nil, tc.rec, refs)
			var taken int64
			for i, r := range refs {
				at := r.At + taken
				got := string(tc.rec[at : at+r.Size])
				assert.Equal(t, tc.want[i], got)
				assert.Equal(t, sha256.Sum256([]byte(got)), r.Digest)
				assert.Equal(t, byte('"'), tc.rec[at-1], "a string starts after its quote")
				assert.Equal(t, byte('"'), tc.rec[at+r.Size], "and ends before its quote")
				taken += r.Size
			}
			assert.Equal(t, int64(len(tc.rec))-taken, int64(len(skel)))
		})
	}
}

// TestSplitRoundTrip: a record stored split reads back byte for byte;
// the string it shares with another record is stored once; a power cut
// after PutSplit returned keeps all of it.
func TestSplitRoundTrip(t *testing.T) {
	m := vfs.NewMemFS()
	sessionDir(t, m)
	img := shot(1, 4000)
	var known Dirs
	for i := range 3 {
		rec := record(t, map[string]any{"call_id": i, "output": img, "log": synth.ToolOutput(uint64(i), 300)})
		refs := Strings(rec, 1000)
		require.Len(t, refs, 1)
		d := sha256.Sum256(rec)
		require.NoError(t, PutSplit(m, "/s", d, rec, refs, 0o600, 0o700, &known))
		crashed := m.CrashClone(vfs.KeepSynced, 0)
		got, err := Read(crashed, "/s", d, int64(len(rec)))
		require.NoError(t, err)
		assert.Equal(t, rec, got)
		b, err := vfs.ReadFile(m, layout.BlobPath("/s", d))
		require.NoError(t, err)
		assert.True(t, IsSplit(b))
		assert.Less(t, len(b), 1000, "the split blob holds the record without its image")
		got, err = Decode("key", b, d, int64(len(rec)))
		assert.Nil(t, got)
		assert.ErrorContains(t, err, "without its strings", "Decode alone refuses a split blob")
	}
	assert.Equal(t, 4, countBlobs(t, m), "three split blobs and the image once")
}

// TestSplitDamage: every change of a split blob's string table, and a
// missing or damaged string, is refused with a *corrupt.Error naming the
// file at fault: the split blob for its own bytes (the table's CRC), the
// string blob for a string.
func TestSplitDamage(t *testing.T) {
	m := vfs.NewMemFS()
	sessionDir(t, m)
	rec := record(t, map[string]any{"a": shot(2, 200), "b": shot(3, 300), "c": "tail"})
	refs := Strings(rec, 64)
	require.Len(t, refs, 2)
	d := sha256.Sum256(rec)
	var known Dirs
	require.NoError(t, PutSplit(m, "/s", d, rec, refs, 0o600, 0o700, &known))
	path := layout.BlobPath("/s", d)
	orig, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	tableEnd := 8 + int(binary.LittleEndian.Uint32(orig[4:]))
	for pos := range tableEnd {
		for _, x := range []byte{0x01, 0x80} {
			b := []byte(string(orig))
			b[pos] ^= x
			writeFile(t, m, path, b)
			_, err := Read(m, "/s", d, int64(len(rec)))
			var ce *corrupt.Error
			if assert.ErrorAs(t, err, &ce, "offset %d xor %#x", pos, x) {
				assert.Equal(t, path, ce.Path, "offset %d xor %#x: %v", pos, x, err)
			}
		}
	}
	writeFile(t, m, path, orig)
	_, err = Read(m, "/s", d, int64(len(rec)))
	require.NoError(t, err)

	// A string missing, then damaged: the error names the string blob.
	spath := layout.BlobPath("/s", refs[1].Digest)
	sorig, err := vfs.ReadFile(m, spath)
	require.NoError(t, err)
	require.NoError(t, m.Remove(spath))
	assert.True(t, Incomplete(m, "/s", d))
	_, err = Read(m, "/s", d, int64(len(rec)))
	var ce *corrupt.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, spath, ce.Path)
	assert.ErrorContains(t, err, "missing")
	other := Encode([]byte(shot(4, 300)), nil)
	writeFile(t, m, spath, other)
	assert.False(t, Incomplete(m, "/s", d))
	_, err = Read(m, "/s", d, int64(len(rec)))
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, spath, ce.Path)
	writeFile(t, m, spath, sorig)
	_, err = Read(m, "/s", d, int64(len(rec)))
	require.NoError(t, err)
}

// TestSplitTableLies: a well-formed table (its CRC right) that puts a
// string in the wrong place, or names a string of the wrong length,
// does not make a record: the whole record's digest refuses it.
func TestSplitTableLies(t *testing.T) {
	m := vfs.NewMemFS()
	sessionDir(t, m)
	rec := record(t, map[string]any{"a": shot(5, 200), "b": "between", "c": shot(6, 200)})
	refs := Strings(rec, 64)
	require.Len(t, refs, 2)
	d := sha256.Sum256(rec)
	var known Dirs
	require.NoError(t, PutSplit(m, "/s", d, rec, refs, 0o600, 0o700, &known))
	path := layout.BlobPath("/s", d)
	skel := Skeleton(nil, rec, refs)
	for _, lie := range []func(r []Ref){
		func(r []Ref) { r[1].At-- },
		func(r []Ref) { r[0].At, r[1].At = r[0].At+1, r[1].At+1 },
		func(r []Ref) { r[0], r[1] = r[1], r[0]; r[0].At, r[1].At = r[1].At, r[0].At },
	} {
		lied := append([]Ref(nil), refs...)
		lie(lied)
		writeFile(t, m, path, Encode(skel, appendTable(nil, lied)))
		_, err := Read(m, "/s", d, int64(len(rec)))
		var ce *corrupt.Error
		if assert.ErrorAs(t, err, &ce) {
			assert.Equal(t, path, ce.Path)
		}
	}
}

// TestSweepKeepsStrings: GC keeps the strings of every split blob it
// keeps, removes those of a split blob it removes (when no kept one
// shares them), and removes nothing when a kept split blob's table
// cannot be read.
func TestSweepKeepsStrings(t *testing.T) {
	ctx := context.Background()
	m := vfs.NewMemFS()
	sessionDir(t, m)
	shared, own := shot(7, 500), shot(8, 500)
	var known Dirs
	putSplit := func(v any) ([32]byte, []Ref) {
		rec := record(t, v)
		refs := Strings(rec, 100)
		d := sha256.Sum256(rec)
		require.NoError(t, PutSplit(m, "/s", d, rec, refs, 0o600, 0o700, &known))
		return d, refs
	}
	kept, keptRefs := putSplit(map[string]any{"img": shared, "n": 1})
	gone, goneRefs := putSplit(map[string]any{"img": shared, "other": own})
	require.Len(t, keptRefs, 1)
	require.Len(t, goneRefs, 2)
	keep := func(d [32]byte) bool { return d == kept }
	none := func([32]byte) bool { return false }

	// A kept split blob whose table is damaged: nothing is removed.
	path := layout.BlobPath("/s", kept)
	orig, err := vfs.ReadFile(m, path)
	require.NoError(t, err)
	b := []byte(string(orig))
	b[10] ^= 0x01
	writeFile(t, m, path, b)
	_, err = Sweep(ctx, m, "/s", keep, none, false)
	var ce *corrupt.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, path, ce.Path)
	for _, d := range [][32]byte{kept, gone, goneRefs[0].Digest, goneRefs[1].Digest} {
		assert.False(t, Missing(m, "/s", d), "nothing removed")
	}
	writeFile(t, m, path, orig)

	rep, err := Sweep(ctx, m, "/s", keep, none, false)
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Kept, "the kept blob and its string")
	assert.Equal(t, 2, rep.Removed, "the other split blob and its own string")
	assert.False(t, Missing(m, "/s", keptRefs[0].Digest))
	assert.True(t, Missing(m, "/s", gone))
	for _, r := range goneRefs {
		assert.Equal(t, r.Digest != keptRefs[0].Digest, Missing(m, "/s", r.Digest))
	}
	_, err = Read(m, "/s", kept, int64(len(record(t, map[string]any{"img": shared, "n": 1}))))
	assert.NoError(t, err)
	_, err = FileRefs(m, "/s", gone)
	assert.True(t, errors.Is(err, os.ErrNotExist))
}

// FuzzDecodeSplit: DecodeWith on any bytes, with strings from a fixed
// set, never panics, never allocates past its bounds, and returns a
// record only when it is the one the digest names.
func FuzzDecodeSplit(f *testing.F) {
	rec := []byte(`{"a":"` + shot(9, 100) + `","b":"` + shot(10, 80) + `"}`)
	refs := Strings(rec, 64)
	d := sha256.Sum256(rec)
	f.Add(EncodeSplit(rec, refs, nil), int64(len(rec)))
	f.Add(Encode(rec, nil), int64(len(rec)))
	f.Add(appendTable(nil, refs), int64(len(rec)))
	strs := map[[32]byte][]byte{}
	var taken int64
	for _, r := range refs {
		at := r.At + taken
		strs[r.Digest] = rec[at : at+r.Size]
		taken += r.Size
	}
	src := func(r Ref) ([]byte, error) {
		if s, ok := strs[r.Digest]; ok {
			return s, nil
		}
		return nil, corrupt.Errorf("string", 0, "missing")
	}
	f.Fuzz(func(t *testing.T, b []byte, size int64) {
		got, err := DecodeWith("key", b, d, size, src)
		if err == nil {
			assert.Equal(t, rec, got)
			return
		}
		var ce *corrupt.Error
		assert.ErrorAs(t, err, &ce)
		_, _ = Refs(b)
	})
}

// countBlobs counts the blob files under /s.
func countBlobs(t *testing.T, m vfs.FS) int {
	t.Helper()
	root := "/s/" + layout.BlobsDir + "/sha256"
	subs, err := m.ReadDir(root)
	require.NoError(t, err)
	n := 0
	for _, sub := range subs {
		names, err := m.ReadDir(root + "/" + sub)
		require.NoError(t, err)
		for _, name := range names {
			if _, ok := Name(sub, name); ok {
				n++
			}
		}
	}
	return n
}
