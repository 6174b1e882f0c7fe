package journal

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sessionstore/sessionstore/internal/layout"
	"github.com/sessionstore/sessionstore/internal/vfs"
)

const testOwner = "0123456789abcdef0123456789abcdef"

// writeRaw creates dir/name holding b, durably.
func writeRaw(t testing.TB, m *vfs.MemFS, dir, name string, b []byte) {
	t.Helper()
	require.NoError(t, m.MkdirAll(dir, 0o755))
	f, err := m.OpenFile(filepath.Join(dir, name), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.Write(b)
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	require.NoError(t, m.SyncDir(dir))
}

func TestReadMarker(t *testing.T) {
	const dir = "/root/sessions/s"
	path := filepath.Join(dir, layout.JournalMarker)
	for _, tc := range []struct {
		name    string
		content *string // nil: no file
		dirAt   bool    // a directory in the marker's place
		want    string
		corrupt string // the damage's description, "" for none
		offset  int64  // the damage's offset
	}{
		{name: "missing", want: ""},
		{name: "none", content: new(strings.Repeat("-", 32) + "\n"), want: ""},
		{name: "owner", content: new(testOwner + "\n"), want: testOwner},
		{name: "empty: made when the power went", content: new(""), want: ""},
		{name: "short: written in part", content: new(testOwner[:10]), want: ""},
		{name: "no newline", content: new(testOwner + "x"), corrupt: "journal marker of 33 bytes, want an owner id and a newline"},
		{name: "upper case", content: new(strings.ToUpper(testOwner) + "\n"), corrupt: "is not an owner id"},
		{name: "dashes and digits", content: new(strings.Repeat("-", 31) + "0\n"), corrupt: "is not an owner id"},
		{name: "too long", content: new(testOwner + "\n\n"), corrupt: "larger than its format allows", offset: MarkerSize},
		{name: "a directory", dirAt: true, corrupt: "a directory where a file belongs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMemFS()
			require.NoError(t, m.MkdirAll(dir, 0o755))
			if tc.content != nil {
				writeRaw(t, m, dir, layout.JournalMarker, []byte(*tc.content))
			}
			if tc.dirAt {
				require.NoError(t, m.MkdirAll(path, 0o755))
			}
			got, err := ReadMarker(m, dir)
			if tc.corrupt == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, ErrCorrupt)
			assert.Equal(t, path, ce.Path)
			assert.Equal(t, tc.offset, ce.Offset)
			assert.Contains(t, ce.Err.Error(), tc.corrupt)
			assert.Empty(t, got)
		})
	}
}

// TestWriteMarkerDurable: when WriteMarker returns, a power loss keeps
// the marker it wrote, whether it created the file (its name is durable:
// the directory is synced) or rewrote it in place (its content is
// synced).
func TestWriteMarkerDurable(t *testing.T) {
	const dir = "/root/sessions/s"
	other := strings.Repeat("f", 32)
	for _, tc := range []struct {
		name   string
		before string // "-": no marker yet
		owner  string
	}{
		{name: "create naming an owner", before: "-", owner: testOwner},
		{name: "name another owner", before: other, owner: testOwner},
		{name: "name none", before: testOwner, owner: ""},
		{name: "name an owner again", before: "", owner: testOwner},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := vfs.NewMemFS()
			require.NoError(t, m.MkdirAll(dir, 0o755))
			for _, d := range []string{"/", "/root", "/root/sessions"} {
				require.NoError(t, m.SyncDir(d))
			}
			require.NoError(t, m.SyncDir(dir))
			if tc.before != "-" {
				require.NoError(t, WriteMarker(m, dir, tc.before, 0o644))
				got, err := ReadMarker(m.CrashClone(vfs.KeepSynced, 1), dir)
				require.NoError(t, err)
				require.Equal(t, tc.before, got, "precondition: the marker before")
			}
			require.NoError(t, WriteMarker(m, dir, tc.owner, 0o644))
			for _, mode := range []vfs.CrashMode{vfs.KeepSynced, vfs.KeepRandom, vfs.KeepAll} {
				c := m.CrashClone(mode, 3)
				got, err := ReadMarker(c, dir)
				require.NoError(t, err)
				assert.Equal(t, tc.owner, got, "after a power loss (mode %v)", mode)
				info, err := c.Stat(filepath.Join(dir, layout.JournalMarker))
				require.NoError(t, err)
				assert.Equal(t, int64(MarkerSize), info.Size())
			}
		})
	}
}

// TestWriteMarkerFails: a failed write or sync is an error naming the
// marker, wrapping the cause.
func TestWriteMarkerFails(t *testing.T) {
	const dir = "/root/sessions/s"
	injected := errors.New("injected")
	for _, op := range []vfs.Op{vfs.OpCreate, vfs.OpWrite, vfs.OpTruncate, vfs.OpSync, vfs.OpSyncDir} {
		t.Run(string(op), func(t *testing.T) {
			m := vfs.NewMemFS()
			require.NoError(t, m.MkdirAll(dir, 0o755))
			m.SetFault(func(o vfs.Op, path string) error {
				if o == op {
					return injected
				}
				return nil
			})
			err := WriteMarker(m, dir, testOwner, 0o644)
			require.ErrorIs(t, err, injected)
			assert.Contains(t, err.Error(), filepath.Join(dir, layout.JournalMarker))
		})
	}
}

// FuzzReadMarker: whatever a JOURNAL file holds, ReadMarker returns no
// owner and no error, an owner id that WriteMarker writes back as the
// same bytes, or a *CorruptionError naming the file.
func FuzzReadMarker(f *testing.F) {
	f.Add([]byte(testOwner + "\n"))
	f.Add([]byte(strings.Repeat("-", 32) + "\n"))
	f.Add([]byte(""))
	f.Add([]byte(testOwner + "\n\n"))
	f.Add([]byte(strings.ToUpper(testOwner) + "\n"))
	const dir = "/root/s"
	f.Fuzz(func(t *testing.T, b []byte) {
		m := vfs.NewMemFS()
		writeRaw(t, m, dir, layout.JournalMarker, b)
		got, err := ReadMarker(m, dir)
		if err != nil {
			var ce *CorruptionError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, filepath.Join(dir, layout.JournalMarker), ce.Path)
			assert.Empty(t, got)
			return
		}
		if got == "" {
			assert.True(t, len(b) < MarkerSize || string(b) == strings.Repeat("-", 32)+"\n", "%q read as none", b)
			return
		}
		assert.Equal(t, got+"\n", string(b))
		require.NoError(t, WriteMarker(m, dir, got, 0o644))
		again, err := vfs.ReadFile(m, filepath.Join(dir, layout.JournalMarker))
		require.NoError(t, err)
		assert.Equal(t, b, again)
	})
}
