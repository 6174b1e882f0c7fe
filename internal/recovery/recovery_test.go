package recovery

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/internal/durable"
	"github.com/sessionstore/sessionstore/internal/eventline"
	"github.com/sessionstore/sessionstore/internal/headfile"
	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

const dir = "/s"

// session writes a session directory of n events in chunk 0, with their
// index lines and HEAD, all synced, and returns the chunk's bytes, the
// entries and the file system.
func session(t *testing.T, n int) (*vfs.MemFS, []byte, []eventline.Entry) {
	t.Helper()
	m := vfs.NewMemFS()
	require.NoError(t, durable.MkdirAll(m, filepath.Join(dir, layout.ChunksDir), 0o700))
	var b, ix []byte
	var es []eventline.Entry
	parent := uuid.Nil
	for i := range n {
		h := eventline.Header{ID: uuid.Must(uuid.NewV7()), ParentID: parent, Time: int64(i + 1), Kind: eventline.KindMessage, Role: eventline.RoleUser}
		p := eventline.Inline([]byte(fmt.Sprintf(`{"n":%d}`, i)))
		start := len(b)
		b = eventline.AppendEvent(b, &h, p)
		e := eventline.NewEntry(h, p, eventline.Location{Chunk: 0, Offset: int64(start), Length: uint32(len(b) - start)})
		ix = eventline.AppendIndex(ix, &e)
		es = append(es, e)
		parent = h.ID
	}
	write(t, m, chunkPath(0), b)
	write(t, m, filepath.Join(dir, layout.IndexFile), ix)
	if n > 0 {
		require.NoError(t, headfile.Write(m, dir, es[n-1].ID, 0o600))
	}
	return m, b, es
}

func chunkPath(n uint32) string { return filepath.Join(dir, layout.ChunksDir, layout.ChunkName(n)) }

func write(t *testing.T, m *vfs.MemFS, path string, b []byte) {
	t.Helper()
	f, err := m.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, m.SyncDir(filepath.Dir(path)))
}

func ids(es []eventline.Entry) []uuid.UUID {
	var out []uuid.UUID
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

// repaired reports whether p plans any repair.
func repaired(p *Plan) bool {
	return p.TornPath != "" || p.IndexBad >= 0 || p.IndexSize != p.IndexEnd || len(p.PlainEntries(p.Index.Entries[p.FirstNew:])) > 0 ||
		p.StaleLines > 0 || p.RewriteIndex || len(p.Unsealed) > 0 || len(p.SealTemps) > 0 || p.MetaTemp || p.HeadTemp ||
		p.HeadBad != nil || p.Head() != p.HeadOnDisk
}

// TestAnalyzeApply: each kind of file a crash or a disk can leave is
// planned for as the package comment says, Apply carries the plan out,
// and a second analysis then finds the same events and nothing to do.
func TestAnalyzeApply(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry)
		check func(t *testing.T, p *Plan, es []eventline.Entry)
		keep  int // events the log holds after the repairs
	}{
		{"whole", func(*testing.T, *vfs.MemFS, []byte, []eventline.Entry) {}, func(t *testing.T, p *Plan, es []eventline.Entry) {
			assert.False(t, repaired(p))
			assert.Equal(t, 4, p.Indexed)
		}, 4},
		{"a torn tail", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			write(t, m, chunkPath(0), append(bytes.Clone(b), `{"id":"torn`...))
		}, func(t *testing.T, p *Plan, es []eventline.Entry) {
			assert.Equal(t, chunkPath(0), p.TornPath)
			assert.Equal(t, es[3].Loc.End(), p.ActiveSize)
			assert.Equal(t, layout.BrokenTail(chunkPath(0), es[3].Loc.End()), p.TornKeep)
		}, 4},
		{"records the index lacks", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			var ix []byte
			ix = eventline.AppendIndex(ix, &es[0])
			write(t, m, filepath.Join(dir, layout.IndexFile), ix)
		}, func(t *testing.T, p *Plan, es []eventline.Entry) {
			assert.Equal(t, 1, p.FirstNew)
			assert.Equal(t, 1, p.Indexed)
		}, 4},
		{"a torn index line", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			ix, err := vfs.ReadFile(m, filepath.Join(dir, layout.IndexFile))
			require.NoError(t, err)
			write(t, m, filepath.Join(dir, layout.IndexFile), ix[:len(ix)-5])
		}, func(t *testing.T, p *Plan, es []eventline.Entry) {
			assert.GreaterOrEqual(t, p.IndexBad, int64(0))
			assert.Equal(t, 3, p.Indexed)
		}, 4},
		{"HEAD behind", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			require.NoError(t, headfile.Write(m, dir, es[1].ID, 0o600))
		}, func(t *testing.T, p *Plan, es []eventline.Entry) {
			assert.Equal(t, es[1].ID, p.HeadOnDisk)
			assert.Nil(t, p.HeadBad)
		}, 4},
		{"HEAD not an id", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			write(t, m, filepath.Join(dir, headfile.Name), []byte("nonsense"))
		}, func(t *testing.T, p *Plan, es []eventline.Entry) {
			var ce *corrupt.Error
			assert.ErrorAs(t, p.HeadBad, &ce)
			assert.Equal(t, filepath.Join(dir, headfile.Broken), p.HeadKeep)
		}, 4},
		{"an interrupted HEAD replace", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			require.NoError(t, headfile.Write(m, dir, es[2].ID, 0o600))
			write(t, m, filepath.Join(dir, headfile.Temp), headfile.Encode(es[3].ID))
		}, func(t *testing.T, p *Plan, es []eventline.Entry) {
			assert.True(t, p.HeadFinish)
		}, 4},
		{"lost acknowledged events", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			bad := bytes.Clone(b)
			bad[es[3].Loc.Offset+3] ^= 1
			write(t, m, chunkPath(0), bad)
		}, func(t *testing.T, p *Plan, es []eventline.Entry) {
			assert.Equal(t, []uuid.UUID{es[3].ID}, p.Lost)
			require.NotNil(t, p.LostErr)
			assert.Equal(t, chunkPath(0), p.LostErr.Path)
			assert.Equal(t, es[3].Loc.Offset, p.LostErr.Offset)
			assert.Equal(t, p.LostErr, p.Damage())
			assert.True(t, p.RewriteIndex)
		}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, b, es := session(t, 4)
			tt.edit(t, m, b, es)
			p, err := Analyze(m, dir, false, nil)
			require.NoError(t, err)
			require.NoError(t, p.Corrupt)
			tt.check(t, p, es)
			_, err = Apply(m, dir, p, 0o600)
			require.NoError(t, err)

			again, err := Analyze(m.CrashClone(vfs.KeepSynced, 0), dir, false, nil)
			require.NoError(t, err)
			assert.NoError(t, again.Damage())
			assert.False(t, repaired(again), "the repairs are durable and leave nothing to do")
			assert.Equal(t, ids(es[:tt.keep]), ids(again.Index.Entries))
			assert.Equal(t, es[tt.keep-1].ID, again.HeadOnDisk)
		})
	}
}

