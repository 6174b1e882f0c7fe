package journal

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestOverlay: a reader sees, through the overlay of a session whose
// marker names a dead owner's journal of another boot, the session's
// files as the journal's records make them; other sessions' files and
// files opened for writing are the file system's.
func TestOverlay(t *testing.T) {
	c, _, want := deadStore(t, "s1", "s2")
	ov := Overlay(c, memRoot, sessionDir("s1"))
	require.NotNil(t, ov)
	path := filepath.Join(memRoot, filepath.FromSlash(chunkOf("s1")))

	info, err := ov.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, int64(len(want["s1"])), info.Size(), "Stat reaches the records' end")
	f, err := ov.OpenFile(path, os.O_RDONLY, 0)
	require.NoError(t, err)
	info, err = f.Stat()
	require.NoError(t, err)
	assert.Equal(t, int64(len(want["s1"])), info.Size(), "so does the opened file's")
	b := make([]byte, len(want["s1"]))
	n, err := f.ReadAt(b, 0)
	require.NoError(t, err)
	assert.Equal(t, len(b), n)
	assert.Equal(t, want["s1"], string(b))
	require.NoError(t, f.Close())

	got, err := vfs.ReadFile(ov, filepath.Join(memRoot, filepath.FromSlash(chunkOf("s2"))))
	require.NoError(t, err)
	assert.Empty(t, got, "another session's file is laid nothing over")
	w, err := ov.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	defer w.Close()
	n, _ = w.ReadAt(b, 0)
	assert.Zero(t, n, "a file opened for writing is the file system's")
	assert.Empty(t, fileOf(t, c, "s1"), "the overlay writes nothing")
}

// TestOverlayNone: no overlay when the marker names none or cannot be
// read, the journal is gone or cannot be read, was written in this boot,
// or holds no record for the session.
func TestOverlayNone(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep func(t *testing.T, m *vfs.MemFS, owner string) vfs.FS
	}{
		{"names none", func(t *testing.T, m *vfs.MemFS, owner string) vfs.FS {
			c := m.CrashClone(vfs.KeepSynced, 1)
			require.NoError(t, WriteMarker(c, sessionDir("s1"), "", 0o644))
			return c
		}},
		{"marker damaged", func(t *testing.T, m *vfs.MemFS, owner string) vfs.FS {
			c := m.CrashClone(vfs.KeepSynced, 1)
			writeRaw(t, c, sessionDir("s1"), "JOURNAL", []byte(strings.Repeat("?", MarkerSize)))
			return c
		}},
		{"journal gone", func(t *testing.T, m *vfs.MemFS, owner string) vfs.FS {
			c := m.CrashClone(vfs.KeepSynced, 1)
			require.NoError(t, c.Remove(WALPath(memRoot, owner)))
			return c
		}},
		{"journal damaged", func(t *testing.T, m *vfs.MemFS, owner string) vfs.FS {
			c := m.CrashClone(vfs.KeepSynced, 1)
			f, err := c.OpenFile(WALPath(memRoot, owner), os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(make([]byte, recordsStart), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			return c
		}},
		{"this boot", func(t *testing.T, m *vfs.MemFS, owner string) vfs.FS { return m }},
		{"no record of the session", func(t *testing.T, m *vfs.MemFS, owner string) vfs.FS {
			c := m.CrashClone(vfs.KeepSynced, 1)
			require.NoError(t, c.MkdirAll(sessionDir("s9"), 0o755))
			require.NoError(t, WriteMarker(c, sessionDir("s9"), owner, 0o644))
			return c
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, w, _ := liveStore(t, "s1")
			defer w.Close()
			fsys := tc.prep(t, m, w.Owner())
			dir := sessionDir("s1")
			if tc.name == "no record of the session" {
				dir = sessionDir("s9")
			}
			assert.Nil(t, Overlay(fsys, memRoot, dir))
		})
	}
}

// TestOverlayReadAt: a read through the overlay holds the file's bytes,
// with each record's bytes where the file has none (past its end, or
// zeros); a byte the file holds that is not zero is the file's.
func TestOverlayReadAt(t *testing.T) {
	type rec struct {
		off  int64
		data string
	}
	for _, tc := range []struct {
		name    string
		file    string
		recs    []rec
		off     int64
		n       int
		want    string
		wantEOF bool
	}{
		{name: "past the end", recs: []rec{{0, "abcdef"}}, n: 6, want: "abcdef"},
		{name: "zeros", file: "ab\x00\x00\x00\x00", recs: []rec{{0, "abcdef"}}, n: 6, want: "abcdef"},
		{name: "the file's newer bytes", file: "abXY", recs: []rec{{0, "abcdef"}}, n: 6, want: "abXYef"},
		{name: "two records", recs: []rec{{0, "abc"}, {3, "def"}}, n: 6, want: "abcdef"},
		{name: "inside a record", recs: []rec{{0, "abcdef"}}, off: 2, n: 2, want: "cd"},
		{name: "beyond the records", recs: []rec{{0, "abc"}}, n: 6, want: "abc", wantEOF: true},
		{name: "a gap past the end", file: "ab", recs: []rec{{4, "cd"}}, n: 6, want: "ab", wantEOF: true},
		{name: "before a record", file: "abcdef", recs: []rec{{6, "gh"}}, off: 1, n: 3, want: "bcd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMemFS()
			writeRaw(t, m, "/d", "f", []byte(tc.file))
			f, err := m.OpenFile("/d/f", os.O_RDONLY, 0)
			require.NoError(t, err)
			defer f.Close()
			var es []Entry
			for _, r := range tc.recs {
				es = append(es, Entry{Record: Record{Op: OpWrite, Path: "d/f", Offset: r.off, Data: []byte(r.data)}})
			}
			b := make([]byte, tc.n)
			n, err := (&overlayFile{File: f, es: es}).ReadAt(b, tc.off)
			assert.Equal(t, tc.want, string(b[:n]))
			if tc.wantEOF {
				assert.ErrorIs(t, err, io.EOF)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}
