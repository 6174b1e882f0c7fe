//go:build unix

package vfs

import (
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noHang runs f and fails the test if it has not returned after a
// generous while: a detector of calls that block for good (on a FIFO),
// not a timing check.
func noHang(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return: it blocks", what)
	}
}

// outsideFile makes a file outside the tree under test, holding content,
// and returns its path and a check that it still holds exactly that.
func outsideFile(t *testing.T, content string) (string, func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "outside")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path, func() {
		t.Helper()
		b, err := os.ReadFile(path)
		require.NoError(t, err, "the file outside is still there")
		assert.Equal(t, content, string(b), "the file outside is unchanged")
	}
}

// TestOSRefusesLastElementLink: a symbolic link as a path's last element
// is refused by every call that opens a file, whatever the flags (a
// truncating open too), and its target is neither read nor written.
func TestOSRefusesLastElementLink(t *testing.T) {
	for _, fsys := range []struct {
		name string
		fs   func(root string) FS
	}{{"default", func(string) FS { return Default }}, {"confined", func(root string) FS { return Confine(Default, root) }}} {
		t.Run(fsys.name, func(t *testing.T) {
			dir := t.TempDir()
			f := fsys.fs(dir)
			target, unchanged := outsideFile(t, "precious")
			link := filepath.Join(dir, "000000.jsonl")
			require.NoError(t, os.Symlink(target, link))
			for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC, os.O_RDWR | os.O_CREATE, os.O_WRONLY | os.O_CREATE | os.O_TRUNC, os.O_RDWR | os.O_APPEND} {
				_, err := f.OpenFile(link, flag, 0o600)
				assert.ErrorIs(t, err, ErrFileType, "flag %#x", flag)
				var pe *fs.PathError
				if assert.ErrorAs(t, err, &pe) {
					assert.Equal(t, link, pe.Path)
					assert.Contains(t, pe.Error(), "symbolic link")
				}
			}
			_, err := ReadFile(f, link)
			assert.ErrorIs(t, err, ErrFileType)
			_, err = f.Lock(link, 0o600)
			assert.ErrorIs(t, err, ErrFileType)
			unchanged()

			// A dangling link is refused too, and creates nothing.
			gone := filepath.Join(t.TempDir(), "gone")
			dangling := filepath.Join(dir, "HEAD.tmp")
			require.NoError(t, os.Symlink(gone, dangling))
			_, err = f.OpenFile(dangling, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			assert.ErrorIs(t, err, ErrFileType)
			_, err = os.Lstat(gone)
			assert.ErrorIs(t, err, fs.ErrNotExist, "nothing made at the link's target")

			// Remove takes the link itself away.
			require.NoError(t, f.Remove(link))
			unchanged()
		})
	}
}

// TestOSRefusesFIFO: a FIFO where a file or a directory belongs is
// refused at once by every call, read-only ones included, without
// waiting for a writer or a reader.
func TestOSRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "index.jsonl")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	for _, f := range []FS{Default, Confine(Default, dir)} {
		noHang(t, "opening a FIFO", func() {
			for _, flag := range []int{os.O_RDONLY, os.O_RDWR, os.O_WRONLY, os.O_RDWR | os.O_CREATE} {
				_, err := f.OpenFile(fifo, flag, 0o600)
				assert.ErrorIs(t, err, ErrFileType, "flag %#x", flag)
				assert.Contains(t, err.Error(), "FIFO")
			}
			_, err := ReadFile(f, fifo)
			assert.ErrorIs(t, err, ErrFileType)
			_, err = ReadFileInto(f, fifo, make([]byte, 0, 64), testLimit)
			assert.ErrorIs(t, err, ErrFileType)
			_, err = f.Lock(fifo, 0o600)
			assert.ErrorIs(t, err, ErrFileType)
			_, err = f.ReadDir(fifo)
			assert.ErrorIs(t, err, ErrFileType)
			assert.ErrorIs(t, f.SyncDir(fifo), ErrFileType)
			assert.ErrorIs(t, f.MkdirAll(fifo, 0o700), ErrFileType)
		})
	}
}

