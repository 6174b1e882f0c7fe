package journal

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCheckRecord(t *testing.T) {
	tests := []struct {
		name string
		rec  Record
		ok   bool
	}{
		{"write", Record{Op: OpWrite, Path: "sessions/a/chunk-1.jsonl", Offset: 10, Data: []byte("x")}, true},
		{"write empty data", Record{Op: OpWrite, Path: "a"}, true},
		{"forget all", Record{Op: OpForget}, true},
		{"forget dir", Record{Op: OpForget, Path: "sessions/a/"}, true},
		{"write empty path", Record{Op: OpWrite}, false},
		{"write dir path", Record{Op: OpWrite, Path: "a/"}, false},
		{"absolute", Record{Op: OpWrite, Path: "/etc/passwd"}, false},
		{"dotdot", Record{Op: OpWrite, Path: "a/../../b"}, false},
		{"dot", Record{Op: OpWrite, Path: "./a"}, false},
		{"empty element", Record{Op: OpWrite, Path: "a//b"}, false},
		{"backslash", Record{Op: OpWrite, Path: `a\b`}, false},
		{"nul", Record{Op: OpWrite, Path: "a\x00b"}, false},
		{"long path", Record{Op: OpWrite, Path: strings.Repeat("a", MaxPath+1)}, false},
		{"max path", Record{Op: OpWrite, Path: strings.Repeat("a", MaxPath)}, true},
		{"negative offset", Record{Op: OpWrite, Path: "a", Offset: -1}, false},
		{"offset overflow", Record{Op: OpWrite, Path: "a", Offset: MaxOffset, Data: []byte("x")}, false},
		{"forget with data", Record{Op: OpForget, Path: "a", Data: []byte("x")}, false},
		{"forget dotdot", Record{Op: OpForget, Path: "../"}, false},
		{"unknown op", Record{Op: 7, Path: "a"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkRecord(&tt.rec)
			if tt.ok {
				assert.NoError(t, err)
			} else {
				assert.ErrorIs(t, err, ErrInvalidRecord)
			}
		})
	}
}

func TestFrameRoundTrip(t *testing.T) {
	tests := []Record{
		{Op: OpWrite, Path: "a", Offset: 0},
		{Op: OpWrite, Path: "sessions/x/chunk", Offset: 1 << 40, Data: []byte("hello")},
		{Op: OpWrite, Path: "p", Offset: 3, Data: []byte(strings.Repeat("z", 300))},
		{Op: OpForget, Path: ""},
		{Op: OpForget, Path: "sessions/x/"},
	}
	for _, r := range tests {
		t.Run(r.Op.String()+"/"+r.Path, func(t *testing.T) {
			const salt = 0xdeadbeef
			b := appendFrame(nil, salt, &r)
			require.Equal(t, frameSize(len(r.Path), len(r.Data)), int64(len(b)))
			require.Zero(t, len(b)%align)
			n := sealFrame(b, salt, 42, 41, 3)
			require.Equal(t, int64(len(b)), n)
			fr, err := decodeFrame(append(b, 1, 2, 3), salt)
			require.NoError(t, err)
			assert.Equal(t, uint64(42), fr.lsn)
			assert.Equal(t, uint64(41), fr.first)
			assert.Equal(t, uint32(3), fr.count)
			assert.Equal(t, int64(len(b)), fr.size)
			assert.Equal(t, r.Op, fr.rec.Op)
			assert.Equal(t, r.Path, fr.rec.Path)
			assert.Equal(t, r.Offset, fr.rec.Offset)
			assert.Equal(t, string(r.Data), string(fr.rec.Data))
			_, err = decodeFrame(b, salt+1)
			assert.ErrorIs(t, err, ErrBadRecord, "another file's salt")
		})
	}
}

