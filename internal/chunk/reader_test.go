package chunk

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
	"github.com/sessionstore/sessionstore/internal/zchunk"
)

// lines returns n chunk lines of a chain of events and their locations in
// chunk c.
func lines(t *testing.T, c uint32, n int) ([]byte, []eventline.Header, []eventline.Location) {
	t.Helper()
	var b []byte
	var hs []eventline.Header
	var locs []eventline.Location
	parent := uuid.Nil
	for i := range n {
		h := eventline.Header{ID: uuid.Must(uuid.NewV7()), ParentID: parent, Time: int64(i + 1), Kind: eventline.KindMessage, Role: eventline.RoleUser}
		start := len(b)
		b = eventline.AppendEvent(b, &h, eventline.Inline([]byte(fmt.Sprintf(`{"n":%d}`, i))))
		hs = append(hs, h)
		locs = append(locs, eventline.Location{Chunk: c, Offset: int64(start), Length: uint32(len(b) - start)})
		parent = h.ID
	}
	return b, hs, locs
}

func write(t *testing.T, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	require.NoError(t, fsys.MkdirAll(filepath.Dir(path), 0o700))
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// corruptAt checks that err is a *corrupt.Error at path and offset.
func corruptAt(t *testing.T, err error, path string, off int64) {
	t.Helper()
	var ce *corrupt.Error
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, path, ce.Path)
	assert.Equal(t, off, ce.Offset)
}

func TestFormsAndList(t *testing.T) {
	m := vfs.NewMemFS()
	dir := "/s/chunks"
	for _, name := range []string{"000000.jsonl.zst", "000001.jsonl", "000001.jsonl.zst", "000002.jsonl", "000002.jsonl.zst.tmp", "000002.jsonl.broken-10", "000003.jsonl.rewrite.tmp", "x"} {
		write(t, m, filepath.Join(dir, name), []byte("{}\n"))
	}
	forms, temps, err := Forms(m, dir)
	require.NoError(t, err)
	assert.Equal(t, map[uint32]Form{0: {Sealed: true}, 1: {Plain: true, Sealed: true}, 2: {Plain: true}}, forms)
	assert.Equal(t, []string{"000002.jsonl.zst.tmp"}, temps)
	ns, err := List(m, dir)
	require.NoError(t, err)
	assert.Equal(t, []uint32{0, 1, 2}, ns)

	forms, temps, err = Forms(m, "/none")
	assert.NoError(t, err, "no directory holds no chunks")
	assert.Empty(t, forms)
	assert.Empty(t, temps)
}

// TestOpen: a plain file is read when there is one, else the sealed one;
// the sealed file's damage is its format's error.
func TestOpen(t *testing.T) {
	m := vfs.NewMemFS()
	dir := "/s/chunks"
	b, _, _ := lines(t, 0, 3)
	require.NoError(t, m.MkdirAll(dir, 0o700))
	require.NoError(t, zchunk.Write(m, filepath.Join(dir, layout.SealedName(0)), b, nil, 0o600))
	write(t, m, filepath.Join(dir, layout.ChunkName(1)), b[:10])
	write(t, m, filepath.Join(dir, layout.SealedName(2)), []byte("not zstd"))

	tests := []struct {
		n    uint32
		size int64
		path string
	}{
		{0, int64(len(b)), filepath.Join(dir, "000000.jsonl.zst")},
		{1, 10, filepath.Join(dir, "000001.jsonl")},
	}
	for _, tt := range tests {
		f, size, path, err := Open(m, dir, tt.n)
		require.NoError(t, err)
		assert.Equal(t, tt.size, size)
		assert.Equal(t, tt.path, path)
		got := make([]byte, size)
		_, err = f.ReadAt(got, 0)
		require.NoError(t, err)
		assert.Equal(t, b[:size], got)
		require.NoError(t, f.Close())
	}
	_, _, path, err := Open(m, dir, 2)
	var fe *zchunk.FormatError
	assert.ErrorAs(t, err, &fe)
	assert.Equal(t, filepath.Join(dir, "000002.jsonl.zst"), path)
	_, _, _, err = Open(m, dir, 3)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

// TestReaderRead: records are read by location, plain or sealed; a
// location that does not match the chunk is damage at that location.
func TestReaderRead(t *testing.T) {
	m := vfs.NewMemFS()
	dir := "/s/chunks"
	b0, hs0, locs0 := lines(t, 0, 4)
	b1, hs1, locs1 := lines(t, 1, 4)
	require.NoError(t, m.MkdirAll(dir, 0o700))
	require.NoError(t, zchunk.Write(m, filepath.Join(dir, layout.SealedName(0)), b0, nil, 0o600))
	write(t, m, filepath.Join(dir, layout.ChunkName(1)), b1)
	r := NewReader(m, dir)
	defer r.Close()
	for i, loc := range append(locs0, locs1...) {
		want := append(hs0, hs1...)[i]
		h, p, err := r.Read(loc)
		require.NoError(t, err, loc)
		assert.Equal(t, want, h)
		assert.Equal(t, fmt.Sprintf(`{"n":%d}`, i%4), string(p.Record))
	}

	plain := filepath.Join(dir, layout.ChunkName(1))
	last := locs1[3]
	bad := []struct {
		name string
		loc  eventline.Location
		path string
	}{
		{"past the end", eventline.Location{Chunk: 1, Offset: last.Offset, Length: last.Length + 1}, plain},
		{"not ending at a newline", eventline.Location{Chunk: 1, Offset: 0, Length: locs1[0].Length - 1}, plain},
		{"two records", eventline.Location{Chunk: 1, Offset: 0, Length: locs1[0].Length + locs1[1].Length}, plain},
		{"longer than a line can be", eventline.Location{Chunk: 1, Offset: 0, Length: eventline.MaxChunkLine + 2}, plain},
		{"a missing chunk", eventline.Location{Chunk: 2, Offset: 0, Length: 10}, filepath.Join(dir, layout.SealedName(2))},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := r.Read(tt.loc)
			corruptAt(t, err, tt.path, tt.loc.Offset)
		})
	}
}

