package chunk

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestHole: a line is a hole of an unsynced write only when it holds a run
// of zero bytes from its start or a sector boundary to a sector boundary.
// A sector that reached the disk holds only the write's bytes, which are
// never zero, so zeros that end inside a sector are damage, not a hole.
func TestHole(t *testing.T) {
	z := func(n int) []byte { return make([]byte, n) }
	cat := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	rec := []byte(`{"id":"x"}`)
	for _, tc := range []struct {
		name string
		line []byte
		off  int64
		want bool
	}{
		{"a record", rec, 0, false},
		{"zeros from the start to the boundary", cat(z(12), rec), 500, true},
		{"zeros from the start ending inside the next sector", cat(z(40), rec), 500, false},
		{"zeros from the start short of the boundary", cat(z(11), rec), 500, false},
		{"a whole sector of zeros at a boundary", cat(z(512), rec), 1024, true},
		{"zeros from a boundary short of the next", cat(z(511), rec), 1024, false},
		{"one zero byte just before a boundary", cat(z(1), rec), 511, true},
		{"one zero byte at a boundary", cat(z(1), rec), 512, false},
		{"a lost sector inside the line", cat(bytes.Repeat([]byte("a"), 512), z(512), rec), 0, true},
		{"two lost sectors inside the line", cat(bytes.Repeat([]byte("a"), 100), z(1024), rec), 412, true},
		{"zeros inside the line from a boundary, short of the next", cat(z(0), bytes.Repeat([]byte("a"), 502), z(100), rec), 0, false},
		{"zeros inside the line not starting at a boundary", cat(bytes.Repeat([]byte("a"), 500), z(12), rec), 1, false},
		{"zeros after data in the line's first sector", cat(rec, z(512-10)), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, hole(tc.line, tc.off))
		})
	}
}

// TestZeroTail counts the zero bytes ending a buffer.
func TestZeroTail(t *testing.T) {
	assert.Equal(t, 0, ZeroTail(nil))
	assert.Equal(t, 0, ZeroTail([]byte("ab\n")))
	assert.Equal(t, 3, ZeroTail([]byte("ab\n\x00\x00\x00")))
	assert.Equal(t, 4, ZeroTail(make([]byte, 4)))
	assert.Equal(t, 1, ZeroTail([]byte("a\x00b\x00")))
}
