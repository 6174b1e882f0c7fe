package index

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

// indexFixture returns n index lines forming a chain, and their offsets.
func indexFixture(t *testing.T, n int) ([]byte, []int64, []eventline.Entry) {
	t.Helper()
	var (
		buf     []byte
		offsets []int64
		entries []eventline.Entry
		parent  uuid.UUID
		off     int64
	)
	for i := 0; i < n; i++ {
		e := eventline.Entry{Header: eventline.Header{ID: uuid.Must(uuid.NewV7()), ParentID: parent, Kind: 1, Role: eventline.RoleCode(1 + i%3), Time: time.Now().UnixNano()}, Size: int64(i), Loc: eventline.Location{Chunk: 0, Offset: off, Length: 100}}
		off += 100
		offsets = append(offsets, int64(len(buf)))
		buf = eventline.AppendIndex(buf, &e)
		entries = append(entries, e)
		parent = e.ID
	}
	return buf, offsets, entries
}

// withSmallBlocks makes readIndex use tiny blocks and split every block, so
// that block and half boundaries fall between and inside lines.
func withSmallBlocks(t *testing.T, block, parallel int) {
	t.Helper()
	oldBlock, oldParallel := readBlock, parallelMin
	readBlock, parallelMin = block, parallel
	t.Cleanup(func() { readBlock, parallelMin = oldBlock, oldParallel })
}

func readAllIndex(t *testing.T, content []byte) (Scan, []eventline.Entry, []int64) {
	t.Helper()
	m := vfs.NewMemFS()
	writeMemFile(t, m, "/index.jsonl", content)
	var got []eventline.Entry
	var offs []int64
	scan, err := Read(m, "/index.jsonl", func(e *eventline.Entry, off int64) error {
		got = append(got, *e)
		offs = append(offs, off)
		return nil
	})
	require.NoError(t, err)
	return scan, got, offs
}

func TestReadIndexBlocks(t *testing.T) {
	content, offsets, want := indexFixture(t, 300)
	for _, bs := range []struct{ block, parallel int }{{4 << 20, 64 << 10}, {4096, 512}, {1000, 1}, {300, 1}, {97, 1}} {
		t.Run(fmt.Sprintf("block=%d", bs.block), func(t *testing.T) {
			withSmallBlocks(t, bs.block, bs.parallel)
			scan, got, offs := readAllIndex(t, content)
			assert.Equal(t, want, got)
			assert.Equal(t, offsets, offs)
			assert.Equal(t, int64(-1), scan.Bad)
			assert.Equal(t, int64(len(content)), scan.End)

			// A bad line anywhere stops the scan exactly there, whichever
			// half or block it falls in.
			for _, k := range []int{0, 1, 57, 149, 150, 151, 299} {
				bad := bytes.Clone(content)
				bad[offsets[k]+10] ^= 0x20
				scan, got, _ := readAllIndex(t, bad)
				assert.Equal(t, offsets[k], scan.Bad, "line %d", k)
				assert.Equal(t, offsets[k], scan.End, "line %d", k)
				assert.Len(t, got, k)
				assert.Error(t, scan.BadErr)
			}

			// A torn last line is reported as the tail.
			torn := content[:len(content)-30]
			scan, got, _ = readAllIndex(t, torn)
			assert.Len(t, got, 299)
			assert.Equal(t, offsets[299], scan.Bad)
			assert.ErrorIs(t, scan.BadErr, io.ErrUnexpectedEOF)
		})
	}
}

// TestReadIndexAddError checks that an error from the callback stops the
// scan and is returned.
func TestReadIndexAddError(t *testing.T) {
	withSmallBlocks(t, 1000, 1)
	content, _, _ := indexFixture(t, 50)
	m := vfs.NewMemFS()
	writeMemFile(t, m, "/index.jsonl", content)
	calls := 0
	stop := fmt.Errorf("stop")
	_, err := Read(m, "/index.jsonl", func(*eventline.Entry, int64) error {
		calls++
		if calls == 20 {
			return stop
		}
		return nil
	})
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 20, calls)
}

// TestIndexFileStopsAfterFailedWrite: once a write of index.jsonl fails,
// nothing more is written to it, so that it keeps a valid prefix of its
// lines (which reconciliation completes from the chunks) instead of a gap
// (which it would take for corruption). The case that needs it: a rewrite
// after sealing fails, then an append already in flight publishes.
func TestIndexFileStopsAfterFailedWrite(t *testing.T) {
	for _, failing := range []string{"append", "reset"} {
		t.Run(failing, func(t *testing.T) {
			m := vfs.NewMemFS()
			require.NoError(t, m.MkdirAll("/s", 0o700))
			x, err := OpenFile(m, "/s/index.jsonl", 0, 0o600)
			require.NoError(t, err)
			defer x.Close()
			es := make([]eventline.Entry, 4)
			for i := range es {
				es[i] = eventline.Entry{Header: eventline.Header{ID: uuid.New(), Kind: 1}, Size: 2, Loc: eventline.Location{Chunk: 1, Offset: int64(i) * 100, Length: 100}}
			}
			require.NoError(t, x.Append(&es[0], &es[1]))

			injected := errors.New("injected")
			m.SetFault(func(op vfs.Op, path string) error {
				if op == vfs.OpWrite && strings.HasPrefix(path, "/s/index.jsonl") { // or the temporary file a rewrite replaces it through
					return injected
				}
				return nil
			})
			if failing == "append" {
				require.NoError(t, x.Append(&es[2]), "held, not written yet")
				require.ErrorIs(t, x.Flush(), injected)
			} else {
				require.ErrorIs(t, x.Reset(es[1:3]), injected)
			}
			m.SetFault(nil)
			before, err := vfs.ReadFile(m, "/s/index.jsonl")
			require.NoError(t, err)
			assert.ErrorIs(t, x.Append(&es[3]), injected, "later writes report the first failure")
			assert.ErrorIs(t, x.Reset(es), injected)
			after, err := vfs.ReadFile(m, "/s/index.jsonl")
			require.NoError(t, err)
			assert.Equal(t, string(before), string(after), "nothing written after the failure")
		})
	}
}

