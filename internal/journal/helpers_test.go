package journal

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/vfs"
)

const memRoot = "/root"

// newMem creates a writer of size bytes on a fresh MemFS.
func newMem(t testing.TB, size int64) (*vfs.MemFS, *Writer) {
	t.Helper()
	m := vfs.NewMemFS()
	require.NoError(t, m.MkdirAll(memRoot, 0o755))
	require.NoError(t, m.SyncDir("/"))
	w, err := Create(m, memRoot, &Options{Size: size, small: true})
	require.NoError(t, err)
	return m, w
}

// makeFile creates the empty file p (slash-separated, under root) and
// makes its entry durable.
func makeFile(t testing.TB, fsys vfs.FS, root, p string) {
	t.Helper()
	full := filepath.Join(root, filepath.FromSlash(p))
	require.NoError(t, fsys.MkdirAll(filepath.Dir(full), 0o755))
	f, err := fsys.OpenFile(full, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.NoError(t, fsys.SyncDir(filepath.Dir(full)))
	require.NoError(t, fsys.SyncDir(root))
}

// payload is the deterministic data of record i of writer g.
func payload(g, i, n int) []byte {
	b := make([]byte, n)
	s := fmt.Sprintf("g%d-r%d;", g, i)
	for j := range b {
		b[j] = s[j%len(s)]
	}
	return b
}

// history keeps what each lsn committed.
type history map[uint64]Record

func (h history) add(last uint64, recs []Record) {
	for j, r := range recs {
		r.Data = append([]byte(nil), r.Data...)
		h[last-uint64(len(recs)-1)+uint64(j)] = r
	}
}

func commitT(t testing.TB, w *Writer, h history, recs ...Record) uint64 {
	t.Helper()
	lsn, err := w.Commit(context.Background(), recs, nil)
	require.NoError(t, err)
	if h != nil {
		h.add(lsn, recs)
	}
	return lsn
}