// TestOSRefusesDevice: a device node is refused like a FIFO (the test
// uses /dev/null, which exists on every unix; no node is made).
func TestOSRefusesDevice(t *testing.T) {
	_, err := ReadFile(Default, "/dev/null")
	assert.ErrorIs(t, err, ErrFileType)
	assert.Contains(t, err.Error(), "device")
	_, err = Default.OpenFile("/dev/null", os.O_WRONLY, 0)
	assert.ErrorIs(t, err, ErrFileType)
}

// TestReadFileSparse: a sparse file of many gigabytes (a few kilobytes on
// disk) is refused from its size, without reading it: what ReadFile
// allocates stays far below the file's size.
func TestReadFileSparse(t *testing.T) {
	name := filepath.Join(t.TempDir(), "session.json")
	f, err := os.Create(name)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(10<<30))
	require.NoError(t, f.Close())
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, buf := range [][]byte{nil, make([]byte, 0, 64)} {
		_, err = ReadFileInto(Default, name, buf, 1<<20)
		assert.ErrorIs(t, err, ErrTooLarge)
		var le *LimitError
		require.ErrorAs(t, err, &le)
		assert.Equal(t, int64(10<<30), le.Size)
	}
	runtime.ReadMemStats(&after)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "bytes allocated")
}

// confinedTree makes a root holding sessions/a (a directory), a file
// outside it and links below the root to the outside directory and file.
type confinedTree struct {
	root, outDir, outFile string
}