// TestIndexFileHoldsLines: Append holds the lines and writes them all
// with one write once they are HoldLines, or describe HoldBytes of
// records; Flush, Sync and Close write what it holds; Reset drops it, its
// lines being among those Reset writes. The file always holds a prefix of
// the lines appended, in order.
func TestIndexFileHoldsLines(t *testing.T) {
	entries := func(n int, length uint32) []eventline.Entry {
		es := make([]eventline.Entry, n)
		var parent uuid.UUID
		for i := range es {
			es[i] = eventline.Entry{Header: eventline.Header{ID: uuid.New(), ParentID: parent, Kind: 1}, Size: 2, Loc: eventline.Location{Offset: int64(i) * int64(length), Length: length}}
			parent = es[i].ID
		}
		return es
	}
	open := func(t *testing.T) (*vfs.MemFS, *File, *int) {
		m := vfs.NewMemFS()
		require.NoError(t, m.MkdirAll("/s", 0o700))
		writes := new(int)
		m.SetFault(func(op vfs.Op, path string) error {
			if op == vfs.OpWrite && path == "/s/index.jsonl" {
				*writes++
			}
			return nil
		})
		x, err := OpenFile(m, "/s/index.jsonl", 0, 0o600)
		require.NoError(t, err)
		return m, x, writes
	}
	content := func(t *testing.T, m *vfs.MemFS) []byte {
		b, err := vfs.ReadFile(m, "/s/index.jsonl")
		require.NoError(t, err)
		return b
	}

	t.Run("lines", func(t *testing.T) {
		m, x, writes := open(t)
		defer x.Close()
		es := entries(HoldLines+3, 100)
		for i := range HoldLines - 1 {
			require.NoError(t, x.Append(&es[i]))
		}
		assert.Equal(t, 0, *writes, "nothing written below HoldLines")
		assert.Equal(t, HoldLines-1, x.Held())
		assert.Empty(t, content(t, m))
		require.NoError(t, x.Append(&es[HoldLines-1]))
		assert.Equal(t, 1, *writes, "HoldLines lines in one write")
		assert.Equal(t, 0, x.Held())
		assert.Equal(t, string(AppendLines(nil, es[:HoldLines])), string(content(t, m)))
		require.NoError(t, x.Append(&es[HoldLines], &es[HoldLines+1]))
		require.NoError(t, x.Sync())
		assert.Equal(t, 2, *writes)
		assert.Equal(t, string(AppendLines(nil, es[:HoldLines+2])), string(content(t, m)), "Sync writes the held lines")
		require.NoError(t, x.Append(&es[HoldLines+2]))
		require.NoError(t, x.Close())
		assert.Equal(t, string(AppendLines(nil, es)), string(content(t, m)), "Close writes the held lines")
	})
	t.Run("bytes", func(t *testing.T) {
		m, x, writes := open(t)
		defer x.Close()
		es := entries(2, HoldBytes/2)
		require.NoError(t, x.Append(&es[0]))
		assert.Equal(t, 0, *writes)
		require.NoError(t, x.Append(&es[1]))
		assert.Equal(t, 1, *writes, "lines describing HoldBytes of records are written")
		assert.Equal(t, string(AppendLines(nil, es)), string(content(t, m)))
	})
	t.Run("reset", func(t *testing.T) {
		m, x, _ := open(t)
		defer x.Close()
		es := entries(4, 100)
		require.NoError(t, x.Append(&es[0], &es[1]))
		require.NoError(t, x.Reset(es[1:3]))
		require.NoError(t, x.Flush())
		assert.Equal(t, string(AppendLines(nil, es[1:3])), string(content(t, m)), "Reset's lines, the held ones not again")
		require.NoError(t, x.Append(&es[3]))
		require.NoError(t, x.Flush())
		assert.Equal(t, string(AppendLines(nil, es[1:])), string(content(t, m)))
	})
}

// writeMemFile writes b, synced, as the file at path.
func writeMemFile(t *testing.T, fsys vfs.FS, path string, b []byte) {
	t.Helper()
	f, err := fsys.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
}
