package seam

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/corrupt"
)

func TestSeqRanges(t *testing.T) {
	var rs []SeqRange
	for _, s := range []uint64{3, 4, 5, 7, 8, 10} {
		rs = AddSeq(rs, s)
	}
	assert.Equal(t, []SeqRange{{From: 3, To: 5}, {From: 7, To: 8}, {From: 10, To: 10}}, rs)
	for _, tc := range []struct {
		done, want []SeqRange
	}{
		{nil, rs},
		{[]SeqRange{{From: 4, To: 4}}, []SeqRange{{From: 3, To: 3}, {From: 5, To: 5}, {From: 7, To: 8}, {From: 10, To: 10}}},
		{[]SeqRange{{From: 1, To: 7}}, []SeqRange{{From: 8, To: 8}, {From: 10, To: 10}}},
		{[]SeqRange{{From: 3, To: 5}, {From: 10, To: 12}}, []SeqRange{{From: 7, To: 8}}},
		{[]SeqRange{{From: 0, To: 100}}, nil},
	} {
		assert.Equal(t, tc.want, DropSeqs(rs, tc.done), "dropping %v", tc.done)
	}
}

// TestLogKeys: log keys sort newest first, parse back to their number,
// and nothing else under the prefix parses as one.
func TestLogKeys(t *testing.T) {
	id := uuid.New()
	seqs := []uint64{1, 2, 10, 1 << 40, math.MaxUint64}
	var keys []string
	for _, s := range seqs {
		k := LogKey(id, s)
		keys = append(keys, k)
		got, ok := ParseLogKey(LogPrefix(id), k)
		require.True(t, ok, k)
		assert.Equal(t, s, got)
	}
	sorted := slices.Sorted(slices.Values(keys))
	slices.Reverse(sorted)
	assert.Equal(t, keys, sorted, "the newest object first in a listing")
	for _, bad := range []string{
		LogPrefix(id) + "1",
		LogPrefix(id) + "1844674407370955161a",
		LogPrefix(id) + "99999999999999999999", // past the largest number
		LogPrefix(id) + "18446744073709551615", // object 0
		LogPrefix(uuid.New()) + LogKey(id, 1)[len(LogPrefix(id)):],
		BlobKey(id, [32]byte{1}),
	} {
		_, ok := ParseLogKey(LogPrefix(id), bad)
		assert.False(t, ok, bad)
	}
}

// TestLogObject: an object decodes to the header and payload encoded; a
// flipped payload byte, a cut payload, a header that does not parse and
// a data object without bytes are damage naming the key, and another
// version is a VersionError.
func TestLogObject(t *testing.T) {
	lease := uuid.New()
	payload := []byte("some chunk bytes\n")
	b, err := EncodeObject(&Header{Kind: KindData, Lease: lease, Chunk: 3, Off: 100}, payload)
	require.NoError(t, err)
	h, got, err := DecodeObject("k", b)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, Header{V: Format, Kind: KindData, Lease: lease, Chunk: 3, Off: 100, Len: len(payload), CRC: h.CRC}, *h)

	flipped := slices.Clone(b)
	flipped[len(flipped)-3] ^= 1
	empty, err := EncodeObject(&Header{Kind: KindData}, nil)
	require.NoError(t, err)
	for name, bad := range map[string][]byte{
		"flipped":   flipped,
		"cut":       b[:len(b)-1],
		"no header": []byte("no newline"),
		"header":    []byte("{not json\n"),
		"empty":     empty,
	} {
		_, _, err := DecodeObject("k", bad)
		var ce *corrupt.Error
		if assert.ErrorAs(t, err, &ce, name) {
			assert.Equal(t, "k", ce.Path, name)
		}
	}
	v2 := []byte(`{"v":2,"kind":"meta","len":0,"crc":0}` + "\n")
	_, _, err = DecodeObject("k", v2)
	var ve *VersionError
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, 2, ve.Version)
}