func newConfinedTree(t *testing.T) confinedTree {
	t.Helper()
	tr := confinedTree{root: t.TempDir(), outDir: t.TempDir()}
	tr.outFile = filepath.Join(tr.outDir, "f")
	require.NoError(t, os.WriteFile(tr.outFile, []byte("precious"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(tr.root, "sessions", "a"), 0o700))
	require.NoError(t, os.Symlink(tr.outDir, filepath.Join(tr.root, "sessions", "b")))
	require.NoError(t, os.Symlink(tr.outDir, filepath.Join(tr.root, "sessions", "a", "chunks")))
	return tr
}

// outsideUnchanged checks that the outside directory holds f alone,
// unchanged.
func (tr confinedTree) outsideUnchanged(t *testing.T) {
	t.Helper()
	names, err := os.ReadDir(tr.outDir)
	require.NoError(t, err)
	require.Len(t, names, 1, "nothing was made outside")
	b, err := os.ReadFile(tr.outFile)
	require.NoError(t, err)
	assert.Equal(t, "precious", string(b))
}

// TestConfineRefusesLinkedDirectories: below a Confine root, a directory
// that is a symbolic link (a session directory, or chunks/ in one) is
// followed by no call: every open, create, list, sync, make, rename and
// remove through it is refused, naming the link, and nothing outside the
// root is read, made, changed or removed. Stat describes the link as a
// link. Both ways of resolving are tried: openat2, and the element by
// element walk of a kernel without it.
func TestConfineRefusesLinkedDirectories(t *testing.T) {
	for _, walk := range []bool{false, true} {
		name := "openat2"
		if walk {
			name = "walk"
		}
		t.Run(name, func(t *testing.T) {
			if walk {
				withoutOpenat2(t)
			}
			tr := newConfinedTree(t)
			f := Confine(Default, tr.root)
			for _, link := range []string{filepath.Join(tr.root, "sessions", "b"), filepath.Join(tr.root, "sessions", "a", "chunks")} {
				p := func(elem ...string) string { return filepath.Join(append([]string{link}, elem...)...) }
				refused := func(what string, err error) {
					t.Helper()
					assert.ErrorIs(t, err, ErrFileType, what)
					var pe *fs.PathError
					if assert.ErrorAs(t, err, &pe, what) {
						assert.Equal(t, link, pe.Path, what)
					}
				}
				_, err := f.OpenFile(p("f"), os.O_RDWR, 0)
				refused("OpenFile", err)
				_, err = f.OpenFile(p("new"), os.O_RDWR|os.O_CREATE, 0o600)
				refused("OpenFile create", err)
				_, err = f.OpenFile(p("f"), os.O_WRONLY|os.O_TRUNC, 0o600)
				refused("OpenFile truncate", err)
				_, err = ReadFile(f, p("f"))
				refused("ReadFile", err)
				_, err = f.Lock(p("LOCK"), 0o600)
				refused("Lock", err)
				_, err = f.ReadDir(link)
				refused("ReadDir", err)
				refused("SyncDir", f.SyncDir(link))
				refused("MkdirAll", f.MkdirAll(p("sub", "sub"), 0o700))
				refused("Remove", f.Remove(p("f")))
				refused("Rename from", f.Rename(p("f"), filepath.Join(tr.root, "stolen")))
				require.NoError(t, os.WriteFile(filepath.Join(tr.root, "mine"), []byte("x"), 0o600))
				refused("Rename into", f.Rename(filepath.Join(tr.root, "mine"), p("planted")))
				_, err = f.Stat(p("f"))
				assert.NoError(t, err, "Stat only describes")
				info, err := f.Stat(link)
				require.NoError(t, err)
				assert.NotZero(t, info.Mode()&fs.ModeSymlink, "Stat describes the link as a link")
				tr.outsideUnchanged(t)
			}
			// The link itself can be removed.
			require.NoError(t, f.Remove(filepath.Join(tr.root, "sessions", "b")))
			tr.outsideUnchanged(t)
		})
	}
}

// TestConfineRootLink: the root may itself be a link, or lie below one:
// those are the caller's, and followed. Below it, nothing is.
func TestConfineRootLink(t *testing.T) {
	real := t.TempDir()
	root := filepath.Join(t.TempDir(), "root")
	require.NoError(t, os.Symlink(real, root))
	f := Confine(Default, root)
	require.NoError(t, f.MkdirAll(filepath.Join(root, "sessions", "x"), 0o700))
	writeFile(t, f, filepath.Join(root, "sessions", "x", "HEAD"), "head")
	assert.Equal(t, "head", readFile(t, f, filepath.Join(root, "sessions", "x", "HEAD")))
	require.NoError(t, f.SyncDir(root))
	require.NoError(t, f.SyncDir(filepath.Join(root, "sessions")))
	names, err := f.ReadDir(root)
	require.NoError(t, err)
	assert.Equal(t, []string{"sessions"}, names)
	info, err := f.Stat(root)
	require.NoError(t, err)
	assert.True(t, info.IsDir(), "the root is followed")
	b, err := os.ReadFile(filepath.Join(real, "sessions", "x", "HEAD"))
	require.NoError(t, err)
	assert.Equal(t, "head", string(b))

	// A root made by the first MkdirAll, under a linked parent.
	parent := filepath.Join(t.TempDir(), "parent")
	require.NoError(t, os.Symlink(t.TempDir(), parent))
	newRoot := filepath.Join(parent, "store")
	f = Confine(Default, newRoot)
	require.NoError(t, f.MkdirAll(filepath.Join(newRoot, "sessions"), 0o700))
	writeFile(t, f, filepath.Join(newRoot, "sessions", "f"), "x")
	assert.Equal(t, "x", readFile(t, f, filepath.Join(newRoot, "sessions", "f")))
}

// TestConfinedContract: a confined Default keeps the FS contract, with
// openat2 and without.
func TestConfinedContract(t *testing.T) {
	t.Run("openat2", func(t *testing.T) {
		root := t.TempDir()
		testFSContract(t, Confine(Default, root), root, lockSupported())
	})
	t.Run("walk", func(t *testing.T) {
		withoutOpenat2(t)
		root := t.TempDir()
		testFSContract(t, Confine(Default, root), root, lockSupported())
	})
}

// TestOpenedFilesBlock: a file handed out is in blocking mode, although
// it was opened with O_NONBLOCK.
func TestOpenedFilesBlock(t *testing.T) {
	dir := t.TempDir()
	f, err := Confine(Default, dir).OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE, 0o600)
	require.NoError(t, err)
	defer f.Close()
	fl, _, errno := syscall.Syscall(syscall.SYS_FCNTL, f.(osFile).File.Fd(), syscall.F_GETFL, 0)
	require.Zero(t, errno)
	assert.Zero(t, fl&syscall.O_NONBLOCK)
}
