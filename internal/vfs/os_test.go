package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lockSupported reports whether this platform builds os_unix.go (flock);
// elsewhere Lock must fail instead of pretending.
func lockSupported() bool {
	switch runtime.GOOS {
	case "aix", "android", "darwin", "dragonfly", "freebsd", "hurd", "illumos",
		"ios", "linux", "netbsd", "openbsd", "solaris":
		return true
	}
	return false
}

// writeFile creates name with data through fsys.
func writeFile(t *testing.T, fsys FS, name string, data string) {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte(data))
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

// readFile reads name through fsys, failing the test on error.
func readFile(t *testing.T, fsys FS, name string) string {
	t.Helper()
	b, err := ReadFile(fsys, name)
	require.NoError(t, err)
	return string(b)
}

// testFSContract checks the behaviour every FS must share, under root (an
// existing, empty directory). It runs against Default and MemFS, so MemFS
// stays a faithful stand-in for the operating system. canLock says whether
// fsys.Lock is expected to work.
func testFSContract(t *testing.T, fsys FS, root string, canLock bool) {
	p := func(elem ...string) string { return filepath.Join(append([]string{root}, elem...)...) }

	t.Run("write sync read", func(t *testing.T) {
		name := p("wsr")
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
		require.NoError(t, err)
		n, err := f.Write([]byte("hello "))
		require.NoError(t, err)
		assert.Equal(t, 6, n)
		n, err = f.Write([]byte("world"))
		require.NoError(t, err)
		assert.Equal(t, 5, n)
		require.NoError(t, f.Sync())
		assert.Equal(t, name, f.Name())

		buf := make([]byte, 5)
		n, err = f.ReadAt(buf, 6)
		require.NoError(t, err)
		assert.Equal(t, "world", string(buf[:n]))

		fi, err := f.Stat()
		require.NoError(t, err)
		assert.Equal(t, int64(11), fi.Size())
		assert.False(t, fi.IsDir())
		assert.Equal(t, "wsr", fi.Name())
		require.NoError(t, f.Close())

		assert.Equal(t, "hello world", readFile(t, fsys, name))
	})

	t.Run("Read moves the position, ReadAt does not", func(t *testing.T) {
		name := p("pos")
		writeFile(t, fsys, name, "abcdef")
		f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
		require.NoError(t, err)
		defer f.Close()
		buf := make([]byte, 2)
		_, err = io.ReadFull(f, buf)
		require.NoError(t, err)
		assert.Equal(t, "ab", string(buf))
		_, err = f.ReadAt(buf, 4)
		require.NoError(t, err)
		assert.Equal(t, "ef", string(buf))
		_, err = io.ReadFull(f, buf)
		require.NoError(t, err)
		assert.Equal(t, "cd", string(buf))
		rest, err := io.ReadAll(f)
		require.NoError(t, err)
		assert.Equal(t, "ef", string(rest))
	})

	t.Run("ReadAt past EOF", func(t *testing.T) {
		name := p("eof")
		writeFile(t, fsys, name, "0123456789")
		f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
		require.NoError(t, err)
		defer f.Close()
		tests := []struct {
			off     int64
			size    int
			want    string
			wantEOF bool
		}{
			{0, 10, "0123456789", false},
			{5, 5, "56789", false},
			{5, 10, "56789", true},
			{10, 1, "", true},
			{11, 1, "", true},
			{1 << 40, 4, "", true},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("off=%d,size=%d", tt.off, tt.size), func(t *testing.T) {
				buf := make([]byte, tt.size)
				n, err := f.ReadAt(buf, tt.off)
				assert.Equal(t, tt.want, string(buf[:n]))
				if tt.wantEOF {
					assert.ErrorIs(t, err, io.EOF)
				} else {
					assert.NoError(t, err)
				}
			})
		}
		_, err = f.ReadAt(make([]byte, 1), -1)
		assert.Error(t, err, "negative offset")
	})

	t.Run("O_EXCL on existing file", func(t *testing.T) {
		name := p("excl")
		writeFile(t, fsys, name, "keep")
		_, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_TRUNC, 0o644)
		assert.ErrorIs(t, err, fs.ErrExist)
		assert.Equal(t, "keep", readFile(t, fsys, name), "a failed exclusive create truncates nothing")
	})

	t.Run("open missing", func(t *testing.T) {
		_, err := fsys.OpenFile(p("missing"), os.O_RDONLY, 0)
		assert.ErrorIs(t, err, fs.ErrNotExist)
		_, err = fsys.OpenFile(p("nodir", "x"), os.O_RDWR|os.O_CREATE, 0o644)
		assert.ErrorIs(t, err, fs.ErrNotExist, "parent directory missing")
	})

	t.Run("O_TRUNC", func(t *testing.T) {
		name := p("trunc")
		writeFile(t, fsys, name, "long content")
		writeFile(t, fsys, name, "short")
		assert.Equal(t, "short", readFile(t, fsys, name))
	})

	t.Run("O_APPEND", func(t *testing.T) {
		name := p("append")
		writeFile(t, fsys, name, "abc")
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_APPEND, 0)
		require.NoError(t, err)
		defer f.Close()

		_, err = f.WriteAt([]byte("X"), 0)
		assert.Error(t, err, "WriteAt on an O_APPEND file")

		_, err = f.Write([]byte("def"))
		require.NoError(t, err)
		_, err = f.Write([]byte("g"))
		require.NoError(t, err)
		assert.Equal(t, "abcdefg", readFile(t, fsys, name))
	})

	t.Run("WriteAt overwrites and extends", func(t *testing.T) {
		name := p("writeat")
		writeFile(t, fsys, name, "abcdef")
		f, err := fsys.OpenFile(name, os.O_RDWR, 0)
		require.NoError(t, err)
		defer f.Close()
		_, err = f.WriteAt([]byte("XY"), 2)
		require.NoError(t, err)
		assert.Equal(t, "abXYef", readFile(t, fsys, name))
		_, err = f.WriteAt([]byte("Z"), 8)
		require.NoError(t, err)
		assert.Equal(t, "abXYef\x00\x00Z", readFile(t, fsys, name), "a hole reads as zeros")
		_, err = f.WriteAt([]byte("Q"), -1)
		assert.Error(t, err, "negative offset")
		assert.Equal(t, "abXYef\x00\x00Z", readFile(t, fsys, name))
	})

	t.Run("Truncate", func(t *testing.T) {
		tests := []struct {
			name string
			size int64
			want string
		}{
			{"shrink", 3, "abc"},
			{"same", 6, "abcdef"},
			{"to zero", 0, ""},
			{"grow", 9, "abcdef\x00\x00\x00"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				name := p("truncate-" + tt.name)
				writeFile(t, fsys, name, "abcdef")
				f, err := fsys.OpenFile(name, os.O_RDWR, 0)
				require.NoError(t, err)
				defer f.Close()
				require.NoError(t, f.Truncate(tt.size))
				fi, err := f.Stat()
				require.NoError(t, err)
				assert.Equal(t, tt.size, fi.Size())
				assert.Equal(t, tt.want, readFile(t, fsys, name))
			})
		}
		t.Run("shrink then grow reads zeros", func(t *testing.T) {
			name := p("truncate-regrow")
			writeFile(t, fsys, name, "abcdef")
			f, err := fsys.OpenFile(name, os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			require.NoError(t, f.Truncate(2))
			require.NoError(t, f.Truncate(5))
			assert.Equal(t, "ab\x00\x00\x00", readFile(t, fsys, name))
		})
		t.Run("negative", func(t *testing.T) {
			name := p("truncate-neg")
			writeFile(t, fsys, name, "abc")
			f, err := fsys.OpenFile(name, os.O_RDWR, 0)
			require.NoError(t, err)
			defer f.Close()
			assert.Error(t, f.Truncate(-1))
			assert.Equal(t, "abc", readFile(t, fsys, name))
		})
	})

	t.Run("access modes", func(t *testing.T) {
		name := p("modes")
		writeFile(t, fsys, name, "abc")

		ro, err := fsys.OpenFile(name, os.O_RDONLY, 0)
		require.NoError(t, err)
		defer ro.Close()
		_, err = ro.Write([]byte("x"))
		assert.Error(t, err, "Write on a read-only file")
		_, err = ro.WriteAt([]byte("x"), 0)
		assert.Error(t, err, "WriteAt on a read-only file")
		assert.Error(t, ro.Truncate(0), "Truncate on a read-only file")

		wo, err := fsys.OpenFile(name, os.O_WRONLY, 0)
		require.NoError(t, err)
		defer wo.Close()
		_, err = wo.Read(make([]byte, 1))
		assert.Error(t, err, "Read on a write-only file")
		_, err = wo.ReadAt(make([]byte, 1), 0)
		assert.Error(t, err, "ReadAt on a write-only file")

		assert.Equal(t, "abc", readFile(t, fsys, name))
	})

	t.Run("closed file", func(t *testing.T) {
		name := p("closed")
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		buf := make([]byte, 1)
		_, err = f.Read(buf)
		assert.ErrorIs(t, err, fs.ErrClosed, "Read")
		_, err = f.ReadAt(buf, 0)
		assert.ErrorIs(t, err, fs.ErrClosed, "ReadAt")
		_, err = f.Write(buf)
		assert.ErrorIs(t, err, fs.ErrClosed, "Write")
		_, err = f.WriteAt(buf, 0)
		assert.ErrorIs(t, err, fs.ErrClosed, "WriteAt")
		assert.ErrorIs(t, f.Truncate(0), fs.ErrClosed, "Truncate")
		_, err = f.Stat()
		assert.ErrorIs(t, err, fs.ErrClosed, "Stat")
		assert.Error(t, f.Sync(), "Sync")
		assert.ErrorIs(t, f.Close(), fs.ErrClosed, "second Close")
	})

	t.Run("MkdirAll", func(t *testing.T) {
		dir := p("a", "b", "c")
		require.NoError(t, fsys.MkdirAll(dir, 0o755))
		require.NoError(t, fsys.MkdirAll(dir, 0o755), "idempotent")
		fi, err := fsys.Stat(dir)
		require.NoError(t, err)
		assert.True(t, fi.IsDir())
		assert.Equal(t, "c", fi.Name())
		writeFile(t, fsys, p("a", "b", "c", "f"), "x")
		assert.Equal(t, "x", readFile(t, fsys, p("a", "b", "c", "f")))

		writeFile(t, fsys, p("afile"), "x")
		assert.Error(t, fsys.MkdirAll(p("afile", "sub"), 0o755), "a file in the way")
		_, err = fsys.Stat(p("afile", "sub"))
		assert.Error(t, err)
	})

	t.Run("ReadDir sorted", func(t *testing.T) {
		dir := p("list")
		require.NoError(t, fsys.MkdirAll(dir, 0o755))
		names := []string{"b", "a", "c10", "c2", "Z", "_x", ".hidden", "0"}
		shuffled := append([]string(nil), names...)
		rand.New(rand.NewPCG(1, 2)).Shuffle(len(shuffled), func(i, j int) {
			shuffled[i], shuffled[j] = shuffled[j], shuffled[i]
		})
		for _, n := range shuffled {
			writeFile(t, fsys, filepath.Join(dir, n), n)
		}
		require.NoError(t, fsys.MkdirAll(filepath.Join(dir, "subdir"), 0o755))
		got, err := fsys.ReadDir(dir)
		require.NoError(t, err)
		assert.Equal(t, []string{".hidden", "0", "Z", "_x", "a", "b", "c10", "c2", "subdir"}, got)

		empty := p("emptydir")
		require.NoError(t, fsys.MkdirAll(empty, 0o755))
		got, err = fsys.ReadDir(empty)
		require.NoError(t, err)
		assert.Empty(t, got)

		_, err = fsys.ReadDir(p("nolist"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
		_, err = fsys.ReadDir(filepath.Join(dir, "a"))
		assert.Error(t, err, "ReadDir of a file")
	})

	t.Run("Stat", func(t *testing.T) {
		writeFile(t, fsys, p("stat"), "12345")
		fi, err := fsys.Stat(p("stat"))
		require.NoError(t, err)
		assert.Equal(t, "stat", fi.Name())
		assert.Equal(t, int64(5), fi.Size())
		assert.False(t, fi.IsDir())
		assert.True(t, fi.Mode().IsRegular())

		fi, err = fsys.Stat(root)
		require.NoError(t, err)
		assert.True(t, fi.IsDir())

		_, err = fsys.Stat(p("nostat"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})

	t.Run("Rename", func(t *testing.T) {
		writeFile(t, fsys, p("ren-old"), "old")
		require.NoError(t, fsys.Rename(p("ren-old"), p("ren-new")))
		_, err := fsys.Stat(p("ren-old"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.Equal(t, "old", readFile(t, fsys, p("ren-new")))

		// Rename replaces an existing target.
		writeFile(t, fsys, p("ren-tmp"), "replacement")
		require.NoError(t, fsys.Rename(p("ren-tmp"), p("ren-new")))
		assert.Equal(t, "replacement", readFile(t, fsys, p("ren-new")))
		_, err = fsys.Stat(p("ren-tmp"))
		assert.ErrorIs(t, err, fs.ErrNotExist)

		// Across directories.
		require.NoError(t, fsys.MkdirAll(p("ren-dir"), 0o755))
		require.NoError(t, fsys.Rename(p("ren-new"), p("ren-dir", "moved")))
		assert.Equal(t, "replacement", readFile(t, fsys, p("ren-dir", "moved")))

		err = fsys.Rename(p("ren-missing"), p("ren-x"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
		err = fsys.Rename(p("ren-dir", "moved"), p("ren-nodir", "x"))
		assert.ErrorIs(t, err, fs.ErrNotExist, "target directory missing")
		assert.Equal(t, "replacement", readFile(t, fsys, p("ren-dir", "moved")), "a failed rename moves nothing")
	})

	t.Run("Remove", func(t *testing.T) {
		writeFile(t, fsys, p("rm"), "x")
		require.NoError(t, fsys.Remove(p("rm")))
		_, err := fsys.Stat(p("rm"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
		assert.ErrorIs(t, fsys.Remove(p("rm")), fs.ErrNotExist)

		require.NoError(t, fsys.MkdirAll(p("rmdir", "sub"), 0o755))
		assert.Error(t, fsys.Remove(p("rmdir")), "non-empty directory")
		_, err = fsys.Stat(p("rmdir", "sub"))
		assert.NoError(t, err)
		require.NoError(t, fsys.Remove(p("rmdir", "sub")))
		require.NoError(t, fsys.Remove(p("rmdir")), "empty directory")
		_, err = fsys.Stat(p("rmdir"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})

	t.Run("SyncDir", func(t *testing.T) {
		require.NoError(t, fsys.SyncDir(root))
		require.NoError(t, fsys.MkdirAll(p("sd"), 0o755))
		require.NoError(t, fsys.SyncDir(p("sd")))
		assert.ErrorIs(t, fsys.SyncDir(p("sd-missing")), fs.ErrNotExist)
	})

	t.Run("ReadFile", func(t *testing.T) {
		big := make([]byte, 100_000)
		for i := range big {
			big[i] = byte(i * 7)
		}
		writeFile(t, fsys, p("big"), string(big))
		got, err := ReadFile(fsys, p("big"))
		require.NoError(t, err)
		assert.Equal(t, big, got)
		_, err = ReadFile(fsys, p("nobig"))
		assert.ErrorIs(t, err, fs.ErrNotExist)
	})

	t.Run("Lock", func(t *testing.T) {
		name := p("LOCK")
		if !canLock {
			_, err := fsys.Lock(name, 0o644)
			assert.Error(t, err, "Lock must fail where it cannot lock")
			return
		}
		l1, err := fsys.Lock(name, 0o644)
		require.NoError(t, err)
		_, err = fsys.Stat(name)
		assert.NoError(t, err, "Lock creates the file")

		_, err = fsys.Lock(name, 0o644)
		assert.ErrorIs(t, err, ErrLocked, "second Lock of a held file")
		var pe *fs.PathError
		if assert.ErrorAs(t, err, &pe) {
			assert.Equal(t, name, pe.Path)
		}

		// Another file is independent.
		l3, err := fsys.Lock(p("OTHER.LOCK"), 0o644)
		require.NoError(t, err)
		require.NoError(t, l3.Close())

		require.NoError(t, l1.Close())
		l2, err := fsys.Lock(name, 0o644)
		require.NoError(t, err, "Lock after the holder closed")
		require.NoError(t, l2.Close())
	})
}

func TestOSContract(t *testing.T) {
	testFSContract(t, Default, t.TempDir(), lockSupported())
}

// flock locks belong to the open file description: a second open of the
// same file in the same process conflicts, and closing the first releases
// it. (fcntl locks would not conflict within a process and would be
// released by closing any descriptor of the file: the wrong tool.)
func TestOSLockSameProcess(t *testing.T) {
	name := filepath.Join(t.TempDir(), "LOCK")
	if !lockSupported() {
		_, err := Default.Lock(name, 0o644)
		require.Error(t, err)
		assert.NotErrorIs(t, err, ErrLocked)
		return
	}
	l1, err := Default.Lock(name, 0o600)
	require.NoError(t, err)
	fi, err := os.Stat(name)
	require.NoError(t, err)
	assert.True(t, fi.Mode().IsRegular())

	for i := 0; i < 3; i++ {
		_, err = Default.Lock(name, 0o600)
		require.ErrorIs(t, err, ErrLocked, "attempt %d", i)
		var pe *fs.PathError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "lock", pe.Op)
	}

	// Opening and closing another descriptor of the file (what an fcntl
	// lock would lose to) leaves the flock in place.
	f, err := os.Open(name)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	_, err = Default.Lock(name, 0o600)
	require.ErrorIs(t, err, ErrLocked, "closing another descriptor released the lock")

	require.NoError(t, l1.Close())
	l2, err := Default.Lock(name, 0o600)
	require.NoError(t, err)
	require.NoError(t, l2.Close())
}

func TestOSLockErrors(t *testing.T) {
	_, err := Default.Lock(filepath.Join(t.TempDir(), "missing", "LOCK"), 0o644)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	assert.NotErrorIs(t, err, ErrLocked)
}

func TestOSSyncFlushesData(t *testing.T) {
	// Sync cannot be observed without a power cut; check that it succeeds
	// on an open file and that it reports a closed one.
	name := filepath.Join(t.TempDir(), "f")
	f, err := Default.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	require.NoError(t, err)
	_, err = f.Write([]byte("data"))
	require.NoError(t, err)
	require.NoError(t, f.Sync())
	require.NoError(t, f.Close())
	err = f.Sync()
	require.Error(t, err)
	var pe *fs.PathError
	assert.True(t, errors.As(err, &pe), "Sync error %v carries the path", err)

	b, err := os.ReadFile(name)
	require.NoError(t, err)
	assert.Equal(t, "data", string(b))
}

// TestReadFileIntoOS: on the operating system's filesystem ReadFileInto
// reads each file whole, whatever its size against the buffer it is given
// (none, smaller, the same, larger), and reports a missing file or a
// directory as a *fs.PathError.
func TestReadFileIntoOS(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 511, 512, 513, 4095, 4096, 4097, 1<<20 + 3} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(i*7 + size)
		}
		name := filepath.Join(dir, fmt.Sprintf("f%d", size))
		require.NoError(t, os.WriteFile(name, want, 0o600))
		for _, bufCap := range []int{0, 1, 512, 4096, size, size + 1} {
			got, err := ReadFileInto(Default, name, make([]byte, 0, bufCap), testLimit)
			require.NoError(t, err, "size %d, buffer %d", size, bufCap)
			assert.True(t, bytes.Equal(want, got), "size %d, buffer %d: read %d bytes", size, bufCap, len(got))
		}
	}
	var pe *fs.PathError
	_, err := ReadFileInto(Default, filepath.Join(dir, "missing"), nil, testLimit)
	assert.ErrorIs(t, err, fs.ErrNotExist)
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, filepath.Join(dir, "missing"), pe.Path)
	_, err = ReadFileInto(Default, dir, make([]byte, 0, 64), testLimit)
	assert.ErrorAs(t, err, &pe, "a directory")
}
