package recovery

import (
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// TestTip: the last index line's entry is the tip only when the log
// needs no repair; with follow, valid records after it are the tip.
func TestTip(t *testing.T) {
	indexPath := filepath.Join(dir, layout.IndexFile)
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry)
		follow bool
		tip    int // the index of the tip's event; -1 for none
	}{
		{name: "clean", tip: 4},
		{name: "free space after the record", change: func(t *testing.T, m *vfs.MemFS, b []byte, _ []eventline.Entry) {
			write(t, m, chunkPath(0), append(b, make([]byte, 4096)...))
		}, tip: 4},
		{name: "free space beyond FreeSpace", change: func(t *testing.T, m *vfs.MemFS, b []byte, _ []eventline.Entry) {
			write(t, m, chunkPath(0), append(b, make([]byte, FreeSpace+64<<10+1)...))
		}, tip: -1},
		{name: "a record after the last index line", change: func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			write(t, m, indexPath, indexLines(es[:3]))
		}, tip: -1},
		{name: "a record after the last index line, followed", change: func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			write(t, m, indexPath, indexLines(es[:3]))
		}, follow: true, tip: 4},
		{name: "a torn write after the last record, followed", change: func(t *testing.T, m *vfs.MemFS, b []byte, _ []eventline.Entry) {
			write(t, m, chunkPath(0), append(b, `{"id":"01a0`...))
		}, follow: true, tip: 4},
		{name: "an invalid record before a valid one, followed", change: func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			write(t, m, indexPath, indexLines(es[:2]))
			bad := append([]byte(nil), b...)
			bad[es[2].Loc.Offset+5] ^= 1
			write(t, m, chunkPath(0), bad)
		}, follow: true, tip: -1},
		{name: "index line names another record", change: func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			e := es[4]
			e.ID = uuid.Must(uuid.NewV7())
			write(t, m, indexPath, indexLines(append(es[:4:4], e)))
		}, tip: -1},
		{name: "index without a newline at its end", change: func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			ix := indexLines(es)
			write(t, m, indexPath, ix[:len(ix)-1])
		}, tip: -1},
		{name: "no index", change: func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			require.NoError(t, m.Remove(indexPath))
		}, tip: -1},
		{name: "a sealing's temporary file", change: func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			write(t, m, chunkPath(0)+layout.SealedExt+".tmp", nil)
		}, tip: -1},
		{name: "a chunk missing", change: func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			write(t, m, chunkPath(2), nil)
		}, tip: -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, b, es := session(t, 5)
			if tc.change != nil {
				tc.change(t, m, b, es)
			}
			got, ok := Tip(m, dir, tc.follow)
			if tc.tip < 0 {
				assert.False(t, ok)
				return
			}
			require.True(t, ok)
			assert.Equal(t, es[tc.tip], got)
		})
	}
}

func indexLines(es []eventline.Entry) []byte {
	var b []byte
	for i := range es {
		b = eventline.AppendIndex(b, &es[i])
	}
	return b
}