func TestDecodeFrameRejects(t *testing.T) {
	const salt = 7
	good := func() []byte {
		r := Record{Op: OpWrite, Path: "ab", Offset: 5, Data: []byte("data!")}
		b := appendFrame(nil, salt, &r)
		sealFrame(b, salt, 10, 9, 2)
		return b
	}
	le := binary.LittleEndian
	reseal := func(b []byte) { le.PutUint32(b[0:], sum(salt, b[4:frameHeader])) }
	tests := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"zeros", func(b []byte) []byte { return make([]byte, len(b)) }},
		{"short", func(b []byte) []byte { return b[:len(b)-8] }},
		{"header short", func(b []byte) []byte { return b[:20] }},
		{"hcrc", func(b []byte) []byte { b[0] ^= 1; return b }},
		{"dcrc", func(b []byte) []byte { b[frameHeader+4] ^= 1; return b }},
		{"padding", func(b []byte) []byte { b[len(b)-1] = 1; return b }},
		{"count zero", func(b []byte) []byte { le.PutUint32(b[24:], 0); reseal(b); return b }},
		{"lsn before group", func(b []byte) []byte { le.PutUint64(b[16:], 11); reseal(b); return b }},
		{"lsn after group", func(b []byte) []byte { le.PutUint32(b[24:], 1); reseal(b); return b }},
		{"len past end", func(b []byte) []byte { le.PutUint32(b[28:], 1000); reseal(b); return b }},
		{"len below fixed body", func(b []byte) []byte { le.PutUint32(b[28:], 4); reseal(b); return b }},
		{"path past body", func(b []byte) []byte {
			le.PutUint16(b[frameHeader+1:], 200)
			le.PutUint32(b[4:], sum(salt, b[frameHeader:frameHeader+bodyFixed+2+5]))
			reseal(b)
			return b
		}},
		{"bad op", func(b []byte) []byte {
			b[frameHeader] = 9
			le.PutUint32(b[4:], sum(salt, b[frameHeader:frameHeader+bodyFixed+2+5]))
			reseal(b)
			return b
		}},
		{"bad path", func(b []byte) []byte {
			copy(b[frameHeader+3:], "..")
			le.PutUint32(b[4:], sum(salt, b[frameHeader:frameHeader+bodyFixed+2+5]))
			reseal(b)
			return b
		}},
	}
	_, err := decodeFrame(good(), salt)
	require.NoError(t, err)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeFrame(tt.damage(good()), salt)
			assert.ErrorIs(t, err, ErrBadRecord)
		})
	}
}

func TestHeaderRoundTrip(t *testing.T) {
	h := header{salt: 3, owner: [16]byte{1, 2, 3}, seq: 9, size: 1 << 20, startOff: recordsStart + 64, startLSN: 77}
	b := h.encode()
	got, err := decodeHeader(b)
	require.NoError(t, err)
	assert.Equal(t, h, got)

	le := binary.LittleEndian
	reseal := func(b []byte) []byte {
		le.PutUint32(b[slotSize-4:], crcOf(b[:slotSize-4]))
		return b
	}
	tests := []struct {
		name   string
		damage func(b []byte) []byte
		want   error
	}{
		{"crc", func(b []byte) []byte { b[100] = 1; return b }, ErrNoHeader},
		{"zeros", func(b []byte) []byte { return make([]byte, slotSize) }, ErrNoHeader},
		{"short", func(b []byte) []byte { return b[:100] }, ErrNoHeader},
		{"magic", func(b []byte) []byte { b[0] = 'x'; return reseal(b) }, ErrNoHeader},
		{"version", func(b []byte) []byte { le.PutUint32(b[8:], 2); return reseal(b) }, ErrUnsupportedVersion},
		{"size", func(b []byte) []byte { le.PutUint64(b[40:], MaxSize+8); return reseal(b) }, ErrNoHeader},
		{"start below records", func(b []byte) []byte { le.PutUint64(b[48:], 8); return reseal(b) }, ErrNoHeader},
		{"start past size", func(b []byte) []byte { le.PutUint64(b[48:], 1<<20); return reseal(b) }, ErrNoHeader},
		{"start unaligned", func(b []byte) []byte { le.PutUint64(b[48:], recordsStart+4); return reseal(b) }, ErrNoHeader},
		{"start lsn 0", func(b []byte) []byte { le.PutUint64(b[56:], 0); return reseal(b) }, ErrNoHeader},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeHeader(tt.damage(h.encode()))
			assert.ErrorIs(t, err, tt.want)
		})
	}
}

func crcOf(b []byte) uint32 { return crc32Checksum(b) }