// TestDamagedAt: damaged bytes (cut short, a bad checksum, zeros) are
// told apart from a whole line with a valid checksum.
func TestDamagedAt(t *testing.T) {
	b, _, locs := lines(t, 0, 3)
	flip := bytes.Clone(b)
	flip[locs[2].Offset+5] ^= 1
	zeros := bytes.Clone(b)
	copy(zeros[locs[2].Offset+3:], make([]byte, 8))
	tests := []struct {
		name string
		data []byte
		loc  eventline.Location
		want bool
	}{
		{"a whole line", b, locs[2], false},
		{"a whole line, another length", b, eventline.Location{Chunk: 0, Offset: locs[2].Offset, Length: 5}, false},
		{"cut short", b[:len(b)-3], locs[2], true},
		{"a flipped byte", flip, locs[2], true},
		{"zeros", zeros, locs[2], true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := vfs.NewMemFS()
			write(t, m, "/c/"+layout.ChunkName(0), tt.data)
			r := NewReader(m, "/c")
			defer r.Close()
			assert.Equal(t, tt.want, r.DamagedAt(tt.loc))
		})
	}
	r := NewReader(vfs.NewMemFS(), "/none")
	assert.False(t, r.DamagedAt(locs[0]), "a chunk that cannot be read is not known to be damaged")
}

// TestWalk: the records, a torn tail, free space, and an invalid
// stretch followed by a valid record.
func TestWalk(t *testing.T) {
	b, hs, locs := lines(t, 3, 3)
	errGap := errors.New("gap")
	mid := bytes.Clone(b)
	mid[locs[1].Offset+4] ^= 1
	tests := []struct {
		name    string
		data    []byte
		newest  bool
		ids     int   // records rec saw
		end     int64 // Walked.End
		bad     int64
		wantErr error
	}{
		{"whole", b, false, 3, locs[2].End(), -1, nil},
		{"free space", append(bytes.Clone(b), make([]byte, 4096)...), true, 3, locs[2].End(), -1, nil},
		{"torn tail", b[:len(b)-4], true, 2, locs[1].End(), locs[2].Offset, nil},
		{"a bad record before a good one", mid, false, 1, locs[0].End(), locs[1].Offset, errGap},
		{"a hole before a good record in the newest", append(append(bytes.Clone(b[:locs[1].End()]), make([]byte, 512*2-int(locs[1].End())%512)...), b[locs[2].Offset:]...), true, 2, locs[1].End(), locs[1].End(), nil},
	}
	// The newest chunk as a crash can leave it: a garbled write (its
	// sectors reached the disk with other bytes), whose lines are bad, one
	// of them with a hole (a zero byte from its start to a sector
	// boundary): the invalid tail starts at the first bad line, not at the
	// hole.
	garbled := append(bytes.Clone(b[:locs[1].End()]), "{garbage"...)
	for len(garbled)%512 != 512-2 {
		garbled = append(garbled, 'x')
	}
	garbled = append(garbled, "\n\x00yyyy\n"...)
	garbled = append(garbled, make([]byte, 4096-len(garbled))...)
	tests = append(tests, struct {
		name    string
		data    []byte
		newest  bool
		ids     int
		end     int64
		bad     int64
		wantErr error
	}{"bad lines, then a hole, in the newest", garbled, true, 2, locs[1].End(), locs[1].End(), nil})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen int
			w, err := Walk(bytes.NewReader(tt.data), 3, 0, int64(len(tt.data)), tt.newest, func(h eventline.Header, _ eventline.Payload, loc eventline.Location) error {
				assert.Equal(t, hs[seen], h)
				assert.Equal(t, locs[seen], loc)
				seen++
				return nil
			}, func(bad, next int64, err error) error { return errGap })
			assert.ErrorIs(t, err, tt.wantErr)
			assert.Equal(t, tt.ids, seen)
			assert.Equal(t, tt.end, w.End)
			assert.Equal(t, tt.bad, w.Bad)
		})
	}
}