// TestStateApply: a seal record makes its chunk sealed, once, and its
// data objects dead; other chunks' stay live.
func TestStateApply(t *testing.T) {
	st := &State{}
	st.Apply(1, &Header{Kind: KindData, Chunk: 1, Off: 0, Len: 10})
	st.Apply(2, &Header{Kind: KindData, Chunk: 2, Off: 0, Len: 5})
	st.Apply(3, &Header{Kind: KindData, Chunk: 1, Off: 10, Len: 7})
	before := st.Clone()
	st.Apply(4, &Header{Kind: KindSeal, Chunk: 1, Key: "c1", Size: 17})
	st.Apply(5, &Header{Kind: KindSeal, Chunk: 1, Key: "again", Size: 17})
	assert.Equal(t, []Sealed{{Chunk: 1, Key: "c1", Size: 17}}, st.Sealed)
	assert.Equal(t, []Piece{{Seq: 2, Chunk: 2, Len: 5}}, st.Live)
	assert.Equal(t, []SeqRange{{From: 1, To: 1}, {From: 3, To: 3}}, st.Dead)
	assert.Len(t, before.Live, 3, "a clone shares nothing")
	s, ok := st.SealedChunk(1)
	require.True(t, ok)
	assert.Equal(t, "c1", s.Key)
	_, ok = st.SealedChunk(2)
	assert.False(t, ok)
}

// TestTombstone: the tombstone's bytes are part of the log's format
// (remote.go, "Numbers are never freed"): fixed, the same for every
// object; it decodes as kind dead without a payload, and a state does
// not apply it.
func TestTombstone(t *testing.T) {
	const golden = `{"v":1,"kind":"dead","lease":"00000000-0000-0000-0000-000000000000","store":"00000000-0000-0000-0000-000000000000","len":0,"crc":0}` + "\n"
	assert.Equal(t, golden, string(Tombstone()))
	h, payload, err := DecodeObject("sessions/x/log/1", Tombstone())
	require.NoError(t, err)
	assert.Equal(t, KindDead, h.Kind)
	assert.Empty(t, payload)
	assert.False(t, IsMarker(h.Kind))
	st := &State{Live: []Piece{{Seq: 1, Chunk: 0, Off: 0, Len: 3}}}
	st.Apply(2, h)
	assert.Equal(t, &State{Live: []Piece{{Seq: 1, Chunk: 0, Off: 0, Len: 3}}}, st)
}

// TestBulkKeys: sealed chunks and blobs are bulk, every other key of the
// layout is not, and a prefix is under bulk keys exactly when one of them
// starts with it.
func TestBulkKeys(t *testing.T) {
	id := uuid.MustParse("0190a6f4-1c2b-7d3e-8f40-5a6b7c8d9e0f")
	lease := uuid.MustParse("0190a6f4-1c2b-7d3e-8f40-000000000001")
	bulk := []string{SealedKey(id, 3, lease), BlobKey(id, [32]byte{1, 2})}
	small := []string{LogKey(id, 7), MetaKey(id, 7), ClockKey(id), RenewKey(id, lease),
		SessionPrefix(id) + "forks/x", SessionPrefix(id) + "deleting", "sessions/short/chunks/x", "chunks/x", ""}
	for _, k := range bulk {
		assert.True(t, IsBulkKey(k), k)
	}
	for _, k := range small {
		assert.False(t, IsBulkKey(k), k)
	}
	for prefix, want := range map[string]bool{
		"": true, "s": true, "sessions/": true, "sessions/0190": true,
		SessionPrefix(id): true, SessionPrefix(id) + "c": true, SessionPrefix(id) + "chunks/": true,
		SessionPrefix(id) + "blobs/ab": true, SealedKey(id, 3, lease): true,
		LogPrefix(id): false, SessionPrefix(id) + "l": false, MetaPrefix: false, "m": false,
		SessionPrefix(id) + "renew/": false, "sessions/short/": false, "sessionsX": false,
	} {
		assert.Equal(t, want, BulkKeysUnder(prefix), "prefix %q", prefix)
		// The answer agrees with the keys: a bulk key under a prefix
		// said to have none would be missed by a listing.
		for _, k := range append(bulk, small...) {
			if IsBulkKey(k) && strings.HasPrefix(k, prefix) {
				assert.True(t, BulkKeysUnder(prefix), "%q is under %q", k, prefix)
			}
		}
	}
}