// TestAnalyzeCorrupt: damage that is not a torn tail is reported, never
// repaired, with the valid prefix, as the damage the layer below found.
func TestAnalyzeCorrupt(t *testing.T) {
	tests := []struct {
		name   string
		edit   func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry)
		path   string
		prefix int
	}{
		{"a bad record before good ones", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			require.NoError(t, m.Remove(filepath.Join(dir, layout.IndexFile)))
			bad := bytes.Clone(b)
			bad[es[1].Loc.Offset+3] ^= 1
			write(t, m, chunkPath(0), bad)
		}, chunkPath(0), 1},
		{"a missing chunk", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			write(t, m, chunkPath(2), b)
		}, chunkPath(1), 4},
		{"the last index entry disagreeing with its whole record", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			var ix []byte
			for i := range es {
				e := es[i]
				if i == 3 {
					e.Time++ // a whole line with a valid checksum, not the one the entry describes
				}
				ix = eventline.AppendIndex(ix, &e)
			}
			write(t, m, filepath.Join(dir, layout.IndexFile), ix)
		}, chunkPath(0), 3},
		{"an index entry out of place", func(t *testing.T, m *vfs.MemFS, b []byte, es []eventline.Entry) {
			var ix []byte
			ix = eventline.AppendIndex(ix, &es[0])
			ix = eventline.AppendIndex(ix, &es[2])
			write(t, m, filepath.Join(dir, layout.IndexFile), ix)
		}, filepath.Join(dir, layout.IndexFile), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, b, es := session(t, 4)
			tt.edit(t, m, b, es)
			p, err := Analyze(m, dir, false, nil)
			require.NoError(t, err)
			var ce *corrupt.Error
			require.ErrorAs(t, p.Corrupt, &ce)
			assert.Equal(t, tt.path, ce.Path)
			assert.Equal(t, p.Corrupt, p.Damage())
			assert.Equal(t, ids(es[:tt.prefix]), ids(p.Index.Entries))
		})
	}
}

// TestAnalyzeRefusal: a HEAD that is not a regular file is damage the
// file system reported (a refusal), in the plan, not an I/O error.
func TestAnalyzeRefusal(t *testing.T) {
	m, _, _ := session(t, 2)
	require.NoError(t, m.Remove(filepath.Join(dir, headfile.Name)))
	require.NoError(t, m.MkdirAll(filepath.Join(dir, headfile.Name), 0o700))
	p, err := Analyze(m, dir, false, nil)
	require.NoError(t, err)
	assert.ErrorIs(t, p.Corrupt, vfs.ErrFileType)
	assert.True(t, IsDamage(p.Corrupt))
}
